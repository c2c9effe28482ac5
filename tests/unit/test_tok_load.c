/* Loading tokenizer.json and tokenizer_config.json: clear errors for
 * malformed files, unknown component types and missing vocabulary entries;
 * tokenizer_config.json handling; U+0000 inside vocabularies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "tok_test_data.h"
#include "tokenizer/tokenizer.h"
#include "unit/tmp_test_util.h"

#define WP_MODEL "\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"vocab\":{\"[UNK]\":0,\"a\":1}}"

/* Loads json and expects failure with `code` and a message containing each needle. */
static void expect_error(const char *json, int code, const char *needle1, const char *needle2)
{
    iv_tokenizer *tok = NULL;
    iv_err err;
    memset(&err, 0, sizeof err);
    int rc = iv_tokenizer_load_json(&tok, json, strlen(json), NULL, 0, &err);
    CHECK_MSG(rc == -1, "expected a load error for %s", json);
    if (rc == 0) {
        iv_tokenizer_free(tok);
        return;
    }
    CHECK(tok == NULL);
    CHECK_EQ_INT(err.code, code);
    if (needle1) CHECK_CONTAINS(err.msg, needle1);
    if (needle2) CHECK_CONTAINS(err.msg, needle2);
}

TEST(tok_load_malformed_json)
{
    expect_error("{\"model\": {\"type\": \"WordPiece\",", IV_E_FORMAT, "malformed JSON", NULL);
    expect_error("[1, 2]", IV_E_FORMAT, "top level", NULL);
    expect_error("{\"normalizer\": null}", IV_E_FORMAT, "missing \"model\"", NULL);
    expect_error("{\"version\":\"2.0\"," WP_MODEL "}", IV_E_UNSUPPORTED, "version", "2.0");
}

/* Found by fuzz_tokenizer: a raw 0xFF byte in a normalized added token was
 * decoded past the token's end (heap overflow under ASan). The reference
 * refuses files that are not UTF-8; so do we, before parsing. */
TEST(tok_load_rejects_invalid_utf8)
{
    expect_error("{\"added_tokens\":[{\"id\":2,\"content\":\"x\xff\",\"normalized\":true}],"
                 "\"normalizer\":{\"type\":\"Lowercase\"}," WP_MODEL "}",
                 IV_E_FORMAT, "tokenizer.json is not valid UTF-8", "byte 37");
    expect_error("{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"\xed\xa0\x80\":0}}}", IV_E_FORMAT,
                 "not valid UTF-8", NULL); /* an encoded surrogate */
}

TEST(tok_load_unknown_types)
{
    expect_error("{\"normalizer\":{\"type\":\"Fancy\"}," WP_MODEL "}", IV_E_UNSUPPORTED, "normalizer", "Fancy");
    expect_error("{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},{\"type\":\"Bogus\"}]}," WP_MODEL
                 "}",
                 IV_E_UNSUPPORTED, "normalizers[1]", "Bogus");
    expect_error("{\"pre_tokenizer\":{\"type\":\"Sentencizer\"}," WP_MODEL "}", IV_E_UNSUPPORTED, "pre_tokenizer",
                 "Sentencizer");
    expect_error("{\"post_processor\":{\"type\":\"Magic\"}," WP_MODEL "}", IV_E_UNSUPPORTED, "post_processor", "Magic");
    expect_error("{\"decoder\":{\"type\":\"Oracle\"}," WP_MODEL "}", IV_E_UNSUPPORTED, "decoder", "Oracle");
    expect_error("{\"model\":{\"type\":\"Bigram\",\"vocab\":{}}}", IV_E_UNSUPPORTED, "model", "Bigram");
    expect_error("{\"normalizer\":{\"clean_text\":true}," WP_MODEL "}", IV_E_FORMAT, "normalizer", "type");
}

/* Every Sequence names a failing member by its path, and frees the members
 * loaded before it (ASan); its member list must be an array. */
