/* Internal to ops/cpu: the per-token pieces both delta-rule kernels share
 * (deltanet.c, the recurrence; deltanet_chunk.c, the chunked form), so the
 * two read q, k, beta and g exactly alike. */
#ifndef IV_OPS_CPU_DELTANET_MATH_H
#define IV_OPS_CPU_DELTANET_MATH_H

#include <math.h>

/* torch.nn.functional.softplus (beta 1, threshold 20). */
static inline float iv_dn_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* x * rsqrt(sum x^2 + 1e-6) * scale into dst (transformers' l2norm, as FLA). */
static inline void iv_dn_l2norm_scaled(float *dst, const float *x, int n, float scale)
{
    float ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    const float inv = 1.0f / sqrtf(ss + 1e-6f);
    for (int i = 0; i < n; i++) dst[i] = x[i] * inv * scale;
}

/* beta = sigmoid(b); g = A * softplus(a + dt_bias), A = -exp(A_log). */
static inline float iv_dn_beta(float b) { return 1.0f / (1.0f + expf(-b)); }
static inline float iv_dn_log_decay(float A, float a, float dt_bias) { return A * iv_dn_softplus(a + dt_bias); }

#endif
