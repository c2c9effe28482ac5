/* docs/checkpoint-fields.md lists every checkpoint field the loader can meet
 * (config.json, the sentence-transformers module files, tokenizer_config.json,
 * ColBERT metadata) with what happens to it. This test keeps the table honest:
 * it loads every fixture under tests/fixtures/models and the real models in
 * .cache/models with a recorder on the JSON layer (base/json.h) and fails when
 *   1. the code looks up a key the table does not list, or
 *   2. a fixture file carries a key the table does not list.
 * Keys are "path.key" inside their file; numeric path parts read as "*",
 * text_config.X as X (multimodal configs keep the backbone there), array items
 * as "[]". tokenizer.json is the tokenizers library's schema and is checked by
 * the tokenizer tests instead. IV_PRINT_FIELDS=1 prints both sets. */
#include <ctype.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/json.h"
#include "engine/engine.h"
#include "golden_util.h"
#include "test.h"

/* ---- a small string set ---- */
typedef struct strset {
    char **v;
    int n, cap;
} strset;

static int set_has(const strset *s, const char *x)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->v[i], x)) return 1;
    return 0;
}

static void set_add(strset *s, const char *x)
{
    if (set_has(s, x)) return;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 256;
        s->v = realloc(s->v, (size_t)s->cap * sizeof *s->v);
    }
    s->v[s->n++] = strdup(x);
}

static void set_free(strset *s)
{
    for (int i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof *s);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ---- object pointer -> "file\tpath" of the documents parsed during one load ---- */
typedef struct node {
    const cJSON *p;
    char *label; /* NULL: a node of a document we do not check */
} node;

typedef struct recorder {
    node *nodes;
    int n, cap;
    const char *model_dir;
    strset read;    /* "file\tkey" looked up */
    strset present; /* "file\tkey" found in the files */
} recorder;

static node *find(recorder *r, const cJSON *p)
{
    for (int i = r->n - 1; i >= 0; i--)
        if (r->nodes[i].p == p) return &r->nodes[i];
    return NULL;
}

static void put(recorder *r, const cJSON *p, const char *label)
{
    node *x = find(r, p);
    if (x) { /* the address was reused after an earlier document was freed */
        free(x->label);
        x->label = label ? strdup(label) : NULL;
        return;
    }
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 1024;
        r->nodes = realloc(r->nodes, (size_t)r->cap * sizeof *r->nodes);
    }
    r->nodes[r->n++] = (node){p, label ? strdup(label) : NULL};
}

static void clear_nodes(recorder *r)
{
    for (int i = 0; i < r->n; i++) free(r->nodes[i].label);
    r->n = 0;
}

static int is_number(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s)) return 0;
    return 1;
}

/* Joins a path part: numeric object keys read as "*". */
static void join(char *out, size_t cap, const char *base, const char *part)
{
    const char *p = is_number(part) ? "*" : part;
    if (!*base) snprintf(out, cap, "%s", p);
    else snprintf(out, cap, "%s.%s", base, p);
}

/* Object keys whose children are data (names, ids), not fields. */
static int is_map(const char *path)
{
    static const char *const maps[] = {"id2label", "label2id", "prompts", "auto_map", "weight_map", NULL};
    for (int i = 0; maps[i]; i++)
        if (!strcmp(path, maps[i])) return 1;
    return 0;
}

/* Registers every object/array node of a document under "file\tpath". */
static void walk(recorder *r, const cJSON *n, const char *file, const char *path, int check)
{
    char label[512];
    snprintf(label, sizeof label, "%s\t%s", file, path);
    put(r, n, check ? label : NULL);
    const cJSON *c;
    if (cJSON_IsArray(n)) {
        char sub[400];
        join(sub, sizeof sub, path, "[]");
        cJSON_ArrayForEach(c, n) if (cJSON_IsObject(c) || cJSON_IsArray(c)) walk(r, c, file, sub, check);
    } else if (cJSON_IsObject(n)) {
        cJSON_ArrayForEach(c, n)
        {
            char sub[400], key[512];
            /* text_config holds the backbone's keys under a multimodal config. */
            if (!*path && !strcmp(c->string, "text_config")) join(sub, sizeof sub, "", "");
            else join(sub, sizeof sub, path, c->string);
            if (check && !(!*path && !strcmp(c->string, "text_config"))) {
                snprintf(key, sizeof key, "%s\t%s", file, sub);
                set_add(&r->present, key);
            }
            if (is_map(sub)) {
                put(r, c, NULL);
                continue;
            }
            if (cJSON_IsObject(c) || cJSON_IsArray(c)) walk(r, c, file, sub, check);
        }
    }
}

/* "1_Pooling/config.json" -> "Pooling/config.json"; the model dir prefix goes. */
static void file_name(const recorder *r, const char *what, char *out, size_t cap)
{
    size_t dl = strlen(r->model_dir);
    if (!strncmp(what, r->model_dir, dl) && what[dl] == '/') what += dl + 1;
    const char *slash = strchr(what, '/');
    if (slash && isdigit((unsigned char)what[0])) {
        const char *u = what;
        while (isdigit((unsigned char)*u)) u++;
        if (*u == '_') what = u + 1;
    }
    snprintf(out, cap, "%s", what);
}

