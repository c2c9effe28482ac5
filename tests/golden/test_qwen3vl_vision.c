/* Qwen3-VL's vision tower and mixed text + image forward against
 * transformers (tests/fixtures/models/qwen3_vl_vision, written by
 * tools/fixtures/synthetic_qwen3vl_vision.py): the merged embeddings and
 * DeepStack features of every image, with all images packed in one batch
 * and each alone; get_rope_index's positions; and the last hidden states of
 * mixed and text-only sequences, alone and packed together. The same for
 * Qwen3.5 (tests/fixtures/models/qwen35_vision, from the same script). */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/file.h"
#include "golden/golden_util.h"
#include "models/model.h"
#include "models/pack_weights.h"
#include "models/vision_qwen3vl.h"
#include "ops/ops.h"
#include "test.h"

#define MIN_COS 0.99999
#define MAX_ABS 1e-4
#define MAX_IMAGES 8
#define MAX_SEQS 8

typedef struct vfix {
    iv_model *m;
    iv_weights *expected;
    cJSON *json;
    int n_images, n_seqs, n_deepstack;
    iv_image_input images[MAX_IMAGES];
    int32_t *ids[MAX_SEQS];
    int lens[MAX_SEQS];
    iv_image_input seq_images[MAX_SEQS][MAX_IMAGES];
    iv_seq_images seqs[MAX_SEQS];
    /* worst figures over the checks, for the report line */
    double worst_abs, worst_cos;
} vfix;

static const iv_tensor *expected(vfix *f, const char *fmt, int a, int b)
{
    char name[96];
    snprintf(name, sizeof name, fmt, a, b);
    const iv_tensor *t = NULL;
    iv_err err = {0};
    if (iv_weights_f32(f->expected, name, 0, NULL, &t, &err)) iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
    return t;
}

/* qwen35_vision: Qwen3.5's tower (Qwen3-VL's without DeepStack) and its hybrid
 * Gated DeltaNet text model, one mixed sequence longer than two DeltaNet chunks. */
static const char *const k_fixtures[] = {"qwen3_vl_vision", "qwen3_vl_vision_cg", "qwen35_vision"};
#define N_FIXTURES 3

static int vfix_load(vfix *f, const char *name, int packed)
{
    memset(f, 0, sizeof *f);
    f->worst_cos = 1.0;
    char dir[4096], path[4400];
    char rel[256];
    snprintf(rel, sizeof rel, "models/%s", name);
    iv_path_join(dir, sizeof dir, iv_test_fixtures_dir(), rel);
    iv_err err = {0};
    if (iv_model_load(&f->m, dir, iv_cpu_ops(), &err)) return iv_test_fail(__FILE__, __LINE__, "load: %s", err.msg);
    size_t bytes;
    if (packed && iv_model_pack_cpu_weights(f->m, &bytes, &err))
        return iv_test_fail(__FILE__, __LINE__, "pack: %s", err.msg);
    if (!f->m->vision) return iv_test_fail(__FILE__, __LINE__, "the fixture's vision tower was not loaded");
    snprintf(path, sizeof path, "%s/vision_expected.safetensors", dir);
    if (iv_weights_open_file(&f->expected, path, &err)) return iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
    snprintf(path, sizeof path, "%s/vision_cases.json", dir);
    char *text;
    size_t len;
    if (iv_file_read_all(path, 1 << 20, &text, &len, &err)) return iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
    f->json = cJSON_Parse(text);
    free(text);
    if (!f->json) return iv_test_fail(__FILE__, __LINE__, "vision_cases.json does not parse");
    f->n_deepstack = cJSON_GetObjectItem(f->json, "deepstack")->valueint;
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(f->json, "images")) {
        iv_image_input *im = &f->images[f->n_images];
        const cJSON *g = cJSON_GetObjectItem(it, "grid_thw");
        im->grid_t = cJSON_GetArrayItem(g, 0)->valueint;
        im->grid_h = cJSON_GetArrayItem(g, 1)->valueint;
        im->grid_w = cJSON_GetArrayItem(g, 2)->valueint;
        const iv_tensor *p = expected(f, "pixel_values.%d", f->n_images, 0);
        if (!p) return -1;
        im->pixel_values = p->data;
        f->n_images++;
    }
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(f->json, "sequences")) {
        const int s = f->n_seqs++;
        f->ids[s] = golden_seq_ids(it, &f->lens[s]);
        f->seqs[s].n = golden_seq_images(it, f->images, f->seq_images[s]);
        f->seqs[s].images = f->seq_images[s];
    }
    return 0;
}

