/* OpenTelemetry traces: one SERVER span per HTTP request, sent to an OTLP
 * collector over OTLP/HTTP with the JSON encoding (POST {endpoint}/v1/traces),
 * through libcurl, which the hub client already needs: no OpenTelemetry
 * library (Debian has none for C). A request that carries a W3C
 * `traceparent` header joins the caller's trace (its span becomes the
 * parent); others start a trace. Spans are batched on a thread of their own
 * (every second, or at 512), so a slow or absent collector never delays a
 * reply; past 8192 waiting spans new ones are dropped and counted. Stopping
 * sends what is left. */
#ifndef IV_SERVER_OTLP_H
#define IV_SERVER_OTLP_H

#include <stdint.h>

#include "base/err.h"

typedef struct iv_otlp iv_otlp;

/* W3C trace context (https://www.w3.org/TR/trace-context/), hex as sent. */
typedef struct iv_trace_ctx {
    char trace_id[33];
    char span_id[17];   /* this request's span */
    char parent_id[17]; /* "" when the request started the trace */
    int sampled;        /* the caller's sampled flag (1 when it started here) */
} iv_trace_ctx;

/* A trace context for a request: joins `traceparent` when it is valid
 * version-00 syntax with non-zero ids, else starts a new trace. */
void iv_trace_ctx_begin(iv_trace_ctx *t, const char *traceparent);

typedef struct iv_span {
    const iv_trace_ctx *ctx;
    const char *method, *route, *path; /* route: the matched pattern, or NULL */
    int status;
    int64_t start_unix_ns, end_unix_ns;
    const char *request_id, *model;    /* model may be NULL */
    int64_t tokens;                    /* input tokens computed (0 when none) */
} iv_span;

/* endpoint: http(s)://host[:port][/path]; with no path, /v1/traces is
 * appended (OTEL_EXPORTER_OTLP_ENDPOINT's rule). */
int iv_otlp_start(iv_otlp **out, const char *endpoint, const char *service_name, iv_err *err);
/* Queues a span (copied); never blocks on the network. */
void iv_otlp_record(iv_otlp *o, const iv_span *s);
/* Sends what is queued, stops the thread, frees (logging any spans dropped
 * or exports failed). NULL is fine. */
void iv_otlp_stop(iv_otlp *o);

#endif
