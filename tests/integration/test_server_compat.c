/* Cohere-, Jina- and vLLM-compatible routes, OpenAI's /v1/models/{id},
 * --url-prefix and the per-API batch limits, on the real binary with the
 * tiny fixtures (bert: an embedding model; bert_seqcls1: a reranker). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "engine/hub.h"
#include "server/quantize_embeddings.h"
#include "server/server.h"
#include "server_harness.h"
#include "test.h"

static int start_pair(srv *s, const char *extra1, const char *extra2)
{
    const char *emb = srv_fixture("bert"), *rr = srv_fixture("bert_seqcls1");
    if (!emb || !rr) return -1;
    const char *args[] = {"--model-id", emb, "--served-model-name", "emb", "--model-id", rr,
                          "--served-model-name", "rr", extra1, extra2, NULL};
    return srv_start(s, args);
}

/* Codes of a JSON int array must equal iv_quantize of the float vector. */
static void check_codes(const char *what, iv_quant q, const cJSON *codes, const float *v, int dim)
{
    unsigned char buf[8192];
    const int n = (int)iv_quant_size(q, dim);
    REQUIRE(n <= (int)sizeof buf);
    iv_quantize(q, v, dim, buf);
    CHECK_EQ_INT(cJSON_GetArraySize(codes), n);
    const int is_signed = q == IV_QUANT_INT8 || q == IV_QUANT_BINARY;
    for (int k = 0; k < n && k < cJSON_GetArraySize(codes); k++) {
        const int want = is_signed ? (signed char)buf[k] : buf[k];
        const int got = cJSON_GetArrayItem(codes, k)->valueint;
        if (got != want) {
            CHECK_MSG(0, "%s[%d]: %d != %d", what, k, got, want);
            break;
        }
        if (is_signed) CHECK(got >= -128 && got <= 127);
        else CHECK(got >= 0 && got <= 255);
    }
}

