/* The last layer computing only the rows the head reads (engine/head_rows.h,
 * iv_model_forward_head_rows): for every tiny fixture whose pooled or
 * classifier output reads one token per sequence, the output with that path
 * equals the full pass's (the same engine settings with no_head_rows), on
 * the CPU in FP32 (cosine >= 0.99999, max abs <= 1e-5), on the emulated
 * device and on CUDA where there is a GPU (the 16-bit floor of
 * test_device_fixtures.c); and tasks whose output
 * reads more rows (mean pooling, per-token outputs, SPLADE, multi-vector,
 * activation taps) never take it. The comparison with transformers' outputs
 * is test_model_fixtures.c's and test_device_fixtures.c's, which run with the
 * path on (the default). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "engine/engine.h"
#include "engine/head_rows.h"
#include "golden_util.h"
#include "models/taps.h"
#include "test.h"

typedef struct head_rows_device {
    const char *device, *dtype;
    double min_cos, max_abs;
} head_rows_device;

static const head_rows_device CPU = {"cpu", NULL, 0.99999, 1e-5};
static const head_rows_device EMU = {"emulated", "bfloat16", 0.999, 2e-2};
/* Untried on a GPU when written: the 16-bit cosine floor only, figures printed. */
static const head_rows_device CUDA = {"cuda", "bfloat16", 0.999, 1e30};

static int run(iv_engine *e, const golden_case *g, iv_task task, iv_outputs *out)
{
    iv_seq_input *seqs = calloc((size_t)g->n, sizeof *seqs);
    for (int i = 0; i < g->n; i++)
        seqs[i] = (iv_seq_input){.ids = g->ids[i], .type_ids = g->types[i], .len = g->lens[i],
                                 .prompt_len = g->prompt_lens[i], .key_mask = g->key_masks[i]};
    iv_err err = {0};
    const int rc = iv_engine_run(e, task, seqs, g->n, out, &err);
    if (rc) iv_test_fail(__FILE__, __LINE__, "run failed: %s", err.msg);
    free(seqs);
    return rc;
}

