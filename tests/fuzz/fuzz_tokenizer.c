/* libFuzzer target for tokenizer.json loading and encoding (`make fuzz`):
 *   build/fuzz/fuzz_tokenizer -max_total_time=60 build/fuzz/corpus_tok tests/fuzz/seeds/tokenizer
 * The input is split at its first NUL byte: before it, a tokenizer.json;
 * after it, text to encode (alone and as a pair) and decode. Any input must
 * load or fail with an error, and a loaded tokenizer must encode any valid
 * UTF-8 (invalid UTF-8 must be refused), never crash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t json_len = nul ? (size_t)(nul - data) : size;
    const char *text = nul ? (const char *)nul + 1 : "";
    size_t text_len = nul ? size - json_len - 1 : 0;
    /* Exact-size copies so ASan sees the true ends. */
    char *json = malloc(json_len + 1), *txt = malloc(text_len + 1);
    if (!json || !txt) goto out;
    memcpy(json, data, json_len);
    json[json_len] = 0;
    memcpy(txt, text, text_len);
    txt[text_len] = 0;
    iv_tokenizer *tok;
    iv_err err;
    if (iv_tokenizer_load_json(&tok, json, json_len, NULL, 0, &err) == 0) {
        iv_encode_opts o = iv_encode_opts_default();
        o.want_tokens = 1;
        iv_encoding enc;
        if (iv_tokenizer_encode(tok, txt, text_len, NULL, 0, &o, &enc, &err) == 0) {
            char *dec;
            if (iv_tokenizer_decode(tok, enc.ids, enc.len, 1, &dec, &err) == 0) free(dec);
            iv_encoding_free(&enc);
        }
        o.max_length = 8;
        if (iv_tokenizer_encode(tok, txt, text_len, txt, text_len, &o, &enc, &err) == 0) iv_encoding_free(&enc);
        iv_tokenizer_free(tok);
    }
out:
    free(json);
    free(txt);
    return 0;
}
