/* The gated delta rule on the CPU in chunks (ops.h, delta_chunk): the WY /
 * UT-transform form of flash-linear-attention's chunk_gated_delta_rule and
 * transformers' torch_chunk_gated_delta_rule, per packed sequence.
 *
 * Within a chunk of n tokens (gc = cumulative log decay from the chunk's
 * start, S the state entering the chunk):
 *   A[i, j]  = beta_i (k_i . k_j) e^(gc_i - gc_j)              j < i
 *   T        = I + A (unit lower triangular)
 *   U        = T^-1 (beta v),  W = T^-1 (beta e^gc k)           (forward substitution)
 *   v_new    = U - W S                                           (what S does not already predict)
 *   out_i    = e^gc_i q_i S + sum_{j <= i} (q_i . k_j) e^(gc_i - gc_j) v_new_j
 *   S'       = e^gc_last S + sum_i e^(gc_last - gc_i) k_i v_new_i^T
 * which is the token-by-token recurrence (deltanet.c) regrouped: the state
 * is read and written once per chunk instead of twice per token, and each of
 * those is an [n, Dk] x [Dk, Dv] product. The first chunk of a sequence
 * starts from S = 0, so it skips the reads (and W); the last one skips the
 * state update nobody reads. Cost stays linear in the length: O(n) per
 * token for the within-chunk products plus O(Dk Dv) for the state.
 *
 * Each (sequence, value head) runs on one thread with its own scratch, in a
 * fixed order, so a sequence's outputs are the same bits in any batch. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/deltanet_math.h"

static float dot(const float *restrict x, const float *restrict y, int n)
{
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += x[i] * y[i];
    return s;
}

/* c[i, :n] += sum_{k < K} a[i, k] b[k, :n] for i < m (rows lda, ldb, ldc
 * floats apart). Four rows of c at a time, so each row of b is loaded once
 * per four rows of a. */
static void gemm_acc(float *c, int64_t ldc, const float *a, int64_t lda, const float *b, int64_t ldb, int m, int K,
                     int n)
{
    int i = 0;
    for (; i + 4 <= m; i += 4) {
        float *restrict c0 = c + i * ldc, *restrict c1 = c0 + ldc, *restrict c2 = c1 + ldc, *restrict c3 = c2 + ldc;
        const float *a0 = a + i * lda;
        for (int k = 0; k < K; k++) {
            const float *restrict br = b + k * ldb;
            const float x0 = a0[k], x1 = a0[lda + k], x2 = a0[2 * lda + k], x3 = a0[3 * lda + k];
#pragma omp simd
            for (int j = 0; j < n; j++) {
                c0[j] += x0 * br[j];
                c1[j] += x1 * br[j];
                c2[j] += x2 * br[j];
                c3[j] += x3 * br[j];
            }
        }
    }
    for (; i < m; i++) {
        float *restrict cr = c + i * ldc;
        for (int k = 0; k < K; k++) {
            const float *restrict br = b + k * ldb;
            const float x = a[i * lda + k];
#pragma omp simd
            for (int j = 0; j < n; j++) cr[j] += x * br[j];
        }
    }
}

/* y[:n] += s x[:n] */
static void axpy(float *restrict y, float s, const float *restrict x, int n)
{
#pragma omp simd
    for (int j = 0; j < n; j++) y[j] += s * x[j];
}

typedef struct chunk_scratch {
    float *S;       /* [Dk, Dv] the state */
    float *Q, *K;   /* [C, Dk] normalised q (scaled) and k */
    float *W;       /* [C, Dk] -T^-1 (beta e^gc k) */
    float *KdT;     /* [Dk, C] e^(gc_last - gc_i) k_i, transposed for the state update */
    float *U;       /* [C, Dv] T^-1 (beta v), then v_new */
    float *A, *QK;  /* [C, C] */
    float *gc, *beta; /* [C] */
} chunk_scratch;

static chunk_scratch scratch_alloc(int C, int Dk, int Dv)
{
    const size_t floats = (size_t)Dk * Dv + 4 * (size_t)C * Dk + (size_t)C * Dv + 2 * (size_t)C * C + 2 * (size_t)C;
    float *p = iv_cpu_scratch(floats * sizeof(float));
    chunk_scratch s;
    s.S = p, p += (size_t)Dk * Dv;
    s.Q = p, p += (size_t)C * Dk;
    s.K = p, p += (size_t)C * Dk;
    s.W = p, p += (size_t)C * Dk;
    s.KdT = p, p += (size_t)C * Dk;
    s.U = p, p += (size_t)C * Dv;
    s.A = p, p += (size_t)C * C;
    s.QK = p, p += (size_t)C * C;
    s.gc = p, p += C;
    s.beta = p;
    return s;
}

/* Rows t0 .. t0 + n of value head h (key head hk); first: the state is
 * zero; last: the state is not needed afterwards. */
