/* Every tiny checkpoint under tests/fixtures/models/ run through the engine
 * and compared with what transformers / sentence-transformers (and, for
 * multi-vector models, colbert-ai / PyLate) produced (tools/gen_fixtures.py).
 * All inputs of a fixture run as ONE packed batch while the references were
 * computed one sequence at a time, so these also prove sequence isolation.
 * Inputs run with their cases.json key_mask; multi-vector outputs run a
 * second time without it, so the engine must derive the same mask from the
 * ids. FP32 tolerances: cosine >= 0.99999 per vector and max abs error <= 1e-4. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "engine/engine.h"
#include "golden_util.h"
#include "ops/cpu/gemm_panel.h"
#include "test.h"

#define MIN_COS 0.99999
#define MAX_ABS 1e-4

static int run_task(iv_engine *e, golden_case *g, iv_task task, int with_key_masks, iv_outputs *out)
{
    iv_seq_input *seqs = calloc((size_t)g->n, sizeof *seqs);
    for (int i = 0; i < g->n; i++)
        seqs[i] = (iv_seq_input){.ids = g->ids[i], .type_ids = g->types[i], .len = g->lens[i],
                                 .prompt_len = g->prompt_lens[i], .key_mask = with_key_masks ? g->key_masks[i] : NULL};
    iv_err err = {0};
    int rc = iv_engine_run(e, task, seqs, g->n, out, &err);
    if (rc) iv_test_fail(__FILE__, __LINE__, "run failed: %s", err.msg);
    free(seqs);
    return rc;
}

/* Compares output `name` (rows per input as the engine returns them). */
static void check_output_masks(const char *fixture, iv_engine *e, golden_case *g, const char *name, iv_task task,
                               int dimensions, int normalize, int with_key_masks)
{
    iv_outputs out;
    if (run_task(e, g, task, with_key_masks, &out)) return;
    for (int i = 0; i < g->n; i++) {
        const iv_tensor *want = golden_expected(g, name, i);
        if (!want) {
            iv_test_fail(__FILE__, __LINE__, "%s: expected %s.%d missing", fixture, name, i);
            continue;
        }
        float *got = out.data + out.offsets[i];
        int64_t rows = out.rows[i], cols = out.cols;
        if (task == IV_TASK_EMBED) cols = iv_embedding_finish(got, out.cols, dimensions, normalize);
        char what[256];
        snprintf(what, sizeof what, "%s %s.%d%s", fixture, name, i, with_key_masks ? "" : " (derived key mask)");
        if (iv_tensor_numel(want) != rows * cols) {
            iv_test_fail(__FILE__, __LINE__, "%s: %lld values, expected %lld", what, (long long)(rows * cols),
                         (long long)iv_tensor_numel(want));
            continue;
        }
        golden_compare(what, got, want->data, rows, cols, MIN_COS, MAX_ABS);
    }
    iv_outputs_free(&out);
}

static void check_output(const char *fixture, iv_engine *e, golden_case *g, const char *name, iv_task task,
                         int dimensions, int normalize)
{
    check_output_masks(fixture, e, g, name, task, dimensions, normalize, 1);
}

/* The same outputs, bit for bit, whether a sequence runs alone or packed
 * with others: attention, norms, pooling and activations work per sequence
 * or per row, and every linear weight, heads included, is packed at load for
 * a kernel that sums each output in one fixed order whatever the batch
 * (ops/cpu/gemm_panel.h). Checked for the hidden states and for each head
 * output the fixture has. */
static void check_isolation(const char *fixture, iv_engine *e, golden_case *g, iv_task task, const char *what)
{
    iv_outputs all;
    if (run_task(e, g, task, 1, &all)) return;
    for (int i = 0; i < g->n; i++) {
        iv_seq_input one = {.ids = g->ids[i], .type_ids = g->types[i], .len = g->lens[i],
                            .prompt_len = g->prompt_lens[i], .key_mask = g->key_masks[i]};
        iv_outputs single;
        iv_err err = {0};
        if (iv_engine_run(e, task, &one, 1, &single, &err)) {
            iv_test_fail(__FILE__, __LINE__, "%s: %s", fixture, err.msg);
            continue;
        }
        CHECK_MSG(single.rows[0] == all.rows[i], "%s %s input %d: %lld rows alone, %lld packed", fixture, what, i,
                  (long long)single.rows[0], (long long)all.rows[i]);
        if (single.rows[0] == all.rows[i]) {
            double d = iv_test_max_abs_diff(single.data, all.data + all.offsets[i], all.rows[i] * all.cols);
            CHECK_MSG(d == 0, "%s %s input %d: packed vs alone differ by %.2e", fixture, what, i, d);
        }
        iv_outputs_free(&single);
    }
    iv_outputs_free(&all);
}

/* The same bits when the scratch activations that feed linear ops have rows
 * wider than their columns (iv_cpu_act_stride pads only widths that are
 * multiples of 512, which no tiny model has): every op must honour the row
 * strides of its views. */
static void check_padded_rows(const char *fixture, iv_engine *e, golden_case *g, iv_task task, const char *what)
{
    iv_outputs plain, padded;
    if (run_task(e, g, task, 1, &plain)) return;
    iv_cpu_act_stride_pad_all(1);
    const int rc = run_task(e, g, task, 1, &padded);
    iv_cpu_act_stride_pad_all(0);
    if (!rc) {
        const int64_t n = plain.offsets[g->n - 1] + plain.rows[g->n - 1] * plain.cols;
        const double d = iv_test_max_abs_diff(plain.data, padded.data, n);
        CHECK_MSG(d == 0, "%s %s: padded scratch rows change the output by %.2e", fixture, what, d);
        iv_outputs_free(&padded);
    }
    iv_outputs_free(&plain);
}

