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

/* c[i, :n] += sum_{k < K} a[i, k] b[k, :n] for i < m (rows lda, ldb, ldc
 * floats apart), in register tiles of 4 x 16 of c: each element is one
 * fused multiply-add chain over k in order, added to c at the end, whatever
 * the tile it falls in (fmaf, not a * b + c, which ISO C leaves unfused). */
static void gemm_acc(float *c, int64_t ldc, const float *a, int64_t lda, const float *b, int64_t ldb, int m, int K,
                     int n)
{
    enum { MR = 4, NR = 16 };
    for (int i0 = 0; i0 < m; i0 += MR) {
        const int mr = m - i0 < MR ? m - i0 : MR;
        for (int j0 = 0; j0 < n; j0 += NR) {
            const int nr = n - j0 < NR ? n - j0 : NR;
            float acc[MR][NR] = {{0}};
            if (mr == MR && nr == NR) {
                for (int k = 0; k < K; k++) {
                    const float *restrict br = b + k * ldb + j0;
                    for (int r = 0; r < MR; r++) {
                        const float x = a[(i0 + r) * lda + k];
#pragma omp simd
                        for (int j = 0; j < NR; j++) acc[r][j] = fmaf(x, br[j], acc[r][j]);
                    }
                }
            } else {
                for (int k = 0; k < K; k++) {
                    const float *restrict br = b + k * ldb + j0;
                    for (int r = 0; r < mr; r++) {
                        const float x = a[(i0 + r) * lda + k];
                        for (int j = 0; j < nr; j++) acc[r][j] = fmaf(x, br[j], acc[r][j]);
                    }
                }
            }
            for (int r = 0; r < mr; r++)
                for (int j = 0; j < nr; j++) c[(i0 + r) * ldc + j0 + j] += acc[r][j];
        }
    }
}

typedef struct chunk_scratch {
    float *S;         /* [Dk, Dv] the state */
    float *Q, *K, *KB; /* [C, Dk] normalised q (scaled), k; -beta e^gc k */
    float *W;         /* [C, Dk] -T^-1 (beta e^gc k) */
    float *KT;        /* [Dk, C] k transposed; then e^(gc_last - gc_i) k_i for the state update */
    float *VB, *U;    /* [C, Dv] beta v; T^-1 (beta v), then v_new */
    float *A, *QK, *Tinv; /* [C, C] */
    float *gc, *beta; /* [C] */
} chunk_scratch;

static chunk_scratch scratch_alloc(int C, int Dk, int Dv)
{
    const size_t floats = (size_t)Dk * Dv + 5 * (size_t)C * Dk + 2 * (size_t)C * Dv + 3 * (size_t)C * C + 2 * (size_t)C;
    float *p = iv_cpu_scratch(floats * sizeof(float));
    chunk_scratch s;
    s.S = p, p += (size_t)Dk * Dv;
    s.Q = p, p += (size_t)C * Dk;
    s.K = p, p += (size_t)C * Dk;
    s.KB = p, p += (size_t)C * Dk;
    s.W = p, p += (size_t)C * Dk;
    s.KT = p, p += (size_t)C * Dk;
    s.VB = p, p += (size_t)C * Dv;
    s.U = p, p += (size_t)C * Dv;
    s.A = p, p += (size_t)C * C;
    s.QK = p, p += (size_t)C * C;
    s.Tinv = p, p += (size_t)C * C;
    s.gc = p, p += C;
    s.beta = p;
    return s;
}

