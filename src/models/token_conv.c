/* DeBERTa-v2's ConvLayer as one GEMM: each token's row of the im2col
 * matrix holds the embeddings of its kernel window (zeros past either end
 * of its own sequence, so packed sequences never mix), and the weight is
 * laid out to match. */
#include "models/token_conv.h"

#include <string.h>

#include "models/loader.h"

int iv_token_conv_weight(iv_model *m, iv_token_conv *c, const iv_tensor *conv_w, int groups, iv_err *err)
{
    if (conv_w->ndim != 3)
        return iv_errf(err, IV_E_FORMAT, "convolution weight must be [out, in / groups, kernel]");
    const int64_t H = conv_w->shape[0], per_group = conv_w->shape[1], K = conv_w->shape[2];
    if (groups <= 0 || H % groups || per_group != H / groups)
        return iv_errf(err, IV_E_FORMAT, "convolution weight [%lld, %lld, %lld] does not match %d groups",
                       (long long)H, (long long)per_group, (long long)K, groups);
    if (K % 2 == 0)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "conv_kernel_size %lld is even; only odd kernels keep the sequence length", (long long)K);
    iv_tensor *w = iv_model_new_tensor(m, H, K * H);
    if (!w) return iv_errf(err, IV_E_NOMEM, "out of memory for the convolution weight");
    float *dst = w->data;
    const float *src = conv_w->data;
    memset(dst, 0, (size_t)(H * K * H) * sizeof(float));
    for (int64_t o = 0; o < H; o++) {
        const int64_t c0 = o / per_group * per_group; /* first input channel of o's group */
        for (int64_t ci = 0; ci < per_group; ci++)
            for (int64_t k = 0; k < K; k++) dst[o * K * H + k * H + c0 + ci] = src[(o * per_group + ci) * K + k];
    }
    c->w = w;
    c->kernel = (int)K;
    return 0;
}

int iv_token_conv_apply(const iv_ops *ops, const iv_token_conv *c, float eps, const iv_batch *b, const float *emb,
                        float *x, int64_t H, iv_arena *arena)
{
    const int64_t T = b->n_tokens, K = c->kernel, pad = (K - 1) / 2;
    float *cols = iv_arena_alloc(arena, (size_t)(T * K * H) * sizeof(float));
    float *out = iv_arena_alloc(arena, (size_t)(T * H) * sizeof(float));
    if (!cols || !out) return -1;
    for (int s = 0; s < b->n_seqs; s++) {
        const int64_t t0 = b->cu_seqlens[s], len = iv_batch_seqlen(b, s);
        for (int64_t i = 0; i < len; i++)
            for (int64_t k = 0; k < K; k++) {
                float *dst = cols + ((t0 + i) * K + k) * H;
                const int64_t src = i + k - pad;
                if (src < 0 || src >= len) memset(dst, 0, (size_t)H * sizeof(float));
                else memcpy(dst, emb + (t0 + src) * H, (size_t)H * sizeof(float));
            }
    }
    const iv_view ov = iv_view_make(out, IV_F32, T, H, H), cv = iv_view_make(cols, IV_F32, T, K * H, K * H),
                  xv = iv_view_make(x, IV_F32, T, H, H);
    ops->linear(ops, ov, cv, c->w, c->b, c->act, NULL);
    ops->layer_norm(ops, xv, xv, out, c->norm.w, c->norm.b, eps);
    return 0;
}
