/* Llama (LlamaModel, ...ForCausalLM as a backbone, ...ForSequenceClassification,
 * ...ForTokenClassification) and NVIDIA's bidirectional Llama
 * (model_type llama_bidirec, remote code from NeMo Automodel's
 * llama_bidirectional_model.py: the causal mask removed; its sequence
 * classifier pools per config "pooling" and divides the score by
 * config "temperature"). Quirks: attention_bias / mlp_bias flags, explicit
 * head_dim, rope scaling of any supported type. */
#include <string.h>

#include "base/json.h"
#include "models/decoder_common.h"
#include "models/family.h"

static const char *const k_archs[] = {
    "LlamaModel", "LlamaForCausalLM", "LlamaForSequenceClassification", "LlamaForTokenClassification", NULL,
};
static const char *const k_bidirec_archs[] = {
    "LlamaBidirectionalModel", "LlamaBidirectionalForSequenceClassification", NULL,
};

/* llama_bidirec's pool(): avg = masked mean, cls / cls_last = first token,
 * last = last token; weighted_avg is a plain sum (not supported here). */
static int bidirec_pooling(iv_model *m, iv_err *err)
{
    const char *pool = iv_json_str(m->cfg.json, "pooling", "avg");
    if (!strcmp(pool, "avg")) m->seq_head_pool = IV_SEQ_POOL_MEAN;
    else if (!strcmp(pool, "cls") || !strcmp(pool, "cls_last")) m->seq_head_pool = IV_SEQ_POOL_FIRST;
    else if (!strcmp(pool, "last")) m->seq_head_pool = IV_SEQ_POOL_LAST;
    else
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "llama_bidirec pooling \"%s\" is not supported (supported: avg, cls, cls_last, last)", pool);
    return iv_decoder_head_temperature(m, &m->seq_head, iv_json_num(m->cfg.json, "temperature", 1.0), err);
}

static int llama_load(iv_model *m, iv_err *err)
{
    const iv_hf_config *c = &m->cfg;
    const int bidirec = !strcmp(c->model_type, "llama_bidirec");
    if (c->has_auto_map && !bidirec)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "config.json references custom code (auto_map) for model_type \"llama\"; only plain "
                       "transformers Llama checkpoints are supported");
    const iv_decoder_desc d = {.archs = bidirec ? k_bidirec_archs : k_archs, .norm_kind = IV_NORM_RMS};
    if (iv_decoder_load(m, &d, err)) return -1;
    if (bidirec) {
        m->block.causal = 0;
        if (m->seq_head.n_steps && bidirec_pooling(m, err)) return -1;
    }
    iv_rope_params rope;
    if (iv_rope_params_from_config(c->json, NULL, c->head_dim, 10000.0, c->max_position_embeddings, &rope, err))
        return -1;
    return iv_decoder_rope(m, &rope, NULL, err);
}

static const char *const k_types[] = {"llama", "llama_bidirec", NULL};
const iv_family iv_family_llama = {"llama", k_types, llama_load};
