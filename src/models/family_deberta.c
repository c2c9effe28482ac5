/* DeBERTa-v2 / v3 (model_type "deberta-v2"): BERT-like post-norm layers
 * (query_proj / key_proj / value_proj) whose attention adds disentangled
 * relative-position terms computed from each layer's own queries and keys
 * (models/deberta_attn.c, through the block's dynamic-bias hook), scaled
 * with 1 / sqrt(head_dim * (1 + #pos_att_type)). Embeddings: word (+ learned
 * positions when position_biased_input) (+ token types), optional
 * embed_proj, LayerNorm. v2-xlarge's ConvLayer mixes a convolution of the
 * embeddings into layer 0's output (models/token_conv.c). Heads:
 * ContextPooler (pooler.dense -> pooler_hidden_act on [CLS]) + classifier,
 * token classifier, and the masked-LM head transformers 5 builds (legacy
 * cls.predictions.*, or lm_predictions.lm_head.* with "legacy": false). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "models/deberta_attn.h"
#include "models/encoder_common.h"
#include "models/family.h"
#include "models/loader.h"
#include "models/token_conv.h"

static const iv_encoder_names k_names = {
    .layer_fmt = "encoder.layer.%d.",
    .q = "attention.self.query_proj", .k = "attention.self.key_proj", .v = "attention.self.value_proj",
    .o = "attention.output.dense", .attn_norm = "attention.output.LayerNorm",
    .up = "intermediate.dense", .down = "output.dense", .mlp_norm = "output.LayerNorm",
    .biases_required = 1, /* transformers' DebertaV2 builds every linear and LayerNorm with a bias */
};

static const char *const k_archs[] = {
    "DebertaV2Model", "DebertaV2ForMaskedLM", "DebertaV2ForSequenceClassification",
    "DebertaV2ForTokenClassification", NULL,
};

/* The config switches this family reads (transformers' defaults). */
typedef struct deberta_cfg {
    int relative_attention;   /* false: no c2p / p2c terms (the scale still counts pos_att_type) */
    int c2p, p2c;             /* pos_att_type */
    int share_att_key;        /* Pk / Pq through key_proj / query_proj instead of pos_*_proj */
    int position_buckets;     /* <= 0: no log buckets */
    int max_relative;         /* max_relative_positions, max_position_embeddings when < 1 */
    int norm_rel_ln;          /* norm_rel_ebd contains layer_norm */
    int position_biased_input;
    int embedding_size;
    int conv_kernel, conv_groups;
    iv_act conv_act, pooler_act;
    int legacy_mlm;
} deberta_cfg;

/* Lower-cased, trimmed copy of the "|"-separated item starting at *p; advances *p. */
static void next_item(const char **p, char *out, size_t cap)
{
    const char *s = *p, *end = strchr(s, '|');
    if (!end) end = s + strlen(s);
    while (s < end && isspace((unsigned char)*s)) s++;
    const char *e = end;
    while (e > s && isspace((unsigned char)e[-1])) e--;
    size_t n = 0;
    for (; s < e && n + 1 < cap; s++) out[n++] = (char)tolower((unsigned char)*s);
    out[n] = 0;
    *p = *end ? end + 1 : end;
}

static int set_att_type(deberta_cfg *d, const char *t, iv_err *err)
{
    if (!strcmp(t, "c2p")) d->c2p = 1;
    else if (!strcmp(t, "p2c")) d->p2c = 1;
    else
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "pos_att_type \"%s\" is not supported (DeBERTa-v2 uses only \"c2p\" and \"p2c\")", t);
    return 0;
}

