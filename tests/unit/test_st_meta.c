/* sentence-transformers metadata: small model directories written here, in
 * the formats of sentence-transformers v2 (module-path types, legacy pooling
 * booleans) and v6 (module.class types, "pooling_mode"), plus the real
 * all-MiniLM-L6-v2 when it has been fetched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/file.h"
#include "engine/max_length.h"
#include "heads/st_meta.h"
#include "test.h"
#include "unit/tmp_test_util.h"

/* Writes dir/rel (creating one level of subfolder when rel has a slash). */
static void put(const char *dir, const char *rel, const char *text)
{
    char path[4096];
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

static const char *k_v2_modules =
    "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"},"
    "{\"idx\":1,\"name\":\"1\",\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"},"
    "{\"idx\":2,\"name\":\"2\",\"path\":\"2_Normalize\",\"type\":\"sentence_transformers.models.Normalize\"}]";

/* modules.json with Transformer + Pooling and the given Pooling config. */
static void pooling_dir(const char *dir, const char *pool_cfg)
{
    put(dir, "modules.json",
        "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"},"
        "{\"idx\":1,\"name\":\"1\",\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"}]");
    put(dir, "1_Pooling/config.json", pool_cfg);
}

/* Loads dir and expects failure with code and a message holding needle. */
static void expect_fail(int line, const char *dir, int code, const char *needle)
{
    iv_st_meta m;
    iv_err err = {0};
    if (iv_st_meta_load(&m, dir, &err) != -1) {
        iv_test_fail(__FILE__, line, "expected failure (%s)", needle);
        iv_st_meta_free(&m);
        return;
    }
    if (err.code != code) iv_test_fail(__FILE__, line, "code %d, want %d (%s)", err.code, code, err.msg);
    if (!strstr(err.msg, needle)) iv_test_fail(__FILE__, line, "\"%s\" lacks \"%s\"", err.msg, needle);
}
#define EXPECT_FAIL(dir, code, needle) expect_fail(__LINE__, dir, code, needle)

/* Loads dir and returns the pooling mode, or -1 on failure. */
static int pool_of(const char *dir)
{
    iv_st_meta m;
    iv_err err;
    if (iv_st_meta_load(&m, dir, &err)) {
        iv_test_fail(__FILE__, __LINE__, "load: %s", err.msg);
        return -1;
    }
    int p = (int)m.pool;
    iv_st_meta_free(&m);
    return p;
}

TEST(st_meta_absent_files_give_defaults)
{
    char dir[64];
    REQUIRE(tmp_dir(dir, sizeof dir, "st_meta") == 0);
    iv_st_meta m;
    iv_err err;
    REQUIRE(iv_st_meta_load(&m, dir, &err) == 0);
    CHECK_EQ_INT(m.present, 0);
    CHECK_EQ_INT(m.pool, IV_POOL_NONE);
    CHECK_EQ_INT(m.pool_include_prompt, 1);
    CHECK_EQ_INT(m.n_dense, 0);
    CHECK_EQ_INT(m.normalize, 0);
    CHECK_EQ_INT(m.max_seq_length, 0);
    CHECK_EQ_INT(m.n_prompts, 0);
    CHECK(m.default_prompt_name == NULL && m.similarity_fn == NULL);
    CHECK_STR(m.backbone_dir, dir);
    CHECK(iv_st_meta_prompt(&m, "query") == NULL);
    iv_st_meta_free(&m);
    tmp_rmtree(dir);
}

TEST(st_meta_v2_layout)
{
    char dir[64];
    REQUIRE(tmp_dir(dir, sizeof dir, "st_meta") == 0);
    put(dir, "modules.json", k_v2_modules);
    put(dir, "1_Pooling/config.json",
        "{\"word_embedding_dimension\":384,\"pooling_mode_cls_token\":false,\"pooling_mode_mean_tokens\":true,"
        "\"pooling_mode_max_tokens\":false,\"pooling_mode_mean_sqrt_len_tokens\":false}");
    put(dir, "sentence_bert_config.json", "{\"max_seq_length\":256,\"do_lower_case\":true}");
    put(dir, "config_sentence_transformers.json", "{\"__version__\":{\"sentence_transformers\":\"2.0.0\"}}");
    iv_st_meta m;
    iv_err err;
    REQUIRE(iv_st_meta_load(&m, dir, &err) == 0);
    CHECK_EQ_INT(m.present, 1);
    CHECK_EQ_INT(m.pool, IV_POOL_MEAN);
    CHECK_EQ_INT(m.pool_include_prompt, 1);
    CHECK_EQ_INT(m.normalize, 1);
    CHECK_EQ_INT(m.n_dense, 0);
    CHECK_EQ_INT(m.max_seq_length, 256);
    CHECK_EQ_INT(m.do_lower_case, 1);
    CHECK_STR(m.backbone_dir, dir);
    CHECK_EQ_INT(m.n_prompts, 0);
    iv_st_meta_free(&m);
    tmp_rmtree(dir);
}

