/* Exact status codes and bodies for bad requests, per API flavour:
 * TEI {"error","error_type"}, OpenAI {"message","code","type"}, Infinity
 * {"error":{...}} and FastAPI's {"detail":[...]}, and TEI's plain-text
 * framework rejections. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "server_harness.h"
#include "test.h"

/* POSTs body (length n) with a JSON content type and checks status and, when want is non-NULL, the exact body. */
static void expect_n(const srv *s, const char *path, const char *body, size_t n, int status, const char *want,
                     const char *ctype, int line)
{
    http_resp r;
    if (http_do(s, "POST", path, body, n, NULL, &r)) {
        iv_test_fail(__FILE__, line, "POST %s failed", path);
        return;
    }
    if (r.status != status) iv_test_fail(__FILE__, line, "POST %s: status %ld, want %d (%s)", path, r.status, status, r.body);
    if (want && strcmp(r.body, want))
        iv_test_fail(__FILE__, line, "POST %s: body\n      %s\n    want\n      %s", path, r.body, want);
    char v[128];
    if (ctype && (!http_header(&r, "Content-Type", v, sizeof v) || strncmp(v, ctype, strlen(ctype))))
        iv_test_fail(__FILE__, line, "POST %s: content type %s, want %s", path, v, ctype);
    http_resp_free(&r);
}
#define EXPECT(s, path, body, status, want, ctype) expect_n(s, path, body, strlen(body), status, want, ctype, __LINE__)

#define JSON "application/json"
#define TEXT "text/plain"

