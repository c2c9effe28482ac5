/* libmicrohttpd glue (see http.h).
 *
 * Life of a request on an MHD thread: the first callback (headers only)
 * creates the iv_req, finds the route and rejects early what can be
 * rejected without the body (unknown path, method, API key, declared size
 * over the payload limit, content type). Body chunks accumulate up to the
 * payload limit. The final callback dispatches to the route, which replies
 * or suspends the connection while the model's batcher runs the job; the
 * batcher's completion resumes it and MHD calls back once more, when the
 * route's finish function turns the results into the reply. */
#include "server/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "base/log.h"
#include "server/auth.h"
#include "server/read_deadline.h"
#include "server/request_id.h"
#include "server/router.h"

struct iv_http {
    struct MHD_Daemon *daemon;
    int listen_fd;
    int quiesced;
    /* The end of a drain: MHD_stop_daemon panics on a suspended
     * connection, and a request running on the model should still get its
     * answer, so before it runs no request may be left in the engine.
     * `closing` stops new dispatches (they answer 503); `dispatching`
     * counts final callbacks in progress (a route may be about to
     * suspend); `in_engine` counts requests from their suspension until
     * their finish step queued the reply (or the connection ended). */
    atomic_int closing, dispatching, in_engine;
    int test_hold; /* IV_TEST_HOLD_UNTIL_HANGUP (see iv_http_suspend) */
    iv_read_deadline *deadline; /* --read-timeout; NULL with 0 */
};

/* A body over the payload limit is read and dropped, and the 413 sent once
 * it has all arrived: answering at once and closing while the client is
 * still sending resets the connection, and most clients then see a broken
 * pipe instead of the 413. A body that keeps going far beyond the limit
 * (or declares that it will) has the connection closed. */
#define DISCARD_CAP (64u << 20)

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) msg[--n] = 0;
    /* A worker that saw the listening socket readable just before the drain
     * put a datagram socket in its place (iv_http_quiesce) accepts on that
     * and fails harmlessly: not worth a warning. */
    if (!strcmp(msg, "Error accepting connection: Operation not supported")) return;
    IV_WARN("http: %s", msg);
}

void iv_req_free(iv_req *r)
{
    if (!r) return;
    iv_job_release(&r->job);
    free(r->job.items);
    iv_inputs_free(&r->inputs);
    if (r->route_data_free) r->route_data_free(r->route_data);
    if (r->json) cJSON_Delete(r->json);
    iv_sb_free(&r->body);
    free(r->reply.body);
    pthread_mutex_destroy(&r->lock);
    atomic_fetch_sub(&r->srv->live_requests, 1);
    free(r);
}

/* Test hook: with IV_TEST_HOLD_UNTIL_HANGUP in the server's environment, a
 * request carrying `X-Iv-Test-Hold: hangup` goes to the engine only once
 * its client has closed the connection (30 s at most), so a test sees the
 * engine drop an abandoned request without racing the engine against the
 * client (tests/integration/test_server_ops.c). It blocks an MHD thread:
 * for tests only. */
static void test_hold(iv_req *r)
{
    const char *v = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Iv-Test-Hold");
    if (!v || strcmp(v, "hangup") || r->job.client_fd < 0) return;
    IV_WARN("X-Iv-Test-Hold: %s %s waits for its client to hang up", r->method, r->path);
    struct pollfd p = {.fd = r->job.client_fd, .events = POLLRDHUP};
    poll(&p, 1, 30000);
}

void iv_http_suspend(iv_req *r)
{
    atomic_fetch_add(&r->srv->http->in_engine, 1);
    MHD_suspend_connection(r->conn);
    if (r->srv->http->test_hold) test_hold(r);
}

void iv_http_resume(iv_req *r) { MHD_resume_connection(r->conn); }

