/* safetensors checkpoints: one file or shards listed in
 * model.safetensors.index.json, memory-mapped, every header field validated.
 * Hostile or truncated files produce an IV_E_FORMAT error naming the file
 * and the field, never a crash. */
#ifndef IV_TENSOR_SAFETENSORS_H
#define IV_TENSOR_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "base/err.h"
#include "tensor/tensor.h"

/* Headers above this size are rejected (the format's own reference limit). */
#define IV_SAFETENSORS_MAX_HEADER (100u << 20)

typedef struct iv_weights iv_weights;

/* Opens the weights of a checkpoint directory: model.safetensors, or the
 * shards named by model.safetensors.index.json. A directory holding only
 * pytorch_model.bin (or .pt / .pth files) is rejected with a message saying
 * safetensors is required. */
int iv_weights_open_dir(iv_weights **out, const char *dir, iv_err *err);
/* Opens one .safetensors file. */
int iv_weights_open_file(iv_weights **out, const char *path, iv_err *err);
void iv_weights_close(iv_weights *w);

/* The raw tensor as stored (file dtype, CPU, pointing into the mapping;
 * data may be unaligned for its dtype). NULL when absent. */
const iv_tensor *iv_weights_find(const iv_weights *w, const char *name);
int iv_weights_count(const iv_weights *w);
const char *iv_weights_name(const iv_weights *w, int i);
/* True when some tensor name starts with prefix. */
int iv_weights_has_prefix(const iv_weights *w, const char *prefix);

/* The tensor as an aligned F32 CPU tensor: points into the mapping when the
 * file holds aligned F32, else converted once and cached (owned by w).
 * Errors when absent (IV_E_NOTFOUND, naming the tensor), when the dtype is
 * not a float type, or when shape (ndim dims) does not match; pass ndim=0
 * to skip the shape check. */
int iv_weights_f32(iv_weights *w, const char *name, int ndim, const int64_t *shape,
                   const iv_tensor **out, iv_err *err);

/* Metadata "__metadata__" string value, or NULL. */
const char *iv_weights_metadata(const iv_weights *w, const char *key);

#endif
