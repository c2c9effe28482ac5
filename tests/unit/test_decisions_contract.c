/* The typed-decision contract without a model: request validation (every
 * error path gives a FastAPI detail item), criteria rendering, Python-style
 * JSON text of object states, and the confidence formulas on hand-computed
 * cases. */
#include <stdlib.h>
#include <string.h>
#include "decisions/answer.h"
#include "decisions/contract.h"
#include "decisions/pyjson.h"
#include "decisions/state_images.h"
#include "test.h"

static int parse(const char *json, iv_dq_request *r, iv_dq_errors *e, int lenient)
{
    cJSON *j = cJSON_Parse(json);
    iv_dq_limits lim;
    iv_dq_limits_default(&lim);
    lim.lenient = lenient;
    iv_dq_errors_init(e);
    int rc = j ? iv_dq_parse(j, &lim, r, e) : -2;
    cJSON_Delete(j);
    return rc;
}

/* 1 when the request fails with `status` and an item whose text contains `needle`. */
static int fails_with(const char *json, int status, const char *needle)
{
    iv_dq_request r;
    iv_dq_errors e;
    int rc = parse(json, &r, &e, 0);
    int ok = rc == -1 && e.status == status && e.items.data && strstr(e.items.data, needle);
    if (!ok) fprintf(stderr, "  %s -> rc %d status %d %s\n", json, rc, e.status, e.items.data ? e.items.data : "");
    if (rc == 0) iv_dq_request_free(&r);
    iv_dq_errors_free(&e);
    return ok;
}

TEST(decisions_contract_parses_every_type)
{
    iv_dq_request r;
    iv_dq_errors e;
    REQUIRE(parse("{\"model\":\"m\",\"state\":{\"a\":1,\"b\":[true,null,2.5,\"\\u00e9\"]},\"questions\":{"
                  "\"n\":{\"type\":\"noul\",\"instructions\":\"x?\",\"criteria\":{\"TRUE\":\"yes\"}},"
                  "\"c\":{\"type\":\"choice\",\"instructions\":{\"k\":\"v\"},\"criteria\":{\"a\":null,\"b\":\"\",\"c\":{\"d\":1}}},"
                  "\"l\":{\"type\":\"choice\",\"criteria\":[\"x\",\"y\"]},"
                  "\"s\":{\"type\":\"score\",\"instructions\":\"rate\",\"criteria\":[\"low\",\"\",[1]]}}}",
                  &r, &e, 0) == 0);
    CHECK(!strcmp(r.model, "m"));
    CHECK(r.state_kind == IV_DQ_STATE_OBJECT);
    CHECK(!strcmp(r.state_text, "{\"a\": 1, \"b\": [true, null, 2.5, \"\xc3\xa9\"]}"));
    REQUIRE(r.n_questions == 4);
    const iv_dq_question *n = &r.questions[0], *c = &r.questions[1], *s = &r.questions[3];
    CHECK(n->type == IV_DQ_NOUL && n->n_options == 2 && !strcmp(n->options[0].key, "false"));
    CHECK(!n->options[0].desc && !strcmp(n->options[1].desc, "yes"));
    CHECK(!strcmp(c->instructions, "{\"k\": \"v\"}"));
    CHECK(c->n_options == 3 && !c->options[0].desc && !c->options[1].desc && !strcmp(c->options[2].desc, "{\"d\": 1}"));
    CHECK(r.questions[2].n_options == 2 && !strcmp(r.questions[2].options[1].key, "y"));
    CHECK(!strcmp(r.questions[2].instructions, ""));
    CHECK(s->n_options == 3 && !strcmp(s->options[2].key, "2") && !strcmp(s->options[1].desc, "") &&
          !strcmp(s->options[2].desc, "[1]"));
    iv_dq_request_free(&r);
    iv_dq_errors_free(&e);
}

