#include "heads/pooling.h"

#include <math.h>
#include <string.h>

int iv_pool(const iv_batch *b, const float *hidden, int H, iv_pool_mode mode, const int *skip_first,
            float *out)
{
    for (int s = 0; s < b->n_seqs; s++) {
        const int start = b->cu_seqlens[s], len = iv_batch_seqlen(b, s);
        float *o = out + (int64_t)s * H;
        int skip = skip_first ? skip_first[s] : 0;
        if (skip >= len) skip = 0;
        const float *first = hidden + (int64_t)(start + skip) * H;
        const int n = len - skip;
        switch (mode) {
        case IV_POOL_CLS:
            /* sentence-transformers takes the first unmasked token, which is the
             * first token after the prompt when the prompt is excluded. */
            memcpy(o, first, (size_t)H * sizeof(float));
            break;
        case IV_POOL_LAST:
            memcpy(o, hidden + (int64_t)(start + len - 1) * H, (size_t)H * sizeof(float));
            break;
        case IV_POOL_MEAN:
        case IV_POOL_MEAN_SQRT_LEN: {
            /* Sum in float like torch's masked sum, then divide. */
            memset(o, 0, (size_t)H * sizeof(float));
            for (int t = 0; t < n; t++)
                for (int h = 0; h < H; h++) o[h] += first[(int64_t)t * H + h];
            const float d = mode == IV_POOL_MEAN ? (float)n : sqrtf((float)n);
            for (int h = 0; h < H; h++) o[h] /= d;
            break;
        }
        case IV_POOL_MAX:
            memcpy(o, first, (size_t)H * sizeof(float));
            for (int t = 1; t < n; t++)
                for (int h = 0; h < H; h++)
                    if (first[(int64_t)t * H + h] > o[h]) o[h] = first[(int64_t)t * H + h];
            break;
        case IV_POOL_WEIGHTED_MEAN: {
            /* Weight = 1-based position in the sequence (prompt tokens count for
             * the position but are masked out), as sentence-transformers does. */
            memset(o, 0, (size_t)H * sizeof(float));
            float wsum = 0;
            for (int t = 0; t < n; t++) {
                const float w = (float)(t + skip + 1);
                wsum += w;
                for (int h = 0; h < H; h++) o[h] += w * first[(int64_t)t * H + h];
            }
            for (int h = 0; h < H; h++) o[h] /= wsum;
            break;
        }
        default:
            return -1;
        }
    }
    return 0;
}
