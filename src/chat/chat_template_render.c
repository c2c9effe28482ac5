/* Applying a loaded chat template to one conversation: input validation,
 * transformers' message normalisation, the template variables, the choice of
 * a named template, then the Jinja renderer. */
#include "chat/chat_template_internal.h"

#include <stdio.h>
#include <string.h>

static int oom(iv_err *err) { return iv_errf(err, IV_E_NOMEM, "out of memory rendering a chat template"); }

static int validate_messages(const cJSON *messages, iv_err *err)
{
    if (!cJSON_IsArray(messages)) return iv_errf(err, IV_E_INVALID, "messages must be an array of message objects");
    if (!messages->child)
        return iv_errf(err, IV_E_INVALID, "messages is empty: a chat template needs at least one message");
    int i = 0;
    for (const cJSON *m = messages->child; m; m = m->next, i++) {
        if (!cJSON_IsObject(m)) return iv_errf(err, IV_E_INVALID, "messages[%d] must be an object", i);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsString(role))
            return iv_errf(err, IV_E_INVALID, "messages[%d].role must be a string", i);
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!content || cJSON_IsNull(content) || cJSON_IsString(content)) continue;
        if (!cJSON_IsArray(content))
            return iv_errf(err, IV_E_INVALID, "messages[%d].content must be a string, null or a list of parts", i);
        int j = 0;
        for (const cJSON *p = content->child; p; p = p->next, j++)
            if (!cJSON_IsObject(p))
                return iv_errf(err, IV_E_INVALID, "messages[%d].content[%d] must be an object (a content part)",
                               i, j);
    }
    return 0;
}

/* The first of reasoning_content, thinking, reasoning that is set (not null). */
static const cJSON *reasoning_of(const cJSON *m)
{
    static const char *const fields[] = {"reasoning_content", "thinking", "reasoning"};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, fields[i]);
        if (v && !cJSON_IsNull(v)) return v;
    }
    return NULL;
}

static int add_copy(cJSON *obj, const char *key, const cJSON *v)
{
    cJSON *dup = cJSON_Duplicate(v, 1);
    return dup && cJSON_AddItemToObject(obj, key, dup) ? 0 : (cJSON_Delete(dup), -1);
}

/* One message as transformers hands it to the template: keys whose value is
 * null dropped (_normalize_chat_messages), and a reasoning text r aliased as
 * _alias_reasoning_fields builds {"thinking": r, **m, "reasoning_content": r}:
 * "thinking" always first (with the message's own value when it has one),
 * "reasoning_content" in its place or last, always r. Key order shows in
 * `| tojson` and `| items`. */
static cJSON *normalise_message(const cJSON *m)
{
    cJSON *out = cJSON_CreateObject();
    if (!out) return NULL;
    const cJSON *r = reasoning_of(m);
    if (r) {
        const cJSON *own = cJSON_GetObjectItemCaseSensitive(m, "thinking");
        if (add_copy(out, "thinking", own && !cJSON_IsNull(own) ? own : r)) goto fail;
    }
    for (const cJSON *kv = m->child; kv; kv = kv->next) {
        if (cJSON_IsNull(kv) || (r && !strcmp(kv->string, "thinking"))) continue;
        const cJSON *v = r && !strcmp(kv->string, "reasoning_content") ? r : kv;
        if (add_copy(out, kv->string, v)) goto fail;
    }
    if (r && !cJSON_GetObjectItemCaseSensitive(out, "reasoning_content") && add_copy(out, "reasoning_content", r))
        goto fail;
    return out;
fail:
    cJSON_Delete(out);
    return NULL;
}

static int is_reserved(const char *key)
{
    return !strcmp(key, "messages") || !strcmp(key, "tools") || !strcmp(key, "documents") ||
           !strcmp(key, "add_generation_prompt");
}

/* The template's variables: the special tokens, overridden by extra_vars
 * (apply_chat_template's {**special_tokens_map, **kwargs}), then messages,
 * tools, documents (always None here) and add_generation_prompt. */
