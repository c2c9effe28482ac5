/* Multi-vector (ColBERT) models through the real binary (docs/colbert.md):
 * /embeddings, /v1/embeddings, /embed and /embed_all return one token
 * matrix per input, as float rows, base64 rows or one `tensor`, equal to the
 * references' matrices in the fixtures' expected.safetensors
 * ("multivector.<i>", max abs error <= 1e-4, cosine >= 0.99999 per row);
 * the options that cannot apply are refused with a 4xx naming why. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "golden/golden_util.h"
#include "server_harness.h"
#include "test.h"

#define MIN_COS 0.99999
#define MAX_ABS 1e-4

/* {"<key>":[[ids of case 0], ...]<extra>} */
static char *mv_ids_request(const golden_case *g, const char *key, const char *extra)
{
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_printf(&b, "{\"%s\":[", key);
    for (int i = 0; i < g->n; i++) {
        iv_sb_puts(&b, i ? ",[" : "[");
        for (int k = 0; k < g->lens[i]; k++) iv_sb_printf(&b, "%s%d", k ? "," : "", g->ids[i][k]);
        iv_sb_putc(&b, ']');
    }
    iv_sb_printf(&b, "]%s}", extra ? extra : "");
    return b.data;
}

static void mv_compare(const char *what, int i, const float *got, int rows, int cols, golden_case *g)
{
    const iv_tensor *want = golden_expected(g, "multivector", i);
    REQUIRE(want);
    char label[160];
    snprintf(label, sizeof label, "%s multivector.%d", what, i);
    const int want_rows = (int)iv_tensor_numel(want) / 16;
    CHECK_EQ_INT(cols, 16);
    CHECK_EQ_INT(rows, want_rows);
    if (cols == 16 && rows == want_rows) CHECK_EQ_INT(golden_compare(label, got, want->data, rows, cols, MIN_COS, MAX_ABS), 0);
}

/* Little-endian float32 bytes into host floats (malloc'd). */
static float *mv_le_floats(const unsigned char *p, size_t n_bytes)
{
    float *v = malloc(n_bytes + 4);
    for (size_t k = 0; k + 4 <= n_bytes; k += 4) {
        uint32_t u = (uint32_t)p[k] | (uint32_t)p[k + 1] << 8 | (uint32_t)p[k + 2] << 16 | (uint32_t)p[k + 3] << 24;
        memcpy(&v[k / 4], &u, 4);
    }
    return v;
}

/* One matrix value in any of the three encodings, compared with case i. */
static void mv_check_matrix(const char *what, const cJSON *m, int i, golden_case *g)
{
    if (cJSON_IsObject(m)) { /* tensor */
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(m, "shape");
        REQUIRE(cJSON_GetArraySize(shape) == 2);
        const int rows = cJSON_GetArrayItem(shape, 0)->valueint, cols = cJSON_GetArrayItem(shape, 1)->valueint;
        CHECK_STR(jstr(m, "dtype"), "float32");
        size_t n;
        unsigned char *bytes = b64_decode(jstr(m, "data"), &n);
        REQUIRE(bytes);
        CHECK_EQ_INT((long long)n, (long long)rows * cols * 4);
        float *v = mv_le_floats(bytes, n);
        if (n == (size_t)rows * cols * 4) mv_compare(what, i, v, rows, cols, g);
        free(v);
        free(bytes);
        return;
    }
    REQUIRE(cJSON_IsArray(m));
    const int rows = cJSON_GetArraySize(m);
    float *all = malloc((size_t)(rows + 1) * 16 * sizeof *all);
    int cols = 16;
    for (int t = 0; t < rows; t++) {
        const cJSON *row = cJSON_GetArrayItem(m, t);
        int n;
        float *v;
        if (cJSON_IsString(row)) { /* base64 row */
            size_t nb;
            unsigned char *bytes = b64_decode(row->valuestring, &nb);
            REQUIRE(bytes);
            v = mv_le_floats(bytes, nb);
            n = (int)(nb / 4);
            free(bytes);
        } else {
            v = json_floats(row, &n);
        }
        if (n != 16) cols = n;
        else memcpy(all + (size_t)t * 16, v, 16 * sizeof *v);
        free(v);
    }
    mv_compare(what, i, all, rows, cols, g);
    free(all);
}

