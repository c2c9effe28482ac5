/* Gemma4 text (tools/fixtures/synthetic_gemma4.py; Gemma4 unified's text
 * model: tools/fixtures/synthetic_gemma4_unified.py) against transformers:
 * each fixture's inputs alone and as one packed batch in two orders
 * (lengths 3, 17, 2, 60, 9), hidden states and, where the fixture has a
 * sentence-transformers pipeline, pooled embeddings; the worst figures are
 * printed. A sequence's outputs must also be the same bits alone and
 * packed (KV-sharing slots, routed experts and the per-layer inputs all
 * work per row or per sequence). FP32 tolerances as every fixture's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "golden_util.h"
#include "models/vision_qwen3vl.h"
#include "test.h"

#define MIN_COS 0.99999
#define MAX_ABS 1e-4

typedef struct figures {
    double max_abs, min_cos;
} figures;

static void account(figures *f, const float *got, const float *want, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++) {
        const double c = iv_test_cosine(got + r * cols, want + r * cols, cols);
        const double d = iv_test_max_abs_diff(got + r * cols, want + r * cols, cols);
        if (c < f->min_cos) f->min_cos = c;
        if (d > f->max_abs) f->max_abs = d;
    }
}

/* Runs inputs order[0..n) as one batch of task; returns 0 with out filled. */
static int run(iv_engine *e, golden_case *g, iv_task task, const int *order, int n, iv_outputs *out,
               const char *fixture)
{
    iv_seq_input *seqs = calloc((size_t)n, sizeof *seqs);
    for (int j = 0; j < n; j++)
        seqs[j] = (iv_seq_input){.ids = g->ids[order[j]], .type_ids = g->types[order[j]], .len = g->lens[order[j]]};
    iv_err err = {0};
    const int rc = iv_engine_run(e, task, seqs, n, out, &err);
    if (rc) iv_test_fail(__FILE__, __LINE__, "%s: %s", fixture, err.msg);
    free(seqs);
    return rc;
}

/* Compares output `name` of a batch with the expectations; pooled vectors are
 * finished (normalised) as the fixture's sentence-transformers pipeline says. */
static void compare(iv_engine *e, golden_case *g, iv_outputs *out, const char *name, iv_task task, const int *order,
                    int n, figures *f, const char *what, const char *fixture)
{
    const int normalize = iv_engine_st_meta(e)->normalize;
    for (int j = 0; j < n; j++) {
        const iv_tensor *want = golden_expected(g, name, order[j]);
        float *got = out->data + out->offsets[j];
        int64_t cols = out->cols;
        if (task == IV_TASK_EMBED) cols = iv_embedding_finish(got, out->cols, 0, normalize);
        if (!want || iv_tensor_numel(want) != out->rows[j] * cols) {
            iv_test_fail(__FILE__, __LINE__, "%s %s: %s.%d has the wrong size", fixture, what, name, order[j]);
            continue;
        }
        char label[200];
        snprintf(label, sizeof label, "%s %s %s.%d (%d tokens)", fixture, what, name, order[j], g->lens[order[j]]);
        golden_compare(label, got, want->data, out->rows[j], cols, MIN_COS, MAX_ABS);
        account(f, got, want->data, out->rows[j], cols);
    }
}

