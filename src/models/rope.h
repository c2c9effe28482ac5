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
} iv_rope_params;

/* Reads rope parameters from a config object: v5 `rope_parameters` (pass the
 * sub-object for per-layer-type configs) or v4 `rope_theta` + `rope_scaling`.
 * rot_dim is the rotated width; default_theta applies when none is given.
 * Unknown rope types are IV_E_UNSUPPORTED naming the type. */
int iv_rope_params_from_config(const cJSON *cfg, const cJSON *rope_obj, int rot_dim, double default_theta,
                               int max_position_embeddings, iv_rope_params *out, iv_err *err);

/* inv_freq[rot_dim/2] in float32 exactly as transformers computes it; *attn_factor
 * scales cos and sin (1 for most types). */
int iv_rope_inv_freq(const iv_rope_params *p, float *inv_freq, float *attn_factor, iv_err *err);

#endif
