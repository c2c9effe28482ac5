#include "models/encoder_common.h"

#include <stdio.h>
#include <stdlib.h>
#include "base/json.h"
#include "base/log.h"
#include "models/loader.h"

static int ld_linear(iv_model *m, const char *base, int64_t out, int64_t in, int bias_required, const iv_tensor **w,
                     const iv_tensor **b, iv_err *err)
{
    char name[256];
    snprintf(name, sizeof name, "%s.weight", base);
    if (iv_ld(m, name, out, in, w, err)) return -1;
    snprintf(name, sizeof name, "%s.bias", base);
    return bias_required ? iv_ld(m, name, out, -1, b, err) : iv_ld_opt(m, name, out, -1, b, err);
}

/* A LayerNorm whose bias (or legacy beta) the reference always has. */
static int ld_norm(iv_model *m, const char *base, int64_t dim, int bias_required, iv_norm *out, iv_err *err)
{
    if (iv_ld_layer_norm(m, base, dim, 0, out, err)) return -1;
    if (!bias_required || out->b) return 0;
    char w[600];
    snprintf(w, sizeof w, "%s%s.weight", m->prefix, base);
    return iv_errf(err, IV_E_NOTFOUND, "checkpoint is missing tensor \"%s%s.%s\"", m->prefix, base,
                   iv_weights_find(m->weights, w) ? "bias" : "beta");
}

int iv_ld_biased_layer_norm(iv_model *m, const char *base, int64_t dim, iv_norm *out, iv_err *err)
{
    return ld_norm(m, base, dim, 1, out, err);
}

int iv_encoder_block_spec(iv_model *m, iv_err *err)
{
    const iv_hf_config *c = &m->cfg;
    int act = iv_act_from_name(c->hidden_act);
    if (act < 0) return iv_errf(err, IV_E_UNSUPPORTED, "unsupported hidden_act \"%s\"", c->hidden_act);
    if (c->intermediate_size <= 0) return iv_errf(err, IV_E_FORMAT, "config.json: intermediate_size missing");
    if (c->num_kv_heads != c->num_heads || c->head_dim * c->num_heads != c->hidden_size)
        return iv_errf(err, IV_E_FORMAT, "config.json: heads do not divide hidden_size");
    m->block = (iv_block_spec){
        .hidden = c->hidden_size, .n_heads = c->num_heads, .n_kv_heads = c->num_heads,
        .head_dim = c->head_dim, .intermediate = c->intermediate_size,
        .norm_kind = IV_NORM_LAYER, .norm_place = IV_NORM_POST, .norm_eps = (float)c->layer_norm_eps,
        .act = (iv_act)act,
    };
    return 0;
}

/* A gated up projection stored as two halves, concatenated into one [2I, H]. */
static int ld_split_up(iv_model *m, const char *pre, const iv_encoder_names *nm, int64_t I, int64_t H,
                       iv_layer *L, iv_err *err)
{
    char name[384];
    const iv_tensor *w[2], *b[2];
    const char *half[2] = {nm->up, nm->up2};
    for (int i = 0; i < 2; i++) {
        snprintf(name, sizeof name, "%s%s", pre, half[i]);
        if (ld_linear(m, name, I, H, nm->biases_required, &w[i], &b[i], err)) return -1;
    }
    if (iv_concat_rows(m, w, 2, &L->up_w, err)) return -1;
    if (!b[0] && !b[1]) return 0;
    if (!b[0] || !b[1]) return iv_errf(err, IV_E_FORMAT, "%s: only one half of the gated MLP has a bias", pre);
    return iv_concat_rows(m, b, 2, &L->up_b, err);
}

int iv_load_encoder_layer_weights(iv_model *m, const iv_encoder_names *nm, iv_err *err)
{
    return iv_load_encoder_layer_weights_routed(m, nm, NULL, err);
}

