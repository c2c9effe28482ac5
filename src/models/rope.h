/* Rotary position embedding frequencies from config.json, one function per
 * scaling variant of transformers' ROPE_INIT_FUNCTIONS (default, linear,
 * dynamic, llama3, yarn, longrope, proportional). Families compute inv_freq once at load
 * and hang it on each iv_layer; the rope op applies it.
 *
 * Two variants depend on the sequence length, which transformers reads from
 * the positions of the whole (padded) batch at every forward; we apply them
 * per sequence, which equals transformers running that sequence alone:
 *   dynamic   L > max_position_embeddings: NTK base grown for L
 *   longrope  L > original_max_position_embeddings: long_factor instead of short_factor
 *
 * "ntk" is the fixed NTK scaling of Alibaba-NLP/new-impl (GTE "new", not a
 * transformers type): NTKScalingRotaryEmbedding builds its cos/sin cache for
 * max_position * factor positions at construction, so with factor > 1 the
 * scaled frequencies apply to every sequence, short ones included:
 *   inv_freq_i = 1 / (theta * factor)^(2i/d) / factor^(2/d)        (no mixed_b)
 *   inv_freq_i = 1 / theta^(2i/d) / exp(a * (i + 1)^b),
 *                a = ln(factor) / (d/2)^b                           (mixed_b = b)
 * With factor <= 1 the plain frequencies apply. */
#ifndef IV_MODELS_ROPE_H
#define IV_MODELS_ROPE_H

#include <cJSON.h>
#include "base/err.h"

#define IV_ROPE_MAX_HALF 256 /* rot_dim / 2 limit (head_dim 512) */

typedef struct iv_rope_params {
    char type[32];           /* "default", "linear", "dynamic", "llama3", "yarn", "longrope" */
    double theta;            /* rope_theta / base */
    int rot_dim;             /* rotated dims per head (partial_rotary_factor * head_dim) */
    double factor;
    int has_factor;          /* factor given (yarn/longrope derive it from the lengths otherwise) */
    int max_position_embeddings;
    int original_max_position_embeddings;
    /* llama3 */
    double low_freq_factor, high_freq_factor;
    /* yarn */
    double beta_fast, beta_slow, mscale, mscale_all_dim, attention_factor;
    int truncate;            /* yarn: truncate the correction range (default 1) */
    /* longrope: one factor per frequency */
    float short_factor[IV_ROPE_MAX_HALF], long_factor[IV_ROPE_MAX_HALF];
    /* ntk (GTE "new"): optional mixed_b exponent */
    int has_mixed_b;
    double mixed_b;
    /* proportional (Gemma4): rot_dim is the whole head, the first
     * int(partial_rotary_factor * rot_dim / 2) frequencies turn, the rest are 0 */
    double partial_rotary_factor;
} iv_rope_params;

/* Reads rope parameters from a config object: v5 `rope_parameters` (pass the
 * sub-object as rope_obj for per-layer-type configs) or v4 `rope_theta` +
 * `rope_scaling`. rot_dim is the rotated width; default_theta applies when
 * none is given. Unknown rope types are IV_E_UNSUPPORTED naming the type. */
int iv_rope_params_from_config(const cJSON *cfg, const cJSON *rope_obj, int rot_dim, double default_theta,
                               int max_position_embeddings, iv_rope_params *out, iv_err *err);

/* inv_freq[rot_dim/2] in float32 exactly as transformers computes it at
 * model init; *attn_factor scales cos and sin (1 for most types). */
int iv_rope_inv_freq(const iv_rope_params *p, float *inv_freq, float *attn_factor, iv_err *err);

/* 1 when a sequence of seq_len tokens needs frequencies other than the init
 * ones (dynamic and longrope past their original length). */
int iv_rope_length_dependent(const iv_rope_params *p, int seq_len);
/* The frequencies transformers uses for a sequence of seq_len tokens run alone. */
int iv_rope_inv_freq_for_length(const iv_rope_params *p, int seq_len, float *inv_freq, float *attn_factor,
                                iv_err *err);

#endif