TEST(srv_cohere_embed_types)
{
    srv s;
    if (start_pair(&s, NULL, NULL)) return;
    http_resp r;
    REQUIRE(http_post(&s, "/v2/embed",
                      "{\"model\":\"emb\",\"texts\":[\"hello world\",\"a cat\",\"x\"],\"input_type\":\"search_document\","
                      "\"embedding_types\":[\"float\",\"int8\",\"uint8\",\"binary\",\"ubinary\",\"base64\"]}",
                      &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    REQUIRE(r.json);
    CHECK_STR(jstr(r.json, "response_type"), "embeddings_by_type");
    CHECK_EQ_INT((int)strlen(jstr(r.json, "id")), 36);
    const cJSON *emb = cJSON_GetObjectItem(r.json, "embeddings");
    const cJSON *fl = cJSON_GetObjectItem(emb, "float");
    CHECK_EQ_INT(cJSON_GetArraySize(fl), 3);
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "texts")), 3);
    CHECK_STR(cJSON_GetArrayItem(cJSON_GetObjectItem(r.json, "texts"), 1)->valuestring, "a cat");
    const cJSON *meta = cJSON_GetObjectItem(r.json, "meta");
    CHECK_STR(jstr(cJSON_GetObjectItem(meta, "api_version"), "version"), "2");
    CHECK(jint(cJSON_GetObjectItem(meta, "billed_units"), "input_tokens") > 3);
    for (int i = 0; i < 3; i++) {
        int dim;
        float *v = json_floats(cJSON_GetArrayItem(fl, i), &dim);
        REQUIRE(v && dim > 0);
        double norm = 0;
        for (int k = 0; k < dim; k++) norm += (double)v[k] * v[k];
        CHECK(fabs(norm - 1.0) < 1e-5);
        static const iv_quant qs[] = {IV_QUANT_INT8, IV_QUANT_UINT8, IV_QUANT_BINARY, IV_QUANT_UBINARY};
        for (int t = 0; t < 4; t++)
            check_codes(iv_quant_name(qs[t]), qs[t], cJSON_GetArrayItem(cJSON_GetObjectItem(emb, iv_quant_name(qs[t])), i),
                        v, dim);
        size_t nb;
        unsigned char *bytes = b64_decode(cJSON_GetArrayItem(cJSON_GetObjectItem(emb, "base64"), i)->valuestring, &nb);
        CHECK_EQ_INT((int)nb, dim * 4);
        if (bytes && (int)nb == dim * 4) CHECK(memcmp(bytes, v, nb) == 0);
        free(bytes);
        free(v);
    }
    http_resp_free(&r);

    /* v2 defaults to float; v1 without embedding_types answers embeddings_floats. */
    REQUIRE(http_post(&s, "/v2/embed", "{\"model\":\"emb\",\"texts\":[\"a\"],\"input_type\":\"search_query\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "embeddings"), "float") != NULL);
    CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "embeddings"), "int8") == NULL);
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/v1/embed", "{\"texts\":[\"a\",\"b\"],\"truncate\":\"START\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(jstr(r.json, "response_type"), "embeddings_floats");
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "embeddings")), 2);
    CHECK(cJSON_IsArray(cJSON_GetArrayItem(cJSON_GetObjectItem(r.json, "embeddings"), 0)));
    CHECK_STR(jstr(cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "meta"), "api_version"), "version"), "1");
    http_resp_free(&r);

    /* output_dimension truncates and re-normalises. */
    REQUIRE(http_post(&s, "/v2/embed", "{\"texts\":[\"a b c\"],\"output_dimension\":8,\"embedding_types\":[\"float\"]}",
                      &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetArrayItem(
                     cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "embeddings"), "float"), 0)),
                 8);
    http_resp_free(&r);

    /* Errors: Cohere's {"message"} with 400. */
    static const char *bad[] = {
        "{\"texts\":[\"a\"],\"embedding_types\":[\"int4\"]}",
        "{\"texts\":[\"a\"],\"truncate\":\"MIDDLE\"}",
        "{\"texts\":[\"a\"],\"input_type\":\"poetry\"}",
        "{\"texts\":[]}",
        "{\"images\":[\"data:image/png;base64,AAAA\"]}",
        "{\"texts\":\"a\"}",
        "{\"texts\":[\"a\"],\"output_dimension\":0}",
        "{\"texts\":[\"a\"],\"output_dimension\":100000}",
        "{\"texts\":[\"a\"],\"model\":\"nope\"}",
        "{\"texts\":[\"a\"],\"model\":\"rr\"}",
        "not json",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        REQUIRE(http_post(&s, "/v2/embed", bad[i], &r) == 0);
        CHECK_MSG(r.status == 400, "%s -> %ld %s", bad[i], r.status, r.body);
        CHECK_MSG(r.json && cJSON_IsString(cJSON_GetObjectItem(r.json, "message")), "%s -> %s", bad[i], r.body);
        http_resp_free(&r);
    }
    /* truncate NONE refuses an input over the limit. */
    iv_strbuf big;
    iv_sb_init(&big);
    iv_sb_puts(&big, "{\"texts\":[\"");
    for (int i = 0; i < 3000; i++) iv_sb_puts(&big, "word ");
    iv_sb_puts(&big, "\"],\"truncate\":\"NONE\"}");
    REQUIRE(http_post(&s, "/v2/embed", big.data, &r) == 0);
    CHECK_EQ_INT(r.status, 400);
    CHECK_CONTAINS(r.body, "tokens");
    http_resp_free(&r);
    iv_sb_free(&big);
    CHECK_EQ_INT(srv_stop(&s), 0);
}

