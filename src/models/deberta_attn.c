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
    int32_t *c2p_col; /* [2 max_len - 1] by d + max_len - 1 (d = i - j): c2p(d) - lo */
    int32_t *p2c_col; /* same for p2c(d) - lo */
    int32_t *seq_of;  /* [T] sequence of each token */
    float *c2p, *p2c; /* [T, ncols] one head's products */
} deberta_state;

static int clamp_row(int v, int span) { return v < 0 ? 0 : v > 2 * span - 1 ? 2 * span - 1 : v; }

static deberta_state *state_new(const iv_deberta_rel *r, const iv_batch *b, iv_arena *arena)
{
    deberta_state *st = iv_arena_alloc(arena, sizeof *st);
    if (!st) return NULL;
    st->max_len = 0;
    for (int s = 0; s < b->n_seqs; s++)
        if (iv_batch_seqlen(b, s) > st->max_len) st->max_len = iv_batch_seqlen(b, s);
    const int n_d = 2 * st->max_len - 1;
    st->c2p_col = iv_arena_alloc(arena, (size_t)n_d * sizeof(int32_t));
    st->p2c_col = iv_arena_alloc(arena, (size_t)n_d * sizeof(int32_t));
    st->seq_of = iv_arena_alloc(arena, (size_t)b->n_tokens * sizeof(int32_t));
    if (!st->c2p_col || !st->p2c_col || !st->seq_of) return NULL;
    int lo = 2 * r->span, hi = -1;
    for (int k = 0; k < n_d; k++) {
        const int d = k - (st->max_len - 1);
        st->c2p_col[k] = clamp_row(iv_deberta_bucket(d, r->buckets, r->max_relative) + r->span, r->span);
        st->p2c_col[k] = clamp_row(-iv_deberta_bucket(-d, r->buckets, r->max_relative) + r->span, r->span);
        if (r->c2p) {
            if (st->c2p_col[k] < lo) lo = st->c2p_col[k];
            if (st->c2p_col[k] > hi) hi = st->c2p_col[k];
        }
        if (r->p2c) {
            if (st->p2c_col[k] < lo) lo = st->p2c_col[k];
            if (st->p2c_col[k] > hi) hi = st->p2c_col[k];
        }
    }
    for (int k = 0; k < n_d; k++) {
        st->c2p_col[k] -= lo;
        st->p2c_col[k] -= lo;
    }
    st->lo = lo;
    st->ncols = hi - lo + 1;
    for (int s = 0; s < b->n_seqs; s++)
        for (int32_t t = b->cu_seqlens[s]; t < b->cu_seqlens[s + 1]; t++) st->seq_of[t] = s;
    const size_t bytes = (size_t)(b->n_tokens * st->ncols) * sizeof(float);
    st->c2p = r->c2p ? iv_arena_alloc(arena, bytes) : NULL;
    st->p2c = r->p2c ? iv_arena_alloc(arena, bytes) : NULL;
    if ((r->c2p && !st->c2p) || (r->p2c && !st->p2c)) return NULL;
    return st;
}

/* out [rows, ncols] = x [rows, head_dim] . P_h[lo .. lo + ncols)^T */
static void project_head(const iv_ops *ops, const deberta_state *st, const float *pos, int span, int h,
                         int head_dim, iv_view x, float *out)
{
    iv_tensor w = iv_tensor_2d((float *)pos + ((int64_t)h * 2 * span + st->lo) * head_dim, st->ncols, head_dim);
    iv_view y = iv_view_make(out, IV_F32, x.rows, st->ncols, st->ncols);
    ops->linear(ops, y, x, &w, NULL, IV_ACT_NONE, NULL);
}

int iv_deberta_attn_bias(const iv_ops *ops, const void *ctx, const iv_dyn_bias_args *a)
{
    const iv_deberta_layer *dl = ctx;
    const iv_deberta_rel *r = dl->rel;
    const iv_batch *b = a->batch;
    deberta_state *st = *a->state;
    if (!st) {
        st = state_new(r, b, a->arena);
        if (!st) return -1;
        *a->state = st;
    }
    const int D = a->head_dim;
    const int64_t t0 = b->cu_seqlens[a->seq_begin], t1 = b->cu_seqlens[a->seq_end], nc = st->ncols;
    const float scale = r->scale;
    for (int h = 0; h < a->n_heads; h++) {
        iv_view qh = iv_view_sub(a->q, t0, t1, (int64_t)h * D, D);
        iv_view kh = iv_view_sub(a->k, t0, t1, (int64_t)h * D, D);
        if (r->c2p) project_head(ops, st, dl->pos_key, r->span, h, D, qh, st->c2p);
        if (r->p2c) project_head(ops, st, dl->pos_query, r->span, h, D, kh, st->p2c);
#pragma omp parallel for schedule(static) if ((t1 - t0) * st->max_len >= 32768)
        for (int64_t t = t0; t < t1; t++) {
            const int s = st->seq_of[t];
            const int64_t first = b->cu_seqlens[s], i = t - first, L = iv_batch_seqlen(b, s);
            float *row = a->bias + a->offsets[s - a->seq_begin] + ((int64_t)h * L + i) * L;
            const int32_t *c2p_col = st->c2p_col + (st->max_len - 1) + i; /* c2p_col[-j] = column of d = i - j */
            const int32_t *p2c_col = st->p2c_col + (st->max_len - 1) + i;
            const float *c2p = r->c2p ? st->c2p + (t - t0) * nc : NULL;       /* query i's row */
            const float *p2c = r->p2c ? st->p2c + (first - t0) * nc : NULL;   /* key 0's row */
            for (int64_t j = 0; j < L; j++) {
                float v = 0.0f;
                if (c2p) v += c2p[c2p_col[-j]] / scale;
                if (p2c) v += p2c[j * nc + p2c_col[-j]] / scale;
                row[j] = v;
            }
        }
    }
    return 0;
}

int iv_deberta_project_rel(iv_model *m, const iv_tensor *rel, const iv_tensor *w, const iv_tensor *b, int n_heads,
                           int head_dim, const float **out, iv_err *err)
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
    *out = d;
    return 0;
}
