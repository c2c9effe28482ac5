#include "models/rope.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include "base/json.h"

int iv_rope_params_from_config(const cJSON *cfg, const cJSON *rope_obj, int rot_dim, double default_theta,
                               int max_position_embeddings, iv_rope_params *out, iv_err *err)
{
    memset(out, 0, sizeof *out);
    snprintf(out->type, sizeof out->type, "default");
    out->rot_dim = rot_dim;
    out->factor = 1.0;
    out->original_max_position_embeddings = max_position_embeddings;
    out->truncate = 1;
    /* v5: rope_parameters {rope_type, rope_theta, factor, ...}; v4: rope_theta + rope_scaling {type|rope_type, ...}. */
    const cJSON *params = rope_obj;
    if (!params) params = cJSON_GetObjectItemCaseSensitive(cfg, "rope_parameters");
    if (params && !cJSON_IsObject(params)) params = NULL;
    const cJSON *scaling = cJSON_GetObjectItemCaseSensitive(cfg, "rope_scaling");
    if (scaling && !cJSON_IsObject(scaling)) scaling = NULL;
    const cJSON *src = params ? params : scaling;
    out->theta = iv_json_num(params, "rope_theta", iv_json_num(cfg, "rope_theta", default_theta));
    if (src) {
        const char *t = iv_json_str(src, "rope_type", iv_json_str(src, "type", "default"));
        snprintf(out->type, sizeof out->type, "%s", t);
        out->factor = iv_json_num(src, "factor", 1.0);
        out->low_freq_factor = iv_json_num(src, "low_freq_factor", 1.0);
        out->high_freq_factor = iv_json_num(src, "high_freq_factor", 4.0);
        out->original_max_position_embeddings =
            (int)iv_json_int(src, "original_max_position_embeddings", max_position_embeddings);
        out->beta_fast = iv_json_num(src, "beta_fast", 32.0);
        out->beta_slow = iv_json_num(src, "beta_slow", 1.0);
        out->mscale = iv_json_num(src, "mscale", 0.0);
        out->mscale_all_dim = iv_json_num(src, "mscale_all_dim", 0.0);
        out->attention_factor = iv_json_num(src, "attention_factor", 0.0);
        out->truncate = iv_json_bool(src, "truncate", 1);
    }
    if (out->theta <= 0 || rot_dim <= 0 || rot_dim % 2)
        return iv_errf(err, IV_E_FORMAT, "bad rotary configuration (theta %g, rotary dims %d)", out->theta, rot_dim);
    return 0;
}

/* 1 / theta^(2i/d), computed as torch does: float32 exponent, float32 power. */
static void default_inv_freq(double theta, int d, float *inv)
{
    for (int i = 0; i < d / 2; i++) {
        float e = (float)(2 * i) / (float)d;
        inv[i] = 1.0f / powf((float)theta, e);
    }
}

int iv_rope_inv_freq(const iv_rope_params *p, float *inv, float *attn_factor, iv_err *err)
{
    *attn_factor = 1.0f;
    const int d = p->rot_dim;
    if (!strcmp(p->type, "default")) {
        default_inv_freq(p->theta, d, inv);
        return 0;
    }
    if (!strcmp(p->type, "linear")) {
        default_inv_freq(p->theta, d, inv);
        for (int i = 0; i < d / 2; i++) inv[i] /= (float)p->factor;
        return 0;
    }
    return iv_errf(err, IV_E_UNSUPPORTED, "rope type \"%s\" is not supported", p->type);
}
