/* Gemma4's vision tower, embedder and mixed text + image forward against
 * transformers (tests/fixtures/models/gemma4_vision, gemma4_vision_cg;
 * written by tools/fixtures/synthetic_gemma4_vision.py): the tower's pooled
 * soft tokens and the embedder's features of every image, all images
 * packed in one batch and each alone; the last hidden states of mixed and
 * text-only sequences, alone and packed together; the same through
 * iv_engine_run; the emulated device; refusals. */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/file.h"
#include "engine/engine.h"
#include "golden/golden_util.h"
#include "models/model.h"
#include "models/pack_weights.h"
#include "models/vision_gemma4.h"
#include "ops/ops.h"
#include "test.h"
#include "unit/ckpt_test_util.h"

#define MIN_COS 0.99999
#define MAX_ABS 1e-4
#define MAX_IMAGES 8
#define MAX_SEQS 8

typedef struct gfix {
    iv_model *m;
    iv_weights *expected;
    cJSON *json;
    int n_images, n_seqs;
    iv_image_input images[MAX_IMAGES];
    int32_t *ids[MAX_SEQS];
    int lens[MAX_SEQS];
    iv_image_input seq_images[MAX_SEQS][MAX_IMAGES];
    iv_seq_images seqs[MAX_SEQS];
    double worst_abs, worst_cos;
} gfix;

static const iv_tensor *expected(gfix *f, const char *fmt, int a)
{
    char name[96];
    snprintf(name, sizeof name, fmt, a);
    const iv_tensor *t = NULL;
    iv_err err = {0};
    if (iv_weights_f32(f->expected, name, 0, NULL, &t, &err)) iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
    return t;
}

static const char *const k_fixtures[] = {"gemma4_vision", "gemma4_vision_cg"};
#define N_FIXTURES 2

static void fixture_dir(const char *name, char *dir, size_t cap)
{
    char rel[256];
    snprintf(rel, sizeof rel, "models/%s", name);
    iv_path_join(dir, cap, iv_test_fixtures_dir(), rel);
}

/* The fixture's images (the processor's patch rows, as stored) and sequences. */
static int gfix_load(gfix *f, const char *name, const iv_ops *ops, int packed)
{
    memset(f, 0, sizeof *f);
    f->worst_cos = 1.0;
    char dir[4096], path[4400];
    fixture_dir(name, dir, sizeof dir);
    iv_err err = {0};
    if (iv_model_load(&f->m, dir, ops, &err)) return iv_test_fail(__FILE__, __LINE__, "load: %s", err.msg);
    size_t bytes;
    if (packed && iv_model_pack_cpu_weights(f->m, &bytes, &err))
        return iv_test_fail(__FILE__, __LINE__, "pack: %s", err.msg);
    if (!f->m->gemma4_vision) return iv_test_fail(__FILE__, __LINE__, "the fixture's vision tower was not loaded");
    snprintf(path, sizeof path, "%s/vision_expected.safetensors", dir);
    if (iv_weights_open_file(&f->expected, path, &err)) return iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
    snprintf(path, sizeof path, "%s/vision_cases.json", dir);
    char *text;
    size_t len;
    if (iv_file_read_all(path, 1 << 20, &text, &len, &err)) return iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
    f->json = cJSON_Parse(text);
    free(text);
    if (!f->json) return iv_test_fail(__FILE__, __LINE__, "vision_cases.json does not parse");
    CHECK_EQ_INT(cJSON_GetObjectItem(f->json, "image_token_id")->valueint, f->m->image_token_id);
    CHECK_EQ_INT(cJSON_GetObjectItem(f->json, "boi_token_id")->valueint, f->m->gemma4_vision->boi_id);
    CHECK_EQ_INT(cJSON_GetObjectItem(f->json, "eoi_token_id")->valueint, f->m->gemma4_vision->eoi_id);
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(f->json, "images")) {
        const int i = f->n_images++;
        const cJSON *g = cJSON_GetObjectItem(it, "grid");
        iv_image_input *im = &f->images[i];
        im->grid_t = 1;
        im->grid_h = cJSON_GetArrayItem(g, 0)->valueint;
        im->grid_w = cJSON_GetArrayItem(g, 1)->valueint;
        const iv_tensor *p = expected(f, "image.%d", i);
        if (!p) return -1;
        im->pixel_values = p->data;
    }
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(f->json, "sequences")) {
        const int s = f->n_seqs++;
        const cJSON *ids = cJSON_GetObjectItem(it, "ids"), *imgs = cJSON_GetObjectItem(it, "images");
        const cJSON *offs = cJSON_GetObjectItem(it, "image_offsets");
        f->lens[s] = cJSON_GetArraySize(ids);
        f->ids[s] = malloc((size_t)f->lens[s] * sizeof(int32_t));
        for (int t = 0; t < f->lens[s]; t++) f->ids[s][t] = cJSON_GetArrayItem(ids, t)->valueint;
        f->seqs[s].n = cJSON_GetArraySize(imgs);
        for (int i = 0; i < f->seqs[s].n; i++) {
            f->seq_images[s][i] = f->images[cJSON_GetArrayItem(imgs, i)->valueint];
            f->seq_images[s][i].token_offset = cJSON_GetArrayItem(offs, i)->valueint;
        }
        f->seqs[s].images = f->seq_images[s];
    }
    return 0;
}

