/* DeBERTa-v2's ConvLayer as one linear op: each token's row of the im2col
 * matrix (the im2col op) holds the embeddings of its kernel window (zeros
 * past either end of its own sequence, so packed sequences never mix), and
 * the weight is laid out to match. */
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

int iv_token_conv_apply(const iv_ops *ops, const iv_token_conv *c, float eps, const iv_batch *b, iv_view emb,
                        iv_view x, iv_arena *dev)
{
    const int64_t T = b->n_tokens, H = x.cols, K = c->kernel;
    const iv_view cols = iv_act_alloc(ops, dev, T, K * H, K * H), out = iv_act_alloc(ops, dev, T, H, H);
    if (!cols.data || !out.data) return -1;
    ops->im2col(ops, cols, emb, c->kernel, b->cu_seqlens, b->cu_seqlens_dev, b->n_seqs);
    ops->linear(ops, out, cols, c->w, c->b, c->act, NULL);
    ops->layer_norm(ops, x, x, out.data, c->norm.w, c->norm.b, eps);
    return 0;
}
