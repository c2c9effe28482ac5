/* Concurrency: 64 client threads send a mix of requests (embeddings in
 * every flavour, per-token states, classification, pairs, reranking) to
 * three models in one server with a small token budget, so sequences from
 * different requests and clients share batches. Every response must equal
 * the response the same request got when it ran alone (floats within
 * 2e-5), none may be lost, and the server must be idle and healthy after.
 *
 * 2,000 requests (about 1.5 s in the release build and 4 s under
 * AddressSanitizer on 2 cores); IV_SRV_LOAD_REQUESTS overrides the count. */
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "server_harness.h"
#include "test.h"

#define DEFAULT_REQUESTS 2000
#define THREADS 64
#define TEMPLATES 64
#define TOL 2e-5

typedef struct tmpl {
    const char *path;
    char *body;
    cJSON *expected;
} tmpl;

static const char *words[] = {"alpha", "beta", "gamma", "delta", "echo", "fox", "golf", "hotel", "india", "juliet",
                              "kilo", "lima", "mike", "nov", "oscar", "papa", "quebec", "romeo", "sierra", "tango"};

/* Deterministic text of a given number of words. */
static void text(iv_strbuf *b, unsigned seed, int n_words)
{
    iv_sb_putc(b, '"');
    for (int w = 0; w < n_words; w++) {
        seed = seed * 1103515245u + 12345u;
        iv_sb_printf(b, "%s%s", w ? " " : "", words[(seed >> 16) % 20]);
    }
    iv_sb_putc(b, '"');
}

static void ids(iv_strbuf *b, unsigned seed, int n)
{
    iv_sb_puts(b, "[101");
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        iv_sb_printf(b, ",%u", 104 + (seed >> 16) % 56);
    }
    iv_sb_puts(b, ",102]");
}

static void make_template(tmpl *t, int k)
{
    iv_strbuf b;
    iv_sb_init(&b);
    const unsigned seed = 7919u * (unsigned)k + 1u;
    const int len = 1 + (k * 13) % 40; /* words; the longest are truncated to 128 tokens */
    switch (k % 8) {
    case 0:
        t->path = "/embed";
        iv_sb_puts(&b, "{\"model\":\"emb\",\"inputs\":");
        text(&b, seed, len);
        break;
    case 1:
        t->path = "/embed";
        iv_sb_puts(&b, "{\"model\":\"emb\",\"normalize\":false,\"inputs\":[");
        text(&b, seed, len);
        iv_sb_putc(&b, ',');
        ids(&b, seed + 1, 3 + k % 30);
        iv_sb_putc(&b, ',');
        text(&b, seed + 2, 2 + k % 5);
        iv_sb_putc(&b, ']');
        break;
    case 2:
        t->path = "/v1/embeddings";
        iv_sb_puts(&b, "{\"model\":\"emb\",\"encoding_format\":\"base64\",\"input\":[");
        text(&b, seed, len);
        iv_sb_putc(&b, ',');
        text(&b, seed + 3, 1 + k % 7);
        iv_sb_putc(&b, ']');
        break;
    case 3:
        t->path = "/predict";
        iv_sb_puts(&b, "{\"model\":\"cls\",\"inputs\":[");
        text(&b, seed, len);
        iv_sb_putc(&b, ',');
        text(&b, seed + 4, 3);
        iv_sb_putc(&b, ']');
        break;
    case 4:
        t->path = "/rerank";
        iv_sb_puts(&b, "{\"model\":\"rr\",\"return_text\":true,\"query\":");
        text(&b, seed, 4);
        iv_sb_puts(&b, ",\"texts\":[");
        for (int i = 0; i < 3; i++) {
            if (i) iv_sb_putc(&b, ',');
            text(&b, seed + 10 + (unsigned)i, 2 + (k + i * 5) % 20);
        }
        iv_sb_putc(&b, ']');
        break;
    case 5:
        t->path = "/embed_all";
        iv_sb_puts(&b, "{\"model\":\"emb\",\"inputs\":");
        text(&b, seed, 1 + k % 6);
        break;
    case 6:
        t->path = "/classify";
        iv_sb_puts(&b, "{\"model\":\"cls\",\"input\":[");
        text(&b, seed, len);
        iv_sb_putc(&b, ',');
        text(&b, seed + 5, 2);
        iv_sb_putc(&b, ']');
        break;
    default:
        t->path = "/embeddings";
        iv_sb_puts(&b, "{\"model\":\"emb\",\"dimensions\":16,\"input\":[");
        ids(&b, seed, 5 + k % 40);
        iv_sb_putc(&b, ']');
        break;
    }
    iv_sb_putc(&b, '}');
    t->body = b.data;
}

