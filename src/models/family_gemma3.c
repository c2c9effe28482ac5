/* Gemma3 text (Gemma3TextModel, Gemma3ForCausalLM as a backbone,
 * Gemma3TextForSequenceClassification) and EmbeddingGemma. Quirks:
 *   - RMSNorm x * (1 + w), sandwich norms around attention and MLP, q/k norms;
 *   - embeddings multiplied by sqrt(hidden_size) (in float32);
 *   - attention scale query_pre_attn_scalar^-0.5; attn_logit_softcapping is
 *     ignored, as transformers' Gemma3Attention never passes it on;
 *   - GeGLU with hidden_activation (gelu_pytorch_tanh);
 *   - layer_types (default: every sliding_window_pattern-th layer global, the
 *     rest sliding) with rope_local_base_freq on sliding layers;
 *   - use_bidirectional_attention (EmbeddingGemma): no causal mask, and sliding
 *     layers see |i - j| <= sliding_window / 2 (transformers keeps
 *     sliding_window // 2 + 1 as an exclusive bound).
 * The sentence-transformers pipeline (mean -> Dense -> Dense -> Normalize)
 * is read from modules.json by the engine. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "models/decoder_common.h"
#include "models/family.h"

static const char *const k_archs[] = {
    "Gemma3TextModel", "Gemma3ForCausalLM", "Gemma3TextForSequenceClassification", NULL,
};

static int gemma3_layer_types(iv_model *m, unsigned char *sliding, iv_err *err)
{
    int found;
    if (iv_decoder_layer_types(m, sliding, &found, err)) return -1;
    if (found) return 0;
    const int pattern = (int)iv_json_int(m->cfg.json, "sliding_window_pattern", 6);
    if (pattern <= 0) return iv_errf(err, IV_E_FORMAT, "config.json: sliding_window_pattern must be positive");
    for (int l = 0; l < m->n_layers; l++) sliding[l] = (l + 1) % pattern != 0;
    return 0;
}

/* v5: rope_parameters {full_attention: {...}, sliding_attention: {...}}; v4:
 * rope_theta (+ rope_scaling) for global layers, rope_local_base_freq for
 * sliding ones (never scaled). */
static int gemma3_rope(iv_model *m, const unsigned char *sliding, iv_err *err)
{
    const iv_hf_config *c = &m->cfg;
    const cJSON *params = iv_json_get(c->json, "rope_parameters");
    const cJSON *full = iv_json_get(params, "full_attention");
    const cJSON *local = iv_json_get(params, "sliding_attention");
    const int nested = cJSON_IsObject(full) || cJSON_IsObject(local);
    unsigned char *global = malloc((size_t)m->n_layers);
    if (!global) return iv_errf(err, IV_E_NOMEM, "out of memory");
    for (int l = 0; l < m->n_layers; l++) global[l] = !sliding[l];
    iv_rope_params pg, pl;
    int rc;
    if (nested) {
        rc = iv_rope_params_from_config(c->json, cJSON_IsObject(full) ? full : NULL, c->head_dim, 1e6,
                                        c->max_position_embeddings, &pg, err);
        if (!rc)
            rc = iv_rope_params_from_config(c->json, cJSON_IsObject(local) ? local : NULL, c->head_dim, 1e4,
                                            c->max_position_embeddings, &pl, err);
    } else {
        rc = iv_rope_params_from_config(c->json, NULL, c->head_dim, 1e6, c->max_position_embeddings, &pg, err);
        if (!rc) {
            cJSON *obj = cJSON_CreateObject();
            cJSON_AddNumberToObject(obj, "rope_theta", iv_json_num(c->json, "rope_local_base_freq", 1e4));
            rc = iv_rope_params_from_config(c->json, obj, c->head_dim, 1e4, c->max_position_embeddings, &pl, err);
            cJSON_Delete(obj);
        }
    }
    if (!rc) rc = iv_decoder_rope(m, &pg, global, err);
    if (!rc) rc = iv_decoder_rope(m, &pl, sliding, err);
    free(global);
    return rc;
}

static int gemma3_load(iv_model *m, iv_err *err)
{
    const iv_hf_config *c = &m->cfg;
    if (c->has_auto_map)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "config.json references custom code (auto_map) for model_type \"gemma3_text\"; only plain "
                       "transformers checkpoints are supported");
    int bidirectional;
    if (iv_json_bool_chk(c->json, "use_bidirectional_attention", 0, &bidirectional, "config.json", err)) return -1;
    if (!iv_json_bool(c->json, "is_causal", 1))
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "gemma3_text with \"is_causal\": false is not supported (use use_bidirectional_attention)");
    const iv_decoder_desc d = {
        .archs = k_archs, .norm_kind = IV_NORM_RMS_PLUS1, .sandwich = 1, .qk_norm = 1,
        .act_key = "hidden_activation", .default_head_dim = 256,
    };
    if (iv_decoder_load(m, &d, err)) return -1;
    m->block.causal = !bidirectional;
    m->embed.scale = (float)sqrt((double)c->hidden_size);
    const double qpas = iv_json_num(c->json, "query_pre_attn_scalar", 256);
    if (!(qpas > 0)) return iv_errf(err, IV_E_FORMAT, "config.json: query_pre_attn_scalar must be positive");
    m->block.attn_scale = (float)pow(qpas, -0.5);

    unsigned char *sliding = calloc((size_t)m->n_layers, 1);
    if (!sliding) return iv_errf(err, IV_E_NOMEM, "out of memory");
    int rc = gemma3_layer_types(m, sliding, err);
    const int64_t window = iv_json_int(c->json, "sliding_window", 4096);
    if (!rc && window <= 0) rc = iv_errf(err, IV_E_FORMAT, "config.json: sliding_window must be positive");
    if (!rc) iv_decoder_windows(m, sliding, (int)window, bidirectional ? IV_WINDOW_HALF : IV_WINDOW_CAUSAL);
    if (!rc) rc = gemma3_rope(m, sliding, err);
    free(sliding);
    return rc;
}

static const char *const k_types[] = {"gemma3_text", NULL};
const iv_family iv_family_gemma3 = {"gemma3", k_types, gemma3_load};
