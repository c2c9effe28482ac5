#include "models/block.h"

#include <math.h>
#include <string.h>

#include "models/block_deltanet.h"
#include "models/block_mlp.h"
#include "models/taps.h"

void iv_block_norm(const iv_ops *ops, const iv_block_spec *spec, const iv_norm *n, iv_view y, iv_view x,
                   const void *r)
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

/* Scratch buffers reused by every layer of one forward. normed and attn,
 * the inputs of linear ops in every layout, have the rows the op table asks
 * for (iv_ops_act_stride); h keeps dense rows, as x does: pre-norm layers
 * copy it into x whole. */
typedef struct block_scratch {
    iv_view normed; /* [T, H] pre-norm input of a sublayer */
    iv_view qkv;    /* [T, (Hq + 2Hkv) * D] for the widest layer */
    iv_view attn;   /* [T, Hq * D] for the widest layer */
    iv_view h;      /* [T, H] */
    iv_view ple_pair; /* [T, 2P] per-layer input gate | the layer's input (layers with one) */
    iv_view ple_prod; /* [T, P] their product */
    iv_view conv;     /* [T, conv channels] DeltaNet layers' convolved q | k | v (those layers only) */
    iv_view moe_in, moe_out; /* [T, H] experts' input and output beside a dense MLP (moe_beside layers) */
    iv_view *kv_slots;       /* [2 * n_kv_slots] keys, values kept by kv_store layers */
    int n_kv_slots;
    iv_mlp_scratch mlp;
    /* Per-layer dynamic attention bias (layers with a dyn_bias hook only). */
    float *dyn_bias;      /* dev [dyn_cap] FP32 bias blocks of one group of sequences */
    int64_t dyn_cap;
    struct dyn_group *groups; /* the batch's groups, the same for every layer */
    int n_groups;
    void *dyn_state;      /* the hooks' per-forward slot */
    int layer;            /* the layer running (activation taps) */
    iv_arena *arena, *dev;
    /* The head's rows (iv_attn_extras.head_rows), for the call's last layer. */
    struct {
        int active;                 /* this layer computes only the head's rows past its keys and values */
        int64_t n;                  /* rows kept: one per sequence */
        iv_view q, x;               /* [n, widest q cols] their queries, [n, H] their residual stream */
        iv_view in;                 /* [n, H] their QKV input (split QKV) */
        iv_batch batch;             /* one row per sequence: the queries' batch (split QKV) */
        iv_attn_extras ex;          /* the extras with their positions (split QKV) */
        int32_t *q_cu;              /* host [n + 1]: 0, 1, .., n (one query per sequence) */
        const int32_t *q_cu_dev;
        const int32_t *ident_dev;   /* dev [T]: 0, 1, .., T - 1 (key rows, and their positions) */
    } keep;
} block_scratch;

/* Whole sequences [s0, s1) whose bias blocks fit dyn_cap together (or one
 * sequence), with their tables on the host and on the device. */
typedef struct dyn_group {
    int s0, s1;
    int64_t *offsets;           /* [s1 - s0 + 1] block offsets within the group */
    const int64_t *offsets_dev;
    int32_t *cu;                /* [s1 - s0 + 1] the group's cu_seqlens, rebased to its first token */
    const int32_t *cu_dev;
} dyn_group;

/* Width of the token mixer's output, o_w's input: attention heads, or a
 * DeltaNet's value heads. */
static int64_t mixer_cols(const iv_block_spec *s, const iv_layer *L)
{
    return L->deltanet ? (int64_t)L->deltanet->n_v_heads * L->deltanet->v_head_dim : (int64_t)s->n_heads * s->head_dim;
}

/* Default bias floats one group of sequences may use at once (64 MiB),
 * unless a single sequence needs more; the groups bound the memory of
 * per-layer biases on large batches. */
#define IV_DYN_BIAS_GROUP_FLOATS ((int64_t)16 << 20)

static void rope_rows(const iv_ops *ops, const iv_block_spec *s, const iv_layer *L, iv_view q, iv_view k,
                      const int32_t *pos, int64_t pos_axis_stride, const float *inv_freq)
{
    iv_rope_args r = {q, s->n_heads, s->head_dim, s->rot_dim, pos, inv_freq, s->rope_interleaved,
                      L->rope_attn_factor > 0 ? L->rope_attn_factor : 1.0f,
                      /* one position per token (stride 0): every axis is the same, plain RoPE */
                      pos_axis_stride ? s->rope_freq_section : NULL, pos_axis_stride};
    if (q.data) ops->rope(ops, &r); /* none: keys alone (the head's rows have their own queries) */
    if (!k.data) return; /* queries only: keys come rotated from a KV-sharing layer */
    r.x = k;
    r.n_heads = s->n_kv_heads;
    ops->rope(ops, &r);
}

