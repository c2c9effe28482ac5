/* Public tokenizer API: a tokenizer.json pipeline (added tokens, normalizer,
 * pre-tokenizer, model, post-processor, decoder) identical in output to the
 * Hugging Face `tokenizers` library. Immutable and thread-safe after load;
 * encode from any number of threads at once. */
#ifndef IV_TOKENIZER_TOKENIZER_H
#define IV_TOKENIZER_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>
#include "base/err.h"

typedef struct iv_tokenizer iv_tokenizer;

typedef enum iv_trunc_strategy {
    IV_TRUNC_LONGEST_FIRST = 0,
    IV_TRUNC_ONLY_FIRST,
    IV_TRUNC_ONLY_SECOND,
} iv_trunc_strategy;

typedef struct iv_encode_opts {
    int add_special_tokens;    /* apply the post-processor's template */
    int max_length;            /* 0: no truncation; else total length incl. specials */
    iv_trunc_strategy strategy;
    int truncate_left;         /* 1: drop tokens from the start */
    int want_tokens;           /* fill iv_encoding.tokens */
} iv_encode_opts;

/* Defaults: add_special_tokens=1, no truncation, right side, longest_first. */
iv_encode_opts iv_encode_opts_default(void);

typedef struct iv_encoding {
    int len;
    int32_t *ids;
    int32_t *type_ids;
    uint8_t *special_mask;   /* 1 for tokens added by the post-processor */
    int32_t *offsets;        /* [len][2] byte offsets (start, end) into the input of its sequence */
    int32_t *seq_index;      /* [len]: 0 first text, 1 pair text, -1 added special token */
    char **tokens;           /* [len] token strings, when want_tokens */
    int n_truncated;         /* tokens dropped by truncation */
    int32_t *token_lens;     /* [len] byte lengths of tokens (a token may hold a NUL), when want_tokens */
} iv_encoding;

/* Loads tokenizer.json from a file path, or from a directory (tokenizer.json
 * plus tokenizer_config.json when present: model_max_length, sentinels such
 * as 1e30 ignored; and for Llama/CodeLlama/Gemma tokenizer classes
 * add_bos_token / add_eos_token, which rebuild the template as transformers'
 * update_post_processor does). The "truncation" and "padding" sections of
 * tokenizer.json are NOT applied: iv_tokenizer_encode truncates only as
 * iv_encode_opts asks, and never pads. */
int iv_tokenizer_load(iv_tokenizer **out, const char *path, iv_err *err);
/* Same from memory: the text of tokenizer.json, and optionally of
 * tokenizer_config.json (NULL when absent). */
int iv_tokenizer_load_json(iv_tokenizer **out, const char *json, size_t len, const char *config_json,
                           size_t config_len, iv_err *err);
void iv_tokenizer_free(iv_tokenizer *tok);

/* Encodes text (and pair when non-NULL). Inputs must be valid UTF-8; invalid
 * UTF-8 is IV_E_INVALID. */
int iv_tokenizer_encode(const iv_tokenizer *tok, const char *text, size_t text_len, const char *pair,
                        size_t pair_len, const iv_encode_opts *opts, iv_encoding *out, iv_err *err);
void iv_encoding_free(iv_encoding *enc);

/* Decodes ids to a malloc'd UTF-8 string through the decoder. */
int iv_tokenizer_decode(const iv_tokenizer *tok, const int32_t *ids, int n, int skip_special_tokens,
                        char **out, iv_err *err);
/* Same, also giving the length (the text may contain U+0000). */
int iv_tokenizer_decode_n(const iv_tokenizer *tok, const int32_t *ids, int n, int skip_special_tokens,
                          char **out, size_t *out_len, iv_err *err);

/* sentence-transformers' do_lower_case (sentence_bert_config.json): a
 * Lowercase normalizer in front of the tokenizer's own, unless it has one
 * (a Lowercase, alone or in its Sequence), as the Transformer module does
 * to a fast tokenizer. Offsets still point into the original text. Call
 * before the tokenizer is shared between threads. */
int iv_tokenizer_prepend_lowercase(iv_tokenizer *tok, iv_err *err);

/* transformers' convert_tokens_to_string: the decoder over token strings
 * (lens[i] bytes each; lens NULL: NUL-terminated), joined; without a
 * decoder the tokens joined with spaces. */
int iv_tokenizer_decode_tokens(const iv_tokenizer *tok, const char *const *tokens, const int32_t *lens, int n,
                               char **out, size_t *out_len, iv_err *err);

int iv_tokenizer_vocab_size(const iv_tokenizer *tok);
/* -1 when absent. */
int32_t iv_tokenizer_token_to_id(const iv_tokenizer *tok, const char *token);
/* NULL when out of range. */
const char *iv_tokenizer_id_to_token(const iv_tokenizer *tok, int32_t id);
/* Number of special tokens the post-processor adds for a single (pair=0) or a pair input. */
int iv_tokenizer_num_special_tokens(const iv_tokenizer *tok, int pair);
/* 1 when id is an added token marked special in tokenizer.json (what
 * transformers lists in all_special_ids), else 0. */
int iv_tokenizer_is_special_id(const iv_tokenizer *tok, int32_t id);
/* The unknown token's id as transformers reports it (tokenizer.unk_token_id):
 * tokenizer_config.json's unk_token when given, else the model's; -1: none. */
int32_t iv_tokenizer_unk_id(const iv_tokenizer *tok);
/* 1 when the model has a non-empty continuing_subword_prefix (WordPiece,
 * BPE with one): transformers' test for a word-aware tokenizer. */
int iv_tokenizer_has_subword_prefix(const iv_tokenizer *tok);
/* model_max_length from tokenizer_config.json, or 0 when not given. */
int iv_tokenizer_model_max_length(const iv_tokenizer *tok);

/* Converts byte offsets to Unicode code point offsets (as the Python library reports). */
int32_t iv_utf8_byte_to_char_offset(const char *text, size_t len, int32_t byte_off);
/* Converts n (start, end) byte-offset pairs into `text` to the char offsets
 * the Python library reports, in place, including its edge cases (a pair
 * starting at or past the end of the text stays in bytes). -1 on OOM. */
int iv_tokenizer_char_offsets(const char *text, size_t len, int32_t *pairs, int n);

#endif
