/* Attention over packed sequences (iv_attn_args in ops/ops.h), FP32.
 *
 * For query i and key j of the same sequence (indices local to it):
 *   visible(i, j) = (!causal || j <= i) && (wl < 0 || i - j <= wl)
 *                   && (wr < 0 || j - i <= wr) && key_mask[j] != 0
 *   s(i, j) = softcap(scale * q_i . k_j) + bias[h, i, j] - slope_h * |i - j|
 *   out_i   = sum_j softmax_j(s(i, j)) v_j  over the visible j
 * The softcap applies to the scaled dot product before any additive term,
 * as in Gemma 2 (tanh-capping, then the mask). A query that sees no key at
 * all (only possible through key_mask) gets a zero output row; torch would
 * produce NaN or, with a finite mask value, an average of excluded values.
 *
 * Work is split into tasks of (sequence, head, block of BQ queries), handed
 * to OpenMP threads dynamically since causal and windowed blocks differ in
 * cost. A task:
 *   1. scores its queries against the union of their visible key ranges,
 *      copying K transposed one tile of KT keys at a time so the inner loop
 *      is a broadcast-and-FMA outer product (4 queries x 16 keys);
 *   2. turns each score row into exp(s - max) over that row's own window,
 *      with zeros elsewhere, and keeps 1 / sum;
 *   3. accumulates P V the same way over rows of V (4 queries x 16 dims),
 *      then scales each output row by its 1 / sum.
 * Per-thread scratch is BQ x (longest sequence) scores plus one K^T tile, one
 * V tile and the output block: ~2 MiB at 8192 tokens, whatever the batch. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>

#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/vmath.h"

#define ATT_BQ 64  /* queries per task */
#define ATT_KT 256 /* keys per K^T / V tile: 64 KiB at head_dim 64 */
#define ATT_NR 4   /* queries per micro-kernel call */

static int64_t round16(int64_t n) { return (n + 15) & ~(int64_t)15; }

typedef struct {
    float *s;    /* [BQ][round16(max_len)] scores, then unnormalised weights */
    float *kt;   /* [head_dim][KT] transposed key tile */
    float *vt;   /* [KT][round16(head_dim)] padded value tile */
    float *o;    /* [BQ][round16(head_dim)] output accumulators */
    float *inv;  /* [BQ] 1 / softmax denominators */
} att_scratch;

/* The keys of a sequence of length L that query i may see: [lo, hi]. */
static int64_t key_lo(const iv_attn_args *a, int64_t i)
{
    int64_t lo = a->window_left >= 0 ? i - a->window_left : 0;
    return lo < 0 ? 0 : lo;
}
static int64_t key_hi(const iv_attn_args *a, int64_t i, int64_t len)
{
    int64_t hi = len - 1;
    if (a->causal && i < hi) hi = i;
    if (a->window_right >= 0 && i + a->window_right < hi) hi = i + a->window_right;
    return hi;
}

/* s[r][jj] = q_r . k_jj for R query rows and kn16 keys (a multiple of 16)
 * of a transposed tile kt[c][jj]. R is a constant after inlining, so the
 * accumulators live in registers. */
static inline __attribute__((always_inline)) void score_tile(int R, const float *const *q, int d,
                                                             const float *kt, int64_t kn16, float *s,
                                                             int64_t s_ld)
{
    for (int64_t jj = 0; jj < kn16; jj += 16) {
        v8f acc[ATT_NR][2];
        for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = v_zero();
        for (int c = 0; c < d; c++) {
            v8f k0 = v_load(kt + (int64_t)c * ATT_KT + jj), k1 = v_load(kt + (int64_t)c * ATT_KT + jj + 8);
            for (int r = 0; r < R; r++) {
                v8f qb = v_set1(q[r][c]);
                acc[r][0] = v_fma(qb, k0, acc[r][0]);
                acc[r][1] = v_fma(qb, k1, acc[r][1]);
            }
        }
        for (int r = 0; r < R; r++) {
            v_store(s + r * s_ld + jj, acc[r][0]);
            v_store(s + r * s_ld + jj + 8, acc[r][1]);
        }
    }
}

