/* Sentence pooling over packed hidden states, as sentence-transformers'
 * Pooling module computes it, through the device's pool op. */
#ifndef IV_HEADS_POOLING_H
#define IV_HEADS_POOLING_H

#include "models/batch.h"
#include "models/block.h"
#include "ops/ops.h"

/* *out [n_seqs, H] in mem->dev from hidden [T, H] of an uploaded batch.
 * skip_first[s] (host, or NULL) leading tokens of sequence s are left out
 * (sentence-transformers' include_prompt=false drops the prompt's tokens). */
int iv_pool(const iv_ops *ops, const iv_batch *b, iv_view hidden, iv_pool_mode mode, const int *skip_first,
            const iv_fwd_mem *mem, iv_view *out);

/* Several modes at once, as a Pooling module with more than one mode:
 * *out [n_seqs, n_modes * H], mode k's vectors in columns [k H, (k + 1) H),
 * concatenated in the order given (sentence-transformers' order). */
int iv_pool_concat(const iv_ops *ops, const iv_batch *b, iv_view hidden, const iv_pool_mode *modes, int n_modes,
                   const int *skip_first, const iv_fwd_mem *mem, iv_view *out);

#endif