static int build_context(const iv_chat_template *ct, const cJSON *messages, const cJSON *tools,
                         const cJSON *extra_vars, int add_generation_prompt, cJSON **out, iv_err *err)
{
    cJSON *ctx = cJSON_Duplicate(ct->tokens, 1);
    if (!ctx) return oom(err);
    for (const cJSON *kv = extra_vars ? extra_vars->child : NULL; kv; kv = kv->next) {
        if (is_reserved(kv->string)) {
            cJSON_Delete(ctx);
            return iv_errf(err, IV_E_INVALID, "template variable \"%s\" cannot be set through the extra variables",
                           kv->string);
        }
        cJSON_DeleteItemFromObjectCaseSensitive(ctx, kv->string);
        if (add_copy(ctx, kv->string, kv)) goto fail;
    }
    cJSON *msgs = cJSON_AddArrayToObject(ctx, "messages");
    if (!msgs) goto fail;
    for (const cJSON *m = messages->child; m; m = m->next) {
        cJSON *n = normalise_message(m);
        if (!n || !cJSON_AddItemToArray(msgs, n)) {
            cJSON_Delete(n);
            goto fail;
        }
    }
    if (tools ? add_copy(ctx, "tools", tools) : !cJSON_AddNullToObject(ctx, "tools")) goto fail;
    if (!cJSON_AddNullToObject(ctx, "documents")) goto fail;
    if (!cJSON_AddBoolToObject(ctx, "add_generation_prompt", add_generation_prompt)) goto fail;
    *out = ctx;
    return 0;
fail:
    cJSON_Delete(ctx);
    return oom(err);
}

static int find(const iv_chat_template *ct, const char *name)
{
    for (int i = 0; i < ct->n; i++)
        if (!strcmp(ct->names[i], name)) return i;
    return -1;
}

static void list_names(const iv_chat_template *ct, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < ct->n && len < cap; i++) {
        int k = snprintf(buf + len, cap - len, "%s\"%s\"", i ? ", " : "", ct->names[i]);
        if (k < 0) break;
        len += (size_t)k;
    }
}

/* tokenizer.get_chat_template: a requested name; else "tool_use" when tools
 * are given and it exists; else "default". */
static int pick(const iv_chat_template *ct, const char *name, int has_tools, iv_err *err)
{
    int i = name ? find(ct, name) : has_tools ? find(ct, "tool_use") : -1;
    if (i < 0 && !name) i = find(ct, "default");
    if (i >= 0) return i;
    char names[512];
    list_names(ct, names, sizeof names);
    if (name) return iv_errf(err, IV_E_INVALID, "the checkpoint has no chat template named \"%s\" (it has %s)", name,
                             names);
    return iv_errf(err, IV_E_INVALID,
                   "the checkpoint has several chat templates and none named \"default\": name one of %s", names);
}

int iv_chat_template_render(const iv_chat_template *ct, const cJSON *messages, const cJSON *tools,
                            const cJSON *extra_vars, int add_generation_prompt, const char *template_name,
                            iv_strbuf *out, iv_err *err)
{
    if (!ct) return iv_errf(err, IV_E_INVALID, "the model has no chat template");
    if (validate_messages(messages, err)) return -1;
    if (tools && cJSON_IsNull(tools)) tools = NULL;
    if (tools) {
        if (!cJSON_IsArray(tools)) return iv_errf(err, IV_E_INVALID, "tools must be an array of tool schemas");
        int i = 0;
        for (const cJSON *t = tools->child; t; t = t->next, i++)
            if (!cJSON_IsObject(t)) return iv_errf(err, IV_E_INVALID, "tools[%d] must be an object", i);
    }
    if (extra_vars && cJSON_IsNull(extra_vars)) extra_vars = NULL;
    if (extra_vars && !cJSON_IsObject(extra_vars))
        return iv_errf(err, IV_E_INVALID, "chat template variables must be a JSON object");
    int which = pick(ct, template_name, tools != NULL, err);
    if (which < 0) return -1;
    cJSON *ctx = NULL;
    if (build_context(ct, messages, tools, extra_vars, add_generation_prompt, &ctx, err)) return -1;
    int rc = iv_jinja_render(ct->tpl[which], ctx, out, err);
    cJSON_Delete(ctx);
    return rc;
}