static void on_parse(void *ctx, const cJSON *root, const char *what)
{
    recorder *r = ctx;
    char file[512];
    file_name(r, what, file, sizeof file);
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    walk(r, root, file, "", strcmp(base, "tokenizer.json") != 0);
}

static void on_get(void *ctx, const cJSON *obj, const char *key)
{
    recorder *r = ctx;
    const node *x = find(r, obj);
    if (!x || !x->label) return;
    const char *tab = strchr(x->label, '\t');
    char path[600], line[800];
    join(path, sizeof path, tab + 1, key);
    snprintf(line, sizeof line, "%.*s\t%s", (int)(tab - x->label), x->label, path);
    set_add(&r->read, line);
}

/* Returns 0 when the checkpoint loaded. */
static int load_one(recorder *r, const char *dir, int must_load)
{
    r->model_dir = dir;
    clear_nodes(r);
    iv_engine *e = NULL;
    iv_err err = {0};
    const iv_json_recorder hook = {on_parse, on_get, r};
    iv_json_set_recorder(&hook);
    const int rc = iv_engine_load(&e, dir, NULL, &err);
    iv_json_set_recorder(NULL);
    if (rc && must_load) iv_test_fail(__FILE__, __LINE__, "%s: %s", dir, err.msg);
    else if (rc) printf("    (%s does not load: %s)\n", dir, err.msg);
    else iv_engine_free(e);
    clear_nodes(r);
    return rc;
}

/* The (file, key) pairs of the table: rows "| `file` | `key` | ...". */
static void load_table(strset *t)
{
    char *text = NULL;
    size_t len = 0;
    iv_err err = {0};
    if (iv_file_read_all("docs/checkpoint-fields.md", 1 << 22, &text, &len, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return;
    }
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "| `", 3)) continue;
        char *f0 = line + 3, *f1 = strchr(f0, '`');
        if (!f1) continue;
        char *k0 = strstr(f1, "| `");
        if (!k0) continue;
        k0 += 3;
        char *k1 = strchr(k0, '`');
        if (!k1) continue;
        /* A key cell may list several keys: `a`, `b`. */
        char row[800];
        for (;;) {
            snprintf(row, sizeof row, "%.*s\t%.*s", (int)(f1 - f0), f0, (int)(k1 - k0), k0);
            set_add(t, row);
            char *next = k1 + 1;
            if (strncmp(next, ", `", 3)) break;
            k0 = next + 3;
            k1 = strchr(k0, '`');
            if (!k1) break;
        }
    }
    free(text);
}

TEST(checkpoint_fields_documented)
{
    recorder r = {0};
    char *names[256];
    const int n = golden_fixture_names(names, 256);
    CHECK(n >= 10);
    char dir[4400];
    for (int i = 0; i < n; i++) {
        snprintf(dir, sizeof dir, "%s/models/%s", iv_test_fixtures_dir(), names[i]);
        load_one(&r, dir, 1);
        free(names[i]);
    }
    int real = 0;
    DIR *d = opendir(iv_test_models_dir());
    for (struct dirent *de; d && (de = readdir(d));) {
        if (de->d_name[0] == '.') continue;
        snprintf(dir, sizeof dir, "%s/%s", iv_test_models_dir(), de->d_name);
        char cfg[4500];
        snprintf(cfg, sizeof cfg, "%s/config.json", dir);
        if (!iv_file_exists(cfg)) continue;
        if (!load_one(&r, dir, 0)) real++;
    }
    if (d) closedir(d);
    strset table = {0};
    load_table(&table);
    qsort(r.read.v, (size_t)r.read.n, sizeof *r.read.v, cmp_str);
    qsort(r.present.v, (size_t)r.present.n, sizeof *r.present.v, cmp_str);
    const int print = getenv("IV_PRINT_FIELDS") != NULL;
    int missing_read = 0, missing_present = 0;
    for (int i = 0; i < r.read.n; i++) {
        if (print) printf("read\t%s\n", r.read.v[i]);
        if (!set_has(&table, r.read.v[i])) {
            missing_read++;
            iv_test_fail(__FILE__, __LINE__, "the loader reads %s, which docs/checkpoint-fields.md does not list",
                         r.read.v[i]);
        }
    }
    for (int i = 0; i < r.present.n; i++) {
        if (print) printf("present\t%s\n", r.present.v[i]);
        if (!set_has(&table, r.present.v[i])) {
            missing_present++;
            iv_test_fail(__FILE__, __LINE__, "a fixture carries %s, which docs/checkpoint-fields.md does not list",
                         r.present.v[i]);
        }
    }
    printf("    %d fixtures + %d real models: %d keys read, %d keys present, %d table rows; %d + %d unlisted\n", n,
           real, r.read.n, r.present.n, table.n, missing_read, missing_present);
    set_free(&table);
    set_free(&r.read);
    set_free(&r.present);
    free(r.nodes);
}
