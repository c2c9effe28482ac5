#include "models/decoder_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/json.h"
#include "models/encoder_common.h"
#include "models/loader.h"

/* name.weight [out, in] and, when with_bias, name.bias [out]. */
static int ld_linear(iv_model *m, const char *name, int64_t out, int64_t in, int with_bias, const iv_tensor **w,
                     const iv_tensor **b, iv_err *err)
{
    char full[320];
    snprintf(full, sizeof full, "%s.weight", name);
    if (iv_ld(m, full, out, in, w, err)) return -1;
    *b = NULL;
    if (!with_bias) return 0;
    snprintf(full, sizeof full, "%s.bias", name);
    return iv_ld(m, full, out, -1, b, err);
}

/* An RMSNorm: name.weight [dim] only. */
static int ld_rms(iv_model *m, const char *name, int64_t dim, iv_norm *n, iv_err *err)
{
    char full[320];
    snprintf(full, sizeof full, "%s.weight", name);
    n->present = 1;
    n->b = NULL;
    return iv_ld(m, full, dim, -1, &n->w, err);
}

/* SwiGLU/GeGLU down(act(gate(x)) * up(x)): gate and up fused into one [2I, H]
 * weight, gate rows first, so the block's GLU runs with act_on_first. */
static int ld_gated_mlp(iv_model *m, const char *pre, int64_t H, int64_t I, int bias, const iv_tensor **up_w,
                        const iv_tensor **up_b, const iv_tensor **down_w, const iv_tensor **down_b, iv_err *err)
{
    char name[320];
    const iv_tensor *w[2], *b[2];
    snprintf(name, sizeof name, "%sgate_proj", pre);
    if (ld_linear(m, name, I, H, bias, &w[0], &b[0], err)) return -1;
    snprintf(name, sizeof name, "%sup_proj", pre);
    if (ld_linear(m, name, I, H, bias, &w[1], &b[1], err)) return -1;
    if (iv_concat_rows(m, w, 2, up_w, err)) return -1;
    *up_b = NULL;
    if (bias && iv_concat_rows(m, b, 2, up_b, err)) return -1;
    snprintf(name, sizeof name, "%sdown_proj", pre);
    return ld_linear(m, name, H, I, bias, down_w, down_b, err);
}

/* Qwen-MoE layout: mlp.gate [E, H] router, mlp.experts.N.{gate,up,down}_proj. */
static int ld_moe(iv_model *m, int l, const iv_moe *tmpl, iv_moe **out, iv_err *err)
{
    const int64_t H = m->cfg.hidden_size, I = tmpl->intermediate;
    iv_moe *moe = iv_model_alloc(m, sizeof *moe);
    const iv_tensor **up = iv_model_alloc(m, (size_t)tmpl->n_experts * sizeof *up);
    const iv_tensor **down = iv_model_alloc(m, (size_t)tmpl->n_experts * sizeof *down);
    if (!moe || !up || !down) return iv_errf(err, IV_E_NOMEM, "out of memory");
    *moe = *tmpl;
    moe->up_w = up;
    moe->down_w = down;
    char name[320];
    snprintf(name, sizeof name, "layers.%d.mlp.gate.weight", l);
    if (iv_ld(m, name, tmpl->n_experts, H, &moe->router_w, err)) return -1;
    for (int e = 0; e < tmpl->n_experts; e++) {
        const iv_tensor *up_b, *down_b;
        snprintf(name, sizeof name, "layers.%d.mlp.experts.%d.", l, e);
        if (ld_gated_mlp(m, name, H, I, 0, &up[e], &up_b, &down[e], &down_b, err)) return -1;
    }
    if (tmpl->shared_intermediate > 0) {
        const iv_tensor *up_b, *down_b;
        snprintf(name, sizeof name, "layers.%d.mlp.shared_expert.", l);
        if (ld_gated_mlp(m, name, H, tmpl->shared_intermediate, 0, &moe->shared_up_w, &up_b, &moe->shared_down_w,
                         &down_b, err))
            return -1;
        snprintf(name, sizeof name, "layers.%d.mlp.shared_expert_gate.weight", l);
        if (iv_ld(m, name, 1, H, &moe->shared_gate_w, err)) return -1;
    }
    *out = moe;
    return 0;
}