TEST(srv_cohere_jina_rerank)
{
    srv s;
    if (start_pair(&s, NULL, NULL)) return;
    http_resp r, t;
    /* The TEI route's scores are the reference. */
    REQUIRE(http_post(&s, "/rerank", "{\"model\":\"rr\",\"query\":\"what is a cat\",\"texts\":[\"abc\",\"zz\",\"a cat\"]}",
                      &t) == 0);
    CHECK_EQ_INT(t.status, 200);
    static const char *paths[] = {"/v1/rerank", "/v2/rerank"};
    for (int p = 0; p < 2; p++) {
        REQUIRE(http_post(&s, paths[p],
                          "{\"model\":\"rr\",\"query\":\"what is a cat\",\"documents\":[\"abc\",{\"text\":\"zz\"},\"a cat\"],"
                          "\"top_n\":2,\"return_documents\":true}",
                          &r) == 0);
        CHECK_EQ_INT(r.status, 200);
        REQUIRE(r.json);
        const cJSON *res = cJSON_GetObjectItem(r.json, "results");
        CHECK_EQ_INT(cJSON_GetArraySize(res), 2);
        for (int k = 0; k < 2; k++) {
            const cJSON *x = cJSON_GetArrayItem(res, k), *ref = cJSON_GetArrayItem(t.json, k);
            CHECK_EQ_INT(jint(x, "index"), jint(ref, "index"));
            CHECK(fabs(jnum(x, "relevance_score") - jnum(ref, "score")) < 1e-6);
            const char *want = jint(ref, "index") == 0 ? "abc" : jint(ref, "index") == 1 ? "zz" : "a cat";
            CHECK_STR(jstr(cJSON_GetObjectItem(x, "document"), "text"), want);
        }
        CHECK_STR(jstr(cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "meta"), "api_version"), "version"),
                  p ? "2" : "1");
        CHECK_EQ_INT((int)strlen(jstr(r.json, "id")), 36);
        CHECK(jint(cJSON_GetObjectItem(r.json, "usage"), "total_tokens") > 0);
        http_resp_free(&r);
    }
    /* Without return_documents: no document; without top_n: every document. */
    REQUIRE(http_post(&s, "/v1/rerank", "{\"query\":\"q\",\"documents\":[\"a\",\"b\",\"c\"],\"model\":\"rr\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "results")), 3);
    CHECK(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(r.json, "results"), 0), "document") == NULL);
    http_resp_free(&r);
    static const char *bad[] = {
        "{\"model\":\"rr\",\"query\":\"q\",\"documents\":[]}",
        "{\"model\":\"rr\",\"query\":\"q\",\"documents\":[{\"title\":\"x\"}]}",
        "{\"model\":\"rr\",\"query\":\"q\",\"documents\":[\"a\"],\"top_n\":0}",
        "{\"model\":\"rr\",\"documents\":[\"a\"]}",
        "{\"model\":\"emb\",\"query\":\"q\",\"documents\":[\"a\"]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        REQUIRE(http_post(&s, "/v1/rerank", bad[i], &r) == 0);
        CHECK_MSG(r.status == 400, "%s -> %ld %s", bad[i], r.status, r.body);
        CHECK_MSG(r.json && cJSON_IsString(cJSON_GetObjectItem(r.json, "message")), "%s -> %s", bad[i], r.body);
        http_resp_free(&r);
    }
    http_resp_free(&t);
    CHECK_EQ_INT(srv_stop(&s), 0);
}