TEST(decisions_contract_errors)
{
    CHECK(fails_with("[]", 422, "dict_type"));
    CHECK(fails_with("{\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"noul\"}}}", 422, "\"loc\":[\"body\",\"model\"]"));
    CHECK(fails_with("{\"model\":\"\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"noul\"}}}", 422, "non-empty"));
    CHECK(fails_with("{\"model\":\"m\",\"questions\":{\"a\":{\"type\":\"noul\"}}}", 422, "[\"body\",\"state\"]"));
    CHECK(fails_with("{\"model\":\"m\",\"state\":3,\"questions\":{\"a\":{\"type\":\"noul\"}}}", 422, "state must be"));
    CHECK(fails_with("{\"model\":\"m\",\"state\":null,\"questions\":{\"a\":{\"type\":\"noul\"}}}", 422, "state must be"));
    CHECK(fails_with("{\"model\":\"m\",\"state\":\"s\"}", 422, "[\"body\",\"questions\"]"));
    CHECK(fails_with("{\"model\":\"m\",\"state\":\"s\",\"questions\":{}}", 422, "too_short"));
    CHECK(fails_with("{\"model\":\"m\",\"state\":\"s\",\"questions\":[]}", 422, "dict_type"));
    CHECK(fails_with("{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":3}}", 422, "[\"body\",\"questions\",\"a\"]"));
    CHECK(fails_with("{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{}}}", 422, "\"missing\""));
    CHECK(fails_with("{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"box\"}}}", 422, "literal_error"));
    CHECK(fails_with("{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"choice\"}}}", 422,
                     "[\"body\",\"questions\",\"a\",\"criteria\"]"));
    CHECK(fails_with("{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"choice\",\"criteria\":{}}}}", 422,
                     "too_short"));
    CHECK(fails_with("{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"choice\",\"criteria\":[1]}}}", 422,
                     "string_type"));
    CHECK(fails_with("{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"choice\",\"criteria\":[\"x\",\"x\"]}}}",
                     422, "distinct"));
    CHECK(fails_with("{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"score\",\"criteria\":{}}}}", 422,
                     "list_type"));
    CHECK(fails_with("{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"score\",\"criteria\":[]}}}", 422,
                     "too_short"));
    CHECK(fails_with("{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"score\",\"criteria\":[\"a\",null]}}}",
                     422, "[\"body\",\"questions\",\"a\",\"criteria\",\"1\"]"));
    CHECK(fails_with("{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"noul\",\"criteria\":[]}}}", 422,
                     "dict_type"));
    CHECK(fails_with("{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"noul\",\"criteria\":{\"maybe\":1}}}}",
                     422, "extra_forbidden"));
    CHECK(fails_with("{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"noul\",\"labels\":{}}}}", 422,
                     "[\"body\",\"questions\",\"a\",\"labels\"]"));
    CHECK(fails_with("{\"model\":\"m\",\"state\":\"s\",\"stream\":true,\"questions\":{\"a\":{\"type\":\"noul\"}}}", 422,
                     "[\"body\",\"stream\"]"));
    CHECK(fails_with("{\"model\":\"m\",\"state\":\"s\",\"assets\":{},\"questions\":{\"a\":{\"type\":\"noul\"}}}", 422,
                     "media assets are not supported"));
    CHECK(fails_with("{\"model\":\"m\",\"state\":\"s\",\"extended\":1,\"questions\":{\"a\":{\"type\":\"noul\"}}}", 422,
                     "bool_type"));
    CHECK(fails_with("{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"noul\"},\"a\":{\"type\":\"noul\"}}}",
                     422, "duplicate"));
    /* Every error is reported, not only the first. */
    iv_dq_request r;
    iv_dq_errors e;
    CHECK(parse("{\"x\":1,\"questions\":{\"a\":{\"type\":\"q\"}}}", &r, &e, 0) == -1 && e.n == 4);
    iv_dq_errors_free(&e);
    /* Lenient mode accepts unknown fields. */
    REQUIRE(parse("{\"model\":\"m\",\"state\":\"s\",\"x\":1,\"questions\":{\"a\":{\"type\":\"noul\",\"y\":2}}}", &r, &e,
                  1) == 0);
    iv_dq_request_free(&r);
    iv_dq_errors_free(&e);
}

TEST(decisions_contract_limits_are_413)
{
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_puts(&b, "{\"model\":\"m\",\"state\":\"s\",\"questions\":{");
    for (int i = 0; i < 65; i++) iv_sb_printf(&b, "%s\"q%d\":{\"type\":\"noul\"}", i ? "," : "", i);
    iv_sb_puts(&b, "}}");
    CHECK(fails_with(b.data, 413, "at most 64 questions"));
    iv_sb_reset(&b);
    iv_sb_puts(&b, "{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"choice\",\"criteria\":[");
    for (int i = 0; i < 256; i++) iv_sb_printf(&b, "%s\"o%d\"", i ? "," : "", i);
    iv_sb_puts(&b, "]}}}");
    CHECK(fails_with(b.data, 413, "at most 255 options"));
    CHECK(fails_with("{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"score\",\"criteria\":"
                     "[\"0\",\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\"]}}}",
                     413, "at most 10 levels"));
    /* A validation error with a limit error answers 422. */
    CHECK(fails_with("{\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"score\",\"criteria\":"
                     "[\"0\",\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\"]}}}",
                     422, "too_long"));
    iv_sb_free(&b);
}

