/* sentence-transformers Dense modules (2_Dense, 3_Dense, ...): a linear
 * layer with an activation applied to the pooled embedding, or to every
 * token (PyLate's Dense). */
#ifndef IV_HEADS_ST_DENSE_H
#define IV_HEADS_ST_DENSE_H

#include "base/arena.h"
#include "heads/st_meta.h"
#include "tensor/safetensors.h"

typedef struct iv_st_dense_stack {
    int n;
    iv_weights *weights[IV_ST_MAX_DENSE];
    const iv_tensor *w[IV_ST_MAX_DENSE], *b[IV_ST_MAX_DENSE];
    iv_act act[IV_ST_MAX_DENSE];
    int out_dim; /* width after the last layer (0 when n == 0) */
    /* Weights packed for the CPU linear kernel (iv_st_dense_pack_cpu): w[i]
     * points at packed[i], whose data is packed_mem[i]. */
    iv_tensor packed[IV_ST_MAX_DENSE];
    float *packed_mem[IV_ST_MAX_DENSE];
} iv_st_dense_stack;

/* Loads the Dense modules listed in meta; in_dim is the pooled width.
 * Token-level modules are refused (only multi-vector models use them). */
int iv_st_dense_load(iv_st_dense_stack *d, const iv_st_meta *meta, int in_dim, iv_err *err);
/* Loads the token-level Dense modules (PyLate's projection); in_dim is the hidden size. */
int iv_st_dense_load_token_level(iv_st_dense_stack *d, const iv_st_meta *meta, int in_dim, iv_err *err);
/* Packs the weights into the CPU linear kernel's panels (as the model's own,
 * models/pack_weights.h), giving back the file pages of the originals:
 * pooled rows are then summed in one order whatever the batch. */
int iv_st_dense_pack_cpu(iv_st_dense_stack *d, iv_err *err);
/* Copies the weights into a device table's memory (tables with prepare_weight). */
int iv_st_dense_to_device(iv_st_dense_stack *d, const iv_ops *ops, iv_err *err);
/* See iv_weights_own_mapped: the Dense modules' tensors still read in place, copied into memory. */
int iv_st_dense_own_mapped(iv_st_dense_stack *d, iv_err *err);
void iv_st_dense_free(iv_st_dense_stack *d);
/* x [rows, in] -> *out [rows, out_dim] in dev (x itself when the stack is empty). */
int iv_st_dense_apply(const iv_ops *ops, const iv_st_dense_stack *d, iv_view x, iv_arena *dev, iv_view *out);

#endif
