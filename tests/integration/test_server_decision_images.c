/* Images in the typed-decision state (issue 19) through the real binary:
 * the letters and continuation recipes on the tiny Qwen3-VL, Mistral3 +
 * Pixtral, Gemma4 and Gemma4 unified (soft-capped, tied) checkpoints of
 * tools/fixtures/synthetic_vlm_letters.py answer
 * with transformers' probabilities (1e-5, the same choice; one image, and
 * two of different sizes inside chat messages), count the image tokens in
 * usage, and never fold or touch the prefix cache (media requests reject
 * folding: the fold and cache counters stay at 0 with both turned on).
 * Every refusal is a clear 4xx: a corrupt image, a remote URL, an image
 * part without its image, too many images, a state whose images take it
 * over the token limit, `assets`, and images sent to a family that reads
 * none (a text-only chat LM, Laya, Clef, pplx-decider). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/strbuf.h"
#include "server_harness.h"
#include "test.h"

static const cJSON *obj(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

/* Probabilities of got in the reference's order (noul: [false, true]). */
static int got_probabilities(const cJSON *got, const cJSON *q, double *p)
{
    const cJSON *pr = obj(got, "probabilities");
    if (!strcmp(jstr(q, "type"), "noul")) {
        p[0] = jnum(pr, "false"), p[1] = jnum(pr, "true");
        return 2;
    }
    int n = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, pr) p[n++] = x->valuedouble;
    return n;
}

typedef struct images_run {
    double max_p, max_s;
    int answers, choices_ok, choices;
} images_run;

/* Every case of the fixture's expected.json through one server. */
static void run_cases(const srv *s, const cJSON *doc, const char *recipe, const char *norm, images_run *res)
{
    char pk[64], sk[64];
    snprintf(pk, sizeof pk, norm ? "probabilities_%s" : "probabilities", norm);
    snprintf(sk, sizeof sk, norm ? "scores_%s" : "letter_logits", norm);
    const cJSON *c;
    cJSON_ArrayForEach(c, obj(doc, "cases"))
    {
        cJSON *req = cJSON_Duplicate(obj(c, "request"), 1);
        cJSON_AddTrueToObject(req, "extended");
        char *body = cJSON_PrintUnformatted(req);
        cJSON_Delete(req);
        http_resp r;
        REQUIRE(http_post(s, "/v1/systemone", body, &r) == 0);
        free(body);
        CHECK_MSG(r.status == 200, "%ld %s", r.status, r.body);
        long tokens = 0;
        const cJSON *a;
        cJSON_ArrayForEach(a, obj(obj(c, "answers"), recipe))
        {
            const cJSON *got = obj(obj(r.json, "answers"), a->string);
            const cJSON *q = obj(obj(obj(c, "request"), "questions"), a->string);
            const cJSON *wp = obj(a, pk), *ws = obj(a, sk);
            double p[64];
            const int n = got ? got_probabilities(got, q, p) : 0;
            CHECK_MSG(n == cJSON_GetArraySize(wp), "%s: %d probabilities, want %d", a->string, n,
                      cJSON_GetArraySize(wp));
            int best = 0;
            for (int j = 0; j < n && j < cJSON_GetArraySize(wp); j++) {
                const double w = cJSON_GetArrayItem(wp, j)->valuedouble, e = fabs(p[j] - w);
                res->max_p = e > res->max_p ? e : res->max_p;
                if (w > cJSON_GetArrayItem(wp, best)->valuedouble) best = j;
            }
            if (got && !strcmp(jstr(q, "type"), "choice")) {
                res->choices++;
                int k = 0;
                const cJSON *lab;
                cJSON_ArrayForEach(lab, obj(got, "probabilities")) if (k++ == best) res->choices_ok +=
                    !strcmp(jstr(got, "choice"), lab->string);
            }
            /* The extended logits: the letters' logits in prompt order, or the options' scores. */
            int j = 0;
            const cJSON *x;
            cJSON_ArrayForEach(x, obj(got, "logits"))
            {
                const double e = fabs(x->valuedouble - cJSON_GetArrayItem(ws, j++)->valuedouble);
                res->max_s = e > res->max_s ? e : res->max_s;
            }
            CHECK_MSG(j == cJSON_GetArraySize(ws), "%s: %d logits", a->string, j);
            /* usage counts every image token: the prompt as expanded (letters), or it plus the continuations. */
            const int want = norm ? jint(a, "tokens") : cJSON_GetArraySize(obj(a, "ids"));
            CHECK_EQ_INT(jint(got, "tokens"), want);
            tokens += want;
            res->answers++;
        }
        CHECK_EQ_INT(jint(obj(r.json, "usage"), "input_tokens"), (int)tokens);
        http_resp_free(&r);
    }
}

