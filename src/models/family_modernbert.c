/* ModernBERT (answerdotai/ModernBERT-*, transformers `modernbert`): a pre-norm
 * encoder with LayerNorms that usually have no bias, no norm before layer 0's
 * attention, fused Wqkv, a GeGLU MLP (act on the first half of Wi), rotary
 * positions and final_norm. Layers alternate global attention and a local
 * window |i - j| <= local_attention / 2, each type with its own rotary base.
 *
 * Two config styles say which layer is which: hub checkpoints carry
 * global_attn_every_n_layers (layer i global iff i % n == 0) with
 * global_rope_theta / local_rope_theta; transformers 5 writes layer_types
 * ("full_attention" | "sliding_attention") with rope_parameters
 * {full_attention: {...}, sliding_attention: {...}}. Either is read. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/log.h"
#include "models/bias_rules.h"
#include "models/decoder_common.h"
#include "models/encoder_common.h"
#include "models/family.h"
#include "models/loader.h"
#include "models/rope.h"

static const iv_encoder_names k_names = {
    .layer_fmt = "layers.%d.",
    .qkv = "attn.Wqkv", .o = "attn.Wo",
    .attn_norm = "attn_norm", .first_attn_norm_absent = 1,
    .up = "mlp.Wi", .down = "mlp.Wo", .mlp_norm = "mlp_norm",
};

static const char *const k_archs[] = {
    "ModernBertModel", "ModernBertForMaskedLM", "ModernBertForSequenceClassification",
    "ModernBertForTokenClassification", NULL,
};

enum { GLOBAL = 0, LOCAL = 1 };

/* Which layers are global: layer_types when present, else every n-th layer. */
static int read_layer_kinds(const iv_model *m, int *kinds, iv_err *err)
{
    const cJSON *types = iv_json_get(m->cfg.json, "layer_types");
    if (types && !cJSON_IsNull(types)) {
        if (!cJSON_IsArray(types) || cJSON_GetArraySize(types) != m->n_layers)
            return iv_errf(err, IV_E_FORMAT, "config.json: layer_types must list %d layer types", m->n_layers);
        for (int i = 0; i < m->n_layers; i++) {
            const cJSON *t = cJSON_GetArrayItem(types, i);
            const char *s = cJSON_IsString(t) ? t->valuestring : "";
            if (!strcmp(s, "full_attention")) kinds[i] = GLOBAL;
            else if (!strcmp(s, "sliding_attention")) kinds[i] = LOCAL;
            else return iv_errf(err, IV_E_UNSUPPORTED, "layer_types[%d] \"%s\" is not supported", i, s);
        }
        return 0;
    }
    const int64_t every = iv_json_int(m->cfg.json, "global_attn_every_n_layers", 3);
    if (every <= 0) return iv_errf(err, IV_E_FORMAT, "config.json: global_attn_every_n_layers must be positive");
    for (int i = 0; i < m->n_layers; i++) kinds[i] = i % every == 0 ? GLOBAL : LOCAL;
    return 0;
}

/* Rotary tables of one attention type, for the layers of that type. */
static int type_rope(iv_model *m, int kind, const unsigned char *which, iv_err *err)
{
    static const char *const type_key[] = {"full_attention", "sliding_attention"};
    static const char *const legacy_key[] = {"global_rope_theta", "local_rope_theta"};
    static const double default_theta[] = {160000.0, 10000.0};
    const cJSON *cfg = m->cfg.json;
    const int d = m->block.head_dim;
    const double theta = iv_json_num(cfg, legacy_key[kind], default_theta[kind]);
    if (cJSON_IsObject(iv_json_get(cfg, "rope_parameters")))
        return iv_decoder_kind_rope(m, type_key[kind], which, d, theta, err);
    /* Hub style: one rope_scaling (if any) for both types, a theta per type. */
    iv_rope_params p;
    if (iv_rope_params_from_config(cfg, NULL, d, default_theta[kind], m->cfg.max_position_embeddings, &p, err))
        return -1;
    p.theta = theta;
    return iv_decoder_rope(m, &p, which, err);
}

/* attention_bias, mlp_bias, norm_bias, classifier_bias, decoder_bias
 * (transformers' ModernBertConfig; defaults false, false, false, false,
 * true) decide which biases the reference module has (bias_rules.h). */
static int apply_bias_switches(iv_model *m, iv_err *err)
{
    const cJSON *j = m->cfg.json;
    const iv_bias_rule attn = {iv_json_bool(j, "attention_bias", 0), "config.json's attention_bias"},
                       mlp = {iv_json_bool(j, "mlp_bias", 0), "config.json's mlp_bias"},
                       norm = {iv_json_bool(j, "norm_bias", 0), "config.json's norm_bias"},
                       cls = {iv_json_bool(j, "classifier_bias", 0), "config.json's classifier_bias"},
                       dec = {iv_json_bool(j, "decoder_bias", 1), "config.json's decoder_bias"},
                       linear = {1, "the classifier's nn.Linear default"};
    iv_bias_audit a = {"ModernBERT", 0};
    const iv_layer_bias_rules layers = {attn, attn, mlp, mlp, norm};
    if (iv_bias_check_norm(&a, &m->embed.norm, norm, "embeddings.norm", err) ||
        iv_bias_check_norm(&a, &m->final_norm, norm, "final_norm", err) ||
        iv_bias_check_layers(&a, m, &layers, err))
        return -1;
    /* Heads: head.dense (classifier_bias) with head.norm (norm_bias), then
     * the MLM decoder (decoder_bias) or the classifier (always biased). */
    iv_head *heads[] = {&m->seq_head, &m->token_head, &m->mlm_head};
    for (int h = 0; h < 3; h++) {
        iv_head *hd = heads[h];
        if (hd->n_steps < 2) continue;
        const int mlm = hd == &m->mlm_head;
        if (iv_bias_check(&a, &hd->steps[0].b, cls, "head.dense", err) ||
            iv_bias_check(&a, &hd->steps[0].ln_b, norm, "head.norm", err) ||
            iv_bias_check(&a, &hd->steps[1].b, mlm ? dec : linear, mlm ? "decoder" : "classifier", err))
            return -1;
    }
    iv_bias_audit_report(&a);
    return 0;
}

