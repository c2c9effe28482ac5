/* Pieces every flavour's routes share: prompt and truncation options,
 * input checks, embedding post-processing and score ordering. */
#ifndef IV_SERVER_ROUTES_COMMON_H
#define IV_SERVER_ROUTES_COMMON_H

#include "server/router.h"

/* Input options from a request's truncate / truncation_direction /
 * prompt_name (truncate < 0: the server's --auto-truncate; prompt_name
 * NULL: the model's default prompt, if any; use_prompt 0: never a prompt).
 * Replies and returns -1 on an unknown prompt name. */
int iv_route_input_opts(iv_req *r, int truncate, int left, const char *prompt_name, int use_prompt, iv_input_opts *o);

/* TEI's empty checks: an empty list is "`<what>` cannot be empty"; an empty
 * text or id list is "Input validation error: `inputs` cannot be empty"
 * (Infinity's routes accept empty texts). Replies and returns -1. */
int iv_route_check_nonempty(iv_req *r, const char *what);

/* Matryoshka truncation then, when asked, L2 normalisation of item i's
 * pooled vector in place; returns its new length. */
int iv_route_finish_embedding(iv_req *r, int i);

/* Activation (unless raw) and label order of item i's logits; returns the
 * scores (in place) and fills order[]. 1 when a score is NaN (after replying). */
int iv_route_scores(iv_req *r, int i, int raw, int *order);

/* Sum of tokens over the job (usage.prompt_tokens). */
long long iv_route_job_tokens(const iv_req *r);

/* "usage":{"prompt_tokens":n,"total_tokens":n} */
void iv_route_usage(iv_strbuf *b, long long tokens);

/* Rerank: the parsed texts become (query, text) pairs; query is the
 * request's JSON string (its full length may hold U+0000). */
void iv_rerank_pairs(iv_req *r, const cJSON *query);
/* The model a rerank route runs on (the one the request names; it must be
 * a one-label re-ranker), or NULL after answering the error. */
iv_model_slot *iv_route_reranker(iv_req *r);
/* What every rerank route does once its body is parsed and its model
 * picked: pairs the query with each input (`field` names them in errors),
 * applies truncation and submits the job; `finish` writes the flavour's
 * response. */
void iv_route_submit_rerank(iv_req *r, iv_model_slot *m, const cJSON *query, const char *field, int truncate, int left,
                            iv_finish_fn finish);

typedef struct iv_rank {
    int index;
    float score;
} iv_rank;
/* Scores of a rerank job (sigmoid unless raw_scores), sorted by descending
 * score, ties by index; NULL after replying (NaN, out of memory). */
iv_rank *iv_rerank_ranks(iv_req *r);

/* Multi-vector (ColBERT) models: 1 when the slot's model returns one token
 * matrix per input (IV_TASK_MULTIVECTOR) instead of a pooled vector. */
int iv_route_is_multivector(const iv_model_slot *m);
/* Refuses a request option that cannot apply to token matrices (`field`,
 * `why`) with a 422 naming the model; replies and returns -1. */
int iv_route_refuse_multivector(iv_req *r, const char *field, const char *why);
/* Refuses encoding_format=tensor on a single-vector model; replies and returns -1. */
int iv_route_check_encoding(iv_req *r);

/* The OpenAI embeddings response (/v1/embeddings and Infinity's /embeddings). */
void iv_openai_finish_embeddings(iv_req *r);
/* Infinity's ,"id":"infinity-<uuid4>","created":<unix seconds> */
void iv_infinity_id_created(iv_strbuf *b);

#endif
