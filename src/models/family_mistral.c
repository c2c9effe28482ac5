/* Mistral3 (mistral3: Mistral3Model, ...ForConditionalGeneration) is the
 * Mistral or Ministral3 model of text_config (text_config.model_type decides
 * which), tensors under language_model.model. (or model.language_model.),
 * plus, when the checkpoint has one, the Pixtral vision tower and the
 * multimodal projector (models/vision_pixtral.c): images then run through
 * iv_mistral3_forward, their features replacing the [IMG] token embeddings
 * (config.json image_token_index). A text-only export runs text only.
 *
 * NVIDIA's reranker export (Nemotron Rerank; Mistral3ForSequenceClassification,
 * remote code that NeMo Automodel's exporter copies beside the weights as
 * model.py, auto_map model.Mistral3ForSequenceClassification) is that same
 * backbone with text_config.is_causal (false: bidirectional), the masked mean
 * of the final states, and a bias-free `score` (hub name
 * language_model.score.weight, legacy score.weight) in FP32 divided by
 * config.score_temperature. Its code refuses any pooling but "avg" and reads
 * score_temperature and text_config.is_causal without defaults, so a config
 * lacking one is rejected here too rather than guessed.
 *
 * Mistral: Llama math plus an optional sliding window on every layer
 * (transformers' mask: key j visible to query i iff i - window < j <= i).
 * Ministral3: explicit head_dim, YaRN rope by default, and Llama-4 query
 * scaling after RoPE, q *= 1 + beta * ln(1 + floor(pos / original_max)),
 * with beta = rope_parameters.llama_4_scaling_beta. */
#include <math.h>
#include <string.h>

#include "base/json.h"
#include "models/decoder_common.h"
#include "models/encoder_common.h"
#include "models/family.h"
#include "models/vision_pixtral.h"
#include "tensor/safetensors.h"

static const char *const k_mistral_archs[] = {
    "MistralModel", "MistralForCausalLM", "MistralForSequenceClassification", "MistralForTokenClassification", NULL,
};
static const char *const k_ministral3_archs[] = {
    "Ministral3Model", "Ministral3ForCausalLM", "Ministral3ForSequenceClassification",
    "Ministral3ForTokenClassification", NULL,
};

static const char *const k_mistral3_archs[] = {"Mistral3Model", "Mistral3ForConditionalGeneration", NULL};
static const char *const k_rerank_archs[] = {"Mistral3ForSequenceClassification", NULL};
/* The one remote class whose semantics this file implements. */
static const char k_rerank_class[] = "model.Mistral3ForSequenceClassification";
static const char *const k_mistral3_prefixes[] = {"language_model.model.", "model.language_model.", "language_model.",
                                                  NULL};

/* Ministral3Config's rope_parameters when config.json has none. */
static const char k_ministral3_default_rope[] =
    "{\"rope_type\": \"yarn\", \"rope_theta\": 1000000.0, \"factor\": 16.0, "
    "\"original_max_position_embeddings\": 16384, \"beta_fast\": 32.0, \"beta_slow\": 1.0, "
    "\"mscale_all_dim\": 1.0, \"mscale\": 1.0, \"llama_4_scaling_beta\": 0.1}";

static int ministral3_rope(iv_model *m, iv_err *err)
{
    const iv_hf_config *c = &m->cfg;
    const cJSON *given = iv_json_get(c->json, "rope_parameters");
    cJSON *defaults = NULL;
    const cJSON *params = given;
    if (!cJSON_IsObject(given)) params = defaults = cJSON_Parse(k_ministral3_default_rope);
    if (!params) return iv_errf(err, IV_E_NOMEM, "out of memory");
    iv_rope_params rope;
    int rc = iv_rope_params_from_config(c->json, params, c->head_dim, 10000.0, c->max_position_embeddings, &rope, err);
    const cJSON *beta = iv_json_get(params, "llama_4_scaling_beta");
    if (!rc && !cJSON_IsNumber(beta))
        rc = iv_errf(err, IV_E_FORMAT, "ministral3: rope_parameters.llama_4_scaling_beta must be a number");
    if (!rc) {
        m->block.q_pos_scale_beta = (float)beta->valuedouble;
        m->block.q_pos_scale_period = rope.original_max_position_embeddings;
        rc = iv_decoder_rope(m, &rope, NULL, err);
    }
    cJSON_Delete(defaults);
    return rc;
}

