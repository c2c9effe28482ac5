/* POST /token_classify, and /predict and POST / on a token-classification
 * model, over HTTP: the entities of every aggregation strategy equal
 * transformers' pipeline output (tests/fixtures/models/bert_tokcls/
 * token_pipeline.json), the Inference API's "parameters" form works, and
 * bad requests get clear errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "server_harness.h"
#include "test.h"

/* Entities of one input against the pipeline's (labels, words, offsets exact; scores 1e-4). */
static void check_entities(const char *what, const cJSON *got, const cJSON *want, int grouped)
{
    if (cJSON_GetArraySize(got) != cJSON_GetArraySize(want)) {
        char *g = cJSON_PrintUnformatted(got), *w = cJSON_PrintUnformatted(want);
        iv_test_fail(__FILE__, __LINE__, "%s: got %s\n  want %s", what, g, w);
        free(g);
        free(w);
        return;
    }
    const char *key = grouped ? "entity_group" : "entity";
    for (int k = 0; k < cJSON_GetArraySize(want); k++) {
        const cJSON *g = cJSON_GetArrayItem(got, k), *w = cJSON_GetArrayItem(want, k);
        CHECK_MSG(!strcmp(jstr(g, key), jstr(w, key)), "%s #%d: %s vs %s", what, k, jstr(g, key), jstr(w, key));
        CHECK_MSG(!strcmp(jstr(g, "word"), jstr(w, "word")), "%s #%d: word %s vs %s", what, k, jstr(g, "word"),
                  jstr(w, "word"));
        CHECK_MSG(jint(g, "start") == jint(w, "start") && jint(g, "end") == jint(w, "end"), "%s #%d: offsets", what,
                  k);
        CHECK_MSG(fabs(jnum(g, "score") - jnum(w, "score")) <= 1e-4, "%s #%d: score %g vs %g", what, k,
                  jnum(g, "score"), jnum(w, "score"));
        CHECK_MSG(grouped ? !cJSON_HasObjectItem(g, "index") : jint(g, "index") == jint(w, "index"),
                  "%s #%d: index", what, k);
    }
}

static char *texts_json(const cJSON *texts)
{
    return cJSON_PrintUnformatted(texts);
}

