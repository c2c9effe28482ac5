/* Fixtures that start from text (tools/fixtures/synthetic_st6.py): each
 * input's "text" goes through the engine's own input path (iv_prepare_input:
 * prompt, tokenizer, truncation at the limit in force) and must give the ids
 * and prompt_len sentence-transformers 6.3 fed its model, the engine must
 * report the limit and its source as cases.json says, and the pooled vectors
 * of those prepared inputs, run as one packed batch, must match encode().
 * FP32 tolerances: cosine >= 0.99999 and max abs error <= 1e-4. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "engine/engine.h"
#include "engine/inputs.h"
#include "golden_util.h"
#include "test.h"

#define MIN_COS 0.99999
#define MAX_ABS 1e-4

static void check_text_fixture(const char *dir, const char *name, golden_case *g)
{
    iv_engine *e;
    iv_err err = {0};
    if (iv_engine_load(&e, dir, NULL, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s: load failed: %s", name, err.msg);
        return;
    }
    const int before = iv_test_failed();
    CHECK_MSG(iv_engine_max_input_length(e) == (int)iv_json_int(g->json, "max_input_length", -1),
              "%s: max input length %d, expected %d", name, iv_engine_max_input_length(e),
              (int)iv_json_int(g->json, "max_input_length", -1));
    CHECK_STR(iv_engine_max_input_length_source(e), iv_json_str(g->json, "max_input_length_source", "?"));

    iv_input_opts opts = iv_input_opts_default();
    opts.prompt = iv_json_str(g->json, "prompt", NULL);
    iv_prepared *prep = calloc((size_t)g->n, sizeof *prep);
    iv_seq_input *seqs = calloc((size_t)g->n, sizeof *seqs);
    const cJSON *inputs = cJSON_GetObjectItemCaseSensitive(g->json, "inputs");
    int prepared = 0;
    for (int i = 0; i < g->n; i++, prepared++) {
        const char *text = iv_json_str(cJSON_GetArrayItem(inputs, i), "text", NULL);
        REQUIRE(text != NULL);
        const iv_input in = {.text = text, .text_len = strlen(text)};
        if (iv_prepare_input(e, &in, &opts, &prep[i], &err)) {
            iv_test_fail(__FILE__, __LINE__, "%s input %d: %s", name, i, err.msg);
            break;
        }
        const iv_seq_input *s = &prep[i].seq;
        CHECK_MSG(s->len == g->lens[i] && !memcmp(s->ids, g->ids[i], (size_t)g->lens[i] * sizeof(int32_t)),
                  "%s input %d: %d ids differ from sentence-transformers' %d", name, i, s->len, g->lens[i]);
        CHECK_MSG(s->prompt_len == g->prompt_lens[i], "%s input %d: prompt_len %d, sentence-transformers %d", name,
                  i, s->prompt_len, g->prompt_lens[i]);
        seqs[i] = *s;
    }
    iv_outputs out;
    if (prepared == g->n && iv_engine_run(e, IV_TASK_EMBED, seqs, g->n, &out, &err) == 0) {
        double worst_cos = 1, worst_abs = 0;
        for (int i = 0; i < g->n; i++) {
            const iv_tensor *want = golden_expected(g, "pooled", i);
            REQUIRE(want != NULL);
            const float *got = out.data + out.offsets[i];
            char what[160];
            snprintf(what, sizeof what, "%s pooled.%d (from text)", name, i);
            if (iv_tensor_numel(want) != out.cols) {
                iv_test_fail(__FILE__, __LINE__, "%s: %d values, expected %lld", what, out.cols,
                             (long long)iv_tensor_numel(want));
                continue;
            }
            golden_compare(what, got, want->data, 1, out.cols, MIN_COS, MAX_ABS);
            const double c = iv_test_cosine(got, want->data, out.cols);
            const double d = iv_test_max_abs_diff(got, want->data, out.cols);
            if (c < worst_cos) worst_cos = c;
            if (d > worst_abs) worst_abs = d;
        }
        printf("    %-28s limit %d (%s), min cosine %.7f, max abs %.1e %s\n", name, iv_engine_max_input_length(e),
               iv_engine_max_input_length_source(e), worst_cos, worst_abs,
               iv_test_failed() == before ? "ok" : "FAILED");
        iv_outputs_free(&out);
    } else if (prepared == g->n) {
        iv_test_fail(__FILE__, __LINE__, "%s: run failed: %s", name, err.msg);
    }
    for (int i = 0; i < prepared; i++) iv_prepared_free(&prep[i]);
    free(prep);
    free(seqs);
    iv_engine_free(e);
}

TEST(golden_text_fixtures_st6)
{
    char *names[256];
    const int n = golden_fixture_names(names, 256);
    int ran = 0;
    for (int i = 0; i < n; i++) {
        char dir[4096 + 300];
        snprintf(dir, sizeof dir, "%s/models/%s", iv_test_fixtures_dir(), names[i]);
        golden_case g;
        if (golden_load(&g, dir) == 0) {
            if (cJSON_GetObjectItemCaseSensitive(g.json, "max_input_length")) {
                check_text_fixture(dir, names[i], &g);
                ran++;
            }
            golden_free(&g);
        }
        free(names[i]);
    }
    CHECK_MSG(ran >= 5, "only %d text fixtures found", ran);
}
