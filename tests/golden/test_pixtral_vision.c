/* Mistral3's Pixtral tower, projector and mixed text + image forward
 * against transformers (tests/fixtures/models/mistral3_pixtral,
 * mistral3_pixtral_cg, mistral3_rerank_vision; written by
 * tools/fixtures/synthetic_pixtral.py): the tower's last states and the
 * projector's features of every image, all images packed in one batch and
 * each alone; the last hidden states of mixed and text-only sequences,
 * alone and packed together; the same through iv_engine_run; the Nemotron
 * reranker's score with image documents; the emulated device; refusals. */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/file.h"
#include "base/strbuf.h"
#include "engine/engine.h"
#include "engine/image_inputs.h"
#include "golden/golden_util.h"
#include "image/pixtral.h"
#include "models/model.h"
#include "models/pack_weights.h"
#include "models/vision_pixtral.h"
#include "ops/ops.h"
#include "server/codec.h"
#include "test.h"
#include "unit/ckpt_test_util.h"

#define MIN_COS 0.99999
#define MAX_ABS 1e-4
#define MAX_IMAGES 8
#define MAX_SEQS 8

typedef struct pfix {
    iv_model *m;
    iv_weights *expected;
    cJSON *json;
    int n_images, n_seqs, merge;
    iv_image_input images[MAX_IMAGES];
    float *patches[MAX_IMAGES];
    int32_t *ids[MAX_SEQS];
    int lens[MAX_SEQS];
    iv_image_input seq_images[MAX_SEQS][MAX_IMAGES];
    iv_seq_images seqs[MAX_SEQS];
    double worst_abs, worst_cos;
} pfix;

static const iv_tensor *expected(pfix *f, const char *fmt, int a)
{
    char name[96];
    snprintf(name, sizeof name, fmt, a);
    const iv_tensor *t = NULL;
    iv_err err = {0};
    if (iv_weights_f32(f->expected, name, 0, NULL, &t, &err)) iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
    return t;
}

static const char *const k_fixtures[] = {"mistral3_pixtral", "mistral3_pixtral_cg"};
#define N_FIXTURES 2

static void fixture_dir(const char *name, char *dir, size_t cap)
{
    char rel[256];
    snprintf(rel, sizeof rel, "models/%s", name);
    iv_path_join(dir, cap, iv_test_fixtures_dir(), rel);
}

/* The fixture's images as the processor's pixels, patchified as the engine
 * would (iv_pixtral_patchify), and its sequences. */
static int pfix_load(pfix *f, const char *name, int packed)
{
    memset(f, 0, sizeof *f);
    f->worst_cos = 1.0;
    char dir[4096], path[4400];
    fixture_dir(name, dir, sizeof dir);
    iv_err err = {0};
    if (iv_model_load(&f->m, dir, iv_cpu_ops(), &err)) return iv_test_fail(__FILE__, __LINE__, "load: %s", err.msg);
    size_t bytes;
    if (packed && iv_model_pack_cpu_weights(f->m, &bytes, &err))
        return iv_test_fail(__FILE__, __LINE__, "pack: %s", err.msg);
    if (!f->m->pixtral) return iv_test_fail(__FILE__, __LINE__, "the fixture's vision tower was not loaded");
    snprintf(path, sizeof path, "%s/vision_expected.safetensors", dir);
    if (iv_weights_open_file(&f->expected, path, &err)) return iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
    snprintf(path, sizeof path, "%s/vision_cases.json", dir);
    char *text;
    size_t len;
    if (iv_file_read_all(path, 1 << 20, &text, &len, &err)) return iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
    f->json = cJSON_Parse(text);
    free(text);
    if (!f->json) return iv_test_fail(__FILE__, __LINE__, "vision_cases.json does not parse");
    f->merge = cJSON_GetObjectItem(f->json, "merge")->valueint;
    CHECK_EQ_INT(f->merge, f->m->pixtral->merge);
    CHECK_EQ_INT(cJSON_GetObjectItem(f->json, "image_token_id")->valueint, f->m->image_token_id);
    iv_pixtral_config cfg;
    iv_pixtral_config_default(&cfg);
    cfg.patch_size = f->m->pixtral->patch;
    cfg.merge_size = f->merge;
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
        iv_pixtral_pixels px = {.pixel_values = p->data, .height = im->grid_h * cfg.patch_size,
                                .width = im->grid_w * cfg.patch_size, .grid_h = im->grid_h, .grid_w = im->grid_w,
                                .rows = im->grid_h / f->merge, .cols = im->grid_w / f->merge};
        f->patches[i] = malloc((size_t)(im->grid_h * im->grid_w) * 3 * cfg.patch_size * cfg.patch_size * sizeof(float));
        iv_pixtral_patchify(&cfg, &px, f->patches[i]);
        im->pixel_values = f->patches[i];
    }
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(f->json, "sequences")) {
        const int s = f->n_seqs++;
        f->ids[s] = golden_seq_ids(it, &f->lens[s]);
        f->seqs[s].n = golden_seq_images(it, f->images, f->seq_images[s]);
        f->seqs[s].images = f->seq_images[s];
    }
    return 0;
}

