#include "models/block.h"

#include <math.h>
#include <string.h>

void iv_block_norm(const iv_ops *ops, const iv_block_spec *spec, const iv_norm *n, iv_view y, iv_view x,
                   const float *r)
{
    switch (spec->norm_kind) {
    case IV_NORM_LAYER:
        ops->layer_norm(ops, y, x, r, n->w, n->b, spec->norm_eps);
        break;
    case IV_NORM_RMS:
        ops->rms_norm(ops, y, x, r, n->w, spec->norm_eps, 0.0f);
        break;
    case IV_NORM_RMS_PLUS1:
        ops->rms_norm(ops, y, x, r, n->w, spec->norm_eps, 1.0f);
        break;
    }
}

/* Scratch buffers reused by every layer of one forward. */
typedef struct block_scratch {
    float *normed; /* [T, H] pre-norm input of a sublayer */
    float *qkv;    /* [T, (Hq + 2Hkv) * D] */
    float *attn;   /* [T, Hq * D] */
    float *h;      /* [T, H] */
    float *up;     /* [T, I or 2I] */
    float *gated;  /* [T, I] */
} block_scratch;

static iv_view view(float *p, int64_t rows, int64_t cols)
{
    iv_view v = {p, rows, cols, cols};
    return v;
}

static void attention_sublayer(const iv_ops *ops, const iv_block_spec *s, const iv_layer *L,
                               const iv_batch *b, const iv_attn_extras *ex, iv_view in, block_scratch *sc)
{
    const int64_t T = b->n_tokens;
    const int q_cols = s->n_heads * s->head_dim, kv_cols = s->n_kv_heads * s->head_dim;
    const int64_t qkv_cols = q_cols + 2 * (int64_t)kv_cols;
    iv_view qkv = view(sc->qkv, T, qkv_cols);
    ops->linear(ops, qkv, in, L->qkv_w, L->qkv_b, IV_ACT_NONE, NULL);

    iv_view q = {sc->qkv, T, q_cols, qkv_cols};
    iv_view k = {sc->qkv + q_cols, T, kv_cols, qkv_cols};
    iv_view v = {sc->qkv + q_cols + kv_cols, T, kv_cols, qkv_cols};
    if (L->q_norm_w) ops->head_rms_norm(ops, q, s->n_heads, s->head_dim, L->q_norm_w, s->qk_norm_eps, 0.0f);
    if (L->k_norm_w) ops->head_rms_norm(ops, k, s->n_kv_heads, s->head_dim, L->k_norm_w, s->qk_norm_eps, 0.0f);
    if (s->rot_dim && L->inv_freq) {
        iv_rope_args r = {q, s->n_heads, s->head_dim, s->rot_dim, ex->positions, L->inv_freq,
                          s->rope_interleaved, L->rope_attn_factor > 0 ? L->rope_attn_factor : 1.0f};
        ops->rope(ops, &r);
        r.x = k;
        r.n_heads = s->n_kv_heads;
        ops->rope(ops, &r);
    }
    iv_attn_args a = {
        .q = q, .k = k, .v = v,
        .out = view(sc->attn, T, q_cols),
        .cu_seqlens = b->cu_seqlens, .n_seqs = b->n_seqs,
        .n_heads = s->n_heads, .n_kv_heads = s->n_kv_heads, .head_dim = s->head_dim,
        .scale = s->attn_scale > 0 ? s->attn_scale : 1.0f / sqrtf((float)s->head_dim),
        .causal = s->causal,
        .window_left = L->window_left, .window_right = L->window_right,
        .alibi_slopes = ex->alibi_slopes,
        .bias = ex->bias, .bias_offsets = ex->bias_offsets,
        .key_mask = b->key_mask,
    };
    ops->attention(ops, &a);
}

/* Up projection, activation or GLU; returns the view feeding the down projection. */
static iv_view mlp_hidden(const iv_ops *ops, const iv_block_spec *s, const iv_layer *L, iv_view in,
                          block_scratch *sc, int64_t T)
{
    if (!s->gated) {
        iv_view up = view(sc->up, T, s->intermediate);
        ops->linear(ops, up, in, L->up_w, L->up_b, s->act, NULL);
        return up;
    }
    iv_view up = view(sc->up, T, 2 * (int64_t)s->intermediate);
    ops->linear(ops, up, in, L->up_w, L->up_b, IV_ACT_NONE, NULL);
    iv_view g = view(sc->gated, T, s->intermediate);
    ops->glu(ops, g, up, s->act, s->act_on_first);
    return g;
}