/* RoPE on q and k; per sequence when the frequencies depend on its length. */
static void apply_rope(const iv_ops *ops, const iv_block_spec *s, const iv_layer *L, const iv_batch *b,
                       const iv_attn_extras *ex, iv_view q, iv_view k)
{
    if (!ex->seq_inv_freq) {
        rope_rows(ops, s, L, q, k, ex->positions_dev, ex->pos_axis_stride, L->inv_freq);
        return;
    }
    for (int i = 0; i < b->n_seqs; i++) {
        const int64_t r0 = b->cu_seqlens[i], r1 = b->cu_seqlens[i + 1];
        rope_rows(ops, s, L, q.data ? iv_view_rows(q, r0, r1) : q, k.data ? iv_view_rows(k, r0, r1) : k,
                  ex->positions_dev + r0,
                  ex->pos_axis_stride, ex->seq_inv_freq + (int64_t)i * (s->rot_dim / 2));
    }
}

/* Llama-4 query scaling: tokens with the same floor(pos / period) share a
 * factor, so each run of them is one scale call (a run of 1 below period). */
static void scale_queries_by_position(const iv_ops *ops, const iv_block_spec *s, const int32_t *pos, iv_view q)
{
    for (int64_t t0 = 0; t0 < q.rows;) {
        const int32_t bucket = pos[t0] / s->q_pos_scale_period;
        int64_t t1 = t0 + 1;
        while (t1 < q.rows && pos[t1] / s->q_pos_scale_period == bucket) t1++;
        /* transformers: 1 + beta * log(1 + floor(pos / period)), float32. */
        const float f = 1.0f + s->q_pos_scale_beta * logf(1.0f + floorf((float)pos[t0] / (float)s->q_pos_scale_period));
        if (f != 1.0f) ops->scale(ops, iv_view_rows(q, t0, t1), iv_view_rows(q, t0, t1), f);
        t0 = t1;
    }
}

/* GTE logn_attention_scale: q *= ln(L) / ln(logn_base) per sequence of L
 * tokens, in float32 as the remote code (attention_mask.sum(1).log() /
 * tensor(max_position_embeddings).log()), clipped below at 1 when asked. */
static void scale_queries_by_length(const iv_ops *ops, const iv_block_spec *s, const iv_batch *b, iv_view q)
{
    const float denom = logf((float)s->logn_base);
    for (int i = 0; i < b->n_seqs; i++) {
        float f = logf((float)iv_batch_seqlen(b, i)) / denom;
        if (s->logn_clip1 && f < 1.0f) f = 1.0f;
        iv_view qs = iv_view_rows(q, b->cu_seqlens[i], b->cu_seqlens[i + 1]);
        ops->scale(ops, qs, qs, f);
    }
}

/* Attention over one group's sequences only: rows rebased to its first token. */
static void attend_group(const iv_ops *ops, const iv_attn_args *all, const iv_batch *b, const dyn_group *g,
                         const block_scratch *sc)
{
    const int64_t r0 = b->cu_seqlens[g->s0], r1 = b->cu_seqlens[g->s1];
    iv_attn_args a = *all;
    a.q = iv_view_rows(all->q, r0, r1);
    a.k = iv_view_rows(all->k, r0, r1);
    a.v = iv_view_rows(all->v, r0, r1);
    a.out = iv_view_rows(all->out, r0, r1);
    a.cu_seqlens = g->cu;
    a.cu_seqlens_dev = g->cu_dev;
    a.n_seqs = g->s1 - g->s0;
    a.bias = sc->dyn_bias;
    a.bias_offsets = g->offsets;
    a.bias_offsets_dev = g->offsets_dev;
    a.key_mask = all->key_mask ? all->key_mask + r0 : NULL;
    ops->attention(ops, &a);
}

/* Attention with the layer's dynamic bias: per group of whole sequences,
 * the hook fills their bias blocks, the static bias (if any) is added, and
 * attention runs over the group. */
static int attention_dynamic_bias(const iv_ops *ops, const iv_block_spec *s, const iv_layer *L,
                                  const iv_batch *b, const iv_attn_extras *ex, const iv_attn_args *all,
                                  block_scratch *sc)
{
    for (int gi = 0; gi < sc->n_groups; gi++) {
        const dyn_group *g = &sc->groups[gi];
        iv_dyn_bias_args d = {
            .batch = b, .seq_begin = g->s0, .seq_end = g->s1, .cu_seqlens = g->cu, .cu_seqlens_dev = g->cu_dev,
            .q = all->q, .k = all->k, .n_heads = s->n_heads, .head_dim = s->head_dim,
            .bias = sc->dyn_bias, .offsets = g->offsets, .offsets_dev = g->offsets_dev, .w = L->dyn_bias_w,
            .state = &sc->dyn_state, .arena = sc->arena, .dev = sc->dev,
        };
        if (L->dyn_bias(ops, L->dyn_bias_ctx, &d)) return -1;
        if (ex->bias)
            for (int i = g->s0; i < g->s1; i++) {
                const int64_t n = g->offsets[i - g->s0 + 1] - g->offsets[i - g->s0];
                iv_view dst = iv_view_make(sc->dyn_bias + g->offsets[i - g->s0], IV_F32, 1, n, n);
                iv_view add = iv_view_make((float *)ex->bias + ex->bias_offsets[i], IV_F32, 1, n, n);
                ops->add(ops, dst, dst, add);
            }
        attend_group(ops, all, b, g, sc);
    }
    return 0;
}

