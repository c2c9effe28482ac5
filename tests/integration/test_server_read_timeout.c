/* --read-timeout (src/server/read_deadline.c): a client that trickles its
 * headers or its body, each piece well inside libmicrohttpd's silence
 * timeout, is cut once the whole request has taken longer than the bound;
 * the server keeps serving others. Before, both connections stayed open as
 * long as the bytes kept coming. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server_harness.h"
#include "test.h"

static double seconds_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Sends `head`, then `piece` every 200 ms until the server closes the
 * connection (a read sees the end or a reset, or a send fails) or 60 s
 * pass. Returns the seconds it stayed open, or -1 when it never closed. */
static double trickle(const srv *s, const char *head, const char *piece)
{
    const int fd = raw_connect(s);
    if (fd < 0) return -2;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double open_for = -1;
    if (send(fd, head, strlen(head), MSG_NOSIGNAL) < 0) open_for = 0;
    while (open_for < 0 && seconds_since(&t0) < 60) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 200) > 0) {
            char buf[512];
            const ssize_t n = recv(fd, buf, sizeof buf, 0);
            if (n <= 0) open_for = seconds_since(&t0);
            continue; /* an answer would be a failure of its own: the request is never complete */
        }
        if (send(fd, piece, strlen(piece), MSG_NOSIGNAL) < 0) open_for = seconds_since(&t0);
    }
    close(fd);
    return open_for;
}

TEST(srv_read_timeout_cuts_trickling_clients)
{
    const char *model = srv_fixture("bert");
    if (!model) return;
    srv s;
    const char *args[] = {"--model-id", model, "--read-timeout", "2", NULL};
    if (srv_start(&s, args) != 0) return;
    const double headers = trickle(&s, "POST /embed HTTP/1.1\r\nHost: t\r\n", "X-Slow: y\r\n");
    CHECK_MSG(headers >= 1.9, "trickled headers: open %.2f s (cut only past the 2 s bound; -1: never)", headers);
    const double body = trickle(&s,
                                "POST /embed HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                                "Content-Length: 100000\r\n\r\n{\"inputs\":\"",
                                "aaaaaaaaaa");
    CHECK_MSG(body >= 1.9, "trickled body: open %.2f s (cut only past the 2 s bound; -1: never)", body);
    http_resp r;
    if (http_post(&s, "/embed", "{\"inputs\":\"still serving\"}", &r) == 0) {
        CHECK_EQ_INT(r.status, 200);
        http_resp_free(&r);
    }
    CHECK(srv_log_shows(&s, "(--read-timeout)"));
    CHECK_EQ_INT(srv_stop(&s), 0);
}
