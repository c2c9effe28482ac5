/* OpenTelemetry traces (--otlp-endpoint, src/server/otlp.c) against a
 * collector in the test process: one SERVER span per request, joined to the
 * caller's W3C traceparent, the attributes and status the semantic
 * conventions name, unsampled requests left out, and a collector that is
 * down or wrong never costing a reply. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_collector.h"
#include "server_harness.h"
#include "test.h"

#define TRACE "4bf92f3577b34da6a3ce929d0e0e4736"
#define PARENT "00f067aa0ba902b7"

static const cJSON *attr(const cJSON *span, const char *key)
{
    const cJSON *a;
    cJSON_ArrayForEach(a, cJSON_GetObjectItem(span, "attributes"))
        if (!strcmp(jstr(a, "key"), key)) return cJSON_GetObjectItem(a, "value");
    return NULL;
}

static const cJSON *span_with_id(const cJSON *spans, const char *request_id)
{
    const cJSON *s;
    cJSON_ArrayForEach(s, spans)
        if (!strcmp(jstr(attr(s, "http.request.header.x-request-id"), "stringValue"), request_id)) return s;
    return NULL;
}

static int lower_hex(const char *s, size_t n)
{
    if (strlen(s) != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

static void post_with(const srv *s, const char *body, const char *request_id, const char *traceparent,
                      long want_status)
{
    char id[160], tp[160];
    snprintf(id, sizeof id, "x-request-id: %s", request_id);
    snprintf(tp, sizeof tp, "traceparent: %s", traceparent ? traceparent : "");
    const char *headers[] = {"Content-Type: application/json", id, traceparent ? tp : NULL, NULL};
    http_resp r;
    if (http_do(s, "POST", "/embed", body, strlen(body), headers, &r) == 0) {
        CHECK_EQ_INT(r.status, want_status);
        http_resp_free(&r);
    }
}

TEST(srv_otlp_traces)
{
    const char *model = srv_fixture("bert");
    if (!model) return;
    fake_collector *c = fake_collector_start();
    REQUIRE(c);
    srv s;
    const char *args[] = {"--model-id", model, "--otlp-endpoint", c->endpoint, "--otlp-service-name", "iv-test", NULL};
    if (srv_start(&s, args) == 0) {
        post_with(&s, "{\"inputs\":\"hello world\"}", "trace-joined", "00-" TRACE "-" PARENT "-01", 200);
        post_with(&s, "{\"inputs\":", "trace-bad-json", NULL, 400);
        post_with(&s, "{\"inputs\":\"not sampled\"}", "trace-unsampled", "00-" TRACE "-" PARENT "-00", 200);
        post_with(&s, "{\"inputs\":\"a new trace\"}", "trace-malformed", "00-" TRACE "-0000000000000000-01", 200);
        CHECK_EQ_INT(srv_stop(&s), 0); /* stopping sends what is queued */
    }
    cJSON *spans = fake_collector_spans(c);
    CHECK(c->n_posts >= 1);
    CHECK(!strcmp(c->paths[0], "/v1/traces"));
    const cJSON *res = cJSON_GetArrayItem(cJSON_GetObjectItem(c->posts[0], "resourceSpans"), 0);
    const cJSON *svc = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(res, "resource"), "attributes"), 0);
    CHECK(!strcmp(jstr(svc, "key"), "service.name"));
    CHECK(!strcmp(jstr(cJSON_GetObjectItem(svc, "value"), "stringValue"), "iv-test"));

    const cJSON *joined = span_with_id(spans, "trace-joined");
    REQUIRE(joined);
    CHECK(!strcmp(jstr(joined, "traceId"), TRACE));
    CHECK(!strcmp(jstr(joined, "parentSpanId"), PARENT));
    CHECK(lower_hex(jstr(joined, "spanId"), 16) && strcmp(jstr(joined, "spanId"), PARENT));
    CHECK(!strcmp(jstr(joined, "name"), "POST /embed"));
    CHECK_EQ_INT(jint(joined, "kind"), 2);
    CHECK(!strcmp(jstr(attr(joined, "http.response.status_code"), "intValue"), "200"));
    CHECK(!strcmp(jstr(attr(joined, "http.route"), "stringValue"), "/embed"));
    CHECK(atoll(jstr(attr(joined, "gen_ai.usage.input_tokens"), "intValue")) >= 3);
    CHECK(attr(joined, "gen_ai.request.model") != NULL);
    const long long t0 = atoll(jstr(joined, "startTimeUnixNano")), t1 = atoll(jstr(joined, "endTimeUnixNano"));
    CHECK(t0 > 1700000000LL * 1000000000LL && t1 >= t0);
    CHECK_EQ_INT(jint(cJSON_GetObjectItem(joined, "status"), "code"), 0);

    const cJSON *bad = span_with_id(spans, "trace-bad-json");
    REQUIRE(bad);
    CHECK(lower_hex(jstr(bad, "traceId"), 32) && strcmp(jstr(bad, "traceId"), TRACE));
    CHECK(cJSON_GetObjectItem(bad, "parentSpanId") == NULL);
    CHECK(!strcmp(jstr(attr(bad, "http.response.status_code"), "intValue"), "400"));
    CHECK_EQ_INT(jint(cJSON_GetObjectItem(bad, "status"), "code"), 0); /* 4xx is the client's error */

    CHECK(span_with_id(spans, "trace-unsampled") == NULL);
    const cJSON *fresh = span_with_id(spans, "trace-malformed"); /* a zero parent id is invalid: new trace */
    REQUIRE(fresh);
    CHECK(strcmp(jstr(fresh, "traceId"), TRACE) && cJSON_GetObjectItem(fresh, "parentSpanId") == NULL);
    cJSON_Delete(spans);
    fake_collector_free(c);
}

TEST(srv_otlp_collector_failing)
{
    const char *model = srv_fixture("bert");
    if (!model) return;
    fake_collector *c = fake_collector_start();
    REQUIRE(c);
    c->fail_status = 503;
    srv s;
    const char *args[] = {"--model-id", model, "--otlp-endpoint", c->endpoint, NULL};
    if (srv_start(&s, args) == 0) {
        for (int i = 0; i < 3; i++) post_with(&s, "{\"inputs\":\"still answered\"}", "down", NULL, 200);
        CHECK(srv_log_shows(&s, "OTLP export of"));
        CHECK_EQ_INT(srv_stop(&s), 0);
    }
    CHECK(c->n_posts >= 1);
    fake_collector_free(c);

    /* Not an http(s) URL: refused at start, with the flag named. */
    const char *bad[] = {"--model-id", model, "--otlp-endpoint", "localhost:4318", NULL};
    srv b;
    if (srv_start_quiet(&b, bad) == 0) {
        CHECK_MSG(0, "the server started with --otlp-endpoint localhost:4318");
        srv_stop(&b);
    } else {
        char *log = srv_log(&b);
        CHECK_CONTAINS(log, "--otlp-endpoint must be an http:// or https:// URL");
        free(log);
        srv_stop(&b);
    }
}
