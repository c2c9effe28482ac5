/* Qwen2 (q/k/v biased), Qwen3 (per-head q/k RMSNorm before RoPE, explicit
 * head_dim), Qwen3-MoE (routed SwiGLU experts on the layers that
 * decoder_sparse_step and mlp_only_layers select) and Perplexity's
 * pplx-embed (model_type bidirectional_pplx_qwen3, remote code: Qwen3Model
 * with every layer non-causal and only full-attention layers).
 *
 * Qwen3-VL (qwen3_vl, and its text model qwen3_vl_text): a Qwen3 decoder
 * read from text_config with tensors under language_model., its interleaved
 * multimodal RoPE as per-frequency axes (time, height, width; text gives
 * every axis the token's position, the plain rotary table), and the vision
 * tower when the checkpoint has one (models/vision_qwen3vl.c). Images run
 * through the model-level iv_qwen3vl_forward only: the engine's inputs are
 * text.
 *
 * Sliding windows: layer_types when config.json has it, else transformers'
 * rule (use_sliding_window and layer >= max_window_layers). gte-Qwen2 style
 * bidirectional checkpoints set "is_causal": false (handled in
 * decoder_common). */
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "models/decoder_common.h"
#include "models/encoder_common.h"
#include "models/family.h"
#include "models/loader.h"
#include "models/vision_qwen3vl.h"

static const char *const k_qwen2_archs[] = {
    "Qwen2Model", "Qwen2ForCausalLM", "Qwen2ForSequenceClassification", "Qwen2ForTokenClassification", NULL,
};
static const char *const k_qwen3_archs[] = {
    "Qwen3Model", "Qwen3ForCausalLM", "Qwen3ForSequenceClassification", "Qwen3ForTokenClassification", NULL,
};
static const char *const k_qwen3_moe_archs[] = {
    "Qwen3MoeModel", "Qwen3MoeForCausalLM", "Qwen3MoeForSequenceClassification", "Qwen3MoeForTokenClassification",
    NULL,
};
static const char *const k_pplx_archs[] = {"PPLXQwen3Model", NULL};
static const char *const k_qwen3_vl_archs[] = {
    "Qwen3VLModel", "Qwen3VLForConditionalGeneration", "Qwen3VLTextModel", NULL,
};
static const char *const k_colqwen3_archs[] = {"ColQwen3", "ColQwen3ForRetrieval", NULL};
static const char *const k_nemotron_archs[] = {
    "Qwen3VLNemotronEmbedModel", "Qwen3VLNemotronEmbedForConditionalGeneration", NULL,
};
static const char *const k_qwen3_vl_prefixes[] = {"vlm.model.language_model.", "model.language_model.",
                                                  "language_model.", "model.", "", NULL};

/* Qwen3MoeDecoderLayer: routed iff not in mlp_only_layers, num_experts > 0 and
 * (layer + 1) % decoder_sparse_step == 0. transformers 5 saves num_experts as
 * num_local_experts. */
static int qwen3_moe_desc(const iv_model *m, iv_decoder_desc *d, unsigned char *moe_layers, iv_err *err)
{
    const cJSON *j = m->cfg.json;
    const int n_experts = (int)iv_json_int(j, "num_experts", iv_json_int(j, "num_local_experts", 0));
    const int top_k = (int)iv_json_int(j, "num_experts_per_tok", 0);
    const int step = (int)iv_json_int(j, "decoder_sparse_step", 1);
    const int inter = (int)iv_json_int(j, "moe_intermediate_size", 0);
    if (n_experts > 0 && (top_k <= 0 || top_k > n_experts || inter <= 0 || step <= 0))
        return iv_errf(err, IV_E_FORMAT,
                       "config.json: qwen3_moe needs 0 < num_experts_per_tok <= num_experts, moe_intermediate_size "
                       "and decoder_sparse_step > 0");
    for (int l = 0; l < m->cfg.num_layers; l++) moe_layers[l] = n_experts > 0 && (l + 1) % step == 0;
    const cJSON *only = iv_json_get(j, "mlp_only_layers"), *it;
    cJSON_ArrayForEach(it, only) {
        if (!iv_json_is_integer(it)) return iv_errf(err, IV_E_FORMAT, "config.json: mlp_only_layers must list layers");
        /* compared as doubles: an index past int is no layer (and would not convert) */
        if (it->valuedouble >= 0 && it->valuedouble < m->cfg.num_layers) moe_layers[(int)it->valuedouble] = 0;
    }
    d->moe_layers = moe_layers;
    d->moe = (iv_moe){.n_experts = n_experts, .top_k = top_k, .intermediate = inter,
                      .norm_topk_prob = iv_json_bool(j, "norm_topk_prob", 0)};
    return 0;
}