static void check_fixture(const char *dir, const char *name)
{
    golden_case g;
    if (golden_load(&g, dir)) return;
    iv_engine *e;
    iv_err err = {0};
    if (iv_engine_load(&e, dir, NULL, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s: load failed: %s", name, err.msg);
        golden_free(&g);
        return;
    }
    const int before = iv_test_failed();
    const int st_normalize = iv_engine_st_meta(e)->normalize;
    if (golden_has_output(&g, "hidden")) {
        check_output(name, e, &g, "hidden", IV_TASK_EMBED_ALL, 0, 0);
        check_isolation(name, e, &g, IV_TASK_EMBED_ALL, "hidden");
        check_padded_rows(name, e, &g, IV_TASK_EMBED_ALL, "hidden");
    }
    if (golden_has_output(&g, "pooled")) {
        check_output(name, e, &g, "pooled", IV_TASK_EMBED, 0, st_normalize);
        check_isolation(name, e, &g, IV_TASK_EMBED, "pooled");
    }
    if (golden_has_output(&g, "pooled_dim16")) check_output(name, e, &g, "pooled_dim16", IV_TASK_EMBED, 16, 1);
    if (golden_has_output(&g, "logits")) {
        check_output(name, e, &g, "logits", IV_TASK_CLASSIFY, 0, 0);
        check_isolation(name, e, &g, IV_TASK_CLASSIFY, "logits");
    }
    if (golden_has_output(&g, "token_logits")) {
        check_output(name, e, &g, "token_logits", IV_TASK_TOKEN_CLASSIFY, 0, 0);
        check_isolation(name, e, &g, IV_TASK_TOKEN_CLASSIFY, "token_logits");
    }
    if (golden_has_output(&g, "sparse")) {
        check_output(name, e, &g, "sparse", IV_TASK_SPARSE, 0, 0);
        check_isolation(name, e, &g, IV_TASK_SPARSE, "sparse");
    }
    if (golden_has_output(&g, "multivector")) {
        check_output(name, e, &g, "multivector", IV_TASK_MULTIVECTOR, 0, 0);
        check_isolation(name, e, &g, IV_TASK_MULTIVECTOR, "multivector");
        check_output_masks(name, e, &g, "multivector", IV_TASK_MULTIVECTOR, 0, 0, 0);
        check_output_masks(name, e, &g, "hidden", IV_TASK_EMBED_ALL, 0, 0, 0);
    }
    printf("    %-20s %s\n", name, iv_test_failed() == before ? "ok" : "FAILED");
    iv_engine_free(e);
    golden_free(&g);
}

TEST(golden_tiny_model_fixtures)
{
    char root[4096];
    iv_path_join(root, sizeof root, iv_test_fixtures_dir(), "models");
    char *names[256];
    const int n = golden_fixture_names(names, 256);
    CHECK_MSG(n >= 10, "only %d fixtures found under %s", n, root);
    for (int i = 0; i < n; i++) {
        char dir[4096 + 300];
        snprintf(dir, sizeof dir, "%s/%s", root, names[i]);
        check_fixture(dir, names[i]);
        free(names[i]);
    }
}

/* SPLADE runs the MLM head over chunks of 256 tokens cut across sequence
 * boundaries (heads/task_heads.c): with the fixture's inputs repeated into
 * a batch of three chunks, sequences straddle chunk edges, and each one's
 * vector must still be its expected one and the same bits as run alone. */
TEST(golden_splade_chunks_straddle_sequences)
{
    char dir[4096];
    iv_path_join(dir, sizeof dir, iv_test_fixtures_dir(), "models/bert_splade");
    golden_case g;
    if (golden_load(&g, dir)) return;
    iv_engine *e;
    iv_err err = {0};
    if (iv_engine_load(&e, dir, NULL, &err)) {
        iv_test_fail(__FILE__, __LINE__, "load failed: %s", err.msg);
        golden_free(&g);
        return;
    }
    enum { COPIES = 9 };
    const int n = g.n * COPIES;
    iv_seq_input *seqs = calloc((size_t)n, sizeof *seqs);
    int tokens = 0;
    for (int i = 0; i < n; i++) {
        const int k = i % g.n;
        seqs[i] = (iv_seq_input){.ids = g.ids[k], .type_ids = g.types[k], .len = g.lens[k]};
        tokens += g.lens[k];
    }
    CHECK_MSG(tokens > 2 * 256, "only %d tokens: fewer than three chunks", tokens);
    iv_outputs all;
    if (iv_engine_run(e, IV_TASK_SPARSE, seqs, n, &all, &err) == 0) {
        for (int i = 0; i < n; i++) {
            const int k = i % g.n;
            const iv_tensor *want = golden_expected(&g, "sparse", k);
            REQUIRE(want != NULL);
            char what[64];
            snprintf(what, sizeof what, "bert_splade sparse.%d as input %d of %d", k, i, n);
            golden_compare(what, all.data + all.offsets[i], want->data, 1, all.cols, MIN_COS, MAX_ABS);
            if (i < g.n) continue;
            double d = iv_test_max_abs_diff(all.data + all.offsets[i], all.data + all.offsets[k], all.cols);
            CHECK_MSG(d == 0, "input %d differs from input %d (the same sequence) by %.2e", i, k, d);
        }
        iv_outputs_free(&all);
    } else {
        iv_test_fail(__FILE__, __LINE__, "run failed: %s", err.msg);
    }
    free(seqs);
    iv_engine_free(e);
    golden_free(&g);
}
