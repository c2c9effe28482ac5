/* The Gated DeltaNet token mixer of the shared block (internal to block.c;
 * iv_deltanet in block.h). */
#ifndef IV_MODELS_BLOCK_DELTANET_H
#define IV_MODELS_BLOCK_DELTANET_H

#include "models/block.h"

/* Channels of the short convolution (q, k, v) and of the fused input projection (those, z, b, a). */
static inline int64_t iv_deltanet_conv_cols(const iv_deltanet *d)
{
    return 2 * (int64_t)d->n_k_heads * d->k_head_dim + (int64_t)d->n_v_heads * d->v_head_dim;
}
static inline int64_t iv_deltanet_proj_cols(const iv_deltanet *d)
{
    return iv_deltanet_conv_cols(d) + (int64_t)d->n_v_heads * d->v_head_dim + 2 * (int64_t)d->n_v_heads;
}

/* out[:, :Hv Dv] = the gated-normed DeltaNet output of in (before out_proj),
 * with proj ([T, >= proj cols]) and conv ([T, >= conv cols]) as scratch. */
void iv_block_deltanet(const iv_ops *ops, const iv_deltanet *d, const iv_batch *b, iv_view in, iv_view proj,
                       iv_view conv, iv_view out);

#endif
