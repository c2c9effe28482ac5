/* Laya decisions against the public reference code: the laya_tiny fixture
 * (tools/fixtures/synthetic_laya.py re-derives laya 8ef5b2dd's build_sequence,
 * DecisionModel.forward and temperature scaling in torch, FP32) gives each
 * question's token ids, marker positions, raw option logits and final
 * probabilities. The sequence must match exactly; logits and
 * probabilities within 1e-4, with the same argmax. Each case runs its
 * questions as one packed batch (one sequence per question). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "decisions/answer.h"
#include "decisions/contract.h"
#include "decisions/laya.h"
#include "engine/engine.h"
#include "golden_util.h"
#include "test.h"

#define MAX_ABS 1e-4

double iv_test_laya_max_err; /* reported by the test for the closing note */

TEST(golden_laya_tiny_matches_reference)
{
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/models/laya_tiny", iv_test_fixtures_dir());
    snprintf(path, sizeof path, "%s/expected.json", dir);
    iv_err err = {0};
    cJSON *exp = NULL;
    REQUIRE(iv_json_load_file(path, 1 << 24, &exp, &err) == 0);
    iv_engine *e = NULL;
    iv_engine_opts opts = {0};
    if (iv_engine_load(&e, dir, &opts, &err)) {
        iv_test_fail(__FILE__, __LINE__, "load: %s", err.msg);
        cJSON_Delete(exp);
        return;
    }
    const iv_laya *L = iv_engine_laya(e);
    REQUIRE(L);
    const iv_tokenizer *tok = iv_engine_tokenizer(e);
    iv_dq_limits lim;
    iv_dq_limits_default(&lim);
    double max_logit = 0, max_prob = 0;
    int n_questions = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(exp, "cases"))
    {
        iv_dq_request req;
        iv_dq_errors de;
        iv_dq_errors_init(&de);
        REQUIRE(iv_dq_parse(cJSON_GetObjectItem(c, "request"), &lim, &req, &de) == 0);
        iv_dq_errors_free(&de);
        int32_t *st;
        int n_st;
        REQUIRE(iv_laya_encode(tok, &L->sp, req.state_text, &st, &n_st, &err) == 0);
        const int nq = req.n_questions;
        iv_seq_input *seqs = calloc((size_t)nq, sizeof *seqs);
        int32_t **ids = calloc((size_t)nq, sizeof *ids);
        int **markers = calloc((size_t)nq, sizeof *markers);
        for (int i = 0; i < nq; i++) {
            const iv_dq_question *q = &req.questions[i];
            const cJSON *a = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "answers"), q->id);
            REQUIRE(a);
            markers[i] = calloc((size_t)q->n_options, sizeof(int));
            int len;
            REQUIRE(iv_laya_build(tok, &L->sp, &L->cfg, q, st, n_st, req.state_kind == IV_DQ_STATE_ARRAY, &ids[i],
                                  &len, markers[i], &err) == 0);
            const cJSON *want_ids = cJSON_GetObjectItem(a, "ids"), *want_m = cJSON_GetObjectItem(a, "markers");
            int same = len == cJSON_GetArraySize(want_ids);
            for (int t = 0; same && t < len; t++) same = ids[i][t] == cJSON_GetArrayItem(want_ids, t)->valueint;
            CHECK_MSG(same, "question %s: token ids differ from the reference (%d vs %d tokens)", q->id, len,
                      cJSON_GetArraySize(want_ids));
            for (int k = 0; k < q->n_options; k++)
                CHECK_MSG(markers[i][k] == cJSON_GetArrayItem(want_m, k)->valueint, "question %s marker %d", q->id, k);
            seqs[i] = (iv_seq_input){.ids = ids[i], .len = len};
        }
        iv_outputs out = {0};
        REQUIRE(iv_engine_run(e, IV_TASK_EMBED_ALL, seqs, nq, &out, &err) == 0);
        for (int i = 0; i < nq; i++) {
            const iv_dq_question *q = &req.questions[i];
            const cJSON *a = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "answers"), q->id);
            const int k = q->n_options;
            float logits[256], act[8];
            REQUIRE(iv_laya_head_run(L->head, out.data + out.offsets[i], out.rows[i], (int)q->type, markers[i], k,
                                     logits, act, &err) == 0);
            const double t = iv_laya_temperature(&L->cfg, q->type, k);
            CHECK_MSG(fabs(t - cJSON_GetObjectItem(a, "temperature")->valuedouble) < 1e-12, "%s temperature %g", q->id, t);
            double p[256];
            iv_dq_softmax(logits, k, t, p);
            const cJSON *wl = cJSON_GetObjectItem(a, "logits"), *wp = cJSON_GetObjectItem(a, "probabilities");
            double wpv[256];
            for (int j = 0; j < k; j++) {
                const double dl = fabs(logits[j] - cJSON_GetArrayItem(wl, j)->valuedouble);
                wpv[j] = cJSON_GetArrayItem(wp, j)->valuedouble;
                const double dp = fabs(p[j] - wpv[j]);
                if (dl > max_logit) max_logit = dl;
                if (dp > max_prob) max_prob = dp;
            }
            CHECK_MSG(iv_dq_argmax(p, k) == iv_dq_argmax(wpv, k), "%s: argmax differs", q->id);
            n_questions++;
        }
        iv_outputs_free(&out);
        for (int i = 0; i < nq; i++) free(ids[i]), free(markers[i]);
        free(ids), free(markers), free(seqs), free(st);
        iv_dq_request_free(&req);
    }
    printf("    laya_tiny: %d questions, max |logit - ref| %.3g, max |p - ref| %.3g\n", n_questions, max_logit, max_prob);
    CHECK_MSG(max_logit <= MAX_ABS && max_prob <= MAX_ABS, "logit error %g, probability error %g", max_logit, max_prob);
    CHECK(n_questions == 11);
    iv_engine_free(e);
    cJSON_Delete(exp);
}