TEST(st_meta_v6_layout_with_dense_and_prompts)
{
    char dir[64];
    REQUIRE(tmp_dir(dir, sizeof dir, "st_meta") == 0);
    put(dir, "modules.json",
        "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.base.modules.transformer.Transformer\"},"
        "{\"idx\":1,\"name\":\"1\",\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.sentence_transformer.modules.pooling.Pooling\"},"
        "{\"idx\":2,\"name\":\"2\",\"path\":\"2_Dense\",\"type\":\"sentence_transformers.base.modules.dense.Dense\"},"
        "{\"idx\":3,\"name\":\"3\",\"path\":\"3_Dense\",\"type\":\"sentence_transformers.models.Dense\"},"
        "{\"idx\":4,\"name\":\"4\",\"path\":\"4_Dropout\",\"type\":\"sentence_transformers.sentence_transformer.modules.dropout.Dropout\"},"
        "{\"idx\":5,\"name\":\"5\",\"path\":\"5_Normalize\",\"type\":\"sentence_transformers.base.modules.normalize.Normalize\"}]");
    put(dir, "1_Pooling/config.json", "{\"embedding_dimension\":768,\"pooling_mode\":\"cls\",\"include_prompt\":false}");
    put(dir, "2_Dense/config.json",
        "{\"in_features\":768,\"out_features\":3072,\"bias\":false,"
        "\"activation_function\":\"torch.nn.modules.linear.Identity\","
        "\"module_input_name\":\"sentence_embedding\",\"module_output_name\":\"sentence_embedding\"}");
    put(dir, "3_Dense/config.json", "{\"in_features\":3072,\"out_features\":256}");
    put(dir, "config_sentence_transformers.json",
        "{\"model_type\":\"SentenceTransformer\",\"prompts\":{\"query\":\"task: search result | query: \","
        "\"document\":\"title: none | text: \",\"empty\":\"\"},\"default_prompt_name\":\"query\","
        "\"similarity_fn_name\":\"cosine\"}");
    iv_st_meta m;
    iv_err err;
    int rc = iv_st_meta_load(&m, dir, &err);
    CHECK_MSG(rc == 0, "load: %s", err.msg);
    if (rc == 0) {
        CHECK_EQ_INT(m.pool, IV_POOL_CLS);
        CHECK_EQ_INT(m.pool_include_prompt, 0);
        CHECK_EQ_INT(m.normalize, 1);
        REQUIRE(m.n_dense == 2);
        char want[4096];
        snprintf(want, sizeof want, "%s/2_Dense", dir);
        CHECK_STR(m.dense[0].dir, want);
        CHECK_EQ_INT(m.dense[0].in_features, 768);
        CHECK_EQ_INT(m.dense[0].out_features, 3072);
        CHECK_EQ_INT(m.dense[0].bias, 0);
        CHECK_EQ_INT(m.dense[0].act, IV_ACT_NONE);
        CHECK_EQ_INT(m.dense[0].token_level, 0);
        /* Defaults of an old Dense config: bias on, Tanh. */
        CHECK_EQ_INT(m.dense[1].bias, 1);
        CHECK_EQ_INT(m.dense[1].act, IV_ACT_TANH);
        CHECK_EQ_INT(m.n_prompts, 3);
        CHECK_STR(iv_st_meta_prompt(&m, "query"), "task: search result | query: ");
        CHECK_STR(iv_st_meta_prompt(&m, "document"), "title: none | text: ");
        CHECK_STR(iv_st_meta_prompt(&m, "empty"), "");
        CHECK(iv_st_meta_prompt(&m, "other") == NULL);
        CHECK_STR(m.default_prompt_name, "query");
        CHECK_STR(m.similarity_fn, "cosine");
        iv_st_meta_free(&m);
        CHECK(m.n_prompts == 0 && m.default_prompt_name == NULL);
    }
    tmp_rmtree(dir);
}