/* Folded attention: cached prefixes' keys and values are copied into
 * their rows, keys and values of runs that become cache entries are copied
 * out, then each run attends to its ancestors' rows and its own. */
static void attention_folded(const iv_ops *ops, const iv_block_spec *s, const iv_layer *L, const iv_batch *b,
                             const iv_fold_attn *f, iv_view qkv_all, iv_view q, iv_view out, float scale, int layer)
{
    const int q_cols = s->n_heads * s->head_dim, kv_cols = s->n_kv_heads * s->head_dim;
    const iv_view k_all = iv_view_cols(qkv_all, q_cols, kv_cols), v_all = iv_view_cols(qkv_all, q_cols + kv_cols, kv_cols);
    for (int i = 0; i < f->n_load; i++) {
        const iv_fold_kv *c = &f->load[i];
        ops->scale(ops, iv_view_rows(k_all, c->row0, c->row0 + c->len), c->k[layer], 1.0f);
        ops->scale(ops, iv_view_rows(v_all, c->row0, c->row0 + c->len), c->v[layer], 1.0f);
    }
    for (int i = 0; i < f->n_store; i++) {
        const iv_fold_kv *c = &f->store[i];
        ops->scale(ops, c->k[layer], iv_view_rows(k_all, c->row0, c->row0 + c->len), 1.0f);
        ops->scale(ops, c->v[layer], iv_view_rows(v_all, c->row0, c->row0 + c->len), 1.0f);
    }
    const iv_attn_rows_args a = {
        .q = q, .out = out, .k = k_all, .v = v_all,
        .n_runs = b->n_seqs, .q_cu = b->cu_seqlens, .q_cu_dev = b->cu_seqlens_dev,
        .kv_cu = f->kv_cu, .kv_cu_dev = f->kv_cu_dev, .kv_rows = f->kv_rows_dev,
        .q_pos = f->pos_dev + f->n_cached, .kv_pos = f->pos_dev,
        .max_keys = f->max_keys,
        .n_heads = s->n_heads, .n_kv_heads = s->n_kv_heads, .head_dim = s->head_dim,
        .scale = scale, .window_left = L->window_left,
    };
    ops->attention_rows(ops, &a);
}

const char *iv_block_head_rows_blocker(const iv_block_spec *s, const iv_layer *L)
{
    if (L->deltanet) return "a DeltaNet token mixer";
    if (L->dyn_bias) return "a dynamic attention bias";
    if (L->ple_gate_w) return "per-layer inputs";
    if (L->attn_out_gate) return "gated attention outputs";
    if (!s->causal && L->window_left >= 0 && L->window_right < 0) return "a bidirectional window open on the right";
    if (L->window_left > (1 << 29) || L->window_right > (1 << 29)) return "an attention window over 2^29 tokens";
    return NULL;
}

/* The head's rows only (iv_attn_extras.head_rows): their queries against
 * every key of their own sequence through attention_rows, whose rule (key
 * position <= query position, and within window_left of it) expresses this
 * layer's mask exactly when positions are row indices: a causal query sits
 * at its own row; a bidirectional one at its row + window_right, with
 * window_left + window_right as the window (or at its sequence's last row,
 * no window, when both sides are unlimited). */
static int attention_kept_rows(const iv_ops *ops, const iv_block_spec *s, const iv_layer *L, const iv_batch *b,
                               const iv_attn_extras *ex, const iv_attn_args *a, block_scratch *sc)
{
    const int64_t n = sc->keep.n;
    int32_t *q_pos = iv_arena_alloc(sc->arena, (size_t)n * sizeof *q_pos);
    if (!q_pos) return -1;
    const int bidir_window = !s->causal && L->window_right >= 0;
    for (int64_t i = 0; i < n; i++)
        q_pos[i] = s->causal ? ex->head_rows[i]
                   : bidir_window ? ex->head_rows[i] + L->window_right
                                  : b->cu_seqlens[i + 1] - 1;
    const int32_t *q_pos_dev = iv_dev_upload_new(ops, sc->dev, q_pos, (size_t)n * sizeof *q_pos);
    if (!q_pos_dev) return -1;
    const iv_view q = iv_view_cols(sc->keep.q, 0, a->q.cols);
    if (a->q.data != q.data) ops->moe_gather(ops, q, a->q, ex->head_rows_dev, 1); /* else projected so */
    const iv_attn_rows_args r = {
        .q = q, .out = iv_view_rows(a->out, 0, n), .k = a->k, .v = a->v,
        .n_runs = b->n_seqs, .q_cu = sc->keep.q_cu, .q_cu_dev = sc->keep.q_cu_dev,
        .kv_cu = b->cu_seqlens, .kv_cu_dev = b->cu_seqlens_dev, .kv_rows = sc->keep.ident_dev,
        .q_pos = q_pos_dev, .kv_pos = sc->keep.ident_dev, .max_keys = b->max_seqlen,
        .n_heads = a->n_heads, .n_kv_heads = a->n_kv_heads, .head_dim = a->head_dim, .scale = a->scale,
        .window_left = s->causal ? L->window_left
                       : bidir_window && L->window_left >= 0 ? L->window_left + L->window_right
                                                             : -1,
    };
    ops->attention_rows(ops, &r);
    return 0;
}