const char *iv_req_query(iv_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

int iv_http_client_fd(iv_req *r)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

static void add_ms_header(struct MHD_Response *resp, const char *name, int64_t ns)
{
    char v[32];
    snprintf(v, sizeof v, "%lld", (long long)(ns / 1000000));
    MHD_add_response_header(resp, name, v);
}

/* TEI's timing headers; per-input averages for batches. */
static void timing_headers(iv_req *r, struct MHD_Response *resp, int64_t total_ns)
{
    const iv_job *job = &r->job;
    int64_t tok = 0, queue = 0, inf = 0, tokens = 0;
    for (int i = 0; i < job->n_items; i++) {
        tok += job->items[i].tokenize_ns;
        queue += job->items[i].queue_ns;
        inf += job->items[i].inference_ns;
        tokens += job->items[i].n_tokens;
    }
    const int n = job->n_items > 0 ? job->n_items : 1;
    char v[32];
    MHD_add_response_header(resp, "x-compute-type", "cpu");
    add_ms_header(resp, "x-compute-time", total_ns);
    snprintf(v, sizeof v, "%zu", r->inputs.n_chars);
    MHD_add_response_header(resp, "x-compute-characters", v);
    snprintf(v, sizeof v, "%lld", (long long)tokens);
    MHD_add_response_header(resp, "x-compute-tokens", v);
    add_ms_header(resp, "x-total-time", total_ns);
    add_ms_header(resp, "x-tokenization-time", tok / n);
    add_ms_header(resp, "x-queue-time", queue / n);
    add_ms_header(resp, "x-inference-time", inf / n);

    iv_metrics *m = r->srv->metrics;
    char name[64];
    const double s = 1e-9;
    iv_metrics_observe(m, "te_request_duration", (double)total_ns * s);
    iv_metrics_observe(m, "te_request_tokenization_duration", (double)(tok / n) * s);
    iv_metrics_observe(m, "te_request_queue_duration", (double)(queue / n) * s);
    iv_metrics_observe(m, "te_request_inference_duration", (double)(inf / n) * s);
    if (r->p.metric_task) {
        static const char *parts[] = {"duration", "tokenization_duration", "queue_duration", "inference_duration"};
        for (int i = 0; i < job->n_items; i++) {
            const iv_job_item *it = &job->items[i];
            const double vals[] = {(double)(it->tokenize_ns + it->queue_ns + it->inference_ns) * s,
                                   (double)it->tokenize_ns * s, (double)it->queue_ns * s, (double)it->inference_ns * s};
            for (int k = 0; k < 4; k++) {
                snprintf(name, sizeof name, "te_%s_%s", r->p.metric_task, parts[k]);
                iv_metrics_observe(m, name, vals[k]);
            }
            iv_metrics_observe(m, "te_request_input_length", (double)it->n_tokens);
        }
        snprintf(name, sizeof name, "te_%s_success", r->p.metric_task);
        iv_metrics_inc(m, name, job->n_items);
    }
}

/* The request's SERVER span for the OTLP exporter. */
static void record_span(const iv_req *r, int status, int64_t total_ns)
{
    int64_t tokens = 0;
    for (int i = 0; i < r->job.n_items; i++) tokens += r->job.items[i].n_tokens;
    const iv_span span = {
        .ctx = &r->trace,
        .method = r->method,
        .route = r->route ? r->route->path : NULL,
        .path = r->path,
        .status = status,
        .start_unix_ns = r->t_start_unix_ns,
        .end_unix_ns = r->t_start_unix_ns + total_ns,
        .request_id = r->request_id,
        .model = r->model ? r->model->served_name : NULL,
        .tokens = tokens,
    };
    iv_otlp_record(r->srv->otlp, &span);
}

static enum MHD_Result queue_reply_ex(iv_req *r, int close_after);
static enum MHD_Result queue_reply(iv_req *r) { return queue_reply_ex(r, 0); }

static enum MHD_Result queue_reply_ex(iv_req *r, int close_after)
{
    iv_reply *rep = &r->reply;
    struct MHD_Response *resp =
        rep->body ? MHD_create_response_from_buffer(rep->len, rep->body, MHD_RESPMEM_MUST_FREE)
                  : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    rep->body = NULL; /* MHD frees it */
    const int64_t total = iv_now_ns() - r->t_start;
    if (rep->content_type) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, rep->content_type);
    MHD_add_response_header(resp, "x-request-id", r->request_id);
    /* TypeSafe's clients read the id from their own header (docs/decisions.md). */
    if (r->route && r->route->handler == iv_route_decisions)
        MHD_add_response_header(resp, "x-typesafe-request-id", r->request_id);
    if (rep->www_authenticate) MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, rep->www_authenticate);
    if (close_after || atomic_load(&r->srv->draining))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    if (rep->status == 200 && r->timing_headers) timing_headers(r, resp, total);
    if (rep->status == 200 && r->method_label) {
        char series[64];
        snprintf(series, sizeof series, "te_request_success{method=\"%s\"}", r->method_label);
        iv_metrics_inc(r->srv->metrics, series, 1);
    }
    enum MHD_Result ok = MHD_queue_response(r->conn, (unsigned)rep->status, resp);
    MHD_destroy_response(resp);
    r->state = IV_REQ_REPLIED;
    const int level = rep->status >= 500 ? IV_LOG_ERROR : rep->status >= 400 ? IV_LOG_WARN : IV_LOG_DEBUG;
    char path[512];
    iv_log_escape(r->path, path, sizeof path);
    iv_log(level, "%s %s %d %.2fms%s%s id=%s", r->method, path, rep->status, (double)total / 1e6,
           r->model ? " model=" : "", r->model ? r->model->served_name : "", r->request_id);
    if (r->srv->otlp) record_span(r, rep->status, total);
    return ok;
}