/* pos_att_type: a list of strings, or one "c2p|p2c" string (older configs); null = none. */
static int parse_att_types(const cJSON *j, deberta_cfg *d, iv_err *err)
{
    const cJSON *v = iv_json_get(j, "pos_att_type");
    if (!v || cJSON_IsNull(v)) return 0;
    if (cJSON_IsString(v)) {
        for (const char *p = v->valuestring; *p;) {
            char item[32];
            next_item(&p, item, sizeof item);
            if (set_att_type(d, item, err)) return -1;
        }
        return 0;
    }
    if (!cJSON_IsArray(v)) return iv_errf(err, IV_E_FORMAT, "config.json: pos_att_type must be a list of strings");
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        if (!cJSON_IsString(it)) return iv_errf(err, IV_E_FORMAT, "config.json: pos_att_type must be a list of strings");
        if (set_att_type(d, it->valuestring, err)) return -1;
    }
    return 0;
}

static int parse_norm_rel_ebd(const cJSON *j, deberta_cfg *d, iv_err *err)
{
    for (const char *p = iv_json_str(j, "norm_rel_ebd", "none"); *p;) {
        char item[32];
        next_item(&p, item, sizeof item);
        if (!strcmp(item, "layer_norm")) d->norm_rel_ln = 1;
        else if (strcmp(item, "none") && item[0])
            return iv_errf(err, IV_E_UNSUPPORTED, "norm_rel_ebd \"%s\" is not supported (layer_norm or none)", item);
    }
    return 0;
}

static int parse_act(const cJSON *j, const char *key, const char *def, iv_act *out, iv_err *err)
{
    const char *name = iv_json_str(j, key, def);
    int act = iv_act_from_name(name);
    if (act < 0) return iv_errf(err, IV_E_UNSUPPORTED, "unsupported %s \"%s\"", key, name);
    *out = (iv_act)act;
    return 0;
}

static int parse_config(const iv_hf_config *c, deberta_cfg *d, iv_err *err)
{
    const cJSON *j = c->json;
    const char *what = "config.json";
    int64_t buckets, max_rel, emb, kernel, groups, pooler_size, head_size;
    *d = (deberta_cfg){0};
    if (iv_json_bool_chk(j, "relative_attention", 0, &d->relative_attention, what, err) ||
        iv_json_bool_chk(j, "share_att_key", 0, &d->share_att_key, what, err) ||
        iv_json_bool_chk(j, "position_biased_input", 1, &d->position_biased_input, what, err) ||
        iv_json_bool_chk(j, "legacy", 1, &d->legacy_mlm, what, err) ||
        iv_json_int_chk(j, "position_buckets", -1, &buckets, what, err) ||
        iv_json_int_chk(j, "max_relative_positions", -1, &max_rel, what, err) ||
        iv_json_int_chk(j, "embedding_size", c->hidden_size, &emb, what, err) ||
        iv_json_int_chk(j, "conv_kernel_size", 0, &kernel, what, err) ||
        iv_json_int_chk(j, "conv_groups", 1, &groups, what, err) ||
        iv_json_int_chk(j, "pooler_hidden_size", c->hidden_size, &pooler_size, what, err) ||
        iv_json_int_chk(j, "attention_head_size", c->hidden_size / c->num_heads, &head_size, what, err))
        return -1;
    if (parse_att_types(j, d, err) || parse_norm_rel_ebd(j, d, err)) return -1;
    if (parse_act(j, "conv_act", "tanh", &d->conv_act, err) ||
        parse_act(j, "pooler_hidden_act", "gelu", &d->pooler_act, err))
        return -1;
    if (head_size * c->num_heads != c->hidden_size)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "attention_head_size %lld with %d heads does not cover hidden_size %d; only "
                       "hidden_size / num_attention_heads is supported",
                       (long long)head_size, c->num_heads, c->hidden_size);
    if (pooler_size != c->hidden_size)
        return iv_errf(err, IV_E_UNSUPPORTED, "pooler_hidden_size %lld differs from hidden_size %d",
                       (long long)pooler_size, c->hidden_size);
    if (emb <= 0 || emb > 1 << 20) return iv_errf(err, IV_E_FORMAT, "config.json: embedding_size is invalid");
    if (max_rel < 1) max_rel = c->max_position_embeddings;
    if (d->relative_attention) {
        if (max_rel < 1 || max_rel > 1 << 20)
            return iv_errf(err, IV_E_FORMAT, "config.json: max_relative_positions (or max_position_embeddings) "
                                             "must be positive for relative attention");
        if (buckets > 0 && (buckets > 1 << 20 || max_rel - 1 <= buckets / 2))
            return iv_errf(err, IV_E_UNSUPPORTED,
                           "position_buckets %lld with max_relative_positions %lld: log buckets need "
                           "max_relative_positions - 1 > position_buckets / 2",
                           (long long)buckets, (long long)max_rel);
    }
    if (kernel < 0 || kernel > 64) return iv_errf(err, IV_E_FORMAT, "config.json: conv_kernel_size is invalid");
    if (kernel > 0 && (groups <= 0 || c->hidden_size % groups))
        return iv_errf(err, IV_E_FORMAT, "config.json: conv_groups %lld does not divide hidden_size %d",
                       (long long)groups, c->hidden_size);
    d->position_buckets = (int)buckets;
    d->max_relative = (int)max_rel;
    d->embedding_size = (int)emb;
    d->conv_kernel = (int)kernel;
    d->conv_groups = (int)groups;
    return 0;
}

