/* `infinity_v3 render`: a checkpoint's chat template applied to
 * conversations, offline. One conversation per input line: a JSON messages
 * array, or an object {"messages": [...], "tools": [...],
 * "add_generation_prompt": bool, "chat_template_kwargs": {...}, VAR: value}
 * whose other keys (and chat_template_kwargs' keys) are template variables.
 * One JSON string per line out, the rendered text; a line that fails writes
 * {"error": "..."} in its place and the run goes on, exiting 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/strbuf.h"
#include "base/utf8.h"
#include "chat/chat_template.h"
#include "cli/commands.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: infinity_v3 render --model-id DIR [options] < conversations.jsonl\n"
            "  Renders each line's conversation with the checkpoint's chat template, as\n"
            "  transformers' apply_chat_template(tokenize=False) does, and prints it as a\n"
            "  JSON string. A line is a messages array or an object with \"messages\" and\n"
            "  optionally \"tools\", \"add_generation_prompt\", \"chat_template_kwargs\" and\n"
            "  other template variables (e.g. \"enable_thinking\": false).\n"
            "  --add-generation-prompt   end with the assistant's header (a line's\n"
            "                            \"add_generation_prompt\" overrides it)\n"
            "  --template NAME           use the named template (default: \"tool_use\" when\n"
            "                            tools are given and it exists, else \"default\")\n");
}

static void put_error(char *msg)
{
    iv_utf8_scrub(msg); /* a message cut to its buffer may end inside a character */
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_puts(&b, "{\"error\":");
    iv_sb_json_string(&b, msg, strlen(msg));
    iv_sb_puts(&b, "}\n");
    fwrite(b.data, 1, b.len, stdout);
    iv_sb_free(&b);
}

/* Moves a line object's template variables into vars: chat_template_kwargs'
 * keys, then every key that is not one of the request's own fields. */
static int collect_vars(const cJSON *line, cJSON *vars, iv_err *err)
{
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(line, "chat_template_kwargs");
    if (kw && !cJSON_IsNull(kw) && !cJSON_IsObject(kw))
        return iv_errf(err, IV_E_INVALID, "chat_template_kwargs must be an object");
    for (const cJSON *kv = kw ? kw->child : NULL; kv; kv = kv->next)
        cJSON_AddItemToObject(vars, kv->string, cJSON_Duplicate(kv, 1));
    for (const cJSON *kv = line->child; kv; kv = kv->next) {
        if (!strcmp(kv->string, "messages") || !strcmp(kv->string, "tools") ||
            !strcmp(kv->string, "add_generation_prompt") || !strcmp(kv->string, "chat_template_kwargs"))
            continue;
        cJSON_DeleteItemFromObjectCaseSensitive(vars, kv->string);
        cJSON_AddItemToObject(vars, kv->string, cJSON_Duplicate(kv, 1));
    }
    return 0;
}

static int render_line(const iv_chat_template *ct, const char *text, size_t len, int add_gen, const char *name,
                       iv_strbuf *out, iv_err *err)
{
    /* The rendered text is printed as a JSON string, which must be UTF-8. */
    for (size_t i = 0; i < len;) {
        int k = iv_utf8_seq_len(text + i, len - i);
        if (!k) return iv_errf(err, IV_E_INVALID, "the line is not valid UTF-8 (byte %zu)", i);
        i += (size_t)k;
    }
    cJSON *line;
    if (iv_json_parse(text, len, "input line", &line, err)) {
        err->code = IV_E_INVALID;
        return -1;
    }
    const cJSON *messages = line, *tools = NULL;
    cJSON *vars = cJSON_CreateObject();
    int rc = vars ? 0 : iv_errf(err, IV_E_NOMEM, "out of memory");
    if (!rc && cJSON_IsObject(line)) {
        messages = cJSON_GetObjectItemCaseSensitive(line, "messages");
        tools = cJSON_GetObjectItemCaseSensitive(line, "tools");
        const cJSON *agp = cJSON_GetObjectItemCaseSensitive(line, "add_generation_prompt");
        if (agp && !cJSON_IsBool(agp)) rc = iv_errf(err, IV_E_INVALID, "add_generation_prompt must be true or false");
        else if (agp) add_gen = cJSON_IsTrue(agp);
        if (!rc && !messages) rc = iv_errf(err, IV_E_INVALID, "the line's object has no \"messages\"");
        if (!rc) rc = collect_vars(line, vars, err);
    } else if (!rc && !cJSON_IsArray(line)) {
        rc = iv_errf(err, IV_E_INVALID, "each line must be a messages array or an object with \"messages\"");
    }
    if (!rc) {
        iv_sb_reset(out);
        rc = iv_chat_template_render(ct, messages, tools, vars, add_gen, name, out, err);
    }
    cJSON_Delete(vars);
    cJSON_Delete(line);
    return rc;
}

int iv_cmd_render(int argc, char **argv)
{
    const char *dir = NULL, *name = NULL;
    int add_gen = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--model-id") && i + 1 < argc) {
            dir = argv[++i];
        } else if (!strcmp(a, "--template") && i + 1 < argc) {
            name = argv[++i];
        } else if (!strcmp(a, "--add-generation-prompt")) {
            add_gen = 1;
        } else {
            fprintf(stderr, "render: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!dir) {
        fprintf(stderr, "render: --model-id is required\n");
        usage(stderr);
        return 2;
    }
    iv_err err;
    iv_chat_template *ct = NULL;
    if (iv_chat_template_load(&ct, dir, &err)) {
        fprintf(stderr, "render: %s\n", err.msg);
        return 1;
    }
    if (!ct) {
        fprintf(stderr, "render: %s has no chat template\n", dir);
        return 1;
    }
    int failed = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    iv_strbuf text, json;
    iv_sb_init(&text);
    iv_sb_init(&json);
    while ((n = getline(&line, &cap, stdin)) >= 0) {
        size_t len = (size_t)n;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
        if (len == 0) continue;
        if (render_line(ct, line, len, add_gen, name, &text, &err)) {
            put_error(err.msg);
            failed = 1;
            continue;
        }
        iv_sb_reset(&json);
        iv_sb_json_string(&json, text.data ? text.data : "", text.len);
        iv_sb_putc(&json, '\n');
        fwrite(json.data, 1, json.len, stdout);
    }
    free(line);
    iv_sb_free(&text);
    iv_sb_free(&json);
    iv_chat_template_free(ct);
    return failed;
}
