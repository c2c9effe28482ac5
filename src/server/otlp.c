/* OTLP/HTTP JSON trace export (see otlp.h). Each span is written as its
 * JSON object when recorded (on the HTTP thread, a few hundred bytes); the
 * exporter thread joins what is queued into one ExportTraceServiceRequest. */
#include "server/otlp.h"

#include <ctype.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/strbuf.h"
#include "server/request_id.h"

#define QUEUE_MAX 8192
#define BATCH_MAX 512

struct iv_otlp {
    char *url, *service;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    char **queue;
    int n, stopping;
    _Atomic uint64_t dropped, failed;
};

static int all_hex(const char *s, int n)
{
    int nonzero = 0;
    for (int i = 0; i < n; i++) {
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i])) return 0;
        nonzero |= s[i] != '0';
    }
    return nonzero;
}

void iv_trace_ctx_begin(iv_trace_ctx *t, const char *tp)
{
    memset(t, 0, sizeof *t);
    iv_random_hex(t->span_id, 8);
    /* "00-" 32 hex "-" 16 hex "-" 2 hex: the only version-00 form. */
    if (tp && strlen(tp) == 55 && !strncmp(tp, "00-", 3) && tp[35] == '-' && tp[52] == '-' &&
        all_hex(tp + 3, 32) && all_hex(tp + 36, 16) && isxdigit((unsigned char)tp[53]) &&
        isxdigit((unsigned char)tp[54])) {
        memcpy(t->trace_id, tp + 3, 32);
        memcpy(t->parent_id, tp + 36, 16);
        t->sampled = (int)(strtol(tp + 53, NULL, 16) & 1);
        return;
    }
    iv_random_hex(t->trace_id, 16);
    t->sampled = 1;
}

static void attr_str(iv_strbuf *b, const char *key, const char *v, int *first)
{
    iv_sb_printf(b, "%s{\"key\":\"%s\",\"value\":{\"stringValue\":", *first ? "" : ",", key);
    iv_sb_json_string(b, v, strlen(v));
    iv_sb_puts(b, "}}");
    *first = 0;
}

static void attr_int(iv_strbuf *b, const char *key, int64_t v, int *first)
{
    iv_sb_printf(b, "%s{\"key\":\"%s\",\"value\":{\"intValue\":\"%lld\"}}", *first ? "" : ",", key, (long long)v);
    *first = 0;
}

static char *span_json(const iv_span *s)
{
    iv_strbuf b;
    iv_sb_init(&b);
    char name[160];
    snprintf(name, sizeof name, "%s %s", s->method, s->route ? s->route : s->path);
    /* kind 2: SPAN_KIND_SERVER. Status: ERROR for 5xx only, as the HTTP
     * semantic conventions say for server spans (4xx is the client's). */
    iv_sb_printf(&b, "{\"traceId\":\"%s\",\"spanId\":\"%s\",", s->ctx->trace_id, s->ctx->span_id);
    if (s->ctx->parent_id[0]) iv_sb_printf(&b, "\"parentSpanId\":\"%s\",", s->ctx->parent_id);
    iv_sb_puts(&b, "\"name\":");
    iv_sb_json_string(&b, name, strlen(name));
    iv_sb_printf(&b, ",\"kind\":2,\"startTimeUnixNano\":\"%lld\",\"endTimeUnixNano\":\"%lld\",\"attributes\":[",
                 (long long)s->start_unix_ns, (long long)s->end_unix_ns);
    int first = 1;
    attr_str(&b, "http.request.method", s->method, &first);
    attr_str(&b, "url.path", s->path, &first);
    if (s->route) attr_str(&b, "http.route", s->route, &first);
    attr_int(&b, "http.response.status_code", s->status, &first);
    attr_str(&b, "http.request.header.x-request-id", s->request_id, &first);
    if (s->model) attr_str(&b, "gen_ai.request.model", s->model, &first);
    if (s->tokens) attr_int(&b, "gen_ai.usage.input_tokens", s->tokens, &first);
    iv_sb_printf(&b, "],\"status\":{\"code\":%d}}", s->status >= 500 ? 2 : 0);
    return b.data;
}

void iv_otlp_record(iv_otlp *o, const iv_span *s)
{
    if (!o || !s->ctx->sampled) return;
    char *json = span_json(s);
    if (!json) return;
    pthread_mutex_lock(&o->mu);
    if (o->n == QUEUE_MAX) {
        atomic_fetch_add(&o->dropped, 1);
        free(json);
    } else {
        o->queue[o->n++] = json;
        if (o->n >= BATCH_MAX) pthread_cond_signal(&o->wake);
    }
    pthread_mutex_unlock(&o->mu);
}

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return size * n;
}