static int header_is_json(const char *ct)
{
    if (!ct) return 0;
    /* mime essence application/json or application/<anything>+json */
    while (*ct == ' ') ct++;
    const char *end = strchr(ct, ';');
    size_t n = end ? (size_t)(end - ct) : strlen(ct);
    while (n && ct[n - 1] == ' ') n--;
    if (n == 16 && !strncasecmp(ct, "application/json", 16)) return 1;
    return n > 17 && !strncasecmp(ct, "application/", 12) && !strncasecmp(ct + n - 5, "+json", 5);
}

/* Constant-time comparison of the Authorization header with "Bearer <key>". */
static int authorized(iv_req *r)
{
    const char *key = r->srv->o.api_key;
    if (!key || r->route->is_public) return 1;
    return iv_auth_bearer_ok(key, MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION));
}

/* A body is on its way: declared by Content-Length (up to DISCARD_CAP:
 * more is not worth reading) or chunked, and not held back for a 100
 * Continue. */
static int body_follows(struct MHD_Connection *conn)
{
    const char *expect = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
    if (expect && !strcasecmp(expect, "100-continue")) return 0;
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
        const unsigned long long n = strtoull(cl, NULL, 10);
        return n > 0 && n <= DISCARD_CAP;
    }
    return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING) != NULL;
}

static int early_checks(iv_req *r)
{
    iv_api_error e;
    if (!authorized(r)) {
        iv_api_errorf(&e, IV_API_UNAUTHORIZED, "Unauthorized");
        iv_req_fail(r, &e);
        return -1;
    }
    const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const unsigned long long declared = cl ? strtoull(cl, NULL, 10) : 0;
    if (declared > r->srv->o.payload_limit) {
        /* A client that waits for 100 Continue has sent nothing yet: answer
         * now. Otherwise drop the body as it arrives and answer at its end
         * (r->discarded counts what was dropped; the final callback
         * answers 413 when it is not 0). */
        const char *expect = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
        if ((expect && !strcasecmp(expect, "100-continue")) || declared > DISCARD_CAP) {
            iv_api_errorf(&e, IV_API_PAYLOAD, "payload of %s bytes exceeds the limit of %zu bytes", cl,
                          r->srv->o.payload_limit);
            iv_req_fail(r, &e);
            return -1;
        }
        r->discarded = 1;
        return 0;
    }
    if (r->route->json_body && r->flavour != IV_FLAVOUR_INFINITY &&
        !header_is_json(MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE))) {
        iv_api_errorf(&e, IV_API_CONTENT_TYPE, "missing JSON content type");
        iv_req_fail(r, &e);
        return -1;
    }
    return 0;
}