static void vfix_free(vfix *f)
{
    for (int s = 0; s < f->n_seqs; s++) free(f->ids[s]);
    cJSON_Delete(f->json);
    if (f->expected) iv_weights_close(f->expected);
    iv_model_free(f->m);
}

/* Rows of got (dense FP32 on the CPU) against an expected tensor. */
static void compare(vfix *f, const char *what, iv_view got, int64_t r0, const iv_tensor *want)
{
    if (!want) return;
    const int64_t rows = want->shape[0], cols = want->shape[1];
    if (got.cols != cols || r0 + rows > got.rows) {
        iv_test_fail(__FILE__, __LINE__, "%s: got [%lld, %lld] rows from %lld, want [%lld, %lld]", what,
                     (long long)got.rows, (long long)got.cols, (long long)r0, (long long)rows, (long long)cols);
        return;
    }
    float *g = calloc((size_t)(rows * cols) + 1, sizeof(float));
    for (int64_t r = 0; r < rows; r++) memcpy(g + r * cols, (float *)got.data + (r0 + r) * got.ld, (size_t)cols * 4);
    golden_compare(what, g, want->data, rows, cols, MIN_COS, MAX_ABS);
    for (int64_t r = 0; r < rows; r++) {
        const double c = iv_test_cosine(g + r * cols, iv_f32(want) + r * cols, cols);
        const double d = iv_test_max_abs_diff(g + r * cols, iv_f32(want) + r * cols, cols);
        if (c < f->worst_cos) f->worst_cos = c;
        if (d > f->worst_abs) f->worst_abs = d;
    }
    free(g);
}

/* The tower over images [first, first + n) packed in one call. */
static void check_tower(vfix *f, int first, int n)
{
    iv_arena a;
    iv_arena_init(&a);
    const iv_fwd_mem mem = {&a, &a};
    iv_view merged, ds[IV_QWEN3VL_MAX_DEEPSTACK];
    iv_err err = {0};
    if (iv_qwen3vl_vision_forward(f->m, f->images + first, n, &mem, &merged, ds, &err)) {
        iv_test_fail(__FILE__, __LINE__, "vision forward: %s", err.msg);
        iv_arena_free(&a);
        return;
    }
    int64_t r0 = 0;
    for (int i = first; i < first + n; i++) {
        char what[96];
        snprintf(what, sizeof what, "image %d merged (%d packed)", i, n);
        const iv_tensor *want = expected(f, "merged.%d", i, 0);
        compare(f, what, merged, r0, want);
        for (int k = 0; k < f->n_deepstack; k++) {
            snprintf(what, sizeof what, "image %d deepstack %d (%d packed)", i, k, n);
            compare(f, what, ds[k], r0, expected(f, "deepstack%d.%d", k, i));
        }
        r0 += iv_qwen3vl_image_tokens(f->m->vision, &f->images[i]);
    }
    CHECK_EQ_INT(r0, merged.rows);
    iv_arena_free(&a);
}

TEST(qwen3vl_vision_tower)
{
    for (int fx = 0; fx < N_FIXTURES; fx++)
        for (int packed = 0; packed < 2; packed++) {
            vfix f;
            if (vfix_load(&f, k_fixtures[fx], packed) == 0) {
                check_tower(&f, 0, f.n_images);
                for (int i = 0; i < f.n_images; i++) check_tower(&f, i, 1);
                printf("    %s tower (%s weights): %d images, worst max abs %.2e, min cosine %.8f\n", k_fixtures[fx],
                       packed ? "packed" : "row-major", f.n_images, f.worst_abs, f.worst_cos);
            }
            vfix_free(&f);
        }
}

static void check_rope_index(const char *name)
{
    vfix f;
    if (vfix_load(&f, name, 0) == 0)
        for (int s = 0; s < f.n_seqs; s++) {
            const iv_tensor *want = expected(&f, "positions.%d", s, 0);
            int32_t *pos = malloc((size_t)(3 * f.lens[s]) * sizeof(int32_t));
            iv_qwen3vl_rope_index(f.m->vision, f.lens[s], &f.seqs[s], pos, f.lens[s]);
            for (int i = 0; want && i < 3 * f.lens[s]; i++)
                if (pos[i] != (int32_t)iv_f32(want)[i]) {
                    iv_test_fail(__FILE__, __LINE__, "%s sequence %d axis %d token %d: position %d, want %g", name, s,
                                 i / f.lens[s], i % f.lens[s], pos[i], iv_f32(want)[i]);
                    break;
                }
            free(pos);
        }
    vfix_free(&f);
}

