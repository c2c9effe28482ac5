/* `--dtype int8` on the real all-MiniLM-L6-v2 (scripts/fetch-models.sh)
 * against the FP32 sentence-transformers embeddings committed in
 * tests/fixtures/real/all-MiniLM-L6-v2: every sentence's pooled vector must
 * keep cosine >= 0.99 (per-row int8 weights, per-token u8 activations). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "golden_util.h"
#include "test.h"

#define MIN_COS 0.99

static int open_int8_minilm(iv_engine **e, golden_case *g)
{
    char model[4096], fix[4096];
    iv_path_join(model, sizeof model, iv_test_models_dir(), "all-MiniLM-L6-v2");
    iv_path_join(fix, sizeof fix, iv_test_fixtures_dir(), "real/all-MiniLM-L6-v2");
    if (!iv_dir_exists(model)) {
        iv_test_fail(__FILE__, __LINE__, "%s missing: run scripts/fetch-models.sh", model);
        return -1;
    }
    if (golden_load(g, fix)) return -1;
    iv_engine_opts opts = {.device = "cpu", .dtype = "int8"};
    iv_err err = {0};
    if (iv_engine_load(e, model, &opts, &err)) {
        iv_test_fail(__FILE__, __LINE__, "load: %s", err.msg);
        golden_free(g);
        return -1;
    }
    return 0;
}

static int run_embed(iv_engine *e, const golden_case *g, int first, int n, iv_outputs *out)
{
    iv_seq_input *seqs = calloc((size_t)n, sizeof *seqs);
    for (int i = 0; i < n; i++)
        seqs[i] = (iv_seq_input){.ids = g->ids[first + i], .type_ids = g->types[first + i], .len = g->lens[first + i]};
    iv_err err = {0};
    int rc = iv_engine_run(e, IV_TASK_EMBED, seqs, n, out, &err);
    if (rc) iv_test_fail(__FILE__, __LINE__, "run: %s", err.msg);
    free(seqs);
    return rc;
}

/* Also: activations are quantized per token and integer sums are exact, so
 * a sequence's result does not depend on what it is batched with (alone
 * equals packed, bit for bit). */
TEST(golden_int8_minilm_cosine_to_fp32)
{
    iv_engine *e;
    golden_case g;
    if (open_int8_minilm(&e, &g)) return;
    iv_outputs out;
    if (!run_embed(e, &g, 0, g.n, &out)) {
        const int alone[] = {0, 3, 13};
        for (int a = 0; a < 3; a++) {
            iv_outputs one;
            if (run_embed(e, &g, alone[a], 1, &one)) break;
            double d = iv_test_max_abs_diff(one.data, out.data + out.offsets[alone[a]], out.cols);
            CHECK_MSG(d == 0, "sentence %d: alone vs packed differ by %.2e", alone[a], d);
            iv_outputs_free(&one);
        }
        double min_cos = 1.0, sum_cos = 0.0;
        int worst = 0;
        for (int i = 0; i < g.n; i++) {
            const iv_tensor *want = golden_expected(&g, "pooled", i);
            REQUIRE(want != NULL && iv_tensor_numel(want) == out.cols);
            float *got = out.data + out.offsets[i];
            iv_embedding_finish(got, out.cols, 0, 1);
            double c = iv_test_cosine(got, want->data, out.cols);
            CHECK_MSG(c >= MIN_COS, "sentence %d: cosine %.6f to the FP32 reference", i, c);
            CHECK_MSG(c < 0.9999999, "sentence %d: cosine %.9f, identical to FP32: int8 path not taken?", i, c);
            if (c < min_cos) min_cos = c, worst = i;
            sum_cos += c;
        }
        printf("    int8 MiniLM vs FP32 reference over %d sentences: min cosine %.6f (sentence %d), mean %.6f\n", g.n,
               min_cos, worst, sum_cos / g.n);
        iv_outputs_free(&out);
    }
    iv_engine_free(e);
    golden_free(&g);
}

TEST(golden_int8_unknown_dtype_rejected)
{
    char model[4096];
    iv_path_join(model, sizeof model, iv_test_models_dir(), "all-MiniLM-L6-v2");
    iv_engine *e = NULL;
    iv_engine_opts opts = {.device = "cpu", .dtype = "int4"};
    iv_err err = {0};
    CHECK(iv_engine_load(&e, model, &opts, &err) == -1);
    CHECK(e == NULL);
    CHECK_CONTAINS(err.msg, "float32 or int8");
}
