/* /rerank of the real binary with NVIDIA's Mistral3ForSequenceClassification
 * reranker (tests/fixtures/models/mistral3_rerank*): the query and texts go in
 * as text, so the tokenizer's pair encoding, the bidirectional backbone, the
 * masked mean and the temperature-scaled score all stand between the request
 * and cases.json "server_rerank" (the reference's raw logits for the same
 * pairs, tools/fixtures/synthetic_mistral3_rerank.py). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/json.h"
#include "base/strbuf.h"
#include "server_harness.h"
#include "test.h"

#define MAX_ABS 1e-4

static void check_rerank(const char *fixture)
{
    const char *dir = srv_fixture(fixture);
    if (!dir) return;
    char path[4096 + 32];
    snprintf(path, sizeof path, "%s/cases.json", dir);
    char *text = NULL;
    size_t len = 0;
    cJSON *doc = NULL;
    iv_err err = {0};
    REQUIRE(iv_file_read_all(path, 1 << 20, &text, &len, &err) == 0);
    REQUIRE(iv_json_parse(text, len, path, &doc, &err) == 0);
    free(text);
    const cJSON *want = iv_json_get(doc, "server_rerank");
    const cJSON *texts = iv_json_get(want, "texts"), *scores = iv_json_get(want, "raw_scores");
    const int n = cJSON_GetArraySize(texts);
    REQUIRE(n > 1 && cJSON_GetArraySize(scores) == n);

    iv_strbuf b;
    iv_sb_init(&b);
    char *q = cJSON_PrintUnformatted(iv_json_get(want, "query")), *t = cJSON_PrintUnformatted(texts);
    iv_sb_printf(&b, "{\"query\":%s,\"texts\":%s,\"raw_scores\":true}", q, t);
    free(q);
    free(t);

    srv s;
    const char *args[] = {"--model-id", dir, NULL};
    if (srv_start(&s, args) == 0) {
        http_resp r;
        if (http_post(&s, "/rerank", b.data, &r) == 0) {
            CHECK_EQ_INT(r.status, 200);
            CHECK_EQ_INT(cJSON_GetArraySize(r.json), n);
            double prev = INFINITY;
            for (int k = 0; k < cJSON_GetArraySize(r.json); k++) {
                const cJSON *x = cJSON_GetArrayItem(r.json, k);
                const int idx = jint(x, "index");
                const double got = jnum(x, "score");
                CHECK(got <= prev); /* best first */
                prev = got;
                REQUIRE(idx >= 0 && idx < n);
                const double ref = cJSON_GetArrayItem(scores, idx)->valuedouble;
                CHECK_MSG(fabs(got - ref) <= MAX_ABS, "%s text %d: raw score %.7f, reference %.7f", fixture, idx,
                          got, ref);
            }
            http_resp_free(&r);
        }
        CHECK_EQ_INT(srv_stop(&s), 0);
    }
    iv_sb_free(&b);
    cJSON_Delete(doc);
}

TEST(srv_rerank_mistral3_reranker)
{
    check_rerank("mistral3_rerank");
    check_rerank("mistral3_rerank_mistral");
}