/* ---- message framing (RFC 9112 section 6) ----
 *
 * libmicrohttpd 0.9.75 takes the first of several Content-Length headers,
 * lets Transfer-Encoding win over Content-Length and keeps the connection,
 * and waits for a body it cannot delimit when the coding is not chunked.
 * A front proxy that frames the same bytes differently would let a client
 * smuggle a request past it, so these answer at once and close: two
 * Content-Length values that differ, Transfer-Encoding with Content-Length
 * or in an HTTP/1.0 request, or chunked applied other than once (400); a
 * coding other than chunked (501 Not Implemented, as RFC 9112 6.1 says for
 * a coding the server does not understand). A missing Host in HTTP/1.1 is
 * refused by MHD itself (MHD_OPTION_STRICT_FOR_CLIENT). */
typedef struct framing {
    int n_length, lengths_differ, n_te;
    const char *length;
    char te[256]; /* every Transfer-Encoding value, joined by commas */
} framing;

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    framing *f = cls;
    if (!value) value = "";
    if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
        if (f->n_length++ == 0) f->length = value;
        else if (strcmp(f->length, value)) f->lengths_differ = 1;
    } else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
        size_t n = strlen(f->te);
        snprintf(f->te + n, sizeof f->te - n, "%s%s", f->n_te++ ? "," : "", value);
    }
    return MHD_YES;
}

/* 0, or the status the framing earns (*why says what is wrong). */
static int framing_error(struct MHD_Connection *conn, const char *version, const char **why)
{
    framing f = {0};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, framing_header, &f);
    if (f.lengths_differ) return *why = "conflicting Content-Length headers", 400;
    if (!f.n_te) return 0;
    if (f.n_length) return *why = "both Transfer-Encoding and Content-Length", 400;
    if (strcmp(version, MHD_HTTP_VERSION_1_1)) return *why = "Transfer-Encoding in an HTTP/1.0 request", 400;
    if (strlen(f.te) >= sizeof f.te - 1) return *why = "Transfer-Encoding too long", 400;
    int chunked = 0, other = 0;
    for (char *save = NULL, *c = strtok_r(f.te, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
        while (*c == ' ' || *c == '\t') c++;
        size_t n = strcspn(c, " \t;");
        if (n == 7 && !strncasecmp(c, "chunked", 7)) chunked++;
        else if (n) other++;
    }
    if (other) return *why = "unsupported Transfer-Encoding (only chunked is)", 501;
    if (chunked != 1) return *why = "Transfer-Encoding must be chunked, once", 400;
    return 0;
}

/* --url-prefix: routes live under the prefix (r->path is the part after
 * it); /health and /ping also answer at the root, for probes that do not
 * know the prefix. */
static const iv_route *find_route(iv_server *srv, const char *method, const char *url, const char **path,
                                  int *status)
{
    const char *prefix = srv->o.url_prefix;
    size_t n = prefix ? strlen(prefix) : 0;
    if (n && !strncmp(url, prefix, n) && (url[n] == '/' || url[n] == 0)) {
        *path = url[n] ? url + n : "/";
        return iv_route_find(method, *path, status);
    }
    *path = url;
    if (n && strcmp(url, "/health") && strcmp(url, "/ping")) {
        *status = 404;
        return NULL;
    }
    return iv_route_find(method, url, status);
}