/* A view cut to its first n rows (views without memory stay as they are). */
static iv_view first_rows(iv_view v, int64_t n) { return v.data ? iv_view_rows(v, 0, n) : v; }

/* Once the last layer's keys and values exist, only the head's rows go on:
 * their residual rows gathered into keep.x and the scratch views cut to as
 * many rows. Returns the residual stream the rest of the layer updates. */
static iv_view keep_rows(const iv_ops *ops, iv_view xv, const iv_attn_extras *ex, block_scratch *sc)
{
    if (!sc->keep.active) return xv;
    const int64_t n = sc->keep.n;
    ops->moe_gather(ops, sc->keep.x, xv, ex->head_rows_dev, 1);
    sc->normed = first_rows(sc->normed, n);
    sc->attn = first_rows(sc->attn, n);
    sc->h = first_rows(sc->h, n);
    sc->moe_in = first_rows(sc->moe_in, n);
    sc->moe_out = first_rows(sc->moe_out, n);
    sc->mlp.up = first_rows(sc->mlp.up, n);
    sc->mlp.gated = first_rows(sc->mlp.gated, n);
    return sc->keep.x;
}

static int attention_sublayer(const iv_ops *ops, const iv_block_spec *s, const iv_layer *L,
                              const iv_batch *b, const iv_attn_extras *ex, iv_view in, block_scratch *sc)
{
    if (L->deltanet) {
        iv_block_deltanet(ops, L->deltanet, b, in, sc->qkv, sc->conv, sc->attn);
        iv_tap(ops, "attention", sc->layer, iv_view_cols(sc->attn, 0, mixer_cols(s, L)));
        return 0;
    }
    const int64_t T = b->n_tokens, C = ex->fold ? ex->fold->n_cached : 0;
    const int q_cols = s->n_heads * s->head_dim, kv_cols = s->n_kv_heads * s->head_dim;
    const int reuse = L->kv_reuse > 0;
    const int64_t qkv_cols = q_cols + (reuse ? 0 : 2 * (int64_t)kv_cols) + (L->attn_out_gate ? q_cols : 0);
    /* Folded: cached prefixes' rows first, then the T computed ones. */
    const iv_view qkv_all = iv_view_make(sc->qkv.data, sc->qkv.dtype, C + T, qkv_cols, qkv_cols);
    const iv_view qkv = iv_view_rows(qkv_all, C, C + T);
    iv_view q = iv_view_cols(qkv, 0, q_cols);
    /* The queries' batch and extras: the head's rows alone when only their
     * queries are projected (the last layer's split QKV), else the batch's. */
    const iv_batch *qb = b;
    const iv_attn_extras *qex = ex;
    if (L->qkv_w) {
        ops->linear(ops, qkv, in, L->qkv_w, L->qkv_b, IV_ACT_NONE, NULL);
    } else {
        if (!reuse)
            ops->linear(ops, iv_view_cols(qkv, q_cols, qkv_cols - q_cols), in, L->kv_w, L->kv_b, IV_ACT_NONE, NULL);
        if (sc->keep.active) {
            ops->moe_gather(ops, sc->keep.in, in, ex->head_rows_dev, 1);
            q = iv_view_cols(sc->keep.q, 0, q_cols);
            qb = &sc->keep.batch;
            qex = &sc->keep.ex;
        }
        ops->linear(ops, q, sc->keep.active ? sc->keep.in : in, L->q_w, L->q_b, IV_ACT_NONE, NULL);
    }
    iv_view k = iv_view_cols(qkv, q_cols, kv_cols);
    iv_view v = iv_view_cols(qkv, q_cols + kv_cols, kv_cols);
    if (reuse) { /* keys and values as an earlier layer left them, normed and rotated */
        if (L->kv_reuse > sc->n_kv_slots || !sc->kv_slots[2 * (L->kv_reuse - 1)].data) return -1;
        k = sc->kv_slots[2 * (L->kv_reuse - 1)];
        v = sc->kv_slots[2 * (L->kv_reuse - 1) + 1];
    }
    const float qk_offset = s->norm_kind == IV_NORM_RMS_PLUS1 ? 1.0f : 0.0f;
    if (L->q_full_norm.present) iv_block_norm(ops, s, &L->q_full_norm, q, q, NULL);
    if (L->k_full_norm.present) iv_block_norm(ops, s, &L->k_full_norm, k, k, NULL);
    if (L->q_norm_w) ops->head_rms_norm(ops, q, s->n_heads, s->head_dim, L->q_norm_w, s->qk_norm_eps, qk_offset);
    if (!reuse) {
        if (L->k_norm_w)
            ops->head_rms_norm(ops, k, s->n_kv_heads, s->head_dim, L->k_norm_w, s->qk_norm_eps, qk_offset);
        if (s->v_norm) ops->head_rms_norm(ops, v, s->n_kv_heads, s->head_dim, NULL, s->qk_norm_eps, 0.0f);
    }
    if (s->rot_dim && L->inv_freq) {
        if (qb == b) {
            apply_rope(ops, s, L, b, ex, q, reuse ? (iv_view){0} : k);
        } else {
            apply_rope(ops, s, L, qb, qex, q, (iv_view){0});
            if (!reuse) apply_rope(ops, s, L, b, ex, (iv_view){0}, k);
        }
    }
    if (L->kv_store) {
        if (L->kv_store > sc->n_kv_slots) return -1;
        iv_view *slot = &sc->kv_slots[2 * (L->kv_store - 1)];
        if (!slot[0].data) {
            slot[0] = iv_act_alloc(ops, sc->dev, T, kv_cols, kv_cols);
            slot[1] = iv_act_alloc(ops, sc->dev, T, kv_cols, kv_cols);
            if (!slot[0].data || !slot[1].data) return -1;
        }
        if (slot[0].cols != kv_cols) return -1;
        ops->scale(ops, slot[0], k, 1.0f);
        ops->scale(ops, slot[1], v, 1.0f);
    }
    if (s->q_pos_scale_beta != 0) scale_queries_by_position(ops, s, qex->positions, q);
    if (s->logn_base > 1) scale_queries_by_length(ops, s, qb, q); /* never split: lengths are the batch's */
    iv_attn_args a = {
        .q = q, .k = k, .v = v,
        .out = iv_view_cols(sc->attn, 0, q_cols),
        .cu_seqlens = b->cu_seqlens, .cu_seqlens_dev = b->cu_seqlens_dev, .n_seqs = b->n_seqs,
        .max_seqlen = b->max_seqlen,
        .n_heads = s->n_heads, .n_kv_heads = s->n_kv_heads, .head_dim = s->head_dim,
        .scale = s->attn_scale > 0 ? s->attn_scale : 1.0f / sqrtf((float)s->head_dim),
        .causal = s->causal,
        .window_left = L->window_left, .window_right = L->window_right,
        .alibi_slopes = ex->alibi_slopes,
        .bias = ex->bias, .bias_offsets = ex->bias_offsets, .bias_offsets_dev = ex->bias_offsets_dev,
        .key_mask = b->key_mask_dev,
    };
    if (ex->fold) attention_folded(ops, s, L, b, ex->fold, qkv_all, q, a.out, a.scale, sc->layer);
    else if (sc->keep.active) {
        if (attention_kept_rows(ops, s, L, b, ex, &a, sc)) return -1;
        a.out = iv_view_rows(a.out, 0, sc->keep.n);
    } else if (!L->dyn_bias) ops->attention(ops, &a);
    else if (attention_dynamic_bias(ops, s, L, b, ex, &a, sc)) return -1;
    if (L->attn_out_gate) ops->gate_mul(ops, a.out, a.out, iv_view_cols(qkv, q_cols + 2 * (int64_t)kv_cols, q_cols),
                                        IV_ACT_SIGMOID);
    iv_tap(ops, "attention", sc->layer, a.out);
    return 0;
}

