/* iv_chat_template_load's choices, each on a small checkpoint folder written
 * here: tokenizer_config.json's template as a string and as a named list,
 * chat_template.jinja over the config, additional_chat_templates/, the
 * processor's chat_template.json (and its conflict with additional
 * templates), special tokens as strings, AddedToken objects and
 * special_tokens_map.json, an unsupported construct failing at load,
 * malformed files, and a checkpoint without a template. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "chat/chat_template.h"
#include "test.h"
#include "unit/tmp_test_util.h"

static void put(const char *dir, const char *name, const char *text)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* Renders messages (JSON text) with ct; returns the text (static) or "ERR: msg". */
static const char *render(const iv_chat_template *ct, const char *messages, const char *tools, const char *vars,
                          const char *name)
{
    static char result[2048];
    cJSON *m = cJSON_Parse(messages), *t = tools ? cJSON_Parse(tools) : NULL, *v = vars ? cJSON_Parse(vars) : NULL;
    iv_strbuf out;
    iv_sb_init(&out);
    iv_err err = {0};
    if (iv_chat_template_render(ct, m, t, v, 0, name, &out, &err))
        snprintf(result, sizeof result, "ERR %d: %s", err.code, err.msg);
    else
        snprintf(result, sizeof result, "%.*s", (int)out.len, out.data ? out.data : "");
    iv_sb_free(&out);
    cJSON_Delete(m);
    cJSON_Delete(t);
    cJSON_Delete(v);
    return result;
}

static const char *const USER = "[{\"role\":\"user\",\"content\":\"hi\"}]";

TEST(chat_template_string_in_tokenizer_config)
{
    char dir[256];
    REQUIRE(tmp_dir(dir, sizeof dir, "chat") == 0);
    put(dir, "tokenizer_config.json",
        "{\"bos_token\":\"<s>\",\"eos_token\":{\"__type\":\"AddedToken\",\"content\":\"</s>\",\"lstrip\":false},"
        "\"unk_token\":null,\"chat_template\":\"{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"
        "{{ unk_token is defined }}\"}");
    iv_chat_template *ct = NULL;
    iv_err err = {0};
    REQUIRE(iv_chat_template_load(&ct, dir, &err) == 0 && ct);
    CHECK_EQ_INT(iv_chat_template_count(ct), 1);
    CHECK_STR(iv_chat_template_name(ct, 0), "default");
    CHECK_STR(render(ct, USER, NULL, NULL, NULL), "<s>hi</s>False");
    /* extra variables override the special tokens, as apply_chat_template's kwargs do */
    CHECK_STR(render(ct, USER, NULL, "{\"bos_token\":\"[B]\"}", NULL), "[B]hi</s>False");
    CHECK_CONTAINS(render(ct, USER, NULL, NULL, "other"), "no chat template named \"other\"");
    CHECK_STR(render(ct, USER, NULL, NULL, "default"), "<s>hi</s>False");
    iv_chat_template_free(ct);
    tmp_rmtree(dir);
}

TEST(chat_template_named_list)
{
    char dir[256];
    REQUIRE(tmp_dir(dir, sizeof dir, "chat") == 0);
    put(dir, "tokenizer_config.json",
        "{\"chat_template\":[{\"name\":\"default\",\"template\":\"D\"},{\"name\":\"tool_use\",\"template\":\"T\"},"
        "{\"name\":\"rag\",\"template\":\"R\"}]}");
    iv_chat_template *ct = NULL;
    iv_err err = {0};
    REQUIRE(iv_chat_template_load(&ct, dir, &err) == 0 && ct);
    CHECK_EQ_INT(iv_chat_template_count(ct), 3);
    CHECK_STR(render(ct, USER, NULL, NULL, NULL), "D");
    CHECK_STR(render(ct, USER, "[]", NULL, NULL), "T");   /* tools given (even empty): tool_use */
    CHECK_STR(render(ct, USER, "null", NULL, NULL), "D"); /* null tools: none */
    CHECK_STR(render(ct, USER, NULL, NULL, "rag"), "R");
    CHECK_CONTAINS(render(ct, USER, NULL, NULL, "nope"), "\"rag\"");
    iv_chat_template_free(ct);

    put(dir, "tokenizer_config.json", "{\"chat_template\":[{\"name\":\"a\",\"template\":\"A\"}]}");
    REQUIRE(iv_chat_template_load(&ct, dir, &err) == 0 && ct);
    CHECK_CONTAINS(render(ct, USER, NULL, NULL, NULL), "none named \"default\"");
    CHECK_STR(render(ct, USER, NULL, NULL, "a"), "A");
    iv_chat_template_free(ct);
    tmp_rmtree(dir);
}