int iv_load_encoder_layer_weights_routed(iv_model *m, const iv_encoder_names *nm, const unsigned char *routed,
                                         iv_err *err)
{
    const iv_block_spec *s = &m->block;
    m->n_layers = m->cfg.num_layers;
    m->layers = calloc((size_t)m->n_layers, sizeof *m->layers);
    if (!m->layers) return iv_errf(err, IV_E_NOMEM, "out of memory");
    const int64_t H = s->hidden, I = s->intermediate, QKV = (int64_t)(s->n_heads + 2 * s->n_kv_heads) * s->head_dim;
    const int64_t QH = (int64_t)s->n_heads * s->head_dim, KVH = (int64_t)s->n_kv_heads * s->head_dim;
    for (int l = 0; l < m->n_layers; l++) {
        iv_layer *L = &m->layers[l];
        char pre[128], name[384];
        snprintf(pre, sizeof pre, nm->layer_fmt, l);
#define LIN(field, out, in, w, b)                                                   \
    do {                                                                          \
        snprintf(name, sizeof name, "%s%s", pre, field);                          \
        if (ld_linear(m, name, out, in, nm->biases_required, w, b, err)) return -1; \
    } while (0)
        if (nm->qkv) {
            LIN(nm->qkv, QKV, H, &L->qkv_w, &L->qkv_b);
        } else {
            const iv_tensor *qw, *kw, *vw, *qb, *kb, *vb;
            LIN(nm->q, QH, H, &qw, &qb);
            LIN(nm->k, KVH, H, &kw, &kb);
            LIN(nm->v, KVH, H, &vw, &vb);
            if (iv_fuse_qkv(m, qw, kw, vw, qb, kb, vb, &L->qkv_w, &L->qkv_b, err)) return -1;
        }
        LIN(nm->o, H, QH, &L->o_w, &L->o_b);
        const int dense = !routed || !routed[l]; /* a routed layer's experts are the family's to load */
        if (dense && nm->up2) {
            if (ld_split_up(m, pre, nm, I, H, L, err)) return -1;
        } else if (dense) {
            LIN(nm->up, (s->gated ? 2 : 1) * I, H, &L->up_w, &L->up_b);
        }
        if (dense) LIN(nm->down, H, I, &L->down_w, &L->down_b);
#undef LIN
        if (l == 0 && nm->first_attn_norm_absent) {
            L->attn_norm.present = 0;
        } else {
            snprintf(name, sizeof name, "%s%s", pre, nm->attn_norm);
            if (ld_norm(m, name, H, nm->biases_required, &L->attn_norm, err)) return -1;
        }
        snprintf(name, sizeof name, "%s%s", pre, nm->mlp_norm);
        if (ld_norm(m, name, H, nm->biases_required, &L->mlp_norm, err)) return -1;
        L->window_left = L->window_right = -1;
    }
    return 0;
}

int iv_load_bert_embeddings(iv_model *m, unsigned tables, iv_err *err)
{
    const int64_t H = m->cfg.hidden_size;
    iv_embed_spec *e = &m->embed;
    if (iv_ld_table(m, "embeddings.word_embeddings.weight", H, 1, &e->word, err)) return -1;
    if ((tables & IV_EMBED_POSITIONS) &&
        iv_ld_table(m, "embeddings.position_embeddings.weight", H, 1, &e->position, err))
        return -1;
    const int type_vocab = (int)iv_json_int(m->cfg.json, "type_vocab_size", 2);
    if ((tables & IV_EMBED_TOKEN_TYPES) &&
        iv_ld_table(m, "embeddings.token_type_embeddings.weight", H, type_vocab > 0, &e->token_type, err))
        return -1;
    return ld_norm(m, "embeddings.LayerNorm", H, 1, &e->norm, err);
}

int iv_load_encoder_layers(iv_model *m, const iv_encoder_names *nm, iv_err *err)
{
    if (iv_encoder_block_spec(m, err)) return -1;
    return iv_load_encoder_layer_weights(m, nm, err);
}

/* One linear step of a head. required 0: absent leaves st->w NULL; 1: absent
 * is an error; 2: the same, said as a partial head (the caller has seen
 * other tensors of it). */