static int mv_total_tokens(const golden_case *g)
{
    int t = 0;
    for (int i = 0; i < g->n; i++) t += g->lens[i];
    return t;
}

/* /v1/embeddings and /embeddings in every encoding. */
static void mv_check_openai(const srv *s, golden_case *g, const char *path, const char *encoding)
{
    char extra[64];
    snprintf(extra, sizeof extra, ",\"encoding_format\":\"%s\"", encoding);
    char *req = mv_ids_request(g, "input", extra);
    http_resp r;
    REQUIRE(http_post(s, path, req, &r) == 0);
    free(req);
    CHECK_EQ_INT(r.status, 200);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(r.json, "data");
    CHECK_EQ_INT(cJSON_GetArraySize(data), g->n);
    char what[96];
    snprintf(what, sizeof what, "%s %s", path, encoding);
    for (int i = 0; i < g->n && i < cJSON_GetArraySize(data); i++) {
        const cJSON *d = cJSON_GetArrayItem(data, i);
        CHECK_EQ_INT(jint(d, "index"), i);
        mv_check_matrix(what, cJSON_GetObjectItemCaseSensitive(d, "embedding"), i, g);
    }
    /* Every token run counts, not only the kept rows. */
    CHECK_EQ_INT(jint(cJSON_GetObjectItemCaseSensitive(r.json, "usage"), "prompt_tokens"), mv_total_tokens(g));
    http_resp_free(&r);
}

static void mv_check_tei(const srv *s, golden_case *g, const char *path)
{
    char *req = mv_ids_request(g, "inputs", NULL);
    http_resp r;
    REQUIRE(http_post(s, path, req, &r) == 0);
    free(req);
    CHECK_EQ_INT(r.status, 200);
    REQUIRE(cJSON_IsArray(r.json));
    CHECK_EQ_INT(cJSON_GetArraySize(r.json), g->n);
    for (int i = 0; i < g->n && i < cJSON_GetArraySize(r.json); i++)
        mv_check_matrix(path, cJSON_GetArrayItem(r.json, i), i, g);
    char v[32];
    CHECK(http_header(&r, "x-compute-tokens", v, sizeof v) && atoi(v) == mv_total_tokens(g));
    http_resp_free(&r);
}

