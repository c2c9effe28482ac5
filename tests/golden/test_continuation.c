/* The generic continuation log-prob decision contract
 * (decisions/continuation.h) against transformers: the qwen3_letters
 * checkpoint and the soft-capped gemma3_letters one (Gemma3ForCausalLM,
 * final_logit_softcapping: every logit capped before the log_softmax), each
 * with its expected_continuation.json
 * (tools/fixtures/synthetic_continuation.py: each option's whole sequence
 * through the model, log_softmax in float64, no sharing). Per
 * request, every question's deduplicated sequences run as ONE batch, as
 * the server submits them, on an engine that folds (the shared template
 * head, state and question computed once: the fold counters must move)
 * and on one that does not; both must give the reference's prefix and
 * continuation ids exactly, option scores (sum and mean log-probs) and
 * probabilities within 1e-4, the same argmax, and the folded and unfolded
 * logits must agree within 1e-5. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "chat/chat_template.h"
#include "decisions/answer.h"
#include "decisions/continuation.h"
#include "decisions/contract.h"
#include "engine/engine.h"
#include "engine/prefix_cache.h"
#include "test.h"

#define MAX_ABS 1e-4

typedef struct run_result {
    double max_score, max_prob, max_fold_diff;
    int n_questions, ids_ok, argmax_ok, n_seqs, n_option_tokens;
} run_result;

static double jd(const cJSON *a, int i) { return cJSON_GetArrayItem(a, i)->valuedouble; }

/* Runs every case through engine e (and, when ref is given, the same
 * sequences through ref for the folded-vs-unfolded comparison). */
static void run_cases(iv_engine *e, iv_engine *ref, const cJSON *exp, run_result *res)
{
    iv_dq_limits lim;
    iv_dq_limits_default(&lim);
    int V = 0;
    iv_engine_decision_continuation(e, &V);
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(exp, "cases"))
    {
        iv_dq_request req;
        iv_dq_errors de;
        iv_dq_errors_init(&de);
        REQUIRE(iv_dq_parse(cJSON_GetObjectItem(c, "request"), &lim, &req, &de) == 0);
        iv_dq_errors_free(&de);
        iv_cont_plan plan;
        iv_err err = {0};
        int bad = -1;
        REQUIRE(iv_cont_plan_build(&req, iv_engine_chat_template(e), NULL, iv_engine_tokenizer(e), V, &plan, &bad, &err) == 0);
        iv_seq_input *seqs = calloc((size_t)plan.n_seqs, sizeof *seqs);
        REQUIRE(seqs);
        for (int s = 0; s < plan.n_seqs; s++) seqs[s] = (iv_seq_input){.ids = plan.seq_ids[s], .len = plan.seq_len[s]};
        iv_outputs out = {0}, out_ref = {0};
        REQUIRE(iv_engine_run(e, IV_TASK_CLASSIFY, seqs, plan.n_seqs, &out, &err) == 0);
        REQUIRE(out.cols == V);
        if (ref) {
            REQUIRE(iv_engine_run(ref, IV_TASK_CLASSIFY, seqs, plan.n_seqs, &out_ref, &err) == 0);
            for (int64_t i = 0; i < out.offsets[out.n_seqs]; i++) {
                const double d = fabs(out.data[i] - out_ref.data[i]);
                res->max_fold_diff = d > res->max_fold_diff ? d : res->max_fold_diff;
            }
        }
        const float **lg = malloc(sizeof *lg * (size_t)plan.n_seqs);
        double *lse = malloc(sizeof(double) * (size_t)plan.n_seqs);
        REQUIRE(lg && lse);
        for (int s = 0; s < plan.n_seqs; s++) {
            lg[s] = out.data + out.offsets[s];
            lse[s] = iv_cont_logsumexp(lg[s], V);
        }
        res->n_seqs += plan.n_seqs;
        for (int i = 0; i < req.n_questions; i++) {
            const iv_dq_question *q = &req.questions[i];
            const cJSON *a = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "answers"), q->id);
            REQUIRE(a);
            /* Ids: the question's first sequence is its prefix alone; each
             * option's reads are its continuation tokens. */
            const cJSON *wp = cJSON_GetObjectItem(a, "prefix_ids"), *wc = cJSON_GetObjectItem(a, "continuation_ids");
            const int s0 = plan.q[i].first_seq;
            int same = plan.seq_len[s0] == cJSON_GetArraySize(wp) && plan.q[i].prefix_len == plan.seq_len[s0];
            for (int t = 0; same && t < plan.seq_len[s0]; t++) same = plan.seq_ids[s0][t] == cJSON_GetArrayItem(wp, t)->valueint;
            for (int j = 0; same && j < q->n_options; j++) {
                const cJSON *cj = cJSON_GetArrayItem(wc, j);
                same = plan.q[i].opt_off[j + 1] - plan.q[i].opt_off[j] == cJSON_GetArraySize(cj);
                for (int t = 0; same && t < cJSON_GetArraySize(cj); t++)
                    same = plan.reads[plan.q[i].opt_off[j] + t].token == cJSON_GetArrayItem(cj, t)->valueint;
                res->n_option_tokens += cJSON_GetArraySize(cj);
            }
            same = same && plan.q[i].tokens == cJSON_GetObjectItem(a, "tokens")->valueint;
            CHECK_MSG(same, "question %s: ids differ from the reference", q->id);
            res->ids_ok &= same;
            for (int norm = IV_CONT_SUM; norm <= IV_CONT_MEAN; norm++) {
                double sc[64], p[64];
                REQUIRE(q->n_options <= 64);
                iv_cont_probabilities(&plan, i, q, lg, lse, (iv_cont_norm)norm, sc, p);
                const cJSON *ws = cJSON_GetObjectItem(a, norm == IV_CONT_SUM ? "scores_sum" : "scores_mean");
                const cJSON *wpr = cJSON_GetObjectItem(a, norm == IV_CONT_SUM ? "probabilities_sum" : "probabilities_mean");
                double wbest = -1;
                int wargmax = 0;
                for (int j = 0; j < q->n_options; j++) {
                    const double ds = fabs(sc[j] - jd(ws, j)), dp = fabs(p[j] - jd(wpr, j));
                    res->max_score = ds > res->max_score ? ds : res->max_score;
                    res->max_prob = dp > res->max_prob ? dp : res->max_prob;
                    if (jd(wpr, j) > wbest) wbest = jd(wpr, j), wargmax = j;
                }
                const int am = iv_dq_argmax(p, q->n_options) == wargmax;
                CHECK_MSG(am, "question %s (%s): argmax differs", q->id, norm == IV_CONT_SUM ? "sum" : "mean");
                res->argmax_ok &= am;
            }
            res->n_questions++;
        }
        free(lg), free(lse), free(seqs);
        iv_outputs_free(&out);
        iv_outputs_free(&out_ref);
        iv_cont_plan_free(&plan);
        iv_dq_request_free(&req);
    }
}

