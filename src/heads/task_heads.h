/* Task heads over the backbone's packed hidden states (device memory):
 * sequence classification (rerankers are the 1-label case), token
 * classification and SPLADE sparse vectors. Each writes its result to host
 * memory, downloaded once. Pooled sentence embeddings are in pooling.h. */
#ifndef IV_HEADS_TASK_HEADS_H
#define IV_HEADS_TASK_HEADS_H

#include "models/model.h"

/* out (host) [n_seqs, num_labels]: the head on the first/mean/last token of each sequence. */
int iv_head_classify(const iv_model *m, const iv_batch *b, iv_view hidden, float *out, const iv_fwd_mem *mem);
/* out (host) [n_tokens, num_labels]. */
int iv_head_token_classify(const iv_model *m, const iv_batch *b, iv_view hidden, float *out, const iv_fwd_mem *mem);
/* out (host) [n_seqs, vocab]: max over tokens of log(1 + relu(MLM logits)). */
int iv_head_splade(const iv_model *m, const iv_batch *b, iv_view hidden, float *out, const iv_fwd_mem *mem);

#endif