static int load_embeddings(iv_model *m, const deberta_cfg *d, iv_err *err)
{
    const iv_hf_config *c = &m->cfg;
    const int64_t H = c->hidden_size, E = d->embedding_size;
    iv_embed_spec *e = &m->embed;
    if (iv_ld_table(m, "embeddings.word_embeddings.weight", E, 1, &e->word, err)) return -1;
    /* Checkpoints trained without position_biased_input may still carry an
     * unused position table (transformers ignores it); only load it when used. */
    if (d->position_biased_input && iv_ld_table(m, "embeddings.position_embeddings.weight", E, 1, &e->position, err))
        return -1;
    if (c->type_vocab_size > 0 && iv_ld(m, "embeddings.token_type_embeddings.weight", c->type_vocab_size, E,
                                        &e->token_type, err))
        return -1;
    if (E != H && iv_ld(m, "embeddings.embed_proj.weight", H, E, &e->proj, err)) return -1;
    return iv_ld_biased_layer_norm(m, "embeddings.LayerNorm", H, &e->norm, err);
}

/* Rows [0, 2 span) of encoder.rel_embeddings, through encoder.LayerNorm when
 * norm_rel_ebd says so: weights only, so normalised once here. */
static int load_rel_embeddings(iv_model *m, const deberta_cfg *d, int span, const iv_tensor **out, iv_err *err)
{
    const int64_t H = m->cfg.hidden_size;
    const iv_tensor *rel;
    if (iv_ld(m, "encoder.rel_embeddings.weight", 2 * (int64_t)span, H, &rel, err)) return -1;
    if (!d->norm_rel_ln) {
        *out = rel;
        return 0;
    }
    iv_norm ln;
    if (iv_ld_biased_layer_norm(m, "encoder.LayerNorm", H, &ln, err)) return -1;
    iv_tensor *normed = iv_model_new_tensor(m, 2 * (int64_t)span, H);
    if (!normed) return iv_errf(err, IV_E_NOMEM, "out of memory for relative embeddings");
    m->ops->layer_norm(m->ops, iv_view_of(normed), iv_view_of(rel), NULL, ln.w, ln.b, m->block.norm_eps);
    *out = normed;
    return 0;
}

/* One of a layer's projections of the relative embeddings: through its own
 * key / query projection (share_att_key; rows of the fused QKV weight) or
 * through pos_key_proj / pos_query_proj. */
