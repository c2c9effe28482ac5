#include "models/block_mlp.h"

#include <string.h>

/* A dense FP32 view of host scratch (the routed path runs on host-visible tables). */
static iv_view view(float *p, int64_t rows, int64_t cols) { return iv_view_make(p, IV_F32, rows, cols, cols); }

int iv_mlp_scratch_alloc(iv_mlp_scratch *sc, const iv_ops *ops, const iv_block_spec *s, const iv_layer *layers,
                         int n_layers, int64_t T, iv_arena *arena)
{
    memset(sc, 0, sizeof *sc);
    int any_dense = 0, max_e = 0, max_k = 0, max_i = 0;
    for (int l = 0; l < n_layers; l++) {
        const iv_moe *m = layers[l].moe;
        if (!m) {
            any_dense = 1;
            continue;
        }
        if (m->n_experts > max_e) max_e = m->n_experts;
        if (m->top_k > max_k) max_k = m->top_k;
        if (m->intermediate > max_i) max_i = m->intermediate;
    }
    if (any_dense) {
        /* Ungated, up is the down projection's input; gated, the GLU output is. */
        const int64_t up_cols = (s->gated ? 2 : 1) * (int64_t)s->intermediate;
        sc->up = iv_act_alloc(ops, arena, T, up_cols, s->gated ? up_cols : iv_ops_act_stride(ops, up_cols));
        sc->gated = iv_act_alloc(ops, arena, T, s->intermediate, iv_ops_act_stride(ops, s->intermediate));
        if (!sc->up.data || !sc->gated.data) return -1;
    }
    if (max_e) {
        sc->logits = iv_arena_alloc(arena, (size_t)(T * max_e) * sizeof(float));
        sc->choice = iv_arena_alloc(arena, (size_t)(T * max_k) * sizeof(int32_t));
        sc->weight = iv_arena_alloc(arena, (size_t)(T * max_k) * sizeof(float));
        sc->count = iv_arena_alloc(arena, (size_t)(max_e + 1) * sizeof(int32_t));
        sc->slot = iv_arena_alloc(arena, (size_t)(T * max_k) * sizeof(int32_t));
        sc->xe = iv_arena_alloc(arena, (size_t)(T * s->hidden) * sizeof(float));
        sc->upe = iv_arena_alloc(arena, (size_t)(T * 2 * max_i) * sizeof(float));
        sc->ge = iv_arena_alloc(arena, (size_t)(T * max_i) * sizeof(float));
        if (!sc->logits || !sc->choice || !sc->weight || !sc->count || !sc->slot || !sc->xe || !sc->upe || !sc->ge)
            return -1;
    }
    return 0;
}

static void dense_mlp(const iv_ops *ops, const iv_block_spec *s, const iv_layer *L, iv_view in, iv_view out,
                      const void *residual, iv_mlp_scratch *sc)
{
    iv_view mid;
    if (!s->gated) {
        mid = iv_view_cols(sc->up, 0, s->intermediate);
        ops->linear(ops, mid, in, L->up_w, L->up_b, s->act, NULL);
    } else {
        const iv_view up = iv_view_cols(sc->up, 0, 2 * (int64_t)s->intermediate);
        ops->linear(ops, up, in, L->up_w, L->up_b, IV_ACT_NONE, NULL);
        mid = iv_view_cols(sc->gated, 0, s->intermediate);
        ops->glu(ops, mid, up, s->act, s->act_on_first);
    }
    ops->linear(ops, out, mid, L->down_w, L->down_b, IV_ACT_NONE, residual);
}

/* Top-k experts of each token from its router probabilities (largest first,
 * the lower index on ties), renormalised when the model asks. */