static void gfix_free(gfix *f)
{
    for (int s = 0; s < f->n_seqs; s++) free(f->ids[s]);
    cJSON_Delete(f->json);
    if (f->expected) iv_weights_close(f->expected);
    iv_model_free(f->m);
}

/* Rows of got (host FP32, rows ld apart) against an expected tensor. */
static void compare(gfix *f, const char *what, const float *got, int64_t ld, const iv_tensor *want, double min_cos,
                    double max_abs)
{
    if (!want) return;
    const int64_t rows = want->shape[0], cols = want->shape[1];
    float *g = calloc((size_t)(rows * cols) + 1, sizeof(float));
    for (int64_t r = 0; r < rows; r++) memcpy(g + r * cols, got + r * ld, (size_t)cols * 4);
    golden_compare(what, g, want->data, rows, cols, min_cos, max_abs);
    for (int64_t r = 0; r < rows; r++) {
        const double c = iv_test_cosine(g + r * cols, iv_f32(want) + r * cols, cols);
        const double d = iv_test_max_abs_diff(g + r * cols, iv_f32(want) + r * cols, cols);
        if (c < f->worst_cos) f->worst_cos = c;
        if (d > f->worst_abs) f->worst_abs = d;
    }
    free(g);
}

/* The tower over images [first, first + n) packed in one call. */
static void check_tower(gfix *f, int first, int n)
{
    iv_arena a;
    iv_arena_init(&a);
    const iv_fwd_mem mem = {&a, &a};
    iv_view states, feats;
    iv_err err = {0};
    if (iv_gemma4_vision_forward(f->m, f->images + first, n, &mem, &states, &feats, &err)) {
        iv_test_fail(__FILE__, __LINE__, "vision forward: %s", err.msg);
        iv_arena_free(&a);
        return;
    }
    int64_t r0 = 0;
    for (int i = first; i < first + n; i++) {
        char what[96];
        snprintf(what, sizeof what, "image %d tower soft tokens (%d packed)", i, n);
        compare(f, what, (const float *)states.data + r0 * states.ld, states.ld, expected(f, "tower.%d", i), MIN_COS,
                MAX_ABS);
        snprintf(what, sizeof what, "image %d embedder features (%d packed)", i, n);
        compare(f, what, (const float *)feats.data + r0 * feats.ld, feats.ld, expected(f, "features.%d", i), MIN_COS,
                MAX_ABS);
        r0 += iv_gemma4_image_tokens(f->m->gemma4_vision, &f->images[i]);
    }
    CHECK_EQ_INT(r0, states.rows);
    CHECK_EQ_INT(r0, feats.rows);
    iv_arena_free(&a);
}

