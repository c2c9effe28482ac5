#include "server_harness.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "test.h"

/* Servers started and not yet stopped, killed by the runner when a test
 * runs out of time (iv_test_on_timeout): a hung test must not leave its
 * servers behind. */
#define MAX_LIVE 64
static volatile sig_atomic_t live_pids[MAX_LIVE];

static void kill_live_servers(void)
{
    for (int i = 0; i < MAX_LIVE; i++)
        if (live_pids[i] > 0) kill((pid_t)live_pids[i], SIGKILL);
}

static void track(pid_t pid, pid_t replace)
{
    for (int i = 0; i < MAX_LIVE; i++)
        if (live_pids[i] == replace) {
            live_pids[i] = pid;
            return;
        }
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    iv_test_on_timeout(kill_live_servers);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* ---- models ---- */

static const char *path_if_model(const char *dir)
{
    static char bufs[8][1024];
    static int next;
    char cfg[1100];
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    struct stat st;
    char laya[1100]; /* a Laya decision checkpoint: rl_agent_config.json, encoder/config.json */
    snprintf(laya, sizeof laya, "%s/rl_agent_config.json", dir);
    if (stat(cfg, &st) && stat(laya, &st)) {
        char why[1200];
        snprintf(why, sizeof why, "model %s not present", dir);
        iv_test_skip(why);
        return NULL;
    }
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof bufs[0], "%s", dir);
    return b;
}

const char *srv_fixture(const char *name)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/models/%s", iv_test_fixtures_dir(), name);
    return path_if_model(dir);
}

const char *srv_minilm(void)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/all-MiniLM-L6-v2", iv_test_models_dir());
    return path_if_model(dir);
}

/* ---- process ---- */

static int stop_process(srv *s);

char *srv_log(const srv *s)
{
    FILE *f = fopen(s->log_path, "rb");
    if (!f) return strdup("");
    iv_strbuf b;
    iv_sb_init(&b);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) iv_sb_append(&b, chunk, n);
    fclose(f);
    return b.data ? b.data : strdup("");
}

static void print_log(const srv *s)
{
    char *log = srv_log(s);
    size_t n = strlen(log);
    fprintf(stdout, "    --- server log (%s) ---\n%s\n    ---\n", s->log_path, n > 6000 ? log + n - 6000 : log);
    free(log);
}

static int start(srv *s, const char *const *args, int quiet);

int srv_start(srv *s, const char *const *args) { return start(s, args, 0); }
int srv_start_quiet(srv *s, const char *const *args) { return start(s, args, 1); }

static int start(srv *s, const char *const *args, int quiet)
{
    pthread_once(&curl_once, curl_init);
    memset(s, 0, sizeof *s);
    snprintf(s->log_path, sizeof s->log_path, "/tmp/iv_srv_XXXXXX");
    int logfd = mkstemp(s->log_path);
    if (logfd < 0) return -1;
    const char *argv[96];
    int n = 0;
    argv[n++] = iv_test_binary();
    argv[n++] = "serve";
    int uds = 0;
    for (int i = 0; args[i] && n < 90; i++) {
        if (!strcmp(args[i], "--uds-path") && args[i + 1]) {
            uds = 1;
            snprintf(s->uds, sizeof s->uds, "%s", args[i + 1]);
        }
        argv[n++] = args[i];
    }
    if (!uds) {
        argv[n++] = "--port";
        argv[n++] = "0";
        argv[n++] = "--hostname";
        argv[n++] = "127.0.0.1";
    }
    argv[n] = NULL;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(logfd, 1);
        dup2(logfd, 2);
        close(logfd);
        execv(argv[0], (char *const *)argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(logfd);
    s->pid = pid;
    track(pid, 0);
    /* Wait for the Ready line (the port), then for /health. */
    const double deadline = now_s() + 120;
    while (now_s() < deadline) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            track(0, pid);
            s->pid = 0;
            if (!quiet) {
                fprintf(stdout, "    server exited during start (status %d)\n", status);
                print_log(s);
            }
            return -1;
        }
        char *log = srv_log(s);
        const char *ready = strstr(log, "Ready: listening on ");
        if (ready) {
            if (!uds) {
                const char *colon = strchr(ready + 20, ':');
                s->port = colon ? atoi(colon + 1) : 0;
            }
            free(log);
            break;
        }
        free(log);
        sleep_ms(20);
    }
    while (now_s() < deadline) {
        http_resp r;
        if (http_get(s, "/health", &r) == 0 && r.status == 200) {
            http_resp_free(&r);
            return 0;
        }
        http_resp_free(&r);
        sleep_ms(20);
    }
    fprintf(stdout, "    server did not become healthy\n");
    print_log(s);
    stop_process(s);
    return -1;
}

