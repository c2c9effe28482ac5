/* Prefix folding and the prefix cache through the real server
 * (docs/prefix-folding.md): /rerank scores and /embed vectors of a server
 * with folding and a cache equal those of a server with --prefix-fold
 * false (max abs 1e-5), repeated requests answer the same, and /metrics
 * reports the te_prefix_* series with folded batches and cache hits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "server_harness.h"
#include "test.h"

#define FOLD_MAX_ABS 1e-5

/* A long shared query and short documents, as a rerank request. */
static void rerank_body(iv_strbuf *b)
{
    iv_sb_puts(b, "{\"query\":\"");
    for (int i = 0; i < 40; i++) iv_sb_printf(b, "instruction word %d about the query ", i);
    iv_sb_puts(b, "\",\"texts\":[");
    for (int i = 0; i < 8; i++) iv_sb_printf(b, "%s\"document %d talks of item %d\"", i ? "," : "", i, 7 * i + 3);
    iv_sb_puts(b, "],\"raw_scores\":true}");
}

/* Scores by index (n of them) from a /rerank reply. */
static int scores_by_index(const http_resp *r, double *out, int n)
{
    if (r->status != 200 || cJSON_GetArraySize(r->json) != n) return 0;
    for (int k = 0; k < n; k++) {
        const cJSON *x = cJSON_GetArrayItem(r->json, k);
        const int idx = jint(x, "index");
        if (idx < 0 || idx >= n) return 0;
        out[idx] = jnum(x, "score");
    }
    return 1;
}

/* The sum over replicas of a metric's samples for the one model. */
TEST(srv_prefix_fold_rerank)
{
    const char *dir = srv_fixture("qwen3_causal_rerank_seqcls");
    if (!dir) return;
    iv_strbuf body;
    iv_sb_init(&body);
    rerank_body(&body);
    srv plain, fold;
    const char *a_plain[] = {"--model-id", dir, "--prefix-fold", "false", NULL};
    const char *a_fold[] = {"--model-id", dir, "--prefix-cache-mb", "16", NULL};
    REQUIRE(srv_start(&plain, a_plain) == 0);
    if (srv_start(&fold, a_fold) != 0) {
        srv_stop(&plain);
        REQUIRE(0);
    }
    double want[8], got[8], again[8];
    http_resp r;
    int ok = http_post(&plain, "/rerank", body.data, &r) == 0 && scores_by_index(&r, want, 8);
    if (ok) http_resp_free(&r);
    CHECK(ok);
    for (int rep = 0; ok && rep < 3; rep++) {
        REQUIRE(http_post(&fold, "/rerank", body.data, &r) == 0);
        CHECK(scores_by_index(&r, rep ? again : got, 8));
        http_resp_free(&r);
        for (int i = 0; i < 8; i++) {
            CHECK_MSG(fabs(got[i] - want[i]) <= FOLD_MAX_ABS, "doc %d: folded %.9g, unfolded %.9g", i, got[i], want[i]);
            if (rep) CHECK_MSG(again[i] == got[i], "doc %d, request %d: %.9g, first %.9g", i, rep, again[i], got[i]);
        }
    }
    if (http_get(&fold, "/metrics", &r) == 0) {
        CHECK_EQ_INT(r.status, 200);
        CHECK_CONTAINS(r.body, "# TYPE te_prefix_cache_hits_total counter");
        CHECK_CONTAINS(r.body, "te_prefix_cache_capacity_bytes{model=");
        CHECK_MSG(srv_metric(r.body, "te_prefix_fold_batches_total") > 0, "no folded batch");
        CHECK_MSG(srv_metric(r.body, "te_prefix_cache_hits_total") > 0, "no cache hit");
        CHECK(srv_metric(r.body, "te_prefix_cache_capacity_bytes") == 16 << 20);
        http_resp_free(&r);
    }
    if (http_get(&plain, "/metrics", &r) == 0) {
        CHECK(srv_metric(r.body, "te_prefix_fold_batches_total") == 0);
        http_resp_free(&r);
    }
    iv_sb_free(&body);
    CHECK_EQ_INT(srv_stop(&plain), 0);
    CHECK_EQ_INT(srv_stop(&fold), 0);
}