static void check_task(iv_engine *e, golden_case *g, const char *name, iv_task task, const char *fixture)
{
    int *fwd = malloc((size_t)g->n * sizeof *fwd), *rev = malloc((size_t)g->n * sizeof *rev);
    for (int i = 0; i < g->n; i++) {
        fwd[i] = i;
        rev[i] = g->n - 1 - i;
    }
    figures alone = {0, 1}, packed = {0, 1};
    iv_outputs single[64], all, back;
    const int n = g->n < 64 ? g->n : 64;
    int have = 0;
    for (; have < n; have++) {
        if (run(e, g, task, &have, 1, &single[have], fixture)) break;
        compare(e, g, &single[have], name, task, &have, 1, &alone, "alone", fixture);
    }
    if (have < n) goto done;
    if (!run(e, g, task, fwd, n, &all, fixture)) {
        compare(e, g, &all, name, task, fwd, n, &packed, "packed", fixture);
        for (int i = 0; i < n; i++) {
            const int64_t cnt = single[i].rows[0] * single[i].cols;
            CHECK_MSG(all.rows[i] == single[i].rows[0] &&
                          !memcmp(all.data + all.offsets[i], single[i].data + single[i].offsets[0],
                                  (size_t)cnt * sizeof(float)),
                      "%s %s.%d: packed and alone differ", fixture, name, i);
        }
        iv_outputs_free(&all);
    }
    if (!run(e, g, task, rev, n, &back, fixture)) {
        compare(e, g, &back, name, task, rev, n, &packed, "packed reversed", fixture);
        iv_outputs_free(&back);
    }
    printf("    %-16s %-6s alone: max abs %.2e, 1 - min cos %.1e; packed (%d seqs): max abs %.2e, 1 - min cos %.1e\n",
           fixture, name, alone.max_abs, 1 - alone.min_cos, n, packed.max_abs, 1 - packed.min_cos);
done:
    for (int i = 0; i < have; i++) iv_outputs_free(&single[i]);
    free(fwd);
    free(rev);
}

TEST(golden_gemma4_packed_batches)
{
    static const char *const names[] = {"gemma4_text", "gemma4_kv_shared", "gemma4_moe", "gemma4_cond",
                                        "embedding_gemma2", "embedding_gemma2_mm", "g4u_text", "g4u_all_kv"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/models/%s", iv_test_fixtures_dir(), names[k]);
        golden_case g;
        if (golden_load(&g, dir)) {
            iv_test_fail(__FILE__, __LINE__, "%s: fixture missing", names[k]);
            continue;
        }
        iv_engine *e;
        iv_err err = {0};
        if (iv_engine_load(&e, dir, NULL, &err)) {
            iv_test_fail(__FILE__, __LINE__, "%s: load failed: %s", names[k], err.msg);
            golden_free(&g);
            continue;
        }
        check_task(e, &g, "hidden", IV_TASK_EMBED_ALL, names[k]);
        if (golden_has_output(&g, "pooled")) check_task(e, &g, "pooled", IV_TASK_EMBED, names[k]);
        iv_engine_free(e);
        golden_free(&g);
    }
}

/* A gemma4_text checkpoint has no tower: a sequence that brings an image
 * is refused with a clear error instead of running without it. On
 * gemma4_cond (a tower, "vision" bidirectionality) an image whose run does
 * not lie on image tokens is refused naming the input (the tower and the
 * mixed forward against transformers: test_gemma4_vision.c). */
TEST(gemma4_refuses_images)
{
    char dir[4096];
    static const float pixels[4 * 48] = {0};
    /* 2 x 2 patches pooled 2 x 2: one soft token, <boi> 295 <image> 297 <eoi> 296. */
    const iv_image_input img = {.pixel_values = pixels, .grid_t = 1, .grid_h = 2, .grid_w = 2, .token_offset = 1};
    const int32_t ids[] = {0, 295, 297, 296, 2};
    const iv_seq_input seq = {.ids = ids, .len = 5, .images = &img, .n_images = 1};
    iv_outputs out;
    iv_engine *e;
    iv_err err = {0};
    snprintf(dir, sizeof dir, "%s/models/gemma4_text", iv_test_fixtures_dir());
    REQUIRE(iv_engine_load(&e, dir, NULL, &err) == 0);
    CHECK(iv_engine_run(e, IV_TASK_EMBED_ALL, &seq, 1, &out, &err) != 0);
    CHECK_MSG(err.code == IV_E_UNSUPPORTED && strstr(err.msg, "no vision tower"), "got %d: %s", err.code, err.msg);
    iv_engine_free(e);
    snprintf(dir, sizeof dir, "%s/models/gemma4_cond", iv_test_fixtures_dir());
    REQUIRE(iv_engine_load(&e, dir, NULL, &err) == 0);
    CHECK(iv_engine_run(e, IV_TASK_EMBED_ALL, &seq, 1, &out, &err) != 0); /* offset 1 is <boi> */
    CHECK_MSG(err.code == IV_E_INVALID && strstr(err.msg, "not the image token"), "got %d: %s", err.code, err.msg);
    iv_engine_free(e);
}