static void pfix_free(pfix *f)
{
    for (int s = 0; s < f->n_seqs; s++) free(f->ids[s]);
    for (int i = 0; i < f->n_images; i++) free(f->patches[i]);
    cJSON_Delete(f->json);
    if (f->expected) iv_weights_close(f->expected);
    iv_model_free(f->m);
}

/* Rows of got (host FP32, rows ld apart) against an expected tensor; row r
 * of want is got's row perm[r] (identity when perm is NULL). */
static void compare(pfix *f, const char *what, const float *got, int64_t ld, const int64_t *perm,
                    const iv_tensor *want)
{
    if (!want) return;
    const int64_t rows = want->shape[0], cols = want->shape[1];
    float *g = calloc((size_t)(rows * cols) + 1, sizeof(float));
    for (int64_t r = 0; r < rows; r++) memcpy(g + r * cols, got + (perm ? perm[r] : r) * ld, (size_t)cols * 4);
    golden_compare(what, g, want->data, rows, cols, MIN_COS, MAX_ABS);
    for (int64_t r = 0; r < rows; r++) {
        const double c = iv_test_cosine(g + r * cols, iv_f32(want) + r * cols, cols);
        const double d = iv_test_max_abs_diff(g + r * cols, iv_f32(want) + r * cols, cols);
        if (c < f->worst_cos) f->worst_cos = c;
        if (d > f->worst_abs) f->worst_abs = d;
    }
    free(g);
}

/* For each raster patch of an image, its row in merge-block order. */
static int64_t *raster_to_block(const iv_image_input *im, int s)
{
    const int64_t n = (int64_t)im->grid_h * im->grid_w, bw = im->grid_w / s;
    int64_t *perm = malloc((size_t)n * sizeof *perm);
    for (int64_t j = 0; j < n; j++) {
        const int64_t blk = j / ((int64_t)s * s), in = j % ((int64_t)s * s);
        const int64_t row = blk / bw * s + in / s, col = blk % bw * s + in % s;
        perm[row * im->grid_w + col] = j;
    }
    return perm;
}

/* The tower over images [first, first + n) packed in one call. */
static void check_tower(pfix *f, int first, int n)
{
    iv_arena a;
    iv_arena_init(&a);
    const iv_fwd_mem mem = {&a, &a};
    iv_view states, feats;
    iv_err err = {0};
    if (iv_pixtral_vision_forward(f->m, f->images + first, n, &mem, &states, &feats, &err)) {
        iv_test_fail(__FILE__, __LINE__, "vision forward: %s", err.msg);
        iv_arena_free(&a);
        return;
    }
    int64_t r0 = 0, t0 = 0;
    for (int i = first; i < first + n; i++) {
        char what[96];
        int64_t *perm = raster_to_block(&f->images[i], f->merge);
        snprintf(what, sizeof what, "image %d tower states (%d packed)", i, n);
        compare(f, what, (const float *)states.data + r0 * states.ld, states.ld, perm, expected(f, "tower.%d", i));
        free(perm);
        snprintf(what, sizeof what, "image %d projector features (%d packed)", i, n);
        compare(f, what, (const float *)feats.data + t0 * feats.ld, feats.ld, NULL, expected(f, "features.%d", i));
        r0 += (int64_t)f->images[i].grid_h * f->images[i].grid_w;
        t0 += iv_pixtral_image_tokens(f->m->pixtral, &f->images[i]);
    }
    CHECK_EQ_INT(r0, states.rows);
    CHECK_EQ_INT(t0, feats.rows);
    iv_arena_free(&a);
}

TEST(pixtral_vision_tower)
{
    for (int fx = 0; fx < N_FIXTURES; fx++)
        for (int packed = 0; packed < 2; packed++) {
            pfix f;
            if (pfix_load(&f, k_fixtures[fx], packed) == 0) {
                check_tower(&f, 0, f.n_images);
                for (int i = 0; i < f.n_images; i++) check_tower(&f, i, 1);
                printf("    %s tower + projector (%s weights): %d images, worst max abs %.2e, min cosine %.8f\n",
                       k_fixtures[fx], packed ? "packed" : "row-major", f.n_images, f.worst_abs, f.worst_cos);
            }
            pfix_free(&f);
        }
}

/* Sequences `which` packed into one batch through iv_mistral3_forward. */
static void check_model(pfix *f, const int *which, int n, const char *label)
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
        iv_mistral3_forward(f->m, &b, imgs, &mem, &hidden, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s: %s", label, err.msg);
    } else {
        for (int i = 0; i < n; i++) {
            char what[128];
            snprintf(what, sizeof what, "%s: sequence %d hidden", label, which[i]);
            compare(f, what, (const float *)hidden.data + (int64_t)cu[i] * hidden.ld, hidden.ld, NULL,
                    expected(f, "hidden.%d", which[i]));
        }
    }
    free(ids);
    iv_arena_free(&a);
}

