/* Clef against the published reference: the clef_tiny fixture
 * (tools/fixtures/synthetic_clef.py re-derives joint_schema_model.py's
 * encode_record, the Qwen3.5 text model and JointSchemaHead.forward in
 * torch, FP32) gives each request's joint sequence (ids, question and option
 * spans), the backbone's last hidden states, every option's raw logit and
 * the per-question softmax. The sequence and spans must match exactly;
 * hidden states, logits and probabilities within 1e-4, same argmax. Then the
 * sidecar checks: joint_head_config.json fields and the strict tensor set. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"
#include "decisions/clef.h"
#include "decisions/contract.h"
#include "engine/engine.h"
#include "golden_util.h"
#include "test.h"

#define MAX_ABS 1e-4

static int option_index(const iv_dq_question *q, const char *key)
{
    for (int j = 0; j < q->n_options; j++)
        if (!strcmp(q->options[j].key, key)) return j;
    return -1;
}

TEST(golden_clef_tiny_matches_reference)
{
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/models/clef_tiny", iv_test_fixtures_dir());
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
    const iv_clef *C = iv_engine_clef(e);
    REQUIRE(C);
    CHECK_STR(iv_engine_decision_family(e), "clef");
    iv_dq_limits lim;
    iv_dq_limits_default(&lim);
    double max_h = 0, max_logit = 0, max_prob = 0;
    int n_questions = 0;
    const int H = 32;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(exp, "cases"))
    {
        iv_dq_request req;
        iv_dq_errors de;
        iv_dq_errors_init(&de);
        REQUIRE(iv_dq_parse(cJSON_GetObjectItem(c, "request"), &lim, &req, &de) == 0);
        iv_dq_errors_free(&de);
        iv_clef_record rec;
        const cJSON *ml = cJSON_GetObjectItem(c, "max_length");
        REQUIRE(iv_clef_encode(iv_engine_tokenizer(e), &req, ml ? ml->valueint : IV_CLEF_MAX_LENGTH, &rec, &err) == 0);
        const cJSON *want_ids = cJSON_GetObjectItem(c, "ids");
        int same = rec.len == cJSON_GetArraySize(want_ids);
        for (int t = 0; same && t < rec.len; t++) same = rec.ids[t] == cJSON_GetArrayItem(want_ids, t)->valueint;
        CHECK_MSG(same, "joint sequence differs from the reference (%d vs %d tokens)", rec.len,
                  cJSON_GetArraySize(want_ids));
        iv_seq_input seq = {.ids = rec.ids, .len = rec.len};
        iv_outputs out = {0};
        REQUIRE(iv_engine_run(e, IV_TASK_EMBED_ALL, &seq, 1, &out, &err) == 0);
        const cJSON *hl = cJSON_GetObjectItem(c, "hidden_last");
        for (int r = 0; r < cJSON_GetArraySize(hl); r++) {
            const cJSON *row = cJSON_GetArrayItem(hl, r);
            const float *got = out.data + (size_t)(rec.len - cJSON_GetArraySize(hl) + r) * H;
            for (int i = 0; i < H; i++) {
                const double d = fabs(got[i] - cJSON_GetArrayItem(row, i)->valuedouble);
                max_h = d > max_h ? d : max_h;
            }
        }
        int n_opt = 0;
        for (int i = 0; i < req.n_questions; i++) n_opt += req.questions[i].n_options;
        float *logits = calloc((size_t)n_opt, sizeof(float));
        double *p = calloc((size_t)n_opt, sizeof(double));
        REQUIRE(iv_clef_answer(C, &rec, out.data, logits, p, &err) == 0);
        int k = 0;
        for (int i = 0; i < req.n_questions; i++) {
            const iv_dq_question *q = &req.questions[i];
            const cJSON *a = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "answers"), q->id);
            REQUIRE(a);
            const cJSON *span = cJSON_GetObjectItem(a, "span"), *spans = cJSON_GetObjectItem(a, "spans");
            CHECK_MSG(rec.qs[i].q0 == cJSON_GetArrayItem(span, 0)->valueint &&
                          rec.qs[i].q1 == cJSON_GetArrayItem(span, 1)->valueint,
                      "question %s: span [%d, %d)", q->id, rec.qs[i].q0, rec.qs[i].q1);
            const cJSON *keys = cJSON_GetObjectItem(a, "keys"), *wl = cJSON_GetObjectItem(a, "logits"),
                        *wp = cJSON_GetObjectItem(a, "probabilities");
            REQUIRE(cJSON_GetArraySize(keys) == q->n_options);
            int wbest = 0, gbest = 0;
            for (int j = 0; j < q->n_options; j++) {
                const cJSON *sp = cJSON_GetArrayItem(spans, j);
                CHECK_MSG(rec.qs[i].o0[j] == cJSON_GetArrayItem(sp, 0)->valueint &&
                              rec.qs[i].o1[j] == cJSON_GetArrayItem(sp, 1)->valueint,
                          "question %s option %d: span", q->id, j);
                const int o = option_index(q, cJSON_GetArrayItem(keys, j)->valuestring);
                REQUIRE(o >= 0);
                const double dl = fabs(logits[k + o] - cJSON_GetArrayItem(wl, j)->valuedouble);
                const double dp = fabs(p[k + o] - cJSON_GetArrayItem(wp, j)->valuedouble);
                max_logit = dl > max_logit ? dl : max_logit;
                max_prob = dp > max_prob ? dp : max_prob;
                if (cJSON_GetArrayItem(wp, j)->valuedouble > cJSON_GetArrayItem(wp, wbest)->valuedouble) wbest = j;
                if (p[k + o] > p[k + option_index(q, cJSON_GetArrayItem(keys, gbest)->valuestring)]) gbest = j;
            }
            CHECK_MSG(wbest == gbest, "question %s: argmax differs", q->id);
            k += q->n_options;
            n_questions++;
        }
        free(logits), free(p);
        iv_outputs_free(&out);
        iv_clef_record_free(&rec);
        iv_dq_request_free(&req);
    }
    printf("    clef: %d questions, max |hidden| %.3g, |logit| %.3g, |p| %.3g\n", n_questions, max_h, max_logit,
           max_prob);
    CHECK_MSG(n_questions == 6, "%d questions", n_questions);
    CHECK_MSG(max_h <= MAX_ABS && max_logit <= MAX_ABS && max_prob <= MAX_ABS, "hidden %g logits %g p %g", max_h,
              max_logit, max_prob);
    iv_engine_free(e);
    cJSON_Delete(exp);
}

static int parse(const char *json, iv_err *err)
{
    cJSON *j = cJSON_Parse(json);
    if (!j) return iv_errf(err, IV_E_FORMAT, "test JSON");
    iv_clef_head_config c;
    const int rc = iv_clef_parse_config(j, &c, err);
    cJSON_Delete(j);
    return rc;
}

TEST(golden_clef_sidecars_are_strict)
{
    iv_err err = {0};
    CHECK(parse("{\"hidden_size\":32,\"width\":16,\"routing_layers\":2,\"layers\":2,\"heads\":2,\"feedforward\":24,"
                "\"dropout\":0.1}",
                &err) == 0);
    memset(&err, 0, sizeof err);
    CHECK(parse("{\"hidden_size\":32,\"width\":16,\"routing_layers\":2,\"layers\":2,\"heads\":2,\"feedforward\":24,"
                "\"temperature\":1.5}",
                &err) != 0);
    CHECK_EQ_INT(err.code, IV_E_UNSUPPORTED);
    CHECK(strstr(err.msg, "\"temperature\""));
    memset(&err, 0, sizeof err);
    CHECK(parse("{\"hidden_size\":32,\"width\":16,\"routing_layers\":2,\"layers\":2,\"heads\":3,\"feedforward\":24}",
                &err) != 0);
    CHECK(strstr(err.msg, "multiple of heads"));
    memset(&err, 0, sizeof err);
    CHECK(parse("{\"hidden_size\":32,\"width\":16,\"routing_layers\":2,\"layers\":2,\"heads\":2}", &err) != 0);
    CHECK(strstr(err.msg, "feedforward is missing"));
    memset(&err, 0, sizeof err);
    CHECK(parse("{\"hidden_size\":32,\"width\":16.5,\"routing_layers\":2,\"layers\":2,\"heads\":2,\"feedforward\":24}",
                &err) != 0);
    /* The fixture's head against a config saying fewer layers: its extra tensors are refused. */
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/models/clef_tiny", iv_test_fixtures_dir());
    snprintf(path, sizeof path, "%s/joint_head.safetensors", dir);
    iv_weights *w = NULL;
    REQUIRE(iv_weights_open_file(&w, path, &err) == 0);
    iv_clef_head *h = NULL;
    iv_clef_head_config c = {.hidden_size = 32, .width = 16, .routing_layers = 1, .layers = 2, .heads = 2, .feedforward = 24};
    memset(&err, 0, sizeof err);
    CHECK(iv_clef_head_load(&h, w, &c, &err) != 0);
    CHECK(strstr(err.msg, "evidence_layers.1"));
    /* A wrong width: shapes do not match. */
    c.routing_layers = 2, c.width = 8;
    memset(&err, 0, sizeof err);
    CHECK(iv_clef_head_load(&h, w, &c, &err) != 0);
    c.width = 16;
    CHECK(iv_clef_head_load(&h, w, &c, &err) == 0);
    iv_clef_head_free(h);
    iv_weights_close(w);
    /* The head runs on the host: another device is refused at load. */
    iv_engine *e = NULL;
    iv_engine_opts opts = {.device = "emulated", .dtype = "bfloat16"};
    memset(&err, 0, sizeof err);
    CHECK(iv_engine_load(&e, dir, &opts, &err) != 0);
    CHECK_EQ_INT(err.code, IV_E_UNSUPPORTED);
    CHECK(strstr(err.msg, "CPU only"));
    iv_engine_free(e);
}
