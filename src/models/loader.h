/* Helpers family files use to pull weights out of a checkpoint by name,
 * with shape checks and the naming variants real checkpoints carry. Names
 * are relative to the backbone prefix (m->prefix) unless noted. */
#ifndef IV_MODELS_LOADER_H
#define IV_MODELS_LOADER_H

#include "models/model.h"

/* Required tensor of shape [d0] (d1 < 0) or [d0, d1]. */
int iv_ld(iv_model *m, const char *name, int64_t d0, int64_t d1, const iv_tensor **out, iv_err *err);
/* Optional: *out = NULL when absent; a present tensor of the wrong shape is an error. */
int iv_ld_opt(iv_model *m, const char *name, int64_t d0, int64_t d1, const iv_tensor **out, iv_err *err);
/* The same, with the name taken as is (heads stored outside the backbone prefix). */
int iv_ld_top(iv_model *m, const char *name, int64_t d0, int64_t d1, const iv_tensor **out, iv_err *err);
int iv_ld_top_opt(iv_model *m, const char *name, int64_t d0, int64_t d1, const iv_tensor **out,
                  iv_err *err);
/* A 2-D table [any rows, cols] (embeddings); optional when required is 0. */
int iv_ld_table(iv_model *m, const char *name, int64_t cols, int required, const iv_tensor **out, iv_err *err);
/* A LayerNorm named base: base.weight/base.bias, or the legacy base.gamma/base.beta. */
int iv_ld_layer_norm(iv_model *m, const char *base, int64_t dim, int top, iv_norm *out, iv_err *err);

/* Concatenates Q, K and V projections (weights [n, H], biases optional) into
 * one fused projection owned by the model. */
int iv_fuse_qkv(iv_model *m, const iv_tensor *q_w, const iv_tensor *k_w, const iv_tensor *v_w,
                const iv_tensor *q_b, const iv_tensor *k_b, const iv_tensor *v_b, const iv_tensor **qkv_w,
                const iv_tensor **qkv_b, iv_err *err);

/* Concatenates n tensors of equal width along their rows ([r_i, C] -> [sum r_i, C],
 * or 1-D [r_i] -> [sum r_i]) into one owned by the model: gated MLP halves
 * stored apart. */
int iv_concat_rows(iv_model *m, const iv_tensor *const *parts, int n, const iv_tensor **out, iv_err *err);

/* Picks the backbone prefix: the first of candidates (e.g. "bert.", "") for
 * which prefix + probe exists. Error naming the probe when none does. */
int iv_detect_prefix(iv_model *m, const char *const *candidates, const char *probe, iv_err *err);

/* Splits the last layer's fused QKV into its queries and the rest
 * (iv_layer.q_w, kv_w) when the model can compute only the rows a head
 * reads (iv_model.no_head_rows_reason NULL), so that the head's rows alone
 * are projected to queries; before weights are packed or converted. */
int iv_model_split_last_qkv(iv_model *m, iv_err *err);
/* Allocates a model-owned float buffer described by a tensor [d0, d1] (d1 < 0: 1-D). */
iv_tensor *iv_model_new_tensor(iv_model *m, int64_t d0, int64_t d1);
/* Zeroed model-owned memory (per-layer descriptors, pointer tables), freed with the model. */
void *iv_model_alloc(iv_model *m, size_t bytes);
/* Drops w's data once nothing reads it any more: a model-owned buffer
 * (iv_model_new_tensor) is freed, checkpoint bytes are released
 * (iv_weights_release). */
void iv_model_release_data(iv_model *m, const iv_tensor *w);

/* Checks the architecture is one of a NULL-terminated list, else a clear error. */
int iv_require_architecture(const iv_model *m, const char *const *allowed, iv_err *err);

#endif