/* Sliding layers from layer_types, else use_sliding_window from max_window_layers on. */
static int qwen_windows(iv_model *m, int pplx, iv_err *err)
{
    const cJSON *j = m->cfg.json;
    unsigned char *sliding = calloc((size_t)m->n_layers, 1);
    if (!sliding) return iv_errf(err, IV_E_NOMEM, "out of memory");
    int found, any = 0, rc = iv_decoder_layer_types(m, sliding, &found, err);
    const int64_t window = iv_json_int(j, "sliding_window", 0);
    if (!rc && !found && iv_json_bool(j, "use_sliding_window", 0) && window > 0) {
        const int from = (int)iv_json_int(j, "max_window_layers", 28); /* transformers' default */
        for (int l = from < 0 ? 0 : from; l < m->n_layers; l++) sliding[l] = 1;
    }
    for (int l = 0; l < m->n_layers; l++) any |= sliding[l];
    if (!rc && any && pplx)
        rc = iv_errf(err, IV_E_UNSUPPORTED,
                     "bidirectional_pplx_qwen3 with sliding_attention layers is not supported (its remote code only "
                     "builds full-attention masks)");
    if (!rc && any && window <= 0) rc = iv_errf(err, IV_E_FORMAT, "config.json: sliding layers need sliding_window");
    if (!rc && any)
        iv_decoder_windows(m, sliding, (int)window, m->block.causal ? IV_WINDOW_CAUSAL : IV_WINDOW_SYMMETRIC);
    free(sliding);
    return rc;
}

/* Qwen3-VL's interleaved mRoPE (sections default [24, 20, 20]), the
 * image token and the vision tower with its DeepStack mergers
 * (models/vision_qwen3vl.h). */
static int qwen3_vl_extras(iv_model *m, iv_err *err)
{
    static const int sections[3] = {24, 20, 20};
    return iv_qwen3vl_mm_load(m, sections, 151655, 1, err);
}

/* TomoroAI's ColQwen3 (remote code ColQwen3: a Qwen3-VL `vlm` whose final
 * hidden states go through embedding_proj_layer, Linear(hidden, embed_dim)
 * with bias, then L2 per token; the ColPali naming custom_text_proj is
 * the same layer). The multi-vector head (heads/colbert.c) applies it. */
static int colqwen3_head(iv_model *m, iv_err *err)
{
    const int H = m->cfg.hidden_size;
    const char *name = iv_weights_has_prefix(m->weights, "custom_text_proj.") ? "custom_text_proj"
                                                                               : "embedding_proj_layer";
    if (iv_load_linear_head(m, &m->token_proj, name, H, err)) return -1;
    if (!m->token_proj.n_steps)
        return iv_errf(err, IV_E_NOTFOUND, "colqwen3 checkpoint without its projection embedding_proj_layer.weight");
    const int64_t dim = iv_json_int(m->cfg.root, "embed_dim", m->token_proj.out_dim);
    if (dim != m->token_proj.out_dim)
        return iv_errf(err, IV_E_FORMAT, "config.json: embed_dim %lld disagrees with embedding_proj_layer's %d rows",
                       (long long)dim, m->token_proj.out_dim);
    m->missing_head[0] = 0;
    return 0;
}

