/* `serve --device` with several replicas: every replica is reported on /info
 * and /metrics, answers equal a single-replica server's, a replica made to
 * fail (IV_INJECT_REPLICA_FAULT) leaves service without losing a request,
 * and SIGTERM still drains cleanly. The fault hook picks the failing batch
 * by number, so nothing here depends on timing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server_harness.h"
#include "test.h"

/* One input per request: a batch is then one request, and the replica
 * that runs it follows from the dispatch rule alone. */
static const char *BODY = "{\"inputs\":\"a replica answers\"}";

static cJSON *replica(const cJSON *info, int i)
{
    return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(info, "replicas"), i);
}

TEST(srv_replicas_report_balance_and_fail_over)
{
    const char *dir = srv_fixture("bert");
    if (!dir) return;
    /* Reference answer from a one-replica server. */
    srv one;
    const char *one_args[] = {"--model-id", dir, NULL};
    REQUIRE(srv_start(&one, one_args) == 0);
    http_resp ref;
    REQUIRE(http_post(&one, "/embed", BODY, &ref) == 0);
    CHECK_EQ_INT((int)ref.status, 200);
    CHECK_EQ_INT(srv_stop(&one), 0);

    /* Two CPU replicas; the second one's second batch fails. */
    setenv("IV_INJECT_REPLICA_FAULT", "1:2", 1);
    srv s;
    const char *args[] = {"--model-id", dir, "--device", "cpu,cpu", NULL};
    const int started = srv_start(&s, args);
    unsetenv("IV_INJECT_REPLICA_FAULT");
    REQUIRE(started == 0);
    http_resp info;
    REQUIRE(http_get(&s, "/info", &info) == 0);
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(info.json, "replicas")), 2);
    CHECK_STR(jstr(replica(info.json, 1), "device"), "cpu");
    CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(replica(info.json, 1), "in_service")));
    http_resp_free(&info);

    /* Sequential requests: replica 0, replica 1, replica 0, then replica
     * 1's second batch fails and runs on replica 0; after that only replica
     * 0 serves. Every answer equals the reference. */
    for (int i = 0; i < 8; i++) {
        http_resp r;
        REQUIRE(http_post(&s, "/embed", BODY, &r) == 0);
        CHECK_EQ_INT((int)r.status, 200);
        int n_ref = 0, n = 0;
        float *a = json_floats(cJSON_GetArrayItem(ref.json, 0), &n_ref);
        float *b = json_floats(cJSON_GetArrayItem(r.json, 0), &n);
        CHECK_EQ_INT(n, n_ref);
        if (a && b && n == n_ref) CHECK(iv_test_max_abs_diff(a, b, n) <= 1e-5);
        free(a);
        free(b);
        http_resp_free(&r);
    }
    REQUIRE(http_get(&s, "/info", &info) == 0);
    const cJSON *r0 = replica(info.json, 0), *r1 = replica(info.json, 1);
    CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r0, "in_service")));
    CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r1, "in_service")));
    CHECK_EQ_INT(jint(r1, "failures"), 1);
    CHECK_EQ_INT(jint(r1, "batches"), 1);
    CHECK_EQ_INT(jint(r0, "batches"), 7);
    http_resp_free(&info);

    http_resp m;
    REQUIRE(http_get(&s, "/metrics", &m) == 0);
    char series[256];
    snprintf(series, sizeof series, "te_replica_in_service{model=\"%s\",replica=\"1\",device=\"cpu\"}", dir);
    CHECK(metric_value(m.body, series) == 0);
    snprintf(series, sizeof series, "te_replica_batches_total{model=\"%s\",replica=\"0\",device=\"cpu\"}", dir);
    CHECK(metric_value(m.body, series) == 7);
    http_resp_free(&m);
    /* The server stays healthy: replica 0 serves. */
    http_resp h;
    REQUIRE(http_get(&s, "/health", &h) == 0);
    CHECK_EQ_INT((int)h.status, 200);
    http_resp_free(&h);
    char *log = srv_log(&s);
    CHECK_CONTAINS(log, "replica 1 (cpu) taken out of service");
    CHECK_CONTAINS(log, "replica 2/2 on cpu loaded");
    free(log);
    CHECK_EQ_INT(srv_stop(&s), 0);
    http_resp_free(&ref);
}

TEST(srv_replicas_bad_device_lists)
{
    const char *dir = srv_fixture("bert");
    if (!dir) return;
    const char *lists[] = {"cpu,", "3", "cpu,nowhere"};
    const char *want[] = {"empty entry", "needs a cuda entry", "replica 1 on nowhere"};
    for (int i = 0; i < 3; i++) {
        srv s;
        const char *args[] = {"--model-id", dir, "--device", lists[i], NULL};
        if (srv_start_quiet(&s, args) == 0) {
            CHECK_MSG(0, "--device %s started", lists[i]);
            srv_stop(&s);
            continue;
        }
        char *log = srv_log(&s);
        CHECK_CONTAINS(log, want[i]);
        free(log);
        srv_stop(&s);
    }
}
