/* NVIDIA's Mistral3ForSequenceClassification reranker (family_mistral.c):
 * the one remote class it implements is accepted, any other custom code and
 * every config its remote code would refuse or read without a default are
 * rejected by name, and the head must be what that code builds (bias-free,
 * one row per label). Built in temp dirs from the mistral3_rerank fixture. */
#include <math.h>
#include <string.h>

#include "engine/engine.h"
#include "test.h"
#include "unit/ckpt_test_util.h"

#define FIXTURE "mistral3_rerank"

static void other_auto_map(cJSON *c)
{
    ckpt_set(c, "auto_map", cJSON_Parse("{\"AutoModelForSequenceClassification\": "
                                        "\"model.Mistral3ForSequenceClassification\", "
                                        "\"AutoModel\": \"model.Mistral3BidirectionalModel\"}"));
}
static void other_module(cJSON *c)
{
    ckpt_set(c, "auto_map", cJSON_Parse("{\"AutoModelForSequenceClassification\": "
                                        "\"modeling_x.Mistral3ForSequenceClassification\"}"));
}
static void last_pooling(cJSON *c) { ckpt_set(c, "pooling", cJSON_CreateString("last")); }
static void no_pooling(cJSON *c) { cJSON_DeleteItemFromObjectCaseSensitive(c, "pooling"); }
/* Legacy training configs say "temperature"; the remote code reads only score_temperature. */
static void legacy_temperature(cJSON *c)
{
    cJSON_DeleteItemFromObjectCaseSensitive(c, "score_temperature");
    ckpt_set(c, "temperature", cJSON_CreateNumber(0.4));
}
static void zero_temperature(cJSON *c) { ckpt_set(c, "score_temperature", cJSON_CreateNumber(0)); }
static void no_text_is_causal(cJSON *c)
{
    cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "text_config"), "is_causal");
}
static void two_labels(cJSON *c)
{
    ckpt_set(c, "id2label", cJSON_Parse("{\"0\": \"no\", \"1\": \"yes\"}"));
    ckpt_set(c, "label2id", cJSON_Parse("{\"no\": 0, \"yes\": 1}"));
}
static void hub_code_repo(cJSON *c)
{
    ckpt_set(c, "auto_map", cJSON_Parse("{\"AutoModelForSequenceClassification\": "
                                        "\"nvidia/some-reranker--model.Mistral3ForSequenceClassification\"}"));
}
static void no_auto_map(cJSON *c) { cJSON_DeleteItemFromObjectCaseSensitive(c, "auto_map"); }

TEST(mistral3_rerank_rejects_what_its_code_would_not_run)
{
    CKPT_REJECT(FIXTURE, other_auto_map, "auto_map AutoModel: \"model.Mistral3BidirectionalModel\"", IV_E_UNSUPPORTED);
    CKPT_REJECT(FIXTURE, other_module, "modeling_x.Mistral3ForSequenceClassification", IV_E_UNSUPPORTED);
    CKPT_REJECT(FIXTURE, last_pooling, "pooling \"last\" is not supported", IV_E_UNSUPPORTED);
    CKPT_REJECT(FIXTURE, no_pooling, "needs \"pooling\"", IV_E_FORMAT);
    CKPT_REJECT(FIXTURE, legacy_temperature, "needs a number \"score_temperature\"", IV_E_FORMAT);
    CKPT_REJECT(FIXTURE, zero_temperature, "score_temperature must be finite and positive", IV_E_FORMAT);
    CKPT_REJECT(FIXTURE, no_text_is_causal, "text_config.is_causal", IV_E_FORMAT);
    CKPT_REJECT(FIXTURE, two_labels, "has 1 rows but config.json declares 2 labels", IV_E_FORMAT);
}

/* The checkpoint in dir loads as a 1-label classifier; returns its score for a few ids. */
static float load_score(const char *dir)
{
    iv_engine *e = NULL;
    iv_err err = {0};
    if (iv_engine_load(&e, dir, NULL, &err)) {
        iv_test_fail(__FILE__, __LINE__, "load %s: %s", dir, err.msg);
        return NAN;
    }
    CHECK_EQ_INT(iv_engine_num_labels(e), 1);
    static const int32_t ids[] = {0, 17, 41, 9, 2};
    const iv_seq_input in = {.ids = ids, .len = 5};
    iv_outputs out;
    float score = NAN;
    if (iv_engine_run(e, IV_TASK_CLASSIFY, &in, 1, &out, &err) == 0) {
        score = out.data[0];
        iv_outputs_free(&out);
    } else {
        iv_test_fail(__FILE__, __LINE__, "run %s: %s", dir, err.msg);
    }
    iv_engine_free(e);
    return score;
}

