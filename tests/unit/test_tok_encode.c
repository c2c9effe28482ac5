/* Encoding through the public API on a small inline WordPiece tokenizer:
 * ids, type ids, tokens, byte and char offsets, pairs, truncation, decode,
 * lookups, invalid input and concurrent use. Expected values were produced
 * by tokenizers 0.23.3 on the same tokenizer.json (tok_test_data.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "tok_test_data.h"
#include "tokenizer/tokenizer.h"

static iv_tokenizer *mini(void)
{
    iv_tokenizer *tok = NULL;
    iv_err err;
    if (iv_tokenizer_load_json(&tok, TOK_MINI_WP, strlen(TOK_MINI_WP), NULL, 0, &err)) {
        iv_test_fail(__FILE__, __LINE__, "load: %s", err.msg);
        return NULL;
    }
    return tok;
}

static int ids_equal(const iv_encoding *e, const int32_t *want, int n)
{
    if (e->len != n) return 0;
    for (int i = 0; i < n; i++)
        if (e->ids[i] != want[i]) return 0;
    return 1;
}

/* Char offsets, as Python reports them. */
static void char_offsets(const iv_encoding *e, const char *text, const char *pair, int32_t *out)
{
    memcpy(out, e->offsets, sizeof *out * 2 * (size_t)e->len);
    for (int i = 0; i < e->len; i++) {
        if (e->seq_index[i] == 0) iv_tokenizer_char_offsets(text, strlen(text), out + 2 * i, 1);
        if (e->seq_index[i] == 1 && pair) iv_tokenizer_char_offsets(pair, strlen(pair), out + 2 * i, 1);
    }
}

TEST(tok_encode_wordpiece_single)
{
    iv_tokenizer *tok = mini();
    REQUIRE(tok);
    iv_encode_opts o = iv_encode_opts_default();
    o.want_tokens = 1;
    iv_encoding e;
    iv_err err;
    const char *text = "Hello, worlds!";
    REQUIRE(iv_tokenizer_encode(tok, text, strlen(text), NULL, 0, &o, &e, &err) == 0);
    const int32_t want[] = {2, 5, 11, 6, 7, 12, 3};
    CHECK(ids_equal(&e, want, 7));
    const char *toks[] = {"[CLS]", "hello", ",", "world", "##s", "!", "[SEP]"};
    for (int i = 0; i < e.len && i < 7; i++) CHECK_STR(e.tokens[i], toks[i]);
    const int32_t offs[] = {0, 0, 0, 5, 5, 6, 7, 12, 12, 13, 13, 14, 0, 0};
    for (int i = 0; i < 14 && i < 2 * e.len; i++) CHECK_EQ_INT(e.offsets[i], offs[i]);
    CHECK_EQ_INT(e.special_mask[0], 1);
    CHECK_EQ_INT(e.special_mask[1], 0);
    CHECK_EQ_INT(e.seq_index[0], -1);
    CHECK_EQ_INT(e.seq_index[1], 0);
    CHECK_EQ_INT(e.n_truncated, 0);

    char *dec = NULL;
    REQUIRE(iv_tokenizer_decode(tok, e.ids, e.len, 1, &dec, &err) == 0);
    CHECK_STR(dec, "hello, worlds!");
    free(dec);
    REQUIRE(iv_tokenizer_decode(tok, e.ids, e.len, 0, &dec, &err) == 0);
    CHECK_STR(dec, "[CLS] hello, worlds! [SEP]");
    free(dec);
    iv_encoding_free(&e);
    iv_tokenizer_free(tok);
}

TEST(tok_encode_accents_cjk_offsets)
{
    iv_tokenizer *tok = mini();
    REQUIRE(tok);
    iv_encode_opts o = iv_encode_opts_default();
    iv_encoding e;
    iv_err err;
    /* Lowercasing, accent stripping (É -> e) and CJK spacing keep offsets
     * on the original text: bytes in the API, chars after conversion. */
    const char *text = "Unaffable CAF\xC3\x89 \xE4\xB8\xAD\xE6\x96\x87";
    REQUIRE(iv_tokenizer_encode(tok, text, strlen(text), NULL, 0, &o, &e, &err) == 0);
    const int32_t want[] = {2, 8, 9, 10, 13, 14, 15, 3};
    CHECK(ids_equal(&e, want, 8));
    const int32_t bytes[] = {0, 0, 0, 2, 2, 5, 5, 9, 10, 15, 16, 19, 19, 22, 0, 0};
    for (int i = 0; i < 16 && i < 2 * e.len; i++) CHECK_EQ_INT(e.offsets[i], bytes[i]);
    int32_t chars[16];
    char_offsets(&e, text, NULL, chars);
    const int32_t want_chars[] = {0, 0, 0, 2, 2, 5, 5, 9, 10, 14, 15, 16, 16, 17, 0, 0};
    for (int i = 0; i < 16 && i < 2 * e.len; i++) CHECK_EQ_INT(chars[i], want_chars[i]);
    iv_encoding_free(&e);
    iv_tokenizer_free(tok);
}

