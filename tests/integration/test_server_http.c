/* HTTP/1.1 at the edges (issue 22): a body over the limit sent in full
 * still gets its 413, and message framing errors (RFC 9112 section 6)
 * answer 400 and close the connection. Raw sockets throughout: libcurl
 * would hide or refuse what is being tested. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "server_harness.h"
#include "test.h"

/* Sends everything (blocking); returns 0, or the errno that stopped it. */
static int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return errno ? errno : EIO;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads until the peer closes, `stop` appears, or timeout_ms pass (malloc'd). */
static char *read_reply(int fd, const char *stop, int timeout_ms)
{
    iv_strbuf b;
    iv_sb_init(&b);
    for (int waited = 0; waited < timeout_ms; waited += 10) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 10) <= 0) continue;
        char chunk[4096];
        ssize_t r = recv(fd, chunk, sizeof chunk, 0);
        if (r <= 0) break;
        iv_sb_append(&b, chunk, (size_t)r);
        if (stop && strstr(b.data, stop)) break;
    }
    return b.data ? b.data : strdup("");
}

/* A client that sends its whole oversized body before reading: the server
 * used to answer at once and close while the body was still arriving, so
 * the client's send failed (EPIPE, ECONNRESET) and the 413 was lost with
 * the reset. The server now reads and drops the body, then answers. */
TEST(srv_http_413_after_full_body)
{
    const char *dir = srv_fixture("bert");
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, "--payload-limit", "1000", NULL};
    REQUIRE(srv_start(&s, args) == 0);
    const size_t len = 8u << 20; /* far more than the sockets buffer */
    char *body = malloc(len);
    REQUIRE(body);
    memset(body, 'a', len);
    memcpy(body, "{\"inputs\":\"", 11);
    memcpy(body + len - 2, "\"}", 2);
    for (int round = 0; round < 2; round++) {
        int fd = raw_connect(&s);
        REQUIRE(fd >= 0);
        char head[256];
        snprintf(head, sizeof head,
                 "POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                 len);
        int err = send_all(fd, head, strlen(head));
        if (!err) err = send_all(fd, body, len);
        CHECK_MSG(err == 0, "sending the body failed: %s", strerror(err));
        char *reply = read_reply(fd, "length limit exceeded", 30000);
        CHECK_CONTAINS(reply, "HTTP/1.1 413");
        CHECK_CONTAINS(reply, "Failed to buffer the request body: length limit exceeded");
        free(reply);
        close(fd);
    }
    free(body);
    /* A client that asks first (Expect: 100-continue) is told at once and
     * sends nothing. */
    int fd = raw_connect(&s);
    REQUIRE(fd >= 0);
    const char *ask = "POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n"
                      "Expect: 100-continue\r\n\r\n";
    CHECK_EQ_INT(send_all(fd, ask, strlen(ask)), 0);
    char *reply = read_reply(fd, "length limit exceeded", 30000);
    CHECK(!strncmp(reply, "HTTP/1.1 413", 12));
    free(reply);
    close(fd);
    CHECK_EQ_INT(srv_stop(&s), 0);
}

/* Sends req on a fresh connection and reads until the server closes it
 * (10 s at most). *closed says whether it did. */
static char *exchange_until_close(const srv *s, const char *req, int *closed)
{
    *closed = 0;
    int fd = raw_connect(s);
    if (fd < 0) return strdup("");
    send_all(fd, req, strlen(req));
    iv_strbuf b;
    iv_sb_init(&b);
    for (int waited = 0; waited < 10000; waited += 10) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 10) <= 0) continue;
        char chunk[4096];
        ssize_t r = recv(fd, chunk, sizeof chunk, 0);
        if (r <= 0) {
            *closed = 1;
            break;
        }
        iv_sb_append(&b, chunk, (size_t)r);
    }
    close(fd);
    return b.data ? b.data : strdup("");
}

#define JSON_POST "POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"

