/* Sentence pooling over packed hidden states, as sentence-transformers'
 * Pooling module computes it. */
#ifndef IV_HEADS_POOLING_H
#define IV_HEADS_POOLING_H

#include "engine/batch.h"
#include "engine/st_meta.h"

/* out [n_seqs, H]. skip_first[s] (or NULL) leading tokens of sequence s are
 * left out of mean/max/weighted pooling (sentence-transformers'
 * include_prompt=false drops the prompt's tokens). */
int iv_pool(const iv_batch *b, const float *hidden, int H, iv_pool_mode mode, const int *skip_first,
            float *out);

#endif