TEST(tok_load_sequence_members)
{
    expect_error("{\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
                 "{\"String\":\" \"},\"behavior\":\"Isolated\"},{\"type\":\"Sentencizer\"}]}," WP_MODEL "}",
                 IV_E_UNSUPPORTED, "pre_tokenizer.pretokenizers[1]", "Sentencizer");
    expect_error("{\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Strip\",\"content\":\" \","
                 "\"start\":1,\"stop\":0},{\"type\":\"Oracle\"}]}," WP_MODEL "}",
                 IV_E_UNSUPPORTED, "decoder.decoders[1]", "Oracle");
    expect_error("{\"post_processor\":{\"type\":\"Sequence\",\"processors\":[{\"type\":\"BertProcessing\"},"
                 "{\"type\":\"Magic\"}]}," WP_MODEL "}",
                 IV_E_UNSUPPORTED, "post_processor.processors[1]", "Magic");
    expect_error("{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":{\"type\":\"NFC\"}}," WP_MODEL "}",
                 IV_E_FORMAT, "normalizer (Sequence)", "\"normalizers\" must be an array");
    expect_error("{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Replace\",\"pattern\":"
                 "{\"String\":\"a\"}}]}," WP_MODEL "}",
                 IV_E_FORMAT, "normalizer.normalizers[0] (Replace)", "missing \"content\"");
}

TEST(tok_load_bad_fields)
{
    expect_error("{\"normalizer\":{\"type\":\"BertNormalizer\",\"lowercase\":\"yes\"}," WP_MODEL "}", IV_E_FORMAT,
                 "BertNormalizer", "lowercase");
    expect_error("{\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\","
                 "\"invert\":false}," WP_MODEL "}",
                 IV_E_FORMAT, "Split", "regex");
    expect_error("{\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":\"Sideways\","
                 "\"invert\":false}," WP_MODEL "}",
                 IV_E_FORMAT, "Split", "behavior");
    expect_error("{\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"_\",\"prepend_scheme\":\"sometimes\"},"
                 WP_MODEL "}",
                 IV_E_FORMAT, "Metaspace", "prepend_scheme");
    expect_error("{\"normalizer\":{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"!!!\"}," WP_MODEL "}",
                 IV_E_FORMAT, "Precompiled", "base64");
}

TEST(tok_load_missing_vocab_entries)
{
    expect_error("{\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"vocab\":{\"a\":0}}}", IV_E_FORMAT,
                 "WordPiece", "unk_token \"[UNK]\" is not in the vocabulary");
    expect_error("{\"model\":{\"vocab\":{\"a\":0},\"unk_token\":\"<unk>\"}}", IV_E_FORMAT, "WordLevel", "<unk>");
    expect_error("{\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[]}}",
                 IV_E_FORMAT, "BPE", "unk_token \"<unk>\"");
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\",\"a c\"]}}",
                 IV_E_FORMAT, "merge 1", "\"c\"");
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[[\"a\",\"b\"]]}}", IV_E_FORMAT,
                 "merge 0", "produces \"ab\"");
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b c\"]}}",
                 IV_E_FORMAT, "merge 0", "two tokens");
    expect_error("{\"model\":{\"type\":\"Unigram\",\"unk_id\":5,\"vocab\":[[\"a\",-1.0]]}}", IV_E_FORMAT, "Unigram",
                 "unk_id 5");
    expect_error("{\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"vocab\":{\"[UNK]\":-3}}}", IV_E_FORMAT,
                 "WordPiece", "[UNK]");
    expect_error("{\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"[CLS]\","
                 "\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[{\"Sequence\":{\"id\":\"A\","
                 "\"type_id\":0}},{\"Sequence\":{\"id\":\"B\",\"type_id\":1}}],\"special_tokens\":{}}," WP_MODEL "}",
                 IV_E_FORMAT, "TemplateProcessing", "[CLS]");
}

TEST(tok_load_legacy_model_without_type)
{
    /* Older files (bert-base-uncased) omit "type": WordPiece is inferred. */
    const char *json = "{\"model\":{\"unk_token\":\"[UNK]\",\"continuing_subword_prefix\":\"##\","
                       "\"max_input_chars_per_word\":100,\"vocab\":{\"[UNK]\":0,\"a\":1,\"##b\":2}}}";
    iv_tokenizer *tok = NULL;
    iv_err err;
    REQUIRE(iv_tokenizer_load_json(&tok, json, strlen(json), NULL, 0, &err) == 0);
    iv_encode_opts o = iv_encode_opts_default();
    iv_encoding e;
    REQUIRE(iv_tokenizer_encode(tok, "ab", 2, NULL, 0, &o, &e, &err) == 0);
    CHECK_EQ_INT(e.len, 2);
    CHECK_EQ_INT(e.ids[0], 1);
    CHECK_EQ_INT(e.ids[1], 2);
    iv_encoding_free(&e);
    iv_tokenizer_free(tok);
}