static void score_rows(int R, const float *const *q, int d, const float *kt, int64_t kn16, float *s, int64_t s_ld)
{
    switch (R) {
    case 4: score_tile(4, q, d, kt, kn16, s, s_ld); break;
    case 3: score_tile(3, q, d, kt, kn16, s, s_ld); break;
    case 2: score_tile(2, q, d, kt, kn16, s, s_ld); break;
    default: score_tile(1, q, d, kt, kn16, s, s_ld); break;
    }
}

/* o[r][c] (+)= sum_jj p[r][jj] v[jj][c] for R rows, kn keys and dpad dims
 * (a multiple of 16); v rows are v_ld apart. */
static inline __attribute__((always_inline)) void pv_tile(int R, const float *const *p, int64_t kn,
                                                          const float *v, int64_t v_ld, int64_t dpad, float *o,
                                                          int first)
{
    for (int64_t c = 0; c < dpad; c += 16) {
        v8f acc[ATT_NR][2];
        for (int r = 0; r < R; r++) {
            acc[r][0] = first ? v_zero() : v_load(o + r * dpad + c);
            acc[r][1] = first ? v_zero() : v_load(o + r * dpad + c + 8);
        }
        for (int64_t jj = 0; jj < kn; jj++) {
            v8f v0 = v_load(v + jj * v_ld + c), v1 = v_load(v + jj * v_ld + c + 8);
            for (int r = 0; r < R; r++) {
                v8f pb = v_set1(p[r][jj]);
                acc[r][0] = v_fma(pb, v0, acc[r][0]);
                acc[r][1] = v_fma(pb, v1, acc[r][1]);
            }
        }
        for (int r = 0; r < R; r++) {
            v_store(o + r * dpad + c, acc[r][0]);
            v_store(o + r * dpad + c + 8, acc[r][1]);
        }
    }
}

static void pv_rows(int R, const float *const *p, int64_t kn, const float *v, int64_t v_ld, int64_t dpad, float *o,
                    int first)
{
    switch (R) {
    case 4: pv_tile(4, p, kn, v, v_ld, dpad, o, first); break;
    case 3: pv_tile(3, p, kn, v, v_ld, dpad, o, first); break;
    case 2: pv_tile(2, p, kn, v, v_ld, dpad, o, first); break;
    default: pv_tile(1, p, kn, v, v_ld, dpad, o, first); break;
    }
}

/* Turns one score row (query i, keys jlo + jj for jj < nk16) into
 * unnormalised softmax weights, zero outside the row's window; returns
 * 1 / sum, or 0 when no key is visible. */
static float softmax_row(const iv_attn_args *a, float *s, int64_t nk16, int64_t i, int64_t jlo, int64_t len,
                         int64_t base, int h, const float *bias_row)
{
    v8f scale = v_set1(a->scale);
    if (a->softcap != 0.0f) {
        v8f cap = v_set1(a->softcap);
        for (int64_t jj = 0; jj < nk16; jj += IV_VL)
            v_store(s + jj, cap * v_tanh(v_load(s + jj) * scale / cap));
    } else {
        for (int64_t jj = 0; jj < nk16; jj += IV_VL) v_store(s + jj, v_load(s + jj) * scale);
    }
    int64_t vlo = key_lo(a, i) - jlo, vhi = key_hi(a, i, len) - jlo;
    for (int64_t jj = 0; jj < vlo; jj++) s[jj] = -INFINITY;
    for (int64_t jj = vhi + 1; jj < nk16; jj++) s[jj] = -INFINITY;
    if (bias_row)
        for (int64_t jj = vlo; jj <= vhi; jj++) s[jj] += bias_row[jlo + jj];
    if (a->alibi_slopes) {
        float slope = a->alibi_slopes[h];
        for (int64_t jj = vlo; jj <= vhi; jj++) {
            int64_t dist = i - (jlo + jj);
            s[jj] += -(slope * (float)(dist < 0 ? -dist : dist));
        }
    }
    if (a->key_mask)
        for (int64_t jj = vlo; jj <= vhi; jj++)
            if (!a->key_mask[base + jlo + jj]) s[jj] = -INFINITY;

    v8f mx = v_set1(-INFINITY);
    for (int64_t jj = 0; jj < nk16; jj += IV_VL) mx = v_max(mx, v_load(s + jj));
    float max = v_hmax(mx);
    if (max == -INFINITY) {
        for (int64_t jj = 0; jj < nk16; jj++) s[jj] = 0.0f;
        return 0.0f;
    }
    v8f m = v_set1(max), sum = v_zero();
    for (int64_t jj = 0; jj < nk16; jj += IV_VL) {
        v8f e = v_exp(v_load(s + jj) - m); /* exp(-inf) = 0 */
        v_store(s + jj, e);
        sum = sum + e;
    }
    return 1.0f / v_hsum(sum);
}