static iv_engine *load(const head_rows_device *d, const char *dir, int no_head_rows)
{
    /* No folding: a batch that folds keeps every row, so the comparison
     * would not reach the path. */
    const iv_engine_opts opts = {.device = d->device, .dtype = d->dtype, .no_prefix_fold = 1,
                                 .no_head_rows = no_head_rows};
    iv_engine *e;
    iv_err err = {0};
    if (iv_engine_load(&e, dir, &opts, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s on %s: load failed: %s", dir, d->device, err.msg);
        return NULL;
    }
    return e;
}

typedef struct worst {
    double cos, abs;
    char cos_at[128], abs_at[128];
    int compared, took_path;
} worst;

/* One task's outputs, both ways; 1 when the default engine took the path. */
static void compare_task(const head_rows_device *d, const char *name, iv_engine *on, iv_engine *off,
                         const golden_case *g, iv_task task, worst *w)
{
    const uint64_t before = iv_engine_head_rows_batches(on);
    iv_outputs a, b;
    if (run(on, g, task, &a)) return;
    if (run(off, g, task, &b)) {
        iv_outputs_free(&a);
        return;
    }
    const int took = iv_engine_head_rows_batches(on) > before;
    CHECK_MSG(iv_engine_head_rows_batches(off) == 0, "%s: the engine with no_head_rows took the path", name);
    w->took_path += took;
    for (int i = 0; i < g->n && a.cols == b.cols; i++) {
        const int64_t n = (int64_t)a.rows[i] * a.cols;
        const float *x = a.data + a.offsets[i], *y = b.data + b.offsets[i];
        const double c = iv_test_cosine(x, y, n), m = iv_test_max_abs_diff(x, y, n);
        CHECK_MSG(c >= d->min_cos && m <= d->max_abs, "%s on %s task %d input %d: cosine %.8f, max abs %.2e", name,
                  d->device, (int)task, i, c, m);
        if (took && c < w->cos) w->cos = c, snprintf(w->cos_at, sizeof w->cos_at, "%s input %d", name, i);
        if (took && m > w->abs) w->abs = m, snprintf(w->abs_at, sizeof w->abs_at, "%s input %d", name, i);
    }
    CHECK_MSG(a.cols == b.cols, "%s: %d columns with the path, %d without", name, a.cols, b.cols);
    w->compared++;
    iv_outputs_free(&a);
    iv_outputs_free(&b);
}

static void compare_all(const head_rows_device *d)
{
    char root[4096];
    iv_path_join(root, sizeof root, iv_test_fixtures_dir(), "models");
    char *names[256];
    const int n = golden_fixture_names(names, 256);
    worst w = {.cos = 2, .abs = -1}; /* the first output compared sets both */
    for (int i = 0; i < n; i++) {
        char dir[4096 + 300];
        snprintf(dir, sizeof dir, "%s/%s", root, names[i]);
        golden_case g;
        if (golden_load(&g, dir)) {
            free(names[i]);
            continue;
        }
        const int pooled = golden_has_output(&g, "pooled"), logits = golden_has_output(&g, "logits");
        iv_engine *on = pooled || logits ? load(d, dir, 0) : NULL;
        iv_engine *off = on ? load(d, dir, 1) : NULL;
        if (on && off) {
            const int took = w.took_path;
            if (pooled) compare_task(d, names[i], on, off, &g, IV_TASK_EMBED, &w);
            if (logits) compare_task(d, names[i], on, off, &g, IV_TASK_CLASSIFY, &w);
            const char *why = iv_engine_no_head_rows_reason(on);
            printf("    %-28s %s%s\n", names[i], w.took_path > took ? "head rows only" : "every row: ",
                   w.took_path > took ? "" : why ? why : "the head reads more than one row");
        }
        if (on) iv_engine_free(on);
        if (off) iv_engine_free(off);
        golden_free(&g);
        free(names[i]);
    }
    printf("    %s: %d outputs compared, %d took the path; over those, worst cosine %.9f (%s), worst max abs %.3e (%s)\n",
           d->device, w.compared, w.took_path, w.cos, w.cos_at, w.abs, w.abs_at);
    CHECK_MSG(w.took_path >= 20, "only %d outputs took the path", w.took_path);
}

TEST(head_rows_match_full_pass_cpu) { compare_all(&CPU); }
TEST(head_rows_match_full_pass_emulated) { compare_all(&EMU); }
TEST(head_rows_match_full_pass_cuda)
{
    if (golden_cuda_present()) compare_all(&CUDA);
}

/* Counts "final" taps and their rows. */
typedef struct tap_count {
    int finals;
    int64_t rows;
} tap_count;

static void count_final(void *ctx, const iv_ops *ops, const char *name, int layer, iv_view v)
{
    (void)ops;
    (void)layer;
    tap_count *c = ctx;
    if (!strcmp(name, "final")) c->finals++, c->rows = v.rows;
}

/* Runs task on fixture `name` and returns how many batches took the path. */
static int took_path(const char *name, iv_task task)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/models/%s", iv_test_fixtures_dir(), name);
    golden_case g;
    if (golden_load(&g, dir)) {
        iv_test_fail(__FILE__, __LINE__, "%s: no fixture", name);
        return -1;
    }
    iv_engine *e = load(&CPU, dir, 0);
    int took = -1;
    iv_outputs out;
    if (e && !run(e, &g, task, &out)) {
        took = (int)iv_engine_head_rows_batches(e);
        iv_outputs_free(&out);
    }
    if (e) iv_engine_free(e);
    golden_free(&g);
    return took;
}

