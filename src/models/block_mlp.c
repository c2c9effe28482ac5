#include "models/block_mlp.h"

#include <string.h>

int iv_mlp_scratch_alloc(iv_mlp_scratch *sc, const iv_ops *ops, const iv_block_spec *s, const iv_layer *layers,
                         int n_layers, int64_t T, const iv_fwd_mem *mem)
{
    iv_arena *arena = mem->dev;
    memset(sc, 0, sizeof *sc);
    int any_dense = 0, max_e = 0, max_k = 0, max_i = 0, dense_i = 0;
    for (int l = 0; l < n_layers; l++) {
        const iv_moe *m = layers[l].moe ? layers[l].moe : layers[l].moe_beside;
        if (!layers[l].moe) {
            const int width = layers[l].intermediate ? layers[l].intermediate : s->intermediate;
            any_dense = 1;
            if (width > dense_i) dense_i = width;
        }
        if (!m) continue;
        if (m->n_experts > max_e) max_e = m->n_experts;
        if (m->top_k > max_k) max_k = m->top_k;
        if (m->intermediate > max_i) max_i = m->intermediate;
        if (m->shared_intermediate > max_i) max_i = m->shared_intermediate;
    }
    if (any_dense) {
        /* Ungated, up is the down projection's input; gated, the GLU output is. */
        const int64_t up_cols = (s->gated ? 2 : 1) * (int64_t)dense_i;
        sc->up = iv_act_alloc(ops, arena, T, up_cols, s->gated ? up_cols : iv_ops_act_stride(ops, up_cols));
        sc->gated = iv_act_alloc(ops, arena, T, dense_i, iv_ops_act_stride(ops, dense_i));
        if (!sc->up.data || !sc->gated.data) return -1;
    }
    if (max_e) {
        /* Dense rows throughout, as the routed path has always had them. */
        sc->logits = iv_act_alloc(ops, arena, T, max_e, max_e);
        sc->choice = iv_dev_arena_alloc(arena, (size_t)(T * max_k) * sizeof(int32_t));
        sc->weight = iv_dev_arena_alloc(arena, (size_t)(T * max_k) * sizeof(float));
        sc->offsets = iv_dev_arena_alloc(arena, (size_t)(max_e + 1) * sizeof(int32_t));
        sc->offsets_host = iv_arena_alloc(mem->host, (size_t)(max_e + 1) * sizeof(int32_t));
        sc->slots = iv_dev_arena_alloc(arena, (size_t)(T * max_k) * sizeof(int32_t));
        sc->xe = iv_act_alloc(ops, arena, T, s->hidden, s->hidden);
        sc->upe = iv_act_alloc(ops, arena, T, 2 * (int64_t)max_i, 2 * (int64_t)max_i);
        sc->ge = iv_act_alloc(ops, arena, T, max_i, max_i);
        if (!sc->logits.data || !sc->choice || !sc->weight || !sc->offsets || !sc->offsets_host || !sc->slots ||
            !sc->xe.data || !sc->upe.data || !sc->ge.data)
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

/* Dense [rows, cols] at the start of a scratch view. */
static iv_view head_rows(iv_view v, int64_t rows, int64_t cols)
{
    return iv_view_make(v.data, v.dtype, rows, cols, cols);
}

/* Routing, then each expert as two or three linears over the rows routed to
 * it, gathered before and scattered back (weighted) after; the scatters run
 * in ascending expert order and finish each token with bias and residual. */
void iv_block_moe(const iv_ops *ops, const iv_block_spec *s, const iv_moe *m, iv_view router_in, iv_view in,
                  iv_view out, const void *residual, iv_mlp_scratch *sc)
{
    const int64_t T = in.rows, H = s->hidden;
    const int E = m->n_experts, k = m->top_k;
    const iv_view logits = head_rows(sc->logits, T, E);
    ops->linear(ops, logits, router_in, m->router_w, NULL, IV_ACT_NONE, NULL);
    const iv_moe_route_args route = {logits, k, m->norm_topk_prob, sc->choice, sc->weight, sc->offsets, sc->slots};
    /* With a shared expert the residual comes last, as transformers adds it
     * to the MLP's whole output. */
    const void *routed_residual = m->shared_intermediate ? NULL : residual;
    ops->moe_route(ops, &route);
    /* The linears are sized on the host, so the run lengths come back: one
     * small download, a sync point per routed layer on a GPU. */
    ops->download(ops, sc->offsets_host, sc->offsets, (size_t)(E + 1) * sizeof(int32_t));
    for (int e = 0; e < E; e++) {
        const int32_t first = sc->offsets_host[e], n = sc->offsets_host[e + 1] - first;
        if (n <= 0) continue;
        const iv_view xe = head_rows(sc->xe, n, H), g = head_rows(sc->ge, n, m->intermediate);
        ops->moe_gather(ops, xe, in, sc->slots + first, k);
        if (m->plain_experts) {
            ops->linear(ops, g, xe, m->up_w[e], NULL, s->act, NULL);
        } else {
            const iv_view up = head_rows(sc->upe, n, 2 * (int64_t)m->intermediate);
            ops->linear(ops, up, xe, m->up_w[e], NULL, IV_ACT_NONE, NULL);
            ops->glu(ops, g, up, s->act, s->act_on_first);
        }
        ops->linear(ops, xe, g, m->down_w[e], NULL, IV_ACT_NONE, NULL);
        const iv_moe_scatter_args sa = {
            .out = out, .y = xe, .slots = sc->slots + first, .weight = sc->weight, .choice = sc->choice,
            .top_k = k, .expert = e, .bias = m->out_bias, .residual = routed_residual,
        };
        ops->moe_scatter(ops, &sa);
    }
    if (!m->shared_intermediate) return;
    /* out += sigmoid(x g^T) * shared(x); the router logits and the expert
     * buffers are free again. */
    const int64_t Is = m->shared_intermediate;
    const iv_view up = head_rows(sc->upe, T, 2 * Is), g = head_rows(sc->ge, T, Is), y = head_rows(sc->xe, T, H);
    const iv_view gate = head_rows(sc->logits, T, 1);
    ops->linear(ops, up, in, m->shared_up_w, NULL, IV_ACT_NONE, NULL);
    ops->glu(ops, g, up, s->act, s->act_on_first);
    ops->linear(ops, y, g, m->shared_down_w, NULL, IV_ACT_NONE, NULL);
    ops->linear(ops, gate, in, m->shared_gate_w, NULL, IV_ACT_NONE, NULL);
    ops->gate_mul(ops, y, y, gate, IV_ACT_SIGMOID);
    ops->add(ops, out, out, y);
    if (residual) ops->add(ops, out, out, iv_view_make((void *)residual, out.dtype, T, H, out.ld));
}

void iv_block_mlp(const iv_ops *ops, const iv_block_spec *s, const iv_layer *L, iv_view in, iv_view out,
                  const void *residual, iv_mlp_scratch *sc)
{
    if (L->moe) iv_block_moe(ops, s, L->moe, in, in, out, residual, sc);
    else dense_mlp(ops, s, L, in, out, residual, sc);
}