/* auto_map may name only the reranker's class (directly, or as
 * "owner/repo--model.Mistral3ForSequenceClassification" when the code lives
 * in another hub repo); anything else is code we have not read. */
static int rerank_auto_map(const iv_hf_config *c, iv_err *err)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, iv_json_get(c->root, "auto_map")) {
        const char *v = cJSON_IsString(it) ? it->valuestring : "";
        const char *repo_end = strstr(v, "--");
        const char *cls = repo_end ? repo_end + 2 : v;
        if (strcmp(it->string, "AutoModelForSequenceClassification") || strcmp(cls, k_rerank_class))
            return iv_errf(err, IV_E_UNSUPPORTED,
                           "config.json references custom code (auto_map %s: \"%s\"); for Mistral3 only NVIDIA's "
                           "reranker (AutoModelForSequenceClassification: \"%s\") is implemented",
                           it->string, v, k_rerank_class);
    }
    return 0;
}

/* The reranker's config keys, checked before the backbone loads. */
static int rerank_config(const iv_hf_config *c, double *temperature, iv_err *err)
{
    if (rerank_auto_map(c, err)) return -1;
    const cJSON *pooling = iv_json_get(c->root, "pooling");
    if (!cJSON_IsString(pooling))
        return iv_errf(err, IV_E_FORMAT, "config.json: Mistral3ForSequenceClassification needs \"pooling\" "
                                         "(its remote code reads it; the exporter writes \"avg\")");
    if (strcmp(pooling->valuestring, "avg"))
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "Mistral3ForSequenceClassification pooling \"%s\" is not supported (its remote code "
                       "accepts only \"avg\", the masked mean)",
                       pooling->valuestring);
    const cJSON *t = iv_json_get(c->root, "score_temperature");
    if (!cJSON_IsNumber(t))
        return iv_errf(err, IV_E_FORMAT, "config.json: Mistral3ForSequenceClassification needs a number "
                                         "\"score_temperature\" (the remote code divides the score by it)");
    if (!isfinite(t->valuedouble) || t->valuedouble <= 0)
        return iv_errf(err, IV_E_FORMAT, "config.json: score_temperature must be finite and positive");
    *temperature = t->valuedouble;
    if (!cJSON_IsBool(iv_json_get(c->json, "is_causal")))
        return iv_errf(err, IV_E_FORMAT, "config.json: Mistral3ForSequenceClassification needs a boolean "
                                         "text_config.is_causal (the remote code sets each layer's attention "
                                         "from it)");
    return 0;
}

/* The score head: mean pooled, no bias, one row per label, / temperature. */
static int rerank_head(iv_model *m, double temperature, iv_err *err)
{
    const char *name = iv_weights_find(m->weights, "language_model.score.weight") ? "language_model.score" : "score";
    if (iv_load_linear_head(m, &m->seq_head, name, m->cfg.hidden_size, err)) return -1;
    if (!m->seq_head.n_steps) return 0; /* base model only: iv_head_absent said so */
    if (m->seq_head.steps[0].b)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "checkpoint has %s.bias, but Mistral3ForSequenceClassification's score has no bias", name);
    if (m->seq_head.out_dim != m->cfg.num_labels)
        return iv_errf(err, IV_E_FORMAT, "%s.weight has %d rows but config.json declares %d labels", name,
                       m->seq_head.out_dim, m->cfg.num_labels);
    m->seq_head_pool = IV_SEQ_POOL_MEAN;
    return iv_decoder_head_temperature(m, &m->seq_head, temperature, err);
}

