/* The input length limit in force for a checkpoint, and where it comes from,
 * resolved as sentence-transformers 6.3 resolves max_seq_length. */
#ifndef IV_ENGINE_MAX_LENGTH_H
#define IV_ENGINE_MAX_LENGTH_H

#include "heads/st_meta.h"
#include "tokenizer/tokenizer.h"

typedef struct iv_max_length {
    int tokens;          /* the limit: inputs are truncated (or refused) past it */
    const char *source;  /* "sentence_bert_config.json", "tokenizer_config.json", "config.json" */
} iv_max_length;

/* meta: the ST metadata (max_seq_length); tok: the tokenizer or NULL;
 * max_position_embeddings: config.json's (0 when absent); model_cap: the
 * most tokens the model can run (iv_model_max_length). */
iv_max_length iv_max_length_resolve(const iv_st_meta *meta, const iv_tokenizer *tok, int max_position_embeddings,
                                    int model_cap);

#endif