TEST(srv_http_framing_errors)
{
    const char *dir = srv_fixture("bert");
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, NULL};
    REQUIRE(srv_start(&s, args) == 0);
    static const struct {
        const char *what, *req, *status;
    } cases[] = {
        {"two Content-Length values",
         JSON_POST "Content-Length: 17\r\nContent-Length: 5\r\n\r\n{\"inputs\":\"abc\"}x", "HTTP/1.1 400"},
        {"chunked and Content-Length",
         JSON_POST "Transfer-Encoding: chunked\r\nContent-Length: 16\r\n\r\n10\r\n{\"inputs\":\"abc\"}\r\n0\r\n\r\n",
         "HTTP/1.1 400"},
        {"gzip coding", JSON_POST "Transfer-Encoding: gzip\r\n\r\n{\"inputs\":\"abc\"}", "HTTP/1.1 501"},
        {"gzip then chunked",
         JSON_POST "Transfer-Encoding: gzip, chunked\r\n\r\n10\r\n{\"inputs\":\"abc\"}\r\n0\r\n\r\n", "HTTP/1.1 501"},
        {"chunked twice (two headers)",
         JSON_POST "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{\"inputs\":\"abc\"}\r\n0\r\n\r\n",
         "HTTP/1.1 400"},
        {"Transfer-Encoding in HTTP/1.0",
         "POST /embed HTTP/1.0\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
         "10\r\n{\"inputs\":\"abc\"}\r\n0\r\n\r\n",
         "HTTP/1.1 400"},
        {"no Host in HTTP/1.1",
         "POST /embed HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{\"inputs\":\"abc\"}",
         "HTTP/1.1 400"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int closed;
        char *reply = exchange_until_close(&s, cases[i].req, &closed);
        CHECK_MSG(!strncmp(reply, cases[i].status, strlen(cases[i].status)), "%s: expected %s, got \"%.80s\"",
                  cases[i].what, cases[i].status, reply);
        CHECK_MSG(closed, "%s: the connection was left open", cases[i].what);
        free(reply);
    }
    /* What stays accepted: the same Content-Length twice (RFC 9110 8.6),
     * plain chunked, and HTTP/1.0 without Host. */
    static const char *const fine[] = {
        JSON_POST "Content-Length: 16\r\nContent-Length: 16\r\nConnection: close\r\n\r\n{\"inputs\":\"abc\"}",
        JSON_POST "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n10\r\n{\"inputs\":\"abc\"}\r\n0\r\n\r\n",
        "POST /embed HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{\"inputs\":\"abc\"}",
    };
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
        int closed;
        char *reply = exchange_until_close(&s, fine[i], &closed);
        CHECK_MSG(!strncmp(reply + 5, "1.1 200", 7) || !strncmp(reply + 5, "1.0 200", 7), "case %zu: \"%.80s\"", i,
                  reply);
        free(reply);
    }
    CHECK_EQ_INT(srv_stop(&s), 0);
}

/* Errors known from the headers alone (404 unknown route, 401 without the
 * key, 415 without a JSON content type) on a request whose body is already
 * on its way: the server reads the body (dropping it) and answers after it,
 * so the client reads the error instead of a reset, and the connection
 * stays usable. Before, the answer went out at once and the connection was
 * closed under the sending client. */
TEST(srv_http_early_errors_after_full_body)
{
    const char *dir = srv_fixture("bert");
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, "--api-key", "k3y", NULL};
    REQUIRE(srv_start(&s, args) == 0);
    const size_t len = 1900000; /* under --payload-limit, far over the socket buffers */
    char *body = malloc(len);
    REQUIRE(body);
    memset(body, 'a', len);
    memcpy(body, "{\"inputs\":\"", 11);
    memcpy(body + len - 2, "\"}", 2);
    static const struct {
        const char *path, *headers, *status;
    } cases[] = {
        {"/nowhere", "Authorization: Bearer k3y\r\nContent-Type: application/json\r\n", "HTTP/1.1 404"},
        {"/embed", "Content-Type: application/json\r\n", "HTTP/1.1 401"},
        {"/embed", "Authorization: Bearer k3y\r\nContent-Type: text/plain\r\n", "HTTP/1.1 415"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int fd = raw_connect(&s);
        REQUIRE(fd >= 0);
        char head[512];
        snprintf(head, sizeof head, "POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: %zu\r\n\r\n", cases[c].path,
                 cases[c].headers, len);
        int err = send_all(fd, head, strlen(head));
        if (!err) err = send_all(fd, body, len);
        CHECK_MSG(err == 0, "%s %s: sending the body failed: %s", cases[c].path, cases[c].status, strerror(err));
        char *reply = read_reply(fd, "\r\n\r\n", 30000);
        CHECK_MSG(!strncmp(reply, cases[c].status, 12), "expected %s, got %.60s", cases[c].status, reply);
        free(reply);
        /* The same connection serves the next request. */
        const char *next = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
        CHECK_EQ_INT(send_all(fd, next, strlen(next)), 0);
        reply = read_reply(fd, "\"unix\"", 30000);
        CHECK_MSG(strstr(reply, "HTTP/1.1 200") != NULL, "after %s: %.80s", cases[c].status, reply);
        free(reply);
        close(fd);
    }
    free(body);
    CHECK_EQ_INT(srv_stop(&s), 0);
}