static int load_heads(iv_model *m, iv_err *err)
{
    const char *act_name = iv_json_str(m->cfg.json, "classifier_activation", "gelu");
    const int act = iv_act_from_name(act_name);
    if (act < 0) return iv_errf(err, IV_E_UNSUPPORTED, "unsupported classifier_activation \"%s\"", act_name);
    if (iv_arch_has_suffix(&m->cfg, "ForSequenceClassification")) {
        const char *pool = iv_json_str(m->cfg.json, "classifier_pooling", "cls");
        if (!strcmp(pool, "cls")) m->seq_head_pool = IV_SEQ_POOL_FIRST;
        else if (!strcmp(pool, "mean")) m->seq_head_pool = IV_SEQ_POOL_MEAN;
        else return iv_errf(err, IV_E_UNSUPPORTED, "classifier_pooling \"%s\" is not supported (cls, mean)", pool);
        return iv_load_transform_head(m, &m->seq_head, "head.dense", (iv_act)act, "head.norm", "classifier", err);
    }
    if (iv_arch_has_suffix(&m->cfg, "ForTokenClassification"))
        return iv_load_transform_head(m, &m->token_head, "head.dense", (iv_act)act, "head.norm", "classifier", err);
    if (iv_arch_has_suffix(&m->cfg, "ForMaskedLM"))
        return iv_load_mlm_head(m, "head.dense", (iv_act)act, "head.norm", "decoder", "decoder.bias", err);
    return 0;
}

static int modernbert_load(iv_model *m, iv_err *err)
{
    iv_hf_config *c = &m->cfg;
    if (c->architecture[0] && iv_require_architecture(m, k_archs, err)) return -1;
    if (c->has_auto_map)
        return iv_errf(err, IV_E_UNSUPPORTED, "config.json references custom code (auto_map); ModernBERT runs "
                                              "transformers' own modernbert code only");
    /* "encoder.": the encoder inside a Laya decision checkpoint. */
    static const char *const prefixes[] = {"model.", "", "encoder.", NULL};
    if (iv_detect_prefix(m, prefixes, "embeddings.tok_embeddings.weight", err)) return -1;

    const char *act_name = iv_json_str(c->json, "hidden_activation", "gelu");
    const int act = iv_act_from_name(act_name);
    if (act < 0) return iv_errf(err, IV_E_UNSUPPORTED, "unsupported hidden_activation \"%s\"", act_name);
    if (c->intermediate_size <= 0) return iv_errf(err, IV_E_FORMAT, "config.json: intermediate_size missing");
    if (c->hidden_size % c->num_heads)
        return iv_errf(err, IV_E_FORMAT, "config.json: num_attention_heads does not divide hidden_size");
    const int head_dim = c->hidden_size / c->num_heads; /* ModernBERT ignores any head_dim key */
    m->block = (iv_block_spec){
        .hidden = c->hidden_size, .n_heads = c->num_heads, .n_kv_heads = c->num_heads, .head_dim = head_dim,
        .intermediate = c->intermediate_size,
        .norm_kind = IV_NORM_LAYER, .norm_place = IV_NORM_PRE,
        .norm_eps = (float)iv_json_num(c->json, "norm_eps", 1e-5),
        .act = (iv_act)act, .gated = 1, .act_on_first = 1,
    };

    const int64_t H = c->hidden_size;
    if (iv_ld_table(m, "embeddings.tok_embeddings.weight", H, 1, &m->embed.word, err) ||
        iv_ld_layer_norm(m, "embeddings.norm", H, 0, &m->embed.norm, err))
        return -1;
    if (iv_load_encoder_layer_weights(m, &k_names, err)) return -1;
    if (iv_ld_layer_norm(m, "final_norm", H, 0, &m->final_norm, err)) return -1;

    int *kinds = calloc((size_t)m->n_layers, sizeof *kinds);
    unsigned char *which = calloc((size_t)m->n_layers, 1);
    int rc = !kinds || !which ? iv_errf(err, IV_E_NOMEM, "out of memory") : read_layer_kinds(m, kinds, err);
    for (int k = 0; k < 2 && !rc; k++) {
        int any = 0;
        for (int l = 0; l < m->n_layers; l++) {
            which[l] = kinds[l] == k;
            any |= which[l];
        }
        if (any) rc = type_rope(m, k, which, err);
    }
    const int64_t local_attention = iv_json_int(c->json, "local_attention", 128);
    if (!rc && (local_attention < 0 || local_attention > INT_MAX))
        rc = iv_errf(err, IV_E_FORMAT, "config.json: local_attention out of range");
    /* transformers' sliding_window is local_attention // 2, inclusive on both sides. */
    if (!rc) {
        for (int l = 0; l < m->n_layers; l++) which[l] = kinds[l] == LOCAL;
        iv_decoder_windows(m, which, (int)local_attention, IV_WINDOW_HALF);
    }
    free(kinds);
    free(which);
    if (rc || load_heads(m, err)) return -1;
    return apply_bias_switches(m, err);
}

static const char *const k_types[] = {"modernbert", NULL};
const iv_family iv_family_modernbert = {"modernbert", k_types, modernbert_load};