static int layer_rel_projection(iv_model *m, const deberta_cfg *d, int layer, int key, const iv_tensor *rel,
                                const iv_tensor **out, iv_err *err)
{
    const int64_t H = m->cfg.hidden_size, W = (int64_t)m->block.n_heads * m->block.head_dim;
    const iv_layer *L = &m->layers[layer];
    iv_tensor w, b;
    const iv_tensor *wp = &w, *bp = NULL;
    if (d->share_att_key) {
        const int64_t row0 = key ? W : 0; /* fused rows: query, key, value */
        w = iv_tensor_2d((float *)L->qkv_w->data + row0 * H, W, H);
        if (L->qkv_b) {
            b = iv_tensor_1d((float *)L->qkv_b->data + row0, W);
            bp = &b;
        }
    } else {
        char name[160];
        const char *proj = key ? "pos_key_proj" : "pos_query_proj";
        snprintf(name, sizeof name, "encoder.layer.%d.attention.self.%s.weight", layer, proj);
        if (iv_ld(m, name, W, H, &wp, err)) return -1;
        snprintf(name, sizeof name, "encoder.layer.%d.attention.self.%s.bias", layer, proj);
        if (iv_ld(m, name, W, -1, &bp, err)) return -1; /* both nn.Linear(bias=True) */
    }
    return iv_deberta_project_rel(m, rel, wp, bp, m->block.n_heads, m->block.head_dim, out, err);
}

static int load_relative_attention(iv_model *m, const deberta_cfg *d, iv_err *err)
{
    if (!d->relative_attention || (!d->c2p && !d->p2c)) return 0;
    iv_deberta_rel *r = iv_model_alloc(m, sizeof *r);
    iv_deberta_layer *ctx = iv_model_alloc(m, (size_t)m->n_layers * sizeof *ctx);
    if (!r || !ctx) return iv_errf(err, IV_E_NOMEM, "out of memory");
    r->buckets = d->position_buckets;
    r->max_relative = d->max_relative;
    r->span = d->position_buckets > 0 ? d->position_buckets : d->max_relative;
    r->c2p = d->c2p;
    r->p2c = d->p2c;
    r->scale = sqrtf((float)m->block.head_dim * (float)(1 + d->c2p + d->p2c));
    const iv_tensor *rel = NULL;
    if (load_rel_embeddings(m, d, r->span, &rel, err)) return -1;
    for (int l = 0; l < m->n_layers; l++) {
        ctx[l].rel = r;
        if (d->c2p && layer_rel_projection(m, d, l, 1, rel, &m->layers[l].dyn_bias_w[0], err)) return -1;
        if (d->p2c && layer_rel_projection(m, d, l, 0, rel, &m->layers[l].dyn_bias_w[1], err)) return -1;
        m->layers[l].dyn_bias = iv_deberta_attn_bias;
        m->layers[l].dyn_bias_ctx = &ctx[l];
    }
    return 0;
}

static int load_conv(iv_model *m, const deberta_cfg *d, iv_err *err)
{
    if (d->conv_kernel <= 0) return 0;
    const int64_t H = m->cfg.hidden_size;
    char name[128];
    snprintf(name, sizeof name, "%sencoder.conv.conv.weight", m->prefix);
    const int64_t shape[3] = {H, H / d->conv_groups, d->conv_kernel};
    const iv_tensor *w;
    if (!iv_weights_find(m->weights, name))
        return iv_errf(err, IV_E_NOTFOUND, "checkpoint is missing tensor \"%s\" (conv_kernel_size %d)", name,
                       d->conv_kernel);
    if (iv_weights_f32(m->weights, name, 3, shape, &w, err)) return -1;
    iv_token_conv *c = &m->conv;
    c->act = d->conv_act;
    if (iv_token_conv_weight(m, c, w, d->conv_groups, err) ||
        iv_ld(m, "encoder.conv.conv.bias", H, -1, &c->b, err) || /* nn.Conv1d's default bias */
        iv_ld_biased_layer_norm(m, "encoder.conv.LayerNorm", H, &c->norm, err))
        return -1;
    return 0;
}