TEST(srv_errors_request_shape)
{
    const char *dir = srv_fixture("bert");
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, "--max-client-batch-size", "4", NULL};
    REQUIRE(srv_start(&s, args) == 0);
    /* JSON syntax: TEI 400 plain text; Infinity (FastAPI) 422 detail. */
    EXPECT(&s, "/embed", "{\"inputs\":", 400, "Failed to parse the request body as JSON: syntax error at line 1 column 10",
           TEXT);
    EXPECT(&s, "/v1/embeddings", "[1,", 400, "Failed to parse the request body as JSON: syntax error at line 1 column 3",
           TEXT);
    EXPECT(&s, "/embed", "", 400, "Failed to parse the request body as JSON: EOF while parsing a value at line 1 column 0",
           TEXT);
    EXPECT(&s, "/embed", "{\"inputs\":\"a\"} x", 400, "Failed to parse the request body as JSON: trailing characters at byte 15",
           TEXT);
    EXPECT(&s, "/embeddings", "{\"input\": nope}", 422,
           "{\"detail\":[{\"type\":\"json_invalid\",\"loc\":[\"body\",10],\"msg\":\"JSON decode error\"}]}", JSON);
    /* Wrong types and missing fields: TEI 422 plain text; Infinity 422 detail. */
    EXPECT(&s, "/embed", "{\"inputs\":5}", 422,
           "Failed to deserialize the JSON body into the target type: inputs: data did not match any variant of "
           "untagged enum Input",
           TEXT);
    EXPECT(&s, "/embed", "{\"inputs\":\"a\",\"normalize\":\"yes\"}", 422,
           "Failed to deserialize the JSON body into the target type: normalize: invalid type: string \"yes\", "
           "expected a boolean",
           TEXT);
    EXPECT(&s, "/embed", "{\"input\":\"a\"}", 422,
           "Failed to deserialize the JSON body into the target type: missing field `inputs`", TEXT);
    EXPECT(&s, "/embed", "[\"a\"]", 422,
           "Failed to deserialize the JSON body into the target type: invalid type: sequence, expected a JSON object",
           TEXT);
    EXPECT(&s, "/embed", "{\"inputs\":\"a\",\"truncation_direction\":\"up\"}", 422,
           "Failed to deserialize the JSON body into the target type: truncation_direction: unknown variant `up`, "
           "expected one of `Left`, `left`, `Right`, `right`",
           TEXT);
    EXPECT(&s, "/embed", "{\"inputs\":[101,-1]}", 422,
           "Failed to deserialize the JSON body into the target type: inputs: invalid value: integer `-1`, expected u32",
           TEXT);
    EXPECT(&s, "/v1/embeddings", "{\"input\":\"a\",\"encoding_format\":\"hex\"}", 422,
           "Failed to deserialize the JSON body into the target type: encoding_format: unknown variant `hex`, expected "
           "`float` or `base64`",
           TEXT);
    EXPECT(&s, "/embeddings", "{\"input\":\"a\",\"encoding_format\":\"hex\"}", 422,
           "{\"detail\":[{\"type\":\"enum\",\"loc\":[\"body\",\"encoding_format\"],\"msg\":\"Input should be 'float' or "
           "'base64'\"}]}",
           JSON);
    EXPECT(&s, "/embeddings", "{\"model\":\"x\"}", 422,
           "{\"detail\":[{\"type\":\"missing\",\"loc\":[\"body\",\"input\"],\"msg\":\"Field required\"}]}", JSON);
    EXPECT(&s, "/embeddings", "{\"input\":[\"a\",7]}", 422,
           "{\"detail\":[{\"type\":\"string_type\",\"loc\":[\"body\",\"input\",1],\"msg\":\"Input should be a valid "
           "string\"}]}",
           JSON);
    EXPECT(&s, "/embeddings", "{\"input\":\"a\",\"modality\":\"smell\"}", 422,
           "{\"detail\":[{\"type\":\"union_tag_invalid\",\"loc\":[\"body\"],\"msg\":\"Input tag 'smell' found using "
           "'get_modality' does not match any of the expected tags: 'text', 'audio', 'image'\"}]}",
           JSON);
    EXPECT(&s, "/predict", "{\"inputs\":[\"a\",\"b\",\"c\"]}", 422,
           "Failed to deserialize the JSON body into the target type: inputs: invalid length 3, expected a string, a "
           "pair of strings [string, string] or a batch of mixed strings and pairs [[string], [string, string], ...]",
           TEXT);
    /* Invalid UTF-8 inside a JSON string: 422 in every flavour. */
    const char bad[] = "{\"inputs\":\"caf\xc3\x28\"}";
    expect_n(&s, "/embed", bad, sizeof bad - 1, 422,
             "{\"error\":\"Input validation error: the request body is not valid UTF-8 (byte 14)\",\"error_type\":"
             "\"Validation\"}",
             JSON, __LINE__);
    const char bad_oai[] = "{\"input\":\"\xed\xa0\x80\"}"; /* an encoded UTF-16 surrogate */
    expect_n(&s, "/v1/embeddings", bad_oai, sizeof bad_oai - 1, 422,
             "{\"message\":\"Input validation error: the request body is not valid UTF-8 (byte 10)\",\"code\":422,"
             "\"type\":\"Validation\"}",
             JSON, __LINE__);
    const char bad_inf[] = "{\"input\":\"\xf4\x90\x80\x80\"}"; /* above U+10FFFF */
    expect_n(&s, "/embeddings", bad_inf, sizeof bad_inf - 1, 422,
             "{\"error\":{\"message\":\"Input validation error: the request body is not valid UTF-8 (byte 10)\","
             "\"type\":null,\"param\":null,\"code\":422}}",
             JSON, __LINE__);
    /* Content type (TEI requires JSON), unknown path, wrong method. */
    http_resp r;
    const char *plain[] = {"Content-Type: text/plain", NULL};
    REQUIRE(http_do(&s, "POST", "/embed", "{\"inputs\":\"a\"}", 14, plain, &r) == 0);
    CHECK_EQ_INT(r.status, 415);
    CHECK_STR(r.body, "Expected request with `Content-Type: application/json`");
    http_resp_free(&r);
    REQUIRE(http_do(&s, "POST", "/embeddings", "{\"input\":\"a\"}", 13, plain, &r) == 0);
    CHECK_EQ_INT(r.status, 200); /* FastAPI reads the body whatever the content type */
    http_resp_free(&r);
    REQUIRE(http_get(&s, "/nope", &r) == 0);
    CHECK_EQ_INT(r.status, 404);
    http_resp_free(&r);
    REQUIRE(http_get(&s, "/embed", &r) == 0);
    CHECK_EQ_INT(r.status, 405);
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);
}