static void moe_route(const iv_moe *m, int64_t T, iv_mlp_scratch *sc)
{
    const int E = m->n_experts, k = m->top_k;
    for (int64_t t = 0; t < T; t++) {
        const float *p = sc->logits + t * E;
        int32_t *ch = sc->choice + t * k;
        float *w = sc->weight + t * k;
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int i = 0; i < j; i++) taken |= ch[i] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e;
            }
            ch[j] = best;
            w[j] = p[best];
        }
        if (m->norm_topk_prob) {
            float sum = 0;
            for (int j = 0; j < k; j++) sum += w[j];
            for (int j = 0; j < k; j++) w[j] /= sum;
        }
    }
    /* Counting sort of the T * k (token, choice) slots by expert; tokens stay ascending per expert. */
    memset(sc->count, 0, (size_t)(E + 1) * sizeof(int32_t));
    for (int64_t i = 0; i < T * k; i++) sc->count[sc->choice[i] + 1]++;
    for (int e = 0; e < E; e++) sc->count[e + 1] += sc->count[e];
    /* count[e] is now expert e's first slot; advance a cursor per expert, then shift back. */
    for (int64_t i = 0; i < T * k; i++) sc->slot[sc->count[sc->choice[i]]++] = (int32_t)i;
    for (int e = E; e > 0; e--) sc->count[e] = sc->count[e - 1];
    sc->count[0] = 0;
}

/* Each expert runs as three GEMMs (two for plain experts) over the rows routed to it. */
static void moe_mlp(const iv_ops *ops, const iv_block_spec *s, const iv_moe *m, iv_view in, iv_view out,
                    const float *residual, iv_mlp_scratch *sc)
{
    float *const out_rows = out.data;
    const float *const in_rows = in.data;
    const int64_t T = in.rows, H = s->hidden;
    const int k = m->top_k;
    ops->linear(ops, view(sc->logits, T, m->n_experts), in, m->router_w, NULL, IV_ACT_NONE, NULL);
    ops->softmax(ops, view(sc->logits, T, m->n_experts));
    moe_route(m, T, sc);
    for (int64_t t = 0; t < T; t++) memset(out_rows + t * out.ld, 0, (size_t)H * sizeof(float));
    for (int e = 0; e < m->n_experts; e++) {
        const int32_t first = sc->count[e], n = sc->count[e + 1] - first;
        if (n == 0) continue;
        for (int32_t r = 0; r < n; r++) {
            const int64_t tok = sc->slot[first + r] / k;
            memcpy(sc->xe + (int64_t)r * H, in_rows + tok * in.ld, (size_t)H * sizeof(float));
        }
        iv_view g = view(sc->ge, n, m->intermediate);
        if (m->plain_experts) {
            ops->linear(ops, g, view(sc->xe, n, H), m->up_w[e], NULL, s->act, NULL);
        } else {
            iv_view up = view(sc->upe, n, 2 * (int64_t)m->intermediate);
            ops->linear(ops, up, view(sc->xe, n, H), m->up_w[e], NULL, IV_ACT_NONE, NULL);
            ops->glu(ops, g, up, s->act, s->act_on_first);
        }
        ops->linear(ops, view(sc->xe, n, H), g, m->down_w[e], NULL, IV_ACT_NONE, NULL);
        for (int32_t r = 0; r < n; r++) {
            const int32_t slot = sc->slot[first + r];
            const float w = sc->weight[slot];
            const float *y = sc->xe + (int64_t)r * H;
            float *o = out_rows + (int64_t)(slot / k) * out.ld;
            for (int64_t c = 0; c < H; c++) o[c] += y[c] * w;
        }
    }
    const float *bias = m->out_bias ? iv_f32(m->out_bias) : NULL;
    if (bias || residual)
        for (int64_t t = 0; t < T; t++) {
            float *o = out_rows + t * out.ld;
            if (bias)
                for (int64_t c = 0; c < H; c++) o[c] += bias[c];
            if (residual) {
                const float *r = residual + t * out.ld;
                for (int64_t c = 0; c < H; c++) o[c] += r[c];
            }
        }
}

void iv_block_mlp(const iv_ops *ops, const iv_block_spec *s, const iv_layer *L, iv_view in, iv_view out,
                  const void *residual, iv_mlp_scratch *sc)
{
    if (L->moe) moe_mlp(ops, s, L->moe, in, out, residual, sc);
    else dense_mlp(ops, s, L, in, out, residual, sc);
}