TEST(pixtral_mixed_forward)
{
    for (int fx = 0; fx < N_FIXTURES; fx++)
        for (int packed = 0; packed < 2; packed++) {
            pfix f;
            if (pfix_load(&f, k_fixtures[fx], packed) == 0) {
                for (int s = 0; s < f.n_seqs; s++) {
                    const int one[1] = {s};
                    check_model(&f, one, 1, "alone");
                }
                const int all[3] = {0, 1, 2}, mixed[2] = {2, 0}, text_first[2] = {1, 2};
                check_model(&f, all, 3, "three packed");
                check_model(&f, mixed, 2, "two mixed packed");
                check_model(&f, text_first, 2, "text then mixed packed");
                printf("    %s model (%s weights): %d sequences, worst max abs %.2e, min cosine %.8f\n",
                       k_fixtures[fx], packed ? "packed" : "row-major", f.n_seqs, f.worst_abs, f.worst_cos);
            }
            pfix_free(&f);
        }
}

/* Runs that do not match the layout, or leave [IMG] tokens over, are refused. */
TEST(pixtral_mixed_forward_rejects_bad_runs)
{
    pfix f;
    if (pfix_load(&f, k_fixtures[0], 0) == 0) {
        iv_arena a;
        iv_arena_init(&a);
        const iv_fwd_mem mem = {&a, &a};
        const int s = 0;
        int32_t cu[2] = {0, f.lens[s]};
        iv_batch b = {.n_seqs = 1, .n_tokens = f.lens[s], .ids = f.ids[s], .cu_seqlens = cu};
        iv_view hidden;
        iv_err err = {0};
        REQUIRE(iv_model_upload_batch(f.m, &b, &a, &err) == 0);
        iv_image_input bad[MAX_IMAGES];
        memcpy(bad, f.seqs[s].images, (size_t)f.seqs[s].n * sizeof bad[0]);
        bad[0].token_offset -= 1;
        iv_seq_images shifted = {f.seqs[s].n, bad};
        CHECK(iv_mistral3_forward(f.m, &b, &shifted, &mem, &hidden, &err) != 0);
        CHECK_CONTAINS(err.msg, "image layout");
        memcpy(bad, f.seqs[s].images, (size_t)f.seqs[s].n * sizeof bad[0]);
        bad[0].grid_h += 2; /* one line more than the text holds */
        CHECK(iv_mistral3_forward(f.m, &b, &shifted, &mem, &hidden, &err) != 0);
        bad[0] = f.seqs[s].images[0];
        bad[0].grid_w = 3; /* not a multiple of the merge */
        CHECK(iv_mistral3_forward(f.m, &b, &shifted, &mem, &hidden, &err) != 0);
        CHECK_CONTAINS(err.msg, "bad grid");
        iv_seq_images fewer = {f.seqs[s].n - 1, f.seqs[s].images};
        CHECK(iv_mistral3_forward(f.m, &b, &fewer, &mem, &hidden, &err) != 0);
        CHECK_CONTAINS(err.msg, "image tokens but its images fill");
        memcpy(bad, f.seqs[s].images, (size_t)f.seqs[s].n * sizeof bad[0]);
        bad[1].token_offset = bad[0].token_offset; /* overlapping runs */
        CHECK(iv_mistral3_forward(f.m, &b, &shifted, &mem, &hidden, &err) != 0);
        iv_arena_free(&a);
    }
    pfix_free(&f);
}

/* The emulated device (16-bit storage, memory the host cannot touch): the
 * tower and mixed forward run unchanged through the op table. Storage
 * rounding bounds the agreement: FP16 (11-bit mantissa) keeps every row at
 * cosine >= 0.9995; BF16 (8 bits, about 8x the rounding error) reaches
 * 0.9925 on the image rows of this fixture, whose random weights and N(0, 1)
 * pixels amplify rounding through the tower, projector and text layers, so
 * BF16 is held to 0.99 (its text-only rows stay above 0.9996). */
