/* sentence-transformers 6.3 behaviour over HTTP (fixtures of
 * tools/fixtures/synthetic_st6.py and synthetic.py): texts sent to /embed
 * are truncated at the limit ST resolves, which /info reports with its
 * source; prompt_name with include_prompt=false leaves out the prompt tokens
 * ST leaves out; several pooling modes concatenate and /info names them.
 * Vectors compared with encode() as the golden tests compare (cosine >=
 * 0.99999, max abs error <= 1e-4). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/strbuf.h"
#include "golden/golden_util.h"
#include "server_harness.h"
#include "test.h"

#define MIN_COS 0.99999
#define MAX_ABS 1e-4

/* {"inputs":["text 0","text 1",...]} plus extra fields (the texts need no escaping). */
static char *texts_request(const golden_case *g, const char *extra)
{
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_puts(&b, "{\"inputs\":[");
    const cJSON *inputs = cJSON_GetObjectItemCaseSensitive(g->json, "inputs");
    for (int i = 0; i < g->n; i++)
        iv_sb_printf(&b, "%s\"%s\"", i ? "," : "", iv_json_str(cJSON_GetArrayItem(inputs, i), "text", ""));
    iv_sb_printf(&b, "]%s%s}", extra ? "," : "", extra ? extra : "");
    return b.data;
}

static void check_pooled(const char *what, const cJSON *arr, golden_case *g)
{
    CHECK_EQ_INT(cJSON_GetArraySize(arr), g->n);
    for (int i = 0; i < g->n && i < cJSON_GetArraySize(arr); i++) {
        int n;
        float *got = json_floats(cJSON_GetArrayItem(arr, i), &n);
        const iv_tensor *want = golden_expected(g, "pooled", i);
        REQUIRE(want);
        CHECK_EQ_INT(n, iv_tensor_numel(want));
        if (n == iv_tensor_numel(want)) {
            char label[160];
            snprintf(label, sizeof label, "%s pooled.%d", what, i);
            golden_compare(label, got, want->data, 1, n, MIN_COS, MAX_ABS);
        }
        free(got);
    }
}

/* /info's limit and its source, then /embed of the fixture's texts (with
 * extra request fields) against encode(); normalize false: these fixtures
 * have no Normalize module. */
static void check_text_fixture(const char *name, const char *extra)
{
    const char *dir = srv_fixture(name);
    if (!dir) return;
    golden_case g;
    REQUIRE(golden_load(&g, dir) == 0);
    srv s;
    const char *args[] = {"--model-id", dir, NULL};
    REQUIRE(srv_start(&s, args) == 0);
    http_resp r;
    REQUIRE(http_get(&s, "/info", &r) == 0);
    CHECK_EQ_INT(jint(r.json, "max_input_length"), (int)iv_json_int(g.json, "max_input_length", -1));
    CHECK_STR(jstr(r.json, "max_input_length_source"), iv_json_str(g.json, "max_input_length_source", "?"));
    http_resp_free(&r);
    char *req = texts_request(&g, extra);
    REQUIRE(http_post(&s, "/embed", req, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    check_pooled(name, r.json, &g);
    http_resp_free(&r);
    free(req);
    CHECK_EQ_INT(srv_stop(&s), 0);
    golden_free(&g);
}

TEST(srv_st6_length_limit_and_source)
{
    check_text_fixture("bert_st6_max_seq_length", "\"normalize\":false");
    check_text_fixture("bert_st5_max_seq_length", "\"normalize\":false");
    check_text_fixture("bert_st6_max_position_cap", "\"normalize\":false");
}

TEST(srv_st6_prompt_excluded_from_pooling)
{
    check_text_fixture("bert_st6_prompt_sep", "\"normalize\":false,\"prompt_name\":\"query\"");
    check_text_fixture("qwen3_st6_prompt_no_special", "\"normalize\":false,\"prompt_name\":\"query\"");
}

TEST(srv_pooling_modes_concatenated)
{
    const char *dir = srv_fixture("bert_cls_mean");
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, NULL};
    REQUIRE(srv_start(&s, args) == 0);
    http_resp r;
    REQUIRE(http_get(&s, "/info", &r) == 0);
    CHECK_STR(jstr(cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "model_type"), "embedding"), "pooling"),
              "cls+mean");
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/embed", "{\"inputs\":[[101,140,150,102]]}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetArrayItem(r.json, 0)), 64);
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);
}