/* x += N(P(act(G(x)) * ple_l)): G's output and this layer's per-layer
 * input side by side in one [T, 2P] buffer, so the block's GLU without an
 * activation multiplies them. */
static void per_layer_input(const iv_ops *ops, const iv_block_spec *s, const iv_layer *L, const iv_attn_extras *ex,
                            iv_view xv, block_scratch *sc)
{
    const int64_t P = s->ple_dim;
    const iv_view pair = sc->ple_pair, prod = sc->ple_prod, hv = sc->h;
    const iv_view gate = iv_view_cols(pair, 0, P), own = iv_view_cols(pair, P, P);
    const iv_view ple = iv_view_cols(ex->ple, L->ple_layer * P, P);
    ops->linear(ops, gate, xv, L->ple_gate_w, NULL, s->act, NULL);
    ops->scale(ops, own, ple, 1.0f);
    ops->glu(ops, prod, pair, IV_ACT_NONE, 1);
    ops->linear(ops, hv, prod, L->ple_proj_w, NULL, IV_ACT_NONE, NULL);
    iv_block_norm(ops, s, &L->ple_norm, hv, hv, NULL);
    ops->add(ops, xv, xv, hv);
}

/* Gemma4's experts beside the dense MLP: hv (the dense output) becomes
 * N1(hv) + N2b(experts(N2a(x))), routed on RMS(x), x the residual stream. */
static void moe_beside(const iv_ops *ops, const iv_block_spec *s, const iv_layer *L, iv_view xv, iv_view hv,
                       block_scratch *sc)
{
    const iv_moe *m = L->moe_beside;
    iv_block_norm(ops, s, &L->post_mlp_norm_1, hv, hv, NULL);
    iv_view router_in = xv;
    if (m->router_unit_rms) {
        router_in = sc->normed; /* free again once the dense MLP has run */
        ops->scale(ops, router_in, xv, 1.0f);
        ops->head_rms_norm(ops, router_in, 1, s->hidden, NULL, s->norm_eps, 0.0f);
    }
    iv_block_norm(ops, s, &L->pre_moe_norm, sc->moe_in, xv, NULL);
    iv_block_moe(ops, s, m, router_in, sc->moe_in, sc->moe_out, NULL, &sc->mlp);
    iv_block_norm(ops, s, &L->post_moe_norm, sc->moe_out, sc->moe_out, NULL);
    ops->add(ops, hv, hv, sc->moe_out);
}