static void check_device(const char *device, const char *dtype, double min_cos)
{
    iv_err err = {0};
    const iv_ops *ops = iv_ops_open(device, dtype, &err);
    REQUIRE(ops);
    pfix f;
    if (pfix_load(&f, k_fixtures[0], 0) == 0 && iv_model_to_device(f.m, ops, &err) == 0) {
        iv_arena host, dev;
        iv_arena_init(&host);
        iv_ops_arena_init(&dev, ops);
        const iv_fwd_mem mem = {&host, &dev};
        iv_view states, feats;
        double worst = 1.0, worst_h = 1.0;
        if (iv_pixtral_vision_forward(f.m, f.images, f.n_images, &mem, &states, &feats, &err)) {
            iv_test_fail(__FILE__, __LINE__, "vision forward: %s", err.msg);
        } else {
            float *all = calloc((size_t)(feats.rows * feats.cols) + 1, sizeof(float));
            iv_ops_download_f32(ops, feats, all);
            int64_t t0 = 0;
            for (int i = 0; i < f.n_images; i++) {
                const iv_tensor *want = expected(&f, "features.%d", i);
                for (int64_t r = 0; want && r < want->shape[0]; r++) {
                    const double c = iv_test_cosine(all + (t0 + r) * feats.cols, iv_f32(want) + r * want->shape[1],
                                                    want->shape[1]);
                    worst = c < worst ? c : worst;
                }
                t0 += iv_pixtral_image_tokens(f.m->pixtral, &f.images[i]);
            }
            free(all);
        }
        int32_t cu[4] = {0};
        for (int s = 0; s < 3; s++) cu[s + 1] = cu[s] + f.lens[s];
        int32_t *ids = malloc((size_t)cu[3] * sizeof(int32_t));
        for (int s = 0; s < 3; s++) memcpy(ids + cu[s], f.ids[s], (size_t)f.lens[s] * sizeof(int32_t));
        iv_batch b = {.n_seqs = 3, .n_tokens = cu[3], .ids = ids, .cu_seqlens = cu};
        iv_view hidden;
        if (iv_model_upload_batch(f.m, &b, &dev, &err) || iv_mistral3_forward(f.m, &b, f.seqs, &mem, &hidden, &err)) {
            iv_test_fail(__FILE__, __LINE__, "mixed forward: %s", err.msg);
        } else {
            float *all = calloc((size_t)(hidden.rows * hidden.cols) + 1, sizeof(float));
            iv_ops_download_f32(ops, hidden, all);
            for (int s = 0; s < 3; s++) {
                const iv_tensor *want = expected(&f, "hidden.%d", s);
                for (int64_t r = 0; want && r < want->shape[0]; r++) {
                    const double c = iv_test_cosine(all + (cu[s] + r) * hidden.cols, iv_f32(want) + r * want->shape[1],
                                                    want->shape[1]);
                    worst_h = c < worst_h ? c : worst_h;
                }
            }
            free(all);
        }
        CHECK_MSG(ops->sync(ops, &err) == 0, "%s", err.msg);
        CHECK_MSG(worst >= min_cos, "features min cosine %.6f on %s %s", worst, device, dtype);
        CHECK_MSG(worst_h >= min_cos, "hidden min cosine %.6f on %s %s", worst_h, device, dtype);
        printf("    %s %s: features min cosine %.6f, hidden min cosine %.6f\n", device, dtype, worst, worst_h);
        free(ids);
        iv_arena_free(&dev);
        iv_arena_free(&host);
    } else if (err.msg[0]) {
        iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
    }
    pfix_free(&f);
    iv_ops_close(ops);
}

TEST(pixtral_vision_emulated_16bit)
{
    check_device("emulated", "float16", 0.9995);
    check_device("emulated", "bfloat16", 0.99);
}

/* The same on a GPU, to the same bounds; skipped where there is none. */
TEST(pixtral_vision_cuda_16bit)
{
    if (!golden_cuda_present()) return;
    check_device("cuda", "float16", 0.9995);
    check_device("cuda", "bfloat16", 0.99);
}

static void engine_inputs(const pfix *f, iv_seq_input *in)
{
    memset(in, 0, (size_t)f->n_seqs * sizeof *in);
    for (int s = 0; s < f->n_seqs; s++) {
        in[s].ids = f->ids[s];
        in[s].len = f->lens[s];
        in[s].images = f->seqs[s].images;
        in[s].n_images = f->seqs[s].n;
    }
}

/* Through the engine: mixed and text-only sequences packed in one run. */
TEST(pixtral_engine_images)
{
    for (int fx = 0; fx < N_FIXTURES; fx++) {
        pfix f;
        if (pfix_load(&f, k_fixtures[fx], 0) == 0) {
            char dir[4096];
            fixture_dir(k_fixtures[fx], dir, sizeof dir);
            iv_engine *e = NULL;
            iv_err err = {0};
            if (iv_engine_load(&e, dir, NULL, &err)) {
                iv_test_fail(__FILE__, __LINE__, "engine load: %s", err.msg);
            } else {
                iv_seq_input in[MAX_SEQS];
                engine_inputs(&f, in);
                iv_outputs out;
                if (iv_engine_run(e, IV_TASK_EMBED_ALL, in, f.n_seqs, &out, &err)) {
                    iv_test_fail(__FILE__, __LINE__, "engine run: %s", err.msg);
                } else {
                    for (int s = 0; s < f.n_seqs; s++) {
                        const iv_tensor *want = expected(&f, "hidden.%d", s);
                        CHECK_EQ_INT(out.rows[s], f.lens[s]);
                        char what[96];
                        snprintf(what, sizeof what, "%s engine: sequence %d hidden", k_fixtures[fx], s);
                        if (want && out.rows[s] == f.lens[s])
                            compare(&f, what, out.data + out.offsets[s], want->shape[1], NULL, want);
                    }
                    iv_outputs_free(&out);
                }
                iv_engine_free(e);
            }
            printf("    %s engine: %d sequences packed, worst max abs %.2e, min cosine %.8f\n", k_fixtures[fx],
                   f.n_seqs, f.worst_abs, f.worst_cos);
        }
        pfix_free(&f);
    }
}