TEST(st_meta_pooling_modes)
{
    char dir[64];
    REQUIRE(tmp_dir(dir, sizeof dir, "st_meta") == 0);
    static const struct {
        const char *cfg;
        iv_pool_mode want;
    } ok[] = {
        {"{\"pooling_mode_cls_token\":true}", IV_POOL_CLS},
        {"{\"pooling_mode_mean_tokens\":true}", IV_POOL_MEAN},
        {"{\"pooling_mode_max_tokens\":true,\"pooling_mode_mean_tokens\":false}", IV_POOL_MAX},
        {"{\"pooling_mode_mean_sqrt_len_tokens\":true}", IV_POOL_MEAN_SQRT_LEN},
        {"{\"pooling_mode_weightedmean_tokens\":true}", IV_POOL_WEIGHTED_MEAN},
        {"{\"pooling_mode_lasttoken\":true}", IV_POOL_LAST},
        {"{\"pooling_mode_cls_token\":false,\"pooling_mode_mean_tokens\":false}", IV_POOL_MEAN},
        {"{}", IV_POOL_MEAN},
        {"{\"pooling_mode\":\"lasttoken\"}", IV_POOL_LAST},
        {"{\"pooling_mode\":[\"max\"]}", IV_POOL_MAX},
        {"{\"pooling_mode\":\"weightedmean\"}", IV_POOL_WEIGHTED_MEAN},
        {"{\"pooling_mode\":\"mean_sqrt_len_tokens\"}", IV_POOL_MEAN_SQRT_LEN},
        /* The new key wins over legacy booleans, as in sentence-transformers. */
        {"{\"pooling_mode\":\"cls\",\"pooling_mode_mean_tokens\":true,\"pooling_mode_max_tokens\":true}", IV_POOL_CLS},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        pooling_dir(dir, ok[i].cfg);
        CHECK_MSG(pool_of(dir) == (int)ok[i].want, "%s: want %s", ok[i].cfg, iv_pool_mode_name(ok[i].want));
    }

    /* Several modes concatenate: legacy booleans in sentence-transformers'
     * fixed order (cls, max, mean, ...), a pooling_mode list in its own order. */
    static const struct {
        const char *cfg;
        int n;
        iv_pool_mode want[3];
    } multi[] = {
        {"{\"pooling_mode_mean_tokens\":true,\"pooling_mode_cls_token\":true}", 2, {IV_POOL_CLS, IV_POOL_MEAN}},
        {"{\"pooling_mode_lasttoken\":true,\"pooling_mode_mean_tokens\":true,\"pooling_mode_max_tokens\":true}", 3,
         {IV_POOL_MAX, IV_POOL_MEAN, IV_POOL_LAST}},
        {"{\"pooling_mode\":[\"mean\",\"max\"]}", 2, {IV_POOL_MEAN, IV_POOL_MAX}},
        {"{\"pooling_mode\":[\"lasttoken\",\"cls\",\"mean\"]}", 3, {IV_POOL_LAST, IV_POOL_CLS, IV_POOL_MEAN}},
    };
    for (size_t i = 0; i < sizeof multi / sizeof multi[0]; i++) {
        pooling_dir(dir, multi[i].cfg);
        iv_st_meta m;
        iv_err err = {0};
        if (iv_st_meta_load(&m, dir, &err)) {
            iv_test_fail(__FILE__, __LINE__, "%s: %s", multi[i].cfg, err.msg);
            continue;
        }
        CHECK_MSG(m.n_pool_modes == multi[i].n, "%s: %d modes", multi[i].cfg, m.n_pool_modes);
        for (int k = 0; k < multi[i].n && k < m.n_pool_modes; k++)
            CHECK_MSG(m.pool_modes[k] == multi[i].want[k], "%s: mode %d is %s", multi[i].cfg, k,
                      iv_pool_mode_name(m.pool_modes[k]));
        CHECK(m.pool == multi[i].want[0]);
        iv_st_meta_free(&m);
    }
    pooling_dir(dir, "{\"pooling_mode\":\"attention\"}");
    EXPECT_FAIL(dir, IV_E_UNSUPPORTED, "unknown pooling_mode \"attention\"");
    pooling_dir(dir, "{\"pooling_mode\":3}");
    EXPECT_FAIL(dir, IV_E_FORMAT, "\"pooling_mode\" must be a string");
    pooling_dir(dir, "{\"pooling_mode\":[]}");
    EXPECT_FAIL(dir, IV_E_FORMAT, "empty list");
    pooling_dir(dir, "{\"pooling_mode_mean_tokens\":\"yes\"}");
    EXPECT_FAIL(dir, IV_E_FORMAT, "\"pooling_mode_mean_tokens\" must be true or false");
    pooling_dir(dir, "{\"include_prompt\":1}");
    EXPECT_FAIL(dir, IV_E_FORMAT, "\"include_prompt\" must be true or false");
    pooling_dir(dir, "[true]");
    EXPECT_FAIL(dir, IV_E_FORMAT, "must be a JSON object");
    pooling_dir(dir, "{\"pooling_mode\":");
    EXPECT_FAIL(dir, IV_E_FORMAT, "malformed JSON");

    CHECK_STR(iv_pool_mode_name(IV_POOL_LAST), "lasttoken");
    CHECK_STR(iv_pool_mode_name(IV_POOL_NONE), "none");
    tmp_rmtree(dir);
}