/* Rows [h * 2D + half * D, + D) of each head h of a [heads * 2D, cols] q_proj
 * weight (cols < 0: a bias), stacked: half 0 the queries, 1 the gates. */
static const iv_tensor *split_gated_q(iv_model *m, const iv_tensor *w, int D, int half)
{
    const int64_t cols = w->ndim == 2 ? w->shape[1] : 1, heads = w->shape[0] / (2 * D);
    iv_tensor *t = iv_model_new_tensor(m, heads * D, w->ndim == 2 ? cols : -1);
    if (!t) return NULL;
    for (int64_t h = 0; h < heads; h++)
        memcpy((float *)t->data + h * D * cols, (const float *)w->data + (h * 2 * D + (int64_t)half * D) * cols,
               (size_t)(D * cols) * sizeof(float));
    return t;
}

/* Gated attention: qkv_w = [q; k; v; gate] from the interleaved q_proj. */
static int fuse_gated_qkv(iv_model *m, int D, const iv_tensor *qw, const iv_tensor *kw, const iv_tensor *vw,
                          const iv_tensor *qb, const iv_tensor *kb, const iv_tensor *vb, iv_layer *L, iv_err *err)
{
    const iv_tensor *w[4] = {split_gated_q(m, qw, D, 0), kw, vw, split_gated_q(m, qw, D, 1)};
    if (!w[0] || !w[3]) return iv_errf(err, IV_E_NOMEM, "out of memory");
    if (iv_concat_rows(m, w, 4, &L->qkv_w, err)) return -1;
    L->qkv_b = NULL;
    if (qb) {
        const iv_tensor *b[4] = {split_gated_q(m, qb, D, 0), kb, vb, split_gated_q(m, qb, D, 1)};
        if (!b[0] || !b[3]) return iv_errf(err, IV_E_NOMEM, "out of memory");
        if (iv_concat_rows(m, b, 4, &L->qkv_b, err)) return -1;
    }
    L->attn_out_gate = 1;
    return 0;
}

