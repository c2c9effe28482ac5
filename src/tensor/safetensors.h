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

/* Thread-safety: opening builds every index; afterwards the find, count,
 * name, prefix and metadata calls only read and may run on any thread.
 * iv_weights_f32 may convert and cache, so call it during model load only,
 * from one thread (tensors it returned stay valid until close). */

typedef struct iv_weights iv_weights;

/* Opens the weights of a checkpoint directory: model.safetensors, or the
 * shards named by model.safetensors.index.json. A directory holding only
 * pytorch_model.bin (or other .bin, .pt or .pth files) is rejected with a
 * message saying safetensors is required. */
int iv_weights_open_dir(iv_weights **out, const char *dir, iv_err *err);
/* Opens one .safetensors file. */
int iv_weights_open_file(iv_weights **out, const char *path, iv_err *err);
/* Parses a safetensors image already in memory, with the same checks as a
 * file (the file path maps and calls this parser; the fuzz target calls it
 * directly). Tensors point into data, which must outlive w; `what` names the
 * image in error messages. */
int iv_weights_open_memory(iv_weights **out, const void *data, size_t size, const char *what,
                           iv_err *err);
void iv_weights_close(iv_weights *w);
/* The end of loading: every tensor still read in place from a mapped file
 * (taken with iv_weights_f32, neither converted nor released) is copied
 * into this process' memory, at the same address, so that the file being
 * truncated or rewritten while the server runs can neither fault (SIGBUS)
 * nor change an answer. Unused tensors stay on disk. */
int iv_weights_own_mapped(iv_weights *w, iv_err *err);

/* The raw tensor as stored (file dtype, CPU, pointing into the mapping;
 * data may be unaligned for its dtype). NULL when absent, and for a tensor
 * of more than IV_MAX_DIMS dims: those (Conv3d kernels of vision towers) are
 * validated, counted and named so a text-only load still opens the file, but
 * cannot be loaded (iv_weights_f32 says why). */
const iv_tensor *iv_weights_find(const iv_weights *w, const char *name);
int iv_weights_count(const iv_weights *w);
const char *iv_weights_name(const iv_weights *w, int i);
/* True when some tensor name starts with prefix. */
int iv_weights_has_prefix(const iv_weights *w, const char *prefix);

/* The tensor as an aligned F32 CPU tensor: points into the mapping when the
 * file holds F32 at a 4-byte aligned address (the usual case: writers pad
 * the header to 8 bytes), else converted once into a 64-byte aligned copy
 * cached in w, so a second call returns the same tensor.
 * Errors when absent (IV_E_NOTFOUND, naming the tensor), when the dtype is
 * not a float type, or when shape (ndim dims) does not match; pass ndim=0
 * to skip the shape check. */
int iv_weights_f32(iv_weights *w, const char *name, int ndim, const int64_t *shape,
                   const iv_tensor **out, iv_err *err);
/* The tensor, of any stored rank from 2 (Conv3d kernels [out, in, t, h, w]
 * included), as an F32 matrix [rows, cols]: dims[0] must be rows and the
 * other dims must multiply to cols. The weight of a convolution whose kernel
 * equals its stride is then a linear's (patch embeddings). Cached like
 * iv_weights_f32; read a tensor one way only. */
int iv_weights_f32_matrix(iv_weights *w, const char *name, int64_t rows, int64_t cols, const iv_tensor **out,
                          iv_err *err);

/* Says nothing will read t (a tensor iv_weights_f32 returned) again, after
 * the model replaced it by a copy in another layout: the memory behind t
 * goes back, so the process does not keep both copies resident. A copy
 * converted from another dtype is freed (t's data must not be read again;
 * iv_weights_f32 converts anew if asked); the pages of the file mapping that
 * hold only t go back to the kernel (touching them again re-reads the file).
 * Load time, one thread. */
void iv_weights_release(iv_weights *w, const iv_tensor *t);

/* Metadata "__metadata__" string value, or NULL. */
const char *iv_weights_metadata(const iv_weights *w, const char *key);

#endif