TEST(qwen3vl_rope_index)
{
    for (int fx = 0; fx < N_FIXTURES; fx++) check_rope_index(k_fixtures[fx]);
}

/* Sequences `which` (indexes) packed into one batch through iv_qwen3vl_forward. */
static void check_model(vfix *f, const int *which, int n, const char *label)
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
    if (iv_model_check_batch(f->m, &b, &err) || iv_model_upload_batch(f->m, &b, &a, &err) ||
        iv_qwen3vl_forward(f->m, &b, imgs, &mem, &hidden, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s: %s", label, err.msg);
    } else {
        for (int i = 0; i < n; i++) {
            char what[128];
            snprintf(what, sizeof what, "%s: sequence %d hidden", label, which[i]);
            compare(f, what, hidden, cu[i], expected(f, "hidden.%d", which[i], 0));
        }
    }
    free(ids);
    iv_arena_free(&a);
}

static void check_mixed(const char *name, int packed)
{
    vfix f;
    if (vfix_load(&f, name, packed) == 0) {
        for (int s = 0; s < f.n_seqs; s++) {
            const int one[1] = {s};
            check_model(&f, one, 1, "alone");
        }
        const int all[3] = {0, 1, 2}, mixed[2] = {2, 0}, text_first[2] = {1, 2};
        check_model(&f, all, 3, "three packed");
        check_model(&f, mixed, 2, "two mixed packed");
        check_model(&f, text_first, 2, "text then mixed packed");
        printf("    %s model (%s weights): %d sequences, worst max abs %.2e, min cosine %.8f\n", name,
               packed ? "packed" : "row-major", f.n_seqs, f.worst_abs, f.worst_cos);
    }
    vfix_free(&f);
}

TEST(qwen3vl_mixed_forward)
{
    for (int fx = 0; fx < N_FIXTURES; fx++)
        for (int packed = 0; packed < 2; packed++) check_mixed(k_fixtures[fx], packed);
}

/* Text-only sequences through the plain forward (the engine's path) give the
 * same states as through the multimodal one. */
TEST(qwen3vl_text_only_plain_forward)
{
    vfix f;
    if (vfix_load(&f, k_fixtures[0], 1) == 0) {
        const int s = 1;
        REQUIRE(f.seqs[s].n == 0);
        iv_arena a;
        iv_arena_init(&a);
        const iv_fwd_mem mem = {&a, &a};
        int32_t cu[2] = {0, f.lens[s]};
        iv_batch b = {.n_seqs = 1, .n_tokens = f.lens[s], .ids = f.ids[s], .cu_seqlens = cu};
        iv_view hidden;
        iv_err err = {0};
        if (iv_model_upload_batch(f.m, &b, &a, &err) || iv_model_forward(f.m, &b, &mem, &hidden, &err))
            iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
        else
            compare(&f, "text-only plain forward", hidden, 0, expected(&f, "hidden.%d", s, 0));
        iv_arena_free(&a);
    }
    vfix_free(&f);
}

/* Image spans that do not match the image pad tokens are refused. */
TEST(qwen3vl_mixed_forward_rejects_bad_spans)
{
    vfix f;
    if (vfix_load(&f, k_fixtures[0], 0) == 0) {
        iv_arena a;
        iv_arena_init(&a);
        const iv_fwd_mem mem = {&a, &a};
        const int s = 0;
        int32_t cu[2] = {0, f.lens[s]};
        iv_batch b = {.n_seqs = 1, .n_tokens = f.lens[s], .ids = f.ids[s], .cu_seqlens = cu};
        iv_view hidden;
        iv_err err = {0};
        REQUIRE(iv_model_upload_batch(f.m, &b, &a, &err) == 0);
        iv_image_input shifted[MAX_IMAGES];
        memcpy(shifted, f.seqs[s].images, (size_t)f.seqs[s].n * sizeof shifted[0]);
        shifted[0].token_offset -= 1;
        iv_seq_images bad = {f.seqs[s].n, shifted};
        CHECK(iv_qwen3vl_forward(f.m, &b, &bad, &mem, &hidden, &err) != 0);
        CHECK_CONTAINS(err.msg, "not the image token");
        iv_seq_images fewer = {f.seqs[s].n - 1, f.seqs[s].images};
        CHECK(iv_qwen3vl_forward(f.m, &b, &fewer, &mem, &hidden, &err) != 0);
        CHECK_CONTAINS(err.msg, "image tokens but its images fill");
        iv_arena_free(&a);
    }
    vfix_free(&f);
}