/* One task: queries [i0, i1) of sequence s, head h. */
static void attend_block(const iv_attn_args *a, int s, int h, int64_t i0, int64_t i1, att_scratch *w)
{
    const int d = a->head_dim;
    const int64_t base = a->cu_seqlens[s], len = a->cu_seqlens[s + 1] - base;
    const int kvh = h / (a->n_heads / a->n_kv_heads);
    const int64_t nq = i1 - i0, dpad = round16(d);
    const int64_t jlo = key_lo(a, i0), jhi = key_hi(a, i1 - 1, len);
    const int64_t nk = jhi - jlo + 1, nk16 = round16(nk), s_ld = nk16;
    const float *kbase = a->k.data + (base + jlo) * a->k.ld + (int64_t)kvh * d;
    const float *vbase = a->v.data + (base + jlo) * a->v.ld + (int64_t)kvh * d;

    /* 1. Scores, one transposed key tile at a time. */
    for (int64_t kt0 = 0; kt0 < nk; kt0 += ATT_KT) {
        int64_t kn = nk - kt0 < ATT_KT ? nk - kt0 : ATT_KT, kn16 = round16(kn);
        for (int64_t jj = 0; jj < kn; jj++) {
            const float *krow = kbase + (kt0 + jj) * a->k.ld;
            for (int c = 0; c < d; c++) w->kt[(int64_t)c * ATT_KT + jj] = krow[c];
        }
        for (int c = 0; c < d; c++)
            for (int64_t jj = kn; jj < kn16; jj++) w->kt[(int64_t)c * ATT_KT + jj] = 0.0f;
        for (int64_t r0 = 0; r0 < nq; r0 += ATT_NR) {
            int R = nq - r0 < ATT_NR ? (int)(nq - r0) : ATT_NR;
            const float *q[ATT_NR];
            for (int r = 0; r < R; r++)
                q[r] = a->q.data + (base + i0 + r0 + r) * a->q.ld + (int64_t)h * d;
            score_rows(R, q, d, w->kt, kn16, w->s + r0 * s_ld + kt0, s_ld);
        }
    }

    /* 2. Softmax weights per row. */
    for (int64_t r = 0; r < nq; r++) {
        int64_t i = i0 + r;
        const float *bias_row = a->bias ? a->bias + a->bias_offsets[s] + ((int64_t)h * len + i) * len : NULL;
        w->inv[r] = softmax_row(a, w->s + r * s_ld, nk16, i, jlo, len, base, h, bias_row);
    }

    /* 3. P V, one value tile at a time. Rows of V are used in place when
     * head_dim is a multiple of 16, else copied zero-padded. */
    for (int64_t kt0 = 0; kt0 < nk; kt0 += ATT_KT) {
        int64_t kn = nk - kt0 < ATT_KT ? nk - kt0 : ATT_KT;
        const float *vt = vbase + kt0 * a->v.ld;
        int64_t v_ld = a->v.ld;
        if (dpad != d) {
            for (int64_t jj = 0; jj < kn; jj++) {
                const float *vrow = vbase + (kt0 + jj) * a->v.ld;
                float *dst = w->vt + jj * dpad;
                for (int c = 0; c < d; c++) dst[c] = vrow[c];
                for (int64_t c = d; c < dpad; c++) dst[c] = 0.0f;
            }
            vt = w->vt;
            v_ld = dpad;
        }
        for (int64_t r0 = 0; r0 < nq; r0 += ATT_NR) {
            int R = nq - r0 < ATT_NR ? (int)(nq - r0) : ATT_NR;
            const float *p[ATT_NR];
            for (int r = 0; r < R; r++) p[r] = w->s + (r0 + r) * s_ld + kt0;
            pv_rows(R, p, kn, vt, v_ld, dpad, w->o + r0 * dpad, kt0 == 0);
        }
    }

    for (int64_t r = 0; r < nq; r++) {
        float *dst = a->out.data + (base + i0 + r) * a->out.ld + (int64_t)h * d;
        const float *src = w->o + r * dpad;
        float inv = w->inv[r];
        for (int c = 0; c < d; c++) dst[c] = src[c] * inv;
    }
}

