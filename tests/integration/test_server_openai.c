/* OpenAI /v1/embeddings and Infinity's /embeddings, /classify, /models,
 * and choosing among several loaded models with `model`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server_harness.h"
#include "test.h"

static const char *sentences = "[\"The quick brown fox jumps over the lazy dog.\",\"Hello world\",\"A short one\"]";

TEST(srv_openai_float_and_base64)
{
    const char *dir = srv_minilm();
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, "--served-model-name", "minilm", NULL};
    REQUIRE(srv_start(&s, args) == 0);
    char body[512];
    http_resp tei, fl, b64, ids;
    snprintf(body, sizeof body, "{\"inputs\":%s}", sentences);
    REQUIRE(http_post(&s, "/embed", body, &tei) == 0);
    REQUIRE(tei.status == 200);
    snprintf(body, sizeof body, "{\"input\":%s,\"model\":\"minilm\",\"user\":\"me\"}", sentences);
    REQUIRE(http_post(&s, "/v1/embeddings", body, &fl) == 0);
    CHECK_EQ_INT(fl.status, 200);
    snprintf(body, sizeof body, "{\"input\":%s,\"encoding_format\":\"base64\"}", sentences);
    REQUIRE(http_post(&s, "/v1/embeddings", body, &b64) == 0);
    CHECK_EQ_INT(b64.status, 200);
    REQUIRE(fl.json && b64.json);
    CHECK_STR(jstr(fl.json, "object"), "list");
    CHECK_STR(jstr(fl.json, "model"), "minilm");
    CHECK(cJSON_GetObjectItem(fl.json, "id") == NULL); /* TEI's OpenAI response has no id */
    const cJSON *data = cJSON_GetObjectItem(fl.json, "data"), *data64 = cJSON_GetObjectItem(b64.json, "data");
    REQUIRE(cJSON_GetArraySize(data) == 3 && cJSON_GetArraySize(data64) == 3);
    for (int i = 0; i < 3; i++) {
        const cJSON *d = cJSON_GetArrayItem(data, i);
        CHECK_STR(jstr(d, "object"), "embedding");
        CHECK_EQ_INT(jint(d, "index"), i);
        int n, m;
        float *v = json_floats(cJSON_GetObjectItem(d, "embedding"), &n);
        float *t = json_floats(cJSON_GetArrayItem(tei.json, i), &m);
        CHECK_EQ_INT(n, 384);
        CHECK_EQ_INT(m, 384);
        /* Bit for bit: the requests may be batched differently, but a
         * sequence's vector does not depend on its batch (the layer weights'
         * kernel sums each output in one fixed order, ops/cpu/gemm_panel.h),
         * and JSON floats are shortest round-trip decimals. */
        CHECK(n == m && memcmp(v, t, (size_t)n * sizeof(float)) == 0);
        /* base64: little-endian float32 bytes of the same vector. */
        size_t nb;
        unsigned char *raw = b64_decode(jstr(cJSON_GetArrayItem(data64, i), "embedding"), &nb);
        CHECK_EQ_INT(nb, 384 * 4);
        for (int k = 0; k < n && (size_t)k * 4 + 3 < nb; k++) {
            uint32_t u = (uint32_t)raw[4 * k] | (uint32_t)raw[4 * k + 1] << 8 | (uint32_t)raw[4 * k + 2] << 16 |
                         (uint32_t)raw[4 * k + 3] << 24;
            float f;
            memcpy(&f, &u, 4);
            if (memcmp(&f, &v[k], sizeof f) != 0) {
                CHECK_MSG(0, "base64 value %d: %.9g != %.9g", k, f, v[k]);
                break;
            }
        }
        free(raw);
        free(v);
        free(t);
    }
    /* usage counts real tokens, as the compute header does. */
    char hv[32];
    const cJSON *usage = cJSON_GetObjectItem(fl.json, "usage");
    CHECK(http_header(&fl, "x-compute-tokens", hv, sizeof hv) != NULL);
    CHECK_EQ_INT(jint(usage, "prompt_tokens"), atoi(hv));
    CHECK_EQ_INT(jint(usage, "total_tokens"), atoi(hv));
    CHECK(atoi(hv) > 20);
    /* Token ids give the same vector as the text they encode. */
    REQUIRE(http_post(&s, "/v1/embeddings", "{\"input\":[[101,7592,2088,102]]}", &ids) == 0);
    CHECK_EQ_INT(ids.status, 200);
    int n, m;
    float *a = json_floats(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(ids.json, "data"), 0), "embedding"), &n);
    float *b = json_floats(cJSON_GetArrayItem(tei.json, 1), &m);
    CHECK(n == m && memcmp(a, b, (size_t)n * sizeof(float)) == 0);
    CHECK_EQ_INT(jint(cJSON_GetObjectItem(ids.json, "usage"), "prompt_tokens"), 4);
    free(a);
    free(b);
    http_resp_free(&tei);
    http_resp_free(&fl);
    http_resp_free(&b64);
    http_resp_free(&ids);
    /* With one model, any `model` value is accepted (TEI and Infinity both do). */
    http_resp r;
    REQUIRE(http_post(&s, "/v1/embeddings", "{\"input\":\"x\",\"model\":\"text-embedding-3-small\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(jstr(r.json, "model"), "minilm");
    http_resp_free(&r);
    /* A single string input is one embedding. */
    REQUIRE(http_post(&s, "/embeddings", "{\"input\":\"Hello world\",\"encoding_format\":\"base64\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "data")), 1);
    CHECK_CONTAINS(jstr(r.json, "id"), "infinity-");
    CHECK_EQ_INT(strlen(jstr(r.json, "id")), strlen("infinity-") + 36);
    CHECK(cJSON_IsNumber(cJSON_GetObjectItem(r.json, "created")));
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);
}

TEST(srv_multi_model_infinity_routes)
{
    const char *emb = srv_fixture("bert"), *cls = srv_fixture("bert_seqcls3"), *rr = srv_fixture("bert_seqcls1");
    if (!emb || !cls || !rr) return;
    srv s;
    const char *args[] = {"--model-id", emb, "--served-model-name", "emb", "--model-id", cls,
                          "--served-model-name", "cls", "--model-id", rr, "--served-model-name", "rr", NULL};
    REQUIRE(srv_start(&s, args) == 0);
    http_resp r;
    /* /models lists all three with their capabilities. */
    REQUIRE(http_get(&s, "/models", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(jstr(r.json, "object"), "list");
    const cJSON *data = cJSON_GetObjectItem(r.json, "data");
    REQUIRE(cJSON_GetArraySize(data) == 3);
    const char *ids[] = {"emb", "cls", "rr"}, *caps[] = {"embed", "classify", "rerank"};
    for (int i = 0; i < 3; i++) {
        const cJSON *m = cJSON_GetArrayItem(data, i);
        CHECK_STR(jstr(m, "id"), ids[i]);
        CHECK_STR(jstr(m, "object"), "model");
        CHECK_STR(jstr(m, "owned_by"), "infinity");
        const cJSON *cap = cJSON_GetArrayItem(cJSON_GetObjectItem(m, "capabilities"), 0);
        CHECK_STR(cJSON_IsString(cap) ? cap->valuestring : "(missing)", caps[i]);
        const cJSON *st = cJSON_GetObjectItem(m, "stats");
        CHECK(cJSON_IsNumber(cJSON_GetObjectItem(st, "queue_fraction")));
        CHECK(cJSON_IsNumber(cJSON_GetObjectItem(st, "batch_size")));
    }
    http_resp_free(&r);
    /* /info describes the first model, or the one named by ?model=. */
    REQUIRE(http_get(&s, "/info?model=rr", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(jstr(r.json, "served_model_name"), "rr");
    CHECK_STR(jstr(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "model_type"), "reranker"),
                                       "id2label"),
                   "0"),
              "LABEL_0");
    http_resp_free(&r);
    REQUIRE(http_get(&s, "/info", &r) == 0);
    CHECK_STR(jstr(r.json, "served_model_name"), "emb");
    CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "model_type"), "embedding") != NULL);
    http_resp_free(&r);
    REQUIRE(http_get(&s, "/info?model=cls", &r) == 0);
    CHECK_EQ_INT(jint(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "model_type"), "classifier"),
                                          "label2id"),
                      "positive"),
                 2);
    http_resp_free(&r);
    REQUIRE(http_get(&s, "/info?model=nope", &r) == 0);
    CHECK_EQ_INT(r.status, 422);
    http_resp_free(&r);
    REQUIRE(http_get(&s, "/v1/models", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "data")), 3);
    http_resp_free(&r);

    /* `model` picks the engine; absent: the first. */
    REQUIRE(http_post(&s, "/embeddings", "{\"input\":[\"abc\"],\"model\":\"emb\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(jstr(r.json, "model"), "emb");
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/embed", "{\"inputs\":\"abc\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/classify", "{\"input\":[\"good day\",\"bad night\"],\"model\":\"cls\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(jstr(r.json, "object"), "classify");
    CHECK_STR(jstr(r.json, "model"), "cls");
    const cJSON *cd = cJSON_GetObjectItem(r.json, "data");
    REQUIRE(cJSON_GetArraySize(cd) == 2);
    double sum = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, cJSON_GetArrayItem(cd, 0)) sum += jnum(x, "score");
    CHECK(fabs(sum - 1.0) < 1e-5);
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetArrayItem(cd, 0)), 3);
    CHECK(jint(cJSON_GetObjectItem(r.json, "usage"), "prompt_tokens") > 0);
    http_resp_free(&r);
    /* /classify scores equal /predict's for the same text. */
    http_resp p;
    REQUIRE(http_post(&s, "/predict", "{\"inputs\":\"good day\",\"model\":\"cls\"}", &p) == 0);
    REQUIRE(http_post(&s, "/classify", "{\"input\":[\"good day\"],\"model\":\"cls\"}", &r) == 0);
    CHECK_EQ_INT(p.status, 200);
    for (int k = 0; k < 3; k++) {
        const cJSON *a = cJSON_GetArrayItem(p.json, k),
                    *b = cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetObjectItem(r.json, "data"), 0), k);
        CHECK_STR(jstr(a, "label"), jstr(b, "label"));
        CHECK(fabs(jnum(a, "score") - jnum(b, "score")) < 1e-6);
    }
    http_resp_free(&p);
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/rerank", "{\"query\":\"q\",\"documents\":[\"a\",\"b\"],\"model\":\"rr\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(r.json, "results"), 0), "document") == NULL);
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/rerank", "{\"query\":\"q\",\"texts\":[\"a\",\"b\"],\"model\":\"rr\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    http_resp_free(&r);
    /* The wrong model for a route, and a model that is not loaded. */
    REQUIRE(http_post(&s, "/classify", "{\"input\":[\"a\"],\"model\":\"emb\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 400);
    CHECK_STR(r.body, "{\"error\":{\"message\":\"ModelNotDeployedError: model=`emb` does not support `classify`. "
                      "Reason: the loaded moded cannot fullyfill `classify`. Options are {'embed'}.\",\"type\":null,"
                      "\"param\":null,\"code\":400}}");
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/embeddings", "{\"input\":[\"a\"],\"model\":\"gpt\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 400);
    CHECK_STR(r.body, "{\"error\":{\"message\":\"Invalid model: Engine for model name `gpt` not found. Available "
                      "model names are ['emb', 'cls', 'rr']\",\"type\":null,\"param\":null,\"code\":400}}");
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/v1/embeddings", "{\"input\":[\"a\"],\"model\":\"gpt\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 422);
    CHECK_STR(r.body, "{\"message\":\"Input validation error: model `gpt` is not served here. Available models: "
                      "[\\\"emb\\\", \\\"cls\\\", \\\"rr\\\"]\",\"code\":422,\"type\":\"Validation\"}");
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/embed", "{\"inputs\":\"a\",\"model\":\"gpt\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 422);
    CHECK_STR(jstr(r.json, "error_type"), "Validation");
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/embeddings", "{\"input\":[\"a\"],\"model\":\"emb\",\"modality\":\"image\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 400);
    CHECK_CONTAINS(r.body, "does not support `embed` for modality `image`");
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);
}

/* tools/test_openai_client.py with the official `openai` package, when the
 * Python given by IV_PYTHON (default python3) has it (pip install openai). */
TEST(srv_openai_python_client)
{
    const char *dir = srv_minilm();
    if (!dir) return;
    const char *py = getenv("IV_PYTHON") ? getenv("IV_PYTHON") : "python3";
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' -c 'import openai' 2>/dev/null", py);
    if (system(cmd) != 0) {
        iv_test_skip("the openai package is not installed (pip install openai, or set IV_PYTHON)");
        return;
    }
    snprintf(cmd, sizeof cmd, "'%s' tools/test_openai_client.py --binary '%s' --model-id '%s' --api-key k3y", py,
             iv_test_binary(), dir);
    CHECK_EQ_INT(system(cmd), 0);
}
