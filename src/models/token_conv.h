/* The token convolution of iv_token_conv (models/model.h): DeBERTa-v2's
 * ConvLayer, which mixes a 1-D convolution of the embeddings into the
 * first layer's output. */
#ifndef IV_MODELS_TOKEN_CONV_H
#define IV_MODELS_TOKEN_CONV_H

#include "models/model.h"

/* Builds c->w from a PyTorch Conv1d weight [H, H / groups, kernel] (odd
 * kernel): the im2col layout [H, kernel * H] with the groups expanded to a
 * block-diagonal matrix, owned by the model. */
int iv_token_conv_weight(iv_model *m, iv_token_conv *c, const iv_tensor *conv_w, int groups, iv_err *err);

/* x [T, H] = LN(x + act(conv1d(emb))), per sequence of b, zero padded at
 * the sequence ends; x and emb dense activations, scratch from dev. The
 * batch's device arrays must be filled. Returns -1 when out of memory. */
int iv_token_conv_apply(const iv_ops *ops, const iv_token_conv *c, float eps, const iv_batch *b, iv_view emb,
                        iv_view x, iv_arena *dev);

#endif