TEST(tok_encode_added_token_lstrip)
{
    iv_tokenizer *tok = mini();
    REQUIRE(tok);
    iv_encode_opts o = iv_encode_opts_default();
    o.want_tokens = 1;
    iv_encoding e;
    iv_err err;
    const char *text = "hello [MASK] world";
    REQUIRE(iv_tokenizer_encode(tok, text, strlen(text), NULL, 0, &o, &e, &err) == 0);
    const int32_t want[] = {2, 5, 4, 6, 3};
    CHECK(ids_equal(&e, want, 5));
    /* lstrip: the token takes the space before it, as in the library. */
    CHECK_STR(e.tokens[2], " [MASK]");
    CHECK_EQ_INT(e.offsets[4], 5);
    CHECK_EQ_INT(e.offsets[5], 12);
    iv_encoding_free(&e);
    iv_tokenizer_free(tok);
}

TEST(tok_encode_pair_and_unknown)
{
    iv_tokenizer *tok = mini();
    REQUIRE(tok);
    iv_encode_opts o = iv_encode_opts_default();
    iv_encoding e;
    iv_err err;
    REQUIRE(iv_tokenizer_encode(tok, "hello", 5, "the world", 9, &o, &e, &err) == 0);
    const int32_t want[] = {2, 5, 3, 16, 6, 3};
    const int32_t types[] = {0, 0, 0, 1, 1, 1};
    const int32_t seqs[] = {-1, 0, -1, 1, 1, -1};
    CHECK(ids_equal(&e, want, 6));
    for (int i = 0; i < 6 && i < e.len; i++) {
        CHECK_EQ_INT(e.type_ids[i], types[i]);
        CHECK_EQ_INT(e.seq_index[i], seqs[i]);
    }
    /* pair offsets are relative to the pair text */
    CHECK_EQ_INT(e.offsets[8], 4);
    CHECK_EQ_INT(e.offsets[9], 9);
    iv_encoding_free(&e);

    REQUIRE(iv_tokenizer_encode(tok, "xyz hello", 9, NULL, 0, &o, &e, &err) == 0);
    const int32_t want2[] = {2, 1, 5, 3};
    CHECK(ids_equal(&e, want2, 4));
    iv_encoding_free(&e);

    o.add_special_tokens = 0;
    REQUIRE(iv_tokenizer_encode(tok, "", 0, NULL, 0, &o, &e, &err) == 0);
    CHECK_EQ_INT(e.len, 0);
    iv_encoding_free(&e);
    iv_tokenizer_free(tok);
}

TEST(tok_encode_truncation)
{
    iv_tokenizer *tok = mini();
    REQUIRE(tok);
    iv_encode_opts o = iv_encode_opts_default();
    iv_encoding e;
    iv_err err;
    o.max_length = 5; /* includes [CLS] and [SEP] */
    const char *t1 = "hello world hello world hello";
    REQUIRE(iv_tokenizer_encode(tok, t1, strlen(t1), NULL, 0, &o, &e, &err) == 0);
    const int32_t w1[] = {2, 5, 6, 5, 3};
    CHECK(ids_equal(&e, w1, 5));
    CHECK_EQ_INT(e.n_truncated, 2);
    iv_encoding_free(&e);

    o.truncate_left = 1;
    const char *t2 = "hello world hello world hello, the";
    REQUIRE(iv_tokenizer_encode(tok, t2, strlen(t2), NULL, 0, &o, &e, &err) == 0);
    const int32_t w2[] = {2, 5, 11, 16, 3};
    CHECK(ids_equal(&e, w2, 5));
    iv_encoding_free(&e);

    o.truncate_left = 0;
    o.max_length = 6;
    o.strategy = IV_TRUNC_ONLY_SECOND;
    REQUIRE(iv_tokenizer_encode(tok, "hello", 5, "the world hello world", 21, &o, &e, &err) == 0);
    const int32_t w3[] = {2, 5, 3, 16, 6, 3};
    CHECK(ids_equal(&e, w3, 6));
    iv_encoding_free(&e);

    /* only_second without a pair fails only when truncation is needed */
    REQUIRE(iv_tokenizer_encode(tok, "hello", 5, NULL, 0, &o, &e, &err) == 0);
    iv_encoding_free(&e);
    CHECK(iv_tokenizer_encode(tok, t1, strlen(t1), NULL, 0, &o, &e, &err) == -1);
    CHECK_EQ_INT(err.code, IV_E_INVALID);
    CHECK_CONTAINS(err.msg, "second sequence");
    iv_tokenizer_free(tok);
}

