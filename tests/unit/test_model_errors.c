/* Checkpoints that must be rejected with an error naming the problem:
 * unknown architectures, custom code, missing tensors, wrong shapes, no
 * safetensors. Built in temp dirs from the tiny BERT fixture. */
#include <stdlib.h>

#include "engine/engine.h"
#include "test.h"
#include "unit/ckpt_test_util.h"

static void set_unknown_type(cJSON *c)
{
    ckpt_set(c, "model_type", cJSON_CreateString("frobnicator"));
}
static void set_unknown_arch(cJSON *c)
{
    ckpt_set(c, "architectures", cJSON_CreateStringArray((const char *[]){"BertForFrobbing"}, 1));
}
/* Custom code no family implements stays with model_type's family, which refuses it. */
static void set_auto_map(cJSON *c)
{
    cJSON *m = cJSON_AddObjectToObject(c, "auto_map");
    cJSON_AddStringToObject(m, "AutoModel", "someone/custom-bert--modeling_custom.CustomBertModel");
}
/* Jina BERT's remote code is routed to the Jina family, which then wants Jina's switches. */
static void set_jina_auto_map(cJSON *c)
{
    cJSON *m = cJSON_AddObjectToObject(c, "auto_map");
    cJSON_AddStringToObject(m, "AutoConfig", "jinaai/jina-bert-implementation--configuration_bert.JinaBertConfig");
}
static void set_more_layers(cJSON *c)
{
    const double layers = cJSON_GetObjectItem(c, "num_hidden_layers")->valuedouble;
    ckpt_set(c, "num_hidden_layers", cJSON_CreateNumber(layers + 1));
}
static void set_wrong_intermediate(cJSON *c)
{
    const double inter = cJSON_GetObjectItem(c, "intermediate_size")->valuedouble;
    ckpt_set(c, "intermediate_size", cJSON_CreateNumber(inter + 8));
}
static void set_alibi(cJSON *c)
{
    ckpt_set(c, "position_embedding_type", cJSON_CreateString("alibi"));
}
static void set_bad_act(cJSON *c)
{
    ckpt_set(c, "hidden_act", cJSON_CreateString("swishglu_unknown"));
}

TEST(model_rejects_unknown_model_type)
{
    CKPT_REJECT("bert", set_unknown_type, "unsupported model_type \"frobnicator\"", IV_E_UNSUPPORTED);
}
TEST(model_rejects_unknown_architecture)
{
    CKPT_REJECT("bert", set_unknown_arch, "BertForFrobbing", IV_E_UNSUPPORTED);
}
TEST(model_rejects_custom_code) { CKPT_REJECT("bert", set_auto_map, "auto_map", IV_E_UNSUPPORTED); }
TEST(model_routes_jina_code_to_jina_family)
{
    CKPT_REJECT("bert", set_jina_auto_map, "jina_bert model: unsupported architecture \"BertModel\"",
                       IV_E_UNSUPPORTED);
}
TEST(model_rejects_missing_tensor) { CKPT_REJECT("bert", set_more_layers, "missing tensor", IV_E_NOTFOUND); }
TEST(model_rejects_wrong_shape) { CKPT_REJECT("bert", set_wrong_intermediate, "shape", IV_E_FORMAT); }
TEST(model_rejects_unsupported_positions) { CKPT_REJECT("bert", set_alibi, "alibi", IV_E_UNSUPPORTED); }
TEST(model_rejects_unknown_activation)
{
    CKPT_REJECT("bert", set_bad_act, "swishglu_unknown", IV_E_UNSUPPORTED);
}
TEST(model_rejects_missing_weights)
{
    char dir[256];
    REQUIRE(ckpt_make(dir, sizeof dir, "bert", NULL, 0) == 0);
    CKPT_LOAD_ERROR(dir, "bert without weights", "", IV_E_NOTFOUND);
    tmp_rmtree(dir);
}

TEST(model_rejects_pytorch_only)
{
    char dir[256];
    REQUIRE(ckpt_make(dir, sizeof dir, "bert", NULL, 0) == 0);
    CHECK(ckpt_write(dir, "pytorch_model.bin", "PK\x03\x04", 4) == 0);
    CKPT_LOAD_ERROR(dir, "bert with pytorch_model.bin", "safetensors", IV_E_UNSUPPORTED);
    tmp_rmtree(dir);
}

TEST(model_rejects_bad_token_ids)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/models/bert", iv_test_fixtures_dir());
    iv_engine *e;
    iv_err err = {0};
    REQUIRE(iv_engine_load(&e, dir, NULL, &err) == 0);
    int32_t ids[3] = {1, 999999, 2};
    iv_seq_input s = {.ids = ids, .len = 3};
    iv_outputs out;
    CHECK(iv_engine_run(e, IV_TASK_EMBED_ALL, &s, 1, &out, &err) == -1);
    CHECK_CONTAINS(err.msg, "outside the vocabulary");
    CHECK_EQ_INT(err.code, IV_E_INVALID);
    int32_t *longer = calloc(100000, sizeof(int32_t));
    iv_seq_input l = {.ids = longer, .len = 100000};
    CHECK(iv_engine_run(e, IV_TASK_EMBED_ALL, &l, 1, &out, &err) == -1);
    CHECK_CONTAINS(err.msg, "maximum");
    CHECK(iv_engine_run(e, IV_TASK_CLASSIFY, &s, 1, &out, &err) == -1);
    CHECK_CONTAINS(err.msg, "does not support sequence classification");
    free(longer);
    iv_engine_free(e);
}
