/* Loading a checkpoint's chat templates: which file wins, named templates,
 * special tokens (chat_template.h has the rules, after transformers 5's
 * tokenization_utils_base.from_pretrained and ProcessorMixin.from_pretrained). */
#include "chat/chat_template_internal.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/json.h"

/* Chat templates and tokenizer configs are small; a bigger file is not one. */
#define MAX_TEMPLATE_FILE (16u << 20)
#define MAX_CONFIG_FILE (64u << 20)

static const char *const NAMED_TOKENS[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                           "pad_token", "cls_token", "mask_token"};

void iv_chat_template_free(iv_chat_template *ct)
{
    if (!ct) return;
    for (int i = 0; i < ct->n; i++) {
        free(ct->names[i]);
        iv_jinja_free(ct->tpl[i]);
    }
    free(ct->names);
    free(ct->tpl);
    cJSON_Delete(ct->tokens);
    free(ct->default_text);
    free(ct);
}

const char *iv_chat_template_text(const iv_chat_template *ct)
{
    return ct && ct->n == 1 ? ct->default_text : NULL;
}

int iv_chat_template_count(const iv_chat_template *ct) { return ct ? ct->n : 0; }

const char *iv_chat_template_name(const iv_chat_template *ct, int i)
{
    return ct && i >= 0 && i < ct->n ? ct->names[i] : NULL;
}

/* Adds (or, for a name seen before, replaces) a template by compiling its text. */
static int add_template(iv_chat_template *ct, const char *name, const char *src, size_t len, const char *where,
                        iv_err *err)
{
    iv_jinja *t;
    if (iv_jinja_compile(&t, src, len, err))
        return iv_err_prefix(err, "chat template \"%s\" (%s): ", name, where);
    if (!strcmp(name, "default")) {
        free(ct->default_text);
        if (!(ct->default_text = strndup(src, len))) {
            iv_jinja_free(t);
            return iv_errf(err, IV_E_NOMEM, "out of memory loading chat templates");
        }
    }
    for (int i = 0; i < ct->n; i++)
        if (!strcmp(ct->names[i], name)) {
            iv_jinja_free(ct->tpl[i]);
            ct->tpl[i] = t;
            return 0;
        }
    char **names = realloc(ct->names, (size_t)(ct->n + 1) * sizeof *names);
    if (names) ct->names = names;
    iv_jinja **tpl = realloc(ct->tpl, (size_t)(ct->n + 1) * sizeof *tpl);
    if (tpl) ct->tpl = tpl;
    char *dup = strdup(name);
    if (!names || !tpl || !dup) {
        free(dup);
        iv_jinja_free(t);
        return iv_errf(err, IV_E_NOMEM, "out of memory loading chat templates");
    }
    ct->names[ct->n] = dup;
    ct->tpl[ct->n] = t;
    ct->n++;
    return 0;
}

static int add_template_file(iv_chat_template *ct, const char *name, const char *path, iv_err *err)
{
    char *buf;
    size_t len;
    if (iv_file_read_all(path, MAX_TEMPLATE_FILE, &buf, &len, err)) return -1;
    int rc = add_template(ct, name, buf, len, path, err);
    free(buf);
    return rc;
}

/* A config file that may be absent: 0 with *out NULL then. */
static int load_optional_json(const char *dir, const char *name, cJSON **out, iv_err *err)
{
    char path[PATH_MAX];
    *out = NULL;
    iv_path_join(path, sizeof path, dir, name);
    if (!iv_file_exists(path)) return 0;
    return iv_json_load_file(path, MAX_CONFIG_FILE, out, err);
}

/* A special token as tokenizer_config.json stores it: a string, an
 * AddedToken object {"content": ...}, or null (not set). */
