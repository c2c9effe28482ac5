/* A checkpoint's chat template(s), loaded and applied as transformers 5 does
 * (tokenization_utils_base.from_pretrained, ProcessorMixin.from_pretrained,
 * apply_chat_template).
 *
 * Where the template comes from, first found wins:
 *   1. chat_template.json {"chat_template": "..."}: the processor's legacy
 *      file (multimodal checkpoints); with additional_chat_templates/ beside
 *      it the checkpoint is rejected, as transformers rejects it;
 *   2. chat_template.jinja (named "default") and additional_chat_templates/
 *      NAME.jinja (named NAME);
 *   3. tokenizer_config.json "chat_template": a string, or a list of
 *      {"name", "template"} objects (named templates).
 * None of them: the checkpoint has no chat template (not an error).
 *
 * The special-token variables are bos_token, eos_token, unk_token,
 * sep_token, pad_token, cls_token and mask_token from tokenizer_config.json,
 * each a string or an AddedToken object {"content": ...}; a null one is not
 * defined. special_tokens_map.json overrides them when tokenizer_config.json
 * has no added_tokens_decoder (transformers' legacy path).
 *
 * Every template is compiled at load, so an unsupported construct fails there
 * with the construct named. Loaded templates are immutable: one serves every
 * thread. */
#ifndef IV_CHAT_CHAT_TEMPLATE_H
#define IV_CHAT_CHAT_TEMPLATE_H

#include <cjson/cJSON.h>

#include "base/err.h"
#include "base/strbuf.h"

typedef struct iv_chat_template iv_chat_template;

/* Loads model_dir's chat template(s). 0 with *out NULL when the checkpoint
 * has none; -1 with IV_E_FORMAT (malformed file), IV_E_UNSUPPORTED or
 * IV_E_FORMAT from the compiler (message names the template and construct),
 * IV_E_NOTFOUND (no such directory) or IV_E_IO. */
int iv_chat_template_load(iv_chat_template **out, const char *model_dir, iv_err *err);

/* The same special tokens, with the template of the file at path (an
 * operator's --chat-template, as vLLM takes it) instead of the checkpoint's. */
int iv_chat_template_load_file(iv_chat_template **out, const char *model_dir, const char *path, iv_err *err);

/* Renders one conversation, appending the text to out, as
 * apply_chat_template(messages, tools=tools, add_generation_prompt=...,
 * chat_template=template_name, tokenize=False, **extra_vars) does:
 *   - messages: an array of objects, each with a string "role" and a
 *     "content" that is a string, null, absent or an array of part objects;
 *     otherwise IV_E_INVALID naming the message. Keys whose value is null are
 *     dropped and reasoning_content / thinking / reasoning aliased, as
 *     transformers normalises them; nothing else is changed.
 *   - tools: NULL or JSON null (the template sees none), else an array of
 *     objects.
 *   - extra_vars: NULL or an object of template variables (chat_template_kwargs,
 *     e.g. enable_thinking); they override the special tokens. The names
 *     messages, tools, documents and add_generation_prompt are refused.
 *   - template_name: NULL picks "tool_use" when tools are given and the
 *     checkpoint has it, else "default"; a name the checkpoint lacks is
 *     IV_E_INVALID.
 * A template runtime error (raise_exception, ...) is IV_E_INVALID. */
int iv_chat_template_render(const iv_chat_template *ct, const cJSON *messages, const cJSON *tools,
                            const cJSON *extra_vars, int add_generation_prompt, const char *template_name,
                            iv_strbuf *out, iv_err *err);

/* Number of templates and the i-th one's name ("default" for a single one). */
int iv_chat_template_count(const iv_chat_template *ct);
const char *iv_chat_template_name(const iv_chat_template *ct, int i);

/* The template's source when the checkpoint has exactly one template
 * (transformers keeps a string), else NULL (a dict of named ones):
 * what sentence-transformers inspects to pick a message format. */
const char *iv_chat_template_text(const iv_chat_template *ct);

void iv_chat_template_free(iv_chat_template *ct);

#endif
