/* sentence-transformers metadata of PyLate ColBERT checkpoints: the
 * pylate.models.Dense module types (current and older spelling), PyLate's
 * keys in config_sentence_transformers.json with their defaults, and the
 * layouts refused. Directories are written to /tmp in the format PyLate 1.6
 * saves (see tests/fixtures/models/pylate_bert). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "heads/st_meta.h"
#include "test.h"

static const char *k_dense_cfg =
    "{\"in_features\": 32, \"out_features\": 16, \"bias\": false, "
    "\"activation_function\": \"torch.nn.modules.linear.Identity\", \"use_residual\": false}";

static void write_rel(const char *dir, const char *rel, const char *text)
{
    char path[4200];
    const char *slash = strchr(rel, '/');
    if (slash) {
        snprintf(path, sizeof path, "%s/%.*s", dir, (int)(slash - rel), rel);
        mkdir(path, 0755);
    }
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    FILE *f = fopen(path, "wb");
    if (!f) {
        iv_test_fail(__FILE__, __LINE__, "cannot write %s", path);
        return;
    }
    fputs(text, f);
    fclose(f);
}

/* Transformer + one Dense of the given module type. */
static void pylate_dir(char *dir, size_t cap, const char *dense_type)
{
    snprintf(dir, cap, "/tmp/iv_pylate_XXXXXX");
    if (!mkdtemp(dir)) {
        iv_test_fail(__FILE__, __LINE__, "mkdtemp");
        return;
    }
    char modules[1024];
    snprintf(modules, sizeof modules,
             "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"},"
             "{\"idx\":1,\"name\":\"1\",\"path\":\"1_Dense\",\"type\":\"%s\"}]",
             dense_type);
    write_rel(dir, "modules.json", modules);
    write_rel(dir, "1_Dense/config.json", k_dense_cfg);
}

static void rm_dir(const char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) iv_test_fail(__FILE__, __LINE__, "cannot remove %s", dir);
}

TEST(st_meta_pylate_defaults)
{
    static const char *const types[] = {"pylate.models.Dense.Dense", "pylate.models.Dense"};
    for (int t = 0; t < 2; t++) {
        char dir[64];
        pylate_dir(dir, sizeof dir, types[t]);
        iv_st_meta m;
        iv_err err = {0};
        int rc = iv_st_meta_load(&m, dir, &err);
        CHECK_MSG(rc == 0, "%s: %s", types[t], err.msg);
        if (rc == 0) {
            CHECK(m.pylate.present);
            CHECK_EQ_INT(m.n_dense, 1);
            CHECK(m.dense[0].token_level);
            CHECK_EQ_INT(m.dense[0].bias, 0);
            CHECK_EQ_INT(m.dense[0].act, IV_ACT_NONE);
            CHECK_EQ_INT(m.pool, IV_POOL_NONE);
            CHECK_STR(m.pylate.query_prefix, "[Q] ");
            CHECK_STR(m.pylate.document_prefix, "[D] ");
            CHECK_EQ_INT(m.pylate.query_length, 32);
            CHECK_EQ_INT(m.pylate.document_length, 180);
            CHECK_EQ_INT(m.pylate.do_query_expansion, 1);
            CHECK_EQ_INT(m.pylate.attend_to_expansion_tokens, 0);
            CHECK_EQ_INT(m.pylate.n_skiplist, -1);
            iv_st_meta_free(&m);
        }
        rm_dir(dir);
    }
}