TEST(st_meta_unsupported_modules)
{
    char dir[64];
    REQUIRE(tmp_dir(dir, sizeof dir, "st_meta") == 0);
    put(dir, "modules.json",
        "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"},"
        "{\"idx\":1,\"name\":\"1\",\"path\":\"1_LSTM\",\"type\":\"sentence_transformers.models.LSTM\"}]");
    EXPECT_FAIL(dir, IV_E_UNSUPPORTED, "module 1 has type sentence_transformers.models.LSTM, which infinity_v3 does not support");
    put(dir, "modules.json", "[{\"idx\":0,\"name\":\"custom\",\"path\":\"\",\"type\":\"my_pkg.Custom\"}]");
    EXPECT_FAIL(dir, IV_E_UNSUPPORTED, "module custom has type my_pkg.Custom");
    put(dir, "modules.json",
        "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.sentence_transformer.modules.cnn.CNN\"}]");
    EXPECT_FAIL(dir, IV_E_UNSUPPORTED, "cnn.CNN");
    /* Close to a known name is not a known name. */
    put(dir, "modules.json", "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.models.Poolingx\"}]");
    EXPECT_FAIL(dir, IV_E_UNSUPPORTED, "Poolingx");
    put(dir, "modules.json",
        "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"},"
        "{\"idx\":1,\"name\":\"1\",\"path\":\"1\",\"type\":\"sentence_transformers.models.Transformer\"}]");
    EXPECT_FAIL(dir, IV_E_UNSUPPORTED, "more than one Transformer");
    tmp_rmtree(dir);
}