TEST(tok_load_nul_in_vocabulary)
{
    /* cJSON cuts strings at U+0000; the loader keeps such vocabulary keys. */
    const char *json = "{\"model\":{\"type\":\"WordLevel\",\"unk_token\":\"<unk>\","
                       "\"vocab\":{\"<unk>\":0,\"a\":1,\"\\u0000\":2,\"x\\u0000y\":3}},"
                       "\"pre_tokenizer\":{\"type\":\"WhitespaceSplit\"}}";
    iv_tokenizer *tok = NULL;
    iv_err err;
    REQUIRE(iv_tokenizer_load_json(&tok, json, strlen(json), NULL, 0, &err) == 0);
    iv_encode_opts o = iv_encode_opts_default();
    iv_encoding e;
    const char text[] = "a \0 x\0y b";
    REQUIRE(iv_tokenizer_encode(tok, text, sizeof text - 1, NULL, 0, &o, &e, &err) == 0);
    const int32_t want[] = {1, 2, 3, 0};
    REQUIRE(e.len == 4);
    for (int i = 0; i < 4; i++) CHECK_EQ_INT(e.ids[i], want[i]);
    iv_encoding_free(&e);
    iv_tokenizer_free(tok);
}

static int write_file(const char *dir, const char *name, const char *text)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

TEST(tok_load_directory_config)
{
    char dir[64];
    REQUIRE(tmp_dir(dir, sizeof dir, "tok_test") == 0);
    REQUIRE(write_file(dir, "tokenizer.json", TOK_MINI_BPE) == 0);
    REQUIRE(write_file(dir, "tokenizer_config.json",
                       "{\"tokenizer_class\":\"LlamaTokenizer\",\"add_bos_token\":true,\"add_eos_token\":true,"
                       "\"bos_token\":\"<s>\",\"eos_token\":{\"content\":\"</s>\"},\"model_max_length\":512}") == 0);
    iv_tokenizer *tok = NULL;
    iv_err err;
    REQUIRE(iv_tokenizer_load(&tok, dir, &err) == 0);
    CHECK_EQ_INT(iv_tokenizer_model_max_length(tok), 512);
    CHECK_EQ_INT(iv_tokenizer_num_special_tokens(tok, 0), 2);
    CHECK_EQ_INT(iv_tokenizer_num_special_tokens(tok, 1), 4);
    iv_encode_opts o = iv_encode_opts_default();
    iv_encoding e;
    REQUIRE(iv_tokenizer_encode(tok, "ab", 2, "a", 1, &o, &e, &err) == 0);
    /* <s> ▁ab </s> <s> ▁a </s>, second half type 1 */
    const int32_t want[] = {1, 7, 2, 1, 6, 2};
    const int32_t types[] = {0, 0, 0, 1, 1, 1};
    REQUIRE(e.len == 6);
    for (int i = 0; i < 6; i++) {
        CHECK_EQ_INT(e.ids[i], want[i]);
        CHECK_EQ_INT(e.type_ids[i], types[i]);
    }
    iv_encoding_free(&e);
    iv_tokenizer_free(tok);

    /* The file alone keeps its own template; a sentinel length is ignored. */
    REQUIRE(write_file(dir, "tokenizer_config.json",
                       "{\"tokenizer_class\":\"PreTrainedTokenizerFast\",\"add_eos_token\":true,"
                       "\"model_max_length\":1000000000000000019884624838656}") == 0);
    REQUIRE(iv_tokenizer_load(&tok, dir, &err) == 0);
    CHECK_EQ_INT(iv_tokenizer_model_max_length(tok), 0);
    REQUIRE(iv_tokenizer_encode(tok, "ab", 2, NULL, 0, &o, &e, &err) == 0);
    CHECK_EQ_INT(e.len, 2);
    if (e.len == 2) {
        CHECK_EQ_INT(e.ids[0], 1);
        CHECK_EQ_INT(e.ids[1], 7);
    }
    iv_encoding_free(&e);
    iv_tokenizer_free(tok);

    /* Llama class with an eos that is not in the vocabulary: clear error. */
    REQUIRE(write_file(dir, "tokenizer_config.json",
                       "{\"tokenizer_class\":\"LlamaTokenizerFast\",\"add_eos_token\":true,\"eos_token\":\"<eot>\"}") ==
            0);
    CHECK(iv_tokenizer_load(&tok, dir, &err) == -1);
    CHECK_CONTAINS(err.msg, "eos_token \"<eot>\"");
    tmp_rmtree(dir);

    CHECK(iv_tokenizer_load(&tok, "/nonexistent/tokenizer.json", &err) == -1);
    CHECK_EQ_INT(err.code, IV_E_NOTFOUND);
}