static int token_text(const cJSON *v, const char *key, const char *file, const char **out, iv_err *err)
{
    *out = NULL;
    if (!v || cJSON_IsNull(v)) return 0;
    if (cJSON_IsString(v)) {
        *out = v->valuestring;
        return 0;
    }
    const cJSON *c = cJSON_IsObject(v) ? iv_json_get(v, "content") : NULL;
    if (c && cJSON_IsString(c)) {
        *out = c->valuestring;
        return 0;
    }
    return iv_errf(err, IV_E_FORMAT, "%s: %s must be a string or an AddedToken object with a string \"content\"",
                   file, key);
}

/* The special-token variables: tokenizer_config.json's, overridden by
 * special_tokens_map.json's where transformers reads that legacy file (no
 * added_tokens_decoder in the config). */
static int load_tokens(iv_chat_template *ct, const cJSON *cfg, const cJSON *map, iv_err *err)
{
    ct->tokens = cJSON_CreateObject();
    if (!ct->tokens) return iv_errf(err, IV_E_NOMEM, "out of memory loading chat templates");
    int use_map = map && cJSON_IsObject(map) && !(cfg && iv_json_get(cfg, "added_tokens_decoder"));
    for (size_t i = 0; i < sizeof NAMED_TOKENS / sizeof *NAMED_TOKENS; i++) {
        const char *key = NAMED_TOKENS[i], *text = NULL;
        const cJSON *from_map = use_map ? iv_json_get(map, key) : NULL;
        if (from_map) {
            if (token_text(from_map, key, "special_tokens_map.json", &text, err)) return -1;
        } else if (cfg && token_text(iv_json_get(cfg, key), key, "tokenizer_config.json", &text, err)) {
            return -1;
        }
        if (text && !cJSON_AddStringToObject(ct->tokens, key, text))
            return iv_errf(err, IV_E_NOMEM, "out of memory loading chat templates");
    }
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* additional_chat_templates/NAME.jinja, in name order (transformers globs
 * them; the order only matters for error messages). Returns the number found. */
static int load_additional(iv_chat_template *ct, const char *dir, int only_count, iv_err *err)
{
    char sub[PATH_MAX];
    iv_path_join(sub, sizeof sub, dir, "additional_chat_templates");
    DIR *d = opendir(sub);
    if (!d) return 0;
    char **files = NULL;
    int n = 0, rc = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len <= 6 || strcmp(e->d_name + len - 6, ".jinja")) continue;
        char **grown = realloc(files, (size_t)(n + 1) * sizeof *files);
        char *dup = grown ? strdup(e->d_name) : NULL;
        if (grown) files = grown;
        if (!dup) {
            rc = iv_errf(err, IV_E_NOMEM, "out of memory listing %s", sub);
            break;
        }
        files[n++] = dup;
    }
    closedir(d);
    if (!rc) qsort(files, (size_t)n, sizeof *files, cmp_str);
    for (int i = 0; i < n && !rc && !only_count; i++) {
        char path[PATH_MAX];
        iv_path_join(path, sizeof path, sub, files[i]);
        files[i][strlen(files[i]) - 6] = 0;
        rc = add_template_file(ct, files[i], path, err);
    }
    for (int i = 0; i < n; i++) free(files[i]);
    free(files);
    return rc ? -1 : n;
}

/* tokenizer_config.json "chat_template": a string or [{"name", "template"}]. */
static int load_from_config(iv_chat_template *ct, const cJSON *cfg, iv_err *err)
{
    const cJSON *t = cfg ? iv_json_get(cfg, "chat_template") : NULL;
    if (!t || cJSON_IsNull(t)) return 0;
    if (cJSON_IsString(t)) {
        return add_template(ct, "default", t->valuestring, strlen(t->valuestring), "tokenizer_config.json", err);
    }
    if (!cJSON_IsArray(t))
        return iv_errf(err, IV_E_FORMAT,
                       "tokenizer_config.json: chat_template must be a string or a list of {\"name\", \"template\"}");
    int i = 0;
    for (const cJSON *e = t->child; e; e = e->next, i++) {
        const cJSON *name = cJSON_IsObject(e) ? iv_json_get(e, "name") : NULL;
        const cJSON *text = cJSON_IsObject(e) ? iv_json_get(e, "template") : NULL;
        if (!cJSON_IsString(name) || !cJSON_IsString(text))
            return iv_errf(err, IV_E_FORMAT,
                           "tokenizer_config.json: chat_template[%d] must be an object with string \"name\" and "
                           "\"template\"", i);
        if (add_template(ct, name->valuestring, text->valuestring, strlen(text->valuestring),
                         "tokenizer_config.json", err))
            return -1;
    }
    return 0;
}