TEST(st_meta_dense_rules)
{
    char dir[64];
    REQUIRE(tmp_dir(dir, sizeof dir, "st_meta") == 0);
    const char *pool_dense =
        "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"},"
        "{\"idx\":1,\"name\":\"1\",\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"},"
        "{\"idx\":2,\"name\":\"2\",\"path\":\"2_Dense\",\"type\":\"sentence_transformers.models.Dense\"}]";
    put(dir, "modules.json", pool_dense);
    put(dir, "1_Pooling/config.json", "{\"pooling_mode\":\"mean\"}");

    put(dir, "2_Dense/config.json",
        "{\"in_features\":4,\"out_features\":2,\"activation_function\":\"torch.nn.modules.activation.Softplus\"}");
    EXPECT_FAIL(dir, IV_E_UNSUPPORTED, "activation_function \"torch.nn.modules.activation.Softplus\" is not supported");
    put(dir, "2_Dense/config.json", "{\"in_features\":4,\"out_features\":2,\"activation_function\":\"my.act\"}");
    EXPECT_FAIL(dir, IV_E_UNSUPPORTED, "\"my.act\"");
    put(dir, "2_Dense/config.json", "{\"in_features\":4,\"out_features\":4,\"use_residual\":true}");
    EXPECT_FAIL(dir, IV_E_UNSUPPORTED, "use_residual");
    put(dir, "2_Dense/config.json", "{\"in_features\":0,\"out_features\":2}");
    EXPECT_FAIL(dir, IV_E_FORMAT, "must be positive integers");
    put(dir, "2_Dense/config.json", "{\"out_features\":2}");
    EXPECT_FAIL(dir, IV_E_FORMAT, "must be positive integers");
    put(dir, "2_Dense/config.json", "{\"in_features\":\"4\",\"out_features\":2}");
    EXPECT_FAIL(dir, IV_E_FORMAT, "\"in_features\" must be an integer");
    put(dir, "2_Dense/config.json", "{\"in_features\":4,\"out_features\":2,\"module_input_name\":\"other\"}");
    EXPECT_FAIL(dir, IV_E_UNSUPPORTED, "Dense reading \"other\"");
    put(dir, "2_Dense/config.json", "{\"in_features\":4,\"out_features\":2,\"module_output_name\":\"proj\"}");
    EXPECT_FAIL(dir, IV_E_UNSUPPORTED, "Dense writing \"proj\"");
    put(dir, "2_Dense/config.json",
        "{\"in_features\":4,\"out_features\":2,\"module_input_name\":\"token_embeddings\"}");
    EXPECT_FAIL(dir, IV_E_UNSUPPORTED, "token-level Dense module 2 after Pooling");
    /* activation null builds Identity. */
    put(dir, "2_Dense/config.json", "{\"in_features\":4,\"out_features\":2,\"activation_function\":null}");
    iv_st_meta m;
    iv_err err;
    REQUIRE(iv_st_meta_load(&m, dir, &err) == 0);
    CHECK_EQ_INT(m.dense[0].act, IV_ACT_NONE);
    iv_st_meta_free(&m);

    /* A Dense config that is missing. */
    char path[4096];
    snprintf(path, sizeof path, "%s/2_Dense/config.json", dir);
    remove(path);
    EXPECT_FAIL(dir, IV_E_NOTFOUND, "Dense module \"2\" has no config.json");

    /* Order: sentence-level Dense before Pooling, Dense after Normalize. */
    put(dir, "2_Dense/config.json", "{\"in_features\":4,\"out_features\":2}");
    put(dir, "modules.json",
        "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"},"
        "{\"idx\":1,\"name\":\"d\",\"path\":\"2_Dense\",\"type\":\"sentence_transformers.models.Dense\"},"
        "{\"idx\":2,\"name\":\"p\",\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"}]");
    EXPECT_FAIL(dir, IV_E_UNSUPPORTED, "Dense module d projects the sentence embedding but comes before any Pooling");
    put(dir, "modules.json",
        "[{\"idx\":0,\"name\":\"p\",\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"},"
        "{\"idx\":1,\"name\":\"n\",\"path\":\"\",\"type\":\"sentence_transformers.models.Normalize\"},"
        "{\"idx\":2,\"name\":\"d\",\"path\":\"2_Dense\",\"type\":\"sentence_transformers.models.Dense\"}]");
    EXPECT_FAIL(dir, IV_E_UNSUPPORTED, "Dense module d after Normalize");

    /* A token-level projection before pooling is a valid pipeline. */
    put(dir, "2_Dense/config.json",
        "{\"in_features\":4,\"out_features\":2,\"module_input_name\":\"token_embeddings\","
        "\"activation_function\":\"torch.nn.GELU\"}");
    put(dir, "modules.json",
        "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"},"
        "{\"idx\":1,\"name\":\"d\",\"path\":\"2_Dense\",\"type\":\"sentence_transformers.models.Dense\"},"
        "{\"idx\":2,\"name\":\"p\",\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"}]");
    REQUIRE(iv_st_meta_load(&m, dir, &err) == 0);
    CHECK_EQ_INT(m.n_dense, 1);
    CHECK_EQ_INT(m.dense[0].token_level, 1);
    CHECK_EQ_INT(m.dense[0].act, IV_ACT_GELU);
    CHECK_EQ_INT(m.pool, IV_POOL_MEAN);
    iv_st_meta_free(&m);

    /* More Dense modules than the pipeline holds. */
    put(dir, "2_Dense/config.json", "{\"in_features\":4,\"out_features\":4}");
    char mods[4096];
    int off = snprintf(mods, sizeof mods,
                       "[{\"idx\":0,\"name\":\"p\",\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"}");
    for (int i = 0; i <= IV_ST_MAX_DENSE; i++)
        off += snprintf(mods + off, sizeof mods - (size_t)off,
                        ",{\"name\":\"d%d\",\"path\":\"2_Dense\",\"type\":\"sentence_transformers.models.Dense\"}", i);
    snprintf(mods + off, sizeof mods - (size_t)off, "]");
    put(dir, "modules.json", mods);
    EXPECT_FAIL(dir, IV_E_UNSUPPORTED, "more than 4 Dense modules");
    tmp_rmtree(dir);
}

