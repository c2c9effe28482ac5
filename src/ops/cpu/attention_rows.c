/* Attention of folded prefixes (iv_attn_rows_args in ops/ops.h), FP32.
 *
 * One task is a (run, key/value head): the run's key list is gathered once
 * for the whole head group, K transposed (kt[d][j]) so that the scores of a
 * query are head_dim broadcast-and-FMA sweeps over contiguous keys, V as
 * rows, then every query head of the group and every query of the run reads
 * them. Queries go QB at a time so each sweep over kt feeds QB score rows.
 * Scores are the dot product, then times scale, as the packed kernel
 * computes them; softmax and the value sum run in key order. The key list
 * is in increasing position, so each query's visible keys are one range. */
#include <math.h>
#include <stdlib.h>

#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/vmath.h"

#define ROWS_QB 4 /* queries per sweep over the transposed keys */

/* Keys rounded up to whole vectors: the row stride of kt and s. */
static int64_t pad_keys(int64_t n) { return (n + IV_VL - 1) & ~(int64_t)(IV_VL - 1); }

typedef struct {
    float *kt;  /* [head_dim][max_keys] keys of the run, transposed */
    float *vg;  /* [max_keys][head_dim] values of the run */
    int32_t *kp; /* [max_keys] their positions */
    float *s;   /* [ROWS_QB][max_keys] scores, then weights */
} rows_scratch;

/* First index in kp[0..n) whose position is >= p (n when none). */
static int64_t first_at_least(const int32_t *kp, int64_t n, int64_t p)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        const int64_t mid = (lo + hi) / 2;
        if (kp[mid] < p) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Queries [i0, i0 + nq) of one head against the gathered keys (kt rows
 * nkp floats apart, zero padded). Products are fused multiply-adds and the
 * exponentials vmath's, as in the packed kernel. */
static void attend_block(const iv_attn_rows_args *a, const rows_scratch *w, int64_t nk, int64_t nkp, int head,
                         int64_t i0, int nq)
{
    const int64_t D = a->head_dim, ldq = a->q.ld, ldo = a->out.ld;
    const float *q = (const float *)a->q.data;
    float *out = (float *)a->out.data;
    int64_t lo[ROWS_QB], hi[ROWS_QB], jlo = nk, jhi = 0;
    for (int b = 0; b < nq; b++) {
        const int64_t p = a->q_pos[i0 + b];
        lo[b] = a->window_left >= 0 ? first_at_least(w->kp, nk, p - a->window_left) : 0;
        hi[b] = first_at_least(w->kp, nk, p + 1); /* exclusive */
        if (lo[b] < jlo) jlo = lo[b];
        if (hi[b] > jhi) jhi = hi[b];
    }
    jlo &= ~(int64_t)(IV_VL - 1); /* whole vectors: padding columns are computed and ignored */
    if (jhi < jlo) jhi = jlo;
    for (int b = 0; b < nq; b++)
        for (int64_t j = jlo; j < jhi; j += IV_VL) v_store(w->s + b * nkp + j, v_zero());
    for (int64_t d = 0; d < D; d++) {
        const float *kd = w->kt + d * nkp;
        for (int b = 0; b < nq; b++) {
            const vf qd = v_set1(q[(i0 + b) * ldq + head * D + d]);
            float *sb = w->s + b * nkp;
            for (int64_t j = jlo; j < jhi; j += IV_VL) v_store(sb + j, v_fma(qd, v_load(kd + j), v_load(sb + j)));
        }
    }
    for (int b = 0; b < nq; b++) {
        float *sb = w->s + b * nkp;
        float *o = out + (i0 + b) * ldo + head * D;
        for (int64_t d = 0; d < D; d++) o[d] = 0.0f;
        if (hi[b] <= lo[b]) continue;
        float mx = -INFINITY;
        for (int64_t j = lo[b]; j < hi[b]; j++) {
            float x = sb[j] * a->scale;
            if (a->softcap > 0) x = a->softcap * tanhf(x / a->softcap);
            sb[j] = x;
            if (x > mx) mx = x;
        }
        float sum = 0.0f;
        for (int64_t j = lo[b]; j < hi[b]; j += IV_VL) {
            const int64_t n = hi[b] - j < IV_VL ? hi[b] - j : IV_VL;
            const vf e = v_exp(v_load_part(sb + j, n) - v_set1(mx));
            v_store_part(sb + j, e, n);
            for (int64_t k = 0; k < n; k++) sum += sb[j + k];
        }
        for (int64_t j = lo[b]; j < hi[b]; j++) {
            const vf p = v_set1(sb[j]);
            const float *vj = w->vg + j * D;
            int64_t d = 0;
            for (; d + IV_VL <= D; d += IV_VL) v_store(o + d, v_fma(p, v_load(vj + d), v_load(o + d)));
            for (; d < D; d++) o[d] += sb[j] * vj[d];
        }
        const vf inv = v_set1(1.0f / sum);
        int64_t d = 0;
        for (; d + IV_VL <= D; d += IV_VL) v_store(o + d, v_load(o + d) * inv);
        for (; d < D; d++) o[d] *= 1.0f / sum;
    }
}

