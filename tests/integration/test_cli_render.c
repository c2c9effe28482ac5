/* `infinity_v3 render` end to end on a real template (Qwen3-0.6B's, from
 * tests/fixtures/chat_templates): a messages array, an object with tools and
 * chat_template_kwargs, a line the template rejects and a line that is not
 * JSON each give their own output line, in order (a line that is not UTF-8
 * too); any failed line makes the
 * exit status 1; a folder without a template and a missing --model-id fail
 * before reading. Runs IV_BIN. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "base/file.h"
#include "test.h"
#include "unit/tmp_test_util.h"

static int run(const char *args, const char *input, const char *tmp, char **out)
{
    char in_path[512], out_path[512], cmd[8192];
    snprintf(in_path, sizeof in_path, "%s/in.jsonl", tmp);
    snprintf(out_path, sizeof out_path, "%s/out.jsonl", tmp);
    FILE *f = fopen(in_path, "wb");
    if (!f) return -1;
    fputs(input, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' render %s < '%s' > '%s' 2>/dev/null", iv_test_binary(), args, in_path, out_path);
    int st = system(cmd);
    size_t len;
    iv_err err;
    *out = NULL;
    if (iv_file_read_all(out_path, 1 << 24, out, &len, &err)) *out = strdup("");
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(cli_render_lines)
{
    char tmp[256], args[4096];
    REQUIRE(tmp_dir(tmp, sizeof tmp, "render") == 0);
    snprintf(args, sizeof args, "--model-id '%s/chat_templates/Qwen3-0.6B' --add-generation-prompt",
             iv_test_fixtures_dir());
    char *out = NULL;
    const char *input =
        "[{\"role\":\"user\",\"content\":\"Hi 👋\"}]\n"
        "\n"
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"add_generation_prompt\":false}\n"
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"chat_template_kwargs\":{\"enable_thinking\":false}}\n"
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"tools\":[{\"type\":\"function\",\"function\":"
        "{\"name\":\"f\"}}]}\n"
        "{\"messages\":[{\"role\":\"user\",\"content\":7}]}\n"
        "not json\n"
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"x\"}]}]}\n";
    CHECK_EQ_INT(run(args, input, tmp, &out), 1);
    const char *want =
        "\"<|im_start|>user\\nHi 👋<|im_end|>\\n<|im_start|>assistant\\n\"\n"
        "\"<|im_start|>user\\nHi<|im_end|>\\n\"\n"
        "\"<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n\"\n";
    CHECK(out && !strncmp(out, want, strlen(want)));
    /* the tools line: Qwen3 lists the tool in its system turn */
    const char *p = out ? out + (strncmp(out, want, strlen(want)) ? 0 : strlen(want)) : "";
    CHECK(!strncmp(p, "\"<|im_start|>system\\n# Tools", 27));
    p = strchr(p, '\n');
    CHECK(p && !strncmp(p + 1, "{\"error\":\"messages[0].content must be", 37));
    p = p ? strchr(p + 1, '\n') : NULL;
    CHECK(p && !strncmp(p + 1, "{\"error\":\"input line: malformed JSON", 36));
    p = p ? strchr(p + 1, '\n') : NULL;
    /* Qwen3-0.6B's template calls .startswith on content: a list makes it raise, an error line */
    CHECK(p && !strncmp(p + 1, "{\"error\":", 9));
    free(out);

    /* everything fine: exit 0 */
    CHECK_EQ_INT(run(args, "[{\"role\":\"user\",\"content\":\"a\"}]\n", tmp, &out), 0);
    CHECK_STR(out, "\"<|im_start|>user\\na<|im_end|>\\n<|im_start|>assistant\\n\"\n");
    free(out);

    /* 1.0 in the line stays a float, as json.loads makes it (transformers'
     * rendering of this line, tool call arguments through tojson) */
    CHECK_EQ_INT(run(args,
                     "[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":\"\","
                     "\"tool_calls\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":"
                     "{\"x\":1.0,\"y\":2}}}]}]\n",
                     tmp, &out),
                 0);
    CHECK(out && strstr(out, "{\\\"name\\\": \\\"f\\\", \\\"arguments\\\": {\\\"x\\\": 1.0, \\\"y\\\": 2}}"));
    free(out);

    /* a line that is not UTF-8 cannot be echoed as a JSON string: an error line */
    CHECK_EQ_INT(run(args, "[{\"role\":\"user\",\"content\":\"\xff\"}]\n", tmp, &out), 1);
    CHECK(out && !strncmp(out, "{\"error\":\"the line is not valid UTF-8", 37));
    free(out);

    /* no template in the folder; no --model-id */
    snprintf(args, sizeof args, "--model-id '%s'", tmp);
    CHECK_EQ_INT(run(args, "[]\n", tmp, &out), 1);
    CHECK_STR(out, "");
    free(out);
    CHECK_EQ_INT(run("", "[]\n", tmp, &out), 2);
    free(out);
    tmp_rmtree(tmp);
}