static enum MHD_Result dispatch(iv_req *r, int state, int closing);

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    iv_server *srv = cls;
    iv_req *r = *con_cls;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) return MHD_NO;
        atomic_fetch_add(&srv->live_requests, 1);
        pthread_mutex_init(&r->lock, NULL);
        r->srv = srv;
        r->conn = conn;
        r->method = method;
        r->path = url;
        r->t_start = iv_now_ns();
        iv_request_id(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "x-request-id"), r->request_id);
        if (srv->otlp) {
            struct timespec wall;
            clock_gettime(CLOCK_REALTIME, &wall);
            r->t_start_unix_ns = (int64_t)wall.tv_sec * 1000000000 + wall.tv_nsec;
            iv_trace_ctx_begin(&r->trace, MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "traceparent"));
        }
        r->job.client_fd = -1;
        iv_sb_init(&r->body);
        *con_cls = r;
        const char *why = NULL;
        int status = framing_error(conn, version, &why);
        if (status) {
            iv_strbuf msg;
            iv_sb_init(&msg);
            iv_sb_printf(&msg, "%s: %s", status == 400 ? "Bad Request" : "Not Implemented", why);
            iv_req_reply(r, status, "text/plain", &msg);
            return queue_reply_ex(r, 1);
        }
        r->route = find_route(srv, method, url, &r->path, &status);
        if (!r->route) iv_req_reply(r, status, NULL, NULL);
        else {
            r->flavour = r->route->flavour;
            early_checks(r);
        }
        /* 404, 405, 401, 415 and the asked-for 413 are known before the
         * body: a client that waits (Expect: 100-continue) or sends none is
         * answered now; one already sending reads its answer after its body
         * (dropped as it comes), or it would see a reset instead. */
        if (r->has_reply && !body_follows(conn)) return queue_reply(r);
        return MHD_YES;
    }
    if (r->state == IV_REQ_REPLIED) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size) {
        const size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (r->has_reply || r->discarded || r->body.len + n > srv->o.payload_limit) {
            r->discarded += n;
            return r->discarded > DISCARD_CAP ? MHD_NO : MHD_YES;
        }
        iv_sb_append(&r->body, upload_data, n);
        return r->body.oom ? MHD_NO : MHD_YES;
    }
    pthread_mutex_lock(&r->lock);
    const int state = r->state;
    pthread_mutex_unlock(&r->lock);
    if (state == IV_REQ_RUNNING) return MHD_YES; /* spurious: still suspended */
    if (state == IV_REQ_NEW) iv_read_deadline_received(conn);
    if (state == IV_REQ_NEW && r->has_reply) return queue_reply(r); /* an early error, its body now read */
    iv_http *h = srv->http;
    /* Counted before `closing` is read (both sequentially consistent): the
     * stopping thread either sees this dispatch or this dispatch sees it. */
    atomic_fetch_add(&h->dispatching, 1);
    enum MHD_Result res = dispatch(r, state, atomic_load(&h->closing));
    atomic_fetch_sub(&h->dispatching, 1);
    return res;
}

/* The final callback: runs the route (or its finish step) and replies,
 * unless the route suspended the connection for the engine. */
