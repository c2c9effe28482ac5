/* Qwen3-Reranker style scoring (iv_engine_opts.rerank_tokens): a
 * Qwen3ForCausalLM checkpoint read as a 1-label reranker, logit(yes) -
 * logit(no) at the last token, compared with transformers' LM logits
 * (rerank_logits in the fixtures of tools/fixtures/synthetic_causal_rerank.py)
 * and with the converted Qwen3ForSequenceClassification checkpoint of the
 * same weights; and a Gemma checkpoint with final logit soft-capping. All
 * inputs of a fixture run as one packed batch. FP32
 * tolerance: max abs error <= 1e-4 on logits of order 1-10. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/json.h"
#include "engine/engine.h"
#include "golden_util.h"
#include "test.h"

#define MAX_ABS 1e-4

static void fixture_dir(char *dir, size_t cap, const char *name)
{
    snprintf(dir, cap, "%s/models/%s", iv_test_fixtures_dir(), name);
}

/* Loads fixture `name`, with rerank_tokens when non-NULL. */
static iv_engine *open_engine(const char *name, const char *rerank_tokens)
{
    char dir[4096];
    fixture_dir(dir, sizeof dir, name);
    iv_engine_opts opts = {.rerank_tokens = rerank_tokens};
    iv_engine *e = NULL;
    iv_err err = {0};
    if (iv_engine_load(&e, dir, &opts, &err)) iv_test_fail(__FILE__, __LINE__, "%s: load failed: %s", name, err.msg);
    return e;
}

/* The classify output of all of g's inputs as one batch (caller frees). */
static int classify_all(iv_engine *e, golden_case *g, iv_outputs *out)
{
    iv_seq_input *seqs = calloc((size_t)g->n, sizeof *seqs);
    for (int i = 0; i < g->n; i++) seqs[i] = (iv_seq_input){.ids = g->ids[i], .len = g->lens[i]};
    iv_err err = {0};
    const int rc = iv_engine_run(e, IV_TASK_CLASSIFY, seqs, g->n, out, &err);
    if (rc) iv_test_fail(__FILE__, __LINE__, "classify failed: %s", err.msg);
    free(seqs);
    return rc;
}

/* Engine scores of fixture `name` against its expected `output` (rerank_logits or logits). */
static void check_scores(const char *name, const char *rerank_tokens, const char *output, golden_case *g,
                         float *scores)
{
    iv_engine *e = open_engine(name, rerank_tokens);
    if (!e) return;
    CHECK(iv_engine_capabilities(e) & IV_CAN(IV_TASK_CLASSIFY));
    CHECK_EQ_INT(iv_engine_num_labels(e), 1);
    iv_outputs out;
    if (classify_all(e, g, &out) == 0) {
        CHECK_EQ_INT(out.cols, 1);
        float worst = 0;
        for (int i = 0; i < g->n; i++) {
            const iv_tensor *want = golden_expected(g, output, i);
            REQUIRE(want != NULL);
            const float got = out.data[out.offsets[i]], w = ((const float *)want->data)[0];
            CHECK_MSG(got - w <= MAX_ABS && w - got <= MAX_ABS, "%s %s.%d: %.6f, expected %.6f", name, output, i,
                      got, w);
            if (scores) scores[i] = got;
            if (got - w > worst) worst = got - w;
            if (w - got > worst) worst = w - got;
        }
        printf("    %-28s %s: %d scores, max abs error %.1e\n", name, output, g->n, (double)worst);
        iv_outputs_free(&out);
    }
    iv_engine_free(e);
}

static const char *rerank_tokens_of(golden_case *g)
{
    return iv_json_str(g->json, "rerank_tokens", NULL);
}

TEST(golden_causal_lm_rerank_tied_equals_converted_seqcls)
{
    char dir[4096];
    golden_case causal, seqcls;
    fixture_dir(dir, sizeof dir, "qwen3_causal_rerank");
    REQUIRE(golden_load(&causal, dir) == 0);
    fixture_dir(dir, sizeof dir, "qwen3_causal_rerank_seqcls");
    REQUIRE(golden_load(&seqcls, dir) == 0);
    REQUIRE(causal.n == seqcls.n && causal.n > 0);
    CHECK_STR(rerank_tokens_of(&causal), "yes,no");
    float *a = calloc((size_t)causal.n, sizeof(float)), *b = calloc((size_t)causal.n, sizeof(float));
    check_scores("qwen3_causal_rerank", rerank_tokens_of(&causal), "rerank_logits", &causal, a);
    check_scores("qwen3_causal_rerank_seqcls", NULL, "logits", &seqcls, b);
    /* The same weights, so the same score either way; and the log-odds differ between inputs. */
    for (int i = 0; i < causal.n; i++) {
        CHECK_MSG(a[i] - b[i] <= MAX_ABS && b[i] - a[i] <= MAX_ABS, "input %d: causal %.6f vs seq-cls %.6f", i, a[i],
                  b[i]);
        if (i) CHECK_MSG(a[i] != a[0], "input %d scores exactly like input 0", i);
    }
    /* Swapping the tokens negates the score: P(no) = 1 - P(yes). */
    iv_engine *e = open_engine("qwen3_causal_rerank", "no,yes");
    iv_outputs out;
    if (e && classify_all(e, &causal, &out) == 0) {
        for (int i = 0; i < causal.n; i++)
            CHECK_MSG(out.data[out.offsets[i]] + a[i] <= MAX_ABS && -out.data[out.offsets[i]] - a[i] <= MAX_ABS,
                      "input %d: no,yes gives %.6f, yes,no %.6f", i, out.data[out.offsets[i]], a[i]);
        iv_outputs_free(&out);
    }
    iv_engine_free(e);
    free(a);
    free(b);
    golden_free(&causal);
    golden_free(&seqcls);
}

