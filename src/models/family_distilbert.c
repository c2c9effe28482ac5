/* DistilBERT: BERT's post-norm layers under other names, no token types,
 * config keys dim/n_layers/n_heads/hidden_dim/activation (read by config.c). */
#include "models/encoder_common.h"
#include "models/family.h"
#include "models/loader.h"

static const iv_encoder_names k_names = {
    .layer_fmt = "transformer.layer.%d.",
    .q = "attention.q_lin", .k = "attention.k_lin", .v = "attention.v_lin", .o = "attention.out_lin",
    .attn_norm = "sa_layer_norm", .up = "ffn.lin1", .down = "ffn.lin2", .mlp_norm = "output_layer_norm",
    .biases_required = 1,
};

static const char *const k_archs[] = {
    "DistilBertModel", "DistilBertForMaskedLM", "DistilBertForSequenceClassification",
    "DistilBertForTokenClassification", NULL,
};

static int distilbert_load(iv_model *m, iv_err *err)
{
    if (m->cfg.architecture[0] && iv_require_architecture(m, k_archs, err)) return -1;
    static const char *const prefixes[] = {"distilbert.", "", NULL};
    if (iv_detect_prefix(m, prefixes, "embeddings.word_embeddings.weight", err)) return -1;
    m->biases_required = 1;
    if (iv_load_bert_embeddings(m, IV_EMBED_POSITIONS, err) || iv_load_encoder_layers(m, &k_names, err)) return -1;

    if (iv_arch_has_suffix(&m->cfg, "ForSequenceClassification")) {
        m->seq_head_pool = IV_SEQ_POOL_FIRST;
        return iv_load_two_step_head(m, &m->seq_head, "pre_classifier", 0, IV_ACT_RELU, "classifier", err);
    }
    if (iv_arch_has_suffix(&m->cfg, "ForTokenClassification"))
        return iv_load_linear_head(m, &m->token_head, "classifier", m->cfg.hidden_size, err);
    if (iv_arch_has_suffix(&m->cfg, "ForMaskedLM"))
        return iv_load_mlm_head(m, "vocab_transform", m->block.act, "vocab_layer_norm", "vocab_projector",
                                "vocab_projector.bias", err);
    return 0;
}

static const char *const k_types[] = {"distilbert", NULL};
const iv_family iv_family_distilbert = {"distilbert", k_types, distilbert_load};
