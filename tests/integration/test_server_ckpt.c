/* A checkpoint whose config declares a head its weights lack, served: the
 * base model's routes work, the head's route is refused in each API's error
 * shape with the reason, and /info and /models list what the model can do. */
#include <string.h>

#include "integration/server_harness.h"
#include "test.h"
#include "unit/ckpt_test_util.h"

/* fixture's config, weights without drop, tokenizer linked. */
static int make_base_only(char *dir, size_t cap, const char *fixture, const char *drop)
{
    if (ckpt_make(dir, cap, fixture, NULL, 0)) return -1;
    if (ckpt_write_weights(dir, fixture, (const char *const[]){drop, NULL}, NULL, NULL, 0) ||
        ckpt_link(dir, fixture, "tokenizer.json") || ckpt_link(dir, fixture, "tokenizer_config.json")) {
        tmp_rmtree(dir);
        return -1;
    }
    return 0;
}

TEST(srv_ckpt_maskedlm_without_head)
{
    char dir[256];
    REQUIRE(make_base_only(dir, sizeof dir, "bert_splade", "cls.") == 0);
    srv s;
    const char *args[] = {"--model-id", dir, "--served-model-name", "mlm", NULL};
    if (srv_start(&s, args)) {
        tmp_rmtree(dir);
        REQUIRE(0);
    }
    http_resp r;
    REQUIRE(http_post(&s, "/embed_all", "{\"inputs\":\"hello\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/embed_sparse", "{\"inputs\":\"hello\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 424);
    CHECK_CONTAINS(r.body, "(BertForMaskedLM) serves: /embed_all");
    CHECK_CONTAINS(r.body, "config.json declares BertForMaskedLM, but the checkpoint holds only the base model: it "
                           "has no weights for the masked-LM (SPLADE) head");
    http_resp_free(&r);
    REQUIRE(http_get(&s, "/info", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    const cJSON *tasks = cJSON_GetObjectItem(r.json, "tasks");
    REQUIRE(cJSON_IsArray(tasks));
    CHECK_EQ_INT(cJSON_GetArraySize(tasks), 1);
    CHECK_STR(cJSON_GetArrayItem(tasks, 0)->valuestring, "embed_all");
    CHECK_CONTAINS(jstr(r.json, "missing_head"), "masked-LM (SPLADE) head");
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);
    tmp_rmtree(dir);
}

TEST(srv_ckpt_seqcls_without_classifier)
{
    char dir[256];
    REQUIRE(make_base_only(dir, sizeof dir, "bert_seqcls1", "classifier.") == 0);
    srv s;
    const char *args[] = {"--model-id", dir, "--served-model-name", "cls", NULL};
    if (srv_start(&s, args)) {
        tmp_rmtree(dir);
        REQUIRE(0);
    }
    http_resp r;
    /* Infinity's shape: 400 naming the capability, then why. */
    REQUIRE(http_post(&s, "/classify", "{\"model\":\"cls\",\"input\":[\"a\"]}", &r) == 0);
    CHECK_EQ_INT(r.status, 400);
    CHECK_CONTAINS(r.body, "does not support `classify`");
    CHECK_CONTAINS(r.body, "no weights for the sequence classification head (classifier.*)");
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/predict", "{\"inputs\":\"a\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 424);
    CHECK_CONTAINS(r.body, "no weights for the sequence classification head");
    http_resp_free(&r);
    REQUIRE(http_get(&s, "/models", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    const cJSON *m0 = cJSON_GetArrayItem(cJSON_GetObjectItem(r.json, "data"), 0);
    const cJSON *caps = cJSON_GetObjectItem(m0, "capabilities");
    CHECK(cJSON_IsArray(caps) && cJSON_GetArraySize(caps) == 0);
    http_resp_free(&r);
    REQUIRE(http_get(&s, "/info", &r) == 0);
    CHECK_CONTAINS(r.body, "\"tasks\":[\"embed_all\"]");
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);
    tmp_rmtree(dir);
}