static int load_layer(iv_model *m, const iv_decoder_desc *d, int l, int attn_bias, int mlp_bias, iv_err *err)
{
    const iv_hf_config *c = &m->cfg;
    const int head_dim = d->layer_head_dim ? d->layer_head_dim[l] : c->head_dim;
    const int kv_heads = d->layer_kv_heads ? d->layer_kv_heads[l] : c->num_kv_heads;
    const int64_t H = c->hidden_size, D = head_dim, q_out = (int64_t)c->num_heads * D,
                  kv_out = (int64_t)kv_heads * D;
    iv_layer *L = &m->layers[l];
    if (head_dim != c->head_dim) L->head_dim = head_dim;
    if (kv_heads != c->num_kv_heads) L->n_kv_heads = kv_heads;
    char pre[64], name[320];
    snprintf(pre, sizeof pre, "layers.%d.", l);
    const iv_tensor *qw, *kw, *vw, *qb, *kb, *vb;
    const int qkv_bias = attn_bias || d->qkv_bias;
#define NAME(fmt) (snprintf(name, sizeof name, "%s" fmt, pre), name)
    if (d->own_mixer && d->own_mixer[l]) goto mlp;
    if (d->kv_reuse_layers && d->kv_reuse_layers[l]) { /* queries only; keys and values come from an earlier layer */
        if (ld_linear(m, NAME("self_attn.q_proj"), q_out, H, qkv_bias, &L->qkv_w, &L->qkv_b, err) ||
            ld_linear(m, NAME("self_attn.o_proj"), H, q_out, attn_bias, &L->o_w, &L->o_b, err))
            return -1;
        if (d->qk_norm && iv_ld(m, NAME("self_attn.q_norm.weight"), D, -1, &L->q_norm_w, err)) return -1;
        goto mlp;
    }
    const int k_eq_v = d->k_eq_v_layers && d->k_eq_v_layers[l];
    if (ld_linear(m, NAME("self_attn.q_proj"), q_out * (d->attn_out_gate ? 2 : 1), H, qkv_bias, &qw, &qb, err) ||
        ld_linear(m, NAME("self_attn.k_proj"), kv_out, H, qkv_bias, &kw, &kb, err) ||
        (!k_eq_v && ld_linear(m, NAME("self_attn.v_proj"), kv_out, H, qkv_bias, &vw, &vb, err)) ||
        ld_linear(m, NAME("self_attn.o_proj"), H, q_out, attn_bias, &L->o_w, &L->o_b, err))
        return -1;
    if (k_eq_v) { /* the values are the raw key projection (v_norm then differs from k_norm) */
        vw = kw;
        vb = kb;
    }
    if (d->attn_out_gate) {
        if (fuse_gated_qkv(m, head_dim, qw, kw, vw, qb, kb, vb, L, err)) return -1;
    } else if (iv_fuse_qkv(m, qw, kw, vw, qb, kb, vb, &L->qkv_w, &L->qkv_b, err)) {
        return -1;
    }
    if (d->qk_norm && (iv_ld(m, NAME("self_attn.q_norm.weight"), D, -1, &L->q_norm_w, err) ||
                       iv_ld(m, NAME("self_attn.k_norm.weight"), D, -1, &L->k_norm_w, err)))
        return -1;
mlp:
    if (ld_rms(m, NAME("input_layernorm"), H, &L->attn_norm, err)) return -1;
    if (d->sandwich) {
        if (ld_rms(m, NAME("post_attention_layernorm"), H, &L->post_attn_norm, err) ||
            ld_rms(m, NAME("pre_feedforward_layernorm"), H, &L->mlp_norm, err) ||
            ld_rms(m, NAME("post_feedforward_layernorm"), H, &L->post_mlp_norm, err))
            return -1;
    } else if (ld_rms(m, NAME("post_attention_layernorm"), H, &L->mlp_norm, err)) {
        return -1;
    }
    if (d->moe_layers && d->moe_layers[l]) {
        iv_moe *moe = NULL;
        if (ld_moe(m, l, &d->moe, &moe, err)) return -1;
        L->moe = moe;
    } else {
        const int width = d->layer_intermediate ? d->layer_intermediate[l] : c->intermediate_size;
        if (width != c->intermediate_size) L->intermediate = width;
        if (ld_gated_mlp(m, NAME("mlp."), H, width, mlp_bias, &L->up_w, &L->up_b, &L->down_w, &L->down_b, err))
            return -1;
    }
#undef NAME
    L->window_left = L->window_right = -1;
    return 0;
}

/* Sequence classification scores transformers' "last non-pad token"
 * (GenericForSequenceClassification: the rightmost id != pad_token_id; the
 * last token when the config has no pad id); token classification scores
 * every token. */
static int load_heads(iv_model *m, iv_err *err)
{
    const int64_t H = m->cfg.hidden_size;
    if (iv_arch_has_suffix(&m->cfg, "ForSequenceClassification")) {
        m->seq_head_pool = m->cfg.pad_token_id >= 0 ? IV_SEQ_POOL_LAST_NON_PAD : IV_SEQ_POOL_LAST;
        return iv_load_linear_head(m, &m->seq_head, "score", H, err);
    }
    if (iv_arch_has_suffix(&m->cfg, "ForTokenClassification"))
        return iv_load_linear_head(m, &m->token_head, "score", H, err);
    return 0;
}

