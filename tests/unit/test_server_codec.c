/* Server codec pieces without a server: UTF-8 validation, base64, input
 * forms, error bodies per flavour, Prometheus rendering. */
#include <stdlib.h>
#include <string.h>

#include "server/codec.h"
#include "server/errors.h"
#include "server/metrics.h"
#include "test.h"

TEST(codec_utf8_validation)
{
    struct {
        const char *s;
        size_t n;
        int ok;
        size_t bad;
    } cases[] = {
        {"plain ascii", 11, 1, 0},
        {"caf\xc3\xa9", 5, 1, 0},
        {"\xe2\x82\xac \xf0\x9f\x98\x80", 8, 1, 0},   /* euro sign, emoji */
        {"\xf4\x8f\xbf\xbf", 4, 1, 0},                 /* U+10FFFF */
        {"a\x80", 2, 0, 1},                            /* lone continuation */
        {"\xc0\xaf", 2, 0, 0},                         /* overlong '/' */
        {"\xe0\x80\xaf", 3, 0, 0},                     /* overlong 3-byte */
        {"\xed\xa0\x80", 3, 0, 0},                     /* UTF-16 surrogate */
        {"\xf4\x90\x80\x80", 4, 0, 0},                 /* above U+10FFFF */
        {"ab\xe2\x82", 4, 0, 2},                       /* truncated */
        {"\xf5\x80\x80\x80", 4, 0, 0},
        {"x\0y", 3, 1, 0},                             /* NUL is valid UTF-8 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t bad = 99;
        int ok = iv_utf8_valid(cases[i].s, cases[i].n, &bad);
        CHECK_MSG(ok == cases[i].ok, "case %zu: valid=%d", i, ok);
        if (!cases[i].ok) CHECK_MSG(bad == cases[i].bad, "case %zu: bad at %zu, want %zu", i, bad, cases[i].bad);
    }
    CHECK_EQ_INT(iv_utf8_count("caf\xc3\xa9 \xf0\x9f\x98\x80", 10), 6);
}

TEST(codec_base64_rfc4648)
{
    const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *out[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        iv_strbuf b;
        iv_sb_init(&b);
        iv_codec_base64(&b, (const unsigned char *)in[i], strlen(in[i]));
        CHECK_STR(b.data ? b.data : "", out[i]);
        iv_sb_free(&b);
    }
    /* An embedding: little-endian float32 bytes. 1.0f = 00 00 80 3f, -2.0f = 00 00 00 c0. */
    float v[2] = {1.0f, -2.0f};
    iv_strbuf b;
    iv_sb_init(&b);
    iv_codec_embedding(&b, v, 2, 1);
    CHECK_STR(b.data, "\"AACAPwAAAMA=\"");
    iv_sb_reset(&b);
    iv_codec_embedding(&b, v, 2, 0);
    CHECK_STR(b.data, "[1,-2]");
    iv_sb_free(&b);
}

TEST(codec_input_forms)
{
    iv_api_error e;
    cJSON *j;
    iv_inputs in;
    const char *accented = "{\"inputs\":\"h\xc3\xa9llo\"}";
    REQUIRE(iv_codec_parse_body(accented, strlen(accented), &j, &e) == 0);
    REQUIRE(iv_codec_inputs(j, "inputs", &in, &e) == 0);
    CHECK(in.single && in.n == 1 && in.items[0].text_len == 6 && in.n_chars == 5);
    iv_inputs_free(&in);
    cJSON_Delete(j);
    REQUIRE(iv_codec_parse_body("{\"inputs\":[1,2,3]}", 18, &j, &e) == 0);
    REQUIRE(iv_codec_inputs(j, "inputs", &in, &e) == 0);
    CHECK(in.single && in.n == 1 && in.items[0].n_ids == 3 && in.items[0].ids[2] == 3);
    iv_inputs_free(&in);
    cJSON_Delete(j);
    const char *mixed = "{\"inputs\":[\"a\",[7,8],\"bc\"]}";
    REQUIRE(iv_codec_parse_body(mixed, strlen(mixed), &j, &e) == 0);
    REQUIRE(iv_codec_inputs(j, "inputs", &in, &e) == 0);
    CHECK(!in.single && in.n == 3 && in.items[1].n_ids == 2 && in.items[2].text_len == 2 && in.n_chars == 5);
    iv_inputs_free(&in);
    cJSON_Delete(j);
    const char *pairs = "{\"inputs\":[[\"q\"],[\"q\",\"d\"]]}";
    REQUIRE(iv_codec_parse_body(pairs, strlen(pairs), &j, &e) == 0);
    REQUIRE(iv_codec_predict_inputs(j, "inputs", &in, &e) == 0);
    CHECK(!in.single && in.n == 2 && !in.items[0].pair && in.items[1].pair && in.items[1].pair[0] == 'd');
    iv_inputs_free(&in);
    cJSON_Delete(j);
    const char *floats = "{\"inputs\":[1.5]}";
    REQUIRE(iv_codec_parse_body(floats, strlen(floats), &j, &e) == 0);
    CHECK(iv_codec_inputs(j, "inputs", &in, &e) != 0);
    CHECK_EQ_INT(e.kind, IV_API_JSON_DATA);
    CHECK_STR(e.msg, "inputs: invalid value: floating point `1.5`, expected u32");
    iv_inputs_free(&in);
    cJSON_Delete(j);
}

static char *render(iv_flavour f, const iv_api_error *e, int *status)
{
    iv_reply r;
    iv_error_render(f, e, &r);
    *status = r.status;
    return r.body ? r.body : strdup("");
}

TEST(codec_error_bodies)
{
    iv_api_error e;
    int st;
    char *b;
    iv_api_errorf(&e, IV_API_OVERLOADED, "Model is overloaded");
    b = render(IV_FLAVOUR_TEI, &e, &st);
    CHECK_EQ_INT(st, 429);
    CHECK_STR(b, "{\"error\":\"Model is overloaded\",\"error_type\":\"Overloaded\"}");
    free(b);
    b = render(IV_FLAVOUR_OPENAI, &e, &st);
    CHECK_STR(b, "{\"message\":\"Model is overloaded\",\"code\":429,\"type\":\"Overloaded\"}");
    free(b);
    b = render(IV_FLAVOUR_INFINITY, &e, &st);
    CHECK_STR(b, "{\"error\":{\"message\":\"Model is overloaded\",\"type\":null,\"param\":null,\"code\":429}}");
    free(b);
    iv_api_errorf(&e, IV_API_BACKEND, "x");
    b = render(IV_FLAVOUR_TEI, &e, &st);
    CHECK_EQ_INT(st, 424);
    free(b);
    iv_reply r;
    iv_error_render(IV_FLAVOUR_INFINITY, &e, &r);
    CHECK_EQ_INT(r.status, 500);
    free(r.body);
    iv_api_errorf(&e, IV_API_EMPTY, "`inputs` cannot be empty");
    b = render(IV_FLAVOUR_TEI, &e, &st);
    CHECK_EQ_INT(st, 400);
    free(b);
    iv_api_error_shape(&e, "\"body\",\"input\"", "too_short", "List should have at least 1 item after validation, not 0");
    b = render(IV_FLAVOUR_INFINITY, &e, &st);
    CHECK_EQ_INT(st, 422);
    CHECK_STR(b, "{\"detail\":[{\"type\":\"too_short\",\"loc\":[\"body\",\"input\"],\"msg\":\"List should have at least "
                 "1 item after validation, not 0\"}]}");
    free(b);
    iv_api_errorf(&e, IV_API_UNHEALTHY, "unhealthy");
    b = render(IV_FLAVOUR_TEI, &e, &st);
    CHECK_EQ_INT(st, 503);
    CHECK_STR(b, "{\"error\":\"unhealthy\",\"error_type\":\"Unhealthy\"}");
    free(b);
}

TEST(codec_metrics_rendering)
{
    iv_metrics *m = iv_metrics_new(100);
    iv_metrics_inc(m, "te_request_count{method=\"single\"}", 2);
    iv_metrics_inc(m, "te_request_count{method=\"batch\"}", 1);
    iv_metrics_inc(m, "te_embed_count", 3);
    iv_metrics_observe(m, "te_request_input_length", 3);
    iv_metrics_observe(m, "te_request_input_length", 70);
    iv_metrics_observe(m, "te_request_duration", 0.0001);
    iv_strbuf b;
    iv_sb_init(&b);
    iv_metrics_render(m, &b);
    /* One TYPE line per metric, series of one metric together. */
    CHECK_CONTAINS(b.data, "# TYPE te_request_count counter\nte_request_count{method=\"single\"} 2\n"
                           "te_request_count{method=\"batch\"} 1\n");
    CHECK_CONTAINS(b.data, "te_request_input_length_bucket{le=\"2\"} 0\nte_request_input_length_bucket{le=\"4\"} 1\n");
    CHECK_CONTAINS(b.data, "te_request_input_length_bucket{le=\"64\"} 1\n"
                           "te_request_input_length_bucket{le=\"+Inf\"} 2\n"
                           "te_request_input_length_sum 73\nte_request_input_length_count 2\n");
    CHECK(strstr(b.data, "le=\"128\"") == NULL); /* buckets stop at the input limit */
    CHECK_CONTAINS(b.data, "te_request_duration_bucket{le=\"1.5000000000000002e-05\"} 0\n");
    CHECK_CONTAINS(b.data, "te_request_duration_count 1\n");
    iv_sb_free(&b);
    iv_metrics_free(m);
}

/* Issue 22: strings holding U+0000 keep their full length wherever they sit
 * (after keys, nested, after surrogate pairs and other NUL strings); raw
 * control bytes inside strings are syntax errors. */
TEST(codec_nul_strings_and_control_bytes)
{
    const char body[] = "{\"k\\u0000ey\":\"x\\u0000\",\"a\":[\"\\ud83d\\ude00\\u0000\\u00e9\",{\"b\":\"p\\u0000q\"}],"
                        "\"c\":\"plain\",\"d\":\"\\\"\\u0000\\n\"}";
    cJSON *root;
    iv_api_error e;
    REQUIRE(iv_codec_parse_body(body, sizeof body - 1, &root, &e) == 0);
    const cJSON *k = cJSON_GetArrayItem(root, 0);
    CHECK_EQ_INT(iv_codec_str_len(k), 2);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "a");
    const cJSON *a0 = cJSON_GetArrayItem(a, 0);
    CHECK_EQ_INT(iv_codec_str_len(a0), 7); /* 4 + 1 + 2 */
    CHECK(!memcmp(a0->valuestring, "\xf0\x9f\x98\x80\0\xc3\xa9", 7));
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(a, 1), "b");
    CHECK_EQ_INT(iv_codec_str_len(b), 3);
    CHECK(!memcmp(b->valuestring, "p\0q", 3));
    CHECK_EQ_INT(iv_codec_str_len(cJSON_GetObjectItemCaseSensitive(root, "c")), 5);
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "d");
    CHECK_EQ_INT(iv_codec_str_len(d), 3);
    CHECK(!memcmp(d->valuestring, "\"\0\n", 3));
    cJSON_Delete(root);

    const char *bad[] = {"{\"a\":\"x\x01y\"}", "{\"a\":\"\t\"}", "{\"a\":[\"ok\",\"\x1f\"]}", "{\"a\x0a\":1}"};
    for (int i = 0; i < 4; i++) {
        CHECK(iv_codec_parse_body(bad[i], strlen(bad[i]), &root, &e) != 0);
        CHECK_EQ_INT(e.kind, IV_API_JSON_SYNTAX);
        CHECK_CONTAINS(e.msg, "control character (\\u0000-\\u001F) found while parsing a string");
    }
}
