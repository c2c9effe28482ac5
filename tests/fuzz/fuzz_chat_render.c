/* libFuzzer target for applying real chat templates to hostile conversations
 * (`make fuzz`), run from the repository root:
 *   build/fuzz/fuzz_chat_render -max_total_time=60 tests/fuzz/seeds/chat_render
 * The input is one `infinity_v3 render` line: a messages array, or an object
 * with "messages", "tools" and "kwargs" (template variables). It goes through
 * the validation and normalisation of iv_chat_template_render and every
 * template below; each must render or fail with an error, never crash, leak
 * or run past the renderer's limits. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/json.h"
#include "chat/chat_template.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Templates with the widest use of the language: macros and namespaces
 * (Qwen3.5, Gemma 4), recursive schema walks (Gemma 4, gpt-oss), dict
 * equality and slicing (Mistral Small 3.1), named templates. */
static const char *const CHECKPOINTS[] = {
    "Qwen3.5-4B", "gemma-4-it", "gpt-oss-20b", "Mistral-Small-3.1-24B-Instruct-2503",
    "Llama-3.1-8B-Instruct", "assembled-named-list",
};
#define N_CHECKPOINTS (sizeof CHECKPOINTS / sizeof *CHECKPOINTS)
static iv_chat_template *g_templates[N_CHECKPOINTS];

static void load_once(void)
{
    static int loaded;
    if (loaded) return;
    loaded = 1;
    for (size_t i = 0; i < N_CHECKPOINTS; i++) {
        char dir[512];
        iv_err err;
        snprintf(dir, sizeof dir, "tests/fixtures/chat_templates/%s", CHECKPOINTS[i]);
        if (iv_chat_template_load(&g_templates[i], dir, &err)) {
            fprintf(stderr, "fuzz_chat_render: %s (run from the repository root)\n", err.msg);
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    load_once();
    cJSON *line = cJSON_ParseWithLength((const char *)data, size);
    if (!line) return 0;
    iv_json_mark_floats(line, (const char *)data, size);
    const cJSON *messages = line, *tools = NULL, *kwargs = NULL;
    if (cJSON_IsObject(line)) {
        messages = cJSON_GetObjectItemCaseSensitive(line, "messages");
        tools = cJSON_GetObjectItemCaseSensitive(line, "tools");
        kwargs = cJSON_GetObjectItemCaseSensitive(line, "kwargs");
    }
    iv_strbuf out;
    iv_sb_init(&out);
    for (size_t i = 0; i < N_CHECKPOINTS; i++)
        for (int gen = 0; gen < 2; gen++) {
            iv_err err;
            iv_sb_reset(&out);
            iv_chat_template_render(g_templates[i], messages, tools, kwargs, gen, NULL, &out, &err);
        }
    iv_sb_free(&out);
    cJSON_Delete(line);
    return 0;
}
