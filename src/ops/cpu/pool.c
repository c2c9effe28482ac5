/* Sentence pooling over packed FP32 rows, as sentence-transformers'
 * Pooling module computes it (see iv_pool_args). */
#include <math.h>
#include <string.h>

#include "ops/cpu/cpu_ops.h"

void iv_cpu_pool(const iv_ops *ops, const iv_pool_args *a)
{
    const int64_t H = a->x.cols;
    for (int s = 0; s < a->n_seqs; s++) {
        const int start = a->cu_seqlens[s], len = a->cu_seqlens[s + 1] - start;
        float *o = (float *)a->out.data + (int64_t)s * a->out.ld;
        int skip = a->skip ? a->skip[s] : 0;
        if (skip >= len) skip = 0;
        const float *first = (const float *)a->x.data + (int64_t)(start + skip) * a->x.ld;
        const int64_t ld = a->x.ld;
        const int n = len - skip;
        switch (a->mode) {
        case IV_POOL_CLS:
            /* sentence-transformers takes the first unmasked token, which is the
             * first token after the prompt when the prompt is excluded. */
            memcpy(o, first, (size_t)H * sizeof(float));
            break;
        case IV_POOL_LAST:
            memcpy(o, (const float *)a->x.data + (int64_t)(start + len - 1) * ld, (size_t)H * sizeof(float));
            break;
        case IV_POOL_MEAN:
        case IV_POOL_MEAN_SQRT_LEN: {
            /* Sum in float like torch's masked sum, then divide. */
            memset(o, 0, (size_t)H * sizeof(float));
            for (int t = 0; t < n; t++)
                for (int64_t h = 0; h < H; h++) o[h] += first[(int64_t)t * ld + h];
            const float d = a->mode == IV_POOL_MEAN ? (float)n : sqrtf((float)n);
            for (int64_t h = 0; h < H; h++) o[h] /= d;
            break;
        }
        case IV_POOL_MAX:
            memcpy(o, first, (size_t)H * sizeof(float));
            for (int t = 1; t < n; t++)
                for (int64_t h = 0; h < H; h++)
                    if (first[(int64_t)t * ld + h] > o[h]) o[h] = first[(int64_t)t * ld + h];
            break;
        case IV_POOL_WEIGHTED_MEAN: {
            /* Weight = 1-based position in the sequence (prompt tokens count for
             * the position but are masked out), as sentence-transformers does. */
            memset(o, 0, (size_t)H * sizeof(float));
            float wsum = 0;
            for (int t = 0; t < n; t++) {
                const float w = (float)(t + skip + 1);
                wsum += w;
                for (int64_t h = 0; h < H; h++) o[h] += w * first[(int64_t)t * ld + h];
            }
            for (int64_t h = 0; h < H; h++) o[h] /= wsum;
            break;
        }
        case IV_POOL_NONE:
            memset(o, 0, (size_t)H * sizeof(float));
            break;
        }
    }
}
