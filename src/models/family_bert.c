/* BERT and the RoBERTa line (RoBERTa, XLM-RoBERTa, CamemBERT): post-norm
 * encoders with learned absolute positions. RoBERTa-style checkpoints start
 * positions after padding_idx and put their classifier on <s> through
 * classifier.dense/out_proj instead of BERT's pooler. Stanford ColBERT
 * checkpoints (architectures ["HF_ColBERT"]) are this backbone plus a
 * bias-free top-level `linear` [dim, hidden] applied to every token. */
#include <string.h>

#include "base/json.h"

#include "models/encoder_common.h"
#include "models/family.h"
#include "models/loader.h"

static const iv_encoder_names k_bert_names = {
    .layer_fmt = "encoder.layer.%d.",
    .q = "attention.self.query", .k = "attention.self.key", .v = "attention.self.value",
    .o = "attention.output.dense", .attn_norm = "attention.output.LayerNorm",
    .up = "intermediate.dense", .down = "output.dense", .mlp_norm = "output.LayerNorm",
    .biases_required = 1,
};

static const char *const k_archs[] = {
    "BertModel", "BertForMaskedLM", "BertForSequenceClassification", "BertForTokenClassification",
    "BertForPreTraining",
    "RobertaModel", "RobertaForMaskedLM", "RobertaForSequenceClassification", "RobertaForTokenClassification",
    "XLMRobertaModel", "XLMRobertaForMaskedLM", "XLMRobertaForSequenceClassification",
    "XLMRobertaForTokenClassification",
    "CamembertModel", "CamembertForMaskedLM", "CamembertForSequenceClassification",
    "CamembertForTokenClassification",
    "HF_ColBERT",
    NULL,
};

static int load_embeddings(iv_model *m, int roberta, iv_err *err)
{
    if (iv_load_bert_embeddings(m, IV_EMBED_POSITIONS | IV_EMBED_TOKEN_TYPES, err)) return -1;
    if (roberta) {
        m->embed.pos_mode = IV_POS_PADDING_IDX;
        m->embed.padding_idx = m->cfg.pad_token_id >= 0 ? m->cfg.pad_token_id : 1;
    }
    return 0;
}

static int load_heads(iv_model *m, int roberta, iv_err *err)
{
    if (!strcmp(m->cfg.architecture, "HF_ColBERT")) {
        m->biases_required = 0; /* ColBERT's projection is nn.Linear(bias=False) */
        return iv_load_linear_head(m, &m->token_proj, "linear", m->cfg.hidden_size, err);
    }
    if (iv_arch_has_suffix(&m->cfg, "ForSequenceClassification")) {
        m->seq_head_pool = IV_SEQ_POOL_FIRST;
        if (roberta) return iv_load_two_step_head(m, &m->seq_head, "classifier.dense", 0, IV_ACT_TANH,
                                                  "classifier.out_proj", err);
        return iv_load_two_step_head(m, &m->seq_head, "pooler.dense", 1, IV_ACT_TANH, "classifier", err);
    }
    if (iv_arch_has_suffix(&m->cfg, "ForTokenClassification"))
        return iv_load_linear_head(m, &m->token_head, "classifier", m->cfg.hidden_size, err);
    if (iv_arch_has_suffix(&m->cfg, "ForMaskedLM") || iv_arch_has_suffix(&m->cfg, "ForPreTraining")) {
        if (roberta) /* RobertaLMHead applies exact GELU whatever hidden_act says. */
            return iv_load_mlm_head(m, "lm_head.dense", IV_ACT_GELU, "lm_head.layer_norm", "lm_head.decoder",
                                    "lm_head.bias", err);
        int act = iv_act_from_name(m->cfg.hidden_act);
        return iv_load_mlm_head(m, "cls.predictions.transform.dense", (iv_act)act,
                                "cls.predictions.transform.LayerNorm", "cls.predictions.decoder",
                                "cls.predictions.bias", err);
    }
    return 0;
}

static int bert_load(iv_model *m, iv_err *err)
{
    const iv_hf_config *c = &m->cfg;
    const int roberta = strcmp(c->model_type, "bert") != 0;
    if (c->has_auto_map)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "config.json references custom code (auto_map) for model_type \"%s\"; this checkpoint "
                       "is not plain %s, and its code is none of those implemented here (Jina BERT's are routed "
                       "by models/registry.c)",
                       c->model_type, c->model_type);
    const char *pet = iv_json_str(c->json, "position_embedding_type", "absolute");
    if (strcmp(pet, "absolute"))
        return iv_errf(err, IV_E_UNSUPPORTED, "position_embedding_type \"%s\" is not supported (only absolute)", pet);
    /* transformers runs a BertModel with is_decoder as a decoder: causal attention. */
    if (iv_json_bool(c->json, "is_decoder", 0))
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "config.json: is_decoder is true, so transformers runs this %s checkpoint with causal "
                       "attention; infinity_v3 runs BERT-style encoders bidirectionally only",
                       c->model_type);
    if (c->architecture[0] && iv_require_architecture(m, k_archs, err)) return -1;
    static const char *const bert_prefixes[] = {"bert.", "", NULL};
    static const char *const roberta_prefixes[] = {"roberta.", "xlm_roberta.", "camembert.", "", NULL};
    if (iv_detect_prefix(m, roberta ? roberta_prefixes : bert_prefixes, "embeddings.word_embeddings.weight", err))
        return -1;
    m->biases_required = 1;
    if (load_embeddings(m, roberta, err)) return -1;
    if (iv_load_encoder_layers(m, &k_bert_names, err)) return -1;
    return load_heads(m, roberta, err);
}

static const char *const k_types[] = {"bert", "roberta", "xlm-roberta", "camembert", NULL};
const iv_family iv_family_bert = {"bert", k_types, bert_load};
