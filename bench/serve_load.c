/* Closed-loop HTTP load for the serving benchmarks (bench/serve_gpu.py):
 * N client threads, each on its own keep-alive TCP connection, send the same
 * POST again and again for a fixed time and record every latency. A client
 * written in C so that the client is never what limits the request rate.
 *
 *   serve_load --port P --path /embed --body FILE --clients 64 --seconds 10 [--host 127.0.0.1]
 *
 * Prints one JSON line: requests, errors (non-200 or broken connections),
 * seconds, rps, p50_ms, p90_ms, p99_ms, max_ms. Latencies are the client's,
 * over loopback: an upper bound of the server's own. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct client {
    pthread_t thread;
    double *lat_ms;
    size_t n, cap;
    long errors;
} client;

static const char *host = "127.0.0.1";
static int port;
static char *request;
static size_t request_len;
static double stop_at;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int connect_once(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One request/response on fd. Returns the status, or -1 on a broken connection. */
static int exchange(int fd, char *buf, size_t cap)
{
    for (size_t sent = 0; sent < request_len;) {
        ssize_t k = send(fd, request + sent, request_len - sent, MSG_NOSIGNAL);
        if (k <= 0) return -1;
        sent += (size_t)k;
    }
    size_t have = 0;
    char *end = NULL;
    while (!end) {
        if (have + 1 >= cap) return -1;
        ssize_t k = recv(fd, buf + have, cap - 1 - have, 0);
        if (k <= 0) return -1;
        have += (size_t)k;
        buf[have] = 0;
        end = strstr(buf, "\r\n\r\n");
    }
    const int status = atoi(buf + 9);
    long body = 0;
    for (char *line = strstr(buf, "\r\n"); line && line < end; line = strstr(line + 2, "\r\n")) {
        if (!strncasecmp(line + 2, "content-length:", 15)) body = atol(line + 17);
    }
    size_t got = have - (size_t)(end + 4 - buf);
    while ((long)got < body) {
        ssize_t k = recv(fd, buf, cap, 0);
        if (k <= 0) return -1;
        got += (size_t)k;
    }
    return status;
}

static void *client_main(void *arg)
{
    client *c = arg;
    size_t cap = 1 << 24;
    char *buf = malloc(cap);
    int fd = connect_once();
    while (buf && now_s() < stop_at) {
        if (fd < 0) {
            c->errors++;
            fd = connect_once();
            if (fd < 0) break;
        }
        const double t0 = now_s();
        const int status = exchange(fd, buf, cap);
        const double t1 = now_s();
        if (status != 200) {
            c->errors++;
            if (status < 0) {
                close(fd);
                fd = -1;
            }
            continue;
        }
        if (c->n == c->cap) {
            c->cap = c->cap ? c->cap * 2 : 4096;
            c->lat_ms = realloc(c->lat_ms, c->cap * sizeof *c->lat_ms);
        }
        c->lat_ms[c->n++] = (t1 - t0) * 1e3;
    }
    if (fd >= 0) close(fd);
    free(buf);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    const char *path = "/embed", *body_file = NULL;
    int clients = 64;
    double seconds = 10;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--host")) host = argv[i + 1];
        else if (!strcmp(argv[i], "--path")) path = argv[i + 1];
        else if (!strcmp(argv[i], "--body")) body_file = argv[i + 1];
        else if (!strcmp(argv[i], "--clients")) clients = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        else {
            fprintf(stderr, "unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (!port || !body_file || clients < 1) {
        fprintf(stderr, "usage: serve_load --port P --body FILE [--path /embed] [--clients N] [--seconds S]\n");
        return 2;
    }
    FILE *f = fopen(body_file, "rb");
    if (!f) {
        fprintf(stderr, "%s: %s\n", body_file, strerror(errno));
        return 2;
    }
    fseek(f, 0, SEEK_END);
    const long body_len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *body = malloc((size_t)body_len + 1);
    if (!body || fread(body, 1, (size_t)body_len, f) != (size_t)body_len) return 2;
    fclose(f);
    request = malloc((size_t)body_len + 512);
    request_len = (size_t)sprintf(request,
                                  "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                                  "Content-Length: %ld\r\n\r\n",
                                  path, host, body_len);
    memcpy(request + request_len, body, (size_t)body_len);
    request_len += (size_t)body_len;
    client *cs = calloc((size_t)clients, sizeof *cs);
    const double t0 = now_s();
    stop_at = t0 + seconds;
    for (int i = 0; i < clients; i++) pthread_create(&cs[i].thread, NULL, client_main, &cs[i]);
    size_t total = 0;
    long errors = 0;
    for (int i = 0; i < clients; i++) {
        pthread_join(cs[i].thread, NULL);
        total += cs[i].n;
        errors += cs[i].errors;
    }
    const double elapsed = now_s() - t0;
    double *all = malloc((total ? total : 1) * sizeof *all);
    size_t k = 0;
    for (int i = 0; i < clients; i++) {
        memcpy(all + k, cs[i].lat_ms, cs[i].n * sizeof *all);
        k += cs[i].n;
        free(cs[i].lat_ms);
    }
    qsort(all, total, sizeof *all, cmp_double);
#define PCT(p) (total ? all[(size_t)((double)(total - 1) * (p))] : 0.0)
    printf("{\"requests\":%zu,\"errors\":%ld,\"seconds\":%.3f,\"rps\":%.1f,\"p50_ms\":%.3f,\"p90_ms\":%.3f,"
           "\"p99_ms\":%.3f,\"max_ms\":%.3f}\n",
           total, errors, elapsed, (double)total / elapsed, PCT(0.5), PCT(0.9), PCT(0.99), total ? all[total - 1] : 0.0);
    free(all);
    free(cs);
    free(request);
    free(body);
    return errors && !total;
}