TEST(st_meta_pylate_config_keys)
{
    char dir[64];
    pylate_dir(dir, sizeof dir, "pylate.models.Dense.Dense");
    write_rel(dir, "config_sentence_transformers.json",
              "{\"model_type\": \"ColBERT\", \"prompts\": {\"query\": \"\", \"document\": \"\"}, "
              "\"default_prompt_name\": null, \"similarity_fn_name\": \"MaxSim\", \"query_prefix\": \"[unused0]\", "
              "\"document_prefix\": \"\", \"query_length\": 48, \"document_length\": 300, "
              "\"attend_to_expansion_tokens\": true, \"skiplist_words\": [\"!\", \"the\"], "
              "\"do_query_expansion\": true}");
    iv_st_meta m;
    iv_err err = {0};
    REQUIRE(iv_st_meta_load(&m, dir, &err) == 0);
    CHECK_STR(m.pylate.query_prefix, "[unused0]");
    CHECK_STR(m.pylate.document_prefix, "");
    CHECK_EQ_INT(m.pylate.query_length, 48);
    CHECK_EQ_INT(m.pylate.document_length, 300);
    CHECK_EQ_INT(m.pylate.attend_to_expansion_tokens, 1);
    REQUIRE(m.pylate.n_skiplist == 2);
    CHECK_STR(m.pylate.skiplist_words[0], "!");
    CHECK_STR(m.pylate.skiplist_words[1], "the");
    CHECK_STR(m.similarity_fn, "MaxSim");
    iv_st_meta_free(&m);

    /* Without query expansion there is nothing to attend to (PyLate forces it off). */
    write_rel(dir, "config_sentence_transformers.json",
              "{\"do_query_expansion\": false, \"attend_to_expansion_tokens\": true}");
    REQUIRE(iv_st_meta_load(&m, dir, &err) == 0);
    CHECK_EQ_INT(m.pylate.do_query_expansion, 0);
    CHECK_EQ_INT(m.pylate.attend_to_expansion_tokens, 0);
    iv_st_meta_free(&m);

    static const struct {
        const char *cfg, *needle;
    } bad[] = {
        {"{\"query_length\": 0}", "query_length"},
        {"{\"query_length\": \"32\"}", "query_length"},
        {"{\"skiplist_words\": \"!\"}", "skiplist_words"},
        {"{\"skiplist_words\": [\"!\", 3]}", "skiplist_words"},
        {"{\"query_prefix\": 5}", "query_prefix"},
        {"{\"attend_to_expansion_tokens\": \"no\"}", "attend_to_expansion_tokens"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_rel(dir, "config_sentence_transformers.json", bad[i].cfg);
        memset(&err, 0, sizeof err);
        int rc = iv_st_meta_load(&m, dir, &err);
        CHECK_MSG(rc != 0, "accepted %s", bad[i].cfg);
        if (rc == 0) iv_st_meta_free(&m);
        else CHECK_CONTAINS(err.msg, bad[i].needle);
    }
    rm_dir(dir);
}

/* model_type "ColBERT" makes plain sentence-transformers Dense modules token
 * projections (PyLate converts them); a Pooling module is refused. */
TEST(st_meta_pylate_model_type_and_pooling)
{
    char dir[64];
    pylate_dir(dir, sizeof dir, "pylate.models.Dense.Dense");
    write_rel(dir, "modules.json",
              "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"},"
              "{\"idx\":1,\"name\":\"1\",\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"},"
              "{\"idx\":2,\"name\":\"2\",\"path\":\"1_Dense\",\"type\":\"sentence_transformers.models.Dense\"}]");
    write_rel(dir, "1_Pooling/config.json", "{\"word_embedding_dimension\": 32, \"pooling_mode_mean_tokens\": true}");
    iv_st_meta m;
    iv_err err = {0};
    REQUIRE(iv_st_meta_load(&m, dir, &err) == 0); /* a plain ST model */
    CHECK(!m.pylate.present);
    CHECK(!m.dense[0].token_level);
    iv_st_meta_free(&m);
    write_rel(dir, "config_sentence_transformers.json", "{\"model_type\": \"ColBERT\"}");
    CHECK(iv_st_meta_load(&m, dir, &err) != 0);
    CHECK_CONTAINS(err.msg, "Pooling module");
    CHECK_EQ_INT(err.code, IV_E_UNSUPPORTED);

    write_rel(dir, "modules.json",
              "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"}]");
    REQUIRE(iv_st_meta_load(&m, dir, &err) == 0);
    CHECK(m.pylate.present);
    CHECK_EQ_INT(m.n_dense, 0);
    iv_st_meta_free(&m);
    rm_dir(dir);
}

TEST(st_meta_pylate_dense_residual_refused)
{
    char dir[64];
    pylate_dir(dir, sizeof dir, "pylate.models.Dense.Dense");
    write_rel(dir, "1_Dense/config.json",
              "{\"in_features\": 32, \"out_features\": 32, \"bias\": false, "
              "\"activation_function\": \"torch.nn.modules.linear.Identity\", \"use_residual\": true}");
    iv_st_meta m;
    iv_err err = {0};
    CHECK(iv_st_meta_load(&m, dir, &err) != 0);
    CHECK_CONTAINS(err.msg, "use_residual");
    rm_dir(dir);
}
