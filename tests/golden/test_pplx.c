/* pplx-decider v1 against the public reference: the pplx_v1_tiny fixture
 * (tools/fixtures/synthetic_pplx.py re-derives autojev's decision_messages,
 * DecisionModel.forward and predict in torch, FP32) gives each question's
 * rendered prompt ids, the last token's final-norm hidden state, the
 * readout's option logits and the calibrated probabilities. Ids must match
 * exactly; hidden states, logits and probabilities within 1e-4, same argmax.
 * Then the sidecar checks: an unknown field, "version" (v1.2's protocol v3),
 * a code that is not one token, a readout too small. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/file.h"
#include "base/json.h"
#include "decisions/answer.h"
#include "decisions/contract.h"
#include "decisions/pplx.h"
#include "engine/engine.h"
#include "engine/inputs.h"
#include "golden_util.h"
#include "test.h"

#define MAX_ABS 1e-4

static double max_abs_json(const float *got, const cJSON *want, int n, int *count_ok)
{
    double m = 0;
    *count_ok = cJSON_GetArraySize(want) == n;
    for (int i = 0; i < n && *count_ok; i++) {
        const double e = fabs(got[i] - cJSON_GetArrayItem(want, i)->valuedouble);
        m = e > m ? e : m;
    }
    return m;
}

TEST(golden_pplx_v1_tiny_matches_reference)
{
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/models/pplx_v1_tiny", iv_test_fixtures_dir());
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
    const iv_pplx *P = iv_engine_pplx(e);
    REQUIRE(P);
    CHECK_STR(iv_engine_decision_family(e), "pplx-decider");
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
        cJSON *kw = cJSON_CreateObject();
        cJSON_AddFalseToObject(kw, "enable_thinking");
        for (int i = 0; i < req.n_questions; i++) {
            const iv_dq_question *q = &req.questions[i];
            const cJSON *a = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "answers"), q->id);
            REQUIRE(a);
            cJSON *msgs = iv_pplx_messages(P, &req, q);
            iv_input in = {.messages = msgs};
            iv_input_opts o = iv_input_opts_default();
            o.generation_prompt = IV_GEN_PROMPT_ON;
            o.chat_kwargs = kw;
            iv_prepared prep;
            REQUIRE(iv_prepare_input(e, &in, &o, &prep, &err) == 0);
            const cJSON *want_ids = cJSON_GetObjectItem(a, "ids");
            int same = prep.seq.len == cJSON_GetArraySize(want_ids);
            for (int t = 0; same && t < prep.seq.len; t++)
                same = prep.seq.ids[t] == cJSON_GetArrayItem(want_ids, t)->valueint;
            CHECK_MSG(same, "question %s: prompt ids differ from the reference (%d vs %d tokens)", q->id, prep.seq.len,
                      cJSON_GetArraySize(want_ids));
            /* The last hidden state (EMBED_ALL's last row) and the readout logits. */
            iv_outputs hs = {0}, lo = {0};
            REQUIRE(iv_engine_run(e, IV_TASK_EMBED_ALL, &prep.seq, 1, &hs, &err) == 0);
            REQUIRE(iv_engine_run(e, IV_TASK_CLASSIFY, &prep.seq, 1, &lo, &err) == 0);
            int ok;
            const double dh = max_abs_json(hs.data + (size_t)(prep.seq.len - 1) * H, cJSON_GetObjectItem(a, "hidden"),
                                           H, &ok);
            CHECK_MSG(ok, "question %s: hidden size", q->id);
            const double dl = max_abs_json(lo.data, cJSON_GetObjectItem(a, "logits"), q->n_options, &ok);
            CHECK_MSG(ok, "question %s: option count", q->id);
            double p[IV_PPLX_MAX_CODES];
            iv_pplx_probabilities(P, q, lo.data, p);
            const cJSON *wp = cJSON_GetObjectItem(a, "probabilities");
            double dp = 0, wbest = -1;
            int wargmax = 0;
            for (int k = 0; k < q->n_options; k++) {
                const double w = cJSON_GetArrayItem(wp, k)->valuedouble;
                dp = fabs(p[k] - w) > dp ? fabs(p[k] - w) : dp;
                if (w > wbest) wbest = w, wargmax = k;
            }
            CHECK_MSG(iv_dq_argmax(p, q->n_options) == wargmax, "question %s: argmax differs", q->id);
            max_h = dh > max_h ? dh : max_h;
            max_logit = dl > max_logit ? dl : max_logit;
            max_prob = dp > max_prob ? dp : max_prob;
            n_questions++;
            iv_outputs_free(&hs);
            iv_outputs_free(&lo);
            iv_prepared_free(&prep);
            cJSON_Delete(msgs);
        }
        cJSON_Delete(kw);
        iv_dq_request_free(&req);
    }
    printf("    pplx v1: %d questions, max |hidden| %.3g, |logit| %.3g, |p| %.3g\n", n_questions, max_h, max_logit,
           max_prob);
    CHECK_MSG(n_questions == 6, "%d questions", n_questions);
    CHECK_MSG(max_h <= MAX_ABS && max_logit <= MAX_ABS && max_prob <= MAX_ABS, "hidden %g logits %g p %g", max_h,
              max_logit, max_prob);
    iv_engine_free(e);
    cJSON_Delete(exp);
}