static int floats_close(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)a[i] - b[i]) <= TOL)) return 0;
    return 1;
}

/* JSON equality with float tolerance; base64 embeddings are decoded and
 * compared as floats; Infinity's per-response "id" and "created" skipped. */
static int json_close(const cJSON *a, const cJSON *b, const char *key)
{
    if (!a || !b) return a == b;
    if (cJSON_IsNumber(a) && cJSON_IsNumber(b)) return fabs(a->valuedouble - b->valuedouble) <= TOL;
    if (cJSON_IsString(a) && cJSON_IsString(b)) {
        if (key && !strcmp(key, "embedding")) {
            size_t na, nb;
            unsigned char *x = b64_decode(a->valuestring, &na), *y = b64_decode(b->valuestring, &nb);
            int ok = na == nb && floats_close((const float *)x, (const float *)y, na / 4);
            free(x);
            free(y);
            return ok;
        }
        return !strcmp(a->valuestring, b->valuestring);
    }
    if ((a->type & 0xFF) != (b->type & 0xFF)) return 0;
    if (cJSON_IsArray(a)) {
        if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b)) return 0;
        for (const cJSON *x = a->child, *y = b->child; x && y; x = x->next, y = y->next)
            if (!json_close(x, y, key)) return 0;
        return 1;
    }
    if (cJSON_IsObject(a)) {
        if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b)) return 0;
        for (const cJSON *x = a->child; x; x = x->next) {
            if (!strcmp(x->string, "id") || !strcmp(x->string, "created")) continue;
            if (!json_close(x, cJSON_GetObjectItemCaseSensitive(b, x->string), x->string)) return 0;
        }
        return 1;
    }
    return cJSON_Compare(a, b, 1);
}

typedef struct load {
    const srv *s;
    tmpl *t;
    int total;
    atomic_int next;
    atomic_int ok, failed, mismatched;
} load;

static void *client(void *arg)
{
    load *l = arg;
    http_client *c = http_client_new(l->s);
    for (;;) {
        int i = atomic_fetch_add(&l->next, 1);
        if (i >= l->total) break;
        const tmpl *t = &l->t[(unsigned)(i * 2654435761u) % TEMPLATES];
        http_resp r;
        if (http_client_post(c, t->path, t->body, &r) || r.status != 200) {
            if (atomic_fetch_add(&l->failed, 1) < 5)
                fprintf(stdout, "    %s -> %ld %.200s\n", t->path, r.status, r.body ? r.body : "");
        } else if (!json_close(r.json, t->expected, NULL)) {
            if (atomic_fetch_add(&l->mismatched, 1) < 5)
                fprintf(stdout, "    %s %.120s: response differs from the single-request one\n", t->path, t->body);
        } else {
            atomic_fetch_add(&l->ok, 1);
        }
        http_resp_free(&r);
    }
    http_client_free(c);
    return NULL;
}

TEST(srv_concurrent_mixed_load)
{
    const char *emb = srv_fixture("bert"), *cls = srv_fixture("bert_seqcls3"), *rr = srv_fixture("bert_seqcls1");
    if (!emb || !cls || !rr) return;
    const char *env = getenv("IV_SRV_LOAD_REQUESTS");
    const int total = env && atoi(env) > 0 ? atoi(env) : DEFAULT_REQUESTS;
    srv s;
    const char *args[] = {"--model-id", emb, "--served-model-name", "emb", "--model-id", cls, "--served-model-name",
                          "cls", "--model-id", rr, "--served-model-name", "rr", "--max-batch-tokens", "256",
                          "--max-concurrent-requests", "4096", "--max-client-batch-size", "8", NULL};
    REQUIRE(srv_start(&s, args) == 0);
    tmpl t[TEMPLATES];
    for (int k = 0; k < TEMPLATES; k++) {
        make_template(&t[k], k);
        http_resp r;
        REQUIRE(http_post(&s, t[k].path, t[k].body, &r) == 0);
        CHECK_MSG(r.status == 200, "%s %s -> %ld %s", t[k].path, t[k].body, r.status, r.body);
        t[k].expected = r.json;
        r.json = NULL;
        http_resp_free(&r);
    }
    load l = {.s = &s, .t = t, .total = total};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, client, &l);
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    fprintf(stdout, "    %d requests from %d clients in %.1f s (%.0f req/s)\n", total, THREADS, secs, total / secs);
    CHECK_EQ_INT(atomic_load(&l.ok), total);
    CHECK_EQ_INT(atomic_load(&l.failed), 0);
    CHECK_EQ_INT(atomic_load(&l.mismatched), 0);

    /* Healthy and idle afterwards; sequences of different requests shared batches. */
    http_resp r;
    REQUIRE(http_get(&s, "/health", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    http_resp_free(&r);
    REQUIRE(http_get(&s, "/metrics", &r) == 0);
    CHECK_EQ_INT(metric_value(r.body, "te_queue_size"), 0);
    double batches = metric_value(r.body, "te_batch_next_size_count"), seqs = metric_value(r.body, "te_batch_next_size_sum");
    CHECK(batches > 0 && seqs / batches > 1.5);
    fprintf(stdout, "    %.0f batches, %.1f sequences per batch on average\n", batches, seqs / batches);
    CHECK(metric_value(r.body, "te_batch_next_tokens_bucket{le=\"256\"}") == batches);
    http_resp_free(&r);
    REQUIRE(http_get(&s, "/models", &r) == 0);
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(r.json, "data"))
    {
        const cJSON *st = cJSON_GetObjectItem(m, "stats");
        CHECK_EQ_INT(jint(st, "queue_absolute"), 0);
        CHECK(jnum(st, "queue_fraction") == 0.0);
    }
    http_resp_free(&r);
    for (int k = 0; k < TEMPLATES; k++) {
        free(t[k].body);
        cJSON_Delete(t[k].expected);
    }
    CHECK_EQ_INT(srv_stop(&s), 0);
}

