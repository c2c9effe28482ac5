#include "models/deberta_attn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/loader.h"

int iv_deberta_bucket(int rel, int buckets, int max_position)
{
    if (buckets <= 0 || max_position <= 0) return rel;
    const int mid = buckets / 2;
    const int abs_rel = rel < 0 ? -rel : rel;
    if (abs_rel <= mid) return rel; /* |rel| < mid keeps rel, and so does |rel| == mid */
    /* torch: ceil(log(abs / mid) / log(tensor((max_position - 1) / mid)) * (mid - 1)) + mid, float32 */
    const float denom = logf((float)((double)(max_position - 1) / mid));
    const float log_pos = ceilf(logf((float)abs_rel / (float)mid) / denom * (float)(mid - 1)) + (float)mid;
    return rel < 0 ? -(int)log_pos : (int)log_pos;
}

/* Per-forward tables and scratch shared by all layers (the hook's state slot). */
typedef struct deberta_state {
    int max_len;      /* longest sequence of the batch */
    int lo, ncols;    /* rows [lo, lo + ncols) of the 2 span relative rows reached */
    int32_t *c2p_col; /* dev [2 max_len - 1] by d + max_len - 1 (d = i - j): c2p(d) - lo */
    int32_t *p2c_col; /* dev, the same for p2c(d) - lo */
    iv_view c2p, p2c; /* [T, ncols] one head's products (data NULL when the term is off) */
} deberta_state;

static int clamp_row(int v, int span) { return v < 0 ? 0 : v > 2 * span - 1 ? 2 * span - 1 : v; }

static deberta_state *state_new(const iv_ops *ops, const iv_deberta_rel *r, const iv_batch *b, iv_arena *arena,
                                iv_arena *dev)
{
    deberta_state *st = iv_arena_alloc(arena, sizeof *st);
    if (!st) return NULL;
    memset(st, 0, sizeof *st);
    for (int s = 0; s < b->n_seqs; s++)
        if (iv_batch_seqlen(b, s) > st->max_len) st->max_len = iv_batch_seqlen(b, s);
    const int n_d = st->max_len > 0 ? 2 * st->max_len - 1 : 1;
    int32_t *c2p_col = iv_arena_alloc(arena, (size_t)n_d * sizeof(int32_t));
    int32_t *p2c_col = iv_arena_alloc(arena, (size_t)n_d * sizeof(int32_t));
    if (!c2p_col || !p2c_col) return NULL;
    int lo = 2 * r->span, hi = -1;
    for (int k = 0; k < n_d; k++) {
        const int d = k - (st->max_len - 1);
        c2p_col[k] = clamp_row(iv_deberta_bucket(d, r->buckets, r->max_relative) + r->span, r->span);
        p2c_col[k] = clamp_row(-iv_deberta_bucket(-d, r->buckets, r->max_relative) + r->span, r->span);
        if (r->c2p) {
            if (c2p_col[k] < lo) lo = c2p_col[k];
            if (c2p_col[k] > hi) hi = c2p_col[k];
        }
        if (r->p2c) {
            if (p2c_col[k] < lo) lo = p2c_col[k];
            if (p2c_col[k] > hi) hi = p2c_col[k];
        }
    }
    for (int k = 0; k < n_d; k++) {
        c2p_col[k] -= lo;
        p2c_col[k] -= lo;
    }
    st->lo = lo;
    st->ncols = hi - lo + 1;
    st->c2p_col = iv_dev_upload_new(ops, dev, c2p_col, (size_t)n_d * sizeof(int32_t));
    st->p2c_col = iv_dev_upload_new(ops, dev, p2c_col, (size_t)n_d * sizeof(int32_t));
    if (!st->c2p_col || !st->p2c_col) return NULL;
    if (r->c2p && !(st->c2p = iv_act_alloc(ops, dev, b->n_tokens, st->ncols, st->ncols)).data) return NULL;
    if (r->p2c && !(st->p2c = iv_act_alloc(ops, dev, b->n_tokens, st->ncols, st->ncols)).data) return NULL;
    return st;
}