static int layer_post_norm(const iv_ops *ops, const iv_block_spec *s, const iv_layer *L, const iv_batch *b,
                           const iv_attn_extras *ex, iv_view xv, block_scratch *sc)
{
    if (attention_sublayer(ops, s, L, b, ex, xv, sc)) return -1;
    xv = keep_rows(ops, xv, ex, sc);
    const iv_view hv = sc->h;
    /* h = N1(x + O(attn)): the residual add rides in the projection's epilogue. */
    const iv_view attn = iv_view_cols(sc->attn, 0, mixer_cols(s, L));
    ops->linear(ops, hv, attn, L->o_w, L->o_b, IV_ACT_NONE, xv.data);
    iv_block_norm(ops, s, &L->attn_norm, hv, hv, NULL);
    if (L->attn_outer_norm.present) iv_block_norm(ops, s, &L->attn_outer_norm, hv, hv, xv.data);
    iv_block_mlp(ops, s, L, hv, xv, hv.data, &sc->mlp);
    iv_block_norm(ops, s, &L->mlp_norm, xv, xv, NULL);
    return 0;
}

/* Pre-norm and sandwich layers: the residual stream x is only ever added to. */
static int layer_pre_norm(const iv_ops *ops, const iv_block_spec *s, const iv_layer *L, const iv_batch *b,
                          const iv_attn_extras *ex, iv_view xv, block_scratch *sc)
{
    const int sandwich = s->norm_place == IV_NORM_SANDWICH;
    iv_view in = xv;
    if (L->attn_norm.present) {
        iv_block_norm(ops, s, &L->attn_norm, sc->normed, xv, NULL);
        in = sc->normed;
    }
    if (attention_sublayer(ops, s, L, b, ex, in, sc)) return -1;
    xv = keep_rows(ops, xv, ex, sc);
    const iv_view hv = sc->h, nv = sc->normed;
    const iv_view attn = iv_view_cols(sc->attn, 0, mixer_cols(s, L));
    if (sandwich) {
        ops->linear(ops, hv, attn, L->o_w, L->o_b, IV_ACT_NONE, NULL);
        iv_block_norm(ops, s, &L->post_attn_norm, hv, hv, NULL);
        ops->add(ops, xv, xv, hv);
    } else {
        ops->linear(ops, hv, attn, L->o_w, L->o_b, IV_ACT_NONE, xv.data);
        ops->scale(ops, xv, hv, 1.0f);
    }
    in = xv;
    if (L->mlp_norm.present) {
        iv_block_norm(ops, s, &L->mlp_norm, nv, xv, NULL);
        in = nv;
    }
    if (sandwich) {
        iv_block_mlp(ops, s, L, in, hv, NULL, &sc->mlp);
        if (L->moe_beside) moe_beside(ops, s, L, xv, hv, sc);
        iv_block_norm(ops, s, &L->post_mlp_norm, hv, hv, NULL);
        ops->add(ops, xv, xv, hv);
    } else {
        iv_block_mlp(ops, s, L, in, hv, xv.data, &sc->mlp);
        ops->scale(ops, xv, hv, 1.0f);
    }
    if (L->ple_gate_w) per_layer_input(ops, s, L, ex, xv, sc);
    if (L->scale_out) ops->scale(ops, xv, xv, L->out_scale);
    return 0;
}

/* Scratch for layers with a dynamic attention bias: the bias of one group
 * of sequences (at most the spec's group size, or the longest sequence's),
 * and the groups' tables, uploaded once for all layers. */
static int dyn_bias_scratch_alloc(const iv_ops *ops, block_scratch *sc, const iv_block_spec *spec,
                                  const iv_layer *layers, int n_layers, const iv_batch *b)
{
    int any = 0;
    for (int l = 0; l < n_layers; l++) any |= layers[l].dyn_bias != NULL;
    if (!any) return 0;
    int64_t total = 0, largest = 0;
    for (int i = 0; i < b->n_seqs; i++) {
        const int64_t len = iv_batch_seqlen(b, i), need = (int64_t)spec->n_heads * len * len;
        total += need;
        if (need > largest) largest = need;
    }
    const int64_t group = spec->dyn_bias_group_floats > 0 ? spec->dyn_bias_group_floats : IV_DYN_BIAS_GROUP_FLOATS;
    sc->dyn_cap = total < group ? total : group;
    if (sc->dyn_cap < largest) sc->dyn_cap = largest;
    sc->dyn_bias = iv_dev_arena_alloc(sc->dev, (size_t)sc->dyn_cap * sizeof(float));
    sc->groups = iv_arena_alloc(sc->arena, (size_t)(b->n_seqs > 0 ? b->n_seqs : 1) * sizeof *sc->groups);
    if (!sc->dyn_bias || !sc->groups) return -1;
    sc->n_groups = 0;
    for (int s0 = 0; s0 < b->n_seqs;) {
        int s1 = s0;
        int64_t used = 0;
        while (s1 < b->n_seqs) {
            const int64_t len = iv_batch_seqlen(b, s1), need = (int64_t)spec->n_heads * len * len;
            if (s1 > s0 && used + need > sc->dyn_cap) break;
            used += need;
            s1++;
        }
        dyn_group *g = &sc->groups[sc->n_groups++];
        const int n = s1 - s0;
        g->s0 = s0;
        g->s1 = s1;
        g->offsets = iv_arena_alloc(sc->arena, (size_t)(n + 1) * sizeof(int64_t));
        g->cu = iv_arena_alloc(sc->arena, (size_t)(n + 1) * sizeof(int32_t));
        if (!g->offsets || !g->cu) return -1;
        g->offsets[0] = 0;
        for (int i = s0; i <= s1; i++) {
            g->cu[i - s0] = b->cu_seqlens[i] - b->cu_seqlens[s0];
            if (i > s0) {
                const int64_t len = iv_batch_seqlen(b, i - 1);
                g->offsets[i - s0] = g->offsets[i - s0 - 1] + (int64_t)spec->n_heads * len * len;
            }
        }
        g->offsets_dev = iv_dev_upload_new(ops, sc->dev, g->offsets, (size_t)(n + 1) * sizeof(int64_t));
        g->cu_dev = iv_dev_upload_new(ops, sc->dev, g->cu, (size_t)(n + 1) * sizeof(int32_t));
        if (!g->offsets_dev || !g->cu_dev) return -1;
        s0 = s1;
    }
    return 0;
}