TEST(golden_causal_lm_rerank_untied_lm_head)
{
    char dir[4096];
    golden_case g;
    fixture_dir(dir, sizeof dir, "qwen3_causal_rerank_untied");
    REQUIRE(golden_load(&g, dir) == 0);
    check_scores("qwen3_causal_rerank_untied", rerank_tokens_of(&g), "rerank_logits", &g, NULL);
    golden_free(&g);
}

/* Gemma4ForCausalLM as a yes/no reranker: the Gemma4 text stack (per-layer
 * inputs, proportional RoPE on the full layer) under the same soft-capped
 * score. */
TEST(golden_causal_lm_rerank_gemma4_softcap)
{
    char dir[4096];
    golden_case g;
    fixture_dir(dir, sizeof dir, "gemma4_causal_rerank_softcap");
    REQUIRE(golden_load(&g, dir) == 0);
    check_scores("gemma4_causal_rerank_softcap", rerank_tokens_of(&g), "rerank_logits", &g, NULL);
    golden_free(&g);
}

/* The same on Gemma4UnifiedForCausalLM (gemma4_unified_text: Gemma4's stack
 * without per-layer inputs). */
TEST(golden_causal_lm_rerank_gemma4_unified_softcap)
{
    char dir[4096];
    golden_case g;
    fixture_dir(dir, sizeof dir, "g4u_causal_rerank_softcap");
    REQUIRE(golden_load(&g, dir) == 0);
    check_scores("g4u_causal_rerank_softcap", rerank_tokens_of(&g), "rerank_logits", &g, NULL);
    golden_free(&g);
}

/* Gemma's final_logit_softcapping: transformers returns c tanh(l / c), so the
 * score is c tanh(l_yes / c) - c tanh(l_no / c) (the fixture checks the cap
 * moves every input's score by more than 0.01). */
TEST(golden_causal_lm_rerank_final_logit_softcap)
{
    char dir[4096];
    golden_case g;
    fixture_dir(dir, sizeof dir, "gemma3_causal_rerank_softcap");
    REQUIRE(golden_load(&g, dir) == 0);
    check_scores("gemma3_causal_rerank_softcap", rerank_tokens_of(&g), "rerank_logits", &g, NULL);
    /* The capped head is two steps of ordinary ops, so it runs on the
     * 16-bit device tables too: on the emulated device in FP16, within what
     * FP16 storage of a tiny random model allows (scores of order 1). */
    fixture_dir(dir, sizeof dir, "gemma3_causal_rerank_softcap");
    iv_engine_opts opts = {.rerank_tokens = rerank_tokens_of(&g), .device = "emulated", .dtype = "float16"};
    iv_engine *e = NULL;
    iv_err err = {0};
    if (iv_engine_load(&e, dir, &opts, &err) == 0) {
        iv_outputs out;
        if (classify_all(e, &g, &out) == 0) {
            float worst = 0;
            for (int i = 0; i < g.n; i++) {
                const iv_tensor *want = golden_expected(&g, "rerank_logits", i);
                REQUIRE(want != NULL);
                const float got = out.data[out.offsets[i]], w = ((const float *)want->data)[0];
                if (got - w > worst) worst = got - w;
                if (w - got > worst) worst = w - got;
            }
            printf("    %-28s rerank_logits on emulated float16: max abs error %.1e\n", "gemma3_causal_rerank_softcap",
                   (double)worst);
            CHECK_MSG(worst <= 1e-2, "emulated float16: max abs error %.3g", (double)worst);
            iv_outputs_free(&out);
        }
    } else {
        iv_test_fail(__FILE__, __LINE__, "emulated load failed: %s", err.msg);
    }
    iv_engine_free(e);
    golden_free(&g);
}

/* Without the option a causal LM has no classifier; with a bad option the load fails naming why. */
static void expect_load_error(const char *name, const char *tokens, const char *needle, int code)
{
    char dir[4096];
    fixture_dir(dir, sizeof dir, name);
    iv_engine_opts opts = {.rerank_tokens = tokens};
    iv_engine *e = NULL;
    iv_err err = {0};
    CHECK_MSG(iv_engine_load(&e, dir, &opts, &err) == -1, "%s with \"%s\" loaded", name, tokens);
    CHECK_CONTAINS(err.msg, needle);
    CHECK_EQ_INT(err.code, code);
    iv_engine_free(e);
}

TEST(causal_lm_rerank_rejects_bad_options)
{
    iv_engine *e = open_engine("qwen3_causal_rerank", NULL);
    REQUIRE(e != NULL);
    CHECK(!(iv_engine_capabilities(e) & IV_CAN(IV_TASK_CLASSIFY)));
    iv_engine_free(e);
    expect_load_error("qwen3_causal_rerank_seqcls", "yes,no", "needs a *ForCausalLM checkpoint", IV_E_UNSUPPORTED);
    expect_load_error("qwen3", "yes,no", "needs a *ForCausalLM checkpoint", IV_E_UNSUPPORTED);
    expect_load_error("qwen3_causal_rerank", "maybe,no", "\"maybe\" is not in the tokenizer's vocabulary",
                      IV_E_INVALID);
    expect_load_error("qwen3_causal_rerank", "yes", "two tokens separated by a comma", IV_E_INVALID);
    expect_load_error("qwen3_causal_rerank", "yes,no,maybe", "two tokens separated by a comma", IV_E_INVALID);
    expect_load_error("qwen3_causal_rerank", ",no", "two tokens separated by a comma", IV_E_INVALID);
}