int srv_stop(srv *s)
{
    int rc = stop_process(s);
    if (s->log_path[0]) unlink(s->log_path);
    s->log_path[0] = 0;
    return rc;
}

int srv_wait(srv *s, int timeout_s)
{
    if (s->pid <= 0) return -1;
    const double deadline = now_s() + timeout_s;
    int status = 0;
    while (now_s() < deadline) {
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            track(0, s->pid);
            s->pid = 0;
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        sleep_ms(10);
    }
    fprintf(stdout, "    server still running after %d s; killing it\n", timeout_s);
    print_log(s);
    kill(s->pid, SIGKILL);
    waitpid(s->pid, &status, 0);
    track(0, s->pid);
    s->pid = 0;
    return -1;
}

static int stop_process(srv *s)
{
    if (s->pid <= 0) return -1;
    kill(s->pid, SIGTERM);
    const double deadline = now_s() + 30;
    int status = 0;
    while (now_s() < deadline) {
        pid_t w = waitpid(s->pid, &status, WNOHANG);
        if (w == s->pid) {
            track(0, s->pid);
            s->pid = 0;
            if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
            print_log(s);
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        }
        sleep_ms(10);
    }
    fprintf(stdout, "    server ignored SIGTERM for 30 s; killing it\n");
    print_log(s);
    kill(s->pid, SIGKILL);
    waitpid(s->pid, &status, 0);
    track(0, s->pid);
    s->pid = 0;
    return -1;
}

/* ---- HTTP with libcurl ---- */

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
    iv_sb_append(ctx, p, size * n);
    return size * n;
}

struct http_client {
    CURL *curl;
    const srv *s;
};

static int perform(CURL *c, const srv *s, const char *method, const char *path, const char *body, size_t len,
                   const char *const *headers, http_resp *out)
{
    memset(out, 0, sizeof *out);
    char url[1024];
    snprintf(url, sizeof url, "http://%s%s", s->uds[0] ? "localhost" : "127.0.0.1", path);
    if (!s->uds[0]) snprintf(url, sizeof url, "http://127.0.0.1:%d%s", s->port, path);
    iv_strbuf b, h;
    iv_sb_init(&b);
    iv_sb_init(&h);
    struct curl_slist *hl = NULL;
    if (headers)
        for (int i = 0; headers[i]; i++) hl = curl_slist_append(hl, headers[i]);
    else if (body)
        hl = curl_slist_append(hl, "Content-Type: application/json");
    hl = curl_slist_append(hl, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, url);
    if (s->uds[0]) curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, s->uds);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    } else {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 180000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = curl_easy_perform(c);
    curl_slist_free_all(hl);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    out->body = b.data ? b.data : strdup("");
    out->len = b.len;
    out->headers = h.data ? h.data : strdup("");
    out->json = out->len ? cJSON_ParseWithLength(out->body, out->len) : NULL;
    if (rc != CURLE_OK) {
        fprintf(stdout, "    curl %s %s: %s\n", method, path, curl_easy_strerror(rc));
        return -1;
    }
    return 0;
}