/* Nemotron reranker (Mistral3ForSequenceClassification) with image
 * documents: the FP32 score over the mean of text and image tokens. */
TEST(mistral3_rerank_vision_engine_scores)
{
    pfix f;
    if (pfix_load(&f, "mistral3_rerank_vision", 0) == 0) {
        char dir[4096];
        fixture_dir("mistral3_rerank_vision", dir, sizeof dir);
        iv_engine *e = NULL;
        iv_err err = {0};
        if (iv_engine_load(&e, dir, NULL, &err)) {
            iv_test_fail(__FILE__, __LINE__, "engine load: %s", err.msg);
        } else {
            iv_seq_input in[MAX_SEQS];
            engine_inputs(&f, in);
            iv_outputs out;
            double worst = 0;
            if (iv_engine_run(e, IV_TASK_CLASSIFY, in, f.n_seqs, &out, &err)) {
                iv_test_fail(__FILE__, __LINE__, "engine classify: %s", err.msg);
            } else {
                for (int s = 0; s < f.n_seqs; s++) {
                    const iv_tensor *want = expected(&f, "logits.%d", s);
                    if (!want) continue;
                    const double d = fabs(out.data[out.offsets[s]] - iv_f32(want)[0]);
                    worst = d > worst ? d : worst;
                    CHECK_MSG(d <= MAX_ABS, "sequence %d score %.7f, transformers %.7f", s, out.data[out.offsets[s]],
                              iv_f32(want)[0]);
                }
                iv_outputs_free(&out);
            }
            if (iv_engine_run(e, IV_TASK_EMBED_ALL, in, f.n_seqs, &out, &err) == 0) {
                for (int s = 0; s < f.n_seqs; s++) {
                    const iv_tensor *want = expected(&f, "hidden.%d", s);
                    if (want && out.rows[s] == f.lens[s])
                        compare(&f, "reranker hidden", out.data + out.offsets[s], want->shape[1], NULL, want);
                }
                iv_outputs_free(&out);
            }
            printf("    mistral3_rerank_vision: %d scores (%d with images), worst |score diff| %.2e; hidden worst "
                   "max abs %.2e, min cosine %.8f\n",
                   f.n_seqs, 2, worst, f.worst_abs, f.worst_cos);
            iv_engine_free(e);
        }
    }
    pfix_free(&f);
}

/* Checkpoint variants not implemented, or incomplete towers, are refused
 * at load with the field named. */
static cJSON *vcfg(cJSON *c) { return cJSON_GetObjectItemCaseSensitive(c, "vision_config"); }
static void px_feature_layer(cJSON *c) { ckpt_set(c, "vision_feature_layer", cJSON_CreateNumber(-2)); }
static void px_feature_layers(cJSON *c) { ckpt_set(c, "vision_feature_layer", cJSON_Parse("[-1, -2]")); }
static void px_rope_type(cJSON *c)
{
    ckpt_set(vcfg(c), "rope_parameters", cJSON_Parse("{\"rope_type\": \"default\", \"rope_theta\": 10000.0}"));
}
static void px_act(cJSON *c) { ckpt_set(vcfg(c), "hidden_act", cJSON_CreateString("quick_gelu")); }
static void px_head_dim(cJSON *c) { ckpt_set(vcfg(c), "head_dim", cJSON_CreateNumber(16)); }
static void px_type(cJSON *c) { ckpt_set(vcfg(c), "model_type", cJSON_CreateString("siglip_vision_model")); }
static void px_shallower(cJSON *c) { ckpt_set(vcfg(c), "num_hidden_layers", cJSON_CreateNumber(1)); }
static void px_deeper(cJSON *c) { ckpt_set(vcfg(c), "num_hidden_layers", cJSON_CreateNumber(3)); }
static void px_bias(cJSON *c) { ckpt_set(c, "multimodal_projector_bias", cJSON_CreateTrue()); }
static void px_proj_act(cJSON *c) { ckpt_set(c, "projector_hidden_act", cJSON_CreateString("quick_gelu")); }
static void px_merge(cJSON *c) { ckpt_set(c, "spatial_merge_size", cJSON_CreateNumber(3)); }
static void px_no_vision_config(cJSON *c) { cJSON_DeleteItemFromObjectCaseSensitive(c, "vision_config"); }
static void px_image_token(cJSON *c) { ckpt_set(c, "image_token_index", cJSON_CreateNumber(100000)); }

