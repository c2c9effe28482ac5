/* Checkpoint fields that were silently ignored while they change what the
 * reference computes (docs/checkpoint-fields.md, "Findings"):
 *  - sentence_bert_config.json do_lower_case: sentence-transformers puts a
 *    Lowercase normalizer in front of the tokenizer's;
 *  - tokenizer_config.json do_lower_case / strip_accents / tokenize_chinese_chars
 *    of BertTokenizer-family classes: transformers 5 builds the BertNormalizer
 *    from them, whatever tokenizer.json says;
 *  - config.json is_decoder on BERT/RoBERTa: transformers then attends
 *    causally; refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "engine/engine.h"
#include "engine/inputs.h"
#include "test.h"
#include "unit/ckpt_test_util.h"

/* Copies fixture `name` into a fresh temp dir (path in dir). */
static int copy_fixture(char *dir, size_t cap, const char *name)
{
    if (tmp_dir(dir, cap, "findings")) return -1;
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "cp -r '%s/models/%s/.' '%s/'", iv_test_fixtures_dir(), name, dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Sets key to a JSON value in dir/file (a JSON object). */
static int edit_json(const char *dir, const char *file, const char *key, cJSON *v)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    cJSON *j = NULL;
    iv_err err = {0};
    if (iv_json_load_file(path, 1 << 24, &j, &err)) {
        cJSON_Delete(v);
        return -1;
    }
    if (v) ckpt_set(j, key, v);
    else cJSON_DeleteItemFromObjectCaseSensitive(j, key);
    char *text = cJSON_Print(j);
    const int rc = ckpt_write(dir, file, text, strlen(text));
    free(text);
    cJSON_Delete(j);
    return rc;
}

static int embed(iv_engine *e, const char *text, float *out, int cap, int32_t *ids, int *n_ids)
{
    iv_prepared p;
    iv_err err = {0};
    iv_input in = {.text = text, .text_len = strlen(text)};
    if (iv_prepare_input(e, &in, NULL, &p, &err)) return iv_test_fail(__FILE__, __LINE__, "%s", err.msg) - 1;
    *n_ids = p.seq.len < 64 ? p.seq.len : 64;
    memcpy(ids, p.seq.ids, (size_t)*n_ids * sizeof *ids);
    iv_outputs o;
    int rc = iv_engine_run(e, IV_TASK_EMBED, &p.seq, 1, &o, &err);
    iv_prepared_free(&p);
    if (rc) return iv_test_fail(__FILE__, __LINE__, "%s", err.msg) - 1;
    const int n = o.cols < cap ? o.cols : cap;
    memcpy(out, o.data, (size_t)n * sizeof *out);
    iv_outputs_free(&o);
    return n;
}

