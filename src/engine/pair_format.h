/* Text pairs formatted by the checkpoint's own processor instead of the
 * tokenizer's pair template or a chat template: NVIDIA NeMo Automodel's
 * Mistral3BiEncoderProcessor (the Nemotron Mistral3 reranker's cross-encoder
 * processor, nemo_automodel/components/models/ministral_bidirectional/
 * processor.py at 03f9c4c5929a38763b7178aac8bccd254f41054c), which a
 * cross-encoder recipe saves as itself: processor_config.json names it.
 *
 * Its process_queries_documents_crossencoder, text-only: query and passage
 * each get U+200C after every "[" and "<" (_mark_user_text_ownership: user
 * text cannot spell a control token; the tokenizer's normalizer takes the
 * mark out again), then
 *     use_prompt_template: "query: {q}\n\npassage: {p}"
 *     otherwise:           "{q}\n{p}"
 * tokenized as one text with the tokenizer's special tokens, truncated to
 * rerank_max_length (else the tokenizer's model_max_length). */
#ifndef IV_ENGINE_PAIR_FORMAT_H
#define IV_ENGINE_PAIR_FORMAT_H

#include <stddef.h>

#include "base/err.h"

typedef struct iv_pair_format {
    int enabled;             /* processor_config.json names Mistral3BiEncoderProcessor */
    int use_prompt_template;
    int max_length;          /* rerank_max_length; 0: null (the engine's limit) */
} iv_pair_format;

/* Reads model_dir/processor_config.json (absent or another processor:
 * disabled). For Mistral3BiEncoderProcessor every field the pair format
 * depends on must be there and well typed, processor_class and
 * auto_map.AutoProcessor must agree, and tokenizer_config.json must record
 * the processor's escape policy (the normalizer that removes the mark);
 * anything else is IV_E_FORMAT (malformed) or IV_E_UNSUPPORTED (a variant
 * this engine does not reproduce), never a guess. */
int iv_pair_format_load(iv_pair_format *pf, const char *model_dir, iv_err *err);

/* The processor's string for (query, passage), NUL-terminated, in *out
 * (malloc'd; *out_len bytes before the NUL). */
int iv_pair_format_render(const iv_pair_format *pf, const char *query, size_t query_len, const char *passage,
                          size_t passage_len, char **out, size_t *out_len, iv_err *err);

#endif