TEST(srv_vllm_score)
{
    srv s;
    if (start_pair(&s, NULL, NULL)) return;
    http_resp r, t;
    /* Cross-encoder: sigmoid of the logit, as the TEI /rerank (in input order here). */
    REQUIRE(http_post(&s, "/rerank", "{\"model\":\"rr\",\"query\":\"what is a cat\",\"texts\":[\"abc\",\"a cat\"]}", &t) == 0);
    REQUIRE(http_post(&s, "/v1/score", "{\"model\":\"rr\",\"text_1\":\"what is a cat\",\"text_2\":[\"abc\",\"a cat\"]}",
                      &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    REQUIRE(r.json);
    CHECK_STR(jstr(r.json, "object"), "list");
    CHECK_STR(jstr(r.json, "model"), "rr");
    CHECK(!strncmp(jstr(r.json, "id"), "score-", 6));
    const cJSON *data = cJSON_GetObjectItem(r.json, "data");
    CHECK_EQ_INT(cJSON_GetArraySize(data), 2);
    for (int k = 0; k < 2; k++) {
        const cJSON *ref = cJSON_GetArrayItem(t.json, k);
        const cJSON *x = cJSON_GetArrayItem(data, jint(ref, "index"));
        CHECK_STR(jstr(x, "object"), "score");
        CHECK(fabs(jnum(x, "score") - jnum(ref, "score")) < 1e-6);
    }
    CHECK(jint(cJSON_GetObjectItem(r.json, "usage"), "prompt_tokens") > 0);
    http_resp_free(&r);
    http_resp_free(&t);
    /* N:N pairs on /score. */
    REQUIRE(http_post(&s, "/score", "{\"model\":\"rr\",\"text_1\":[\"a\",\"b\"],\"text_2\":[\"c\",\"d\"]}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "data")), 2);
    http_resp_free(&r);
    /* Bi-encoder: cosine of the embeddings, as /similarity computes it. */
    REQUIRE(http_post(&s, "/similarity",
                      "{\"model\":\"emb\",\"inputs\":{\"source_sentence\":\"a cat\",\"sentences\":[\"a dog\",\"stocks\"]}}",
                      &t) == 0);
    REQUIRE(http_post(&s, "/score", "{\"model\":\"emb\",\"text_1\":\"a cat\",\"text_2\":[\"a dog\",\"stocks\"]}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    data = cJSON_GetObjectItem(r.json, "data");
    for (int k = 0; k < 2; k++)
        CHECK(fabs(jnum(cJSON_GetArrayItem(data, k), "score") - cJSON_GetArrayItem(t.json, k)->valuedouble) < 1e-5);
    http_resp_free(&r);
    http_resp_free(&t);
    static const char *bad[] = {
        "{\"model\":\"rr\",\"text_1\":[\"a\",\"b\"],\"text_2\":[\"c\",\"d\",\"e\"]}",
        "{\"model\":\"rr\",\"text_1\":[],\"text_2\":[\"c\"]}",
        "{\"model\":\"rr\",\"text_1\":\"a\"}",
        "{\"model\":\"rr\",\"text_1\":\"a\",\"text_2\":[1]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        REQUIRE(http_post(&s, "/score", bad[i], &r) == 0);
        CHECK_MSG(r.status == 400, "%s -> %ld %s", bad[i], r.status, r.body);
        CHECK_STR(jstr(r.json, "object"), "error");
        CHECK_STR(jstr(r.json, "type"), "BadRequestError");
        CHECK_EQ_INT(jint(r.json, "code"), 400);
        http_resp_free(&r);
    }
    CHECK_EQ_INT(srv_stop(&s), 0);
}

TEST(srv_models_id_and_url_prefix)
{
    srv s;
    if (start_pair(&s, "--url-prefix", "/api/x")) return;
    http_resp r;
    REQUIRE(http_get(&s, "/api/x/v1/models/rr", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(jstr(r.json, "id"), "rr");
    CHECK_STR(jstr(r.json, "object"), "model");
    CHECK_STR(jstr(r.json, "owned_by"), "infinity");
    http_resp_free(&r);
    REQUIRE(http_get(&s, "/api/x/v1/models/nope", &r) == 0);
    CHECK_EQ_INT(r.status, 404);
    CHECK_STR(jstr(cJSON_GetObjectItem(r.json, "error"), "code"), "model_not_found");
    http_resp_free(&r);
    REQUIRE(http_get(&s, "/api/x/v1/models", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "data")), 2);
    http_resp_free(&r);
    /* Routes are under the prefix only; /health also at the root for probes. */
    REQUIRE(http_get(&s, "/v1/models", &r) == 0);
    CHECK_EQ_INT(r.status, 404);
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/api/x/embed", "{\"inputs\":\"a\",\"model\":\"emb\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/api/x/v2/embed", "{\"texts\":[\"a\"],\"model\":\"emb\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    http_resp_free(&r);
    REQUIRE(http_get(&s, "/api/x/health", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    http_resp_free(&r);
    REQUIRE(http_get(&s, "/api/xy/health", &r) == 0);
    CHECK_EQ_INT(r.status, 404);
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);
}

static char *many_texts(const char *key, int n, const char *extra)
{
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_printf(&b, "{\"%s\":[", key);
    for (int i = 0; i < n; i++) iv_sb_printf(&b, "%s\"t%d\"", i ? "," : "", i);
    iv_sb_printf(&b, "]%s}", extra);
    return b.data;
}

TEST(srv_batch_limits_per_api)
{
    const char *dir = srv_fixture("bert");
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, NULL};
    REQUIRE(srv_start(&s, args) == 0);
    http_resp r;
    /* OpenAI and Infinity: up to 2048 (split into token-budget batches); TEI: 32. */
    char *body = many_texts("input", 600, "");
    REQUIRE(http_post(&s, "/v1/embeddings", body, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "data")), 600);
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/embeddings", body, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    http_resp_free(&r);
    free(body);
    body = many_texts("input", 2049, "");
    REQUIRE(http_post(&s, "/v1/embeddings", body, &r) == 0);
    CHECK_EQ_INT(r.status, 422);
    CHECK_CONTAINS(r.body, "batch size 2049 > maximum allowed batch size 2048");
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/embeddings", body, &r) == 0);
    CHECK_EQ_INT(r.status, 422);
    CHECK_CONTAINS(r.body, "List should have at most 2048 items after validation, not 2049");
    http_resp_free(&r);
    free(body);
    body = many_texts("texts", 2049, "");
    REQUIRE(http_post(&s, "/v2/embed", body, &r) == 0);
    CHECK_EQ_INT(r.status, 400);
    CHECK_CONTAINS(r.body, "maximum allowed batch size 2048");
    http_resp_free(&r);
    free(body);
    body = many_texts("inputs", 33, "");
    REQUIRE(http_post(&s, "/embed", body, &r) == 0);
    CHECK_EQ_INT(r.status, 422);
    CHECK_CONTAINS(r.body, "batch size 33 > maximum allowed batch size 32");
    http_resp_free(&r);
    free(body);
    CHECK_EQ_INT(srv_stop(&s), 0);

    const char *args2[] = {"--model-id", dir, "--max-client-batch-size-openai", "5", "--max-client-batch-size", "40", NULL};
    REQUIRE(srv_start(&s, args2) == 0);
    body = many_texts("input", 6, "");
    REQUIRE(http_post(&s, "/v1/embeddings", body, &r) == 0);
    CHECK_EQ_INT(r.status, 422);
    CHECK_CONTAINS(r.body, "batch size 6 > maximum allowed batch size 5 (--max-client-batch-size-openai)");
    http_resp_free(&r);
    free(body);
    body = many_texts("inputs", 40, "");
    REQUIRE(http_post(&s, "/embed", body, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    http_resp_free(&r);
    free(body);
    CHECK_EQ_INT(srv_stop(&s), 0);
}

/* POST / by model type, as huggingface_hub's InferenceClient calls it. */
TEST(srv_root_post_inference_client_shapes)
{
    const char *emb = srv_fixture("bert"), *cls = srv_fixture("bert_seqcls3");
    if (!emb || !cls) return;
    srv s;
    const char *args[] = {"--model-id", cls, NULL};
    REQUIRE(srv_start(&s, args) == 0);
    http_resp r, p;
    /* text_classification: [[{"label","score"} x labels]] even for one text; /predict stays flat. */
    REQUIRE(http_post(&s, "/", "{\"inputs\":\"I love it\",\"parameters\":{\"top_k\":null}}", &r) == 0);
    REQUIRE(http_post(&s, "/predict", "{\"inputs\":\"I love it\"}", &p) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(cJSON_GetArraySize(r.json), 1);
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetArrayItem(r.json, 0)), 3);
    CHECK_EQ_INT(cJSON_GetArraySize(p.json), 3);
    CHECK_STR(jstr(cJSON_GetArrayItem(cJSON_GetArrayItem(r.json, 0), 0), "label"),
              jstr(cJSON_GetArrayItem(p.json, 0), "label"));
    http_resp_free(&r);
    http_resp_free(&p);
    CHECK_EQ_INT(srv_stop(&s), 0);

    const char *args2[] = {"--model-id", emb, NULL};
    REQUIRE(srv_start(&s, args2) == 0);
    /* sentence_similarity posts /similarity's body to /; feature_extraction /embed's. */
    REQUIRE(http_post(&s, "/", "{\"inputs\":{\"source_sentence\":\"a cat\",\"sentences\":[\"a dog\",\"x\"]}}", &r) == 0);
    REQUIRE(http_post(&s, "/similarity", "{\"inputs\":{\"source_sentence\":\"a cat\",\"sentences\":[\"a dog\",\"x\"]}}",
                      &p) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(r.body, p.body);
    http_resp_free(&r);
    http_resp_free(&p);
    REQUIRE(http_post(&s, "/", "{\"inputs\":\"a cat\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(cJSON_GetArraySize(r.json), 1);
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/", "{\"inputs\":", &r) == 0);
    CHECK_EQ_INT(r.status, 400);
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);
}

TEST(cli_version)
{
    char cmd[4096], buf[256] = {0};
    if (access(iv_test_binary(), X_OK) != 0) {
        iv_test_skip("infinity_v3 binary not built");
        return;
    }
    static const char *forms[] = {"--version", "-V", "serve --version"};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "'%s' %s", iv_test_binary(), forms[i]);
        FILE *p = popen(cmd, "r");
        REQUIRE(p);
        size_t n = fread(buf, 1, sizeof buf - 1, p);
        buf[n] = 0;
        CHECK_EQ_INT(pclose(p), 0);
        CHECK_STR(buf, "infinity_v3 " IV_SERVER_VERSION "\n");
    }
}

/* /info's model_sha: the commit of a hub-cache snapshot, null for a plain directory. */
TEST(srv_info_model_sha_from_snapshot)
{
    char zero[41];
    CHECK(iv_hub_snapshot_commit("/x/models--a--b/snapshots/0123456789abcdef0123456789abcdef01234567/", zero) == 0);
    CHECK_STR(zero, "0123456789abcdef0123456789abcdef01234567");
    CHECK(iv_hub_snapshot_commit("/x/models--a--b/snapshots/main", zero) == -1);
    CHECK(iv_hub_snapshot_commit("/x/0123456789abcdef0123456789abcdef01234567", zero) == -1);
    const char *dir = srv_fixture("bert");
    if (!dir) return;
    char tmp[] = "/tmp/iv_sha_XXXXXX", snap[1024], cmd[4096];
    REQUIRE(mkdtemp(tmp));
    snprintf(snap, sizeof snap, "%s/models--org--bert/snapshots/89abcdef0123456789abcdef0123456789abcdef", tmp);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp -r '%s'/. '%s'/", snap, dir, snap);
    REQUIRE(system(cmd) == 0);
    srv s;
    const char *args[] = {"--model-id", snap, NULL};
    REQUIRE(srv_start(&s, args) == 0);
    http_resp r;
    REQUIRE(http_get(&s, "/info", &r) == 0);
    CHECK_STR(jstr(r.json, "model_sha"), "89abcdef0123456789abcdef0123456789abcdef");
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);
    const char *args2[] = {"--model-id", dir, NULL};
    REQUIRE(srv_start(&s, args2) == 0);
    REQUIRE(http_get(&s, "/info", &r) == 0);
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(r.json, "model_sha")));
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK(system(cmd) == 0);
}