/* Scratch for the head's rows (iv_attn_extras.head_rows): refused (-1)
 * when the last layer cannot compute them alone or the batch brings what
 * attention_rows has no place for (a key mask, a bias, ALiBi, a fold). */
static int keep_scratch_alloc(const iv_ops *ops, block_scratch *sc, const iv_block_spec *spec,
                              const iv_layer *layers, int n_layers, const iv_batch *b, int64_t q_cols,
                              const iv_attn_extras *ex)
{
    if (n_layers < 1 || !ops->attention_rows || b->key_mask_dev || ex->bias || ex->alibi_slopes || ex->fold ||
        iv_block_head_rows_blocker(spec, &layers[n_layers - 1]))
        return -1;
    const int64_t n = b->n_seqs, T = b->n_tokens;
    sc->keep.n = n;
    sc->keep.q = iv_act_alloc(ops, sc->dev, n, q_cols, q_cols);
    sc->keep.x = iv_act_alloc(ops, sc->dev, n, spec->hidden, spec->hidden);
    sc->keep.q_cu = iv_arena_alloc(sc->arena, (size_t)(n + 1) * sizeof(int32_t));
    int32_t *ident = iv_arena_alloc(sc->arena, (size_t)(T > 0 ? T : 1) * sizeof(int32_t));
    if (!sc->keep.q.data || !sc->keep.x.data || !sc->keep.q_cu || !ident) return -1;
    for (int64_t i = 0; i <= n; i++) sc->keep.q_cu[i] = (int32_t)i;
    for (int64_t t = 0; t < T; t++) ident[t] = (int32_t)t;
    sc->keep.q_cu_dev = iv_dev_upload_new(ops, sc->dev, sc->keep.q_cu, (size_t)(n + 1) * sizeof(int32_t));
    sc->keep.ident_dev = iv_dev_upload_new(ops, sc->dev, ident, (size_t)(T > 0 ? T : 1) * sizeof(int32_t));
    if (!sc->keep.q_cu_dev || !sc->keep.ident_dev) return -1;
    if (layers[n_layers - 1].qkv_w) return 0;
    /* A split QKV projects the head's rows' queries alone: their inputs, and
     * a batch of one row per sequence (row i is sequence i, whose rotary
     * frequencies it keeps) with those rows' positions. */
    int32_t *pos = iv_arena_alloc(sc->arena, (size_t)(n > 0 ? n : 1) * sizeof *pos);
    sc->keep.in = iv_act_alloc(ops, sc->dev, n, spec->hidden, iv_ops_act_stride(ops, spec->hidden));
    if (!pos || !sc->keep.in.data || ex->pos_axis_stride) return -1;
    for (int64_t i = 0; i < n; i++) pos[i] = ex->positions[ex->head_rows[i]];
    sc->keep.ex = *ex;
    sc->keep.ex.positions = pos;
    sc->keep.ex.positions_dev = iv_dev_upload_new(ops, sc->dev, pos, (size_t)(n > 0 ? n : 1) * sizeof *pos);
    sc->keep.batch = (iv_batch){.n_seqs = (int)n, .n_tokens = n, .cu_seqlens = sc->keep.q_cu,
                                .cu_seqlens_dev = sc->keep.q_cu_dev, .max_seqlen = 1};
    return sc->keep.ex.positions_dev ? 0 : -1;
}

/* The spec as layer L sees it: its own attention geometry where it has one. */
static iv_block_spec layer_spec(const iv_block_spec *s, const iv_layer *L)
{
    iv_block_spec ls = *s;
    if (L->head_dim) ls.head_dim = L->head_dim;
    if (L->n_kv_heads) ls.n_kv_heads = L->n_kv_heads;
    if (L->rot_dim) ls.rot_dim = L->rot_dim;
    if (L->intermediate) ls.intermediate = L->intermediate;
    return ls;
}

