/* POST /v1/systemone and /v1/decisions through the real binary on the
 * laya_tiny fixture: every case of expected.json (the re-derived laya
 * reference) answered in the strict Jev shape with the reference's
 * probabilities (1e-4), the confidence formulas, the extended shape per
 * request and per server flag, GET /v1/models in the decisions form, and
 * every error path (422 detail lists, 413 limits, 404 model, 400 JSON,
 * 401 without the key). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/strbuf.h"
#include "server_harness.h"
#include "test.h"

static const cJSON *obj(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

/* Keys of o, in order, joined by ','. */
static void keys_of(const cJSON *o, char *buf, size_t cap)
{
    buf[0] = 0;
    for (const cJSON *c = o ? o->child : NULL; c; c = c->next) {
        if (buf[0]) strncat(buf, ",", cap - strlen(buf) - 1);
        strncat(buf, c->string, cap - strlen(buf) - 1);
    }
}

TEST(srv_decisions_match_reference)
{
    const char *dir = srv_fixture("laya_tiny");
    if (!dir) return;
    char path[4200];
    snprintf(path, sizeof path, "%s/expected.json", dir);
    cJSON *doc = NULL;
    iv_err err = {0};
    REQUIRE(iv_json_load_file(path, 1 << 24, &doc, &err) == 0);
    srv s;
    const char *args[] = {"--model-id", dir, "--served-model-name", "laya-tiny", NULL};
    REQUIRE(srv_start(&s, args) == 0);
    double max_err = 0;
    int n_cases = 0, n_answers = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, obj(doc, "cases"))
    {
        char *body = cJSON_PrintUnformatted(obj(c, "request"));
        http_resp r;
        REQUIRE(http_post(&s, n_cases % 2 ? "/v1/decisions" : "/v1/systemone", body, &r) == 0);
        free(body);
        CHECK_EQ_INT(r.status, 200);
        char keys[512];
        keys_of(r.json, keys, sizeof keys);
        CHECK_MSG(!strcmp(keys, "model,answers,usage"), "reply keys %s", keys);
        CHECK(!strcmp(jstr(r.json, "model"), "laya-tiny"));
        char rid[160], tid[160];
        CHECK(http_header(&r, "x-request-id", rid, sizeof rid) && http_header(&r, "x-typesafe-request-id", tid, sizeof tid) &&
              !strcmp(rid, tid));
        const cJSON *answers = obj(r.json, "answers"), *want = obj(c, "answers");
        keys_of(answers, keys, sizeof keys);
        char wkeys[512];
        keys_of(obj(obj(c, "request"), "questions"), wkeys, sizeof wkeys);
        CHECK_MSG(!strcmp(keys, wkeys), "answer keys %s vs question keys %s", keys, wkeys);
        int tokens = 0;
        const cJSON *a;
        cJSON_ArrayForEach(a, want)
        {
            const cJSON *got = obj(answers, a->string);
            const cJSON *q = obj(obj(obj(c, "request"), "questions"), a->string);
            const char *type = jstr(q, "type");
            const cJSON *wp = obj(a, "probabilities");
            const int k = cJSON_GetArraySize(wp);
            tokens += cJSON_GetArraySize(obj(a, "ids"));
            double p[256], sum = 0;
            int m = 0;
            for (int i = 0; i < k; i++) {
                p[i] = cJSON_GetArrayItem(wp, i)->valuedouble;
                if (p[i] > p[m]) m = i;
            }
            keys_of(got, keys, sizeof keys);
            n_answers++;
            if (!strcmp(type, "noul")) {
                CHECK_MSG(!strcmp(keys, "type,noul"), "noul keys %s", keys);
                const double e = fabs(jnum(got, "noul") - p[1]);
                max_err = e > max_err ? e : max_err;
                continue;
            }
            const cJSON *gp = obj(got, "probabilities");
            CHECK(cJSON_GetArraySize(gp) == k);
            int i = 0;
            const cJSON *x;
            cJSON_ArrayForEach(x, gp)
            {
                const double e = fabs(x->valuedouble - p[i++]);
                max_err = e > max_err ? e : max_err;
                sum += x->valuedouble;
            }
            CHECK_MSG(fabs(sum - 1) < 1e-6, "%s: probabilities sum to %g", a->string, sum);
            if (!strcmp(type, "choice")) {
                CHECK_MSG(!strcmp(keys, "type,choice,probabilities,confidence"), "choice keys %s", keys);
                CHECK(!strcmp(jstr(got, "choice"), cJSON_GetArrayItem(gp, m)->string));
                const double want_conf = k == 1 ? 1.0 : fmax(0, (p[m] - 1.0 / k) / (1 - 1.0 / k));
                CHECK_MSG(fabs(jnum(got, "confidence") - want_conf) < 1e-4, "%s confidence %g vs %g", a->string,
                          jnum(got, "confidence"), want_conf);
            } else {
                CHECK_MSG(!strcmp(keys, "type,score,probabilities,confidence,legend"), "score keys %s", keys);
                double ev = 0, spread = 0, uni = 0;
                for (int j = 0; j < k; j++) {
                    ev += j * p[j];
                    spread += p[j] * fabs((double)(j - m));
                    uni += fabs(j - (k - 1) / 2.0) / k;
                }
                CHECK(fabs(jnum(got, "score") - ev) < 1e-4);
                CHECK(fabs(jnum(got, "confidence") - fmax(0, 1 - spread / uni)) < 1e-4);
                CHECK(cJSON_GetArraySize(obj(got, "legend")) == k);
                CHECK(cJSON_IsString(obj(obj(got, "legend"), "0")) || cJSON_IsArray(obj(obj(got, "legend"), "0")) ||
                      cJSON_IsObject(obj(obj(got, "legend"), "0")));
            }
        }
        CHECK_EQ_INT(jint(obj(r.json, "usage"), "input_tokens"), tokens);
        CHECK_EQ_INT(jint(obj(r.json, "usage"), "output_tokens"), 0);
        http_resp_free(&r);
        n_cases++;
    }
    printf("    %d requests, %d answers, max |p - reference| %.3g\n", n_cases, n_answers, max_err);
    CHECK_MSG(max_err <= 1e-4, "max error %g", max_err);

    /* Extended per request: the type, Laya's confidences, temperature, tokens, logits, act probability. */
    http_resp r;
    REQUIRE(http_post(&s, "/v1/systemone",
                      "{\"model\":\"laya-tiny\",\"extended\":true,\"state\":\"abc\",\"questions\":{"
                      "\"n\":{\"type\":\"noul\",\"instructions\":\"x\"},\"c\":{\"type\":\"choice\",\"criteria\":[\"a\",\"b\",\"c\"]}}}",
                      &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    const cJSON *n = obj(obj(r.json, "answers"), "n"), *ch = obj(obj(r.json, "answers"), "c");
    CHECK(!strcmp(jstr(n, "type"), "noul") && cJSON_GetArraySize(obj(n, "probabilities")) == 2);
    CHECK(fabs(jnum(n, "confidence") - fmax(jnum(n, "noul"), 1 - jnum(n, "noul"))) < 1e-6);
    CHECK(jnum(n, "temperature") == 0.75 && jint(n, "tokens") > 0 && cJSON_GetArraySize(obj(n, "logits")) == 2);
    CHECK(jnum(ch, "temperature") > 1.76 && jnum(ch, "temperature") < 1.761); /* choice:3-5 */
    CHECK(jnum(ch, "entropy_confidence") >= 0 && jnum(ch, "answer_confidence") > 0.33);
    CHECK(jnum(ch, "act_probability") >= 0 && jnum(ch, "act_probability") <= 1);
    http_resp_free(&r);

    /* GET /v1/models: the OpenAI list and the System One models list. */
    REQUIRE(http_get(&s, "/v1/models", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    const cJSON *models = obj(r.json, "models");
    CHECK(cJSON_GetArraySize(models) == 1 && !strcmp(jstr(cJSON_GetArrayItem(models, 0), "name"), "laya-tiny"));
    CHECK(cJSON_IsString(obj(cJSON_GetArrayItem(models, 0), "description")) &&
          strlen(jstr(cJSON_GetArrayItem(models, 0), "release_date")) == 10);
    CHECK(cJSON_GetArraySize(obj(r.json, "data")) == 1);
    http_resp_free(&r);
    srv_stop(&s);
    cJSON_Delete(doc);
}

/* status and the first detail item's loc joined by '.', and its type. */
static void expect(const srv *s, const char *body, long status, const char *loc, const char *type)
{
    srv_expect_detail(s, "/v1/systemone", body, status, loc, type, NULL);
}

TEST(srv_decisions_errors)
{
    const char *dir = srv_fixture("laya_tiny");
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, "--decision-max-questions", "3", "--decision-max-state-tokens", "50", NULL};
    REQUIRE(srv_start(&s, args) == 0);
    const char *Q = "\"questions\":{\"a\":{\"type\":\"noul\"}}";
    char b[4096];
    snprintf(b, sizeof b, "{\"state\":\"s\",%s}", Q);
    expect(&s, b, 422, "body.model", "missing");
    snprintf(b, sizeof b, "{\"model\":\"m\",%s}", Q);
    expect(&s, b, 422, "body.state", "missing");
    snprintf(b, sizeof b, "{\"model\":\"m\",\"state\":true,%s}", Q);
    expect(&s, b, 422, "body.state", "type_error");
    snprintf(b, sizeof b, "{\"model\":\"m\",\"state\":\"s\",\"stream\":true,%s}", Q);
    expect(&s, b, 422, "body.stream", "extra_forbidden");
    expect(&s, "{\"model\":\"m\",\"state\":\"s\"}", 422, "body.questions", "missing");
    expect(&s, "{\"model\":\"m\",\"state\":\"s\",\"questions\":{}}", 422, "body.questions", "too_short");
    expect(&s, "{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"box\"}}}", 422, "body.questions.a.type",
           "literal_error");
    expect(&s, "{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"choice\"}}}", 422,
           "body.questions.a.criteria", "missing");
    expect(&s, "{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"score\",\"criteria\":\"x\"}}}", 422,
           "body.questions.a.criteria", "list_type");
    expect(&s, "{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"noul\",\"criteria\":{\"x\":1}}}}", 422,
           "body.questions.a.criteria.x", "extra_forbidden");
    expect(&s, "{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"noul\",\"extra\":1}}}", 422,
           "body.questions.a.extra", "extra_forbidden");
    expect(&s, "{\"model\":\"m\",\"state\":[\"hi\",{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:,\"}}],"
               "\"questions\":{\"a\":{\"type\":\"noul\"}}}",
           422, "body.state", "value_error");
    /* Limits: 413. */
    expect(&s, "{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"noul\"},\"b\":{\"type\":\"noul\"},"
               "\"c\":{\"type\":\"noul\"},\"d\":{\"type\":\"noul\"}}}",
           413, "body.questions", "too_long");
    expect(&s, "{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"score\",\"criteria\":"
               "[\"0\",\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\"]}}}",
           413, "body.questions.a.criteria", "too_long");
    snprintf(b, sizeof b, "{\"model\":\"m\",\"state\":\"%s\",%s}",
             "a b c d e f g h i j k l m n o p q r s t u v w x y z a b c d e f g h i j k l m n o p q r s t u v w x y z", Q);
    expect(&s, b, 413, "body.state", "too_long");
    /* Options that cannot fit the sequence (96 tokens; 4 tokens per option at least). */
    iv_strbuf big;
    iv_sb_init(&big);
    iv_sb_puts(&big, "{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"choice\",\"criteria\":[");
    for (int i = 0; i < 30; i++) iv_sb_printf(&big, "%s\"abcdefgh %d\"", i ? "," : "", i);
    iv_sb_puts(&big, "]}}}");
    expect(&s, big.data, 422, "body.questions.a.criteria", "value_error");
    iv_sb_free(&big);
    /* Malformed JSON: 400. */
    http_resp r;
    REQUIRE(http_post(&s, "/v1/systemone", "{\"model\":", &r) == 0);
    CHECK_EQ_INT(r.status, 400);
    http_resp_free(&r);
    /* No streaming, no GET. */
    REQUIRE(http_get(&s, "/v1/systemone", &r) == 0);
    CHECK_EQ_INT(r.status, 405);
    http_resp_free(&r);
    srv_stop(&s);
}

TEST(srv_decisions_flags)
{
    const char *dir = srv_fixture("laya_tiny");
    const char *bert = srv_fixture("bert");
    if (!dir || !bert) return;
    srv s;
    const char *args[] = {"--model-id", dir, "--served-model-name", "laya", "--model-id", bert, "--served-model-name",
                          "bert", "--decision-extended", "--decision-lenient", "--api-key", "k", NULL};
    REQUIRE(srv_start(&s, args) == 0);
    const char *auth[] = {"Authorization: Bearer k", "Content-Type: application/json", NULL};
    const char *body = "{\"model\":\"laya\",\"state\":\"s\",\"x\":1,\"questions\":{\"a\":{\"type\":\"noul\",\"y\":2}}}";
    http_resp r;
    /* 401 without the key. */
    REQUIRE(http_post(&s, "/v1/systemone", body, &r) == 0);
    CHECK_EQ_INT(r.status, 401);
    http_resp_free(&r);
    /* Lenient: unknown fields accepted; extended by the server flag. */
    REQUIRE(http_do(&s, "POST", "/v1/systemone", body, strlen(body), auth, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK(cJSON_IsNumber(obj(obj(obj(r.json, "answers"), "a"), "temperature")));
    http_resp_free(&r);
    /* A model that answers no decisions, and one that is not served. */
    const char *b2 = "{\"model\":\"bert\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"noul\"}}}";
    REQUIRE(http_do(&s, "POST", "/v1/decisions", b2, strlen(b2), auth, &r) == 0);
    CHECK_EQ_INT(r.status, 422);
    CHECK(r.body && strstr(r.body, "does not answer typed decisions"));
    http_resp_free(&r);
    const char *b3 = "{\"model\":\"nope\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"noul\"}}}";
    REQUIRE(http_do(&s, "POST", "/v1/decisions", b3, strlen(b3), auth, &r) == 0);
    CHECK_EQ_INT(r.status, 404);
    CHECK(r.body && strstr(r.body, "model_not_found"));
    http_resp_free(&r);
    srv_stop(&s);
}

/* The letters contract on a chat LM (--decision-letters): a fixture of
 * tools/fixtures/synthetic_letters.py (transformers' apply_chat_template and
 * LM logits at the letters) answered over HTTP within 1e-4; the server is
 * left running for more checks (srv_stop by the caller). */
static int letters_match(srv *s, const char *name)
{
    const char *dir = srv_fixture(name);
    if (!dir) return -1;
    char path[4200];
    snprintf(path, sizeof path, "%s/expected.json", dir);
    cJSON *doc = NULL;
    iv_err err = {0};
    if (iv_json_load_file(path, 1 << 24, &doc, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s: %s", path, err.msg);
        return -1;
    }
    const char *args[] = {"--model-id", dir, "--decision-letters", "--decision-max-state-tokens", "100", NULL};
    if (srv_start(s, args)) {
        iv_test_fail(__FILE__, __LINE__, "%s: the server did not start", name);
        cJSON_Delete(doc);
        return -1;
    }
    double max_err = 0;
    int n_answers = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, obj(doc, "cases"))
    {
        char *body = cJSON_PrintUnformatted(obj(c, "request"));
        http_resp r;
        const int posted = http_post(s, "/v1/systemone", body, &r);
        free(body);
        if (posted) {
            iv_test_fail(__FILE__, __LINE__, "%s: no answer from the server", name);
            break;
        }
        CHECK_EQ_INT(r.status, 200);
        int tokens = 0;
        const cJSON *a;
        cJSON_ArrayForEach(a, obj(c, "answers"))
        {
            const cJSON *got = obj(obj(r.json, "answers"), a->string);
            const cJSON *wp = obj(a, "probabilities");
            tokens += cJSON_GetArraySize(obj(a, "ids"));
            n_answers++;
            if (cJSON_HasObjectItem(got, "noul")) {
                const double e = fabs(jnum(got, "noul") - cJSON_GetArrayItem(wp, 1)->valuedouble);
                max_err = e > max_err ? e : max_err;
                continue;
            }
            int i = 0;
            const cJSON *x;
            cJSON_ArrayForEach(x, obj(got, "probabilities"))
            {
                const double e = fabs(x->valuedouble - cJSON_GetArrayItem(wp, i++)->valuedouble);
                max_err = e > max_err ? e : max_err;
            }
            CHECK(i == cJSON_GetArraySize(wp));
        }
        CHECK_EQ_INT(jint(obj(r.json, "usage"), "input_tokens"), tokens);
        http_resp_free(&r);
    }
    printf("    letters (%s): %d answers, max |p - transformers| %.3g\n", name, n_answers, max_err);
    CHECK_MSG(n_answers == 5 && max_err <= 1e-4, "%s: max error %g over %d answers", name, max_err, n_answers);
    cJSON_Delete(doc);
    return 0;
}

TEST(srv_decisions_letters_match_transformers)
{
    srv s;
    if (letters_match(&s, "qwen3_letters")) return;
    /* More options than letters: 413. */
    iv_strbuf big;
    iv_sb_init(&big);
    iv_sb_puts(&big, "{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"choice\",\"criteria\":[");
    for (int i = 0; i < 53; i++) iv_sb_printf(&big, "%s\"o%d\"", i ? "," : "", i);
    iv_sb_puts(&big, "]}}}");
    expect(&s, big.data, 413, "body.questions.a.criteria", "too_long");
    /* The state token limit applies here too. */
    iv_sb_reset(&big);
    iv_sb_puts(&big, "{\"model\":\"m\",\"state\":\"");
    for (int i = 0; i < 200; i++) iv_sb_puts(&big, "word ");
    iv_sb_puts(&big, "\",\"questions\":{\"a\":{\"type\":\"noul\"}}}");
    expect(&s, big.data, 413, "body.state", "too_long");
    iv_sb_free(&big);
    srv_stop(&s);
}

/* A soft-capped checkpoint (Gemma3ForCausalLM, final_logit_softcapping):
 * the letters' logits are capped before the softmax, as transformers caps them. */
TEST(srv_decisions_letters_softcapped_match_transformers)
{
    srv s;
    if (letters_match(&s, "gemma3_letters") == 0) srv_stop(&s);
}

/* The tokens of a question's deduplicated sequences (prefix + cont[:t], for
 * every option and t < |cont|), from the reference's ids. */
static long question_sequence_tokens(const cJSON *a)
{
    const int pre = cJSON_GetArraySize(obj(a, "prefix_ids"));
    const cJSON *conts = obj(a, "continuation_ids");
    long total = 0;
    for (int j = 0; j < cJSON_GetArraySize(conts); j++) {
        const cJSON *cj = cJSON_GetArrayItem(conts, j);
        for (int t = 0; t < cJSON_GetArraySize(cj); t++) {
            int seen = 0;
            for (int i = 0; i < j && !seen; i++) {
                const cJSON *ci = cJSON_GetArrayItem(conts, i);
                seen = cJSON_GetArraySize(ci) > t;
                for (int u = 0; seen && u < t; u++)
                    seen = cJSON_GetArrayItem(ci, u)->valueint == cJSON_GetArrayItem(cj, u)->valueint;
            }
            if (!seen) total += pre + t;
        }
    }
    return total;
}

/* The continuation contract (--decision-continuation sum|mean) over HTTP on
 * the qwen3_letters checkpoint against transformers
 * (expected_continuation.json, tools/fixtures/synthetic_continuation.py):
 * probabilities within 1e-4 and the same choice, the extended reply's
 * logits (the option scores) within 1e-4, usage as the prefix plus every
 * option's continuation; "sum" with folding on, "mean" with folding off
 * (folding exact either way). A choice label with no tokens is 422. */
static void continuation_server(const cJSON *doc, const char *norm, const char *fold)
{
    const char *dir = srv_fixture("qwen3_letters");
    srv s;
    const char *args[] = {"--model-id", dir, "--decision-continuation", norm, "--prefix-fold", fold, NULL};
    REQUIRE(srv_start(&s, args) == 0);
    char pk[64], sk[64];
    snprintf(pk, sizeof pk, "probabilities_%s", norm);
    snprintf(sk, sizeof sk, "scores_%s", norm);
    double max_p = 0, max_s = 0;
    int n_answers = 0, n_choice_ok = 0, n_choice = 0, c_i = 0;
    long seq_tokens = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, obj(doc, "cases"))
    {
        cJSON *req = cJSON_Duplicate(obj(c, "request"), 1);
        if (c_i++ % 2) cJSON_AddTrueToObject(req, "extended");
        char *body = cJSON_PrintUnformatted(req);
        cJSON_Delete(req);
        http_resp r;
        REQUIRE(http_post(&s, "/v1/systemone", body, &r) == 0);
        free(body);
        CHECK_MSG(r.status == 200, "%ld %s", r.status, r.body);
        int tokens = 0;
        const cJSON *a;
        cJSON_ArrayForEach(a, obj(c, "answers"))
        {
            const cJSON *got = obj(obj(r.json, "answers"), a->string);
            const cJSON *wp = obj(a, pk), *ws = obj(a, sk);
            tokens += jint(a, "tokens");
            seq_tokens += question_sequence_tokens(a);
            n_answers++;
            if (cJSON_HasObjectItem(got, "noul")) {
                const double e = fabs(jnum(got, "noul") - cJSON_GetArrayItem(wp, 1)->valuedouble);
                max_p = e > max_p ? e : max_p;
            } else {
                int i = 0, best = 0;
                const cJSON *x;
                cJSON_ArrayForEach(x, obj(got, "probabilities"))
                {
                    const double w = cJSON_GetArrayItem(wp, i)->valuedouble;
                    if (w > cJSON_GetArrayItem(wp, best)->valuedouble) best = i;
                    const double e = fabs(x->valuedouble - w);
                    max_p = e > max_p ? e : max_p;
                    i++;
                }
                CHECK(i == cJSON_GetArraySize(wp));
                if (cJSON_HasObjectItem(got, "choice")) {
                    n_choice++;
                    int k = 0;
                    const cJSON *lab;
                    cJSON_ArrayForEach(lab, obj(got, "probabilities")) if (k++ == best) n_choice_ok +=
                        !strcmp(jstr(got, "choice"), lab->string);
                }
            }
            const cJSON *lg = obj(got, "logits");
            if (lg) {
                int i = 0;
                const cJSON *x;
                cJSON_ArrayForEach(x, lg)
                {
                    const double e = fabs(x->valuedouble - cJSON_GetArrayItem(ws, i++)->valuedouble);
                    max_s = e > max_s ? e : max_s;
                }
                CHECK(i == cJSON_GetArraySize(ws));
                CHECK_EQ_INT(jint(got, "tokens"), jint(a, "tokens"));
            }
        }
        CHECK_EQ_INT(jint(obj(r.json, "usage"), "input_tokens"), tokens);
        http_resp_free(&r);
    }
    printf("    continuation %s (fold %s): %d answers, max |p - transformers| %.3g, max |score - transformers| %.3g\n",
           norm, fold, n_answers, max_p, max_s);
    CHECK_MSG(n_answers == 7 && max_p <= 1e-4 && max_s <= 1e-4, "p %g, score %g over %d answers", max_p, max_s,
              n_answers);
    CHECK_MSG(n_choice == 3 && n_choice_ok == n_choice, "%d of %d choices as the reference", n_choice_ok, n_choice);
    /* Each request's sequences went in one batch (iv_input_opts.together:
     * none ran alone before the others were tokenized), and each such batch
     * folds (the state and the questions' prompts shared): 3 folded batches
     * holding every sequence's tokens. */
    http_resp mr;
    if (http_get(&s, "/metrics", &mr) == 0) {
        const int on = !strcmp(fold, "true");
        const double folded = srv_metric(mr.body, "te_prefix_fold_batches_total");
        const double ftok = srv_metric(mr.body, "te_prefix_fold_tokens_total");
        const double fcomp = srv_metric(mr.body, "te_prefix_fold_computed_tokens_total");
        printf("    fold %s: %g folded batches, %g tokens, %g computed\n", fold, folded, ftok, fcomp);
        CHECK_MSG(folded == (on ? 3 : 0), "%g folded batches (fold %s)", folded, fold);
        CHECK_MSG(ftok == (on ? (double)seq_tokens : 0), "%g folded tokens, the sequences hold %ld", ftok, seq_tokens);
        http_resp_free(&mr);
    }
    expect(&s, "{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"choice\",\"criteria\":[\"\",\"x\"]}}}",
           422, "body.questions.a", "value_error");
    /* Too many scored sequences (IV_CONT_MAX_SEQUENCES): 413. */
    iv_strbuf big;
    iv_sb_init(&big);
    iv_sb_puts(&big, "{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"choice\",\"criteria\":[");
    for (int i = 0; i < 60; i++) iv_sb_printf(&big, "%s\"option number %d with a rather long label\"", i ? "," : "", i);
    iv_sb_puts(&big, "]}}}");
    expect(&s, big.data, 413, "body.questions", "too_long");
    iv_sb_free(&big);
    srv_stop(&s);
}

TEST(srv_decisions_continuation_match_transformers)
{
    const char *dir = srv_fixture("qwen3_letters");
    if (!dir) return;
    char path[4200];
    snprintf(path, sizeof path, "%s/expected_continuation.json", dir);
    cJSON *doc = NULL;
    iv_err err = {0};
    REQUIRE(iv_json_load_file(path, 1 << 24, &doc, &err) == 0);
    continuation_server(doc, "sum", "true");
    continuation_server(doc, "mean", "false");
    cJSON_Delete(doc);
}