/* decision_config.json variants through iv_pplx_parse (the fixture's tokenizer). */
static int parse_config(const iv_tokenizer *tok, const char *json, iv_err *err)
{
    cJSON *cfg = cJSON_Parse(json);
    if (!cfg) return iv_errf(err, IV_E_FORMAT, "test JSON");
    iv_pplx *p = calloc(1, sizeof *p);
    const int rc = iv_pplx_parse(p, cfg, tok, err);
    iv_pplx_free(p);
    cJSON_Delete(cfg);
    return rc;
}

TEST(golden_pplx_sidecar_is_strict)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/models/pplx_v1_tiny", iv_test_fixtures_dir());
    iv_err err = {0};
    iv_engine *e = NULL;
    iv_engine_opts opts = {0};
    REQUIRE(iv_engine_load(&e, dir, &opts, &err) == 0);
    const iv_tokenizer *tok = iv_engine_tokenizer(e);
    const iv_pplx *P = iv_engine_pplx(e);
    CHECK_EQ_INT(P->n_codes, 26);
    CHECK(fabs(P->temperature - 1.37) < 1e-12);
    /* A version: v1.2's protocol v3 is refused by name. */
    memset(&err, 0, sizeof err);
    CHECK(parse_config(tok,
                       "{\"version\":3,\"template\":\"joint-question-inline-readout-v1\",\"marker\":\"<|fim_suffix|>\","
                       "\"codes\":[\"A\"],\"token_ids\":[35],\"temperature\":1}",
                       &err) != 0);
    CHECK_EQ_INT(err.code, IV_E_UNSUPPORTED);
    CHECK(strstr(err.msg, "\"version\": 3") && strstr(err.msg, "v1.2"));
    /* Unknown fields: named, all of them. */
    memset(&err, 0, sizeof err);
    CHECK(parse_config(tok, "{\"codes\":[\"A\"],\"token_ids\":[35],\"temperature\":1,\"pooling\":\"mean\",\"bias\":2}",
                       &err) != 0);
    CHECK_EQ_INT(err.code, IV_E_UNSUPPORTED);
    CHECK(strstr(err.msg, "\"pooling\"") && strstr(err.msg, "\"bias\""));
    memset(&err, 0, sizeof err);
    CHECK(parse_config(tok, "{\"format_version\":2,\"codes\":[\"A\"],\"token_ids\":[35],\"temperature\":1}", &err) != 0);
    CHECK(strstr(err.msg, "format_version"));
    /* A code that is not one token of this tokenizer, or not its listed id. */
    memset(&err, 0, sizeof err);
    CHECK(parse_config(tok, "{\"codes\":[\"AA\"],\"token_ids\":[35],\"temperature\":1}", &err) != 0);
    CHECK(strstr(err.msg, "\"AA\" is not the single token"));
    int32_t a_id = P->token_ids[0];
    char buf[256];
    snprintf(buf, sizeof buf, "{\"codes\":[\"A\"],\"token_ids\":[%d],\"temperature\":1}", a_id + 1);
    memset(&err, 0, sizeof err);
    CHECK(parse_config(tok, buf, &err) != 0);
    /* Bad values. */
    memset(&err, 0, sizeof err);
    snprintf(buf, sizeof buf, "{\"codes\":[\"A\"],\"token_ids\":[%d],\"temperature\":0}", a_id);
    CHECK(parse_config(tok, buf, &err) != 0 && strstr(err.msg, "temperature"));
    memset(&err, 0, sizeof err);
    snprintf(buf, sizeof buf, "{\"codes\":[\"A\",\"A\"],\"token_ids\":[%d,%d],\"temperature\":1}", a_id, a_id);
    CHECK(parse_config(tok, buf, &err) != 0 && strstr(err.msg, "twice"));
    memset(&err, 0, sizeof err);
    CHECK(parse_config(tok, "{\"codes\":[],\"token_ids\":[],\"temperature\":1}", &err) != 0);
    snprintf(buf, sizeof buf, "{\"format_version\":1,\"base_model\":\"x\",\"revision\":\"y\",\"codes\":[\"A\"],"
                              "\"token_ids\":[%d],\"temperature\":0.5}",
             a_id);
    CHECK(parse_config(tok, buf, &err) == 0);
    iv_engine_free(e);
}