/* chat_template.json (the processor's legacy file): {"chat_template": "..."}. */
static int load_processor_json(iv_chat_template *ct, const char *dir, const char *path, iv_err *err)
{
    if (load_additional(ct, dir, 1, err) > 0)
        return iv_errf(err, IV_E_FORMAT,
                       "%s: a legacy chat_template.json together with additional_chat_templates/ is not "
                       "supported (transformers refuses it too); replace chat_template.json with chat_template.jinja",
                       dir);
    cJSON *j;
    if (iv_json_load_file(path, MAX_TEMPLATE_FILE, &j, err)) return -1;
    const cJSON *t = cJSON_IsObject(j) ? iv_json_get(j, "chat_template") : NULL;
    int rc = cJSON_IsString(t) ? add_template(ct, "default", t->valuestring, strlen(t->valuestring), path, err)
                               : iv_errf(err, IV_E_FORMAT, "%s: \"chat_template\" must be a string", path);
    cJSON_Delete(j);
    return rc;
}

static int load_templates(iv_chat_template *ct, const char *dir, const cJSON *cfg, iv_err *err)
{
    char path[PATH_MAX];
    iv_path_join(path, sizeof path, dir, "chat_template.json");
    if (iv_file_exists(path)) return load_processor_json(ct, dir, path, err);
    if (load_additional(ct, dir, 0, err) < 0) return -1;
    iv_path_join(path, sizeof path, dir, "chat_template.jinja");
    if (iv_file_exists(path) && add_template_file(ct, "default", path, err)) return -1;
    if (ct->n) return 0; /* template files win over tokenizer_config.json */
    return load_from_config(ct, cfg, err);
}

/* The checkpoint's special tokens, then its templates, or the one in
 * override_path (an operator's --chat-template) in their place. */
static int load_with(iv_chat_template **out, const char *model_dir, const char *override_path, iv_err *err)
{
    *out = NULL;
    if (!iv_dir_exists(model_dir)) return iv_errf(err, IV_E_NOTFOUND, "%s is not a directory", model_dir);
    iv_chat_template *ct = calloc(1, sizeof *ct);
    if (!ct) return iv_errf(err, IV_E_NOMEM, "out of memory loading chat templates");
    cJSON *cfg = NULL, *map = NULL;
    int rc = load_optional_json(model_dir, "tokenizer_config.json", &cfg, err);
    if (!rc && cfg && !cJSON_IsObject(cfg))
        rc = iv_errf(err, IV_E_FORMAT, "%s/tokenizer_config.json: not a JSON object", model_dir);
    if (!rc) rc = load_optional_json(model_dir, "special_tokens_map.json", &map, err);
    if (!rc) rc = load_tokens(ct, cfg, map, err);
    if (!rc && override_path) {
        rc = add_template_file(ct, "default", override_path, err);
    } else if (!rc) {
        rc = load_templates(ct, model_dir, cfg, err);
    }
    cJSON_Delete(cfg);
    cJSON_Delete(map);
    if (rc || ct->n == 0) {
        iv_chat_template_free(ct);
        return rc;
    }
    *out = ct;
    return 0;
}

int iv_chat_template_load(iv_chat_template **out, const char *model_dir, iv_err *err)
{
    return load_with(out, model_dir, NULL, err);
}

int iv_chat_template_load_file(iv_chat_template **out, const char *model_dir, const char *path, iv_err *err)
{
    return load_with(out, model_dir, path, err);
}
