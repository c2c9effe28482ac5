/* Inputs as conversations: a request's messages, or a text, a text pair and
 * a prompt turned into messages the way sentence-transformers 6.3 turns them
 * for a checkpoint whose sentence_bert_config.json declares the "message"
 * modality (a causal LM reranker such as Qwen3-Reranker, a chat-template
 * embedder). The conversation is rendered by the checkpoint's chat template
 * (src/chat/), tokenized without the tokenizer's own special tokens (the
 * template writes them, as apply_chat_template tokenizes), truncated, and the
 * template's tail written back over a truncated end so the last token stays
 * the one the model was trained to read. */
#ifndef IV_ENGINE_CONVERSATION_H
#define IV_ENGINE_CONVERSATION_H

#include "engine/inputs.h"

/* Whether in must go through the chat template: it carries messages, the
 * checkpoint declares the message modality, or it is a text pair and the
 * operator gave a chat template for pairs. */
int iv_conversation_wanted(const iv_engine *e, const iv_input *in);

/* Builds, renders and tokenizes in's conversation (out as iv_prepare_input
 * fills it). Errors: IV_E_INVALID for a malformed conversation, a template
 * that raises, image parts on a text-only model, or a model without a chat
 * template given messages. */
int iv_conversation_prepare(const iv_engine *e, const iv_input *in, const iv_input_opts *o, int max_tokens,
                            iv_prepared *out, iv_err *err);

#endif
