/* Rotary position embedding frequencies from config.json, one function per
 * scaling variant of transformers' ROPE_INIT_FUNCTIONS. Families compute
 * inv_freq once at load and hang it on each iv_layer; the rope op applies it. */
#ifndef IV_MODELS_ROPE_H
#define IV_MODELS_ROPE_H

#include <cJSON.h>
#include "base/err.h"

typedef struct iv_rope_params {
    char type[32];           /* "default", "linear", "llama3", "yarn", ... */
    double theta;            /* rope_theta / base */
    int rot_dim;             /* rotated dims per head (partial_rotary_factor * head_dim) */
    double factor;
    /* llama3 */
    double low_freq_factor, high_freq_factor;
    int original_max_position_embeddings;
    /* yarn */
    double beta_fast, beta_slow, mscale, mscale_all_dim, attention_factor;
    int truncate;            /* yarn: truncate the correction range (default 1) */
    /* ntk (GTE "new" remote code): optional mixed_b exponent */
    int has_mixed_b;
    double mixed_b;
} iv_rope_params;

/* Reads rope parameters from a config object: v5 `rope_parameters` (pass the
 * sub-object for per-layer-type configs) or v4 `rope_theta` + `rope_scaling`.
 * rot_dim is the rotated width; default_theta applies when none is given.
 * Unknown rope types are IV_E_UNSUPPORTED naming the type. */
int iv_rope_params_from_config(const cJSON *cfg, const cJSON *rope_obj, int rot_dim, double default_theta,
                               int max_position_embeddings, iv_rope_params *out, iv_err *err);

/* inv_freq[rot_dim/2] in float32 exactly as transformers computes it; *attn_factor
 * scales cos and sin (1 for most types).
 *
 * "ntk" is the fixed NTK scaling of Alibaba-NLP/new-impl (GTE "new"):
 * NTKScalingRotaryEmbedding builds its cos/sin cache for max_position *
 * factor positions at construction, so with factor > 1 the scaled
 * frequencies apply to every sequence, short ones included:
 *   inv_freq_i = 1 / (theta * factor)^(2i/d) / factor^(2/d)       (no mixed_b)
 *   inv_freq_i = 1 / theta^(2i/d) / exp(a * (i + 1)^b),
 *                a = ln(factor) / (d/2)^b                          (mixed_b = b)
 * With factor <= 1 the cache never exceeds max_position and the plain
 * frequencies apply. */
int iv_rope_inv_freq(const iv_rope_params *p, float *inv_freq, float *attn_factor, iv_err *err);

/* Dynamic NTK scaling decided by one sequence's length (contrastors'
 * NomicBertDynamicNTKRotaryEmbedding, transformers' "dynamic" for a batch of
 * one): a sequence of seq_len > max_pos tokens uses the base
 *   theta * ((factor * seq_len / max_pos) - (factor - 1))^(d / (d - 2))
 * (double, as Python computes it), a shorter one theta itself. */
void iv_rope_dynamic_inv_freq(double theta, int rot_dim, double factor, int max_pos, int seq_len,
                              float *inv_freq);

#endif