void iv_cpu_attention(const iv_ops *ops, const iv_attn_args *a)
{
    assert(a->n_heads > 0 && a->n_kv_heads > 0 && a->n_heads % a->n_kv_heads == 0 && a->head_dim > 0);
    assert(!a->bias || a->bias_offsets);
    const int nh = a->n_heads;
    const int64_t dpad = round16(a->head_dim);

    /* Task t belongs to the sequence s with first[s] <= t < first[s + 1];
     * within it, t - first[s] = h * blocks + block. */
    int64_t *first = iv_cpu_scratch((size_t)(a->n_seqs + 1) * sizeof(int64_t));
    int64_t max_len = 0, work = 0;
    first[0] = 0;
    for (int s = 0; s < a->n_seqs; s++) {
        int64_t len = a->cu_seqlens[s + 1] - a->cu_seqlens[s];
        first[s + 1] = first[s] + nh * ((len + ATT_BQ - 1) / ATT_BQ);
        if (len > max_len) max_len = len;
        work += len * len;
    }
    const int64_t ntasks = first[a->n_seqs];
    work *= (int64_t)nh * a->head_dim;

#pragma omp parallel if (ntasks > 1 && work >= 64 * IV_CPU_PAR_MIN)
    {
        att_scratch w;
        w.s = iv_cpu_scratch((size_t)(ATT_BQ * round16(max_len)) * sizeof(float));
        w.kt = iv_cpu_scratch((size_t)(a->head_dim * ATT_KT) * sizeof(float));
        w.vt = iv_cpu_scratch((size_t)(ATT_KT * dpad) * sizeof(float));
        w.o = iv_cpu_scratch((size_t)(ATT_BQ * dpad) * sizeof(float));
        w.inv = iv_cpu_scratch(ATT_BQ * sizeof(float));
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < ntasks; t++) {
            int lo = 0, hi = a->n_seqs - 1; /* last s with first[s] <= t */
            while (lo < hi) {
                int mid = (lo + hi + 1) / 2;
                if (first[mid] <= t) lo = mid;
                else hi = mid - 1;
            }
            int s = lo;
            int64_t len = a->cu_seqlens[s + 1] - a->cu_seqlens[s];
            int64_t blocks = (len + ATT_BQ - 1) / ATT_BQ, rem = t - first[s];
            int h = (int)(rem / blocks);
            int64_t i0 = (rem % blocks) * ATT_BQ, i1 = i0 + ATT_BQ < len ? i0 + ATT_BQ : len;
            attend_block(a, s, h, i0, i1, &w);
        }
        free(w.s);
        free(w.kt);
        free(w.vt);
        free(w.o);
        free(w.inv);
    }
    free(first);
}
