/* POST /v1/systemone through the real binary on the decision families with
 * their own sidecars: pplx-decider v1 (pplx_v1_tiny, tools/fixtures/
 * synthetic_pplx.py) and Clef (clef_tiny, tools/fixtures/synthetic_clef.py).
 * Every case of the fixture's expected.json answered with the reference's
 * probabilities (1e-4, strict shape, same choice), the extended reply's
 * temperature and logits, usage, GET /v1/models, and the family's limits
 * (413 past its options). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/strbuf.h"
#include "server_harness.h"
#include "test.h"

static const cJSON *obj(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

/* One error reply: its status and its first detail's loc (dotted) and type. */
static void expect(const srv *s, const char *body, long status, const char *loc, const char *type)
{
    srv_expect_detail(s, "/v1/systemone", body, status, loc, type, NULL);
}

/* Posts every case of dir/expected.json (extended replies) and compares
 * each answer with the reference: probabilities (option order; noul
 * [false, true]), the choice, usage. Returns the largest error. */
static double check_cases(const srv *s, const cJSON *doc, int *n_answers, int joint)
{
    double max_err = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, obj(doc, "cases"))
    {
        cJSON *req = cJSON_Duplicate(obj(c, "request"), 1);
        cJSON_AddTrueToObject(req, "extended");
        char *body = cJSON_PrintUnformatted(req);
        cJSON_Delete(req);
        http_resp r;
        if (http_post(s, "/v1/systemone", body, &r)) {
            free(body);
            iv_test_fail(__FILE__, __LINE__, "request failed");
            return 1;
        }
        free(body);
        CHECK_MSG(r.status == 200, "status %ld: %.300s", r.status, r.body);
        int tokens = 0;
        const cJSON *a;
        cJSON_ArrayForEach(a, obj(c, "answers"))
        {
            const cJSON *got = obj(obj(r.json, "answers"), a->string);
            const cJSON *wp = obj(a, "probabilities"), *keys = obj(a, "keys");
            if (!joint) tokens += cJSON_GetArraySize(obj(a, "ids"));
            (*n_answers)++;
            CHECK_MSG(got != NULL, "answer %s missing", a->string);
            if (!got) continue;
            const cJSON *gp = obj(got, "probabilities");
            int best = 0;
            for (int i = 0; i < cJSON_GetArraySize(wp); i++) {
                /* The reference lists probabilities in its option order, keyed by keys[i]. */
                const char *key = cJSON_GetArrayItem(keys, i)->valuestring;
                const double w = cJSON_GetArrayItem(wp, i)->valuedouble;
                if (w > cJSON_GetArrayItem(wp, best)->valuedouble) best = i;
                const cJSON *g = obj(gp, key);
                CHECK_MSG(cJSON_IsNumber(g), "answer %s: no probability for %s", a->string, key);
                if (!cJSON_IsNumber(g)) continue;
                const double e = fabs(g->valuedouble - w);
                max_err = e > max_err ? e : max_err;
            }
            const cJSON *choice = obj(got, "choice");
            if (choice) CHECK_STR(choice->valuestring, cJSON_GetArrayItem(keys, best)->valuestring);
            const cJSON *logits = obj(got, "logits");
            CHECK_MSG(cJSON_GetArraySize(logits) == cJSON_GetArraySize(wp), "answer %s: %d logits", a->string,
                      cJSON_GetArraySize(logits));
        }
        if (joint) tokens = cJSON_GetArraySize(obj(c, "ids"));
        const cJSON *u = obj(obj(r.json, "usage"), "input_tokens");
        CHECK_MSG(cJSON_IsNumber(u) && u->valueint == tokens, "usage %d, want %d", u ? u->valueint : -1, tokens);
        http_resp_free(&r);
    }
    return max_err;
}

static cJSON *load_expected(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/expected.json", dir);
    cJSON *doc = NULL;
    iv_err err = {0};
    if (iv_json_load_file(path, 1 << 24, &doc, &err)) iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
    return doc;
}

