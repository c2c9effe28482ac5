#include "golden_util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/file.h"
#include "base/json.h"
#include "ops/ops.h"
#include "test.h"

int golden_load(golden_case *g, const char *dir)
{
    memset(g, 0, sizeof *g);
    char path[4096];
    iv_err err = {0};
    iv_path_join(path, sizeof path, dir, "cases.json");
    if (iv_json_load_file(path, 64u << 20, &g->json, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return -1;
    }
    const cJSON *inputs = cJSON_GetObjectItemCaseSensitive(g->json, "inputs");
    g->n = cJSON_GetArraySize(inputs);
    g->ids = calloc((size_t)g->n, sizeof *g->ids);
    g->types = calloc((size_t)g->n, sizeof *g->types);
    g->key_masks = calloc((size_t)g->n, sizeof *g->key_masks);
    g->lens = calloc((size_t)g->n, sizeof *g->lens);
    g->prompt_lens = calloc((size_t)g->n, sizeof *g->prompt_lens);
    for (int i = 0; i < g->n; i++) {
        const cJSON *in = cJSON_GetArrayItem(inputs, i);
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(in, "ids");
        const cJSON *types = cJSON_GetObjectItemCaseSensitive(in, "type_ids");
        const cJSON *km = cJSON_GetObjectItemCaseSensitive(in, "key_mask");
        int n = cJSON_GetArraySize(ids);
        g->lens[i] = n;
        g->prompt_lens[i] = (int)iv_json_int(in, "prompt_len", 0);
        g->ids[i] = malloc((size_t)n * sizeof(int32_t));
        for (int k = 0; k < n; k++) g->ids[i][k] = (int32_t)cJSON_GetArrayItem(ids, k)->valuedouble;
        if (cJSON_IsArray(types) && cJSON_GetArraySize(types) == n) {
            g->types[i] = malloc((size_t)n * sizeof(int32_t));
            for (int k = 0; k < n; k++) g->types[i][k] = (int32_t)cJSON_GetArrayItem(types, k)->valuedouble;
        }
        if (cJSON_IsArray(km) && cJSON_GetArraySize(km) == n) {
            g->key_masks[i] = malloc((size_t)n);
            for (int k = 0; k < n; k++) g->key_masks[i][k] = cJSON_GetArrayItem(km, k)->valuedouble != 0;
        } else if (km) {
            iv_test_fail(__FILE__, __LINE__, "%s: input %d has a malformed key_mask", dir, i);
        }
    }
    iv_path_join(path, sizeof path, dir, "expected.safetensors");
    if (iv_weights_open_file(&g->expected, path, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return -1;
    }
    return 0;
}

void golden_free(golden_case *g)
{
    for (int i = 0; i < g->n; i++) {
        free(g->ids[i]);
        free(g->types[i]);
        free(g->key_masks[i]);
    }
    free(g->ids);
    free(g->types);
    free(g->key_masks);
    free(g->lens);
    free(g->prompt_lens);
    cJSON_Delete(g->json);
    if (g->expected) iv_weights_close(g->expected);
    memset(g, 0, sizeof *g);
}

const iv_tensor *golden_expected(golden_case *g, const char *name, int i)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%d", name, i);
    if (!iv_weights_find(g->expected, key)) return NULL;
    const iv_tensor *t;
    iv_err err = {0};
    return iv_weights_f32(g->expected, key, 0, NULL, &t, &err) ? NULL : t;
}

int golden_has_output(const golden_case *g, const char *name)
{
    const cJSON *outs = cJSON_GetObjectItemCaseSensitive(g->json, "outputs");
    const cJSON *o;
    cJSON_ArrayForEach(o, outs) if (cJSON_IsString(o) && !strcmp(o->valuestring, name)) return 1;
    return 0;
}

int golden_compare(const char *what, const float *got, const float *want, int64_t rows, int64_t cols,
                   double min_cos, double max_abs)
{
    int fails = 0;
    for (int64_t r = 0; r < rows; r++) {
        double c = iv_test_cosine(got + r * cols, want + r * cols, cols);
        double d = iv_test_max_abs_diff(got + r * cols, want + r * cols, cols);
        if (c < min_cos || d > max_abs) {
            if (fails < 3)
                iv_test_fail(__FILE__, __LINE__, "%s row %lld: cosine %.7f (min %.6f), max abs err %.2e (max %.0e)",
                             what, (long long)r, c, min_cos, d, max_abs);
            fails++;
        }
    }
    return fails;
}

void golden_compare_rows(const char *what, const float *got, int64_t ld, const iv_tensor *want, double min_cos,
                         double max_abs, double *worst_cos, double *worst_abs)
{
    if (!want) return;
    const int64_t rows = want->shape[0], cols = want->shape[1];
    float *g = calloc((size_t)(rows * cols) + 1, sizeof(float));
    for (int64_t r = 0; r < rows; r++) memcpy(g + r * cols, got + r * ld, (size_t)cols * sizeof(float));
    golden_compare(what, g, want->data, rows, cols, min_cos, max_abs);
    for (int64_t r = 0; r < rows; r++) {
        const double c = iv_test_cosine(g + r * cols, iv_f32(want) + r * cols, cols);
        const double d = iv_test_max_abs_diff(g + r * cols, iv_f32(want) + r * cols, cols);
        if (c < *worst_cos) *worst_cos = c;
        if (d > *worst_abs) *worst_abs = d;
    }
    free(g);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int golden_fixture_names(char **names, int cap)
{
    char root[4096];
    iv_path_join(root, sizeof root, iv_test_fixtures_dir(), "models");
    DIR *d = opendir(root);
    if (!d) return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < cap) {
        char cases[4096 + 300];
        snprintf(cases, sizeof cases, "%s/%s/cases.json", root, de->d_name);
        if (de->d_name[0] != '.' && iv_file_exists(cases)) names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    return n;
}

int golden_cuda_present(void)
{
    iv_err err = {0};
    const iv_ops *ops = iv_ops_open("cuda", "bfloat16", &err);
    if (!ops) {
        char why[600];
        snprintf(why, sizeof why, "no CUDA device: %s", err.msg);
        iv_test_skip(why);
        return 0;
    }
    iv_ops_close(ops);
    return 1;
}

int32_t *golden_seq_ids(const cJSON *seq, int *len)
{
    const cJSON *ids = cJSON_GetObjectItem(seq, "ids");
    *len = cJSON_GetArraySize(ids);
    int32_t *out = malloc((size_t)(*len > 0 ? *len : 1) * sizeof(int32_t));
    for (int t = 0; out && t < *len; t++) out[t] = cJSON_GetArrayItem(ids, t)->valueint;
    return out;
}

int golden_seq_images(const cJSON *seq, const iv_image_input *pool, iv_image_input *out)
{
    const cJSON *imgs = cJSON_GetObjectItem(seq, "images"), *offs = cJSON_GetObjectItem(seq, "image_offsets");
    const int n = cJSON_GetArraySize(imgs);
    for (int i = 0; i < n; i++) {
        out[i] = pool[cJSON_GetArrayItem(imgs, i)->valueint];
        out[i].token_offset = cJSON_GetArrayItem(offs, i)->valueint;
    }
    return n;
}