static void mv_check_routes(const char *fixture)
{
    const char *dir = srv_fixture(fixture);
    if (!dir) return;
    golden_case g;
    REQUIRE(golden_load(&g, dir) == 0);
    srv s;
    const char *args[] = {"--model-id", dir, NULL};
    REQUIRE(srv_start(&s, args) == 0);
    const char *encodings[] = {"float", "base64", "tensor"};
    for (int k = 0; k < 3; k++) {
        mv_check_openai(&s, &g, "/v1/embeddings", encodings[k]);
        mv_check_openai(&s, &g, "/embeddings", encodings[k]);
    }
    mv_check_tei(&s, &g, "/embed");
    mv_check_tei(&s, &g, "/embed_all");
    /* Plain text takes the unaugmented document path: cases 7 and 8 are the
     * raw tokenizer's encodings of these texts. */
    http_resp r;
    REQUIRE(http_post(&s, "/embed", "{\"inputs\":[\"hello, jack! (ok) #1\",\"it's 42 - bad.\"]}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(cJSON_GetArraySize(r.json), 2);
    if (cJSON_GetArraySize(r.json) == 2) {
        mv_check_matrix("/embed text", cJSON_GetArrayItem(r.json, 0), 7, &g);
        mv_check_matrix("/embed text", cJSON_GetArrayItem(r.json, 1), 8, &g);
    }
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);
    golden_free(&g);
}

TEST(srv_colbert_routes_match_reference) { mv_check_routes("colbert_bert"); }

TEST(srv_pylate_routes_match_reference) { mv_check_routes("pylate_bert"); }

/* A document whose every row is dropped (here the pad id alone) gives []
 * as float or base64 rows and a [0, dim] tensor with no data. */
TEST(srv_colbert_empty_matrix)
{
    const char *dir = srv_fixture("colbert_bert");
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, NULL};
    REQUIRE(srv_start(&s, args) == 0);
    http_resp r;
    REQUIRE(http_post(&s, "/embed", "{\"inputs\":[[0]]}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(r.body, "[[]]");
    http_resp_free(&r);
    const char *want[][2] = {{"float", "\"embedding\":[]"},
                             {"base64", "\"embedding\":[]"},
                             {"tensor", "\"embedding\":{\"shape\":[0,16],\"dtype\":\"float32\",\"data\":\"\"}"}};
    for (int k = 0; k < 3; k++) {
        char req[96];
        snprintf(req, sizeof req, "{\"input\":[[0]],\"encoding_format\":\"%s\"}", want[k][0]);
        REQUIRE(http_post(&s, "/v1/embeddings", req, &r) == 0);
        CHECK_EQ_INT(r.status, 200);
        if (!r.body || !strstr(r.body, want[k][1]))
            iv_test_fail(__FILE__, __LINE__, "%s: %s lacks %s", want[k][0], r.body ? r.body : "", want[k][1]);
        CHECK_EQ_INT(jint(cJSON_GetObjectItemCaseSensitive(r.json, "usage"), "prompt_tokens"), 1);
        http_resp_free(&r);
    }
    CHECK_EQ_INT(srv_stop(&s), 0);
}

/* status and a phrase of the body for one refused request. */
static void mv_expect(const srv *s, const char *path, const char *body, long status, const char *phrase)
{
    http_resp r;
    REQUIRE(http_post(s, path, body, &r) == 0);
    if (r.status != status || !r.body || !strstr(r.body, phrase))
        iv_test_fail(__FILE__, __LINE__, "%s %s: got %ld %s, want %ld with \"%s\"", path, body, r.status,
                     r.body ? r.body : "", status, phrase);
    http_resp_free(&r);
}

TEST(srv_colbert_rejections)
{
    const char *dir = srv_fixture("colbert_bert");
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, NULL};
    REQUIRE(srv_start(&s, args) == 0);
    const char *no_dims = "`dimensions` is not supported by multi-vector model";
    mv_expect(&s, "/v1/embeddings", "{\"input\":\"a b\",\"dimensions\":8}", 422, no_dims);
    mv_expect(&s, "/embeddings", "{\"input\":\"a b\",\"dimensions\":8}", 422, no_dims);
    mv_expect(&s, "/embed", "{\"inputs\":\"a b\",\"dimensions\":8}", 422, no_dims);
    mv_expect(&s, "/embed", "{\"inputs\":\"a b\",\"normalize\":false}", 422,
              "`normalize` is not supported by multi-vector model");
    mv_expect(&s, "/similarity", "{\"inputs\":{\"source_sentence\":\"a\",\"sentences\":[\"b\"]}}", 422,
              "is multi-vector (one matrix per input)");
    mv_expect(&s, "/predict", "{\"inputs\":\"a\"}", 424, "Model is not a classifier model");
    mv_expect(&s, "/embed_sparse", "{\"inputs\":\"a\"}", 424, "SPLADE");
    /* /rerank scores by MaxSim (test_server_images.c). */

    /* /info and /models describe the model as multi-vector with its dim. */
    http_resp r;
    REQUIRE(http_get(&s, "/info", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    const cJSON *emb = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r.json, "model_type"), "embedding");
    CHECK_STR(jstr(emb, "pooling"), "none");
    CHECK_EQ_INT(jint(cJSON_GetObjectItemCaseSensitive(emb, "multi_vector"), "dim"), 16);
    http_resp_free(&r);
    REQUIRE(http_get(&s, "/models", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    const cJSON *m0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r.json, "data"), 0);
    CHECK_EQ_INT(jint(cJSON_GetObjectItemCaseSensitive(m0, "multi_vector"), "dim"), 16);
    CHECK_STR(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(m0, "capabilities"), 0)->valuestring, "embed");
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);

    /* Sentence pooling does not apply: --pooling refuses to start. */
    const char *pool_args[] = {"--model-id", dir, "--pooling", "mean", NULL};
    CHECK(srv_start_quiet(&s, pool_args) != 0);
}

/* encoding_format=tensor is for matrices: a single-vector model refuses it. */
TEST(srv_tensor_encoding_single_vector_refused)
{
    const char *dir = srv_fixture("bert");
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, NULL};
    REQUIRE(srv_start(&s, args) == 0);
    mv_expect(&s, "/v1/embeddings", "{\"input\":[[101,102]],\"encoding_format\":\"tensor\"}", 422,
              "`tensor` is for multi-vector models");
    CHECK_EQ_INT(srv_stop(&s), 0);
}
