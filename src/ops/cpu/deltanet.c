/* Gated DeltaNet on the CPU: the causal depthwise short convolution and the
 * gated delta rule, both over packed sequences whose states start at zero at
 * every sequence boundary (ops.h, iv_causal_conv_args, iv_delta_rule_args).
 *
 * The delta rule runs token by token (the recurrence itself, exact in FP32):
 * per sequence and value head a [Dk, Dv] state, two passes over it per token
 * (decay and read, then write and query). Its cost is linear in the length;
 * sequences and heads are independent, so they are the parallel dimension. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/deltanet_math.h"

void iv_cpu_causal_conv1d(const iv_ops *ops, const iv_causal_conv_args *a)
{
    const iv_view y = a->y, x = a->x;
    const int64_t C = x.cols, K = iv_tensor_cols(a->w);
    assert(y.rows == x.rows && y.cols == C && iv_tensor_rows(a->w) == C);
    const float *w = iv_f32(a->w), *b = a->b ? iv_f32(a->b) : NULL;
    for (int s = 0; s < a->n_seqs; s++) {
        const int64_t r0 = a->cu_seqlens[s], r1 = a->cu_seqlens[s + 1];
#pragma omp parallel for schedule(static) if ((r1 - r0) * C * K >= IV_CPU_PAR_MIN)
        for (int64_t t = r0; t < r1; t++) {
            float *yr = (float *)y.data + t * y.ld;
            memset(yr, 0, (size_t)C * sizeof(float));
            for (int64_t k = 0; k < K; k++) {
                const int64_t src = t - (K - 1) + k;
                if (src < r0) continue; /* before the sequence: the zero state */
                const float *xr = (const float *)x.data + src * x.ld;
                for (int64_t c = 0; c < C; c++) yr[c] += w[c * K + k] * xr[c];
            }
            iv_cpu_act_row(yr, yr, b, a->act, NULL, C);
        }
    }
}

void iv_cpu_delta_rule(const iv_ops *ops, const iv_delta_rule_args *a)
{
    const int Hk = a->n_k_heads, Hv = a->n_v_heads, Dk = a->k_head_dim, Dv = a->v_head_dim;
    assert(Hv % Hk == 0 && a->q.cols == (int64_t)Hk * Dk && a->k.cols == (int64_t)Hk * Dk &&
           a->v.cols == (int64_t)Hv * Dv && a->out.cols == (int64_t)Hv * Dv && a->a.cols == Hv && a->b.cols == Hv);
    const float *a_log = iv_f32(a->a_log), *dt_bias = iv_f32(a->dt_bias);
    const int rep = Hv / Hk, pairs = a->n_seqs * Hv;
    const float q_scale = 1.0f / sqrtf((float)Dk);
    int64_t work = (int64_t)a->out.rows * Hv * Dk * Dv;
#pragma omp parallel if (work >= IV_CPU_PAR_MIN)
    {
        float *S = iv_cpu_scratch((size_t)Dk * Dv * sizeof(float));
        float *qn = iv_cpu_scratch((size_t)(2 * Dk + Dv) * sizeof(float)), *kn = qn + Dk, *delta = kn + Dk;
#pragma omp for schedule(dynamic, 1)
        for (int p = 0; p < pairs; p++) {
            const int s = p / Hv, h = p % Hv, hk = h / rep;
            const float A = -expf(a_log[h]);
            memset(S, 0, (size_t)Dk * Dv * sizeof(float));
            for (int64_t t = a->cu_seqlens[s]; t < a->cu_seqlens[s + 1]; t++) {
                iv_dn_l2norm_scaled(qn, (const float *)a->q.data + t * a->q.ld + (int64_t)hk * Dk, Dk, q_scale);
                iv_dn_l2norm_scaled(kn, (const float *)a->k.data + t * a->k.ld + (int64_t)hk * Dk, Dk, 1.0f);
                const float *v = (const float *)a->v.data + t * a->v.ld + (int64_t)h * Dv;
                const float g = iv_dn_log_decay(A, ((const float *)a->a.data)[t * a->a.ld + h], dt_bias[h]);
                const float decay = expf(g);
                const float beta = iv_dn_beta(((const float *)a->b.data)[t * a->b.ld + h]);
                /* S *= exp(g); delta = beta (v - S^T k) */
                float *restrict dl = delta;
                for (int j = 0; j < Dv; j++) dl[j] = 0;
                for (int i = 0; i < Dk; i++) {
                    float *restrict Si = S + (int64_t)i * Dv;
                    const float ki = kn[i];
#pragma omp simd
                    for (int j = 0; j < Dv; j++) {
                        Si[j] *= decay;
                        dl[j] += Si[j] * ki;
                    }
                }
                for (int j = 0; j < Dv; j++) dl[j] = (v[j] - dl[j]) * beta;
                /* S += k delta^T; out = S^T q */
                float *restrict o = (float *)a->out.data + t * a->out.ld + (int64_t)h * Dv;
                for (int j = 0; j < Dv; j++) o[j] = 0;
                for (int i = 0; i < Dk; i++) {
                    float *restrict Si = S + (int64_t)i * Dv;
                    const float ki = kn[i], qi = qn[i];
#pragma omp simd
                    for (int j = 0; j < Dv; j++) {
                        Si[j] += ki * dl[j];
                        o[j] += Si[j] * qi;
                    }
                }
            }
        }
        free(S);
        free(qn);
    }
}
