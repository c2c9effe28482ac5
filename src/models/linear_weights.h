/* Load-time replacement of a model's weights by copies in the layout a
 * device's ops want: FP32 panels for the CPU linear kernel
 * (pack_weights.c), int8 for `--dtype int8` (quantize.c), a GPU's or the
 * emulated device's own copies of every tensor (model_device.c, with
 * IV_LW_VECTORS). The walk covers the kinds asked for; the others keep
 * their tensors.
 * Weights shared by several layers are converted once and stay shared. */
#ifndef IV_MODELS_LINEAR_WEIGHTS_H
#define IV_MODELS_LINEAR_WEIGHTS_H

#include "models/model.h"

/* The replacement for w (a row-major FP32 [out, in] tensor), `what` naming
 * it for errors ("layer 3 MLP up"): a model-owned tensor, w itself to keep
 * it, or NULL with err set. */
typedef const iv_tensor *(*iv_linear_weight_fn)(iv_model *m, const iv_tensor *w, const char *what, void *ctx,
                                                iv_err *err);

/* Which weights a walk covers. */
enum {
    IV_LW_LAYER_MATMULS = 1, /* QKV, attention output, MLP up/down, each expert's up/down,
                                the per-layer input gate/projection */
    IV_LW_AUX = 2,           /* MoE routers, the embedding projection, the token convolution,
                                the per-layer input and output projections */
    /* Every step of the model's heads (sequence, token, MLM, token projection).
     * A head weight that is the word embedding table (a tied MLM decoder)
     * replaces the table too, so it is stored once, in the new layout: the
     * device's embedding op must read that layout. */
    IV_LW_HEADS = 4,
    /* Everything else an op reads: embedding tables, norm weights and
     * biases, linear biases, expert output biases, the weights layers'
     * dynamic-bias hooks slice (1-D tensors included; for device tables,
     * which keep them row-major). */
    IV_LW_VECTORS = 8,
};

/* Replaces every linear weight of the kinds asked for by fn's answer. Each
 * original is released as soon as it is replaced: copies the loader made
 * (fused QKV, fused gate/up) are freed, and the file pages of mapped ones go
 * back to the kernel, so the model is resident once, in its new layout,
 * even at the peak of loading. */
int iv_model_replace_linear_weights(iv_model *m, unsigned kinds, iv_linear_weight_fn fn, void *ctx, iv_err *err);

#endif