int http_do(const srv *s, const char *method, const char *path, const char *body, size_t len,
            const char *const *headers, http_resp *out)
{
    pthread_once(&curl_once, curl_init);
    CURL *c = curl_easy_init();
    if (!c) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    int rc = perform(c, s, method, path, body, len, headers, out);
    curl_easy_cleanup(c);
    return rc;
}

int http_post(const srv *s, const char *path, const char *json, http_resp *out)
{
    return http_do(s, "POST", path, json, strlen(json), NULL, out);
}

int http_get(const srv *s, const char *path, http_resp *out) { return http_do(s, "GET", path, NULL, 0, NULL, out); }

void http_resp_free(http_resp *r)
{
    free(r->body);
    free(r->headers);
    if (r->json) cJSON_Delete(r->json);
    memset(r, 0, sizeof *r);
}

const char *http_header(const http_resp *r, const char *name, char *buf, size_t cap)
{
    size_t nl = strlen(name);
    for (const char *line = r->headers; line && *line;) {
        const char *end = strstr(line, "\r\n");
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len > nl && line[nl] == ':' && !strncasecmp(line, name, nl)) {
            const char *v = line + nl + 1;
            while (*v == ' ') v++;
            size_t vl = len - (size_t)(v - line);
            if (vl >= cap) vl = cap - 1;
            memcpy(buf, v, vl);
            buf[vl] = 0;
            return buf;
        }
        line = end ? end + 2 : line + len;
    }
    return NULL;
}

http_client *http_client_new(const srv *s)
{
    pthread_once(&curl_once, curl_init);
    http_client *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->curl = curl_easy_init();
    c->s = s;
    return c;
}

void http_client_free(http_client *c)
{
    if (!c) return;
    curl_easy_cleanup(c->curl);
    free(c);
}

int http_client_post(http_client *c, const char *path, const char *json, http_resp *out)
{
    return perform(c->curl, c->s, "POST", path, json, strlen(json), NULL, out);
}

int http_client_get(http_client *c, const char *path, http_resp *out)
{
    return perform(c->curl, c->s, "GET", path, NULL, 0, NULL, out);
}

/* ---- decoding ---- */

void srv_expect_detail(const srv *s, const char *path, const char *body, long status, const char *loc,
                       const char *type, const char *msg_has)
{
    http_resp r;
    if (http_post(s, path, body, &r)) {
        iv_test_fail(__FILE__, __LINE__, "request failed: %.200s", body);
        return;
    }
    CHECK_MSG(r.status == status, "%.200s -> %ld (want %ld): %.300s", body, r.status, status, r.body);
    const cJSON *d = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r.json, "detail"), 0);
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(d, "msg");
    char got[512] = "";
    const cJSON *x;
    cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(d, "loc"))
    {
        if (got[0]) strncat(got, ".", sizeof got - strlen(got) - 1);
        strncat(got, cJSON_IsString(x) ? x->valuestring : "?", sizeof got - strlen(got) - 1);
    }
    if (loc) CHECK_MSG(!strcmp(got, loc), "%.200s: loc %s (want %s)", body, got, loc);
    if (loc) CHECK_MSG(cJSON_IsString(msg), "%.200s: no msg", body);
    if (type) CHECK_MSG(!strcmp(jstr(d, "type"), type), "%.200s: type %s (want %s)", body, jstr(d, "type"), type);
    if (msg_has)
        CHECK_MSG(cJSON_IsString(msg) && strstr(msg->valuestring, msg_has), "%.200s: msg \"%s\" (want \"%s\")", body,
                  jstr(d, "msg"), msg_has);
    http_resp_free(&r);
}

const char *jstr(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v->valuestring : "(missing)";
}

int jint(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNumber(v) && fabs(v->valuedouble) < 2e9 ? (int)v->valuedouble : -1;
}