/* NVIDIA Nemotron ColEmbed V2 (qwen3_vl_nemotron_embed, remote code
 * Qwen3VLNemotronEmbed*): the Qwen3-VL text model with is_causal = False on
 * every layer, and token states taken before the final norm (the model
 * coverage spec; docs/vision.md says what the remote code shows). Only the
 * ColBERT pooling exists. */
static int nemotron_states(iv_model *m, iv_err *err)
{
    const char *pooling = iv_json_str(m->cfg.root, "pooling", "colbert");
    if (strcmp(pooling, "colbert"))
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "config.json: qwen3_vl_nemotron_embed with pooling \"%s\": only \"colbert\" (token vectors) is "
                       "implemented",
                       pooling);
    m->block.causal = 0;
    m->final_norm.present = 0;
    return 0;
}

static int qwen_load(iv_model *m, iv_err *err)
{
    const iv_hf_config *c = &m->cfg;
    const char *t = c->model_type;
    const int qwen2 = !strcmp(t, "qwen2"), moe = !strcmp(t, "qwen3_moe"), pplx = !strcmp(t, "bidirectional_pplx_qwen3");
    const int colqwen3 = !strcmp(t, "colqwen3"), nemotron = !strcmp(t, "qwen3_vl_nemotron_embed");
    const int vl = !strcmp(t, "qwen3_vl") || !strcmp(t, "qwen3_vl_text") || colqwen3 || nemotron;
    if (c->has_auto_map && !pplx && !colqwen3 && !nemotron)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "config.json references custom code (auto_map) for model_type \"%s\"; only plain transformers "
                       "checkpoints are supported",
                       t);
    iv_decoder_desc d = {
        .archs = qwen2  ? k_qwen2_archs
                 : moe  ? k_qwen3_moe_archs
                 : pplx ? k_pplx_archs
                 : colqwen3 ? k_colqwen3_archs
                 : nemotron ? k_nemotron_archs
                 : vl   ? k_qwen3_vl_archs
                        : k_qwen3_archs,
        .prefixes = vl ? k_qwen3_vl_prefixes : NULL,
        .norm_kind = IV_NORM_RMS,
        .qkv_bias = qwen2,
        .qk_norm = !qwen2,
        .default_head_dim = !qwen2 && !moe ? 128 : 0, /* Qwen3Config's default; Qwen2 / Qwen3-MoE: hidden / heads */
    };
    unsigned char *moe_layers = NULL;
    int rc = 0;
    if (moe) {
        moe_layers = calloc((size_t)c->num_layers, 1);
        rc = moe_layers ? qwen3_moe_desc(m, &d, moe_layers, err) : iv_errf(err, IV_E_NOMEM, "out of memory");
    }
    if (!rc) rc = iv_decoder_load(m, &d, err);
    free(moe_layers);
    if (rc) return -1;
    if (pplx) m->block.causal = 0; /* PPLXQwen3Model sets is_causal = False on every layer */
    if (qwen_windows(m, pplx, err)) return -1;
    iv_rope_params rope;
    if (iv_rope_params_from_config(c->json, NULL, c->head_dim, 10000.0, c->max_position_embeddings, &rope, err))
        return -1;
    if (iv_decoder_rope(m, &rope, NULL, err)) return -1;
    if (vl && qwen3_vl_extras(m, err)) return -1;
    return colqwen3 ? colqwen3_head(m, err) : nemotron ? nemotron_states(m, err) : 0;
}

static const char *const k_types[] = {"qwen2",         "qwen3",    "qwen3_moe", "bidirectional_pplx_qwen3", "qwen3_vl",
                                      "qwen3_vl_text", "colqwen3", "qwen3_vl_nemotron_embed", NULL};
const iv_family iv_family_qwen = {"qwen", k_types, qwen_load};