static void dumps_is(const char *json, const char *want)
{
    cJSON *j = cJSON_Parse(json);
    iv_strbuf b;
    iv_sb_init(&b);
    iv_pyjson_dumps(&b, j);
    CHECK_MSG(!strcmp(b.data, want), "%s -> %s, want %s", json, b.data, want);
    iv_sb_free(&b);
    cJSON_Delete(j);
}

TEST(decisions_pyjson_matches_python)
{
    /* python3 -c 'import json; print(json.dumps(v, ensure_ascii=False))' */
    dumps_is("[0.1,1e-05,1.5e+16,123.25,-0.0001,0.00012,1e300,3]",
             "[0.1, 1e-05, 1.5e+16, 123.25, -0.0001, 0.00012, 1e+300, 3]");
    dumps_is("{\"a\\\"b\":\"x\\ny\\t\\u0001\\u00e9/\"}", "{\"a\\\"b\": \"x\\ny\\t\\u0001\xc3\xa9/\"}");
    dumps_is("[[],{},null,false]", "[[], {}, null, false]");
}

TEST(decisions_confidence_formulas)
{
    /* choice: (0.7 - 1/3) / (2/3) = 0.55 */
    const double c3[] = {0.2, 0.7, 0.1};
    CHECK(fabs(iv_dq_choice_confidence(c3, 3) - 0.55) < 1e-12);
    const double uni[] = {0.25, 0.25, 0.25, 0.25};
    CHECK(fabs(iv_dq_choice_confidence(uni, 4)) < 1e-12);
    const double one[] = {1.0};
    CHECK(iv_dq_choice_confidence(one, 1) == 1.0 && iv_dq_score_confidence(one, 1) == 1.0);
    /* score, 3 levels: m = 2, spread = 0.2*2 + 0.3*1 = 0.7, uniform = (1+0+1)/3 -> 1 - 0.7/(2/3) = -0.05 -> 0 */
    const double s3[] = {0.2, 0.3, 0.5};
    CHECK(iv_dq_score_confidence(s3, 3) == 0.0);
    /* m = 1, spread = 0.1 + 0.1 = 0.2 -> 1 - 0.2 / (2/3) = 0.7 */
    const double s3b[] = {0.1, 0.8, 0.1};
    CHECK(fabs(iv_dq_score_confidence(s3b, 3) - 0.7) < 1e-12);
    /* 2 levels: uniform = 0.5; p = (0.1, 0.9): 1 - 0.1/0.5 = 0.8 */
    const double s2[] = {0.1, 0.9};
    CHECK(fabs(iv_dq_score_confidence(s2, 2) - 0.8) < 1e-12);
    /* Ties go to the first option. */
    const double tie[] = {0.4, 0.4, 0.2};
    CHECK(iv_dq_argmax(tie, 3) == 0);
    /* Laya's entropy confidence of the uniform distribution is 0, of a point mass 1. */
    CHECK(fabs(iv_dq_entropy_confidence(uni, 4)) < 1e-12);
    const double point[] = {0, 1, 0};
    CHECK(fabs(iv_dq_entropy_confidence(point, 3) - 1) < 1e-9);
    const float logits[] = {1, 2, 3};
    double p[3];
    iv_dq_softmax(logits, 3, 2.0, p);
    CHECK(fabs(p[0] + p[1] + p[2] - 1) < 1e-15 && fabs(p[2] / p[1] - exp(0.5)) < 1e-12);
}

/* Images in the state (decisions/state_images.h): found at any depth in
 * text order, the JSON text cut where each stood, the recipe's user
 * content as parts; 422 for an image part without its image, 413 past
 * max_images. */