TEST(srv_decisions_pplx_v1_matches_reference)
{
    const char *dir = srv_fixture("pplx_v1_tiny");
    if (!dir) return;
    cJSON *doc = load_expected(dir);
    REQUIRE(doc);
    srv s;
    const char *args[] = {"--model-id", dir, "--served-model-name", "pplx", "--decision-max-state-tokens", "200", NULL};
    REQUIRE(srv_start(&s, args) == 0);
    int n = 0;
    const double max_err = check_cases(&s, doc, &n, 0);
    printf("    pplx v1 over HTTP: %d answers, max |p - reference| %.3g\n", n, max_err);
    CHECK_MSG(n == 6 && max_err <= 1e-4, "max error %g over %d answers", max_err, n);
    /* The extended reply names the sidecar's temperature. */
    http_resp r;
    REQUIRE(http_post(&s, "/v1/systemone",
                      "{\"model\":\"pplx\",\"state\":\"s\",\"extended\":true,\"questions\":{\"a\":{\"type\":\"noul\"}}}",
                      &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    const cJSON *t = obj(obj(obj(r.json, "answers"), "a"), "temperature");
    CHECK(cJSON_IsNumber(t) && fabs(t->valuedouble - 1.37) < 1e-9);
    http_resp_free(&r);
    /* GET /v1/models lists it in the decisions form. */
    REQUIRE(http_do(&s, "GET", "/v1/models", NULL, 0, NULL, &r) == 0);
    CHECK(r.body && strstr(r.body, "pplx-decider v1"));
    http_resp_free(&r);
    /* More options than the sidecar has codes (26): 413. */
    iv_strbuf big;
    iv_sb_init(&big);
    iv_sb_puts(&big, "{\"model\":\"pplx\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"choice\",\"criteria\":[");
    for (int i = 0; i < 27; i++) iv_sb_printf(&big, "%s\"o%d\"", i ? "," : "", i);
    iv_sb_puts(&big, "]}}}");
    expect(&s, big.data, 413, "body.questions.a.criteria", "too_long");
    iv_sb_free(&big);
    srv_stop(&s);
    cJSON_Delete(doc);
}

/* Clef: each request is one joint sequence; usage counts its tokens once. */
TEST(srv_decisions_clef_matches_reference)
{
    const char *dir = srv_fixture("clef_tiny");
    if (!dir) return;
    cJSON *doc = load_expected(dir);
    REQUIRE(doc);
    srv s;
    const char *args[] = {"--model-id", dir, "--served-model-name", "clef", "--decision-max-state-tokens", "3000", NULL};
    REQUIRE(srv_start(&s, args) == 0);
    int n = 0;
    const double max_err = check_cases(&s, doc, &n, 1);
    printf("    clef over HTTP: %d answers, max |p - reference| %.3g\n", n, max_err);
    CHECK_MSG(n == 6 && max_err <= 1e-4, "max error %g over %d answers", max_err, n);
    /* Joint: renaming a question changes the prompt, so its answers move
     * (the reference prints every id); the strict shape stays. */
    http_resp r1, r2;
    REQUIRE(http_post(&s, "/v1/systemone",
                      "{\"model\":\"clef\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"noul\"},\"b\":{\"type\":"
                      "\"score\",\"criteria\":[\"x\",\"y\"]}}}",
                      &r1) == 0);
    REQUIRE(http_post(&s, "/v1/systemone",
                      "{\"model\":\"clef\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"noul\"},\"c\":{\"type\":"
                      "\"score\",\"criteria\":[\"x\",\"y\"]}}}",
                      &r2) == 0);
    CHECK_EQ_INT(r1.status, 200);
    CHECK_EQ_INT(r2.status, 200);
    const cJSON *n1 = obj(obj(obj(r1.json, "answers"), "a"), "noul"), *n2 = obj(obj(obj(r2.json, "answers"), "a"), "noul");
    CHECK(cJSON_IsNumber(n1) && cJSON_IsNumber(n2) && n1->valuedouble != n2->valuedouble);
    CHECK(obj(obj(obj(r1.json, "answers"), "b"), "legend") != NULL);
    http_resp_free(&r1);
    http_resp_free(&r2);
    http_resp r;
    REQUIRE(http_do(&s, "GET", "/v1/models", NULL, 0, NULL, &r) == 0);
    CHECK(r.body && strstr(r.body, "Clef joint"));
    http_resp_free(&r);
    /* The state limit (3000 tokens) is 413. */
    iv_strbuf big;
    iv_sb_init(&big);
    iv_sb_puts(&big, "{\"model\":\"clef\",\"state\":\"");
    for (int i = 0; i < 4000; i++) iv_sb_puts(&big, "word ");
    iv_sb_puts(&big, "\",\"questions\":{\"a\":{\"type\":\"noul\"}}}");
    expect(&s, big.data, 413, "body.state", "too_long");
    /* More options than the contract allows: 413 before the model. */
    iv_sb_reset(&big);
    iv_sb_puts(&big, "{\"model\":\"clef\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"choice\",\"criteria\":[");
    for (int i = 0; i < 256; i++) iv_sb_printf(&big, "%s\"o%d\"", i ? "," : "", i);
    iv_sb_puts(&big, "]}}}");
    expect(&s, big.data, 413, "body.questions.a.criteria", "too_long");
    iv_sb_free(&big);
    srv_stop(&s);
    cJSON_Delete(doc);
}