static void check_continuation(const char *name)
{
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/models/%s", iv_test_fixtures_dir(), name);
    snprintf(path, sizeof path, "%s/expected_continuation.json", dir);
    iv_err err = {0};
    cJSON *exp = NULL;
    REQUIRE(iv_json_load_file(path, 1 << 24, &exp, &err) == 0);
    iv_engine *e = NULL, *nofold = NULL;
    iv_engine_opts opts = {0};
    opts.decision_continuation = 1;
    if (iv_engine_load(&e, dir, &opts, &err)) {
        iv_test_fail(__FILE__, __LINE__, "load: %s", err.msg);
        cJSON_Delete(exp);
        return;
    }
    opts.no_prefix_fold = 1;
    REQUIRE(iv_engine_load(&nofold, dir, &opts, &err) == 0);
    CHECK_STR(iv_engine_decision_family(e), "continuation");
    CHECK(iv_engine_no_fold_reason(e) == NULL);
    iv_prefix_stats cs;
    uint64_t b0, b1, in0, in1, computed0, computed1;
    iv_engine_prefix_stats(e, &cs, &b0, &in0, &computed0);
    run_result r = {.ids_ok = 1, .argmax_ok = 1};
    run_cases(e, nofold, exp, &r);
    iv_engine_prefix_stats(e, &cs, &b1, &in1, &computed1);
    printf("    continuation (%s): %d questions, %d sequences (%d option tokens), max |score - transformers| %.3g, "
           "max |p - transformers| %.3g, folded vs unfolded logits %.3g; %llu of 3 batches folded, %llu of %llu "
           "tokens computed\n",
           name, r.n_questions, r.n_seqs, r.n_option_tokens, r.max_score, r.max_prob, r.max_fold_diff,
           (unsigned long long)(b1 - b0), (unsigned long long)(computed1 - computed0), (unsigned long long)(in1 - in0));
    CHECK(r.n_questions == 7 && r.ids_ok && r.argmax_ok);
    CHECK_MSG(r.max_score <= MAX_ABS && r.max_prob <= MAX_ABS, "score %g, p %g", r.max_score, r.max_prob);
    CHECK_MSG(r.max_fold_diff <= 1e-5, "folded vs unfolded %g", r.max_fold_diff);
    /* Every request's batch shares its template head, state and questions: all fold. */
    CHECK_MSG(b1 - b0 == 3, "%llu folded batches", (unsigned long long)(b1 - b0));
    iv_engine_free(e);
    iv_engine_free(nofold);
    cJSON_Delete(exp);
}

TEST(golden_continuation_matches_transformers) { check_continuation("qwen3_letters"); }
TEST(golden_continuation_softcapped_matches_transformers) { check_continuation("gemma3_letters"); }

/* Loading: --decision-letters and the continuation readout exclude each
 * other; a checkpoint without a chat template is refused. */
TEST(golden_continuation_load_checks)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/models/qwen3_letters", iv_test_fixtures_dir());
    iv_engine *e = NULL;
    iv_err err = {0};
    iv_engine_opts opts = {0};
    opts.decision_continuation = 1;
    opts.decision_letters = 1;
    CHECK(iv_engine_load(&e, dir, &opts, &err) != 0);
    CHECK(strstr(err.msg, "exclude each other") != NULL);
    char enc[4096];
    snprintf(enc, sizeof enc, "%s/models/bert", iv_test_fixtures_dir());
    opts.decision_letters = 0;
    err = (iv_err){0};
    CHECK(iv_engine_load(&e, enc, &opts, &err) != 0);
    CHECK_MSG(err.msg[0], "no error message");
}