static void layer_post_norm(const iv_ops *ops, const iv_block_spec *s, const iv_layer *L, const iv_batch *b,
                            const iv_attn_extras *ex, float *x, block_scratch *sc)
{
    const int64_t T = b->n_tokens;
    iv_view xv = view(x, T, s->hidden), hv = view(sc->h, T, s->hidden);
    attention_sublayer(ops, s, L, b, ex, xv, sc);
    /* h = N1(x + O(attn)): the residual add rides in the projection's epilogue. */
    ops->linear(ops, hv, view(sc->attn, T, (int64_t)s->n_heads * s->head_dim), L->o_w, L->o_b, IV_ACT_NONE, x);
    iv_block_norm(ops, s, &L->attn_norm, hv, hv, NULL);
    iv_view mid = mlp_hidden(ops, s, L, hv, sc, T);
    ops->linear(ops, xv, mid, L->down_w, L->down_b, IV_ACT_NONE, sc->h);
    iv_block_norm(ops, s, &L->mlp_norm, xv, xv, NULL);
}

/* Pre-norm and sandwich layers: the residual stream x is only ever added to. */
static void layer_pre_norm(const iv_ops *ops, const iv_block_spec *s, const iv_layer *L, const iv_batch *b,
                           const iv_attn_extras *ex, float *x, block_scratch *sc)
{
    const int64_t T = b->n_tokens;
    iv_view xv = view(x, T, s->hidden), nv = view(sc->normed, T, s->hidden), hv = view(sc->h, T, s->hidden);
    const int sandwich = s->norm_place == IV_NORM_SANDWICH;
    iv_view in = xv;
    if (L->attn_norm.present) {
        iv_block_norm(ops, s, &L->attn_norm, nv, xv, NULL);
        in = nv;
    }
    attention_sublayer(ops, s, L, b, ex, in, sc);
    iv_view attn = view(sc->attn, T, (int64_t)s->n_heads * s->head_dim);
    if (sandwich) {
        ops->linear(ops, hv, attn, L->o_w, L->o_b, IV_ACT_NONE, NULL);
        iv_block_norm(ops, s, &L->post_attn_norm, hv, hv, NULL);
        ops->add(ops, xv, xv, hv);
    } else {
        ops->linear(ops, hv, attn, L->o_w, L->o_b, IV_ACT_NONE, x);
        memcpy(x, sc->h, (size_t)T * s->hidden * sizeof(float));
    }
    in = xv;
    if (L->mlp_norm.present) {
        iv_block_norm(ops, s, &L->mlp_norm, nv, xv, NULL);
        in = nv;
    }
    iv_view mid = mlp_hidden(ops, s, L, in, sc, T);
    if (sandwich) {
        ops->linear(ops, hv, mid, L->down_w, L->down_b, IV_ACT_NONE, NULL);
        iv_block_norm(ops, s, &L->post_mlp_norm, hv, hv, NULL);
        ops->add(ops, xv, xv, hv);
    } else {
        ops->linear(ops, hv, mid, L->down_w, L->down_b, IV_ACT_NONE, x);
        memcpy(x, sc->h, (size_t)T * s->hidden * sizeof(float));
    }
}

int iv_block_stack_forward(const iv_ops *ops, const iv_block_spec *spec, const iv_layer *layers,
                           int n_layers, const iv_batch *batch, const iv_attn_extras *extras, float *x,
                           iv_arena *arena)
{
    const int64_t T = batch->n_tokens;
    const int64_t qkv_cols = (int64_t)(spec->n_heads + 2 * spec->n_kv_heads) * spec->head_dim;
    const int64_t up_cols = (spec->gated ? 2 : 1) * (int64_t)spec->intermediate;
    block_scratch sc = {
        .normed = iv_arena_alloc(arena, (size_t)T * spec->hidden * sizeof(float)),
        .qkv = iv_arena_alloc(arena, (size_t)(T * qkv_cols) * sizeof(float)),
        .attn = iv_arena_alloc(arena, (size_t)T * spec->n_heads * spec->head_dim * sizeof(float)),
        .h = iv_arena_alloc(arena, (size_t)T * spec->hidden * sizeof(float)),
        .up = iv_arena_alloc(arena, (size_t)(T * up_cols) * sizeof(float)),
        .gated = iv_arena_alloc(arena, (size_t)T * spec->intermediate * sizeof(float)),
    };
    if (!sc.normed || !sc.qkv || !sc.attn || !sc.h || !sc.up || !sc.gated) return -1;
    for (int l = 0; l < n_layers; l++) {
        if (spec->norm_place == IV_NORM_POST) layer_post_norm(ops, spec, &layers[l], batch, extras, x, &sc);
        else layer_pre_norm(ops, spec, &layers[l], batch, extras, x, &sc);
    }
    return 0;
}