TEST(tok_byte_fallback_and_decode)
{
    /* BPE with byte fallback: 'c' is not in the vocabulary but <0x63> is;
     * '\xC3\xA9' (e acute) has no byte tokens and becomes <unk>. The decoder
     * chain turns byte tokens back into text. */
    const char *json =
        "{\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"byte_fallback\":true,\"fuse_unk\":true,"
        "\"vocab\":{\"<unk>\":0,\"a\":1,\"b\":2,\"ab\":3,\"<0x63>\":4},\"merges\":[\"a b\"]},"
        "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}]}}";
    iv_tokenizer *tok = NULL;
    iv_err err;
    REQUIRE(iv_tokenizer_load_json(&tok, json, strlen(json), NULL, 0, &err) == 0);
    iv_encode_opts o = iv_encode_opts_default();
    o.want_tokens = 1;
    iv_encoding e;
    REQUIRE(iv_tokenizer_encode(tok, "abc\xC3\xA9", 5, NULL, 0, &o, &e, &err) == 0);
    REQUIRE(e.len == 3);
    CHECK_EQ_INT(e.ids[0], 3);
    CHECK_EQ_INT(e.ids[1], 4);
    CHECK_EQ_INT(e.ids[2], 0);
    CHECK_STR(e.tokens[1], "<0x63>");
    CHECK_EQ_INT(e.offsets[2], 2);
    CHECK_EQ_INT(e.offsets[3], 3);
    CHECK_EQ_INT(e.offsets[4], 3);
    CHECK_EQ_INT(e.offsets[5], 5);
    char *dec = NULL;
    REQUIRE(iv_tokenizer_decode(tok, e.ids, e.len, 0, &dec, &err) == 0);
    CHECK_STR(dec, "abc<unk>");
    free(dec);
    iv_encoding_free(&e);
    iv_tokenizer_free(tok);
}

TEST(tok_load_template_string_form)
{
    /* The "[CLS] $A [SEP]" shorthand of TemplateProcessing's constructor. */
    const char *json = "{\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":\"[CLS] $A [SEP]\","
                       "\"pair\":\"[CLS] $A [SEP] $B:1 [SEP]:1\",\"special_tokens\":{"
                       "\"[CLS]\":{\"id\":\"[CLS]\",\"ids\":[2],\"tokens\":[\"[CLS]\"]},"
                       "\"[SEP]\":{\"id\":\"[SEP]\",\"ids\":[3],\"tokens\":[\"[SEP]\"]}}},"
                       "\"pre_tokenizer\":{\"type\":\"Whitespace\"},"
                       "\"model\":{\"type\":\"WordLevel\",\"unk_token\":\"[UNK]\","
                       "\"vocab\":{\"[UNK]\":0,\"a\":1,\"[CLS]\":2,\"[SEP]\":3,\"b\":4}}}";
    iv_tokenizer *tok = NULL;
    iv_err err;
    REQUIRE(iv_tokenizer_load_json(&tok, json, strlen(json), NULL, 0, &err) == 0);
    CHECK_EQ_INT(iv_tokenizer_num_special_tokens(tok, 0), 2);
    CHECK_EQ_INT(iv_tokenizer_num_special_tokens(tok, 1), 3);
    iv_encode_opts o = iv_encode_opts_default();
    iv_encoding e;
    REQUIRE(iv_tokenizer_encode(tok, "a", 1, "b a", 3, &o, &e, &err) == 0);
    const int32_t want[] = {2, 1, 3, 4, 1, 3};
    const int32_t types[] = {0, 0, 0, 1, 1, 1};
    REQUIRE(e.len == 6);
    for (int i = 0; i < 6; i++) {
        CHECK_EQ_INT(e.ids[i], want[i]);
        CHECK_EQ_INT(e.type_ids[i], types[i]);
    }
    iv_encoding_free(&e);
    iv_tokenizer_free(tok);
}

/* tokenizer_config.json split_special_tokens: false (the default) is what
 * the tokenizer does; true (special tokens in the text read as plain text)
 * is refused, not ignored. */
TEST(tok_load_split_special_tokens)
{
    const char *json = "{\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"vocab\":{\"[UNK]\":0,\"a\":1}}}";
    static const char *const ok[] = {"{}", "{\"split_special_tokens\": false}", "{\"split_special_tokens\": null}"};
    for (int i = 0; i < 3; i++) {
        iv_tokenizer *tok = NULL;
        iv_err err = {0};
        CHECK_MSG(iv_tokenizer_load_json(&tok, json, strlen(json), ok[i], strlen(ok[i]), &err) == 0, "%s: %s", ok[i],
                  err.msg);
        iv_tokenizer_free(tok);
    }
    static const char *const bad[] = {"{\"split_special_tokens\": true}", "{\"split_special_tokens\": \"yes\"}"};
    static const int codes[] = {IV_E_UNSUPPORTED, IV_E_FORMAT};
    for (int i = 0; i < 2; i++) {
        iv_tokenizer *tok = NULL;
        iv_err err = {0};
        CHECK(iv_tokenizer_load_json(&tok, json, strlen(json), bad[i], strlen(bad[i]), &err) == -1 && !tok);
        CHECK_EQ_INT(err.code, codes[i]);
        CHECK_CONTAINS(err.msg, "split_special_tokens");
    }
}
