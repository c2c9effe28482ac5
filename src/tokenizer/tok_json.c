/* Small JSON helpers shared by the tokenizer.json section loaders. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/json.h"
#include "tokenizer/tok_internal.h"

char *tok_xmemdup(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

char *tok_xstrdup(const char *s)
{
    return tok_xmemdup(s, strlen(s));
}

const char *tok_json_type(const cJSON *j)
{
    return iv_json_str(j, "type", NULL);
}

const char *tok_json_component(const cJSON *j, const char *path, char what[TOK_WHAT_LEN], iv_err *err)
{
    const char *type = tok_json_type(j);
    snprintf(what, TOK_WHAT_LEN, "%s (%s)", path, type ? type : "?");
    if (!type) iv_errf(err, IV_E_FORMAT, "%s: missing \"type\"", path);
    return type;
}

int tok_json_dup_str(const cJSON *j, const char *key, const char *def, char **out, int32_t *len, const char *what,
                     iv_err *err)
{
    const char *v = def;
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(j, key);
    if (it && !cJSON_IsNull(it)) {
        if (!cJSON_IsString(it)) return iv_errf(err, IV_E_FORMAT, "%s: \"%s\" must be a string", what, key);
        v = it->valuestring;
    }
    if (!v) return iv_errf(err, IV_E_FORMAT, "%s: missing \"%s\"", what, key);
    *out = tok_xstrdup(v);
    if (!*out) return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
    *len = (int32_t)strlen(v);
    return 0;
}

int tok_json_pattern(const cJSON *j, tok_regex *re, const char *what, iv_err *err)
{
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(j, "pattern");
    const cJSON *s = pat ? cJSON_GetObjectItemCaseSensitive(pat, "String") : NULL;
    const cJSON *r = pat ? cJSON_GetObjectItemCaseSensitive(pat, "Regex") : NULL;
    if (s && cJSON_IsString(s)) return tok_regex_compile(re, s->valuestring, strlen(s->valuestring), 0, what, err);
    if (r && cJSON_IsString(r)) return tok_regex_compile(re, r->valuestring, strlen(r->valuestring), 1, what, err);
    return iv_errf(err, IV_E_FORMAT, "%s: \"pattern\" must be {\"String\": ...} or {\"Regex\": ...}", what);
}

int tok_json_members(const cJSON *j, const char *key, size_t member_size, tok_member_loader load, void **members,
                     int *n, const char *path, const char *what, iv_err *err)
{
    *members = NULL;
    *n = 0;
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!cJSON_IsArray(arr)) return iv_errf(err, IV_E_FORMAT, "%s: \"%s\" must be an array", what, key);
    const int cnt = cJSON_GetArraySize(arr);
    char *items = calloc((size_t)(cnt ? cnt : 1), member_size);
    if (!items) return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
    *members = items;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        char sub[TOK_WHAT_LEN];
        snprintf(sub, sizeof sub, "%s.%s[%d]", path, key, *n);
        const int rc = load(it, items + (size_t)*n * member_size, sub, err);
        (*n)++;
        if (rc) return -1;
    }
    return 0;
}

int tok_json_split_behavior(const cJSON *j, const char *key, int def, int *out, const char *what,
                            iv_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v || cJSON_IsNull(v)) {
        if (def < 0) return iv_errf(err, IV_E_FORMAT, "%s: missing \"%s\"", what, key);
        *out = def;
        return 0;
    }
    static const struct {
        const char *name;
        int val;
    } names[] = {
        {"Removed", TOK_REMOVED},
        {"Isolated", TOK_ISOLATED},
        {"MergedWithPrevious", TOK_MERGED_WITH_PREVIOUS},
        {"MergedWithNext", TOK_MERGED_WITH_NEXT},
        {"Contiguous", TOK_CONTIGUOUS},
    };
    if (cJSON_IsString(v))
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (!strcmp(v->valuestring, names[i].name)) {
                *out = names[i].val;
                return 0;
            }
    return iv_errf(err, IV_E_FORMAT,
                   "%s: \"%s\" must be one of Removed, Isolated, MergedWithPrevious, "
                   "MergedWithNext, Contiguous",
                   what, key);
}

int tok_json_char(const cJSON *j, const char *key, uint32_t def, uint32_t *out, const char *what,
                  iv_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return 0;
    }
    if (!cJSON_IsString(v) || !v->valuestring[0] ||
        tok_utf8_invalid_at(v->valuestring, strlen(v->valuestring)) >= 0)
        return iv_errf(err, IV_E_FORMAT, "%s: \"%s\" must be a one-character string", what, key);
    uint32_t cp;
    int l = tok_utf8_decode(v->valuestring, &cp);
    if (v->valuestring[l])
        return iv_errf(err, IV_E_FORMAT, "%s: \"%s\" must be a single character, got \"%s\"", what,
                       key, v->valuestring);
    *out = cp;
    return 0;
}

const char *tok_json_bytes(const char *s, uint32_t ph, int32_t *len, char **tmp)
{
    *tmp = NULL;
    size_t n = strlen(s);
    *len = (int32_t)n;
    if (!ph) return s;
    char enc[4];
    int el = tok_utf8_encode(ph, enc);
    if (!memmem(s, n, enc, (size_t)el)) return s;
    char *out = malloc(n + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        if (i + (size_t)el <= n && !memcmp(s + i, enc, (size_t)el)) {
            out[o++] = 0;
            i += (size_t)el;
        } else {
            out[o++] = s[i++];
        }
    }
    out[o] = 0;
    *tmp = out;
    *len = (int32_t)o;
    return out;
}

static int contains_ci(const char *text, size_t len, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= len; i++)
        if (!strncasecmp(text + i, needle, n)) return 1;
    return 0;
}

char *tok_json_protect_nul(const char *text, size_t len, size_t *out_len, uint32_t *ph)
{
    *ph = 0;
    if (!memmem(text, len, "\\u0000", 6)) return NULL;
    /* Noncharacters: absent from real vocabularies. */
    static const struct {
        uint32_t cp;
        const char *esc;
    } cands[] = {
        {0x10FFFF, "\\udbff\\udfff"},
        {0x10FFFE, "\\udbff\\udffe"},
        {0xFFFFF, "\\udbbf\\udfff"},
        {0xFFFFE, "\\udbbf\\udffe"},
    };
    for (size_t k = 0; k < sizeof cands / sizeof cands[0] && !*ph; k++) {
        char enc[4];
        int el = tok_utf8_encode(cands[k].cp, enc);
        if (!memmem(text, len, enc, (size_t)el) && !contains_ci(text, len, cands[k].esc)) *ph = cands[k].cp;
    }
    if (!*ph) return NULL;
    const char *esc = NULL;
    for (size_t k = 0; k < sizeof cands / sizeof cands[0]; k++)
        if (cands[k].cp == *ph) esc = cands[k].esc;
    size_t el = strlen(esc);
    char *out = malloc(len * 2 + 16);
    if (!out) {
        *ph = 0;
        return NULL;
    }
    size_t o = 0;
    int in_str = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = text[i];
        if (!in_str) {
            if (ch == '"') in_str = 1;
            out[o++] = ch;
            continue;
        }
        if (ch == '\\' && i + 1 < len) {
            if (text[i + 1] == 'u' && i + 5 < len && !memcmp(text + i + 2, "0000", 4)) {
                memcpy(out + o, esc, el);
                o += el;
                i += 5;
            } else {
                out[o++] = ch;
                out[o++] = text[++i];
            }
            continue;
        }
        if (ch == '"') in_str = 0;
        out[o++] = ch;
    }
    out[o] = 0;
    *out_len = o;
    return out;
}