static int load_mlm_head(iv_model *m, const deberta_cfg *d, iv_err *err)
{
    int act = iv_act_from_name(m->cfg.hidden_act);
    if (d->legacy_mlm) {
        if (!iv_weights_find(m->weights, "cls.predictions.transform.dense.weight") &&
            iv_weights_find(m->weights, "lm_predictions.lm_head.dense.weight"))
            return iv_errf(err, IV_E_UNSUPPORTED,
                           "config.json has \"legacy\": true (the default), for which transformers reads the "
                           "masked-LM head from cls.predictions.*, but the checkpoint has lm_predictions.lm_head.*; "
                           "set \"legacy\": false in config.json to use that head");
        return iv_load_mlm_head(m, "cls.predictions.transform.dense", (iv_act)act,
                                "cls.predictions.transform.LayerNorm", "cls.predictions.decoder",
                                "cls.predictions.bias", err);
    }
    if (d->embedding_size != m->cfg.hidden_size)
        return iv_errf(err, IV_E_UNSUPPORTED, "the non-legacy masked-LM head needs embedding_size == hidden_size");
    /* DebertaV2LMPredictionHead: dense -> act -> LayerNorm -> word_embeddings^T + bias. */
    return iv_load_mlm_head(m, "lm_predictions.lm_head.dense", (iv_act)act, "lm_predictions.lm_head.LayerNorm",
                            "lm_predictions.lm_head.decoder", "lm_predictions.lm_head.bias", err);
}

static int load_heads(iv_model *m, const deberta_cfg *d, iv_err *err)
{
    if (iv_arch_has_suffix(&m->cfg, "ForSequenceClassification")) {
        m->seq_head_pool = IV_SEQ_POOL_FIRST; /* ContextPooler: the first token */
        return iv_load_two_step_head(m, &m->seq_head, "pooler.dense", 0, d->pooler_act, "classifier", err);
    }
    if (iv_arch_has_suffix(&m->cfg, "ForTokenClassification"))
        return iv_load_linear_head(m, &m->token_head, "classifier", m->cfg.hidden_size, err);
    if (iv_arch_has_suffix(&m->cfg, "ForMaskedLM")) return load_mlm_head(m, d, err);
    return 0;
}

static int deberta_load(iv_model *m, iv_err *err)
{
    const iv_hf_config *c = &m->cfg;
    if (!strcmp(c->model_type, "deberta"))
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "DeBERTa v1 (model_type \"deberta\") is not supported: its attention (fused in_proj, "
                       "q_bias / v_bias, DebertaLayerNorm) differs from DeBERTa-v2/v3 (model_type \"deberta-v2\")");
    if (c->has_auto_map)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "config.json references custom code (auto_map); only transformers' own DeBERTa-v2 is supported");
    if (c->architecture[0] && iv_require_architecture(m, k_archs, err)) return -1;
    deberta_cfg d;
    if (parse_config(c, &d, err)) return -1;
    static const char *const prefixes[] = {"deberta.", "", NULL};
    if (iv_detect_prefix(m, prefixes, "embeddings.word_embeddings.weight", err)) return -1;
    m->biases_required = 1; /* the heads' linears and LayerNorms too */
    if (iv_load_encoder_layers(m, &k_names, err)) return -1;
    /* transformers divides q.k and both relative terms by sqrt(head_dim * scale_factor),
     * scale_factor = 1 + #pos_att_type, whether or not relative_attention is on. */
    m->block.attn_scale = 1.0f / sqrtf((float)m->block.head_dim * (float)(1 + d.c2p + d.p2c));
    if (load_embeddings(m, &d, err) || load_relative_attention(m, &d, err) || load_conv(m, &d, err)) return -1;
    return load_heads(m, &d, err);
}

static const char *const k_types[] = {"deberta-v2", "deberta_v2", "deberta", NULL};
const iv_family iv_family_deberta = {"deberta-v2", k_types, deberta_load};