/* out [rows, ncols] = x [rows, head_dim] . P_h[lo .. lo + ncols)^T, P [n_heads * 2 span, head_dim]. */
static iv_view project_head(const iv_ops *ops, const deberta_state *st, const iv_tensor *pos, int span, int h,
                            iv_view x, iv_view out)
{
    iv_tensor w = *pos;
    const int64_t head_dim = pos->shape[1];
    w.data = (char *)pos->data + (size_t)(((int64_t)h * 2 * span + st->lo) * head_dim) * iv_dtype_size(pos->dtype);
    w.shape[0] = st->ncols;
    const iv_view y = iv_view_make(out.data, out.dtype, x.rows, st->ncols, st->ncols);
    ops->linear(ops, y, x, &w, NULL, IV_ACT_NONE, NULL);
    return y;
}

int iv_deberta_attn_bias(const iv_ops *ops, const void *ctx, const iv_dyn_bias_args *a)
{
    const iv_deberta_layer *dl = ctx;
    const iv_deberta_rel *r = dl->rel;
    const iv_batch *b = a->batch;
    deberta_state *st = *a->state;
    if (!st) {
        st = state_new(ops, r, b, a->arena, a->dev);
        if (!st) return -1;
        *a->state = st;
    }
    const int D = a->head_dim;
    const int64_t t0 = b->cu_seqlens[a->seq_begin], t1 = b->cu_seqlens[a->seq_end];
    iv_rel_bias_args g = {
        .bias = a->bias, .offsets = a->offsets, .offsets_dev = a->offsets_dev,
        .cu_seqlens = a->cu_seqlens, .cu_seqlens_dev = a->cu_seqlens_dev, .n_seqs = a->seq_end - a->seq_begin,
        .c2p_idx = st->c2p_col, .p2c_idx = st->p2c_col, .idx_mid = st->max_len - 1, .scale = r->scale,
    };
    for (int h = 0; h < a->n_heads; h++) {
        const iv_view qh = iv_view_sub(a->q, t0, t1, (int64_t)h * D, D);
        const iv_view kh = iv_view_sub(a->k, t0, t1, (int64_t)h * D, D);
        if (r->c2p) g.c2p = project_head(ops, st, a->w[0], r->span, h, qh, st->c2p);
        if (r->p2c) g.p2c = project_head(ops, st, a->w[1], r->span, h, kh, st->p2c);
        g.head = h;
        ops->rel_bias(ops, &g);
    }
    return 0;
}

int iv_deberta_project_rel(iv_model *m, const iv_tensor *rel, const iv_tensor *w, const iv_tensor *b, int n_heads,
                           int head_dim, const iv_tensor **out, iv_err *err)
{
    const int64_t rows = rel->shape[0], width = (int64_t)n_heads * head_dim;
    iv_tensor *dst = iv_model_new_tensor(m, (int64_t)n_heads * rows, head_dim);
    float *tmp = malloc((size_t)(rows * width) * sizeof(float));
    if (!dst || !tmp) {
        free(tmp);
        return iv_errf(err, IV_E_NOMEM, "out of memory projecting relative embeddings");
    }
    iv_view y = iv_view_make(tmp, IV_F32, rows, width, width);
    m->ops->linear(m->ops, y, iv_view_of(rel), w, b, IV_ACT_NONE, NULL);
    float *d = dst->data;
    for (int h = 0; h < n_heads; h++)
        for (int64_t r = 0; r < rows; r++)
            memcpy(d + ((int64_t)h * rows + r) * head_dim, tmp + r * width + (int64_t)h * head_dim,
                   (size_t)head_dim * sizeof(float));
    free(tmp);
    *out = dst;
    return 0;
}
