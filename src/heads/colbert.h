/* Multi-vector (ColBERT late-interaction) output: every token's final hidden
 * state projected (ColBERT's `linear`, or PyLate's Dense chain) and
 * L2-normalised; one [kept tokens, dim] matrix per input.
 *
 * Two checkpoint layouts, one behaviour:
 * - Stanford HF_ColBERT (colbert-ai): `linear.weight` in model.safetensors,
 *   settings in artifact.metadata (optional; colbert-ai's defaults otherwise).
 * - PyLate: pylate.models.Dense modules, settings in
 *   config_sentence_transformers.json (engine/st_meta.h).
 *
 * Inputs are queries or documents. A query carries the query marker at
 * position 1 ([unused0] / "[Q] "), as both libraries place it; it keeps
 * every row, and its trailing run of [MASK] tokens (query expansion) is not
 * attended as keys unless the checkpoint says so. Anything else is a
 * document: rows of skiplist tokens (punctuation) are dropped, and the pad
 * token too in the Stanford layout. Markers and expansion are never added
 * here: the client sends the final token ids for queries. */
#ifndef IV_HEADS_COLBERT_H
#define IV_HEADS_COLBERT_H

#include "base/arena.h"
#include "models/batch.h"
#include "heads/st_dense.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

typedef enum iv_colbert_layout {
    IV_COLBERT_NONE = 0, /* not a multi-vector model */
    IV_COLBERT_STANFORD,
    IV_COLBERT_PYLATE,
    /* Vision-language retrievers on Qwen3-VL (ColQwen3: the model's
     * token_proj; Nemotron ColEmbed V2: no projection): every token kept,
     * no markers, no skiplist; queries and documents differ only in what
     * the client sends. */
    IV_COLBERT_VLM,
} iv_colbert_layout;

/* Multi-vector (ColBERT) models: how inputs are told apart and how long the
 * checkpoint meant them to be. Queries are inputs whose token at position 1
 * is query_marker; the client builds them ([CLS] [Q] ... [SEP] then [MASK]
 * up to query_maxlen when query expansion is on). */
typedef struct iv_multivector_info {
    int dim;                /* width of each token vector */
    int query_maxlen;       /* query length with expansion (colbert-ai query_maxlen / PyLate query_length) */
    int doc_maxlen;         /* document truncation length of the reference (doc_maxlen / document_length) */
    int32_t query_marker;   /* -1 when the checkpoint has none (every input is then a document) */
    int32_t doc_marker;     /* -1 when none */
    int32_t mask_id;        /* query expansion token, -1 when none */
    int query_expansion;    /* the reference pads queries with mask_id */
    int attend_to_mask;     /* expansion tokens are attended as keys */
} iv_multivector_info;

typedef struct iv_colbert {
    iv_multivector_info info;  /* what the engine reports */
    iv_colbert_layout layout;
    int32_t pad_id;            /* dropped from documents (Stanford layout); -1 when none */
    int n_skip;
    int32_t *skip;             /* sorted, unique skiplist ids */
    const iv_head *proj;       /* Stanford, ColQwen3: the model's token_proj */
    float norm_eps;            /* rows are divided by max(||x||, norm_eps) */
    iv_st_dense_stack dense;   /* PyLate: the token-level Dense chain */
} iv_colbert;

/* Fills c from the model, its sentence-transformers metadata and tokenizer
 * (needed: the skiplist and the markers are tokens). c->layout stays NONE
 * for other models. Contradictory or incomplete settings are errors. */
int iv_colbert_load(iv_colbert *c, const char *model_dir, const iv_model *m, const iv_st_meta *meta,
                    const iv_tokenizer *tok, iv_err *err);
void iv_colbert_free(iv_colbert *c);

/* 1 when ids are a query (the query marker at position 1). */
int iv_colbert_is_query(const iv_colbert *c, const int32_t *ids, int len);
/* The key mask a query needs: 0 on its trailing [MASK] expansion tokens
 * unless they attend. Returns 1 when it wrote mask[0..len), 0 when every
 * token is a key (mask untouched). */
int iv_colbert_key_mask(const iv_colbert *c, const int32_t *ids, int len, uint8_t *mask);

/* Projects and normalises hidden [n_tokens, H] and keeps each sequence's
 * rows: out receives the kept rows back to back ([sum rows, dim]), rows[s]
 * how many sequence s kept. */
int iv_colbert_apply(const iv_colbert *c, const iv_ops *ops, const iv_batch *b, iv_view hidden, float *out,
                     int *rows, const iv_fwd_mem *mem);

#endif
