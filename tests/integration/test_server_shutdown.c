/* Stopping the server: the drain's deadline, a second signal, and stops
 * racing clients (issue 22). No test here races a sleep against the
 * server: each waits for a line in the log, a reply, or the exit. */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server_harness.h"
#include "test.h"

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* A client that sent its headers (the server said 100 Continue: the
 * request is accepted) and only part of its body, then stalls. */
static int stalled_client(const srv *s)
{
    const char *head = "POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 40\r\n"
                       "Expect: 100-continue\r\n\r\n";
    int fd = raw_connect(s);
    if (fd < 0) return -1;
    if (raw_send_str(fd, head) || !raw_read_until(fd, "100 Continue", 30000) || raw_send_str(fd, "{\"inputs\"")) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Before the deadline, one trickling client held SIGTERM for ever (until
 * MHD's 120 s connection timeout, and again for the next one). */
TEST(srv_drain_deadline_closes_stalled_clients)
{
    const char *dir = srv_fixture("bert");
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, "--drain-timeout", "1", NULL};
    REQUIRE(srv_start(&s, args) == 0);
    int slow = stalled_client(&s);
    CHECK(slow >= 0);
    kill(s.pid, SIGTERM);
    CHECK_EQ_INT(srv_wait(&s, 60), 0);
    char *log = srv_log(&s);
    CHECK_CONTAINS(log, "drain deadline (--drain-timeout 1 s) passed with 1 requests unfinished");
    free(log);
    if (slow >= 0) {
        /* Its connection was closed: the client reads the end. */
        char c;
        struct pollfd p = {.fd = slow, .events = POLLIN};
        CHECK(poll(&p, 1, 10000) == 1 && read(slow, &c, 1) <= 0);
        close(slow);
    }
    srv_stop(&s);
}

TEST(srv_second_signal_exits_at_once)
{
    const char *dir = srv_fixture("bert");
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, "--drain-timeout", "3600", NULL};
    REQUIRE(srv_start(&s, args) == 0);
    int slow = stalled_client(&s);
    CHECK(slow >= 0);
    kill(s.pid, SIGINT);
    /* The first signal was taken (the drain began) before the second is
     * sent: two pending signals would merge into one. */
    CHECK(srv_log_shows(&s, "starting graceful shutdown"));
    kill(s.pid, SIGTERM);
    CHECK_EQ_INT(srv_wait(&s, 60), 128 + SIGTERM);
    if (slow >= 0) close(slow);
    srv_stop(&s);
}

/* ---- stopping under load ---- */

typedef struct hammer {
    const srv *s;
    atomic_int *stop;
    atomic_int answered;
} hammer;

/* New connections, one request each, until told to stop: every one makes
 * the workers' listening socket readable as the stop begins. A refused or
 * reset connection is expected once the server stops accepting. */
static void *hammer_run(void *arg)
{
    hammer *h = arg;
    const char *req = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    while (!atomic_load(h->stop)) {
        char *reply = raw_exchange(h->s, req, strlen(req), 10000);
        if (reply && !strncmp(reply, "HTTP/1.1 ", 9)) h->answered++;
        free(reply);
    }
    return NULL;
}

/* libmicrohttpd's MHD_quiesce_daemon could abort the server as it stopped
 * under load ("Failed to remove listen FD from epoll set"). Starts and
 * stops a server 40 times (32 HTTP threads: more workers, more chances for
 * the race) while clients keep opening connections; every stop must be a
 * clean exit with nothing from MHD in the log. With MHD_quiesce_daemon, 2
 * runs in 8 of 20 rounds aborted (status 134) on a 2-core machine. */
TEST(srv_stop_under_load_is_clean)
{
    const char *dir = srv_fixture("bert");
    if (!dir) return;
    enum { ROUNDS = 40, CLIENTS = 8 };
    for (int round = 0; round < ROUNDS && !iv_test_failed(); round++) {
        srv s;
        const char *args[] = {"--model-id", dir, "--http-threads", "32", NULL};
        REQUIRE(srv_start(&s, args) == 0);
        atomic_int stop = 0;
        hammer hs[CLIENTS];
        pthread_t th[CLIENTS];
        for (int i = 0; i < CLIENTS; i++) {
            hs[i] = (hammer){&s, &stop, 0};
            pthread_create(&th[i], NULL, hammer_run, &hs[i]);
        }
        /* Each client has been answered once: all are connecting now. */
        for (int i = 0; i < CLIENTS; i++)
            for (int k = 0; k < 3000 && !hs[i].answered; k++) sleep_ms(1);
        kill(s.pid, SIGTERM);
        const int rc = srv_wait(&s, 60);
        char *log = srv_log(&s);
        CHECK_MSG(rc == 0, "round %d: exit status %d", round, rc);
        CHECK_MSG(!strstr(log, "http: "), "round %d: libmicrohttpd complained:\n%s", round, log);
        free(log);
        atomic_store(&stop, 1);
        for (int i = 0; i < CLIENTS; i++) pthread_join(th[i], NULL);
        srv_stop(&s);
    }
}

/* The deadline passes while a request's connection is suspended for the
 * engine: MHD_stop_daemon aborts the process on a suspended connection
 * ("called while we have suspended connections"), so the stop waits for
 * the engine to hand it back. The test hook holds the request on its way
 * to the engine until its client half-closes, which the test does only
 * once the log says the deadline passed. */
TEST(srv_drain_deadline_waits_for_the_engine)
{
    const char *dir = srv_fixture("bert");
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, "--drain-timeout", "1", NULL};
    setenv("IV_TEST_HOLD_UNTIL_HANGUP", "1", 1);
    const int started = srv_start(&s, args);
    unsetenv("IV_TEST_HOLD_UNTIL_HANGUP");
    REQUIRE(started == 0);
    const char *req = "POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Iv-Test-Hold: hangup\r\n"
                      "Content-Length: 16\r\n\r\n{\"inputs\":\"abc\"}";
    int fd = raw_connect(&s);
    REQUIRE(fd >= 0);
    CHECK(raw_send_str(fd, req) == 0);
    /* The request is held on its way to the engine, its connection
     * suspended (the hook says so in the log; asking over HTTP could land
     * on the HTTP thread the hold blocks). */
    CHECK(srv_log_shows(&s, "X-Iv-Test-Hold: POST /embed waits for its client to hang up"));
    kill(s.pid, SIGTERM);
    CHECK(srv_log_shows(&s, "drain deadline (--drain-timeout 1 s) passed"));
    shutdown(fd, SHUT_WR); /* releases the hold: the engine drops the request and hands it back */
    CHECK_EQ_INT(srv_wait(&s, 60), 0);
    close(fd);
    srv_stop(&s);
}