/* Thousands of clients waiting at once: every connection is suspended
 * while its batch runs, so a few HTTP threads hold them all. */
TEST(srv_thousand_waiting_clients)
{
    const char *dir = srv_fixture("bert");
    if (!dir) return;
    enum { CLIENTS = 1500 };
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < CLIENTS + 100) {
        rl.rlim_cur = rl.rlim_max < CLIENTS + 100 ? rl.rlim_max : CLIENTS + 100;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur < CLIENTS + 100) {
        iv_test_skip("not enough file descriptors for 1500 clients");
        return;
    }
    srv s;
    const char *args[] = {"--model-id", dir, "--max-concurrent-requests", "20000", "--max-batch-tokens", "512", NULL};
    REQUIRE(srv_start(&s, args) == 0);
    const char *body = "{\"inputs\":[\"hello there world\",[101,140,141,102]]}";
    char req[512];
    int len = snprintf(req, sizeof req,
                       "POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                       "Connection: close\r\n\r\n%s",
                       strlen(body), body);
    int *fds = malloc(CLIENTS * sizeof *fds);
    iv_strbuf *replies = calloc(CLIENTS, sizeof *replies);
    int open_fds = 0;
    for (int i = 0; i < CLIENTS; i++) {
        fds[i] = raw_connect(&s);
        if (fds[i] < 0) break;
        open_fds++;
        if (send(fds[i], req, (size_t)len, MSG_NOSIGNAL) != len) CHECK_MSG(0, "send to client %d failed", i);
    }
    CHECK_EQ_INT(open_fds, CLIENTS);
    /* Read every reply until each server closes its side. */
    struct pollfd *p = calloc((size_t)open_fds, sizeof *p);
    int pending = open_fds;
    for (int i = 0; i < open_fds; i++) p[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (pending > 0) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec > 120) break;
        if (poll(p, (nfds_t)open_fds, 1000) <= 0) continue;
        for (int i = 0; i < open_fds; i++) {
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char chunk[4096];
            ssize_t n = recv(p[i].fd, chunk, sizeof chunk, 0);
            if (n > 0) {
                iv_sb_append(&replies[i], chunk, (size_t)n);
                continue;
            }
            close(p[i].fd);
            p[i].fd = -1;
            pending--;
        }
    }
    CHECK_EQ_INT(pending, 0);
    int ok = 0;
    for (int i = 0; i < open_fds; i++) {
        ok += replies[i].data && !strncmp(replies[i].data, "HTTP/1.1 200", 12);
        iv_sb_free(&replies[i]);
        if (p[i].fd >= 0) close(p[i].fd);
    }
    CHECK_EQ_INT(ok, CLIENTS);
    http_resp r;
    REQUIRE(http_get(&s, "/metrics", &r) == 0);
    CHECK_EQ_INT(metric_value(r.body, "te_request_success{method=\"batch\"}"), CLIENTS);
    http_resp_free(&r);
    free(p);
    free(fds);
    free(replies);
    CHECK_EQ_INT(srv_stop(&s), 0);
}
