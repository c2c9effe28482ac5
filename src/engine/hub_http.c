/* libcurl for the hub: metadata HEADs, small JSON GETs and resumable,
 * verified file downloads. One easy handle per request keeps it simple;
 * a model is a handful of files, so connection reuse would save little. */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/sha256.h"
#include "engine/hub.h"

#define USER_AGENT "infinity_v3/0.1; libcurl"

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

/* Headers of the latest response of a request (reset at each status line, so
 * after redirects they describe the last hop). */
typedef struct resp_headers {
    char etag[160], linked_etag[160], commit[64], error_code[64], location[4096];
    int64_t content_length, linked_size;
} resp_headers;

static void reset_headers(resp_headers *h)
{
    memset(h, 0, sizeof *h);
    h->content_length = h->linked_size = -1;
}

/* "W/\"abc\"" and "\"abc\"" -> "abc", as huggingface_hub normalises etags. */
static void copy_etag(char *out, size_t cap, const char *v, size_t n)
{
    if (n >= 2 && v[0] == 'W' && v[1] == '/') v += 2, n -= 2;
    while (n && *v == '"') v++, n--;
    while (n && v[n - 1] == '"') n--;
    if (n >= cap) n = cap - 1;
    memcpy(out, v, n);
    out[n] = 0;
}

static void copy_value(char *out, size_t cap, const char *v, size_t n)
{
    if (n >= cap) n = cap - 1;
    memcpy(out, v, n);
    out[n] = 0;
}

static size_t on_header(char *buf, size_t size, size_t nitems, void *ud)
{
    resp_headers *h = ud;
    size_t len = size * nitems;
    if (len >= 5 && !strncmp(buf, "HTTP/", 5)) {
        reset_headers(h);
        return len;
    }
    const char *colon = memchr(buf, ':', len);
    if (!colon) return len;
    size_t name_len = (size_t)(colon - buf);
    const char *v = colon + 1;
    size_t n = len - name_len - 1;
    while (n && (*v == ' ' || *v == '\t')) v++, n--;
    while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' ')) n--;
#define IS(name) (name_len == sizeof(name) - 1 && !strncasecmp(buf, name, name_len))
    char num[32];
    if (IS("ETag")) copy_etag(h->etag, sizeof h->etag, v, n);
    else if (IS("X-Linked-Etag")) copy_etag(h->linked_etag, sizeof h->linked_etag, v, n);
    else if (IS("X-Repo-Commit")) copy_value(h->commit, sizeof h->commit, v, n);
    else if (IS("X-Error-Code")) copy_value(h->error_code, sizeof h->error_code, v, n);
    else if (IS("Location")) copy_value(h->location, sizeof h->location, v, n);
    else if (IS("Content-Length") || IS("X-Linked-Size")) {
        copy_value(num, sizeof num, v, n);
        char *end;
        long long x = strtoll(num, &end, 10);
        if (end != num && *end == 0 && x >= 0) {
            if (IS("Content-Length")) h->content_length = x;
            else h->linked_size = x;
        }
    }
#undef IS
    return len;
}

/* A handle with what every hub request shares. */
static CURL *easy_new(const char *url, const char *token, struct curl_slist **hdrs, char *errbuf,
                      resp_headers *rh)
{
    pthread_once(&g_curl_once, curl_init_once);
    CURL *c = curl_easy_init();
    if (!c) return NULL;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_USERAGENT, USER_AGENT);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#endif
    errbuf[0] = 0;
    *hdrs = NULL;
    if (token && *token) {
        char auth[4200];
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        /* libcurl drops a custom Authorization header when a redirect leaves
         * the host, so the token never reaches a CDN. */
        *hdrs = curl_slist_append(*hdrs, auth);
    }
    if (*hdrs) curl_easy_setopt(c, CURLOPT_HTTPHEADER, *hdrs);
    reset_headers(rh);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, rh);
    return c;
}

static int transport_error(CURLcode rc, const char *errbuf, const char *url, iv_err *err)
{
    return iv_errf(err, IV_E_IO, "%s: %s", url, errbuf[0] ? errbuf : curl_easy_strerror(rc));
}