TEST(findings_st_do_lower_case)
{
    char dir[512], orig[4200];
    REQUIRE(copy_fixture(dir, sizeof dir, "llama") == 0);
    REQUIRE(edit_json(dir, "sentence_bert_config.json", "do_lower_case", cJSON_CreateTrue()) == 0);
    snprintf(orig, sizeof orig, "%s/models/llama", iv_test_fixtures_dir());
    iv_engine *a = NULL, *b = NULL;
    iv_err err = {0};
    if (iv_engine_load(&a, orig, NULL, &err) || iv_engine_load(&b, dir, NULL, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
    } else {
        /* sentence-transformers 6.3 on these two folders: "hello world" on the
         * original equals "Hello WORLD" with do_lower_case (0.0 apart), and
         * "Hello WORLD" on the original differs by 0.58. */
        float ea[512], eb[512], ec[512];
        int32_t ia[64], ib[64], ic[64];
        int na, nb, nc;
        const int n1 = embed(a, "hello world", ea, 512, ia, &na);
        const int n2 = embed(b, "Hello WORLD", eb, 512, ib, &nb);
        const int n3 = embed(a, "Hello WORLD", ec, 512, ic, &nc);
        REQUIRE(n1 > 0 && n1 == n2 && n2 == n3);
        CHECK(na == nb && !memcmp(ia, ib, (size_t)na * sizeof *ia));
        CHECK(iv_test_max_abs_diff(ea, eb, n1) == 0);
        CHECK(iv_test_max_abs_diff(ec, eb, n1) > 1e-3);
        /* Offsets still point into the text as given. */
        const iv_tokenizer *tok = iv_engine_tokenizer(b);
        iv_encoding enc;
        iv_encode_opts eo = iv_encode_opts_default();
        REQUIRE(iv_tokenizer_encode(tok, "Hello WORLD", 11, NULL, 0, &eo, &enc, &err) == 0);
        CHECK(enc.offsets[2 * (enc.len - 2) + 1] == 11 || enc.offsets[2 * (enc.len - 1) + 1] == 11);
        iv_encoding_free(&enc);
    }
    iv_engine_free(a);
    iv_engine_free(b);
    tmp_rmtree(dir);
}

/* Token ids of text with the tokenizer of dir. */
static int ids_of(const char *dir, const char *text, int32_t *ids, int cap)
{
    iv_tokenizer *tok;
    iv_err err = {0};
    if (iv_tokenizer_load(&tok, dir, &err)) return iv_test_fail(__FILE__, __LINE__, "%s", err.msg) - 1;
    iv_encoding enc;
    iv_encode_opts eo = iv_encode_opts_default();
    eo.add_special_tokens = 0;
    int n = -1;
    if (!iv_tokenizer_encode(tok, text, strlen(text), NULL, 0, &eo, &enc, &err)) {
        n = enc.len < cap ? enc.len : cap;
        memcpy(ids, enc.ids, (size_t)n * sizeof *ids);
        iv_encoding_free(&enc);
    }
    iv_tokenizer_free(tok);
    return n;
}

TEST(findings_bert_tokenizer_config_flags)
{
    /* transformers 5.25 on bert_tokcls's tokenizer: "Héllo ABC" is
     * [UNK] a ##b ##c (ids 100 104 147 148) as saved (do_lower_case true);
     * [UNK] [UNK] with do_lower_case false, although tokenizer.json's
     * BertNormalizer says lowercase: true. */
    char dir[512];
    int32_t ids[16];
    REQUIRE(copy_fixture(dir, sizeof dir, "bert_tokcls") == 0);
    int n = ids_of(dir, "Héllo ABC", ids, 16);
    CHECK(n == 4 && ids[0] == 100 && ids[1] == 104 && ids[2] == 147 && ids[3] == 148);
    REQUIRE(edit_json(dir, "tokenizer_config.json", "do_lower_case", cJSON_CreateFalse()) == 0);
    n = ids_of(dir, "Héllo ABC", ids, 16);
    CHECK(n == 2 && ids[0] == 100 && ids[1] == 100);
    /* Absent, the class default (true) applies: 104 147 148. */
    REQUIRE(edit_json(dir, "tokenizer_config.json", "do_lower_case", NULL) == 0);
    n = ids_of(dir, "ABC", ids, 16);
    CHECK(n == 3 && ids[0] == 104);
    /* A class that does not rebuild its normalizer keeps tokenizer.json's. */
    REQUIRE(edit_json(dir, "tokenizer_config.json", "do_lower_case", cJSON_CreateFalse()) == 0);
    REQUIRE(edit_json(dir, "tokenizer_config.json", "tokenizer_class", cJSON_CreateString("PreTrainedTokenizerFast")) ==
            0);
    n = ids_of(dir, "ABC", ids, 16);
    CHECK(n == 3 && ids[0] == 104);
    REQUIRE(edit_json(dir, "tokenizer_config.json", "strip_accents", cJSON_CreateString("yes")) == 0);
    REQUIRE(edit_json(dir, "tokenizer_config.json", "tokenizer_class", cJSON_CreateString("BertTokenizerFast")) == 0);
    iv_tokenizer *tok = NULL;
    iv_err err = {0};
    CHECK(iv_tokenizer_load(&tok, dir, &err) != 0);
    CHECK_CONTAINS(err.msg, "strip_accents must be true, false or null");
    iv_tokenizer_free(tok);
    tmp_rmtree(dir);
}

static void set_is_decoder(cJSON *cfg)
{
    ckpt_set(cfg, "is_decoder", cJSON_CreateTrue());
}

TEST(findings_bert_is_decoder_refused)
{
    CKPT_REJECT("bert", set_is_decoder, "is_decoder is true", IV_E_UNSUPPORTED);
    CKPT_REJECT("roberta", set_is_decoder, "causal attention", IV_E_UNSUPPORTED);
}

static void set_mpnet_mlm(cJSON *cfg)
{
    cJSON *a = cJSON_CreateArray();
    cJSON_AddItemToArray(a, cJSON_CreateString("MPNetForMaskedLM"));
    ckpt_set(cfg, "architectures", a);
}

/* sentence-transformers/all-mpnet-base-v2 says MPNetForMaskedLM but saves
 * no lm_head.*: sentence-transformers loads it with AutoModel. It must load
 * (embedding, no sparse output), as the mpnet fixture's weights do here. */
TEST(findings_mlm_architecture_without_head_loads)
{
    char dir[512];
    REQUIRE(ckpt_make(dir, sizeof dir, "mpnet", set_mpnet_mlm, 1) == 0);
    iv_engine *e = NULL;
    iv_err err = {0};
    if (iv_engine_load(&e, dir, NULL, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
    } else {
        CHECK(!(iv_engine_capabilities(e) & IV_CAN(IV_TASK_SPARSE)));
        CHECK(iv_engine_capabilities(e) & IV_CAN(IV_TASK_EMBED_ALL));
        iv_engine_free(e);
    }
    tmp_rmtree(dir);
}