static void post(iv_otlp *o, char **spans, int n)
{
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_puts(&b, "{\"resourceSpans\":[{\"resource\":{\"attributes\":[");
    int first = 1;
    attr_str(&b, "service.name", o->service, &first);
    iv_sb_puts(&b, "]},\"scopeSpans\":[{\"scope\":{\"name\":\"infinity_v3\"},\"spans\":[");
    for (int i = 0; i < n; i++) {
        if (i) iv_sb_puts(&b, ",");
        iv_sb_append(&b, spans[i], strlen(spans[i]));
        free(spans[i]);
    }
    iv_sb_puts(&b, "]}]}]}");
    CURL *c = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    long status = 0;
    CURLcode rc = CURLE_FAILED_INIT;
    if (c && h && b.data) {
        curl_easy_setopt(c, CURLOPT_URL, o->url);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, b.data);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)b.len);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        rc = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    }
    if (rc != CURLE_OK || status < 200 || status >= 300) {
        /* Warn on the first failure and every 100th after: a collector that
         * is down must not flood the log. */
        if (atomic_fetch_add(&o->failed, 1) % 100 == 0)
            IV_WARN("OTLP export of %d spans to %s failed: %s", n, o->url,
                    rc != CURLE_OK ? curl_easy_strerror(rc) : "non-2xx answer");
    }
    curl_slist_free_all(h);
    if (c) curl_easy_cleanup(c);
    iv_sb_free(&b);
}

static void *exporter(void *arg)
{
    iv_otlp *o = arg;
    char **batch = malloc(BATCH_MAX * sizeof *batch);
    pthread_mutex_lock(&o->mu);
    for (;;) {
        if (!o->n && !o->stopping) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&o->wake, &o->mu, &ts);
        }
        if (!o->n && o->stopping) break;
        const int n = o->n < BATCH_MAX ? o->n : BATCH_MAX;
        if (!n) continue;
        if (!batch) { /* no memory for a batch: drop what waits */
            for (int i = 0; i < o->n; i++) free(o->queue[i]);
            atomic_fetch_add(&o->dropped, (uint64_t)o->n);
            o->n = 0;
            continue;
        }
        memcpy(batch, o->queue, (size_t)n * sizeof *batch);
        memmove(o->queue, o->queue + n, (size_t)(o->n - n) * sizeof *o->queue);
        o->n -= n;
        pthread_mutex_unlock(&o->mu);
        post(o, batch, n);
        pthread_mutex_lock(&o->mu);
    }
    pthread_mutex_unlock(&o->mu);
    free(batch);
    return NULL;
}

static void free_exporter(iv_otlp *o)
{
    free(o->queue);
    free(o->url);
    free(o->service);
    free(o);
}

int iv_otlp_start(iv_otlp **out, const char *endpoint, const char *service_name, iv_err *err)
{
    *out = NULL;
    const char *scheme_end = endpoint ? strstr(endpoint, "://") : NULL;
    if (!scheme_end || (strncmp(endpoint, "http://", 7) && strncmp(endpoint, "https://", 8)) || !scheme_end[3])
        return iv_errf(err, IV_E_INVALID,
                       "--otlp-endpoint must be an http:// or https:// URL of an OTLP/HTTP collector "
                       "(e.g. http://localhost:4318), got \"%s\"",
                       endpoint ? endpoint : "");
    iv_otlp *o = calloc(1, sizeof *o);
    if (!o) return iv_errf(err, IV_E_NOMEM, "out of memory");
    const int has_path = strchr(scheme_end + 3, '/') != NULL;
    const size_t n = strlen(endpoint);
    o->url = malloc(n + 16);
    o->service = strdup(service_name && *service_name ? service_name : "infinity_v3");
    o->queue = malloc(QUEUE_MAX * sizeof *o->queue);
    if (!o->url || !o->service || !o->queue) {
        free_exporter(o);
        return iv_errf(err, IV_E_NOMEM, "out of memory");
    }
    memcpy(o->url, endpoint, n + 1);
    if (!has_path) strcat(o->url, "/v1/traces");
    pthread_mutex_init(&o->mu, NULL);
    pthread_cond_init(&o->wake, NULL);
    if (pthread_create(&o->thread, NULL, exporter, o)) {
        pthread_mutex_destroy(&o->mu);
        pthread_cond_destroy(&o->wake);
        free_exporter(o);
        return iv_errf(err, IV_E_IO, "cannot start the OTLP exporter thread");
    }
    IV_INFO("OpenTelemetry: spans to %s (OTLP/HTTP JSON), service.name %s", o->url, o->service);
    *out = o;
    return 0;
}

void iv_otlp_stop(iv_otlp *o)
{
    if (!o) return;
    pthread_mutex_lock(&o->mu);
    o->stopping = 1;
    pthread_cond_signal(&o->wake);
    pthread_mutex_unlock(&o->mu);
    pthread_join(o->thread, NULL);
    if (atomic_load(&o->dropped) || atomic_load(&o->failed))
        IV_WARN("OTLP: %llu spans dropped (queue full), %llu exports failed",
                (unsigned long long)atomic_load(&o->dropped), (unsigned long long)atomic_load(&o->failed));
    pthread_mutex_destroy(&o->mu);
    pthread_cond_destroy(&o->wake);
    free_exporter(o);
}