TEST(srv_token_classify_matches_pipeline)
{
    const char *dir = srv_fixture("bert_tokcls");
    if (!dir) return;
    char path[4200];
    snprintf(path, sizeof path, "%s/token_pipeline.json", dir);
    cJSON *doc = NULL;
    iv_err err = {0};
    REQUIRE(iv_json_load_file(path, 1 << 24, &doc, &err) == 0);
    const cJSON *texts = cJSON_GetObjectItemCaseSensitive(doc, "texts");
    srv s;
    const char *args[] = {"--model-id", dir, NULL};
    REQUIRE(srv_start(&s, args) == 0);

    /* Every case as one batch of the non-empty texts (TEI answers 400 to an empty text). */
    cJSON *nonempty = cJSON_CreateArray();
    int idx[64], n = 0;
    for (int i = 0; i < cJSON_GetArraySize(texts) && n < 64; i++)
        if (*cJSON_GetArrayItem(texts, i)->valuestring) {
            cJSON_AddItemToArray(nonempty, cJSON_CreateString(cJSON_GetArrayItem(texts, i)->valuestring));
            idx[n++] = i;
        }
    char *inputs = texts_json(nonempty);
    const cJSON *c;
    int n_cases = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(doc, "cases"))
    {
        const char *strategy = jstr(c, "aggregation_strategy");
        const int raw = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "raw_scores"));
        const int no_ignore = cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(c, "ignore_labels"));
        char body[8192];
        /* Alternate the top-level and the Inference API's "parameters" form. */
        if (n_cases % 2)
            snprintf(body, sizeof body,
                     "{\"inputs\":%s,\"parameters\":{\"aggregation_strategy\":\"%s\",\"raw_scores\":%s%s}}", inputs,
                     strategy, raw ? "true" : "false", no_ignore ? ",\"ignore_labels\":[]" : "");
        else
            snprintf(body, sizeof body, "{\"inputs\":%s,\"aggregation_strategy\":\"%s\",\"raw_scores\":%s%s}",
                     inputs, strategy, raw ? "true" : "false", no_ignore ? ",\"ignore_labels\":[]" : "");
        http_resp r;
        REQUIRE(http_post(&s, n_cases % 3 == 1 ? "/predict" : "/token_classify", body, &r) == 0);
        CHECK_EQ_INT(r.status, 200);
        const cJSON *outs = cJSON_GetObjectItemCaseSensitive(c, "outputs");
        for (int k = 0; r.json && k < n; k++) {
            char what[128];
            snprintf(what, sizeof what, "%s%s%s text %d", strategy, raw ? " raw" : "", no_ignore ? " ignore=[]" : "",
                     idx[k]);
            check_entities(what, cJSON_GetArrayItem(r.json, k), cJSON_GetArrayItem(outs, idx[k]),
                           strcmp(strategy, "none") != 0);
        }
        http_resp_free(&r);
        n_cases++;
    }
    printf("    %d cases x %d texts over HTTP\n", n_cases, n);
    CHECK(n_cases == 20);

    /* A single text gives one list; POST / serves the same. */
    http_resp one, root;
    REQUIRE(http_post(&s, "/predict", "{\"inputs\":\"Hello world, this is Jack from Zürich!\"}", &one) == 0);
    CHECK_EQ_INT(one.status, 200);
    check_entities("single", one.json,
                   cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
                                          cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "cases"), 0),
                                          "outputs"),
                                      0),
                   0);
    REQUIRE(http_post(&s, "/", "{\"inputs\":\"Hello world, this is Jack from Zürich!\"}", &root) == 0);
    CHECK_EQ_INT(root.status, 200);
    CHECK(one.len == root.len && !memcmp(one.body, root.body, one.len));
    http_resp_free(&one);
    http_resp_free(&root);

    /* /info names the labels. */
    http_resp info;
    REQUIRE(http_get(&s, "/info", &info) == 0);
    CHECK_CONTAINS(info.body, "\"token_classifier\":{\"id2label\":{\"0\":\"O\"");
    http_resp_free(&info);

    /* Bad requests. */
    static const struct {
        const char *path, *body;
        long status;
        const char *msg;
    } bad[] = {
        {"/token_classify", "{\"inputs\":\"a b\",\"aggregation_strategy\":\"mean\"}", 422,
         "aggregation_strategy: unknown variant `mean`, expected one of none, simple, first, average, max"},
        {"/predict", "{\"inputs\":\"a b\",\"parameters\":{\"aggregation_strategy\":3}}", 422, "aggregation_strategy"},
        {"/token_classify", "{\"inputs\":\"a b\",\"ignore_labels\":\"O\"}", 422, "ignore_labels"},
        {"/token_classify", "{\"inputs\":\"a b\",\"ignore_labels\":[\"O\",1]}", 422, "ignore_labels"},
        {"/token_classify", "{\"inputs\":\"a b\",\"raw_scores\":\"yes\"}", 422, "raw_scores"},
        {"/token_classify", "{\"inputs\":[101,102]}", 422, "token classification takes texts, not token ids"},
        {"/token_classify", "{\"inputs\":\"\"}", 400, "cannot be empty"},
        {"/token_classify", "{\"inputs\":[]}", 400, "cannot be empty"},
        {"/token_classify", "{\"text\":\"a\"}", 422, "missing field `inputs`"},
        {"/token_classify", "{\"inputs\":\"a\",\"truncation_direction\":\"up\"}", 422, "truncation_direction"},
        {"/token_classify", "not json", 400, "Failed to parse the request body as JSON"},
        {"/embed", "{\"inputs\":\"a\"}", 424, "/predict, /token_classify"},
        {"/rerank", "{\"query\":\"a\",\"texts\":[\"b\"]}", 424, "/predict, /token_classify"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        http_resp r;
        REQUIRE(http_post(&s, bad[i].path, bad[i].body, &r) == 0);
        CHECK_MSG(r.status == bad[i].status, "%s %s: status %ld, expected %ld (%s)", bad[i].path, bad[i].body,
                  r.status, bad[i].status, r.body);
        CHECK_CONTAINS(r.body, bad[i].msg);
        http_resp_free(&r);
    }
    cJSON_Delete(nonempty);
    free(inputs);
    cJSON_Delete(doc);
    CHECK_EQ_INT(srv_stop(&s), 0);
}

/* Other model types refuse /token_classify, naming what they serve; their /predict is unchanged. */
TEST(srv_token_classify_wrong_model)
{
    const char *dir = srv_fixture("bert_seqcls3");
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, NULL};
    REQUIRE(srv_start(&s, args) == 0);
    http_resp r;
    REQUIRE(http_post(&s, "/token_classify", "{\"inputs\":\"good day\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 424);
    CHECK_CONTAINS(r.body, "Model is not a token classification model");
    CHECK_CONTAINS(r.body, "/predict, /classify");
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/predict", "{\"inputs\":\"good day\",\"aggregation_strategy\":\"simple\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK(cJSON_IsArray(r.json) && cJSON_GetArraySize(r.json) == 3 && jstr(cJSON_GetArrayItem(r.json, 0), "label"));
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);
}
