/* libFuzzer target for the chat-template renderer (`make fuzz`):
 *   build/fuzz/fuzz_jinja -max_total_time=60 -dict=tests/fuzz/jinja.dict \
 *     build/fuzz/corpus_jinja tests/fuzz/seeds/jinja
 * The input is template text, then a NUL byte, then the JSON context (no
 * NUL: the template alone, rendered with no variables). Every input must
 * compile and render or fail with an error, never crash, hang or leak. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "chat/jinja.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    const char *nul = memchr(text, 0, size);
    size_t tlen = nul ? (size_t)(nul - text) : size;
    iv_jinja *t;
    iv_err err;
    if (iv_jinja_compile(&t, text, tlen, &err)) return 0;
    cJSON *ctx = nul ? cJSON_ParseWithLength(nul + 1, size - tlen - 1) : NULL;
    if (ctx) iv_json_mark_floats(ctx, nul + 1, size - tlen - 1);
    iv_strbuf out;
    iv_sb_init(&out);
    iv_jinja_render(t, ctx, &out, &err);
    iv_sb_free(&out);
    cJSON_Delete(ctx);
    iv_jinja_free(t);
    return 0;
}