int iv_decoder_load(iv_model *m, const iv_decoder_desc *d, iv_err *err)
{
    if (d->default_head_dim > 0 && !iv_json_get(m->cfg.json, "head_dim"))
        m->cfg.head_dim = d->default_head_dim;
    const iv_hf_config *c = &m->cfg;
    if (c->architecture[0] && iv_require_architecture(m, d->archs, err)) return -1;
    static const char *const default_prefixes[] = {"model.", "", NULL};
    if (iv_detect_prefix(m, d->prefixes ? d->prefixes : default_prefixes, "embed_tokens.weight", err)) return -1;
    const char *act_name = iv_json_str(c->json, d->act_key ? d->act_key : "hidden_act", c->hidden_act);
    int act = iv_act_from_name(act_name);
    if (act < 0) return iv_errf(err, IV_E_UNSUPPORTED, "unsupported MLP activation \"%s\"", act_name);
    if (c->intermediate_size <= 0) return iv_errf(err, IV_E_FORMAT, "config.json: intermediate_size missing");
    if (c->head_dim % 2) return iv_errf(err, IV_E_FORMAT, "config.json: head_dim %d must be even", c->head_dim);
    const cJSON *rope_params = iv_json_get(c->json, "rope_parameters");
    const double partial = iv_json_num(c->json, "partial_rotary_factor", iv_json_num(rope_params, "partial_rotary_factor", 1));
    if (partial != 1.0 && !d->partial_rotary)
        return iv_errf(err, IV_E_UNSUPPORTED, "partial_rotary_factor %g is not supported for model_type \"%s\"", partial,
                       c->model_type);
    int attn_bias, mlp_bias, causal;
    if (iv_json_bool_chk(c->json, "attention_bias", 0, &attn_bias, "config.json", err) ||
        iv_json_bool_chk(c->json, "mlp_bias", 0, &mlp_bias, "config.json", err) ||
        iv_json_bool_chk(c->json, "is_causal", 1, &causal, "config.json", err))
        return -1;
    m->block = (iv_block_spec){
        .hidden = c->hidden_size, .n_heads = c->num_heads, .n_kv_heads = c->num_kv_heads,
        .head_dim = c->head_dim, .intermediate = c->intermediate_size,
        .norm_kind = d->norm_kind, .norm_place = d->sandwich ? IV_NORM_SANDWICH : IV_NORM_PRE,
        .norm_eps = (float)c->layer_norm_eps, .causal = causal,
        .act = (iv_act)act, .gated = 1, .act_on_first = 1,
        .rot_dim = c->head_dim, .qk_norm_eps = (float)c->layer_norm_eps,
    };
    if (iv_ld_table(m, "embed_tokens.weight", c->hidden_size, 1, &m->embed.word, err)) return -1;
    m->n_layers = c->num_layers;
    m->layers = calloc((size_t)m->n_layers, sizeof *m->layers);
    if (!m->layers) return iv_errf(err, IV_E_NOMEM, "out of memory");
    for (int l = 0; l < m->n_layers; l++)
        if (load_layer(m, d, l, attn_bias, mlp_bias, err)) return -1;
    if (ld_rms(m, "norm", c->hidden_size, &m->final_norm, err)) return -1;
    return d->own_heads ? 0 : load_heads(m, err);
}

int iv_decoder_layer_types(const iv_model *m, unsigned char *sliding, int *found, iv_err *err)
{
    const cJSON *lt = iv_json_get(m->cfg.json, "layer_types");
    *found = 0;
    if (!lt || cJSON_IsNull(lt)) return 0;
    if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) < m->n_layers)
        return iv_errf(err, IV_E_FORMAT, "config.json: layer_types must list all %d layers", m->n_layers);
    for (int l = 0; l < m->n_layers; l++) {
        const cJSON *t = cJSON_GetArrayItem(lt, l);
        const char *s = cJSON_IsString(t) ? t->valuestring : "";
        if (!strcmp(s, "full_attention")) sliding[l] = 0;
        else if (!strcmp(s, "sliding_attention")) sliding[l] = 1;
        else
            return iv_errf(err, IV_E_UNSUPPORTED,
                           "config.json: layer_types[%d] \"%s\" is not supported (full_attention, "
                           "sliding_attention)",
                           l, s);
    }
    *found = 1;
    return 0;
}