/* The same tower and mixed forward on the emulated device (BF16 storage,
 * buffers the host cannot touch): every step runs through the op table, so
 * the model moves to another device unchanged. BF16 rounding bounds the
 * agreement (cosine >= 0.999 per row). */
static double emu_worst_cos(const iv_ops *ops, iv_view got, int64_t r0, const iv_tensor *want)
{
    const int64_t rows = want->shape[0], cols = want->shape[1];
    float *all = calloc((size_t)(got.rows * got.cols) + 1, sizeof(float));
    iv_ops_download_f32(ops, got, all);
    double worst = 1.0;
    for (int64_t r = 0; r < rows; r++) {
        const double c = iv_test_cosine(all + (r0 + r) * cols, iv_f32(want) + r * cols, cols);
        if (c < worst) worst = c;
    }
    free(all);
    return worst;
}

static void check_device_bf16(const char *device, const char *name)
{
    iv_err err = {0};
    const iv_ops *ops = iv_ops_open(device, "bfloat16", &err);
    REQUIRE(ops);
    vfix f;
    if (vfix_load(&f, name, 0) == 0 && iv_model_to_device(f.m, ops, &err) == 0) {
        iv_arena host, dev;
        iv_arena_init(&host);
        iv_ops_arena_init(&dev, ops);
        const iv_fwd_mem mem = {&host, &dev};
        iv_view merged, ds[IV_QWEN3VL_MAX_DEEPSTACK];
        double worst = 1.0;
        if (iv_qwen3vl_vision_forward(f.m, f.images, f.n_images, &mem, &merged, ds, &err)) {
            iv_test_fail(__FILE__, __LINE__, "vision forward: %s", err.msg);
        } else {
            int64_t r0 = 0;
            for (int i = 0; i < f.n_images; i++) {
                double c = emu_worst_cos(ops, merged, r0, expected(&f, "merged.%d", i, 0));
                for (int k = 0; k < f.n_deepstack; k++) {
                    const double d = emu_worst_cos(ops, ds[k], r0, expected(&f, "deepstack%d.%d", k, i));
                    c = d < c ? d : c;
                }
                worst = c < worst ? c : worst;
                r0 += iv_qwen3vl_image_tokens(f.m->vision, &f.images[i]);
            }
        }
        int32_t cu[4] = {0};
        for (int s = 0; s < 3; s++) cu[s + 1] = cu[s] + f.lens[s];
        int32_t *ids = malloc((size_t)cu[3] * sizeof(int32_t));
        for (int s = 0; s < 3; s++) memcpy(ids + cu[s], f.ids[s], (size_t)f.lens[s] * sizeof(int32_t));
        iv_batch b = {.n_seqs = 3, .n_tokens = cu[3], .ids = ids, .cu_seqlens = cu};
        iv_view hidden;
        double worst_h = 1.0;
        if (iv_model_upload_batch(f.m, &b, &dev, &err) || iv_qwen3vl_forward(f.m, &b, f.seqs, &mem, &hidden, &err)) {
            iv_test_fail(__FILE__, __LINE__, "mixed forward: %s", err.msg);
        } else {
            for (int s = 0; s < 3; s++) {
                const double c = emu_worst_cos(ops, hidden, cu[s], expected(&f, "hidden.%d", s, 0));
                worst_h = c < worst_h ? c : worst_h;
            }
        }
        CHECK_MSG(ops->sync(ops, &err) == 0, "%s", err.msg);
        CHECK_MSG(worst >= 0.999, "tower min cosine %.6f on %s bf16", worst, device);
        CHECK_MSG(worst_h >= 0.999, "hidden min cosine %.6f on %s bf16", worst_h, device);
        printf("    %s %s bf16: tower min cosine %.6f, hidden min cosine %.6f\n", name, device, worst, worst_h);
        free(ids);
        iv_arena_free(&dev);
        iv_arena_free(&host);
    } else if (err.msg[0]) {
        iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
    }
    vfix_free(&f);
    iv_ops_close(ops);
}

TEST(qwen3vl_vision_emulated_bf16)
{
    /* Not qwen35_vision: tiny random hybrids lose most of their digits in 16
     * bits (transformers' own BF16 run included, tools/fixtures/synthetic_qwen35.py);
     * tests/golden/test_device_fixtures.c holds the text fixtures to transformers'
     * 16-bit figure instead. */
    check_device_bf16("emulated", k_fixtures[0]);
}

/* The same on a GPU (the rope op's position axes and embed_bag on CUDA);
 * skipped where there is none. */
TEST(qwen3vl_vision_cuda_bf16)
{
    if (golden_cuda_present()) check_device_bf16("cuda", k_fixtures[0]);
}

