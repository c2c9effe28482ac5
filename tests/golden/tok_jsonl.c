#include "tok_jsonl.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/err.h"
#include "base/json.h"

static const char *skip_ws(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

static const char *skip_string(const char *p, const char *e)
{
    p++; /* opening quote */
    while (p < e && *p != '"') p += *p == '\\' ? 2 : 1;
    return p < e ? p + 1 : NULL;
}

static const char *skip_value(const char *p, const char *e)
{
    p = skip_ws(p, e);
    if (p >= e) return NULL;
    if (*p == '"') return skip_string(p, e);
    if (*p == '[' || *p == '{') {
        int depth = 0;
        while (p < e) {
            if (*p == '"') {
                p = skip_string(p, e);
                if (!p) return NULL;
                continue;
            }
            if (*p == '[' || *p == '{') depth++;
            if (*p == ']' || *p == '}') {
                depth--;
                if (depth == 0) return p + 1;
            }
            p++;
        }
        return NULL;
    }
    while (p < e && *p != ',' && *p != '}' && *p != ']' && *p != ' ') p++;
    return p;
}

const char *tokt_member(const char *line, size_t len, const char *key)
{
    const char *p = line, *e = line + len;
    p = skip_ws(p, e);
    if (p >= e || *p != '{') return NULL;
    p++;
    size_t klen = strlen(key);
    for (;;) {
        p = skip_ws(p, e);
        if (p >= e || *p != '"') return NULL;
        const char *ks = p + 1;
        const char *ke = skip_string(p, e);
        if (!ke) return NULL;
        int match = (size_t)(ke - 1 - ks) == klen && !memcmp(ks, key, klen);
        p = skip_ws(ke, e);
        if (p >= e || *p != ':') return NULL;
        p = skip_ws(p + 1, e);
        if (match) return p;
        p = skip_value(p, e);
        if (!p) return NULL;
        p = skip_ws(p, e);
        if (p < e && *p == ',') p++;
        else return NULL;
    }
}

int tokt_string(const char *line, size_t len, const char *key, char **out, size_t *out_len, int *present)
{
    *out = NULL;
    *out_len = 0;
    *present = 0;
    const char *v = tokt_member(line, len, key);
    if (!v || !strncmp(v, "null", 4)) return 0;
    iv_err err;
    size_t used;
    if (iv_json_decode_string(v, (size_t)(line + len - v), out, out_len, &used, &err)) return -1;
    *present = 1;
    return 0;
}

int tokt_string_array(const char *line, size_t len, const char *key, char ***out, size_t **lens, int *n)
{
    *out = NULL;
    *lens = NULL;
    *n = 0;
    const char *e = line + len;
    const char *p = tokt_member(line, len, key);
    if (!p || *p != '[') return -1;
    p = skip_ws(p + 1, e);
    int cap = 16;
    char **v = malloc(sizeof *v * (size_t)cap);
    size_t *l = malloc(sizeof *l * (size_t)cap);
    if (!v || !l) {
        free(v);
        free(l);
        return -1;
    }
    while (p < e && *p != ']') {
        if (*n == cap) {
            cap *= 2;
            char **nv = realloc(v, sizeof *v * (size_t)cap);
            if (nv) v = nv;
            size_t *nl = realloc(l, sizeof *l * (size_t)cap);
            if (nl) l = nl;
            if (!nv || !nl) {
                tokt_free_strings(v, l, *n);
                return -1;
            }
        }
        iv_err err;
        size_t used;
        if (iv_json_decode_string(p, (size_t)(e - p), &v[*n], &l[*n], &used, &err)) {
            tokt_free_strings(v, l, *n);
            return -1;
        }
        (*n)++;
        p = skip_ws(p + used, e);
        if (p < e && *p == ',') p = skip_ws(p + 1, e);
    }
    *out = v;
    *lens = l;
    return 0;
}

void tokt_free_strings(char **v, size_t *lens, int n)
{
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
    free(lens);
}

char *tokt_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    buf[n] = 0;
    *len = (size_t)n;
    return buf;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char **tokt_list_dirs(const char *dir, int *n)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    int cap = 32;
    char **v = malloc(sizeof *v * (size_t)cap);
    struct dirent *de;
    while (v && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct stat st;
        if (stat(path, &st) || !S_ISDIR(st.st_mode)) continue;
        if (*n == cap) {
            cap *= 2;
            char **nv = realloc(v, sizeof *v * (size_t)cap);
            if (!nv) break;
            v = nv;
        }
        v[(*n)++] = strdup(de->d_name);
    }
    closedir(d);
    if (v) qsort(v, (size_t)*n, sizeof *v, cmp_str);
    return v;
}

void tokt_free_list(char **v, int n)
{
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}