TEST(tok_encode_invalid_utf8)
{
    iv_tokenizer *tok = mini();
    REQUIRE(tok);
    iv_encode_opts o = iv_encode_opts_default();
    iv_encoding e;
    iv_err err;
    const char *bad[] = {"ab\xC3", "\xFF", "a\xED\xA0\x80", "\xC0\xAF", "\xF4\x90\x80\x80"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(iv_tokenizer_encode(tok, bad[i], strlen(bad[i]), NULL, 0, &o, &e, &err) == -1);
        CHECK_EQ_INT(err.code, IV_E_INVALID);
        CHECK_CONTAINS(err.msg, "UTF-8");
        CHECK(e.ids == NULL && e.len == 0);
    }
    CHECK(iv_tokenizer_encode(tok, "ok", 2, "\x80", 1, &o, &e, &err) == -1);
    CHECK_CONTAINS(err.msg, "pair");
    iv_tokenizer_free(tok);
}

TEST(tok_lookups)
{
    iv_tokenizer *tok = mini();
    REQUIRE(tok);
    CHECK_EQ_INT(iv_tokenizer_vocab_size(tok), 19);
    CHECK_EQ_INT(iv_tokenizer_token_to_id(tok, "[MASK]"), 4);
    CHECK_EQ_INT(iv_tokenizer_token_to_id(tok, "##aff"), 9);
    CHECK_EQ_INT(iv_tokenizer_token_to_id(tok, "nope"), -1);
    CHECK_STR(iv_tokenizer_id_to_token(tok, 17), "##llo");
    CHECK(iv_tokenizer_id_to_token(tok, 19) == NULL);
    CHECK(iv_tokenizer_id_to_token(tok, -1) == NULL);
    CHECK_EQ_INT(iv_tokenizer_num_special_tokens(tok, 0), 2);
    CHECK_EQ_INT(iv_tokenizer_num_special_tokens(tok, 1), 3);
    CHECK_EQ_INT(iv_tokenizer_model_max_length(tok), 0);
    iv_tokenizer_free(tok);
}

TEST(tok_char_offsets_conversion)
{
    /* "aé中" : bytes 0 1-2 3-5 */
    const char *t = "a\xC3\xA9\xE4\xB8\xAD";
    int32_t p[] = {0, 1, 1, 3, 3, 6, 6, 6};
    REQUIRE(iv_tokenizer_char_offsets(t, strlen(t), p, 4) == 0);
    const int32_t want[] = {0, 1, 1, 2, 2, 3, 3, 3};
    for (int i = 0; i < 8; i++) CHECK_EQ_INT(p[i], want[i]);
    CHECK_EQ_INT(iv_utf8_byte_to_char_offset(t, strlen(t), 3), 2);
    CHECK_EQ_INT(iv_utf8_byte_to_char_offset(t, strlen(t), 6), 3);
}

typedef struct thread_job {
    const iv_tokenizer *tok;
    const int32_t *want;
    int want_len;
    int ok;
} thread_job;

static void *encode_many(void *arg)
{
    thread_job *j = arg;
    iv_encode_opts o = iv_encode_opts_default();
    o.want_tokens = 1;
    j->ok = 1;
    const char *text = "Unaffable hello, worlds! xyz \xE4\xB8\xAD\xE6\x96\x87 [MASK]";
    for (int r = 0; r < 300 && j->ok; r++) {
        iv_encoding e;
        iv_err err;
        if (iv_tokenizer_encode(j->tok, text, strlen(text), "the world", 9, &o, &e, &err)) {
            j->ok = 0;
            break;
        }
        j->ok = ids_equal(&e, j->want, j->want_len);
        iv_encoding_free(&e);
    }
    return NULL;
}

TEST(tok_encode_concurrent)
{
    iv_tokenizer *tok = mini();
    REQUIRE(tok);
    iv_encode_opts o = iv_encode_opts_default();
    iv_encoding ref;
    iv_err err;
    const char *text = "Unaffable hello, worlds! xyz \xE4\xB8\xAD\xE6\x96\x87 [MASK]";
    REQUIRE(iv_tokenizer_encode(tok, text, strlen(text), "the world", 9, &o, &ref, &err) == 0);
    pthread_t th[4];
    thread_job jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (thread_job){tok, ref.ids, ref.len, 0};
        REQUIRE(pthread_create(&th[i], NULL, encode_many, &jobs[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_MSG(jobs[i].ok, "thread %d produced a different encoding", i);
    }
    iv_encoding_free(&ref);
    iv_tokenizer_free(tok);
}