/* The fold and prefix cache counters a media request must leave at 0.
 * text_folds: the model folds a text state (so the counters are seen to be
 * live); Gemma4 folds nothing (per-layer inputs, full layers with their own
 * head geometry: models/fold.c), and its text state must leave them at 0 too. */
static void check_never_folded(const srv *s, const char *what, int text_folds)
{
    http_resp mr;
    REQUIRE(http_get(s, "/metrics", &mr) == 0);
    static const char *const series[] = {"te_prefix_fold_batches_total", "te_prefix_fold_tokens_total",
                                         "te_prefix_cache_hits_total", "te_prefix_cache_inserts_total",
                                         "te_prefix_cache_reused_tokens_total", NULL};
    for (int i = 0; series[i]; i++) {
        const double v = srv_metric(mr.body, series[i]);
        CHECK_MSG(v == 0, "%s: %s = %g after requests with images (they must never fold)", what, series[i], v);
    }
    http_resp_free(&mr);
    /* The counters are live: the same questions on a text state fold (the
     * template head and the state shared) and fill the cache. */
    const char *text = "{\"model\":\"m\",\"state\":\"A long text state that every question of this request "
                       "shares, long enough that folding pays for itself on this tiny model.\",\"questions\":{"
                       "\"a\":{\"type\":\"noul\",\"instructions\":\"one?\"},\"b\":{\"type\":\"noul\","
                       "\"instructions\":\"two?\"},\"c\":{\"type\":\"noul\",\"instructions\":\"three?\"}}}";
    http_resp r;
    REQUIRE(http_post(s, "/v1/systemone", text, &r) == 0);
    CHECK_MSG(r.status == 200, "%ld %s", r.status, r.body);
    http_resp_free(&r);
    REQUIRE(http_get(s, "/metrics", &mr) == 0);
    const double folded = srv_metric(mr.body, "te_prefix_fold_batches_total");
    const double inserts = srv_metric(mr.body, "te_prefix_cache_inserts_total");
    CHECK_MSG(text_folds ? folded > 0 && inserts > 0 : folded == 0 && inserts == 0,
              "%s: a text state gave %g folded batches, %g cache inserts", what, folded, inserts);
    http_resp_free(&mr);
}

static void one_fixture(const char *name, int text_folds)
{
    const char *dir = srv_fixture(name);
    if (!dir) return;
    char path[4200];
    snprintf(path, sizeof path, "%s/expected.json", dir);
    cJSON *doc = NULL;
    iv_err err = {0};
    REQUIRE(iv_json_load_file(path, 1 << 24, &doc, &err) == 0);
    static const char *const recipes[][3] = {{"letters", "--decision-letters", NULL},
                                             {"continuation", "--decision-continuation", "sum"},
                                             {"continuation", "--decision-continuation", "mean"}};
    for (int k = 0; k < 3; k++) {
        srv s;
        const char *args[] = {"--model-id", dir, "--prefix-fold", "true", "--prefix-cache-mb", "8", recipes[k][1],
                              recipes[k][2], NULL};
        REQUIRE(srv_start(&s, args) == 0);
        images_run res = {0};
        run_cases(&s, doc, recipes[k][0], recipes[k][2], &res);
        printf("    %s %s%s%s: %d answers, max |p - transformers| %.3g, max |logit or score - transformers| %.3g, "
               "%d/%d choices\n",
               name, recipes[k][0], recipes[k][2] ? " " : "", recipes[k][2] ? recipes[k][2] : "", res.answers,
               res.max_p, res.max_s, res.choices_ok, res.choices);
        CHECK_MSG(res.answers == 5 && res.max_p <= 1e-5 && res.max_s <= 1e-4, "p %g, logits %g over %d answers",
                  res.max_p, res.max_s, res.answers);
        CHECK_MSG(res.choices == 2 && res.choices_ok == 2, "%d of %d choices as transformers", res.choices_ok,
                  res.choices);
        check_never_folded(&s, name, text_folds);
        srv_stop(&s);
    }
    cJSON_Delete(doc);
}

TEST(srv_decision_images_match_transformers)
{
    one_fixture("qwen3_vl_letters", 1);
    one_fixture("qwen35_letters", 0); /* recurrent layers: nothing folds */
    one_fixture("mistral3_letters", 1);
    one_fixture("gemma4_letters", 0);
    one_fixture("gemma4u_letters", 0);
}

static void expect(const srv *s, const char *body, long status, const char *loc, const char *type,
                   const char *msg_has)
{
    srv_expect_detail(s, "/v1/systemone", body, status, loc, type, msg_has);
}

/* The first image of qwen3_vl_letters' expected.json (a 40 x 28 PNG). */
static char *fixture_image(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/expected.json", srv_fixture("qwen3_vl_letters"));
    cJSON *doc = NULL;
    iv_err err = {0};
    if (iv_json_load_file(path, 1 << 24, &doc, &err)) return NULL;
    const cJSON *st = obj(obj(cJSON_GetArrayItem(obj(doc, "cases"), 0), "request"), "state");
    char *url = strdup(jstr(obj(cJSON_GetArrayItem(st, 1), "image_url"), "url"));
    cJSON_Delete(doc);
    return url;
}