TEST(mistral3_rejects_bad_vision_towers)
{
    const char *fx = "mistral3_pixtral";
    CKPT_REJECT(fx, px_feature_layer, "vision_feature_layer", IV_E_UNSUPPORTED);
    CKPT_REJECT(fx, px_feature_layers, "vision_feature_layer", IV_E_UNSUPPORTED);
    CKPT_REJECT(fx, px_rope_type, "rope_type", IV_E_UNSUPPORTED);
    CKPT_REJECT(fx, px_act, "hidden_act", IV_E_UNSUPPORTED);
    CKPT_REJECT(fx, px_head_dim, "head_dim", IV_E_UNSUPPORTED);
    CKPT_REJECT(fx, px_type, "model_type", IV_E_UNSUPPORTED);
    CKPT_REJECT(fx, px_shallower, "more vision layers", IV_E_FORMAT);
    CKPT_REJECT(fx, px_deeper, "layers.2", IV_E_NOTFOUND);
    CKPT_REJECT(fx, px_bias, "multimodal_projector_bias", IV_E_FORMAT);
    CKPT_REJECT(fx, px_proj_act, "projector_hidden_act", IV_E_UNSUPPORTED);
    CKPT_REJECT(fx, px_merge, "merging_layer", IV_E_FORMAT);
    CKPT_REJECT(fx, px_no_vision_config, "vision_config", IV_E_FORMAT);
    CKPT_REJECT(fx, px_image_token, "image_token_index", IV_E_FORMAT);
    /* A tower missing one tensor, a projector missing its merger, a bias Pixtral does not have. */
    static const char *const drops[][2] = {{"vision_tower.transformer.layers.1.feed_forward.up_proj.weight", NULL},
                                           {"multi_modal_projector.patch_merger.merging_layer.weight", NULL}};
    for (int i = 0; i < 2; i++) {
        char dir[4096];
        if (ckpt_make(dir, sizeof dir, fx, NULL, 0) == 0) {
            if (ckpt_write_weights(dir, fx, drops[i], NULL, NULL, 0) == 0)
                CKPT_LOAD_ERROR(dir, "vision tensor dropped", drops[i][0], IV_E_NOTFOUND);
            tmp_rmtree(dir);
        }
    }
    char dir[4096];
    const long long shape[1] = {32};
    if (ckpt_make(dir, sizeof dir, fx, NULL, 0) == 0) {
        if (ckpt_write_weights(dir, fx, NULL, "vision_tower.transformer.layers.0.attention.q_proj.bias", shape, 1) == 0)
            CKPT_LOAD_ERROR(dir, "vision bias added", "no bias", IV_E_UNSUPPORTED);
        tmp_rmtree(dir);
    }
}

/* End to end: real pictures decoded, preprocessed with the checkpoint's
 * processor files, each one's placeholder expanded to its [IMG] /
 * [IMG_BREAK] / [IMG_END] run (iv_pixtral_image_token_run), all packed
 * through iv_engine_run; transformers ran the same pictures through PIL,
 * PixtralImageProcessorPil and Mistral3Model. */
