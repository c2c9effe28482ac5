/* Robustness of the tokenizer.json loader: every truncation and a few
 * thousand deterministic mutations of a small tokenizer.json must either
 * load or fail with a message, never crash (run under ASan/UBSan too); a
 * tokenizer that loads must encode and decode. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "tok_test_data.h"
#include "tokenizer/tokenizer.h"

static int try_json(const char *json, size_t len)
{
    iv_tokenizer *tok = NULL;
    iv_err err;
    err.msg[0] = 0;
    if (iv_tokenizer_load_json(&tok, json, len, NULL, 0, &err)) {
        if (!err.msg[0]) iv_test_fail(__FILE__, __LINE__, "load failed without a message");
        return 0;
    }
    iv_encode_opts o = iv_encode_opts_default();
    o.want_tokens = 1;
    iv_encoding e;
    const char *text = "Hello, unaffable [MASK] world \xE4\xB8\xAD!";
    if (iv_tokenizer_encode(tok, text, strlen(text), "the cafe", 8, &o, &e, &err) == 0) {
        char *dec = NULL;
        if (iv_tokenizer_decode(tok, e.ids, e.len, 1, &dec, &err) == 0) free(dec);
        iv_encoding_free(&e);
    }
    iv_tokenizer_free(tok);
    return 1;
}

TEST(tok_fuzz_truncated_json)
{
    size_t n = strlen(TOK_MINI_WP);
    int loaded = 0;
    for (size_t k = 0; k <= n; k += 7) loaded += try_json(TOK_MINI_WP, k);
    /* Only the whole file (and none of its strict prefixes) is valid. */
    CHECK_EQ_INT(loaded, n % 7 == 0 ? 1 : 0);
    CHECK_EQ_INT(try_json(TOK_MINI_WP, n), 1);
}

static int mutate_and_load(const char *json, int iterations, uint32_t state)
{
    static const char alphabet[] = "\"{}[],:0-9a\\ \x80\xC3tfn.";
    size_t n = strlen(json);
    char *buf = malloc(n + 1);
    if (!buf) return 0;
    int loaded = 0;
    for (int it = 0; it < iterations; it++) {
        memcpy(buf, json, n + 1);
        int muts = 1 + it % 3;
        for (int m = 0; m < muts; m++) {
            state = state * 1664525u + 1013904223u;
            size_t pos = (state >> 8) % n;
            state = state * 1664525u + 1013904223u;
            buf[pos] = alphabet[(state >> 8) % (sizeof alphabet - 1)];
        }
        loaded += try_json(buf, n);
    }
    free(buf);
    return loaded;
}

TEST(tok_fuzz_mutated_json)
{
    /* Many mutations hit string contents and still load. */
    CHECK(mutate_and_load(TOK_MINI_WP, 1500, 0x2545F491u) > 100);
    CHECK(mutate_and_load(TOK_MINI_BPE, 1500, 0x9E3779B9u) > 100);
}
