/* Token classification output as transformers' TokenClassificationPipeline
 * gives it (pipelines/token_classification.py): per-token logits of one
 * text become entities {"entity"|"entity_group", "score", "index"?, "word",
 * "start", "end"} with the pipeline's aggregation strategies (none, simple,
 * first, average, max), its is_subword rule, its B-/I- grouping and its
 * ignore_labels filter. Offsets are character (code point) offsets into the
 * text; "word" is the token string (none) or the decoder's join of the
 * grouped tokens (convert_tokens_to_string), an unknown token standing for
 * its text slice. Shared by the HTTP routes and `infinity_v3 classify-tokens`. */
#ifndef IV_ENGINE_TOKEN_ENTITIES_H
#define IV_ENGINE_TOKEN_ENTITIES_H

#include "base/strbuf.h"
#include "engine/engine.h"

typedef enum iv_aggregation {
    IV_AGG_NONE = 0,
    IV_AGG_SIMPLE,
    IV_AGG_FIRST,
    IV_AGG_AVERAGE,
    IV_AGG_MAX,
} iv_aggregation;

/* Case-insensitive, as the pipeline's AggregationStrategy[name.upper()]; -1 when unknown. */
int iv_aggregation_parse(const char *name, iv_aggregation *out);
const char *iv_aggregation_name(iv_aggregation a);
#define IV_AGGREGATION_NAMES "none, simple, first, average, max"

typedef struct iv_tokcls_opts {
    iv_aggregation aggregation;
    int raw_scores;                   /* logits instead of the softmax (scores and aggregation) */
    const char *const *ignore_labels; /* NULL: the pipeline's default ["O"] */
    int n_ignore;
} iv_tokcls_opts;

typedef struct iv_token_entity {
    char *label;  /* entity (none, first, average, max before grouping) or entity_group */
    float score;
    int index;    /* token index in the sequence (none only), else -1 */
    char *word;
    int start, end; /* code point offsets into the text */
} iv_token_entity;

typedef struct iv_token_entities {
    int n;
    int grouped;  /* 1: entity_group (every strategy but none) */
    iv_token_entity *items;
} iv_token_entities;

/* Entities of one text from its encoding (ids, special mask, byte offsets
 * into text) and logits [enc->len, iv_engine_num_labels(e)]. The text must be
 * the one encoded (no prompt). */
int iv_token_entities_build(const iv_engine *e, const char *text, size_t text_len, const iv_encoding *enc,
                            const float *logits, const iv_tokcls_opts *opts, iv_token_entities *out, iv_err *err);
void iv_token_entities_free(iv_token_entities *t);

/* [{"entity","score","index","word","start","end"},...] (none) or
 * [{"entity_group","score","word","start","end"},...]. */
void iv_token_entities_json(iv_strbuf *b, const iv_token_entities *t);

#endif