TEST(golden_laya_config_rejects_unknown_fields)
{
    iv_laya_config c;
    iv_err err = {0};
    const char *ok = "{\"encoder\":\"x\",\"head_layers\":2,\"temperature\":[0.1,9,\"x\"],"
                     "\"temperature_by_options\":{\"choice:11+\":0.1006,\"noul:2\":1.5}}";
    REQUIRE(iv_laya_config_parse(&c, ok, strlen(ok), &err) == 0);
    CHECK(c.temperature[0] == 0.5 && c.temperature[1] == 5.0 && c.temperature[2] == 1.0);
    CHECK(iv_laya_temperature(&c, IV_DQ_CHOICE, 12) == 0.5);
    CHECK(iv_laya_temperature(&c, IV_DQ_NOUL, 2) == 1.5);
    CHECK(iv_laya_temperature(&c, IV_DQ_CHOICE, 4) == 0.5);
    CHECK(c.max_len == 512 && c.head_max_len == 192 && c.n_act == 1);
    const char *bad[] = {"{\"encoder\":\"x\",\"head_layers\":2,\"calibration\":\"isotonic\"}",
                         "{\"encoder\":\"x\",\"head_layers\":2,\"temperature_by_options\":{\"box:2\":1}}",
                         "{\"encoder\":\"x\",\"head_layers\":2,\"temperature\":[1,2]}",
                         "{\"head_layers\":2}", "{\"encoder\":\"x\"}", "[]",
                         "{\"encoder\":\"x\",\"head_layers\":-1}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.msg[0] = 0;
        CHECK_MSG(iv_laya_config_parse(&c, bad[i], strlen(bad[i]), &err) != 0, "accepted %s", bad[i]);
    }
    REQUIRE(iv_laya_config_parse(&c, bad[0], strlen(bad[0]), &err) != 0);
    CHECK(strstr(err.msg, "unknown key \"calibration\"") != NULL);
}