double jnum(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

float *json_floats(const cJSON *arr, int *n)
{
    *n = cJSON_GetArraySize(arr);
    float *v = malloc((size_t)(*n > 0 ? *n : 1) * sizeof *v);
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, arr) v[i++] = cJSON_IsNumber(x) ? (float)x->valuedouble : NAN;
    return v;
}

unsigned char *b64_decode(const char *s, size_t *n)
{
    size_t len = strlen(s);
    unsigned char *out = malloc(len / 4 * 3 + 3);
    size_t o = 0;
    unsigned v = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        int d = ch >= 'A' && ch <= 'Z' ? ch - 'A'
                : ch >= 'a' && ch <= 'z' ? ch - 'a' + 26
                : ch >= '0' && ch <= '9' ? ch - '0' + 52
                : ch == '+' ? 62
                : ch == '/' ? 63
                            : -1;
        if (d < 0) continue;
        v = (v << 6) | (unsigned)d;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(v >> bits);
        }
    }
    *n = o;
    return out;
}

/* ---- raw sockets ---- */

int raw_connect(const srv *s)
{
    int fd;
    if (s->uds[0]) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", s->uds);
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
            close(fd);
            return -1;
        }
        return fd;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->port)};
    sa.sin_addr.s_addr = htonl(0x7f000001);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
        close(fd);
        return -1;
    }
    return fd;
}

char *raw_exchange(const srv *s, const char *req, size_t len, int timeout_ms)
{
    int fd = raw_connect(s);
    if (fd < 0) return NULL;
    size_t off = 0;
    while (off < len) {
        ssize_t w = send(fd, req + off, len - off, MSG_NOSIGNAL);
        if (w <= 0) break;
        off += (size_t)w;
    }
    iv_strbuf b;
    iv_sb_init(&b);
    const double deadline = now_s() + timeout_ms / 1000.0;
    for (;;) {
        int left = (int)((deadline - now_s()) * 1000);
        if (left <= 0) break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, left) <= 0) break;
        char chunk[4096];
        ssize_t r = recv(fd, chunk, sizeof chunk, 0);
        if (r <= 0) break;
        iv_sb_append(&b, chunk, (size_t)r);
    }
    close(fd);
    return b.data ? b.data : strdup("");
}

double metric_value(const char *metrics, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = metrics; p && *p;) {
        if (!strncmp(p, series, n) && p[n] == ' ') return strtod(p + n + 1, NULL);
        p = strchr(p, '\n');
        if (p) p++;
    }
    return -1;
}

int raw_read_until(int fd, const char *want, int timeout_ms)
{
    char buf[8192];
    size_t got = 0;
    for (int waited = 0; waited < timeout_ms; waited += 10) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 10) <= 0) continue;
        ssize_t n = read(fd, buf + got, sizeof buf - 1 - got);
        if (n <= 0) return 0;
        got += (size_t)n;
        buf[got] = 0;
        if (strstr(buf, want)) return 1;
        if (got == sizeof buf - 1) return 0;
    }
    return 0;
}

int raw_send_str(int fd, const char *s)
{
    const size_t n = strlen(s);
    for (size_t off = 0; off < n;) {
        const ssize_t k = write(fd, s + off, n - off);
        if (k <= 0) return -1;
        off += (size_t)k;
    }
    return 0;
}

int srv_log_shows(const srv *s, const char *what)
{
    for (int i = 0; i < 6000; i++) {
        char *log = srv_log(s);
        const int found = log && strstr(log, what) != NULL;
        free(log);
        if (found) return 1;
        sleep_ms(10);
    }
    return 0;
}

double srv_metric(const char *text, const char *name)
{
    double sum = 0;
    const size_t n = strlen(name);
    for (const char *p = text; (p = strstr(p, name)); p += n)
        if ((p == text || p[-1] == '\n') && p[n] == '{') {
            const char *sp = strchr(p, ' ');
            if (sp) sum += strtod(sp + 1, NULL);
        }
    return sum;
}