static void attend_task(const iv_attn_rows_args *a, const rows_scratch *w, int run, int kvh)
{
    const int64_t D = a->head_dim;
    const int32_t *rows = a->kv_rows + a->kv_cu[run];
    const int64_t nk = a->kv_cu[run + 1] - a->kv_cu[run];
    const float *k = (const float *)a->k.data, *v = (const float *)a->v.data;
    const int64_t nkp = pad_keys(nk);
    for (int64_t j = 0; j < nkp; j++)
        if (j >= nk)
            for (int64_t d = 0; d < D; d++) w->kt[d * nkp + j] = 0.0f;
    for (int64_t j = 0; j < nk; j++) {
        const float *kr = k + (int64_t)rows[j] * a->k.ld + kvh * D, *vr = v + (int64_t)rows[j] * a->v.ld + kvh * D;
        for (int64_t d = 0; d < D; d++) w->kt[d * nkp + j] = kr[d];
        for (int64_t d = 0; d < D; d++) w->vg[j * D + d] = vr[d];
        w->kp[j] = a->kv_pos[rows[j]];
    }
    const int group = a->n_heads / a->n_kv_heads;
    for (int g = 0; g < group; g++)
        for (int64_t i = a->q_cu[run]; i < a->q_cu[run + 1]; i += ROWS_QB) {
            const int64_t left = a->q_cu[run + 1] - i;
            attend_block(a, w, nk, nkp, kvh * group + g, i, left < ROWS_QB ? (int)left : ROWS_QB);
        }
}

void iv_cpu_attention_rows(const iv_ops *ops, const iv_attn_rows_args *a)
{
    (void)ops;
    if (a->n_runs <= 0 || a->max_keys <= 0) {
        for (int r = 0; r < a->n_runs; r++)
            for (int64_t i = a->q_cu[r]; i < a->q_cu[r + 1]; i++)
                for (int64_t c = 0; c < (int64_t)a->n_heads * a->head_dim; c++)
                    ((float *)a->out.data)[i * a->out.ld + c] = 0.0f;
        return;
    }
    const int64_t D = a->head_dim, mk = pad_keys(a->max_keys);
    const int64_t n_tasks = (int64_t)a->n_runs * a->n_kv_heads;
#pragma omp parallel if (n_tasks > 1)
    {
        /* iv_cpu_scratch aborts when out of memory, as for every CPU op. */
        rows_scratch w = {
            .kt = iv_cpu_scratch((size_t)(D * mk) * sizeof(float)),
            .vg = iv_cpu_scratch((size_t)(D * mk) * sizeof(float)),
            .kp = iv_cpu_scratch((size_t)mk * sizeof(int32_t)),
            .s = iv_cpu_scratch((size_t)(ROWS_QB * mk) * sizeof(float)),
        };
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < n_tasks; t++) attend_task(a, &w, (int)(t / a->n_kv_heads), (int)(t % a->n_kv_heads));
        free(w.kt);
        free(w.vg);
        free(w.kp);
        free(w.s);
    }
}
