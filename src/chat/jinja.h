/* A Jinja2 renderer for chat templates: the subset that real checkpoints'
 * templates use, rendered byte for byte as transformers' apply_chat_template
 * renders them (jinja2's ImmutableSandboxedEnvironment with trim_blocks and
 * lstrip_blocks, the loopcontrols extension, transformers' tojson, and the
 * globals raise_exception and strftime_now).
 *
 * Templates are compiled once, at model load: a construct outside the
 * supported subset fails there with the construct named, never at request
 * time. Rendering is pure: the context is a JSON object of the template's
 * variables (messages, add_generation_prompt, bos_token, tools, ...), read
 * and never modified, so one compiled template serves every thread. A JSON
 * number is a Python float when written with a fraction or an exponent and
 * ctx was parsed with iv_json_parse or marked with iv_json_mark_floats
 * (base/json.h); otherwise an integral one is an int. */
#ifndef IV_CHAT_JINJA_H
#define IV_CHAT_JINJA_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "base/err.h"
#include "base/strbuf.h"

typedef struct iv_jinja iv_jinja;

/* Parses template text (len bytes, need not be NUL-terminated). On a syntax
 * error or an unsupported construct: -1 with IV_E_UNSUPPORTED or IV_E_FORMAT
 * and a message naming the construct and its line. */
int iv_jinja_compile(iv_jinja **out, const char *src, size_t len, iv_err *err);

/* Renders with the variables of ctx (an object; NULL = none) appended to out.
 * A template runtime error (raise_exception, an undefined value used where
 * jinja2 raises, a type error, the output or loop limits below) is -1 with
 * IV_E_INVALID and a message naming it: the request's fault, a 4xx. */
int iv_jinja_render(const iv_jinja *t, const cJSON *ctx, iv_strbuf *out, iv_err *err);

void iv_jinja_free(iv_jinja *t);

/* Limits that keep a hostile template or context from exhausting the
 * server: rendered bytes, loop iterations and macro call depth. */
#define IV_JINJA_MAX_OUTPUT (64u << 20)
#define IV_JINJA_MAX_STEPS 10000000L
#define IV_JINJA_MAX_DEPTH 64

#endif