TEST(gemma4_vision_tower)
{
    for (int fx = 0; fx < N_FIXTURES; fx++)
        for (int packed = 0; packed < 2; packed++) {
            gfix f;
            if (gfix_load(&f, k_fixtures[fx], iv_cpu_ops(), packed) == 0) {
                check_tower(&f, 0, f.n_images);
                for (int i = 0; i < f.n_images; i++) check_tower(&f, i, 1);
                printf("    %s tower + embedder (%s weights): %d images, worst max abs %.2e, min cosine %.8f\n",
                       k_fixtures[fx], packed ? "packed" : "row-major", f.n_images, f.worst_abs, f.worst_cos);
            }
            gfix_free(&f);
        }
}

/* Sequences `which` packed into one batch through iv_model_forward_images. */
static int run_model(gfix *f, const int *which, int n, const char *label, double min_cos, double max_abs)
{
    iv_arena a;
    iv_arena_init(&a);
    const iv_fwd_mem mem = {&a, &a};
    int32_t cu[MAX_SEQS + 1] = {0};
    iv_seq_images imgs[MAX_SEQS];
    for (int i = 0; i < n; i++) {
        cu[i + 1] = cu[i] + f->lens[which[i]];
        imgs[i] = f->seqs[which[i]];
    }
    int32_t *ids = malloc((size_t)cu[n] * sizeof(int32_t));
    for (int i = 0; i < n; i++) memcpy(ids + cu[i], f->ids[which[i]], (size_t)f->lens[which[i]] * sizeof(int32_t));
    iv_batch b = {.n_seqs = n, .n_tokens = cu[n], .ids = ids, .cu_seqlens = cu};
    iv_view hidden;
    iv_err err = {0};
    int rc = 0;
    if (iv_model_check_batch(f->m, &b, &err) || iv_model_upload_batch(f->m, &b, &a, &err) ||
        iv_model_forward_images(f->m, &b, imgs, &mem, &hidden, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s: %s", label, err.msg);
        rc = -1;
    } else {
        float *host = malloc((size_t)(hidden.rows * hidden.cols) * sizeof(float));
        iv_ops_download_f32(f->m->ops, hidden, host);
        for (int i = 0; i < n; i++) {
            char what[128];
            snprintf(what, sizeof what, "%s: sequence %d hidden", label, which[i]);
            compare(f, what, host + (int64_t)cu[i] * hidden.cols, hidden.cols, expected(f, "hidden.%d", which[i]),
                    min_cos, max_abs);
        }
        free(host);
    }
    free(ids);
    iv_arena_free(&a);
    return rc;
}

TEST(gemma4_vision_mixed_forward)
{
    for (int fx = 0; fx < N_FIXTURES; fx++)
        for (int packed = 0; packed < 2; packed++) {
            gfix f;
            if (gfix_load(&f, k_fixtures[fx], iv_cpu_ops(), packed) == 0) {
                for (int s = 0; s < f.n_seqs; s++) {
                    const int one[1] = {s};
                    run_model(&f, one, 1, "alone", MIN_COS, MAX_ABS);
                }
                const int all[3] = {0, 1, 2}, mixed[2] = {2, 0}, text_first[2] = {1, 2};
                run_model(&f, all, 3, "three packed", MIN_COS, MAX_ABS);
                run_model(&f, mixed, 2, "two mixed packed", MIN_COS, MAX_ABS);
                run_model(&f, text_first, 2, "text then mixed packed", MIN_COS, MAX_ABS);
                printf("    %s model (%s weights): %d sequences, worst max abs %.2e, min cosine %.8f\n",
                       k_fixtures[fx], packed ? "packed" : "row-major", f.n_seqs, f.worst_abs, f.worst_cos);
            }
            gfix_free(&f);
        }
}
