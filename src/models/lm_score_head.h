/* Reranking with a causal LM (Qwen3-Reranker style): the model reads the
 * formatted query/document pair and the relevance is P("yes") against
 * P("no") for the next token after the last one. With the two LM-head rows
 * W[yes], W[no] and the last token's final state h,
 *   softmax([l_no, l_yes])[1] = sigmoid(l_yes - l_no) = sigmoid((W[yes] - W[no]) . h),
 * so the checkpoint becomes a 1-label sequence classifier on the last token
 * whose weight is W[yes] - W[no]: the same head a converted
 * *ForSequenceClassification checkpoint carries as `score`. */
#ifndef IV_MODELS_LM_SCORE_HEAD_H
#define IV_MODELS_LM_SCORE_HEAD_H

#include "models/model.h"

/* Builds m->seq_head from the LM head rows of tokens pos and neg (ids in the
 * model's vocabulary; neg -1: the score is logit[pos] alone, as
 * sentence-transformers' LogitScore without a false token). The LM head is `lm_head.weight` (plus `lm_head.bias`
 * when present), or the word embeddings when tie_word_embeddings is true or
 * absent with no lm_head in the file. Only *ForCausalLM checkpoints qualify.
 * With final_logit_softcapping c the score is c tanh(l_yes / c) - c tanh(l_no / c),
 * as transformers caps the logits before they are compared. */
int iv_model_token_score_head(iv_model *m, int32_t pos, int32_t neg, iv_err *err);
/* Builds m->seq_head as an n-label classifier on the last token whose rows
 * are the LM head rows of ids[n]: the LM logits of those tokens at the next
 * position (the option-token decision readout, decisions/letters.h).
 * On soft-capped checkpoints (final_logit_softcapping) the logits are
 * capped as transformers caps them (iv_head.softcap). */
int iv_model_token_rows_head(iv_model *m, const int32_t *ids, int n, iv_err *err);
/* Builds m->seq_head as an n-label linear readout on the last token's
 * final-norm hidden state from the first n rows of w [rows >= n, hidden]
 * (no bias): a dedicated decision readout such as pplx-decider's
 * readout.safetensors. Any decoder architecture qualifies. */
int iv_model_last_token_readout(iv_model *m, const iv_tensor *w, int n, iv_err *err);
/* The LM head (output embedding) weight [vocab, hidden] as transformers
 * ties it (lm_head.weight, or the word embeddings), for heads that read its
 * rows as features (Clef's lexical option vectors). Any architecture. */
int iv_model_output_embeddings(iv_model *m, const iv_tensor **w, iv_err *err);
/* The checkpoint checks alone (0 when a score head can be built), so callers
 * can report them before resolving the tokens. */
int iv_model_can_score_tokens(const iv_model *m, iv_err *err);

#endif