static void zero_rows(float *x, int64_t ld, int rows, int cols)
{
    for (int i = 0; i < rows; i++) memset(x + i * ld, 0, (size_t)cols * sizeof(float));
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
        float *ki = s->K + (int64_t)i * Dk;
        iv_dn_l2norm_scaled(s->Q + (int64_t)i * Dk, (const float *)a->q.data + t * a->q.ld + (int64_t)hk * Dk, Dk,
                            q_scale);
        iv_dn_l2norm_scaled(ki, (const float *)a->k.data + t * a->k.ld + (int64_t)hk * Dk, Dk, 1.0f);
        for (int k = 0; k < Dk; k++) s->KT[(int64_t)k * C + i] = ki[k];
        s->beta[i] = iv_dn_beta(((const float *)a->b.data)[t * a->b.ld + h]);
        cum += iv_dn_log_decay(A_h, ((const float *)a->a.data)[t * a->a.ld + h], dt_bias);
        s->gc[i] = cum;
        const float *v = (const float *)a->v.data + t * a->v.ld + (int64_t)h * Dv;
        for (int j = 0; j < Dv; j++) s->VB[(int64_t)i * Dv + j] = s->beta[i] * v[j];
    }
    /* A = beta_i k_i . k_j e^(gc_i - gc_j) below the diagonal; QK the same
     * for q_i . k_j on and below it; zeros elsewhere. */
    zero_rows(s->A, C, n, n);
    zero_rows(s->QK, C, n, n);
    gemm_acc(s->A, C, s->K, Dk, s->KT, C, n, Dk, n);
    gemm_acc(s->QK, C, s->Q, Dk, s->KT, C, n, Dk, n);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            const float decay = j <= i ? expf(s->gc[i] - s->gc[j]) : 0.0f;
            s->A[i * C + j] = j < i ? s->beta[i] * s->A[i * C + j] * decay : 0.0f;
            s->QK[i * C + j] *= decay;
        }
    /* T^-1, T = I + A unit lower triangular: row i = e_i - sum_{j<i} A_ij row j. */
    zero_rows(s->Tinv, C, n, n);
    for (int i = 0; i < n; i++) {
        float *ti = s->Tinv + (int64_t)i * C;
        ti[i] = 1.0f;
        for (int j = 0; j < i; j++) {
            const float x = s->A[i * C + j];
            const float *tj = s->Tinv + (int64_t)j * C;
            for (int l = 0; l <= j; l++) ti[l] -= x * tj[l];
        }
    }
    zero_rows(s->U, Dv, n, Dv);
    gemm_acc(s->U, Dv, s->Tinv, C, s->VB, Dv, n, n, Dv);
    float *out = (float *)a->out.data + t0 * a->out.ld + (int64_t)h * Dv;
    const int64_t ldo = a->out.ld;
    zero_rows(out, ldo, n, Dv);
    if (!first) {
        for (int i = 0; i < n; i++) {
            const float bw = -s->beta[i] * expf(s->gc[i]), e = expf(s->gc[i]);
            for (int k = 0; k < Dk; k++) {
                s->KB[(int64_t)i * Dk + k] = bw * s->K[(int64_t)i * Dk + k];
                s->Q[(int64_t)i * Dk + k] *= e;
            }
        }
        zero_rows(s->W, Dk, n, Dk);
        gemm_acc(s->W, Dk, s->Tinv, C, s->KB, Dk, n, n, Dk);
        gemm_acc(s->U, Dv, s->W, Dk, s->S, Dv, n, Dk, Dv); /* U = v_new */
        gemm_acc(out, ldo, s->Q, Dk, s->S, Dv, n, Dk, Dv);
    }
    gemm_acc(out, ldo, s->QK, C, s->U, Dv, n, n, Dv);
    if (last) return;
    const float gl = s->gc[n - 1], el = expf(gl);
    for (int i = 0; i < n; i++) {
        const float e = expf(gl - s->gc[i]);
        for (int k = 0; k < Dk; k++) s->KT[(int64_t)k * C + i] = s->K[(int64_t)i * Dk + k] * e;
    }
    for (int64_t i = 0; i < (int64_t)Dk * Dv; i++) s->S[i] *= el;
    gemm_acc(s->S, Dv, s->KT, C, s->U, Dv, Dk, n, Dv);
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
