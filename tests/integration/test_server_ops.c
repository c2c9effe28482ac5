/* Operating the server: API keys, Unix sockets, prompts, overload (429),
 * clients that hang up, graceful SIGTERM, and equality with the offline CLI. */
#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "server_harness.h"
#include "test.h"

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static double metric(const srv *s, const char *series)
{
    http_resp r;
    double v = -1;
    if (http_get(s, "/metrics", &r) == 0 && r.status == 200) v = metric_value(r.body, series);
    http_resp_free(&r);
    return v;
}

TEST(srv_api_key)
{
    const char *dir = srv_fixture("bert");
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, "--api-key", "s3cret", NULL};
    REQUIRE(srv_start(&s, args) == 0);
    http_resp r;
    /* Public: health and metrics. */
    REQUIRE(http_get(&s, "/health", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    http_resp_free(&r);
    REQUIRE(http_get(&s, "/metrics", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    http_resp_free(&r);
    /* TEI: bare 401. */
    REQUIRE(http_post(&s, "/embed", "{\"inputs\":\"a\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 401);
    CHECK_EQ_INT(r.len, 0);
    http_resp_free(&r);
    REQUIRE(http_get(&s, "/info", &r) == 0);
    CHECK_EQ_INT(r.status, 401);
    http_resp_free(&r);
    const char *wrong[] = {"Content-Type: application/json", "Authorization: Bearer s3cretX", NULL};
    REQUIRE(http_do(&s, "POST", "/embed", "{\"inputs\":\"a\"}", 14, wrong, &r) == 0);
    CHECK_EQ_INT(r.status, 401);
    http_resp_free(&r);
    const char *prefix[] = {"Content-Type: application/json", "Authorization: Bearer s3cre", NULL};
    REQUIRE(http_do(&s, "POST", "/embed", "{\"inputs\":\"a\"}", 14, prefix, &r) == 0);
    CHECK_EQ_INT(r.status, 401);
    http_resp_free(&r);
    const char *basic[] = {"Content-Type: application/json", "Authorization: s3cret", NULL};
    REQUIRE(http_do(&s, "POST", "/embed", "{\"inputs\":\"a\"}", 14, basic, &r) == 0);
    CHECK_EQ_INT(r.status, 401);
    http_resp_free(&r);
    /* Infinity: FastAPI's body and challenge. */
    REQUIRE(http_post(&s, "/embeddings", "{\"input\":\"a\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 401);
    CHECK_STR(r.body, "{\"detail\":\"Unauthorized\"}");
    char v[64];
    CHECK_STR(http_header(&r, "WWW-Authenticate", v, sizeof v), "Bearer");
    http_resp_free(&r);
    /* The right key. */
    const char *good[] = {"Content-Type: application/json", "Authorization: Bearer s3cret", NULL};
    REQUIRE(http_do(&s, "POST", "/embed", "{\"inputs\":\"a\"}", 14, good, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    http_resp_free(&r);
    REQUIRE(http_do(&s, "GET", "/models", NULL, 0, good, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);
}

/* Issue 22: a key past 1 KB was copied into a 1 KB buffer but compared
 * over its full length (the right key refused, longer ones read out of
 * bounds). Long keys work up to IV_API_KEY_MAX bytes; longer ones refuse to start. */
TEST(srv_api_key_long)
{
    const char *dir = srv_fixture("bert");
    if (!dir) return;
    enum { KEY = 3000 };
    char *key = malloc(KEY + 1), *good = malloc(KEY + 64), *bad = malloc(KEY + 64), *huge = malloc(8000);
    for (int i = 0; i < KEY; i++) key[i] = (char)('a' + i % 26);
    key[KEY] = 0;
    snprintf(good, KEY + 64, "Authorization: Bearer %s", key);
    snprintf(bad, KEY + 64, "Authorization: Bearer %s", key);
    bad[strlen(bad) - 1] ^= 1;
    memset(huge, 'k', 7999);
    huge[7999] = 0;
    memcpy(huge, "Authorization: Bearer ", 22);
    srv s;
    const char *args[] = {"--model-id", dir, "--api-key", key, NULL};
    REQUIRE(srv_start(&s, args) == 0);
    http_resp r;
    const char *h_good[] = {"Content-Type: application/json", good, NULL};
    REQUIRE(http_do(&s, "POST", "/embed", "{\"inputs\":\"a\"}", 14, h_good, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    http_resp_free(&r);
    const char *h_bad[] = {"Content-Type: application/json", bad, NULL};
    REQUIRE(http_do(&s, "POST", "/embed", "{\"inputs\":\"a\"}", 14, h_bad, &r) == 0);
    CHECK_EQ_INT(r.status, 401);
    http_resp_free(&r);
    const char *h_huge[] = {"Content-Type: application/json", huge, NULL};
    REQUIRE(http_do(&s, "POST", "/embed", "{\"inputs\":\"a\"}", 14, h_huge, &r) == 0);
    CHECK_EQ_INT(r.status, 401);
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);

    /* An absurd key is refused at start, naming the limit. */
    const char *absurd[] = {"--model-id", dir, "--api-key", huge, NULL};
    CHECK(srv_start_quiet(&s, absurd) != 0);
    char *log = srv_log(&s);
    CHECK(log && strstr(log, "--api-key is 7999 bytes, longer than the 4096 bytes accepted"));
    free(log);
    srv_stop(&s);
    free(key);
    free(good);
    free(bad);
    free(huge);
}

TEST(srv_unix_socket)
{
    const char *dir = srv_fixture("bert");
    if (!dir) return;
    char path[128];
    snprintf(path, sizeof path, "/tmp/iv_srv_test_%d.sock", (int)getpid());
    srv s;
    const char *args[] = {"--model-id", dir, "--uds-path", path, "--json-output", "--log-level", "debug", NULL};
    REQUIRE(srv_start(&s, args) == 0);
    struct stat st;
    CHECK(stat(path, &st) == 0 && S_ISSOCK(st.st_mode));
    http_resp r;
    REQUIRE(http_post(&s, "/embed", "{\"inputs\":[[101,154,102]]}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetArrayItem(r.json, 0)), 32);
    http_resp_free(&r);
    /* --json-output: every log line is one JSON object; requests are logged at debug. */
    char *log = srv_log(&s);
    int lines = 0, request_logged = 0;
    for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        CHECK_MSG(j && cJSON_IsString(cJSON_GetObjectItem(j, "level")) &&
                      cJSON_IsString(cJSON_GetObjectItem(j, "message")) &&
                      cJSON_IsString(cJSON_GetObjectItem(j, "timestamp")),
                  "log line is not a JSON record: %s", line);
        if (j && strstr(jstr(j, "message"), "POST /embed 200")) request_logged = 1;
        cJSON_Delete(j);
        lines++;
    }
    CHECK(lines >= 3);
    CHECK(request_logged);
    free(log);
    CHECK_EQ_INT(srv_stop(&s), 0);
    CHECK(stat(path, &st) != 0); /* removed on shutdown */
}

/* A copy of a fixture (symlinks) whose sentence-transformers config has real prompts. */
static int prompt_model(const char *src, char *dir, size_t cap)
{
    char abs[PATH_MAX];
    if (!realpath(src, abs)) return -1;
    snprintf(dir, cap, "/tmp/iv_srv_prompts_XXXXXX");
    if (!mkdtemp(dir)) return -1;
    const char *files[] = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                           "modules.json", "sentence_bert_config.json", "1_Pooling", "2_Normalize"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char from[PATH_MAX + 64], to[PATH_MAX + 64];
        snprintf(from, sizeof from, "%s/%s", abs, files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        if (symlink(from, to)) return -1;
    }
    char cfg[PATH_MAX + 64];
    snprintf(cfg, sizeof cfg, "%s/config_sentence_transformers.json", dir);
    FILE *f = fopen(cfg, "w");
    if (!f) return -1;
    fputs("{\"prompts\":{\"query\":\"query: \",\"passage\":\"passage: \"},\"default_prompt_name\":null,"
          "\"similarity_fn_name\":\"cosine\"}",
          f);
    fclose(f);
    return 0;
}

static void remove_prompt_model(const char *dir)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stdout, "    could not remove %s\n", dir);
}

static float *embed_one(const srv *s, const char *path, const char *body, int *n)
{
    http_resp r;
    *n = 0;
    if (http_post(s, path, body, &r) || r.status != 200) {
        fprintf(stdout, "    %s %s -> %ld %s\n", path, body, r.status, r.body);
        http_resp_free(&r);
        return NULL;
    }
    const cJSON *v = cJSON_GetArrayItem(r.json, 0);
    if (cJSON_IsObject(cJSON_GetArrayItem(cJSON_GetObjectItem(r.json, "data"), 0)))
        v = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(r.json, "data"), 0), "embedding");
    float *out = json_floats(v, n);
    http_resp_free(&r);
    return out;
}

TEST(srv_prompts)
{
    const char *src = srv_fixture("bert");
    if (!src) return;
    char dir[128];
    REQUIRE(prompt_model(src, dir, sizeof dir) == 0);
    srv s;
    int n, m;
    const char *args[] = {"--model-id", dir, NULL};
    REQUIRE(srv_start(&s, args) == 0);
    float *plain = embed_one(&s, "/embed", "{\"inputs\":\"what is up\"}", &n);
    float *named = embed_one(&s, "/embed", "{\"inputs\":\"what is up\",\"prompt_name\":\"query\"}", &n);
    float *spelled = embed_one(&s, "/embed", "{\"inputs\":\"query: what is up\"}", &m);
    REQUIRE(plain && named && spelled && n == m);
    CHECK(iv_test_max_abs_diff(named, spelled, n) <= 1e-6);
    CHECK(iv_test_max_abs_diff(named, plain, n) > 1e-3);
    free(plain);
    free(named);
    /* /tokenize applies the prompt too; offsets refer to the prompted text. */
    http_resp r;
    REQUIRE(http_post(&s, "/tokenize", "{\"inputs\":\"hi\",\"prompt_name\":\"passage\",\"add_special_tokens\":false}",
                      &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    const cJSON *toks = cJSON_GetArrayItem(r.json, 0);
    const cJSON *last = cJSON_GetArrayItem(toks, cJSON_GetArraySize(toks) - 1);
    CHECK_EQ_INT(jint(last, "stop"), (int)strlen("passage: hi"));
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);

    /* --default-prompt-name applies to requests naming no prompt, on every embedding route. */
    const char *def[] = {"--model-id", dir, "--default-prompt-name", "query", NULL};
    REQUIRE(srv_start(&s, def) == 0);
    float *d1 = embed_one(&s, "/embed", "{\"inputs\":\"what is up\"}", &n);
    float *d2 = embed_one(&s, "/v1/embeddings", "{\"input\":\"what is up\"}", &m);
    REQUIRE(d1 && d2 && n == m);
    CHECK(iv_test_max_abs_diff(d1, spelled, n) <= 1e-6);
    CHECK(iv_test_max_abs_diff(d2, spelled, n) <= 1e-6);
    free(d1);
    free(d2);
    CHECK_EQ_INT(srv_stop(&s), 0);
    /* --default-prompt gives the text itself. */
    const char *text[] = {"--model-id", dir, "--default-prompt", "query: ", NULL};
    REQUIRE(srv_start(&s, text) == 0);
    d1 = embed_one(&s, "/embeddings", "{\"input\":\"what is up\"}", &n);
    REQUIRE(d1);
    CHECK(iv_test_max_abs_diff(d1, spelled, n) <= 1e-6);
    free(d1);
    CHECK_EQ_INT(srv_stop(&s), 0);
    /* An unknown default prompt name stops the start with TEI's message. */
    const char *bad[] = {"--model-id", dir, "--default-prompt-name", "nope", NULL};
    CHECK(srv_start_quiet(&s, bad) != 0);
    char *log = srv_log(&s);
    CHECK_CONTAINS(log, "`default-prompt-name` is set to `nope` but it was not found in the Sentence Transformers "
                        "prompts. Available prompts: [");
    free(log);
    srv_stop(&s);
    free(spelled);
    remove_prompt_model(dir);
}

/* n texts of `words` words: a request that keeps the model busy for a while. */
static char *heavy_request(const char *key, int n, int words)
{
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_printf(&b, "{\"%s\":[", key);
    for (int i = 0; i < n; i++) {
        iv_sb_puts(&b, i ? ",\"" : "\"");
        for (int w = 0; w < words; w++) iv_sb_printf(&b, "%sword%d", w ? " " : "", (i * 7 + w) % 50);
        iv_sb_putc(&b, '"');
    }
    iv_sb_puts(&b, "]}");
    return b.data;
}

typedef struct call {
    const srv *s;
    const char *path;
    char *body;
    long status;
} call;

static void *do_call(void *arg)
{
    call *c = arg;
    http_resp r;
    c->status = http_post(c->s, c->path, c->body, &r) == 0 ? r.status : -1;
    http_resp_free(&r);
    return NULL;
}

/* Issue 22: a request with more inputs than --max-concurrent-requests can
 * never run, so it answers 422 naming the limit even on an idle server;
 * 429 is for a server whose permits are genuinely taken. */
TEST(srv_overloaded_429)
{
    const char *dir = srv_fixture("bert");
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, "--max-concurrent-requests", "30", "--max-client-batch-size", "40", NULL};
    setenv("IV_TEST_HOLD_UNTIL_HANGUP", "1", 1);
    const int started = srv_start(&s, args);
    unsetenv("IV_TEST_HOLD_UNTIL_HANGUP");
    REQUIRE(started == 0);
    http_resp r;
    char *over = heavy_request("inputs", 31, 1), *over_openai = heavy_request("input", 31, 1);
    REQUIRE(http_post(&s, "/embed", over, &r) == 0);
    CHECK_EQ_INT(r.status, 422);
    CHECK_STR(r.body, "{\"error\":\"batch size 31 > maximum concurrent inputs 30 (--max-concurrent-requests)\","
                      "\"error_type\":\"Validation\"}");
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/v1/embeddings", over_openai, &r) == 0);
    CHECK_EQ_INT(r.status, 422);
    CHECK_CONTAINS(r.body, "maximum concurrent inputs 30 (--max-concurrent-requests)");
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/embeddings", over_openai, &r) == 0);
    CHECK_EQ_INT(r.status, 422);
    CHECK_CONTAINS(r.body, "maximum concurrent inputs 30 (--max-concurrent-requests)");
    http_resp_free(&r);
    CHECK(metric(&s, "te_request_failure{err=\"overloaded\"}") <= 0);
    /* Busy, deterministically: a 30-input request holds every permit while
     * the test hook keeps it from the engine until its client hangs up. */
    char *held_body = heavy_request("inputs", 30, 2);
    char head[256];
    snprintf(head, sizeof head,
             "POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Iv-Test-Hold: hangup\r\n"
             "Content-Length: %zu\r\n\r\n",
             strlen(held_body));
    int held = raw_connect(&s);
    REQUIRE(held >= 0);
    REQUIRE(write(held, head, strlen(head)) == (ssize_t)strlen(head));
    REQUIRE(write(held, held_body, strlen(held_body)) == (ssize_t)strlen(held_body));
    REQUIRE(srv_log_shows(&s, "X-Iv-Test-Hold: POST /embed waits"));
    REQUIRE(http_post(&s, "/embed", "{\"inputs\":[\"a\"]}", &r) == 0);
    CHECK_EQ_INT(r.status, 429);
    CHECK_STR(r.body, "{\"error\":\"Model is overloaded\",\"error_type\":\"Overloaded\"}");
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/v1/embeddings", "{\"input\":[\"a\"]}", &r) == 0);
    CHECK_EQ_INT(r.status, 429);
    CHECK_STR(r.body, "{\"message\":\"Model is overloaded\",\"code\":429,\"type\":\"Overloaded\"}");
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/embeddings", "{\"input\":[\"a\"]}", &r) == 0);
    CHECK_EQ_INT(r.status, 429);
    CHECK_CONTAINS(r.body, "is currently overloaded\",\"type\":null,\"param\":null,\"code\":429}}");
    http_resp_free(&r);
    CHECK_EQ_INT(metric(&s, "te_request_failure{err=\"overloaded\"}"), 3);
    /* The hang-up releases it; its permits come back once the engine dropped it. */
    close(held);
    int status = 429;
    for (int i = 0; i < 6000 && status == 429; i++) {
        REQUIRE(http_post(&s, "/embed", "{\"inputs\":[\"a\",\"b\"]}", &r) == 0);
        status = (int)r.status;
        http_resp_free(&r);
        if (status == 429) sleep_ms(10);
    }
    CHECK_EQ_INT(status, 200);
    free(held_body);
    free(over);
    free(over_openai);
    CHECK_EQ_INT(srv_stop(&s), 0);
}

/* A client that hangs up before its inputs run has them skipped and its
 * permits returned. The server's test hook (IV_TEST_HOLD_UNTIL_HANGUP, see
 * iv_http_suspend) hands B's request to the engine only after B's client
 * closed the connection: the engine's drop is then certain, where it used
 * to depend on a long request A keeping the engine busy until the hang-up
 * was seen (a race on a loaded machine). */
TEST(srv_client_disconnect_frees_permits)
{
    const char *dir = srv_minilm();
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, "--max-concurrent-requests", "40", "--max-client-batch-size", "40", NULL};
    setenv("IV_TEST_HOLD_UNTIL_HANGUP", "1", 1);
    const int started = srv_start(&s, args);
    unsetenv("IV_TEST_HOLD_UNTIL_HANGUP");
    REQUIRE(started == 0);
    /* B: 8 inputs, whose client hangs up as soon as it has sent them. */
    char *b = heavy_request("inputs", 8, 20);
    iv_strbuf req;
    iv_sb_init(&req);
    iv_sb_printf(&req,
                 "POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Iv-Test-Hold: hangup\r\n"
                 "Content-Length: %zu\r\n\r\n%s",
                 strlen(b), b);
    char *reply = raw_exchange(&s, req.data, req.len, 0);
    free(reply);
    iv_sb_free(&req);
    free(b);
    /* B's inputs were skipped, not run, and its 8 permits came back: a
     * request needing all 40 permits succeeds. */
    double dropped = -1;
    for (int i = 0; i < 3000 && dropped < 1; i++) {
        dropped = metric(&s, "te_request_failure{err=\"dropped\"}");
        if (dropped < 1) sleep_ms(10);
    }
    CHECK_EQ_INT(dropped, 1);
    CHECK(metric(&s, "te_embed_success") <= 0); /* nothing ran */
    char *full = heavy_request("inputs", 40, 3);
    http_resp r;
    REQUIRE(http_post(&s, "/embed", full, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    http_resp_free(&r);
    free(full);
    CHECK_EQ_INT(srv_stop(&s), 0);
}

TEST(srv_sigterm_finishes_accepted_requests)
{
    const char *dir = srv_minilm();
    if (!dir) return;
    srv s;
    /* No drain deadline in the way: the model's work on these requests can
     * take longer than the default 30 s in a sanitizer build. */
    const char *args[] = {"--model-id", dir, "--max-client-batch-size", "64", "--drain-timeout", "3600", NULL};
    REQUIRE(srv_start(&s, args) == 0);
    http_client *keep = http_client_new(&s);
    http_resp r;
    REQUIRE(http_client_get(keep, "/health", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    http_resp_free(&r);
    enum { N = 4 };
    call calls[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        calls[i] = (call){&s, i % 2 ? "/v1/embeddings" : "/embed", heavy_request(i % 2 ? "input" : "inputs", 8, 60), 0};
        pthread_create(&th[i], NULL, do_call, &calls[i]);
    }
    /* Every request is accepted (its inputs counted) before the signal. */
    while (metric(&s, "te_embed_count") < N * 8) sleep_ms(5);
    kill(s.pid, SIGTERM);
    /* While draining, /health says so on an open connection (once the signal
     * landed). On a loaded machine the drain can end, and the server close
     * the connection as it exits, between two polls: then there is no
     * draining server left to ask, and the checks below (every accepted
     * request answered, a clean exit) are what remains to verify. */
    int answered = 0;
    for (int i = 0; i < 100; i++) {
        if (http_client_get(keep, "/health", &r) != 0) {
            http_resp_free(&r);
            break;
        }
        answered = 1;
        if (r.status != 200) break;
        http_resp_free(&r);
        answered = 0;
        sleep_ms(5);
    }
    if (answered) {
        CHECK_EQ_INT(r.status, 503);
        CHECK_STR(r.body, "{\"error\":\"unhealthy\",\"error_type\":\"Unhealthy\"}");
        http_resp_free(&r);
    }
    http_client_free(keep);
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ_INT(calls[i].status, 200);
        free(calls[i].body);
    }
    /* Signalled once already: a second SIGTERM would end the drain. */
    CHECK_EQ_INT(srv_wait(&s, 60), 0);
    srv_stop(&s);
}

/* Once draining, the server refuses new connections at once: they used to
 * wait in the listening socket's backlog, unanswered, until the drain ended,
 * which a slow client's accepted request can hold up to the 120 s
 * connection timeout. A request whose body is still arriving keeps the
 * drain going here, deterministically: "100 Continue" says it was accepted
 * before the signal, and its 200 at the end says the server was still
 * draining when the new connection was refused. */
TEST(srv_drain_refuses_new_connections)
{
    const char *dir = srv_fixture("bert");
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, NULL};
    REQUIRE(srv_start(&s, args) == 0);
    const char *body = "{\"inputs\": \"a slow client\"}";
    char head[256];
    snprintf(head, sizeof head,
             "POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
             "Expect: 100-continue\r\n\r\n",
             strlen(body));
    int slow = raw_connect(&s);
    REQUIRE(slow >= 0);
    REQUIRE(raw_send_str(slow, head) == 0);
    REQUIRE(raw_read_until(slow, "100 Continue", 10000));
    REQUIRE(raw_send_str(slow, "{\"inputs\"") == 0);
    http_client *keep = http_client_new(&s);
    http_resp r;
    REQUIRE(http_client_get(keep, "/health", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    http_resp_free(&r);
    kill(s.pid, SIGTERM);
    /* Polls /health until it says 503. A 200 answered as the drain began
     * closes the connection, and the client's reconnect is then refused:
     * that too says the drain (and the refusal) has begun. */
    int status = 200;
    for (int i = 0; i < 2000 && status == 200; i++) {
        if (http_client_get(keep, "/health", &r) != 0) {
            http_resp_free(&r); /* a failed request still fills r */
            status = -1;
            break;
        }
        status = r.status;
        http_resp_free(&r);
        if (status == 200) sleep_ms(5);
    }
    CHECK_MSG(status == 503 || status == -1, "/health during the drain: %d", status);
    http_client_free(keep);
    int late = raw_connect(&s);
    CHECK(late < 0);
    if (late >= 0) close(late);
    REQUIRE(raw_send_str(slow, body + strlen("{\"inputs\"")) == 0);
    CHECK(raw_read_until(slow, "HTTP/1.1 200", 10000));
    close(slow);
    CHECK_EQ_INT(srv_wait(&s, 60), 0);
    srv_stop(&s);
}

/* Runs the offline CLI on lines and returns its stdout. */
static char *run_cli(const char *cmd, const char *dir, const char *lines)
{
    char in[] = "/tmp/iv_srv_cli_XXXXXX";
    int fd = mkstemp(in);
    if (fd < 0) return NULL;
    if (write(fd, lines, strlen(lines)) != (ssize_t)strlen(lines)) {
        close(fd);
        return NULL;
    }
    close(fd);
    char sh[2048];
    snprintf(sh, sizeof sh, "'%s' %s --model-id '%s' < %s", iv_test_binary(), cmd, dir, in);
    FILE *p = popen(sh, "r");
    iv_strbuf b;
    iv_sb_init(&b);
    char chunk[4096];
    size_t n;
    while (p && (n = fread(chunk, 1, sizeof chunk, p)) > 0) iv_sb_append(&b, chunk, n);
    if (p) pclose(p);
    unlink(in);
    return b.data;
}

/* Line i of the CLI output as a JSON value. */
static cJSON *cli_line(const char *out, int i)
{
    const char *p = out;
    for (int k = 0; k < i && p; k++) {
        p = strchr(p, '\n');
        if (p) p++;
    }
    if (!p) return NULL;
    const char *end = strchr(p, '\n');
    return cJSON_ParseWithLength(p, end ? (size_t)(end - p) : strlen(p));
}

TEST(srv_matches_cli)
{
    const char *bert = srv_fixture("bert"), *cls = srv_fixture("bert_seqcls3");
    if (!bert || !cls) return;
    const char *minilm = srv_minilm(); /* optional: text through the real tokenizer */
    const char *texts[] = {"The quick brown fox jumps over the lazy dog.", "hello", "Embeddings, served in C!"};
    /* Fixture: token ids; MiniLM: texts. */
    const char *lines_ids = "[101,154,102]\n[101,107,152,152,116,159,109,139,128,154,102]\n[101,102]\n";
    char *cli = run_cli("embed", bert, lines_ids);
    REQUIRE(cli);
    srv s;
    const char *args[] = {"--model-id", bert, NULL};
    REQUIRE(srv_start(&s, args) == 0);
    http_resp r;
    REQUIRE(http_post(&s, "/embed", "{\"inputs\":[[101,154,102],[101,107,152,152,116,159,109,139,128,154,102],[101,102]]}",
                      &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    for (int i = 0; i < 3; i++) {
        cJSON *line = cli_line(cli, i);
        int n, m;
        float *a = json_floats(line, &n), *b = json_floats(cJSON_GetArrayItem(r.json, i), &m);
        CHECK(n == 32 && n == m);
        CHECK_MSG(iv_test_max_abs_diff(a, b, n) <= 1e-6, "input %d: CLI and server differ by %g", i,
                  iv_test_max_abs_diff(a, b, n));
        free(a);
        free(b);
        cJSON_Delete(line);
    }
    http_resp_free(&r);
    free(cli);
    CHECK_EQ_INT(srv_stop(&s), 0);

    /* predict: the CLI's [text, pair] lines against /predict. */
    cli = run_cli("predict", cls, "good day\n[\"good day\", \"bad night\"]\n");
    REQUIRE(cli);
    const char *cargs[] = {"--model-id", cls, NULL};
    REQUIRE(srv_start(&s, cargs) == 0);
    REQUIRE(http_post(&s, "/predict", "{\"inputs\":[[\"good day\"],[\"good day\",\"bad night\"]]}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    for (int i = 0; i < 2; i++) {
        cJSON *line = cli_line(cli, i);
        REQUIRE(line);
        for (int k = 0; k < 3; k++) {
            const cJSON *a = cJSON_GetArrayItem(line, k), *b = cJSON_GetArrayItem(cJSON_GetArrayItem(r.json, i), k);
            CHECK_STR(jstr(a, "label"), jstr(b, "label"));
            CHECK(fabs(jnum(a, "score") - jnum(b, "score")) <
                  1e-6);
        }
        cJSON_Delete(line);
    }
    http_resp_free(&r);
    free(cli);
    CHECK_EQ_INT(srv_stop(&s), 0);

    if (!minilm) return;
    iv_strbuf lines, body;
    iv_sb_init(&lines);
    iv_sb_init(&body);
    iv_sb_puts(&body, "{\"input\":[");
    for (int i = 0; i < 3; i++) {
        iv_sb_printf(&lines, "%s\n", texts[i]);
        iv_sb_printf(&body, "%s\"%s\"", i ? "," : "", texts[i]);
    }
    iv_sb_puts(&body, "]}");
    cli = run_cli("embed", minilm, lines.data);
    REQUIRE(cli);
    const char *margs[] = {"--model-id", minilm, NULL};
    REQUIRE(srv_start(&s, margs) == 0);
    REQUIRE(http_post(&s, "/v1/embeddings", body.data, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    for (int i = 0; i < 3; i++) {
        cJSON *line = cli_line(cli, i);
        int n, m;
        float *a = json_floats(line, &n);
        float *b = json_floats(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(r.json, "data"), i), "embedding"),
                               &m);
        CHECK(n == 384 && n == m);
        CHECK_MSG(iv_test_max_abs_diff(a, b, n) <= 1e-6, "text %d: CLI and server differ by %g", i,
                  iv_test_max_abs_diff(a, b, n));
        free(a);
        free(b);
        cJSON_Delete(line);
    }
    http_resp_free(&r);
    free(cli);
    iv_sb_free(&lines);
    iv_sb_free(&body);
    CHECK_EQ_INT(srv_stop(&s), 0);
}

/* Threads of a running process, from /proc. */
static int thread_count(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

/* Threads of a server started with args and OMP_NUM_THREADS=n, after one
 * request to each served model (so that their OpenMP pools exist). */
static int threads_serving(const char *const *args, const char *const *served, const char *n)
{
    const char *old = getenv("OMP_NUM_THREADS");
    char *saved = old ? strdup(old) : NULL;
    setenv("OMP_NUM_THREADS", n, 1);
    srv s;
    const int started = srv_start(&s, args);
    if (saved) setenv("OMP_NUM_THREADS", saved, 1);
    else unsetenv("OMP_NUM_THREADS");
    free(saved);
    if (started) return -1;
    int ok = 1;
    for (int i = 0; served[i]; i++) {
        char body[256];
        snprintf(body, sizeof body, "{\"input\": \"hello\", \"model\": \"%s\"}", served[i]);
        http_resp r = {0};
        ok &= http_post(&s, "/v1/embeddings", body, &r) == 0 && r.status == 200;
        http_resp_free(&r);
    }
    const int count = ok ? thread_count(s.pid) : -1;
    srv_stop(&s);
    return count;
}

/* The models load on a thread that exits (server.c), and several CPU
 * models run their batches on one shared thread (engine/cpu_thread.h), so
 * the server keeps one OpenMP worker pool: with 4 OpenMP threads it has 3
 * threads more than with 1. A pool kept by the loading thread made it 6
 * (9 with two models), and libgomp, with more pooled threads than CPUs,
 * then stopped its workers spinning between the ~50 parallel regions of a
 * forward pass (each one a futex sleep and wake). */
TEST(srv_one_openmp_pool)
{
    const char *dir = srv_minilm();
    if (!dir) return;
    const char *one_model[] = {"--model-id", dir, "--served-model-name", "a", NULL};
    const char *two_models[] = {"--model-id", dir, "--served-model-name", "a", "--model-id", dir,
                                "--served-model-name", "b", NULL};
    const char *a[] = {"a", NULL}, *ab[] = {"a", "b", NULL};
    for (int k = 0; k < 2; k++) {
        const char *const *args = k ? two_models : one_model;
        const int one = threads_serving(args, k ? ab : a, "1"), four = threads_serving(args, k ? ab : a, "4");
        REQUIRE(one > 0 && four > 0);
        CHECK_MSG(four - one == 3, "%s: %d threads with OMP_NUM_THREADS=4, %d with 1", k ? "two models" : "one model",
                  four, one);
    }
}