static void run_chunk(const iv_delta_rule_args *a, chunk_scratch *s, int64_t t0, int n, int h, int hk, float A_h,
                      int first, int last)
{
    const int Dk = a->k_head_dim, Dv = a->v_head_dim, C = a->chunk;
    const float q_scale = 1.0f / sqrtf((float)Dk), dt_bias = iv_f32(a->dt_bias)[h];
    float cum = 0;
    for (int i = 0; i < n; i++) {
        const int64_t t = t0 + i;
        iv_dn_l2norm_scaled(s->Q + (int64_t)i * Dk, (const float *)a->q.data + t * a->q.ld + (int64_t)hk * Dk, Dk,
                            q_scale);
        iv_dn_l2norm_scaled(s->K + (int64_t)i * Dk, (const float *)a->k.data + t * a->k.ld + (int64_t)hk * Dk, Dk, 1.0f);
        s->beta[i] = iv_dn_beta(((const float *)a->b.data)[t * a->b.ld + h]);
        cum += iv_dn_log_decay(A_h, ((const float *)a->a.data)[t * a->a.ld + h], dt_bias);
        s->gc[i] = cum;
    }
    for (int i = 0; i < n; i++) {
        const float *ki = s->K + (int64_t)i * Dk, *qi = s->Q + (int64_t)i * Dk;
        for (int j = 0; j <= i; j++) {
            const float *kj = s->K + (int64_t)j * Dk, decay = expf(s->gc[i] - s->gc[j]);
            if (j < i) s->A[i * C + j] = s->beta[i] * dot(ki, kj, Dk) * decay;
            s->QK[i * C + j] = dot(qi, kj, Dk) * decay;
        }
    }
    /* Forward substitution through the unit lower triangular T. */
    for (int i = 0; i < n; i++) {
        float *ui = s->U + (int64_t)i * Dv, *wi = s->W + (int64_t)i * Dk;
        const float *v = (const float *)a->v.data + (t0 + i) * a->v.ld + (int64_t)h * Dv;
        for (int j = 0; j < Dv; j++) ui[j] = s->beta[i] * v[j];
        for (int j = 0; j < i; j++) axpy(ui, -s->A[i * C + j], s->U + (int64_t)j * Dv, Dv);
        if (first) continue;
        const float bw = -s->beta[i] * expf(s->gc[i]);
        for (int j = 0; j < Dk; j++) wi[j] = bw * s->K[(int64_t)i * Dk + j];
        for (int j = 0; j < i; j++) axpy(wi, -s->A[i * C + j], s->W + (int64_t)j * Dk, Dk);
    }
    float *out = (float *)a->out.data + t0 * a->out.ld + (int64_t)h * Dv;
    const int64_t ldo = a->out.ld;
    for (int i = 0; i < n; i++) memset(out + i * ldo, 0, (size_t)Dv * sizeof(float));
    if (!first) {
        gemm_acc(s->U, Dv, s->W, Dk, s->S, Dv, n, Dk, Dv); /* U = v_new */
        for (int i = 0; i < n; i++) {
            const float e = expf(s->gc[i]);
            for (int j = 0; j < Dk; j++) s->Q[(int64_t)i * Dk + j] *= e;
        }
        gemm_acc(out, ldo, s->Q, Dk, s->S, Dv, n, Dk, Dv);
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j <= i; j++) axpy(out + i * ldo, s->QK[i * C + j], s->U + (int64_t)j * Dv, Dv);
    if (last) return;
    const float gl = s->gc[n - 1], el = expf(gl);
    for (int i = 0; i < n; i++) {
        const float e = expf(gl - s->gc[i]);
        for (int k = 0; k < Dk; k++) s->KdT[(int64_t)k * C + i] = s->K[(int64_t)i * Dk + k] * e;
    }
    for (int64_t i = 0; i < (int64_t)Dk * Dv; i++) s->S[i] *= el;
    gemm_acc(s->S, Dv, s->KdT, C, s->U, Dv, Dk, n, Dv);
}

void iv_cpu_delta_chunk(const iv_ops *ops, const iv_delta_rule_args *a)
{
    const int Hk = a->n_k_heads, Hv = a->n_v_heads, Dk = a->k_head_dim, Dv = a->v_head_dim, C = a->chunk;
    assert(Hv % Hk == 0 && a->q.cols == (int64_t)Hk * Dk && a->k.cols == (int64_t)Hk * Dk &&
           a->v.cols == (int64_t)Hv * Dv && a->out.cols == (int64_t)Hv * Dv && a->a.cols == Hv && a->b.cols == Hv &&
           C >= 1 && C <= IV_DELTA_CHUNK_MAX);
    const float *a_log = iv_f32(a->a_log);
    const int rep = Hv / Hk, pairs = a->n_seqs * Hv;
    const int64_t work = (int64_t)a->out.rows * Hv * Dk * Dv;
#pragma omp parallel if (work >= IV_CPU_PAR_MIN)
    {
        chunk_scratch s = scratch_alloc(C, Dk, Dv);
#pragma omp for schedule(dynamic, 1)
        for (int p = 0; p < pairs; p++) {
            const int q = p / Hv, h = p % Hv;
            const int64_t r0 = a->cu_seqlens[q], r1 = a->cu_seqlens[q + 1];
            memset(s.S, 0, (size_t)Dk * Dv * sizeof(float));
            for (int64_t t0 = r0; t0 < r1; t0 += C) {
                const int n = (int)(r1 - t0 < C ? r1 - t0 : C);
                run_chunk(a, &s, t0, n, h, h / rep, -expf(a_log[h]), t0 == r0, t0 + n == r1);
            }
        }
        free(s.S);
    }
}