int iv_block_stack_forward(const iv_ops *ops, const iv_block_spec *spec, const iv_layer *layers,
                           int n_layers, const iv_batch *batch, const iv_attn_extras *extras, iv_view x,
                           const iv_fwd_mem *mem)
{
    iv_arena *arena = mem->dev;
    const int64_t T = batch->n_tokens;
    /* Scratch for the widest layer. */
    int64_t qkv_cols = (int64_t)(spec->n_heads + 2 * spec->n_kv_heads) * spec->head_dim;
    int64_t attn_cols = (int64_t)spec->n_heads * spec->head_dim;
    int any_ple = 0, any_moe_beside = 0, n_kv_slots = 0;
    int64_t conv_cols = 0;
    for (int l = 0; l < n_layers; l++) {
        const iv_block_spec ls = layer_spec(spec, &layers[l]);
        const int64_t q = (int64_t)ls.n_heads * ls.head_dim, kv = (int64_t)ls.n_kv_heads * ls.head_dim;
        const int64_t gate = layers[l].attn_out_gate ? q : 0;
        if (q + 2 * kv + gate > qkv_cols) qkv_cols = q + 2 * kv + gate;
        if (q > attn_cols) attn_cols = q;
        if (layers[l].deltanet) {
            const iv_deltanet *d = layers[l].deltanet;
            const int64_t cc = iv_deltanet_conv_cols(d), w = iv_deltanet_proj_cols(d), vcols = (int64_t)d->n_v_heads * d->v_head_dim;
            if (w > qkv_cols) qkv_cols = w;
            if (vcols > attn_cols) attn_cols = vcols;
            if (cc > conv_cols) conv_cols = cc;
        }
        any_ple |= layers[l].ple_gate_w != NULL;
        any_moe_beside |= layers[l].moe_beside != NULL;
        if (layers[l].kv_store > n_kv_slots) n_kv_slots = layers[l].kv_store;
        if (layers[l].kv_reuse > n_kv_slots) n_kv_slots = layers[l].kv_reuse;
    }
    const int64_t H = spec->hidden;
    block_scratch sc = {
        .normed = iv_act_alloc(ops, arena, T, H, iv_ops_act_stride(ops, H)),
        .qkv = iv_act_alloc(ops, arena, T + (extras->fold ? extras->fold->n_cached : 0), qkv_cols, qkv_cols),
        .attn = iv_act_alloc(ops, arena, T, attn_cols, iv_ops_act_stride(ops, attn_cols)),
        .h = iv_act_alloc(ops, arena, T, H, H),
    };
    if (!sc.normed.data || !sc.qkv.data || !sc.attn.data || !sc.h.data) return -1;
    if (any_ple) {
        sc.ple_pair = iv_act_alloc(ops, arena, T, 2 * (int64_t)spec->ple_dim, 2 * (int64_t)spec->ple_dim);
        sc.ple_prod = iv_act_alloc(ops, arena, T, spec->ple_dim, spec->ple_dim);
        if (!sc.ple_pair.data || !sc.ple_prod.data) return -1;
    }
    if (any_moe_beside) {
        sc.moe_in = iv_act_alloc(ops, arena, T, H, iv_ops_act_stride(ops, H));
        sc.moe_out = iv_act_alloc(ops, arena, T, H, H);
        if (!sc.moe_in.data || !sc.moe_out.data) return -1;
    }
    if (n_kv_slots) {
        /* Filled by the storing layers (at their widths) as the stack runs. */
        sc.kv_slots = iv_arena_alloc(mem->host, (size_t)(2 * n_kv_slots) * sizeof *sc.kv_slots);
        if (!sc.kv_slots) return -1;
        memset(sc.kv_slots, 0, (size_t)(2 * n_kv_slots) * sizeof *sc.kv_slots);
        sc.n_kv_slots = n_kv_slots;
    }
    if (conv_cols) {
        sc.conv = iv_act_alloc(ops, arena, T, conv_cols, conv_cols);
        if (!sc.conv.data) return -1;
    }
    if (iv_mlp_scratch_alloc(&sc.mlp, ops, spec, layers, n_layers, T, mem)) return -1;
    sc.arena = mem->host;
    sc.dev = mem->dev;
    if (dyn_bias_scratch_alloc(ops, &sc, spec, layers, n_layers, batch)) return -1;
    if (extras->head_rows && keep_scratch_alloc(ops, &sc, spec, layers, n_layers, batch, attn_cols, extras))
        return -1;
    for (int l = 0; l < n_layers; l++) {
        const iv_block_spec ls = layer_spec(spec, &layers[l]);
        sc.layer = extras->first_layer + l;
        sc.keep.active = extras->head_rows && l == n_layers - 1;
        const int rc = spec->norm_place == IV_NORM_POST ? layer_post_norm(ops, &ls, &layers[l], batch, extras, x, &sc)
                                                        : layer_pre_norm(ops, &ls, &layers[l], batch, extras, x, &sc);
        if (rc) return -1;
        if (sc.keep.active) ops->scale(ops, iv_view_rows(x, 0, sc.keep.n), sc.keep.x, 1.0f);
        iv_tap(ops, "layer", sc.layer, sc.keep.active ? iv_view_rows(x, 0, sc.keep.n) : x);
    }
    return 0;
}
