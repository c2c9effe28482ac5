/* Conversations over HTTP on the chat-template reranker fixture
 * (qwen3_st_reranker: sentence-transformers' message modality with
 * LogitScore): /rerank renders each (query, document) pair through the
 * checkpoint's template and scores it as CrossEncoder.predict does (sigmoid
 * of the raw score, checked against chat_cases.json); /predict takes the
 * same pair as an explicit conversation; /info says so; bad conversations
 * are 4xx naming the fault and the server keeps serving. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "server_harness.h"
#include "test.h"

static int start_chat(srv *s)
{
    const char *dir = srv_fixture("qwen3_st_reranker");
    if (!dir) return -1;
    const char *args[] = {"--model-id", dir, "--served-model-name", "rr", NULL};
    return srv_start(s, args);
}

static double score_of(const cJSON *results, int index)
{
    const cJSON *x;
    cJSON_ArrayForEach(x, results) if (iv_json_int(x, "index", -1) == index) return iv_json_num(x, "score", NAN);
    return NAN;
}

TEST(srv_chat_template_rerank_and_predict)
{
    srv s;
    if (start_chat(&s)) return;
    http_resp r;
    REQUIRE(http_get(&s, "/info", &r) == 0);
    REQUIRE(r.json);
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(r.json, "chat_template")));
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(r.json, "inputs_as_messages")));
    http_resp_free(&r);

    /* chat_cases.json cases 0 and 1: no prompt, the sigmoid of their raw scores. */
    char path[4200];
    snprintf(path, sizeof path, "%s/chat_cases.json", srv_fixture("qwen3_st_reranker"));
    cJSON *doc = NULL;
    iv_err err = {0};
    REQUIRE(iv_json_load_file(path, 1 << 20, &doc, &err) == 0);
    const cJSON *c0 = cJSON_GetArrayItem(iv_json_get(doc, "cases"), 0);
    const cJSON *c1 = cJSON_GetArrayItem(iv_json_get(doc, "cases"), 1);
    REQUIRE(!strcmp(iv_json_str(c0, "query", ""), "what is the capital of china?"));
    REQUIRE(!strcmp(iv_json_str(c1, "query", ""), "explain gravity"));
    const double want0 = 1.0 / (1.0 + exp(-iv_json_num(c0, "score", NAN)));
    REQUIRE(http_post(&s, "/rerank",
                      "{\"query\":\"what is the capital of china?\",\"texts\":[\"The capital of China is Beijing.\","
                      "\"unrelated\"]}",
                      &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    REQUIRE(r.json);
    const double got0 = score_of(r.json, 0);
    CHECK_MSG(fabs(got0 - want0) < 1e-5, "rerank score %.7f, CrossEncoder sigmoid %.7f", got0, want0);
    http_resp_free(&r);

    /* The same pair as a conversation on /predict, raw: CrossEncoder's raw score. */
    REQUIRE(http_post(&s, "/predict",
                      "{\"inputs\":[[{\"role\":\"query\",\"content\":\"explain gravity\"},{\"role\":\"document\","
                      "\"content\":\"Gravity is a force that attracts two bodies towards each other.\"}]],"
                      "\"raw_scores\":true}",
                      &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    REQUIRE(cJSON_IsArray(r.json));
    const double raw1 = iv_json_num(cJSON_GetArrayItem(cJSON_GetArrayItem(r.json, 0), 0), "score", NAN);
    CHECK_MSG(fabs(raw1 - iv_json_num(c1, "score", NAN)) < 1e-4, "predict raw %.6f, CrossEncoder %.6f", raw1,
              iv_json_num(c1, "score", NAN));
    http_resp_free(&r);
    cJSON_Delete(doc);

    static const struct {
        const char *path, *body, *msg;
        long status;
    } bad[] = {
        {"/predict", "{\"inputs\":[[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":"
                     "\"data:,\"}}]}]]}",
         "reads text only", 422},
        {"/predict", "{\"inputs\":[[{\"content\":\"no role\"}]]}", "string `role`", 422},
        {"/predict", "{\"inputs\":[[{\"role\":\"query\",\"content\":\"q\"}]],\"chat_template_kwargs\":3}",
         "chat_template_kwargs", 422},
        {"/predict", "{\"inputs\":[[{\"role\":\"query\",\"content\":\"q\"}]],\"add_generation_prompt\":\"yes\"}",
         "add_generation_prompt", 422},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        REQUIRE(http_post(&s, bad[i].path, bad[i].body, &r) == 0);
        CHECK_MSG(r.status == bad[i].status, "%s %s: status %ld, body %s", bad[i].path, bad[i].body, r.status,
                  r.body ? r.body : "");
        CHECK_CONTAINS(r.body, bad[i].msg);
        http_resp_free(&r);
    }
    REQUIRE(http_get(&s, "/health", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);
}

/* A model without a chat template refuses conversations by name. */
TEST(srv_conversation_without_template)
{
    srv s;
    const char *dir = srv_fixture("bert");
    if (!dir) return;
    const char *args[] = {"--model-id", dir, NULL};
    if (srv_start(&s, args)) return;
    http_resp r;
    REQUIRE(http_post(&s, "/v1/embeddings", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &r) == 0);
    CHECK_MSG(r.status == 422 || r.status == 400, "status %ld", r.status);
    CHECK_CONTAINS(r.body, "no chat template");
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/v1/embeddings", "{\"messages\":[]}", &r) == 0);
    CHECK_MSG(r.status == 422 || r.status == 400, "status %ld", r.status);
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);
}