/* scheme://host:port of url, lowercased, default port filled in. */
static int url_origin(const char *url, char *out, size_t cap)
{
    CURLU *u = curl_url();
    if (!u) return -1;
    char *scheme = NULL, *host = NULL, *port = NULL;
    int rc = -1;
    if (curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK) {
        snprintf(out, cap, "%s://%s:%s", scheme, host, port);
        for (char *p = out; *p; p++)
            if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
        rc = 0;
    }
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
    return rc;
}

int iv_http_hub_origin(const char *from, const char *to)
{
    char a[512], b[512];
    if (url_origin(from, a, sizeof a) || url_origin(to, b, sizeof b)) return 0;
    return !strcmp(a, b) || !strcmp(b, "https://huggingface.co:443") ||
           !strcmp(b, "https://hf.co:443");
}

int iv_http_head(const char *url, const char *token, iv_http_meta *m, iv_err *err)
{
    memset(m, 0, sizeof *m);
    m->size = -1;
    char cur[4096];
    snprintf(cur, sizeof cur, "%s", url);
    /* The hub answers a renamed repository with a redirect within the hub
     * (followed here) and an LFS file with one to its storage, whose response
     * lacks the hub headers: that one is reported, not followed, as
     * huggingface_hub does. */
    for (int hop = 0; hop < 10; hop++) {
        char errbuf[CURL_ERROR_SIZE];
        struct curl_slist *hdrs;
        resp_headers rh;
        CURL *c = easy_new(cur, token, &hdrs, errbuf, &rh);
        if (!c) return iv_errf(err, IV_E_NOMEM, "cannot create a curl handle");
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
        /* Sizes and etags describe the raw file: ask for it uncompressed. */
        curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "identity");
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
        CURLcode rc = curl_easy_perform(c);
        char *redirect = NULL;
        if (rc == CURLE_OK) {
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &m->status);
            curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &redirect);
        }
        char next[4096] = "";
        if (redirect) snprintf(next, sizeof next, "%s", redirect);
        curl_easy_cleanup(c);
        curl_slist_free_all(hdrs);
        if (rc != CURLE_OK) return transport_error(rc, errbuf, cur, err);
        const char *etag = rh.linked_etag[0] ? rh.linked_etag : rh.etag;
        snprintf(m->etag, sizeof m->etag, "%s", etag);
        m->linked = rh.linked_etag[0] != 0;
        m->size = rh.linked_size >= 0 ? rh.linked_size : rh.content_length;
        snprintf(m->commit, sizeof m->commit, "%s", rh.commit);
        snprintf(m->error_code, sizeof m->error_code, "%s", rh.error_code);
        int is_redirect = m->status >= 300 && m->status < 400 && next[0];
        if (is_redirect && iv_http_hub_origin(cur, next)) {
            snprintf(cur, sizeof cur, "%s", next);
            continue;
        }
        snprintf(m->location, sizeof m->location, "%s", is_redirect ? next : cur);
        /* A redirect is where the content is, not an error. */
        if (is_redirect) m->status = 200;
        return 0;
    }
    return iv_errf(err, IV_E_IO, "%s: too many redirects", url);
}

typedef struct mem_sink {
    char *buf;
    size_t len, cap, max;
} mem_sink;

static size_t on_mem_write(char *data, size_t size, size_t nmemb, void *ud)
{
    mem_sink *s = ud;
    size_t n = size * nmemb;
    if (s->len + n > s->max) return 0;
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 65536;
        while (cap < s->len + n + 1) cap *= 2;
        char *b = realloc(s->buf, cap);
        if (!b) return 0;
        s->buf = b;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, data, n);
    s->len += n;
    s->buf[s->len] = 0;
    return n;
}

int iv_http_get(const char *url, const char *token, size_t max_bytes, long *status, char **body,
                size_t *len, char error_code[64], iv_err *err)
{
    *body = NULL;
    *len = 0;
    *status = 0;
    error_code[0] = 0;
    char errbuf[CURL_ERROR_SIZE];
    struct curl_slist *hdrs;
    resp_headers rh;
    CURL *c = easy_new(url, token, &hdrs, errbuf, &rh);
    if (!c) return iv_errf(err, IV_E_NOMEM, "cannot create a curl handle");
    mem_sink sink = {.max = max_bytes};
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_mem_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_easy_cleanup(c);
    curl_slist_free_all(hdrs);
    if (rc == CURLE_WRITE_ERROR) {
        free(sink.buf);
        return iv_errf(err, IV_E_TOO_LARGE, "%s: response over %zu bytes", url, max_bytes);
    }
    if (rc != CURLE_OK) {
        free(sink.buf);
        return transport_error(rc, errbuf, url, err);
    }
    snprintf(error_code, 64, "%s", rh.error_code);
    if (!sink.buf) sink.buf = calloc(1, 1);
    if (!sink.buf) return iv_errf(err, IV_E_NOMEM, "out of memory");
    *body = sink.buf;
    *len = sink.len;
    return 0;
}