TEST(chat_template_jinja_file_wins)
{
    char dir[256], sub[300];
    REQUIRE(tmp_dir(dir, sizeof dir, "chat") == 0);
    put(dir, "tokenizer_config.json", "{\"bos_token\":\"<s>\",\"chat_template\":\"CONFIG\"}");
    put(dir, "chat_template.jinja", "FILE{{ bos_token }}");
    iv_chat_template *ct = NULL;
    iv_err err = {0};
    REQUIRE(iv_chat_template_load(&ct, dir, &err) == 0 && ct);
    CHECK_EQ_INT(iv_chat_template_count(ct), 1);
    CHECK_STR(render(ct, USER, NULL, NULL, NULL), "FILE<s>");
    iv_chat_template_free(ct);

    snprintf(sub, sizeof sub, "%s/additional_chat_templates", dir);
    REQUIRE(mkdir(sub, 0755) == 0);
    put(sub, "tool_use.jinja", "TOOLS");
    put(sub, "notes.txt", "not a template");
    REQUIRE(iv_chat_template_load(&ct, dir, &err) == 0 && ct);
    CHECK_EQ_INT(iv_chat_template_count(ct), 2);
    CHECK_STR(render(ct, USER, NULL, NULL, NULL), "FILE<s>");
    CHECK_STR(render(ct, USER, "[{\"type\":\"function\"}]", NULL, NULL), "TOOLS");
    iv_chat_template_free(ct);

    /* the processor's legacy chat_template.json beside additional templates: refused, as transformers does */
    put(dir, "chat_template.json", "{\"chat_template\":\"JSON\"}");
    CHECK_EQ_INT(iv_chat_template_load(&ct, dir, &err), -1);
    CHECK_EQ_INT(err.code, IV_E_FORMAT);
    CHECK_CONTAINS(err.msg, "additional_chat_templates");
    tmp_rmtree(dir);
}

TEST(chat_template_processor_json)
{
    char dir[256];
    REQUIRE(tmp_dir(dir, sizeof dir, "chat") == 0);
    put(dir, "tokenizer_config.json", "{\"chat_template\":\"CONFIG\"}");
    put(dir, "chat_template.jinja", "FILE");
    put(dir, "chat_template.json", "{\"chat_template\":\"JSON {{ messages | length }}\"}");
    iv_chat_template *ct = NULL;
    iv_err err = {0};
    REQUIRE(iv_chat_template_load(&ct, dir, &err) == 0 && ct);
    CHECK_STR(render(ct, USER, NULL, NULL, NULL), "JSON 1");
    iv_chat_template_free(ct);
    put(dir, "chat_template.json", "{\"chat_template\":42}");
    CHECK_EQ_INT(iv_chat_template_load(&ct, dir, &err), -1);
    CHECK_EQ_INT(err.code, IV_E_FORMAT);
    put(dir, "chat_template.json", "{\"chat_template\": \"x\"");
    CHECK_EQ_INT(iv_chat_template_load(&ct, dir, &err), -1);
    CHECK_EQ_INT(err.code, IV_E_FORMAT);
    tmp_rmtree(dir);
}

TEST(chat_template_special_tokens_map)
{
    char dir[256];
    REQUIRE(tmp_dir(dir, sizeof dir, "chat") == 0);
    put(dir, "chat_template.jinja", "{{ bos_token }}|{{ eos_token }}|{{ pad_token }}");
    put(dir, "tokenizer_config.json", "{\"bos_token\":\"<s>\",\"eos_token\":\"</s>\"}");
    put(dir, "special_tokens_map.json", "{\"eos_token\":{\"content\":\"<|eot|>\"},\"pad_token\":\"<pad>\"}");
    iv_chat_template *ct = NULL;
    iv_err err = {0};
    REQUIRE(iv_chat_template_load(&ct, dir, &err) == 0 && ct);
    CHECK_STR(render(ct, USER, NULL, NULL, NULL), "<s>|<|eot|>|<pad>");
    iv_chat_template_free(ct);
    /* with added_tokens_decoder transformers does not read the legacy map */
    put(dir, "tokenizer_config.json",
        "{\"bos_token\":\"<s>\",\"eos_token\":\"</s>\",\"pad_token\":\"<p>\",\"added_tokens_decoder\":{}}");
    REQUIRE(iv_chat_template_load(&ct, dir, &err) == 0 && ct);
    CHECK_STR(render(ct, USER, NULL, NULL, NULL), "<s>|</s>|<p>");
    iv_chat_template_free(ct);
    put(dir, "tokenizer_config.json", "{\"bos_token\":7}");
    CHECK_EQ_INT(iv_chat_template_load(&ct, dir, &err), -1);
    CHECK_EQ_INT(err.code, IV_E_FORMAT);
    CHECK_CONTAINS(err.msg, "bos_token");
    tmp_rmtree(dir);
}

TEST(chat_template_unsupported_construct_fails_at_load)
{
    char dir[256];
    REQUIRE(tmp_dir(dir, sizeof dir, "chat") == 0);
    put(dir, "tokenizer_config.json", "{\"chat_template\":\"hello\\n{% include 'other.jinja' %}\"}");
    iv_chat_template *ct = NULL;
    iv_err err = {0};
    CHECK_EQ_INT(iv_chat_template_load(&ct, dir, &err), -1);
    CHECK(ct == NULL);
    CHECK(err.code == IV_E_UNSUPPORTED || err.code == IV_E_FORMAT);
    CHECK_CONTAINS(err.msg, "include");
    CHECK_CONTAINS(err.msg, "chat template \"default\"");
    tmp_rmtree(dir);
}

