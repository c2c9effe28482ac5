/* Im2col over packed sequences (ops.h): each row of y holds its token's
 * kernel window of x, zeros where the window leaves its own sequence. */
#include <assert.h>
#include <string.h>

#include "ops/cpu/cpu_ops.h"

void iv_cpu_im2col(const iv_ops *ops, iv_view y, iv_view x, int kernel, const int32_t *cu_seqlens,
                   const int32_t *cu_seqlens_dev, int n_seqs)
{
    const int64_t H = x.cols, K = kernel, pad = (K - 1) / 2;
    assert(kernel % 2 == 1 && y.cols == K * H && y.rows == x.rows);
    for (int s = 0; s < n_seqs; s++) {
        const int64_t t0 = cu_seqlens[s], len = cu_seqlens[s + 1] - t0;
#pragma omp parallel for schedule(static) if (len * K * H >= IV_CPU_PAR_MIN)
        for (int64_t i = 0; i < len; i++)
            for (int64_t k = 0; k < K; k++) {
                float *dst = (float *)y.data + (t0 + i) * y.ld + k * H;
                const int64_t src = i + k - pad;
                if (src < 0 || src >= len) memset(dst, 0, (size_t)H * sizeof(float));
                else memcpy(dst, (const float *)x.data + (t0 + src) * x.ld, (size_t)H * sizeof(float));
            }
    }
}