#define N_REAL 4
TEST(pixtral_engine_real_pictures)
{
    char dir[4096], path[4400];
    fixture_dir("mistral3_pixtral", dir, sizeof dir);
    pfix f;
    if (pfix_load(&f, "mistral3_pixtral", 0)) {
        pfix_free(&f);
        return;
    }
    iv_err err = {0};
    iv_pixtral_config cfg;
    iv_engine *e = NULL;
    const cJSON *real = cJSON_GetObjectItem(f.json, "real");
    if (iv_pixtral_config_load(&cfg, dir, &err) || iv_engine_load(&e, dir, NULL, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
        pfix_free(&f);
        return;
    }
    CHECK_EQ_INT(cJSON_GetArraySize(real), N_REAL);
    iv_pixtral_pixels px[N_REAL];
    float *patches[N_REAL] = {0};
    int32_t *ids[N_REAL] = {0};
    iv_image_input imgs[N_REAL];
    iv_seq_input in[N_REAL + 1];
    memset(px, 0, sizeof px);
    memset(in, 0, sizeof in);
    int n = 0;
    for (const cJSON *c = real ? real->child : NULL; c && n < N_REAL; c = c->next, n++) {
        snprintf(path, sizeof path, "%s/images/%s", iv_test_fixtures_dir(), cJSON_GetObjectItem(c, "file")->valuestring);
        char *data;
        size_t len;
        iv_image img;
        if (iv_file_read_all(path, 1 << 24, &data, &len, &err) ||
            iv_image_decode((const uint8_t *)data, len, NULL, &img, &err)) {
            iv_test_fail(__FILE__, __LINE__, "%s: %s", path, err.msg);
            break;
        }
        free(data);
        const int rc = iv_pixtral_preprocess(&cfg, &img, &px[n], &err);
        iv_image_free(&img);
        if (rc) {
            iv_test_fail(__FILE__, __LINE__, "%s: %s", path, err.msg);
            break;
        }
        const cJSON *size = cJSON_GetObjectItem(c, "image_size");
        CHECK_EQ_INT(px[n].height, cJSON_GetArrayItem(size, 0)->valueint);
        CHECK_EQ_INT(px[n].width, cJSON_GetArrayItem(size, 1)->valueint);
        patches[n] = malloc((size_t)px[n].grid_h * px[n].grid_w * 3 * cfg.patch_size * cfg.patch_size * sizeof(float));
        iv_pixtral_patchify(&cfg, &px[n], patches[n]);
        const cJSON *before = cJSON_GetObjectItem(c, "before"), *after = cJSON_GetObjectItem(c, "after");
        const int nb = cJSON_GetArraySize(before), na = cJSON_GetArraySize(after);
        const int64_t run = (int64_t)px[n].rows * (px[n].cols + 1);
        ids[n] = malloc((size_t)(nb + run + na) * sizeof(int32_t));
        for (int t = 0; t < nb; t++) ids[n][t] = cJSON_GetArrayItem(before, t)->valueint;
        CHECK_EQ_INT(iv_pixtral_image_token_run(px[n].rows, px[n].cols, f.m->image_token_id, 151, 152, ids[n] + nb),
                     run);
        for (int t = 0; t < na; t++) ids[n][nb + run + t] = cJSON_GetArrayItem(after, t)->valueint;
        imgs[n] = (iv_image_input){.pixel_values = patches[n], .grid_t = 1, .grid_h = px[n].grid_h,
                                   .grid_w = px[n].grid_w, .token_offset = nb};
        in[n] = (iv_seq_input){.ids = ids[n], .len = (int)(nb + run + na), .images = &imgs[n], .n_images = 1};
    }
    /* A text-only sequence packed with them. */
    in[n] = (iv_seq_input){.ids = f.ids[1], .len = f.lens[1]};
    iv_outputs out;
    if (n == N_REAL && iv_engine_run(e, IV_TASK_EMBED_ALL, in, n + 1, &out, &err) == 0) {
        for (int k = 0; k <= n; k++) {
            const iv_tensor *want = k < n ? expected(&f, "real.%d", k) : expected(&f, "hidden.%d", 1);
            if (want && out.rows[k] == want->shape[0])
                compare(&f, k < n ? "real picture hidden" : "text-only hidden", out.data + out.offsets[k],
                        want->shape[1], NULL, want);
            else
                iv_test_fail(__FILE__, __LINE__, "sequence %d: %d rows", k, out.rows[k]);
        }
        iv_outputs_free(&out);
        printf("    %d real pictures + 1 text-only packed: worst max abs %.2e, min cosine %.8f\n", n, f.worst_abs,
               f.worst_cos);
    } else if (n == N_REAL) {
        iv_test_fail(__FILE__, __LINE__, "engine run: %s", err.msg);
    }
    for (int k = 0; k < N_REAL; k++) {
        iv_pixtral_pixels_free(&px[k]);
        free(patches[k]);
        free(ids[k]);
    }
    iv_engine_free(e);
    pfix_free(&f);
}

/* The request path (engine/image_inputs.c) on the same pictures: each
 * picture as base64 through the checkpoint's image processor, its single
 * [IMG] placeholder expanded by the model's hook (image_token_run, with
 * [IMG_BREAK] / [IMG_END] looked up in the tokenizer), then the engine:
 * the same hidden states as transformers. The fixture has no tokenizer, so
 * the checkpoint is copied beside a word-level one holding the three image
 * tokens at the ids the fixture uses. */
static int write_image_tokenizer(const char *dir, int img_id)
{
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_puts(&b, "{\"version\":\"1.0\",\"added_tokens\":[],\"normalizer\":null,\"pre_tokenizer\":{\"type\":"
                   "\"WhitespaceSplit\"},\"post_processor\":null,\"decoder\":null,\"model\":{\"type\":\"WordLevel\","
                   "\"unk_token\":\"t0\",\"vocab\":{");
    for (int i = 0; i < 160; i++) {
        const char *name = i == img_id ? "[IMG]" : i == img_id + 1 ? "[IMG_BREAK]" : i == img_id + 2 ? "[IMG_END]" : NULL;
        if (name) iv_sb_printf(&b, "%s\"%s\":%d", i ? "," : "", name, i);
        else iv_sb_printf(&b, "%s\"t%d\":%d", i ? "," : "", i, i);
    }
    iv_sb_puts(&b, "}}}");
    const int rc = ckpt_write(dir, "tokenizer.json", b.data, b.len);
    iv_sb_free(&b);
    return rc;
}

TEST(pixtral_request_path_real_pictures)
{
    pfix f;
    if (pfix_load(&f, "mistral3_pixtral", 0)) {
        pfix_free(&f);
        return;
    }
    const int img_id = f.m->image_token_id; /* 150; the run's markers are 151 and 152 */
    char dir[256];
    iv_engine *e = NULL;
    iv_err err = {0};
    if (ckpt_make(dir, sizeof dir, "mistral3_pixtral", NULL, 1) || ckpt_link(dir, "mistral3_pixtral", "preprocessor_config.json") ||
        ckpt_link(dir, "mistral3_pixtral", "processor_config.json") || write_image_tokenizer(dir, img_id) ||
        iv_engine_load(&e, dir, NULL, &err)) {
        iv_test_fail(__FILE__, __LINE__, "checkpoint with a tokenizer: %s", err.msg);
        pfix_free(&f);
        tmp_rmtree(dir);
        return;
    }
    const iv_image_proc *proc = iv_engine_image_proc(e);
    REQUIRE(proc && proc->model && proc->pixtral && !proc->refused[0]);
    const cJSON *real = cJSON_GetObjectItem(f.json, "real");
    iv_image_set sets[N_REAL];
    int32_t *ids[N_REAL] = {0};
    iv_seq_input in[N_REAL];
    memset(sets, 0, sizeof sets);
    memset(in, 0, sizeof in);
    int n = 0;
    for (const cJSON *c = real ? real->child : NULL; c && n < N_REAL; c = c->next, n++) {
        char path[4400], *data;
        size_t len;
        snprintf(path, sizeof path, "%s/images/%s", iv_test_fixtures_dir(), cJSON_GetObjectItem(c, "file")->valuestring);
        if (iv_file_read_all(path, 1 << 24, &data, &len, &err)) break;
        iv_strbuf b64;
        iv_sb_init(&b64);
        iv_codec_base64(&b64, (const unsigned char *)data, len);
        free(data);
        const int rc = iv_image_set_add(proc, &sets[n], b64.data, b64.len, &err);
        iv_sb_free(&b64);
        if (rc) break;
        const cJSON *before = cJSON_GetObjectItem(c, "before"), *after = cJSON_GetObjectItem(c, "after");
        const int nb = cJSON_GetArraySize(before), na = cJSON_GetArraySize(after);
        int32_t rendered[256];
        REQUIRE(nb + 1 + na <= 256);
        for (int t = 0; t < nb; t++) rendered[t] = cJSON_GetArrayItem(before, t)->valueint;
        rendered[nb] = img_id;
        for (int t = 0; t < na; t++) rendered[nb + 1 + t] = cJSON_GetArrayItem(after, t)->valueint;
        int out_len = 0;
        if (iv_image_expand(proc, &sets[n], rendered, nb + 1 + na, &ids[n], &out_len, &err)) break;
        /* The run: rows of [IMG], [IMG_BREAK] between rows, [IMG_END] last. */
        const int64_t run = sets[n].run_len[0];
        CHECK_EQ_INT((int)sets[n].in[0].token_offset, nb);
        CHECK_EQ_INT(ids[n][nb + run - 1], img_id + 2);
        CHECK_EQ_INT(ids[n][nb + sets[n].in[0].grid_w / 2], run > sets[n].in[0].grid_w / 2 + 1 ? img_id + 1 : img_id + 2);
        in[n] = (iv_seq_input){.ids = ids[n], .len = out_len, .images = sets[n].in, .n_images = 1};
    }
    if (n < N_REAL) iv_test_fail(__FILE__, __LINE__, "picture %d: %s", n, err.msg);
    iv_outputs out;
    if (n == N_REAL && iv_engine_run(e, IV_TASK_EMBED_ALL, in, n, &out, &err) == 0) {
        for (int k = 0; k < n; k++) {
            const iv_tensor *want = expected(&f, "real.%d", k);
            if (want && out.rows[k] == want->shape[0])
                compare(&f, "request-path hidden", out.data + out.offsets[k], want->shape[1], NULL, want);
            else
                iv_test_fail(__FILE__, __LINE__, "sequence %d: %d rows", k, out.rows[k]);
        }
        iv_outputs_free(&out);
        printf("    %d real pictures through the request path: worst max abs %.2e, min cosine %.8f\n", n,
               f.worst_abs, f.worst_cos);
    } else if (n == N_REAL) {
        iv_test_fail(__FILE__, __LINE__, "engine run: %s", err.msg);
    }
    for (int k = 0; k < N_REAL; k++) {
        iv_image_set_free(&sets[k]);
        free(ids[k]);
    }
    iv_engine_free(e);
    pfix_free(&f);
    tmp_rmtree(dir);
}