TEST(chat_template_malformed_files)
{
    char dir[256];
    REQUIRE(tmp_dir(dir, sizeof dir, "chat") == 0);
    iv_chat_template *ct = NULL;
    iv_err err = {0};
    const char *bad[] = {"{\"chat_template\": ", "[1,2]", "{\"chat_template\": 3}",
                         "{\"chat_template\": [{\"name\": \"x\"}]}", "{\"chat_template\": [\"x\"]}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        put(dir, "tokenizer_config.json", bad[i]);
        CHECK_EQ_INT(iv_chat_template_load(&ct, dir, &err), -1);
        CHECK_EQ_INT(err.code, IV_E_FORMAT);
        CHECK(ct == NULL);
    }
    CHECK_EQ_INT(iv_chat_template_load(&ct, "/nonexistent/iv_chat_dir", &err), -1);
    CHECK_EQ_INT(err.code, IV_E_NOTFOUND);
    tmp_rmtree(dir);
}

TEST(chat_template_absent)
{
    char dir[256];
    REQUIRE(tmp_dir(dir, sizeof dir, "chat") == 0);
    iv_chat_template *ct = (iv_chat_template *)1;
    iv_err err = {0};
    CHECK_EQ_INT(iv_chat_template_load(&ct, dir, &err), 0); /* no files at all */
    CHECK(ct == NULL);
    put(dir, "tokenizer_config.json", "{\"bos_token\":\"<s>\",\"chat_template\":null}");
    CHECK_EQ_INT(iv_chat_template_load(&ct, dir, &err), 0);
    CHECK(ct == NULL);
    CHECK_CONTAINS(render(NULL, USER, NULL, NULL, NULL), "no chat template");
    tmp_rmtree(dir);
}

TEST(chat_template_message_validation)
{
    char dir[256];
    REQUIRE(tmp_dir(dir, sizeof dir, "chat") == 0);
    put(dir, "chat_template.jinja",
        "{% for m in messages %}{{ m.role }}={{ m.content is defined }};{% endfor %}{{ messages[0] | tojson }}");
    iv_chat_template *ct = NULL;
    iv_err err = {0};
    REQUIRE(iv_chat_template_load(&ct, dir, &err) == 0 && ct);
    CHECK_CONTAINS(render(ct, "{}", NULL, NULL, NULL), "messages must be an array");
    CHECK_CONTAINS(render(ct, "[]", NULL, NULL, NULL), "messages is empty");
    CHECK_CONTAINS(render(ct, "[1]", NULL, NULL, NULL), "messages[0] must be an object");
    CHECK_CONTAINS(render(ct, "[{\"content\":\"x\"}]", NULL, NULL, NULL), "messages[0].role must be a string");
    CHECK_CONTAINS(render(ct, "[{\"role\":\"user\",\"content\":5}]", NULL, NULL, NULL),
                   "messages[0].content must be a string, null or a list of parts");
    CHECK_CONTAINS(render(ct, "[{\"role\":\"user\",\"content\":[\"x\"]}]", NULL, NULL, NULL),
                   "messages[0].content[0] must be an object");
    CHECK_CONTAINS(render(ct, USER, "{}", NULL, NULL), "tools must be an array");
    CHECK_CONTAINS(render(ct, USER, NULL, "[]", NULL), "must be a JSON object");
    CHECK_CONTAINS(render(ct, USER, NULL, "{\"messages\":[]}", NULL), "\"messages\" cannot be set");
    /* null keys are dropped and reasoning aliased, as transformers normalises messages */
    CHECK_STR(render(ct, "[{\"role\":\"assistant\",\"content\":null,\"reasoning\":\"r\"}]", NULL, NULL, NULL),
              "assistant=False;{\"thinking\": \"r\", \"role\": \"assistant\", \"reasoning\": \"r\", "
              "\"reasoning_content\": \"r\"}");
    /* "thinking" moves first keeping its own value; reasoning_content (the first one set) wins for the alias */
    CHECK_STR(render(ct, "[{\"role\":\"assistant\",\"content\":\"x\",\"reasoning_content\":\"a\",\"thinking\":\"b\","
                         "\"reasoning\":null}]", NULL, NULL, NULL),
              "assistant=True;{\"thinking\": \"b\", \"role\": \"assistant\", \"content\": \"x\", \"reasoning_content\": \"a\"}");
    CHECK_STR(render(ct, "[{\"thinking\":\"t\",\"role\":\"assistant\",\"reasoning\":\"r\"}]", NULL, NULL, NULL),
              "assistant=False;{\"thinking\": \"t\", \"role\": \"assistant\", \"reasoning\": \"r\", "
              "\"reasoning_content\": \"t\"}");
    iv_chat_template_free(ct);
    tmp_rmtree(dir);
}