static int mistral_load(iv_model *m, iv_err *err)
{
    const iv_hf_config *c = &m->cfg;
    const int mistral3 = !strcmp(c->model_type, "mistral3");
    /* A Mistral3 checkpoint's text model is whatever its text_config names. */
    const char *text_type = mistral3 ? iv_json_str(c->json, "model_type", "mistral") : c->model_type;
    const int ministral3 = !strcmp(text_type, "ministral3");
    if (mistral3 && !ministral3 && strcmp(text_type, "mistral"))
        return iv_errf(err, IV_E_UNSUPPORTED, "mistral3 with a text model of type \"%s\" is not supported (mistral, "
                                              "ministral3)",
                       text_type);
    const int rerank = mistral3 && !strcmp(c->architecture, k_rerank_archs[0]);
    double temperature = 1.0;
    if (rerank && rerank_config(c, &temperature, err)) return -1;
    if (c->has_auto_map && !rerank)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "config.json references custom code (auto_map) for model_type \"%s\"; only plain transformers "
                       "checkpoints are supported",
                       c->model_type);
    if (iv_json_get(c->json, "layer_types"))
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "%s config with layer_types (alternating attention) is not supported; transformers' %s "
                       "ignores it too",
                       text_type, text_type);
    const iv_decoder_desc d = {.archs = rerank     ? k_rerank_archs
                                        : mistral3 ? k_mistral3_archs
                                        : ministral3 ? k_ministral3_archs
                                                     : k_mistral_archs,
                               .norm_kind = IV_NORM_RMS, .default_head_dim = ministral3 ? 128 : 0,
                               .prefixes = mistral3 ? k_mistral3_prefixes : NULL, .own_heads = rerank};
    if (iv_decoder_load(m, &d, err)) return -1;
    if (rerank && rerank_head(m, temperature, err)) return -1;
    int64_t window = iv_json_int(c->json, "sliding_window", 0);
    if (window < 0) return iv_errf(err, IV_E_FORMAT, "config.json: sliding_window must be positive");
    if (window > 0) iv_decoder_windows(m, NULL, (int)window, m->block.causal ? IV_WINDOW_CAUSAL : IV_WINDOW_SYMMETRIC);
    if (ministral3) {
        if (ministral3_rope(m, err)) return -1;
    } else {
        iv_rope_params rope;
        if (iv_rope_params_from_config(c->json, NULL, c->head_dim, 10000.0, c->max_position_embeddings, &rope, err) ||
            iv_decoder_rope(m, &rope, NULL, err))
            return -1;
    }
    if (!mistral3) return 0;
    /* Mistral3Config's attribute_map: image_token_id is image_token_index. */
    const cJSON *img = iv_json_get(c->root, "image_token_index");
    if (!img) img = iv_json_get(c->root, "image_token_id");
    if (img && (!iv_json_is_integer(img) || img->valuedouble < 0 || img->valuedouble >= c->vocab_size))
        return iv_errf(err, IV_E_FORMAT, "config.json: image_token_index must be a token id below the vocabulary "
                                         "size %d",
                       c->vocab_size);
    m->image_token_id = img ? (int)img->valuedouble : 10;
    m->image_break_id = m->image_end_id = -1;
    if (iv_pixtral_vision_load(m, &m->pixtral, err)) return -1;
    /* The processor's placeholder expansion, for the request path
     * (engine/image_inputs.c): one [IMG] in the rendered text becomes the
     * image's rows of [IMG] with their [IMG_BREAK] / [IMG_END]. */
    if (m->pixtral) {
        m->image_token_run = iv_pixtral_model_token_run;
        m->image_placeholder_id = m->image_token_id;
    }
    return 0;
}

static const char *const k_types[] = {"mistral", "ministral3", "mistral3", NULL};
const iv_family iv_family_mistral = {"mistral", k_types, mistral_load};