TEST(mistral3_rerank_accepts_code_in_a_hub_repo_or_no_auto_map)
{
    char dir[256];
    REQUIRE(ckpt_make(dir, sizeof dir, FIXTURE, hub_code_repo, 1) == 0);
    const float hub = load_score(dir);
    tmp_rmtree(dir);
    REQUIRE(ckpt_make(dir, sizeof dir, FIXTURE, no_auto_map, 1) == 0);
    const float plain = load_score(dir);
    tmp_rmtree(dir);
    CHECK(hub == plain && hub != 0);
}

TEST(mistral3_rerank_head_names_and_bias)
{
    char dir[256];
    /* The legacy name the exporter's adapter still reads (here all zeros). */
    REQUIRE(ckpt_make(dir, sizeof dir, FIXTURE, NULL, 0) == 0);
    if (!ckpt_write_weights(dir, FIXTURE, (const char *const[]){"language_model.score.", NULL}, "score.weight",
                            (const long long[]){1, 32}, 2))
        CHECK(load_score(dir) == 0);
    tmp_rmtree(dir);
    /* A bias the remote score does not have. */
    REQUIRE(ckpt_make(dir, sizeof dir, FIXTURE, NULL, 0) == 0);
    if (!ckpt_write_weights(dir, FIXTURE, NULL, "language_model.score.bias", (const long long[]){1}, 1))
        CKPT_LOAD_ERROR(dir, FIXTURE, "language_model.score.bias", IV_E_UNSUPPORTED);
    tmp_rmtree(dir);
}

/* The exporter's sentence-transformers files describe the same score (mean
 * pooling, Dense = score.weight / score_temperature writing "scores"): read
 * as a CrossEncoder, they add no embedding pipeline; a "scores" Dense outside
 * a CrossEncoder, or a CrossEncoder whose model file has no head, is refused. */
static int with_st_files(char *dir, size_t cap, const char *st_config)
{
    if (ckpt_make(dir, cap, FIXTURE, NULL, 0)) return -1;
    static const char *const links[] = {"modules.json", "1_Pooling", "2_Dense", "sentence_bert_config.json",
                                        "tokenizer.json", "tokenizer_config.json", NULL};
    for (int i = 0; links[i]; i++)
        if (ckpt_link(dir, FIXTURE, links[i])) return -1;
    return ckpt_write(dir, "config_sentence_transformers.json", st_config, strlen(st_config));
}

TEST(mistral3_rerank_sentence_transformers_cross_encoder_files)
{
    char dir[256];
    REQUIRE(with_st_files(dir, sizeof dir, "{\"model_type\": \"CrossEncoder\"}") == 0);
    if (!ckpt_write_weights(dir, FIXTURE, (const char *const[]){"language_model.score.", NULL}, NULL, NULL, 0))
        CKPT_LOAD_ERROR(dir, FIXTURE, "CrossEncoder whose model file has no classification head", IV_E_UNSUPPORTED);
    tmp_rmtree(dir);
    REQUIRE(with_st_files(dir, sizeof dir, "{\"model_type\": \"SentenceTransformer\"}") == 0);
    if (!ckpt_link(dir, FIXTURE, "model.safetensors"))
        CKPT_LOAD_ERROR(dir, FIXTURE, "a Dense writing \"scores\" is supported only as the last module of a "
                        "CrossEncoder", IV_E_UNSUPPORTED);
    tmp_rmtree(dir);
    /* The fixture as committed: a classifier with no sentence embedding. */
    iv_engine *e = NULL;
    iv_err err = {0};
    char fixture[4096];
    snprintf(fixture, sizeof fixture, "%s/models/%s", iv_test_fixtures_dir(), FIXTURE);
    REQUIRE(iv_engine_load(&e, fixture, NULL, &err) == 0);
    CHECK(iv_engine_st_meta(e)->cross_encoder);
    CHECK(!(iv_engine_capabilities(e) & IV_CAN(IV_TASK_EMBED)));
    CHECK(iv_engine_capabilities(e) & IV_CAN(IV_TASK_CLASSIFY));
    iv_engine_free(e);
}