static int head_step(iv_model *m, iv_head_step *st, const char *base, int under_prefix, int64_t in,
                     iv_act act, int required, iv_err *err)
{
    char w[256], b[256];
    snprintf(w, sizeof w, "%s.weight", base);
    snprintf(b, sizeof b, "%s.bias", base);
    char full[384];
    snprintf(full, sizeof full, "%s%s", under_prefix ? m->prefix : "", w);
    const iv_tensor *t = iv_weights_find(m->weights, full);
    if (!t) {
        /* Heads with none of their tensors were let through (iv_head_absent):
         * this one has some, or is one the model cannot do without. */
        if (required)
            return iv_errf(err, IV_E_NOTFOUND, "checkpoint is missing head tensor \"%s\"%s", full,
                           required > 1 ? " while holding other tensors of the head (a partial head)" : "");
        st->w = NULL;
        return 0;
    }
    if (t->ndim != 2 || t->shape[1] != in)
        return iv_errf(err, IV_E_FORMAT, "head tensor \"%s\" does not take %lld inputs", full, (long long)in);
    int64_t out = t->shape[0];
    const int rb = m->biases_required;
    if (under_prefix) {
        if (iv_ld(m, w, out, in, &st->w, err) ||
            (rb ? iv_ld(m, b, out, -1, &st->b, err) : iv_ld_opt(m, b, out, -1, &st->b, err)))
            return -1;
    } else {
        if (iv_ld_top(m, w, out, in, &st->w, err) ||
            (rb ? iv_ld_top(m, b, out, -1, &st->b, err) : iv_ld_top_opt(m, b, out, -1, &st->b, err)))
            return -1;
    }
    st->act = act;
    return 0;
}

/* Whether the checkpoint holds any tensor of the top-level module `base`
 * (its .weight, .bias or the legacy .gamma/.beta). */
static int module_present(const iv_model *m, const char *base)
{
    static const char *const suffixes[] = {"weight", "bias", "gamma", "beta"};
    for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++) {
        char full[400];
        snprintf(full, sizeof full, "%s.%s", base, suffixes[i]);
        if (iv_weights_find(m->weights, full)) return 1;
    }
    return 0;
}

/* The task a head serves, for messages; NULL for heads that are the model
 * itself (ColBERT's projection), which stay required. */
static const char *head_task(const iv_model *m, const iv_head *h)
{
    if (h == &m->seq_head) return "sequence classification";
    if (h == &m->token_head) return "token classification";
    if (h == &m->mlm_head) return "masked-LM (SPLADE)";
    return NULL;
}

int iv_head_absent(iv_model *m, iv_head *h, const char *const *modules)
{
    const char *task = head_task(m, h);
    if (!task) return 0;
    for (int i = 0; modules[i]; i++)
        if (module_present(m, modules[i])) return 0;
    *h = (iv_head){0};
    m->absent_head = h;
    char names[200] = "";
    size_t off = 0;
    for (int i = 0; modules[i] && off < sizeof names; i++)
        off += (size_t)snprintf(names + off, sizeof names - off, "%s%s.*", i ? ", " : "", modules[i]);
    snprintf(m->missing_head, sizeof m->missing_head,
             "config.json declares %s, but the checkpoint holds only the base model: it has no weights for the "
             "%s head (%s), so %s is unavailable",
             m->cfg.architecture, task, names, task);
    IV_WARN("%s; loaded the base model", m->missing_head);
    return 1;
}

int iv_load_two_step_head(iv_model *m, iv_head *h, const char *first, int first_under_prefix, iv_act first_act,
                          const char *second, iv_err *err)
{
    const int64_t H = m->cfg.hidden_size;
    *h = (iv_head){0};
    /* A pooler under the backbone prefix belongs to the base model (BertModel keeps it). */
    const char *own[] = {second, first_under_prefix ? NULL : first, NULL};
    if (iv_head_absent(m, h, own)) return 0;
    const int req = head_task(m, h) ? 2 : 1;
    if (head_step(m, &h->steps[0], first, first_under_prefix, H, first_act, req, err)) return -1;
    const int64_t mid = h->steps[0].w->shape[0];
    if (head_step(m, &h->steps[1], second, 0, mid, IV_ACT_NONE, req, err)) return -1;
    h->n_steps = 2;
    h->out_dim = (int)h->steps[1].w->shape[0];
    return 0;
}