TEST(st_meta_malformed_files)
{
    char dir[64];
    REQUIRE(tmp_dir(dir, sizeof dir, "st_meta") == 0);
    put(dir, "modules.json", "{\"0\":\"x\"}");
    EXPECT_FAIL(dir, IV_E_FORMAT, "must be a list of modules");
    put(dir, "modules.json", "[{\"idx\":0,\"name\":\"0\",\"path\":\"\"}]");
    EXPECT_FAIL(dir, IV_E_FORMAT, "module 0 needs a string \"type\"");
    put(dir, "modules.json", "[3]");
    EXPECT_FAIL(dir, IV_E_FORMAT, "needs a string \"type\"");
    put(dir, "modules.json",
        "[{\"idx\":0,\"name\":\"p\",\"path\":\"../../etc\",\"type\":\"sentence_transformers.models.Pooling\"}]");
    EXPECT_FAIL(dir, IV_E_FORMAT, "path \"../../etc\" leaves the model directory");
    put(dir, "modules.json",
        "[{\"idx\":0,\"name\":\"p\",\"path\":\"/etc\",\"type\":\"sentence_transformers.models.Pooling\"}]");
    EXPECT_FAIL(dir, IV_E_FORMAT, "leaves the model directory");
    put(dir, "modules.json", "[");
    EXPECT_FAIL(dir, IV_E_FORMAT, "malformed JSON");
    put(dir, "modules.json", k_v2_modules);
    EXPECT_FAIL(dir, IV_E_NOTFOUND, "Pooling module \"1\" has no config.json");
    put(dir, "1_Pooling/config.json", "{}");

    put(dir, "sentence_bert_config.json", "{\"max_seq_length\":\"256\"}");
    EXPECT_FAIL(dir, IV_E_FORMAT, "\"max_seq_length\" must be an integer");
    put(dir, "sentence_bert_config.json", "{\"max_seq_length\":-1}");
    EXPECT_FAIL(dir, IV_E_FORMAT, "\"max_seq_length\" -1 is out of range");
    put(dir, "sentence_bert_config.json", "{\"max_seq_length\":null,\"do_lower_case\":false}");

    put(dir, "config_sentence_transformers.json", "{\"prompts\":{\"query\":3}}");
    EXPECT_FAIL(dir, IV_E_FORMAT, "prompt \"query\" must be a string");
    put(dir, "config_sentence_transformers.json", "{\"prompts\":[\"a\"]}");
    EXPECT_FAIL(dir, IV_E_FORMAT, "\"prompts\" must be an object");
    put(dir, "config_sentence_transformers.json", "{\"prompts\":{\"query\":\"q: \"},\"default_prompt_name\":\"doc\"}");
    EXPECT_FAIL(dir, IV_E_FORMAT, "default_prompt_name \"doc\" is not one of the prompts");
    put(dir, "config_sentence_transformers.json", "{\"similarity_fn_name\":7}");
    EXPECT_FAIL(dir, IV_E_FORMAT, "\"similarity_fn_name\" must be a string or null");
    char many[8192];
    int off = snprintf(many, sizeof many, "{\"prompts\":{");
    for (int i = 0; i <= IV_ST_MAX_PROMPTS; i++)
        off += snprintf(many + off, sizeof many - (size_t)off, "%s\"p%d\":\"t%d\"", i ? "," : "", i, i);
    snprintf(many + off, sizeof many - (size_t)off, "}}");
    put(dir, "config_sentence_transformers.json", many);
    EXPECT_FAIL(dir, IV_E_UNSUPPORTED, "more than 32 prompts");

    /* Null fields are absent fields. */
    put(dir, "config_sentence_transformers.json",
        "{\"prompts\":{},\"default_prompt_name\":null,\"similarity_fn_name\":null}");
    iv_st_meta m;
    iv_err err;
    REQUIRE(iv_st_meta_load(&m, dir, &err) == 0);
    CHECK_EQ_INT(m.max_seq_length, 0);
    CHECK(m.default_prompt_name == NULL && m.similarity_fn == NULL);
    CHECK_EQ_INT(m.pool, IV_POOL_MEAN);
    iv_st_meta_free(&m);
    tmp_rmtree(dir);
}