/* ---- downloads ---- */

typedef struct progress {
    int on;              /* stderr is a terminal */
    const char *label;
    int64_t total;       /* -1 unknown */
    int64_t session_start; /* bytes present when this run began (resumed) */
    struct timespec t0, last;
    int drawn;
} progress;

static double seconds_between(struct timespec a, struct timespec b)
{
    return (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
}

void iv_human_bytes(char *out, size_t cap, double bytes)
{
    const char *units[] = {"B", "kB", "MB", "GB", "TB"};
    int u = 0;
    while (bytes >= 1000 && u < 4) bytes /= 1000, u++;
    snprintf(out, cap, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
}

static void progress_draw(progress *p, int64_t done, int final)
{
    if (!p->on) return;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (!final && p->drawn && seconds_between(p->last, now) < 0.1) return;
    p->last = now;
    p->drawn = 1;
    double dt = seconds_between(p->t0, now);
    char got[32], total[32], rate[32];
    iv_human_bytes(got, sizeof got, (double)done);
    iv_human_bytes(total, sizeof total, (double)(p->total > 0 ? p->total : done));
    iv_human_bytes(rate, sizeof rate, dt > 0 ? (double)(done - p->session_start) / dt : 0);
    char bar[31];
    int pct = p->total > 0 ? (int)(100 * done / p->total) : 0;
    int fill = p->total > 0 ? (int)(30 * done / p->total) : 0;
    for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : ' ';
    bar[30] = 0;
    fprintf(stderr, "\r%-32.32s %3d%% [%s] %s / %s, %s/s\033[K%s", p->label, pct, bar, got, total,
            rate, final ? "\n" : "");
    fflush(stderr);
}

typedef struct dl_state {
    FILE *f;
    CURL *curl;
    iv_sha256 sha;
    int64_t have;   /* bytes in the file */
    int started;    /* first body bytes of this request seen */
    int write_failed;
    progress prog;
} dl_state;

static int restart_file(dl_state *s)
{
    fflush(s->f);
    if (ftruncate(fileno(s->f), 0) != 0) return -1;
    iv_sha256_init(&s->sha);
    s->have = 0;
    s->prog.session_start = 0;
    return 0;
}

static size_t on_file_write(char *data, size_t size, size_t nmemb, void *ud)
{
    dl_state *s = ud;
    size_t n = size * nmemb;
    if (!s->started) {
        s->started = 1;
        long code = 0;
        curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &code);
        /* 200 to a Range request: the server sends everything again. */
        if (code == 200 && s->have > 0 && restart_file(s) != 0) {
            s->write_failed = 1;
            return 0;
        }
    }
    if (fwrite(data, 1, n, s->f) != n) {
        s->write_failed = 1;
        return 0;
    }
    iv_sha256_update(&s->sha, data, n);
    s->have += (int64_t)n;
    progress_draw(&s->prog, s->have, 0);
    return n;
}

/* Hashes the bytes a previous run left, so the final digest covers the file. */
static int hash_existing(dl_state *s)
{
    unsigned char buf[1 << 16];
    rewind(s->f);
    int64_t left = s->have;
    while (left > 0) {
        size_t want = left < (int64_t)sizeof buf ? (size_t)left : sizeof buf;
        size_t got = fread(buf, 1, want, s->f);
        if (got == 0) return -1;
        iv_sha256_update(&s->sha, buf, got);
        left -= (int64_t)got;
    }
    return 0;
}

/* Errors after which resuming makes sense: the connection broke mid-way. */
static int retryable(CURLcode rc)
{
    return rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR ||
           rc == CURLE_GOT_NOTHING || rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_HTTP2 ||
           rc == CURLE_HTTP2_STREAM;
}

int iv_http_download(const iv_http_download_req *req, long *status, iv_err *err)
{
    *status = 0;
    /* O_APPEND: after a truncation, writes land at the new end. */
    FILE *f = fopen(req->path, "a+b");
    if (!f) return iv_errf(err, IV_E_IO, "cannot open %s: %s", req->path, strerror(errno));
    dl_state s = {.f = f};
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        return iv_errf(err, IV_E_IO, "cannot stat %s: %s", req->path, strerror(errno));
    }
    s.have = st.st_size;
    iv_sha256_init(&s.sha);
    if (req->expected_size >= 0 && s.have > req->expected_size && restart_file(&s) != 0) {
        fclose(f);
        return iv_errf(err, IV_E_IO, "cannot truncate %s: %s", req->path, strerror(errno));
    }
    if (s.have > 0 && hash_existing(&s) != 0) {
        fclose(f);
        return iv_errf(err, IV_E_IO, "cannot read %s", req->path);
    }
    s.prog = (progress){.on = isatty(STDERR_FILENO), .label = req->label,
                        .total = req->expected_size, .session_start = s.have};
    clock_gettime(CLOCK_MONOTONIC, &s.prog.t0);

    int rc_final = 0, tries_left = 5, restarted = 0;
    while (!(req->expected_size >= 0 && s.have == req->expected_size && s.have > 0)) {
        char errbuf[CURL_ERROR_SIZE];
        struct curl_slist *hdrs;
        resp_headers rh;
        CURL *c = easy_new(req->url, req->token, &hdrs, errbuf, &rh);
        if (!c) {
            rc_final = iv_errf(err, IV_E_NOMEM, "cannot create a curl handle");
            break;
        }
        s.curl = c;
        s.started = 0;
        char range[32];
        if (s.have > 0) {
            snprintf(range, sizeof range, "%lld-", (long long)s.have);
            curl_easy_setopt(c, CURLOPT_RANGE, range);
        }
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
        curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
        /* Byte ranges and the checksum refer to the raw file. */
        curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "identity");
        /* A stalled transfer (under 1 byte/s for 60 s) counts as broken. */
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_file_write);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
        int64_t before = s.have;
        CURLcode rc = curl_easy_perform(c);
        long code = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_cleanup(c);
        curl_slist_free_all(hdrs);
        fflush(f);
        if (rc == CURLE_OK) {
            *status = code;
            break;
        }
        if (s.write_failed) {
            rc_final = iv_errf(err, IV_E_IO, "cannot write %s: %s (is the disk full?)", req->path,
                               strerror(errno));
            break;
        }
        if (rc == CURLE_HTTP_RETURNED_ERROR && code == 416 && s.have > 0 && !restarted) {
            /* Our partial file is not a prefix the server recognises: start over. */
            restarted = 1;
            if (restart_file(&s) != 0) {
                rc_final = iv_errf(err, IV_E_IO, "cannot truncate %s", req->path);
                break;
            }
            continue;
        }
        if (rc == CURLE_HTTP_RETURNED_ERROR) {
            *status = code;
            rc_final = iv_errf(err, IV_E_IO, "%s: HTTP %ld", req->url, code);
            break;
        }
        if (s.have > before) tries_left = 5; /* progress: the connection is worth resuming */
        if (!retryable(rc) || --tries_left <= 0) {
            *status = -1;
            rc_final = transport_error(rc, errbuf, req->url, err);
            break;
        }
        if (s.have == before) sleep(1);
    }
    if (rc_final == 0) progress_draw(&s.prog, s.have, 1);
    else if (s.prog.drawn) fputc('\n', stderr);
    fclose(f);
    if (rc_final) return -1;
    *status = 0; /* from here on, failures are local */

    if (req->expected_size >= 0 && s.have != req->expected_size) {
        if (s.have > req->expected_size) unlink(req->path);
        return iv_errf(err, IV_E_IO,
                       "%s: received %lld bytes but the hub announced %lld; run again to resume",
                       req->label, (long long)s.have, (long long)req->expected_size);
    }
    if (req->sha256) {
        char hex[65];
        iv_sha256_final_hex(&s.sha, hex);
        if (strcasecmp(hex, req->sha256) != 0) {
            unlink(req->path);
            return iv_errf(err, IV_E_IO,
                           "%s: checksum mismatch (sha256 %s, the hub says %s); the corrupt "
                           "download was deleted, run again to retry",
                           req->label, hex, req->sha256);
        }
    }
    return 0;
}
