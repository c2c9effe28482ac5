/* Checkpoints that must be rejected with an error naming the problem:
 * unknown architectures, custom code, missing tensors, wrong shapes, no
 * safetensors. Built in temp dirs from the tiny BERT fixture. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/file.h"
#include "base/json.h"
#include "engine/engine.h"
#include "test.h"

static void write_file(const char *path, const char *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(data, 1, n, f);
    fclose(f);
}

/* A temp checkpoint: the tiny BERT fixture's weights with config edited by `edit`. */
static int make_ckpt(char *dir, size_t cap, void (*edit)(cJSON *cfg), int copy_weights)
{
    snprintf(dir, cap, "/tmp/iv_ckpt_XXXXXX");
    if (!mkdtemp(dir)) return -1;
    char src[4096], dst[4096];
    snprintf(src, sizeof src, "%s/models/bert/config.json", iv_test_fixtures_dir());
    cJSON *cfg;
    iv_err err = {0};
    if (iv_json_load_file(src, 1 << 20, &cfg, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return -1;
    }
    if (edit) edit(cfg);
    char *txt = cJSON_Print(cfg);
    snprintf(dst, sizeof dst, "%s/config.json", dir);
    write_file(dst, txt, strlen(txt));
    free(txt);
    cJSON_Delete(cfg);
    if (copy_weights) {
        char *buf;
        size_t n;
        snprintf(src, sizeof src, "%s/models/bert/model.safetensors", iv_test_fixtures_dir());
        if (iv_file_read_all(src, 64u << 20, &buf, &n, &err)) return -1;
        snprintf(dst, sizeof dst, "%s/model.safetensors", dir);
        write_file(dst, buf, n);
        free(buf);
    }
    return 0;
}

static void cleanup(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) return;
}

static void expect_load_error(void (*edit)(cJSON *), int copy_weights, const char *needle, int code)
{
    char dir[256];
    if (make_ckpt(dir, sizeof dir, edit, copy_weights)) {
        iv_test_fail(__FILE__, __LINE__, "cannot build checkpoint");
        return;
    }
    iv_engine *e = NULL;
    iv_err err = {0};
    int rc = iv_engine_load(&e, dir, NULL, &err);
    CHECK(rc == -1);
    CHECK(e == NULL);
    CHECK_CONTAINS(err.msg, needle);
    CHECK_EQ_INT(err.code, code);
    if (e) iv_engine_free(e);
    cleanup(dir);
}

/* Sets key to v whether or not the config already has it. */
static void set_key(cJSON *c, const char *key, cJSON *v)
{
    cJSON_DeleteItemFromObjectCaseSensitive(c, key);
    cJSON_AddItemToObject(c, key, v);
}

static void set_unknown_type(cJSON *c)
{
    set_key(c, "model_type", cJSON_CreateString("frobnicator"));
}
static void set_unknown_arch(cJSON *c)
{
    set_key(c, "architectures", cJSON_CreateStringArray((const char *[]){"BertForFrobbing"}, 1));
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
    set_key(c, "num_hidden_layers", cJSON_CreateNumber(cJSON_GetObjectItem(c, "num_hidden_layers")->valuedouble + 1));
}
static void set_wrong_intermediate(cJSON *c)
{
    set_key(c, "intermediate_size", cJSON_CreateNumber(cJSON_GetObjectItem(c, "intermediate_size")->valuedouble + 8));
}
static void set_alibi(cJSON *c)
{
    set_key(c, "position_embedding_type", cJSON_CreateString("alibi"));
}
static void set_bad_act(cJSON *c)
{
    set_key(c, "hidden_act", cJSON_CreateString("swishglu_unknown"));
}

TEST(model_rejects_unknown_model_type) { expect_load_error(set_unknown_type, 1, "unsupported model_type \"frobnicator\"", IV_E_UNSUPPORTED); }
TEST(model_rejects_unknown_architecture) { expect_load_error(set_unknown_arch, 1, "BertForFrobbing", IV_E_UNSUPPORTED); }
TEST(model_rejects_custom_code) { expect_load_error(set_auto_map, 1, "auto_map", IV_E_UNSUPPORTED); }
TEST(model_routes_jina_code_to_jina_family)
{
    expect_load_error(set_jina_auto_map, 1, "jina_bert model: unsupported architecture \"BertModel\"", IV_E_UNSUPPORTED);
}
TEST(model_rejects_missing_tensor) { expect_load_error(set_more_layers, 1, "missing tensor", IV_E_NOTFOUND); }
TEST(model_rejects_wrong_shape) { expect_load_error(set_wrong_intermediate, 1, "shape", IV_E_FORMAT); }
TEST(model_rejects_unsupported_positions) { expect_load_error(set_alibi, 1, "alibi", IV_E_UNSUPPORTED); }
TEST(model_rejects_unknown_activation) { expect_load_error(set_bad_act, 1, "swishglu_unknown", IV_E_UNSUPPORTED); }
TEST(model_rejects_missing_weights) { expect_load_error(NULL, 0, "", IV_E_NOTFOUND); }

TEST(model_rejects_pytorch_only)
{
    char dir[256];
    REQUIRE(make_ckpt(dir, sizeof dir, NULL, 0) == 0);
    char p[300];
    snprintf(p, sizeof p, "%s/pytorch_model.bin", dir);
    write_file(p, "PK\x03\x04", 4);
    iv_engine *e = NULL;
    iv_err err = {0};
    CHECK(iv_engine_load(&e, dir, NULL, &err) == -1);
    CHECK_CONTAINS(err.msg, "safetensors");
    CHECK_EQ_INT(err.code, IV_E_UNSUPPORTED);
    cleanup(dir);
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