TEST(decisions_state_images)
{
    cJSON *j = cJSON_Parse("{\"model\":\"m\",\"state\":[\"a\",{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:,1\"}},"
                           "{\"role\":\"user\",\"content\":[{\"type\":\"input_image\",\"image_url\":\"data:,2\",\"detail\":"
                           "\"low\"}]},{\"type\":\"image_url\",\"image_url\":\"data:,3\"}],"
                           "\"questions\":{\"q\":{\"type\":\"noul\"}}}");
    REQUIRE(j);
    iv_dq_limits lim;
    iv_dq_limits_default(&lim);
    iv_dq_request r;
    iv_dq_errors e;
    iv_dq_errors_init(&e);
    REQUIRE(iv_dq_parse(j, &lim, &r, &e) == 0);
    CHECK(r.has_image && r.n_images == 3);
    CHECK_STR(r.image_src[0], "data:,1");
    CHECK_STR(r.image_src[1], "data:,2");
    CHECK_STR(r.image_src[2], "data:,3");
    CHECK_STR(r.state_pieces[0], "[\"a\", ");
    CHECK_STR(r.state_pieces[1], ", {\"role\": \"user\", \"content\": [");
    CHECK_STR(r.state_pieces[2], "]}, ");
    CHECK_STR(r.state_pieces[3], "]");
    cJSON *parts = iv_dq_state_content(&r, "State:\n", " end");
    REQUIRE(cJSON_IsArray(parts));
    CHECK_EQ_INT(cJSON_GetArraySize(parts), 7);
    CHECK_STR(cJSON_GetObjectItem(cJSON_GetArrayItem(parts, 0), "text")->valuestring, "State:\n[\"a\", ");
    CHECK_STR(cJSON_GetObjectItem(cJSON_GetArrayItem(parts, 1), "type")->valuestring, "image");
    CHECK_STR(cJSON_GetObjectItem(cJSON_GetArrayItem(parts, 6), "text")->valuestring, "] end");
    cJSON_Delete(parts);
    iv_dq_request_free(&r);
    iv_dq_errors_free(&e);
    lim.max_images = 2;
    iv_dq_errors_init(&e);
    CHECK(iv_dq_parse(j, &lim, &r, &e) == -1 && e.status == 413 && strstr(e.items.data, "at most 2 images"));
    iv_dq_errors_free(&e);
    cJSON_Delete(j);
    /* A text state stays one string; an image part without its image is 422. */
    CHECK(fails_with("{\"model\":\"m\",\"state\":{\"x\":{\"type\":\"image_url\"}},\"questions\":{\"a\":{\"type\":\"noul\"}}}",
                     422, "needs its image as a string"));
    /* A state that is one image part has no text around it (found by
     * fuzz_decisions: the cut text was empty and its buffer NULL). */
    j = cJSON_Parse("{\"model\":\"m\",\"state\":{\"type\":\"image_url\",\"image_url\":\"data:,4\"},"
                    "\"questions\":{\"a\":{\"type\":\"noul\"}}}");
    REQUIRE(j);
    iv_dq_request t;
    iv_dq_errors_init(&e);
    lim.max_images = 1;
    REQUIRE(iv_dq_parse(j, &lim, &t, &e) == 0);
    CHECK(t.n_images == 1 && !strcmp(t.image_src[0], "data:,4"));
    CHECK_STR(t.state_pieces[0], "");
    CHECK_STR(t.state_pieces[1], "");
    parts = iv_dq_state_content(&t, "State:\n", " end");
    REQUIRE(cJSON_IsArray(parts));
    CHECK_EQ_INT(cJSON_GetArraySize(parts), 3);
    CHECK_STR(cJSON_GetObjectItem(cJSON_GetArrayItem(parts, 0), "text")->valuestring, "State:\n");
    CHECK_STR(cJSON_GetObjectItem(cJSON_GetArrayItem(parts, 1), "type")->valuestring, "image");
    CHECK_STR(cJSON_GetObjectItem(cJSON_GetArrayItem(parts, 2), "text")->valuestring, " end");
    cJSON_Delete(parts);
    iv_dq_request_free(&t);
    iv_dq_errors_free(&e);
    cJSON_Delete(j);
    REQUIRE(parse("{\"model\":\"m\",\"state\":\"plain\",\"questions\":{\"a\":{\"type\":\"noul\"}}}", &t, &e, 0) == 0);
    cJSON *s = iv_dq_state_content(&t, "State:\n", "!");
    CHECK(cJSON_IsString(s) && !strcmp(s->valuestring, "State:\nplain!") && t.n_images == 0);
    cJSON_Delete(s);
    iv_dq_request_free(&t);
    iv_dq_errors_free(&e);
}