/* A copy of the fixture with one file replaced, loaded whole: the engine
 * refuses it with the sidecar's error. */
static void copy_file(const char *from, const char *to)
{
    FILE *f = fopen(from, "rb"), *g = fopen(to, "wb");
    char buf[1 << 16];
    size_t n;
    while (f && g && (n = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, n, g);
    if (f) fclose(f);
    if (g) fclose(g);
}

TEST(golden_pplx_bad_checkpoints_are_refused)
{
    char src[4096], tmp[] = "/tmp/iv_pplx_XXXXXX", a[4300], b[4300];
    snprintf(src, sizeof src, "%s/models/pplx_v1_tiny", iv_test_fixtures_dir());
    REQUIRE(mkdtemp(tmp));
    static const char *const files[] = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                                        "chat_template.jinja", "readout.safetensors", NULL};
    for (int i = 0; files[i]; i++) {
        snprintf(a, sizeof a, "%s/%s", src, files[i]);
        snprintf(b, sizeof b, "%s/%s", tmp, files[i]);
        copy_file(a, b);
    }
    snprintf(b, sizeof b, "%s/decision_config.json", tmp);
    FILE *f = fopen(b, "w");
    REQUIRE(f);
    fputs("{\"version\": 3, \"template\": \"joint-question-inline-readout-v1\", \"marker\": \"<|fim_suffix|>\"}", f);
    fclose(f);
    iv_err err = {0};
    iv_engine *e = NULL;
    iv_engine_opts opts = {0};
    CHECK(iv_engine_load(&e, tmp, &opts, &err) != 0);
    CHECK_EQ_INT(err.code, IV_E_UNSUPPORTED);
    CHECK(strstr(err.msg, "\"version\": 3"));
    /* A v1 sidecar with more codes than the readout has rows. */
    snprintf(a, sizeof a, "%s/decision_config.json", src);
    copy_file(a, b);
    snprintf(b, sizeof b, "%s/readout.safetensors", tmp);
    f = fopen(b, "wb");
    REQUIRE(f);
    /* {"weight": F32 [2, 32]} */
    const char hdr[] = "{\"weight\":{\"dtype\":\"F32\",\"shape\":[2,32],\"data_offsets\":[0,256]}}";
    const unsigned long long n = sizeof hdr - 1;
    fwrite(&n, 8, 1, f);
    fwrite(hdr, 1, n, f);
    static const float zeros[64];
    fwrite(zeros, sizeof zeros, 1, f);
    fclose(f);
    memset(&err, 0, sizeof err);
    CHECK(iv_engine_load(&e, tmp, &opts, &err) != 0);
    CHECK(strstr(err.msg, "readout"));
    for (int i = 0; files[i]; i++) {
        snprintf(b, sizeof b, "%s/%s", tmp, files[i]);
        unlink(b);
    }
    snprintf(b, sizeof b, "%s/decision_config.json", tmp);
    unlink(b);
    rmdir(tmp);
}
