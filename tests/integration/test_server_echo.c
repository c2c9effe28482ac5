/* Issue 22: error messages that echo a client string used to cut it with
 * "%.200s"/"%.64s", mid-character for multi-byte text, so some error
 * bodies were invalid UTF-8 (and invalid JSON). Every echo now cuts at a
 * character boundary; every error body must be valid UTF-8, and valid JSON
 * where it says so. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/utf8.h"
#include "server_harness.h"
#include "test.h"

/* "a" then `n` times "é" (2 bytes): every even cut length lands inside an é. */
static char *odd_text(int n)
{
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_putc(&b, 'a');
    for (int i = 0; i < n; i++) iv_sb_puts(&b, "\xc3\xa9");
    return b.data;
}

/* The same, percent-encoded for a URL. */
static char *odd_url(int n)
{
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_putc(&b, 'a');
    for (int i = 0; i < n; i++) iv_sb_puts(&b, "%C3%A9");
    return b.data;
}

static int valid_utf8(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        int k = iv_utf8_seq_len(s + i, n - i);
        if (!k) return 0;
        i += (size_t)k;
    }
    return 1;
}

/* Checks one error reply: status 4xx, the body valid UTF-8, valid JSON when
 * the content type says JSON, and (when given) containing `want`. */
static void check_reply(const char *what, http_resp *r, const char *want, int line)
{
    char ct[128] = "";
    http_header(r, "Content-Type", ct, sizeof ct);
    if (r->status < 400 || r->status >= 500) iv_test_fail(__FILE__, line, "%s: status %ld", what, r->status);
    if (!valid_utf8(r->body, r->len)) iv_test_fail(__FILE__, line, "%s: body is not valid UTF-8: %s", what, r->body);
    if (!strncmp(ct, "application/json", 16)) {
        cJSON *j = cJSON_ParseWithLength(r->body, r->len);
        if (!j) iv_test_fail(__FILE__, line, "%s: body is not JSON: %s", what, r->body);
        cJSON_Delete(j);
    }
    if (want && !strstr(r->body, want)) iv_test_fail(__FILE__, line, "%s: body %s lacks %s", what, r->body, want);
    http_resp_free(r);
}

static void post_check(const srv *s, const char *path, const char *fmt, const char *arg, const char *want, int line)
{
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_printf(&b, fmt, arg);
    http_resp r;
    if (http_post(s, path, b.data, &r)) {
        iv_test_fail(__FILE__, line, "POST %s failed", path);
    } else {
        check_reply(path, &r, want, line);
    }
    iv_sb_free(&b);
}
#define POST_CHECK(s, path, fmt, arg, want) post_check(s, path, fmt, arg, want, __LINE__)

TEST(srv_error_echo_utf8)
{
    const char *dir = srv_fixture("bert");
    if (!dir) return;
    srv s;
    /* Two models, so an unknown `model` is an error that echoes it. */
    const char *args[] = {"--model-id", dir, "--served-model-name", "one", "--model-id", dir, "--served-model-name", "two",
                          NULL};
    REQUIRE(srv_start(&s, args) == 0);
    char *t200 = odd_text(150), *t64 = odd_text(40), *t400 = odd_text(300);
    /* What an echo keeps: "a" and the whole é before the cut. */
    char *keep200 = odd_text(99), *keep64 = odd_text(31);
    char want200[256], want64[128];
    snprintf(want200, sizeof want200, "`%s`", keep200);
    snprintf(want64, sizeof want64, "`%s`", keep64);

    POST_CHECK(&s, "/embed", "{\"inputs\":\"x\",\"model\":\"%s\"}", t200, want200);
    POST_CHECK(&s, "/v1/embeddings", "{\"input\":\"x\",\"model\":\"%s\"}", t200, want200);
    POST_CHECK(&s, "/embeddings", "{\"input\":[\"x\"],\"model\":\"%s\"}", t200, want200);
    POST_CHECK(&s, "/embed", "{\"inputs\":\"x\",\"model\":\"one\",\"prompt_name\":\"%s\"}", t200, want200);
    POST_CHECK(&s, "/embed", "{\"inputs\":\"x\",\"model\":\"one\",\"truncation_direction\":\"%s\"}", t64, want64);
    POST_CHECK(&s, "/v1/embeddings", "{\"input\":\"x\",\"model\":\"one\",\"encoding_format\":\"%s\"}", t64, want64);
    POST_CHECK(&s, "/embeddings", "{\"input\":[\"x\"],\"model\":\"one\",\"modality\":\"%s\"}", t64, NULL);
    POST_CHECK(&s, "/v2/embed", "{\"texts\":[\"x\"],\"model\":\"one\",\"input_type\":\"%s\"}", t64, want64);
    POST_CHECK(&s, "/v2/embed", "{\"texts\":[\"x\"],\"model\":\"one\",\"truncate\":\"%s\"}", t64, want64);
    POST_CHECK(&s, "/embed", "{\"inputs\":\"x\",\"model\":\"one\",\"normalize\":\"%s\"}", t64, NULL);

    /* Query string and path: the client's bytes, percent-encoded. */
    http_resp r;
    char *u200 = odd_url(150), *u400 = odd_url(300);
    iv_strbuf p;
    iv_sb_init(&p);
    iv_sb_printf(&p, "/info?model=%s", u200);
    REQUIRE(http_get(&s, p.data, &r) == 0);
    check_reply("/info", &r, want200, __LINE__);
    p.len = 0;
    iv_sb_printf(&p, "/v1/models/%s", u400);
    REQUIRE(http_get(&s, p.data, &r) == 0);
    check_reply("/v1/models/{id}", &r, NULL, __LINE__);
    REQUIRE(http_get(&s, "/v1/models/ab%FFcd%C3", &r) == 0);
    check_reply("/v1/models/{bad bytes}", &r, NULL, __LINE__);
    iv_sb_free(&p);
    free(u200);
    free(u400);
    free(t200);
    free(t64);
    free(t400);
    free(keep200);
    free(keep64);
    CHECK_EQ_INT(srv_stop(&s), 0);
}