/* Through the engine: sequences carrying images (iv_seq_input.images) run
 * the multimodal forward, packed with text-only ones, and the per-token
 * outputs are transformers' last hidden states; each sequence is also run
 * alone, and its packed outputs must be the same bits. */
static void check_engine(vfix *f, const char *name)
{
    char dir[4096], rel[256];
    snprintf(rel, sizeof rel, "models/%s", name);
    iv_path_join(dir, sizeof dir, iv_test_fixtures_dir(), rel);
    iv_engine *e = NULL;
    iv_err err = {0};
    if (iv_engine_load(&e, dir, NULL, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s engine load: %s", name, err.msg);
        return;
    }
    iv_seq_input in[MAX_SEQS];
    memset(in, 0, sizeof in);
    for (int s = 0; s < f->n_seqs; s++) {
        in[s].ids = f->ids[s];
        in[s].len = f->lens[s];
        in[s].images = f->seqs[s].images;
        in[s].n_images = f->seqs[s].n;
    }
    iv_outputs out;
    if (iv_engine_run(e, IV_TASK_EMBED_ALL, in, f->n_seqs, &out, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s engine run: %s", name, err.msg);
    } else {
        double worst_abs = 0, worst_cos = 1;
        for (int s = 0; s < f->n_seqs; s++) {
            const iv_tensor *want = expected(f, "hidden.%d", s, 0);
            CHECK_EQ_INT(out.rows[s], f->lens[s]);
            char what[96];
            snprintf(what, sizeof what, "%s engine: sequence %d hidden", name, s);
            if (!want || out.rows[s] != f->lens[s]) continue;
            const float *got = out.data + out.offsets[s];
            golden_compare(what, got, want->data, want->shape[0], want->shape[1], MIN_COS, MAX_ABS);
            for (int64_t r = 0; r < want->shape[0]; r++) {
                const int64_t c = want->shape[1];
                const double cs = iv_test_cosine(got + r * c, iv_f32(want) + r * c, c);
                const double d = iv_test_max_abs_diff(got + r * c, iv_f32(want) + r * c, c);
                worst_cos = cs < worst_cos ? cs : worst_cos;
                worst_abs = d > worst_abs ? d : worst_abs;
            }
            iv_outputs one;
            if (iv_engine_run(e, IV_TASK_EMBED_ALL, &in[s], 1, &one, &err)) {
                iv_test_fail(__FILE__, __LINE__, "%s engine run of sequence %d alone: %s", name, s, err.msg);
                continue;
            }
            CHECK_MSG(one.rows[0] == out.rows[s] &&
                          memcmp(one.data, got, (size_t)(one.rows[0] * one.cols) * sizeof(float)) == 0,
                      "%s: sequence %d alone is not the same bits as packed", name, s);
            iv_outputs_free(&one);
        }
        printf("    %s engine (%d sequences packed, each also alone: same bits): worst max abs %.2e, min cosine "
               "%.8f\n", name, f->n_seqs, worst_abs, worst_cos);
        iv_outputs_free(&out);
    }
    iv_engine_free(e);
}

TEST(qwen3vl_engine_images)
{
    static const int engine_fixtures[] = {0, 2}; /* Qwen3-VL, Qwen3.5 */
    for (int k = 0; k < 2; k++) {
        vfix g;
        if (vfix_load(&g, k_fixtures[engine_fixtures[k]], 0) == 0) check_engine(&g, k_fixtures[engine_fixtures[k]]);
        vfix_free(&g);
    }
    vfix f;
    if (vfix_load(&f, k_fixtures[0], 0) == 0) {
        char dir[4096];
        iv_engine *e = NULL;
        iv_err err = {0};
        /* A checkpoint without a vision tower refuses images. */
        iv_path_join(dir, sizeof dir, iv_test_fixtures_dir(), "models/qwen3");
        if (iv_engine_load(&e, dir, NULL, &err) == 0) {
            const int32_t ids[4] = {5, 6, 7, 8};
            iv_image_input img = f.images[0];
            iv_seq_input in = {.ids = ids, .len = 4, .images = &img, .n_images = 1};
            iv_outputs out;
            CHECK(iv_engine_run(e, IV_TASK_EMBED_ALL, &in, 1, &out, &err) != 0);
            CHECK_EQ_INT(err.code, IV_E_UNSUPPORTED);
            CHECK_CONTAINS(err.msg, "no vision tower");
            iv_engine_free(e);
        } else {
            iv_test_fail(__FILE__, __LINE__, "qwen3 load: %s", err.msg);
        }
    }
    vfix_free(&f);
}
