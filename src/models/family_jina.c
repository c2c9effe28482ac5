/* Jina BERT v2 (jina-embeddings-v2-*, jina-reranker-v1-*) and JinaCode
 * (jina-embeddings-v2-base-code): model_type "bert" checkpoints whose
 * config.json points at the remote code jinaai/jina-bert-implementation or
 * jinaai/jina-bert-v2-qk-post-norm (registry.c routes them here).
 *
 * Both: BERT embeddings without positions, BERT q/k/v/o with biases,
 * post-norm, symmetric ALiBi (-slope_h * |i - j| after the 1/sqrt(d) scaling,
 * BLOOM slopes) and a GLU MLP whose act is nn.GELU (exact) for
 * feed_forward_type "geglu" or ReLU for "reglu", whatever hidden_act says.
 *   v2:       mlp.gated_layers [2I, H] = [gated | non-gated]: wo(act(first) * second),
 *             h = attention.output.LayerNorm(x + O(attn)), y = mlp.layernorm(h + mlp(h)).
 *   JinaCode: attention.self.layer_norm_q / layer_norm_k over all of Q and K before the
 *             head split; mlp.up_gated_layer = [non-gated | gated]: down_layer(first * act(second));
 *             a = attention.output.LayerNorm(x + O(attn)), h = layer_norm_1(x + a),
 *             y = layer_norm_2(h + mlp(h)) (the order of the remote code and TEI jina_code.rs).
 * Heads: sequence classification (bert.pooler.dense + tanh when present, then
 * classifier, on [CLS]). JinaBertForMaskedLM checkpoints (the usual
 * jina-embeddings-v2 config) load as the backbone only: their files carry no
 * MLM head. */
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "models/alibi.h"
#include "models/bias_rules.h"
#include "models/encoder_common.h"
#include "models/family.h"
#include "models/loader.h"

#define QK_POST_NORM_REPO "jinaai/jina-bert-v2-qk-post-norm"

static const iv_encoder_names k_v2 = {
    .layer_fmt = "encoder.layer.%d.",
    .q = "attention.self.query", .k = "attention.self.key", .v = "attention.self.value",
    .o = "attention.output.dense", .attn_norm = "attention.output.LayerNorm",
    .up = "mlp.gated_layers", .down = "mlp.wo", .mlp_norm = "mlp.layernorm",
};
static const iv_encoder_names k_code = {
    .layer_fmt = "encoder.layer.%d.",
    .q = "attention.self.query", .k = "attention.self.key", .v = "attention.self.value",
    .o = "attention.output.dense", .attn_norm = "attention.output.LayerNorm",
    .up = "mlp.up_gated_layer", .down = "mlp.down_layer", .mlp_norm = "layer_norm_2",
};

static const char *const k_archs[] = {
    "JinaBertModel", "JinaBertForMaskedLM", "JinaBertForSequenceClassification", NULL,
};

/* JinaCode's extra norms: Q and K over the full hidden width, and layer_norm_1. */
static int load_code_norms(iv_model *m, iv_err *err)
{
    const int64_t H = m->cfg.hidden_size;
    for (int l = 0; l < m->n_layers; l++) {
        iv_layer *L = &m->layers[l];
        char name[256];
        snprintf(name, sizeof name, "encoder.layer.%d.attention.self.layer_norm_q", l);
        if (iv_ld_biased_layer_norm(m, name, H, &L->q_full_norm, err)) return -1;
        snprintf(name, sizeof name, "encoder.layer.%d.attention.self.layer_norm_k", l);
        if (iv_ld_biased_layer_norm(m, name, H, &L->k_full_norm, err)) return -1;
        snprintf(name, sizeof name, "encoder.layer.%d.layer_norm_1", l);
        if (iv_ld_biased_layer_norm(m, name, H, &L->attn_outer_norm, err)) return -1;
    }
    return 0;
}

/* The remote code's modules: BERT's biased q/k/v/o and LayerNorms, a GLU
 * MLP whose fused up projection (gated_layers / up_gated_layer) is
 * nn.Linear(bias=False) and whose down projection (wo / down_layer) is
 * biased; biased heads. */
static int check_biases(iv_model *m, iv_err *err)
{
    const iv_bias_rule has = {1, "the remote code's module"}, none = {0, ""};
    const iv_layer_bias_rules rules = {.qkv = has, .o = has, .up = none, .down = has, .norms = has};
    iv_bias_audit a = {"Jina BERT", 0};
    if (iv_bias_check_layers(&a, m, &rules, err)) return -1;
    iv_bias_audit_report(&a);
    m->biases_required = 1;
    return 0;
}

static int load_heads(iv_model *m, iv_err *err)
{
    const iv_hf_config *c = &m->cfg;
    if (iv_arch_has_suffix(c, "ForSequenceClassification")) {
        m->seq_head_pool = IV_SEQ_POOL_FIRST;
        char pooler[128];
        snprintf(pooler, sizeof pooler, "%spooler.dense.weight", m->prefix);
        if (iv_weights_find(m->weights, pooler))
            return iv_load_two_step_head(m, &m->seq_head, "pooler.dense", 1, IV_ACT_TANH, "classifier", err);
        return iv_load_linear_head(m, &m->seq_head, "classifier", c->hidden_size, err);
    }
    return 0;
}

static int jina_load(iv_model *m, iv_err *err)
{
    iv_hf_config *c = &m->cfg;
    const int code = iv_config_references_code(c, QK_POST_NORM_REPO);
    if (c->architecture[0] && iv_require_architecture(m, k_archs, err)) return -1;
    const char *pet = iv_json_str(c->json, "position_embedding_type", "absolute");
    if (strcmp(pet, "alibi"))
        return iv_errf(err, IV_E_UNSUPPORTED, "position_embedding_type \"%s\" is not supported for Jina BERT (alibi)",
                       pet);
    const char *fft = iv_json_str(c->json, "feed_forward_type", "original");
    iv_act act;
    if (!strcmp(fft, "geglu")) act = IV_ACT_GELU;
    else if (!strcmp(fft, "reglu")) act = IV_ACT_RELU;
    else return iv_errf(err, IV_E_UNSUPPORTED, "feed_forward_type \"%s\" is not supported (geglu, reglu)", fft);

    static const char *const prefixes[] = {"bert.", "", NULL};
    if (iv_detect_prefix(m, prefixes, "embeddings.word_embeddings.weight", err)) return -1;
    if (iv_load_bert_embeddings(m, IV_EMBED_TOKEN_TYPES, err)) return -1;

    if (iv_encoder_block_spec(m, err)) return -1;
    m->block.act = act;
    m->block.gated = 1;
    m->block.act_on_first = !code;
    if (iv_load_encoder_layer_weights(m, code ? &k_code : &k_v2, err)) return -1;
    if (code && load_code_norms(m, err)) return -1;

    iv_tensor *slopes = iv_model_new_tensor(m, c->num_heads, -1);
    if (!slopes) return iv_errf(err, IV_E_NOMEM, "out of memory");
    iv_alibi_slopes(c->num_heads, slopes->data);
    m->alibi_slopes = slopes->data;
    if (check_biases(m, err)) return -1;
    return load_heads(m, err);
}

/* Reached only through the code routes in registry.c, never by model_type alone. */
static const char *const k_types[] = {NULL};
const iv_family iv_family_jina_bert = {"jina_bert", k_types, jina_load};