#define Q "\"questions\":{\"a\":{\"type\":\"noul\",\"instructions\":\"bright?\"}}"
#define BAD_BASE64 "{\"model\":\"m\",\"state\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,@@@\"}}]," Q "}"

TEST(srv_decision_images_errors)
{
    const char *dir = srv_fixture("qwen3_vl_letters");
    if (!dir) return;
    char *img = fixture_image();
    REQUIRE(img);
    srv s;
    const char *args[] = {"--model-id", dir, "--decision-letters", "--decision-max-images", "2",
                          "--decision-max-state-tokens", "24", NULL};
    REQUIRE(srv_start(&s, args) == 0);
    /* One image after a text: the body of every image request below. */
    iv_strbuf one, b;
    iv_sb_init(&one);
    iv_sb_printf(&one, "{\"model\":\"m\",\"state\":[\"x\",{\"type\":\"image_url\",\"image_url\":{\"url\":\"%s\"}}]," Q "}",
                 img);
    REQUIRE(!one.oom);
    /* The state's text alone fits the 24 tokens; its image's 20 tokens take it over: 413. */
    expect(&s, "{\"model\":\"m\",\"state\":[\"x\"]," Q "}", 200, NULL, NULL, NULL);
    expect(&s, one.data, 413, "body.state", "too_long", "of them for its 1 image(s)");
    /* More images than --decision-max-images: 413 before any is decoded. */
    iv_sb_init(&b);
    iv_sb_puts(&b, "{\"model\":\"m\",\"state\":[");
    for (int i = 0; i < 3; i++) iv_sb_printf(&b, "%s{\"type\":\"input_image\",\"image_url\":\"%s\"}", i ? "," : "", img);
    iv_sb_puts(&b, "]," Q "}");
    expect(&s, b.data, 413, "body.state", "too_long", "at most 2 images");
    iv_sb_free(&b);
    /* Bad images: clear 422s naming the image. */
    expect(&s,
           "{\"model\":\"m\",\"state\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,"
           "iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB\"}}]," Q "}",
           422, "body.state", "value_error", "image 0");
    expect(&s, BAD_BASE64, 422, "body.state", "value_error", "image 0");
    expect(&s, "{\"model\":\"m\",\"state\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://example.com/a.png\"}}]," Q "}",
           422, "body.state", "value_error", "image 0");
    expect(&s, "{\"model\":\"m\",\"state\":[{\"type\":\"image_url\",\"image_url\":{}}]," Q "}", 422, "body.state",
           "value_error", "needs its image as a string");
    expect(&s, "{\"model\":\"m\",\"state\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\",\"image_url\":7}]}]," Q "}",
           422, "body.state", "value_error", "needs its image as a string");
    expect(&s, "{\"model\":\"m\",\"state\":\"s\",\"assets\":{}," Q "}", 422, "body.assets", "value_error",
           "image_url parts");
    srv_stop(&s);

    /* Gemma4: the same limit counts its image run (<|image>, soft tokens, <image|>). */
    const char *g4_args[] = {"--model-id", srv_fixture("gemma4_letters"), "--decision-continuation", "sum",
                             "--decision-max-state-tokens", "24", NULL};
    REQUIRE(srv_start(&s, g4_args) == 0);
    expect(&s, "{\"model\":\"m\",\"state\":[\"x\"]," Q "}", 200, NULL, NULL, NULL);
    expect(&s, one.data, 413, "body.state", "too_long", "of them for its 1 image(s)");
    expect(&s, BAD_BASE64,
           422, "body.state", "value_error", "image 0");
    srv_stop(&s);

    /* Families that read no images: a text-only chat LM, Laya. */
    const char *text_args[] = {"--model-id", srv_fixture("qwen3_letters"), "--decision-letters", NULL};
    REQUIRE(srv_start(&s, text_args) == 0);
    expect(&s, one.data, 422, "body.state", "value_error", "has no vision tower");
    srv_stop(&s);
    static const char *const families[][2] = {{"laya_tiny", "the laya decision family reads no images"},
                                               {"clef_tiny", "the clef decision family reads no images"},
                                               {"pplx_v1_tiny", "the pplx-decider decision family reads no images"}};
    for (int k = 0; k < 3; k++) {
        const char *fam_args[] = {"--model-id", srv_fixture(families[k][0]), NULL};
        REQUIRE(srv_start(&s, fam_args) == 0);
        expect(&s, one.data, 422, "body.state", "value_error", families[k][1]);
        srv_stop(&s);
    }
    iv_sb_free(&one);
    free(img);
}