TEST(st_meta_backbone_in_subfolder)
{
    char dir[64];
    REQUIRE(tmp_dir(dir, sizeof dir, "st_meta") == 0);
    put(dir, "modules.json",
        "[{\"idx\":0,\"name\":\"0\",\"path\":\"0_Transformer\",\"type\":\"sentence_transformers.models.Transformer\"},"
        "{\"idx\":1,\"name\":\"1\",\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"}]");
    put(dir, "0_Transformer/sentence_bert_config.json", "{\"max_seq_length\":128}");
    put(dir, "1_Pooling/config.json", "{\"pooling_mode_max_tokens\":true}");
    iv_st_meta m;
    iv_err err;
    REQUIRE(iv_st_meta_load(&m, dir, &err) == 0);
    char want[4096];
    snprintf(want, sizeof want, "%s/0_Transformer", dir);
    CHECK_STR(m.backbone_dir, want);
    CHECK_EQ_INT(m.max_seq_length, 128);
    CHECK_EQ_INT(m.pool, IV_POOL_MAX);
    CHECK_EQ_INT(m.normalize, 0);
    iv_st_meta_free(&m);
    tmp_rmtree(dir);
}

TEST(st_meta_torch_activation_names)
{
    CHECK_EQ_INT(iv_act_from_torch_name("torch.nn.modules.activation.Tanh"), IV_ACT_TANH);
    CHECK_EQ_INT(iv_act_from_torch_name("torch.nn.modules.activation.ReLU"), IV_ACT_RELU);
    CHECK_EQ_INT(iv_act_from_torch_name("torch.nn.modules.activation.GELU"), IV_ACT_GELU);
    CHECK_EQ_INT(iv_act_from_torch_name("torch.nn.modules.activation.Sigmoid"), IV_ACT_SIGMOID);
    CHECK_EQ_INT(iv_act_from_torch_name("torch.nn.modules.activation.SiLU"), IV_ACT_SILU);
    CHECK_EQ_INT(iv_act_from_torch_name("torch.nn.modules.linear.Identity"), IV_ACT_NONE);
    CHECK_EQ_INT(iv_act_from_torch_name("torch.nn.Identity"), IV_ACT_NONE);
    CHECK_EQ_INT(iv_act_from_torch_name("torch.nn.Tanh"), IV_ACT_TANH);
    CHECK_EQ_INT(iv_act_from_torch_name("torch.nn.modules.activation.Softmax"), -1);
    CHECK_EQ_INT(iv_act_from_torch_name("torch.nn.modules.activation.Identity"), -1);
    CHECK_EQ_INT(iv_act_from_torch_name("Tanh"), -1);
    CHECK_EQ_INT(iv_act_from_torch_name(""), -1);
}

