/* MPNet: BERT-like post-norm layers plus a T5-style relative position bias
 * (32 bidirectional buckets up to distance 128) shared by all layers, and
 * RoBERTa-style absolute positions starting after padding_idx = 1. */
#include "base/json.h"
#include "models/encoder_common.h"
#include "models/family.h"
#include "models/loader.h"

static const iv_encoder_names k_names = {
    .layer_fmt = "encoder.layer.%d.",
    .q = "attention.attn.q", .k = "attention.attn.k", .v = "attention.attn.v", .o = "attention.attn.o",
    .attn_norm = "attention.LayerNorm", .up = "intermediate.dense", .down = "output.dense",
    .mlp_norm = "output.LayerNorm",
    .biases_required = 1,
};

static const char *const k_archs[] = {
    "MPNetModel", "MPNetForMaskedLM", "MPNetForSequenceClassification", "MPNetForTokenClassification", NULL,
};

static int mpnet_load(iv_model *m, iv_err *err)
{
    if (m->cfg.architecture[0] && iv_require_architecture(m, k_archs, err)) return -1;
    static const char *const prefixes[] = {"mpnet.", "", NULL};
    if (iv_detect_prefix(m, prefixes, "embeddings.word_embeddings.weight", err)) return -1;
    m->biases_required = 1;
    if (iv_load_bert_embeddings(m, IV_EMBED_POSITIONS, err)) return -1;
    m->embed.pos_mode = IV_POS_PADDING_IDX;
    m->embed.padding_idx = 1; /* fixed in transformers' MPNetEmbeddings, whatever pad_token_id says */
    if (iv_load_encoder_layers(m, &k_names, err)) return -1;

    m->rel_bias.num_buckets = (int)iv_json_int(m->cfg.json, "relative_attention_num_buckets", 32);
    m->rel_bias.max_distance = 128;
    if (m->rel_bias.num_buckets < 4)
        return iv_errf(err, IV_E_FORMAT, "relative_attention_num_buckets must be at least 4");
    if (iv_ld(m, "encoder.relative_attention_bias.weight", m->rel_bias.num_buckets, m->cfg.num_heads,
              &m->rel_bias.table, err))
        return -1;

    if (iv_arch_has_suffix(&m->cfg, "ForSequenceClassification")) {
        m->seq_head_pool = IV_SEQ_POOL_FIRST;
        return iv_load_two_step_head(m, &m->seq_head, "classifier.dense", 0, IV_ACT_TANH, "classifier.out_proj",
                                     err);
    }
    if (iv_arch_has_suffix(&m->cfg, "ForTokenClassification"))
        return iv_load_linear_head(m, &m->token_head, "classifier", m->cfg.hidden_size, err);
    if (iv_arch_has_suffix(&m->cfg, "ForMaskedLM"))
        return iv_load_mlm_head(m, "lm_head.dense", IV_ACT_GELU, "lm_head.layer_norm", "lm_head.decoder",
                                "lm_head.bias", err);
    return 0;
}

static const char *const k_types[] = {"mpnet", NULL};
const iv_family iv_family_mpnet = {"mpnet", k_types, mpnet_load};
