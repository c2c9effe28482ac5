/* Task heads over the backbone's packed hidden states: sequence
 * classification (rerankers are the 1-label case), token classification and
 * SPLADE sparse vectors. Pooled sentence embeddings are in pooling.h. */
#ifndef IV_HEADS_TASK_HEADS_H
#define IV_HEADS_TASK_HEADS_H

#include "models/model.h"

/* out [n_seqs, num_labels]: the head on the first/mean/last token of each sequence. */
int iv_head_classify(const iv_model *m, const iv_batch *b, const float *hidden, float *out, iv_arena *arena);
/* out [n_tokens, num_labels]. */
int iv_head_token_classify(const iv_model *m, const iv_batch *b, const float *hidden, float *out,
                           iv_arena *arena);
/* out [n_seqs, vocab]: max over tokens of log(1 + relu(MLM logits)). */
int iv_head_splade(const iv_model *m, const iv_batch *b, const float *hidden, float *out, iv_arena *arena);

#endif