static enum MHD_Result dispatch(iv_req *r, int state, int closing)
{
    iv_server *srv = r->srv;
    if (state == IV_REQ_NEW && closing) {
        iv_api_error e;
        iv_api_errorf(&e, IV_API_UNHEALTHY, "the server is shutting down");
        iv_req_fail(r, &e);
    } else if (state == IV_REQ_NEW) {
        if (r->discarded) {
            iv_api_error e;
            iv_api_errorf(&e, IV_API_PAYLOAD, "payload exceeds the limit of %zu bytes", srv->o.payload_limit);
            iv_req_fail(r, &e);
        } else {
            r->route->handler(r);
        }
    } else if (state == IV_REQ_DONE && !r->has_reply) {
        /* Back from the engine (a finish step that submits again counts
         * again when it suspends). */
        atomic_fetch_sub(&srv->http->in_engine, 1);
        r->finish(r);
    }
    if (r->suspended_here) {
        /* The route handed the job to the batcher, which resumes the
         * connection when done (possibly already): MHD calls back then. */
        r->suspended_here = 0;
        return MHD_YES;
    }
    if (!r->has_reply) {
        /* Every route replies or suspends; never leave a client without an answer. */
        iv_api_error e;
        iv_api_errorf(&e, IV_API_INTERNAL, "internal error: %s %s produced no response", r->method, r->path);
        iv_req_fail(r, &e);
    }
    return queue_reply(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    iv_req *r = *con_cls;
    iv_read_deadline_restart(conn);
    if (!r) return;
    *con_cls = NULL;
    pthread_mutex_lock(&r->lock);
    int running = r->state == IV_REQ_RUNNING;
    if (running) r->orphaned = 1; /* the batcher still holds it and frees it when done */
    /* In the engine, or back from it with the client gone before the
     * finish step ran: its count ends here. */
    const int counted = running || (r->state == IV_REQ_DONE && !r->has_reply);
    pthread_mutex_unlock(&r->lock);
    if (counted) atomic_fetch_sub(&r->srv->http->in_engine, 1);
    if (!running) iv_req_free(r);
}

/* ---- listening ---- */

static int listen_tcp(iv_server *s, iv_err *err)
{
    char port[16];
    snprintf(port, sizeof port, "%d", s->o.port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res;
    int rc = getaddrinfo(s->o.hostname, port, &hints, &res);
    if (rc) return iv_errf(err, IV_E_INVALID, "cannot resolve --hostname %s: %s", s->o.hostname, gai_strerror(rc));
    int fd = -1;
    char why[256] = "no address";
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0) {
            struct sockaddr_storage ss;
            socklen_t sl = sizeof ss;
            char host[128] = "?";
            int bound_port = s->o.port;
            if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
                if (ss.ss_family == AF_INET) {
                    struct sockaddr_in *in = (struct sockaddr_in *)&ss;
                    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
                    bound_port = ntohs(in->sin_port);
                } else if (ss.ss_family == AF_INET6) {
                    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
                    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
                    bound_port = ntohs(in6->sin6_port);
                }
            }
            snprintf(s->listen_desc, sizeof s->listen_desc, ss.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", host,
                     bound_port);
            break;
        }
        snprintf(why, sizeof why, "%s", strerror(errno));
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) return iv_errf(err, IV_E_IO, "cannot listen on %s:%d: %s", s->o.hostname, s->o.port, why);
    return fd;
}

static int listen_unix(iv_server *s, iv_err *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(s->o.uds_path) >= sizeof sa.sun_path)
        return iv_errf(err, IV_E_INVALID, "--uds-path is longer than %zu bytes", sizeof sa.sun_path - 1);
    strcpy(sa.sun_path, s->o.uds_path);
    /* A stale socket from an earlier run would make bind fail; other files are left alone. */
    struct stat st;
    if (lstat(sa.sun_path, &st) == 0 && S_ISSOCK(st.st_mode)) unlink(sa.sun_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return iv_errf(err, IV_E_IO, "socket: %s", strerror(errno));
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) || listen(fd, SOMAXCONN)) {
        int e = errno;
        close(fd);
        return iv_errf(err, IV_E_IO, "cannot listen on unix socket %s: %s", s->o.uds_path, strerror(e));
    }
    snprintf(s->listen_desc, sizeof s->listen_desc, "unix:%s", s->o.uds_path);
    return fd;
}