TEST(srv_errors_validation)
{
    const char *dir = srv_fixture("bert");
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, "--max-client-batch-size", "4", "--max-client-batch-size-openai", "4", NULL};
    REQUIRE(srv_start(&s, args) == 0);
    /* Empty inputs: 400 Empty. */
    const char *empty = "{\"error\":\"Input validation error: `inputs` cannot be empty\",\"error_type\":\"Empty\"}";
    EXPECT(&s, "/embed", "{\"inputs\":\"\"}", 400, empty, JSON);
    EXPECT(&s, "/embed", "{\"inputs\":[]}", 400, empty, JSON);
    EXPECT(&s, "/embed", "{\"inputs\":[\"a\",\"\"]}", 400, empty, JSON);
    EXPECT(&s, "/embed", "{\"inputs\":[[101,102],[]]}", 400, empty, JSON);
    EXPECT(&s, "/v1/embeddings", "{\"input\":\"\"}", 400,
           "{\"message\":\"Input validation error: `inputs` cannot be empty\",\"code\":400,\"type\":\"Empty\"}", JSON);
    EXPECT(&s, "/embeddings", "{\"input\":[]}", 422,
           "{\"detail\":[{\"type\":\"too_short\",\"loc\":[\"body\",\"input\"],\"msg\":\"List should have at least 1 "
           "item after validation, not 0\"}]}",
           JSON);
    /* Infinity (like sentence-transformers) embeds an empty text: its special tokens. */
    EXPECT(&s, "/embeddings", "{\"input\":[\"\",\"a\"]}", 200, NULL, JSON);
    EXPECT(&s, "/similarity", "{\"inputs\":{\"source_sentence\":\"a\",\"sentences\":[]}}", 400,
           "{\"error\":\"`inputs.sentences` cannot be empty\",\"error_type\":\"Empty\"}", JSON);
    EXPECT(&s, "/decode", "{\"ids\":[]}", 400,
           "{\"error\":\"Input validation error: `input_ids` cannot be empty\",\"error_type\":\"Empty\"}", JSON);
    /* Too many inputs. */
    EXPECT(&s, "/embed", "{\"inputs\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", 422,
           "{\"error\":\"batch size 5 > maximum allowed batch size 4\",\"error_type\":\"Validation\"}", JSON);
    EXPECT(&s, "/similarity", "{\"inputs\":{\"source_sentence\":\"a\",\"sentences\":[\"a\",\"b\",\"c\",\"d\"]}}", 422,
           "{\"error\":\"batch size 5 > maximum allowed batch size 4\",\"error_type\":\"Validation\"}", JSON);
    EXPECT(&s, "/embeddings", "{\"input\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", 422,
           "{\"detail\":[{\"type\":\"too_long\",\"loc\":[\"body\",\"input\"],\"msg\":\"List should have at most 4 items "
           "after validation, not 5\"}]}",
           JSON);
    /* Bad dimensions (the fixture embeds into 32 floats). */
    EXPECT(&s, "/embed", "{\"inputs\":\"a\",\"dimensions\":0}", 422,
           "{\"error\":\"Input validation error: `dimensions` should be positive\",\"error_type\":\"Validation\"}", JSON);
    EXPECT(&s, "/embed", "{\"inputs\":\"a\",\"dimensions\":33}", 422,
           "{\"error\":\"Input validation error: `dimensions` should be smaller than the maximum embedding "
           "dimension.\",\"error_type\":\"Validation\"}",
           JSON);
    EXPECT(&s, "/v1/embeddings", "{\"input\":\"a\",\"dimensions\":0}", 422,
           "{\"message\":\"Input validation error: `dimensions` should be positive\",\"code\":422,\"type\":"
           "\"Validation\"}",
           JSON);
    EXPECT(&s, "/embeddings", "{\"input\":\"a\",\"dimensions\":64}", 400,
           "{\"error\":{\"message\":\"<class 'infinity_emb.primitives.MatryoshkaDimError'> -> matryoshka_dim=64 is not "
           "in a valid range. Select between 1 and 32.\",\"type\":null,\"param\":null,\"code\":400}}",
           JSON);
    /* Unknown prompt name (the fixture's prompts are "document" and "query"). */
    http_resp r;
    REQUIRE(http_post(&s, "/embed", "{\"inputs\":\"a\",\"prompt_name\":\"nope\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 422);
    CHECK_CONTAINS(r.body, "Input validation error: `prompt_name` is set to `nope` but it was not found in the "
                           "Sentence Transformers prompts. Available prompts: [");
    CHECK_CONTAINS(r.body, "\\\"query\\\"");
    CHECK_STR(jstr(r.json, "error_type"), "Validation");
    http_resp_free(&r);
    /* Token ids outside the vocabulary. */
    EXPECT(&s, "/embed", "{\"inputs\":[101,9999,102]}", 422,
           "{\"error\":\"Input validation error: token id 9999 is outside the vocabulary (size 160)\",\"error_type\":"
           "\"Validation\"}",
           JSON);
    /* Route the model cannot serve. */
    REQUIRE(http_post(&s, "/predict", "{\"inputs\":\"a\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 424);
    CHECK_CONTAINS(r.body, "Backend error: Model is not a classifier model. Model `");
    CHECK_CONTAINS(r.body, "(BertModel) serves: /embed, /v1/embeddings, /embeddings, /similarity, /embed_all, "
                           "/tokenize, /decode");
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/rerank", "{\"query\":\"a\",\"documents\":[\"b\"]}", &r) == 0);
    CHECK_EQ_INT(r.status, 400);
    CHECK_CONTAINS(r.body, "does not support `rerank`. Reason: the loaded moded cannot fullyfill `rerank`. Options "
                           "are {'embed'}.");
    http_resp_free(&r);
    EXPECT(&s, "/rerank", "{\"query\":\"a\",\"texts\":[]}", 400,
           "{\"error\":\"`texts` cannot be empty\",\"error_type\":\"Empty\"}", JSON);
    CHECK_EQ_INT(srv_stop(&s), 0);
}

/* One input of n "a" words (one token each with the fixture tokenizer) or n ids. */
static char *long_text(int n, const char *extra)
{
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_puts(&b, "{\"inputs\":\"");
    for (int i = 0; i < n; i++) iv_sb_puts(&b, i ? " a" : "a");
    iv_sb_printf(&b, "\"%s%s}", extra ? "," : "", extra ? extra : "");
    return b.data;
}

static char *long_ids(int n, const char *extra)
{
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_puts(&b, "{\"inputs\":[101");
    for (int i = 1; i < n - 1; i++) iv_sb_puts(&b, ",104");
    iv_sb_printf(&b, ",102]%s%s}", extra ? "," : "", extra ? extra : "");
    return b.data;
}

TEST(srv_errors_too_long)
{
    const char *dir = srv_fixture("bert");
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, NULL};
    REQUIRE(srv_start(&s, args) == 0);
    /* The fixture's limit is 128 tokens (max_position_embeddings). */
    char *t = long_text(300, "\"truncate\":false");
    EXPECT(&s, "/embed", t, 422,
           "{\"error\":\"Input validation error: `inputs` must have less than 128 tokens. Given: 302\",\"error_type\":"
           "\"Validation\"}",
           JSON);
    free(t);
    char *ids = long_ids(200, "\"truncate\":false");
    EXPECT(&s, "/embed", ids, 422,
           "{\"error\":\"Input validation error: `inputs` must have less than 128 tokens. Given: 200\",\"error_type\":"
           "\"Validation\"}",
           JSON);
    free(ids);
    /* Truncated by default (--auto-truncate), either side. */
    http_resp r;
    char v[32];
    t = long_text(300, NULL);
    REQUIRE(http_post(&s, "/embed", t, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK(http_header(&r, "x-compute-tokens", v, sizeof v) && atoi(v) == 128);
    http_resp_free(&r);
    free(t);
    t = long_text(300, "\"truncate\":true,\"truncation_direction\":\"Left\"");
    REQUIRE(http_post(&s, "/embed", t, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    http_resp_free(&r);
    free(t);
    ids = long_ids(200, NULL);
    REQUIRE(http_post(&s, "/embed", ids, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK(http_header(&r, "x-compute-tokens", v, sizeof v) && atoi(v) == 128);
    http_resp_free(&r);
    free(ids);
    CHECK_EQ_INT(srv_stop(&s), 0);

    /* --auto-truncate false: long inputs fail unless the request truncates. */
    const char *strict[] = {"--model-id", dir, "--auto-truncate", "false", NULL};
    REQUIRE(srv_start(&s, strict) == 0);
    t = long_text(300, NULL);
    EXPECT(&s, "/embed", t, 422,
           "{\"error\":\"Input validation error: `inputs` must have less than 128 tokens. Given: 302\",\"error_type\":"
           "\"Validation\"}",
           JSON);
    free(t);
    t = long_text(300, "\"truncate\":true");
    EXPECT(&s, "/embed", t, 200, NULL, JSON);
    free(t);
    CHECK_EQ_INT(srv_stop(&s), 0);

    /* --max-batch-tokens below the model's limit: truncation to the budget, or a start-up error without it. */
    const char *budget[] = {"--model-id", dir, "--max-batch-tokens", "64", NULL};
    REQUIRE(srv_start(&s, budget) == 0);
    t = long_text(300, NULL);
    REQUIRE(http_post(&s, "/embed", t, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK(http_header(&r, "x-compute-tokens", v, sizeof v) && atoi(v) == 64);
    http_resp_free(&r);
    free(t);
    CHECK_EQ_INT(srv_stop(&s), 0);
    const char *refuse[] = {"--model-id", dir, "--max-batch-tokens", "64", "--auto-truncate", "false", NULL};
    CHECK(srv_start_quiet(&s, refuse) != 0);
    char *log = srv_log(&s);
    CHECK_CONTAINS(log, "The maximum input length is `128` which exceeds `--max-batch-tokens=64`");
    free(log);
    srv_stop(&s);
}

TEST(srv_errors_payload_limit)
{
    const char *dir = srv_fixture("bert");
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, "--payload-limit", "4096", NULL};
    REQUIRE(srv_start(&s, args) == 0);
    char *t = long_text(2500, NULL); /* ~5 kB */
    EXPECT(&s, "/embed", t, 413, "Failed to buffer the request body: length limit exceeded", TEXT);
    EXPECT(&s, "/v1/embeddings", t, 413, "Failed to buffer the request body: length limit exceeded", TEXT);
    http_resp r;
    REQUIRE(http_post(&s, "/embeddings", t, &r) == 0);
    CHECK_EQ_INT(r.status, 413);
    CHECK_CONTAINS(r.body, "\"code\":413");
    http_resp_free(&r);
    /* A chunked body has no Content-Length: the limit applies while receiving. */
    iv_strbuf req;
    iv_sb_init(&req);
    iv_sb_puts(&req, "POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
    size_t len = strlen(t);
    for (size_t off = 0; off < len; off += 1000) {
        size_t n = len - off < 1000 ? len - off : 1000;
        iv_sb_printf(&req, "%zx\r\n", n);
        iv_sb_append(&req, t + off, n);
        iv_sb_puts(&req, "\r\n");
    }
    iv_sb_puts(&req, "0\r\n\r\n");
    char *reply = raw_exchange(&s, req.data, req.len, 10000);
    REQUIRE(reply);
    CHECK_CONTAINS(reply, "HTTP/1.1 413");
    CHECK_CONTAINS(reply, "length limit exceeded");
    free(reply);
    iv_sb_free(&req);
    free(t);
    /* Under the limit still works. */
    EXPECT(&s, "/embed", "{\"inputs\":\"a b c\"}", 200, NULL, JSON);
    CHECK_EQ_INT(srv_stop(&s), 0);
}