TEST(st_meta_real_minilm)
{
    char dir[4096], path[4096];
    snprintf(dir, sizeof dir, "%s/all-MiniLM-L6-v2", iv_test_models_dir());
    if (!iv_file_exists(iv_path_join(path, sizeof path, dir, "modules.json"))) {
        iv_test_skip("all-MiniLM-L6-v2 not fetched (scripts/fetch-models.sh)");
        return;
    }
    iv_st_meta m;
    iv_err err;
    int rc = iv_st_meta_load(&m, dir, &err);
    CHECK_MSG(rc == 0, "load: %s", err.msg);
    REQUIRE(rc == 0);
    CHECK_EQ_INT(m.present, 1);
    CHECK_EQ_INT(m.pool, IV_POOL_MEAN);
    CHECK_EQ_INT(m.pool_include_prompt, 1);
    CHECK_EQ_INT(m.normalize, 1);
    CHECK_EQ_INT(m.n_dense, 0);
    CHECK_EQ_INT(m.max_seq_length, 256);
    CHECK_EQ_INT(m.do_lower_case, 0);
    CHECK_EQ_INT(m.n_prompts, 0);
    CHECK_STR(m.backbone_dir, dir);
    iv_st_meta_free(&m);
}

/* Where the length limit comes from (sentence-transformers 6.3): the
 * Transformer config's processor_kwargs / tokenizer_args model_max_length
 * wins over its max_seq_length; older per-family file names are read too. */
TEST(st_meta_length_limit_keys)
{
    char dir[64];
    REQUIRE(tmp_dir(dir, sizeof dir, "st_meta") == 0);
    static const struct {
        const char *file, *json;
        int want;
    } cases[] = {
        {"sentence_bert_config.json", "{\"max_seq_length\":256,\"processor_kwargs\":{\"model_max_length\":300}}", 300},
        {"sentence_bert_config.json", "{\"max_seq_length\":256,\"tokenizer_args\":{\"model_max_length\":64}}", 64},
        {"sentence_bert_config.json", "{\"processor_kwargs\":{\"model_max_length\":null},\"max_seq_length\":99}", 99},
        {"sentence_roberta_config.json", "{\"max_seq_length\":77}", 77},
        {"sentence_xlm-roberta_config.json", "{\"max_seq_length\":78}", 78},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char sub[128];
        snprintf(sub, sizeof sub, "%s/c%zu", dir, i);
        char path[256];
        snprintf(path, sizeof path, "c%zu/%s", i, cases[i].file);
        put(dir, path, cases[i].json);
        iv_st_meta m;
        iv_err err = {0};
        if (iv_st_meta_load(&m, sub, &err)) {
            iv_test_fail(__FILE__, __LINE__, "%s: %s", cases[i].json, err.msg);
            continue;
        }
        CHECK_MSG(m.max_seq_length == cases[i].want, "%s %s: %d, want %d", cases[i].file, cases[i].json,
                  m.max_seq_length, cases[i].want);
        iv_st_meta_free(&m);
    }
    tmp_rmtree(dir);
}

/* engine/max_length.c without a tokenizer: the ST value uncapped by
 * max_position_embeddings but not past what the model runs; PyLate's saved
 * value ignored. */
TEST(max_length_resolve_sources)
{
    iv_st_meta meta;
    memset(&meta, 0, sizeof meta);
    iv_max_length l = iv_max_length_resolve(&meta, NULL, 512, 512);
    CHECK_EQ_INT(l.tokens, 512);
    CHECK_STR(l.source, "config.json");
    l = iv_max_length_resolve(&meta, NULL, 514, 512); /* RoBERTa: positions start after padding_idx */
    CHECK_EQ_INT(l.tokens, 512);
    CHECK_STR(l.source, "config.json");
    meta.max_seq_length = 128;
    l = iv_max_length_resolve(&meta, NULL, 512, 512);
    CHECK_EQ_INT(l.tokens, 128);
    CHECK_STR(l.source, "sentence_bert_config.json");
    meta.max_seq_length = 4096; /* not capped by max_position_embeddings ... */
    l = iv_max_length_resolve(&meta, NULL, 512, 1 << 30);
    CHECK_EQ_INT(l.tokens, 4096);
    CHECK_STR(l.source, "sentence_bert_config.json");
    l = iv_max_length_resolve(&meta, NULL, 512, 1000); /* ... but by what the model runs */
    CHECK_EQ_INT(l.tokens, 1000);
    CHECK_STR(l.source, "config.json");
    meta.pylate.present = 1;
    l = iv_max_length_resolve(&meta, NULL, 512, 512);
    CHECK_EQ_INT(l.tokens, 512);
    CHECK_STR(l.source, "config.json");
    l = iv_max_length_resolve(&meta, NULL, 0, 0);
    CHECK_EQ_INT(l.tokens, 0);
}