int iv_load_linear_head(iv_model *m, iv_head *h, const char *name, int64_t in_dim, iv_err *err)
{
    *h = (iv_head){0};
    if (iv_head_absent(m, h, (const char *const[]){name, NULL})) return 0;
    if (head_step(m, &h->steps[0], name, 0, in_dim, IV_ACT_NONE, head_task(m, h) ? 2 : 1, err)) return -1;
    h->n_steps = 1;
    h->out_dim = (int)h->steps[0].w->shape[0];
    return 0;
}

int iv_load_transform_head(iv_model *m, iv_head *h, const char *dense, iv_act act, const char *norm,
                           const char *out, iv_err *err)
{
    const int64_t H = m->cfg.hidden_size;
    *h = (iv_head){0};
    if (iv_head_absent(m, h, (const char *const[]){out, dense, norm, NULL})) return 0;
    if (head_step(m, &h->steps[0], dense, 0, H, act, 2, err)) return -1;
    const int64_t mid = h->steps[0].w->shape[0];
    iv_norm ln;
    if (iv_ld_layer_norm(m, norm, mid, 1, &ln, err)) return -1;
    h->steps[0].ln_w = ln.w;
    h->steps[0].ln_b = ln.b;
    h->steps[0].ln_eps = m->block.norm_eps;
    if (head_step(m, &h->steps[1], out, 0, mid, IV_ACT_NONE, 2, err)) return -1;
    h->n_steps = 2;
    h->out_dim = (int)h->steps[1].w->shape[0];
    return 0;
}

int iv_load_mlm_head(iv_model *m, const char *dense, iv_act act, const char *norm, const char *decoder,
                     const char *bias, iv_err *err)
{
    /* E: the embedding width, which the transform maps back to (hidden unless
     * the embeddings are projected, as in DeBERTa-v2 with embedding_size). */
    const int64_t H = m->cfg.hidden_size, V = m->embed.word->shape[0], E = m->embed.word->shape[1];
    char name[256];
    iv_head *h = &m->mlm_head;
    *h = (iv_head){0};
    /* The decoder is usually tied (absent); `bias` is a tensor name, not a module. */
    if (!iv_weights_find(m->weights, bias) && iv_head_absent(m, h, (const char *const[]){dense, norm, decoder, NULL}))
        return 0;
    if (head_step(m, &h->steps[0], dense, 0, H, act, 2, err)) return -1;
    if (h->steps[0].w->shape[0] != E)
        return iv_errf(err, IV_E_FORMAT, "MLM transform \"%s\" must map to the embedding width %lld", dense,
                       (long long)E);
    iv_norm ln;
    if (iv_ld_layer_norm(m, norm, E, 1, &ln, err)) return -1;
    if (m->biases_required && !ln.b) {
        snprintf(name, sizeof name, "%s.weight", norm);
        return iv_errf(err, IV_E_NOTFOUND, "checkpoint is missing tensor \"%s.%s\"", norm,
                       iv_weights_find(m->weights, name) ? "bias" : "beta");
    }
    h->steps[0].ln_w = ln.w;
    h->steps[0].ln_b = ln.b;
    h->steps[0].ln_eps = m->block.norm_eps;
    snprintf(name, sizeof name, "%s.weight", decoder);
    iv_head_step *dec = &h->steps[1];
    if (iv_ld_top_opt(m, name, V, E, &dec->w, err)) return -1;
    if (!dec->w) dec->w = m->embed.word; /* tied to the input embeddings, as saved by transformers */
    if (iv_ld_top_opt(m, bias, V, -1, &dec->b, err)) return -1;
    if (!dec->b) {
        snprintf(name, sizeof name, "%s.bias", decoder);
        if (iv_ld_top_opt(m, name, V, -1, &dec->b, err)) return -1;
    }
    if (m->biases_required && !dec->b)
        return iv_errf(err, IV_E_NOTFOUND, "checkpoint is missing tensor \"%s\"", bias);
    dec->act = IV_ACT_NONE;
    h->n_steps = 2;
    h->out_dim = (int)V;
    return 0;
}