int iv_http_start(iv_server *s, iv_err *err)
{
    iv_http *h = calloc(1, sizeof *h);
    if (!h) return iv_errf(err, IV_E_NOMEM, "out of memory");
    h->listen_fd = s->o.uds_path ? listen_unix(s, err) : listen_tcp(s, err);
    if (h->listen_fd < 0) {
        free(h);
        return -1;
    }
    h->test_hold = getenv("IV_TEST_HOLD_UNTIL_HANGUP") != NULL;
    if (h->test_hold)
        IV_WARN("IV_TEST_HOLD_UNTIL_HANGUP: requests marked X-Iv-Test-Hold wait for their client to hang up");
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (s->o.read_timeout_s > 0 && iv_read_deadline_start(&h->deadline, s->o.read_timeout_s, err)) {
        close(h->listen_fd);
        free(h);
        return -1;
    }
    s->http = h; /* before the first request can arrive: the callbacks use it */
    /* The connection timeout (silence) takes the same value as the read
     * deadline (a whole request): an idle keep-alive connection is closed
     * after it either way. */
    h->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET,
        h->listen_fd, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)s->o.http_threads, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, iv_read_deadline_notify, h->deadline,
        MHD_OPTION_CONNECTION_LIMIT, 16384u, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->o.read_timeout_s,
        MHD_OPTION_STRICT_FOR_CLIENT, 1, MHD_OPTION_END);
    if (!h->daemon) {
        iv_read_deadline_free(h->deadline);
        s->http = NULL;
        close(h->listen_fd);
        if (s->o.uds_path) unlink(s->o.uds_path);
        free(h);
        return iv_errf(err, IV_E_INTERNAL, "cannot start the HTTP daemon on %s", s->listen_desc);
    }
    return 0;
}

/* Stops accepting without MHD_quiesce_daemon. In libmicrohttpd 0.9.75
 * (Debian 12) that call races the daemon's own threads: it marks each
 * worker quiesced and then removes the listening socket from the worker's
 * epoll set itself, while a worker that already saw the mark may have
 * removed it first, and the second EPOLL_CTL_DEL fails with ENOENT, which
 * MHD_quiesce_daemon turns into MHD_PANIC ("Failed to remove listen FD from
 * epoll set", an abort under load). Instead the listening socket is closed
 * under MHD: dup3 puts a fresh, unbound datagram socket on its descriptor
 * number. That drops the listening socket's last reference, so the kernel
 * closes it: connections queued in its backlog are reset and new ones
 * refused at once (not left waiting until the drain ends), and epoll
 * forgets it in every worker's set without any thread calling epoll_ctl.
 * The number stays valid and MHD's: MHD_stop_daemon shuts it down and
 * closes it, once. An unbound datagram socket never becomes readable and
 * nothing can send to it, so a worker that adds the number back (after
 * being at its connection limit) never wakes for it. A Unix socket's path
 * is removed too. */
void iv_http_quiesce(iv_server *s)
{
    iv_http *h = s->http;
    if (!h || h->quiesced) return;
    h->quiesced = 1;
    int blank = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (blank < 0 || dup3(blank, h->listen_fd, O_CLOEXEC) < 0) {
        IV_WARN("cannot close the listening socket (%s); refusing connections by shutdown instead", strerror(errno));
        shutdown(h->listen_fd, SHUT_RDWR);
    }
    if (blank >= 0) close(blank);
    if (s->o.uds_path) unlink(s->o.uds_path);
}

void iv_http_finish_running(iv_server *s)
{
    iv_http *h = s->http;
    if (!h) return;
    atomic_store(&h->closing, 1);
    int logged = 0;
    while (atomic_load(&h->dispatching) || atomic_load(&h->in_engine)) {
        if (!logged) IV_INFO("waiting for %d requests running on the model", atomic_load(&h->in_engine));
        logged = 1;
        struct timespec ts = {0, 5 * 1000000};
        nanosleep(&ts, NULL);
    }
}

void iv_http_stop(iv_server *s)
{
    iv_http *h = s->http;
    if (!h) return;
    iv_read_deadline_stop(h->deadline);
    MHD_stop_daemon(h->daemon); /* closes h->listen_fd (see iv_http_quiesce) */
    iv_read_deadline_free(h->deadline); /* after the daemon's closing notifications */
    if (s->o.uds_path && !h->quiesced) unlink(s->o.uds_path);
    free(h);
    s->http = NULL;
}