void iv_decoder_windows(iv_model *m, const unsigned char *sliding, int window, iv_window_rule rule)
{
    for (int l = 0; l < m->n_layers; l++) {
        iv_layer *L = &m->layers[l];
        if (sliding && !sliding[l]) continue;
        switch (rule) {
        case IV_WINDOW_CAUSAL:
            L->window_left = window - 1;
            L->window_right = -1;
            break;
        case IV_WINDOW_SYMMETRIC:
            L->window_left = L->window_right = window;
            break;
        case IV_WINDOW_HALF:
            L->window_left = L->window_right = window / 2;
            break;
        }
    }
}

int iv_decoder_rope(iv_model *m, const iv_rope_params *p, const unsigned char *which, iv_err *err)
{
    float *inv = iv_model_alloc(m, (size_t)(p->rot_dim / 2) * sizeof(float));
    if (!inv) return iv_errf(err, IV_E_NOMEM, "out of memory");
    float attn_factor;
    if (iv_rope_inv_freq(p, inv, &attn_factor, err)) return -1;
    const int per_length = !strcmp(p->type, "dynamic") || !strcmp(p->type, "longrope");
    if (per_length) {
        for (int l = 0; which && l < m->n_layers; l++)
            if (!which[l])
                return iv_errf(err, IV_E_UNSUPPORTED,
                               "rope type \"%s\" on only some layers is not supported (its frequencies depend on "
                               "the sequence length)",
                               p->type);
        iv_rope_params *copy = iv_model_alloc(m, sizeof *copy);
        if (!copy) return iv_errf(err, IV_E_NOMEM, "out of memory");
        *copy = *p;
        m->seq_rope = copy;
        /* transformers grows the dynamic NTK base for any length, with no
         * cap at max_position_embeddings x factor; nor is there one here
         * (checkpoints that cap it, Nomic's hub code, set max_len after). */
        if (!strcmp(p->type, "dynamic")) m->max_len = IV_MODEL_NO_LENGTH_CAP;
    }
    m->block.rot_dim = p->rot_dim;
    for (int l = 0; l < m->n_layers; l++) {
        if (which && !which[l]) continue;
        m->layers[l].inv_freq = inv;
        m->layers[l].rope_attn_factor = attn_factor;
    }
    return 0;
}

int iv_decoder_kind_rope(iv_model *m, const char *kind, const unsigned char *which, int rot_dim, double default_theta,
                         iv_err *err)
{
    const cJSON *cfg = m->cfg.json;
    const cJSON *params = iv_json_get(cfg, "rope_parameters");
    const cJSON *sub = iv_json_get(params, kind);
    if (params && !cJSON_IsNull(params) && !cJSON_IsObject(sub))
        return iv_errf(err, IV_E_FORMAT, "config.json: rope_parameters has no \"%s\" entry", kind);
    iv_rope_params p;
    if (iv_rope_params_from_config(cfg, cJSON_IsObject(sub) ? sub : NULL, rot_dim, default_theta,
                                   m->cfg.max_position_embeddings, &p, err))
        return -1;
    return iv_decoder_rope(m, &p, which, err);
}

int iv_decoder_head_temperature(iv_model *m, iv_head *h, double temperature, iv_err *err)
{
    if (!(temperature > 0)) return iv_errf(err, IV_E_FORMAT, "config.json: temperature must be positive");
    if (temperature == 1.0 || !h->n_steps) return 0;
    iv_head_step *st = &h->steps[h->n_steps - 1];
    const float inv_t = (float)(1.0 / temperature);
    iv_tensor *w = iv_model_new_tensor(m, st->w->shape[0], st->w->shape[1]);
    if (!w) return iv_errf(err, IV_E_NOMEM, "out of memory");
    const float *src = st->w->data;
    float *dst = w->data;
    for (int64_t i = 0; i < st->w->shape[0] * st->w->shape[1]; i++) dst[i] = src[i] * inv_t;
    st->w = w;
    if (st->b) {
        iv_tensor *b = iv_model_new_tensor(m, st->b->shape[0], -1);
        if (!b) return iv_errf(err, IV_E_NOMEM, "out of memory");
        for (int64_t i = 0; i < st->b->shape[0]; i++) ((float *)b->data)[i] = ((const float *)st->b->data)[i] * inv_t;
        st->b = b;
    }
    return 0;
}