TEST(head_rows_only_where_one_row_is_read)
{
    /* Positive controls: CLS and last-token pooling, first- and last-token classifiers. */
    CHECK_EQ_INT(took_path("bert_cls_dense", IV_TASK_EMBED), 1);
    CHECK_EQ_INT(took_path("qwen3", IV_TASK_EMBED), 1);
    CHECK_EQ_INT(took_path("bert_seqcls1", IV_TASK_CLASSIFY), 1);
    CHECK_EQ_INT(took_path("qwen3_seqcls", IV_TASK_CLASSIFY), 1);
    /* Outputs that read more than one row per sequence. */
    CHECK_EQ_INT(took_path("bert", IV_TASK_EMBED), 0);         /* mean pooling */
    CHECK_EQ_INT(took_path("bert_cls_mean", IV_TASK_EMBED), 0); /* cls + mean */
    CHECK_EQ_INT(took_path("bert_cls_dense", IV_TASK_EMBED_ALL), 0);
    CHECK_EQ_INT(took_path("bert_tokcls", IV_TASK_TOKEN_CLASSIFY), 0);
    CHECK_EQ_INT(took_path("bert_splade", IV_TASK_SPARSE), 0);
    CHECK_EQ_INT(took_path("colbert_bert", IV_TASK_MULTIVECTOR), 0);
    /* Activation taps describe every row: a CLS model with a tap set keeps them. */
    tap_count c = {0};
    iv_taps_set(count_final, &c);
    const int took = took_path("bert_cls_dense", IV_TASK_EMBED);
    iv_taps_set(NULL, NULL);
    CHECK_EQ_INT(took, 0);
    CHECK_EQ_INT(c.finals, 1);
    CHECK_MSG(c.rows > 3, "the final tap saw %lld rows", (long long)c.rows);
}

/* The rows picked are the rows the pool op and the classifiers read:
 * include_prompt=false skips (a skip leaving nothing counts as 0), the last
 * row, the last non-pad row; and nothing for what reads more. */
TEST(head_rows_pick_rules)
{
    const int32_t ids[] = {5, 6, 7, 0, 0, 8, 9, 3};
    const int32_t cu[] = {0, 5, 7, 8};
    const iv_batch b = {.n_seqs = 3, .n_tokens = 8, .ids = ids, .cu_seqlens = cu};
    const int skip[] = {2, 2, 1};
    iv_arena a;
    iv_arena_init(&a);
    const iv_pool_mode cls = IV_POOL_CLS, last = IV_POOL_LAST, mean = IV_POOL_MEAN, two[] = {IV_POOL_CLS, IV_POOL_LAST};
    const int32_t *r = iv_head_rows_pick(&(iv_head_reads){.task = IV_TASK_EMBED, .pool_modes = &cls, .n_pool_modes = 1},
                                         &b, skip, &a);
    REQUIRE(r != NULL);
    CHECK_EQ_INT(r[0], 2);
    CHECK_EQ_INT(r[1], 5); /* skip 2 of 2 rows: counts as 0 */
    CHECK_EQ_INT(r[2], 7);
    r = iv_head_rows_pick(&(iv_head_reads){.task = IV_TASK_EMBED, .pool_modes = &last, .n_pool_modes = 1}, &b, skip, &a);
    REQUIRE(r != NULL);
    CHECK(r[0] == 4 && r[1] == 6 && r[2] == 7);
    r = iv_head_rows_pick(&(iv_head_reads){.task = IV_TASK_CLASSIFY, .seq_pool = IV_SEQ_POOL_FIRST}, &b, skip, &a);
    REQUIRE(r != NULL);
    CHECK(r[0] == 0 && r[1] == 5 && r[2] == 7); /* classifiers read the first token whatever the prompt */
    r = iv_head_rows_pick(&(iv_head_reads){.task = IV_TASK_CLASSIFY, .seq_pool = IV_SEQ_POOL_LAST_NON_PAD, .pad_id = 0},
                          &b, NULL, &a);
    REQUIRE(r != NULL);
    CHECK(r[0] == 2 && r[1] == 6 && r[2] == 7);
    CHECK(!iv_head_rows_pick(&(iv_head_reads){.task = IV_TASK_EMBED, .pool_modes = &mean, .n_pool_modes = 1}, &b,
                             NULL, &a));
    CHECK(!iv_head_rows_pick(&(iv_head_reads){.task = IV_TASK_EMBED, .pool_modes = two, .n_pool_modes = 2}, &b, NULL,
                             &a));
    CHECK(!iv_head_rows_pick(&(iv_head_reads){.task = IV_TASK_CLASSIFY, .seq_pool = IV_SEQ_POOL_MEAN}, &b, NULL, &a));
    CHECK(!iv_head_rows_pick(&(iv_head_reads){.task = IV_TASK_EMBED_ALL}, &b, NULL, &a));
    iv_arena_free(&a);
}
