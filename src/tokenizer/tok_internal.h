/* Internal types of the tokenizer pipeline. Everything here mirrors one
 * concept of the Hugging Face `tokenizers` library so that a reader can put
 * the two side by side:
 *   tok_nstr     NormalizedString (normalized bytes + per-byte alignment to
 *                the original text)
 *   tok_split    one piece of a PreTokenizedString (optionally already
 *                tokenized, e.g. an added token)
 *   tok_normalizer / tok_pretokenizer / tok_model / tok_postproc /
 *   tok_decoder  the five pipeline stages, loaded from tokenizer.json.
 * Loaded components are immutable; all per-call state lives in a tok_ctx
 * (arena + PCRE2 match data), so one tokenizer serves many threads. */
#ifndef IV_TOKENIZER_TOK_INTERNAL_H
#define IV_TOKENIZER_TOK_INTERNAL_H

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <cJSON.h>
#include <pcre2.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "tokenizer/tokenizer.h"

/* ------------------------------------------------------------------ */
/* Per-call arena. Allocation failure longjmps to the entry point of the
 * call (encode/decode), which frees everything and reports IV_E_NOMEM, so
 * the pipeline code does not check every allocation. */
typedef struct tok_blk tok_blk;
typedef struct tok_arena {
    tok_blk *head;
    jmp_buf *oom;
} tok_arena;

void tok_arena_init(tok_arena *a, jmp_buf *oom);
void *tok_alloc(tok_arena *a, size_t n);
/* Grows an array living in the arena to hold at least `need` elements. */
void *tok_grow(tok_arena *a, void *p, int *cap, int need, size_t elem);
char *tok_strdup_arena(tok_arena *a, const char *s, int32_t len);
void tok_arena_free(tok_arena *a);

/* ------------------------------------------------------------------ */
/* Hash maps built at load time (malloc'd, read-only afterwards). */

/* String -> int32. Keys are copied into the map's own pool. */
typedef struct tok_strmap_ent {
    uint64_t hash;
    const char *key;
    int32_t len;
    int32_t val;
} tok_strmap_ent;
typedef struct tok_pool_chunk tok_pool_chunk;
typedef struct tok_strmap {
    tok_strmap_ent *ents;
    uint64_t *slots; /* hash tag << 32 | index into ents; all ones when empty */
    uint32_t mask;
    int n, cap;
    tok_pool_chunk *pool;
} tok_strmap;

uint64_t tok_hash_bytes(const void *p, size_t n);
int tok_strmap_init(tok_strmap *m, int expected);
/* Inserts or overwrites; returns the stored key pointer, NULL on OOM. */
const char *tok_strmap_put(tok_strmap *m, const char *key, int32_t len, int32_t val);
/* -1 when absent. */
int32_t tok_strmap_get(const tok_strmap *m, const char *key, int32_t len);
const tok_strmap_ent *tok_strmap_find(const tok_strmap *m, const char *key, int32_t len);
void tok_strmap_free(tok_strmap *m);

/* uint64 -> uint64 (open addressing; key UINT64_MAX is reserved). */
typedef struct tok_u64map {
    uint64_t *keys;
    uint64_t *vals;
    uint32_t mask;
    int n;
} tok_u64map;
int tok_u64map_init(tok_u64map *m, int expected);
int tok_u64map_put(tok_u64map *m, uint64_t key, uint64_t val);
/* Returns 1 and fills *val when present. */
static inline int tok_u64map_get(const tok_u64map *m, uint64_t key, uint64_t *val)
{
    if (!m->keys) return 0;
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    uint32_t i = (uint32_t)(h >> 32) & m->mask;
    for (;;) {
        uint64_t k = m->keys[i];
        if (k == key) {
            *val = m->vals[i];
            return 1;
        }
        if (k == UINT64_MAX) return 0;
        i = (i + 1) & m->mask;
    }
}
void tok_u64map_free(tok_u64map *m);

/* Byte trie (tok_trie.c): edges in a hash map, a value per node (-1: none). */
typedef struct tok_trie {
    tok_u64map edges;
    int32_t *term;
    int32_t n_nodes, cap;
} tok_trie;
int tok_trie_init(tok_trie *t, int expected_nodes);
int tok_trie_insert(tok_trie *t, const char *key, int32_t len, int32_t value);
static inline int32_t tok_trie_child(const tok_trie *t, int32_t node, unsigned char b)
{
    uint64_t v;
    return tok_u64map_get(&t->edges, (uint64_t)(uint32_t)node << 8 | b, &v) ? (int32_t)v : -1;
}
void tok_trie_free(tok_trie *t);

/* ------------------------------------------------------------------ */
/* Unicode helpers (tok_unicode.c, tok_unicode_norm.c). Inputs are valid UTF-8. */

static inline int tok_utf8_len(unsigned char lead)
{
    return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}
static inline int tok_utf8_decode(const char *p, uint32_t *cp)
{
    const unsigned char *s = (const unsigned char *)p;
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    if (s[0] < 0xE0) {
        *cp = ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
        return 2;
    }
    if (s[0] < 0xF0) {
        *cp = ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        return 3;
    }
    *cp = ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
          ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
    return 4;
}
static inline int tok_utf8_encode(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}
static inline int tok_utf8_cp_len(uint32_t cp)
{
    return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}
/* Byte offset of the first invalid sequence, or -1 when s is valid UTF-8. */
long tok_utf8_invalid_at(const char *s, size_t len);
/* Number of code points in s[0..len). */
int32_t tok_utf8_count(const char *s, int32_t len);

/* Rust char::is_whitespace (Unicode White_Space). Also what Rust's and
 * Oniguruma's \s match. */
int tok_is_whitespace(uint32_t c);
/* General category helpers (utf8proc tables). */
int tok_is_other_ccfco(uint32_t c);  /* Cc, Cf, Co: unicode_categories is_other */
int tok_is_punctuation(uint32_t c);  /* P*: unicode_categories is_punctuation */
int tok_is_bert_punct(uint32_t c);   /* ASCII punctuation or P* */
int tok_is_mark_nonspacing(uint32_t c);
int tok_is_combining_mark(uint32_t c); /* Mn, Mc, Me */
int tok_is_numeric(uint32_t c);        /* Rust char::is_numeric: Nd, Nl, No */
int tok_is_word(uint32_t c);           /* Rust regex \w */
int tok_is_chinese(uint32_t c);
/* Rust char::to_lowercase: writes 1 or 2 code points, returns the count. */
int tok_to_lower(uint32_t c, uint32_t out[2]);

/* Byte-level (GPT-2) alphabet: byte -> code point, and the inverse (-1). */
uint32_t tok_byte_to_char(unsigned char b);
int tok_char_to_byte(uint32_t c);

/* Unicode script id for UnicodeScripts (0 = Any). */
int tok_unicode_script(uint32_t c);

/* ------------------------------------------------------------------ */
/* An edit list: the (char, change) stream that NormalizedString::transform
 * consumes. change: 0 replaces a char, 1 inserts, -N replaces and removes
 * the N following chars. */
typedef struct tok_edits {
    uint32_t *cp;
    int32_t *chg;
    int n, cap;
} tok_edits;

struct tok_ctx;
void tok_edits_reset(struct tok_ctx *c, tok_edits *e, int hint);
void tok_edits_push(struct tok_ctx *c, tok_edits *e, uint32_t cp, int32_t chg);

enum { TOK_NFD, TOK_NFKD, TOK_NFC, TOK_NFKC };
/* Emits the unicode-normalization-alignments stream for s. */
void tok_unicode_normalize(struct tok_ctx *c, const char *s, int32_t len, int form, tok_edits *out);

/* ------------------------------------------------------------------ */
/* NormalizedString. Alignments are absolute byte offsets into the text
 * given to encode (the library keeps them relative to each slice and adds
 * an `original_shift`; both give the same numbers). Invariant: every byte of
 * one normalized char carries the same alignment. */
typedef struct tok_span {
    int32_t s, e;
} tok_span;

typedef struct tok_nstr {
    char *s;      /* normalized bytes (slices share their parent's buffer: not NUL-terminated) */
    int32_t len;
    tok_span *al; /* [len] */
    int32_t ostart, oend;
} tok_nstr;

typedef struct tok_match {
    int32_t s, e;
    int32_t m; /* 1 when this span matched the pattern */
} tok_match;

typedef struct tok_matches {
    tok_match *v;
    int n, cap;
} tok_matches;

enum tok_behavior {
    TOK_REMOVED,
    TOK_ISOLATED,
    TOK_MERGED_WITH_PREVIOUS,
    TOK_MERGED_WITH_NEXT,
    TOK_CONTIGUOUS,
};

void tok_ns_from(struct tok_ctx *c, tok_nstr *ns, const char *text, int32_t len);
/* NormalizedString::transform_range over normalized bytes [ns0, ns1). */
void tok_ns_transform_range(struct tok_ctx *c, tok_nstr *ns, int32_t n0, int32_t n1,
                            const tok_edits *ed, int initial_offset);
void tok_ns_transform(struct tok_ctx *c, tok_nstr *ns, const tok_edits *ed, int initial_offset);
void tok_ns_filter(struct tok_ctx *c, tok_nstr *ns, int (*keep)(uint32_t, const void *), const void *arg);
void tok_ns_map(struct tok_ctx *c, tok_nstr *ns, uint32_t (*fn)(uint32_t, const void *), const void *arg);
void tok_ns_lowercase(struct tok_ctx *c, tok_nstr *ns);
void tok_ns_prepend(struct tok_ctx *c, tok_nstr *ns, const char *s, int32_t len);
void tok_ns_replace(struct tok_ctx *c, tok_nstr *ns, const tok_matches *m, const char *content,
                    int32_t clen);
void tok_ns_strip(struct tok_ctx *c, tok_nstr *ns, int left, int right);
/* Returns 0 and the slice for normalized bytes [s, e); -1 when the range
 * does not fall on char boundaries. */
int tok_ns_slice(struct tok_ctx *c, const tok_nstr *ns, int32_t s, int32_t e, tok_nstr *out);
/* Maps normalized [s,e) to original offsets as PreTokenizedString::into_encoding. */
void tok_ns_to_original(const tok_nstr *ns, int32_t s, int32_t e, int32_t *os, int32_t *oe);
/* Pattern::find_matches for a char predicate. */
void tok_find_char_matches(struct tok_ctx *c, const char *s, int32_t len,
                           int (*pred)(uint32_t, const void *), const void *arg, tok_matches *out);

/* ------------------------------------------------------------------ */
/* Regex (PCRE2 with UTF+UCP, compiled at load). */
typedef struct tok_regex {
    pcre2_code *code;
    char *literal; /* non-NULL: plain substring search instead of PCRE2 */
    int32_t literal_len;
} tok_regex;

/* kind: 0 literal string, 1 regex (Oniguruma syntax as in tokenizer.json). */
int tok_regex_compile(tok_regex *re, const char *pattern, size_t len, int is_regex,
                      const char *what, iv_err *err);
void tok_regex_free(tok_regex *re);
/* Pattern::find_matches: spans covering s, matched ones flagged. */
int tok_regex_find_matches(struct tok_ctx *c, const tok_regex *re, const char *s, int32_t len,
                           tok_matches *out);

/* ------------------------------------------------------------------ */
/* PreTokenizedString. */
typedef struct tok_token {
    int32_t id;
    int32_t s, e;    /* offsets (normalized coordinates until converted) */
    const char *str; /* token string (not NUL-terminated) */
    int32_t slen;
} tok_token;

typedef struct tok_split {
    tok_nstr ns;
    tok_token *toks;
    int32_t ntoks;
    int32_t tokenized;
} tok_split;

typedef struct tok_splits {
    tok_split *v;
    int n, cap;
} tok_splits;

void tok_splits_push(struct tok_ctx *c, tok_splits *l, const tok_nstr *ns);
/* Slices ns by the spans the behavior keeps, appending non-empty pieces. */
void tok_split_by_matches(struct tok_ctx *c, const tok_nstr *ns, tok_matches *m, int behavior,
                          tok_splits *out);

/* ------------------------------------------------------------------ */
/* Pipeline components. */

typedef struct tok_precompiled {
    uint32_t *trie;
    size_t trie_len;
    char *normalized;
    size_t norm_len;
} tok_precompiled;

enum tok_norm_kind {
    TOK_N_BERT,
    TOK_N_NFC,
    TOK_N_NFD,
    TOK_N_NFKC,
    TOK_N_NFKD,
    TOK_N_LOWERCASE,
    TOK_N_STRIP,
    TOK_N_STRIP_ACCENTS,
    TOK_N_REPLACE,
    TOK_N_PREPEND,
    TOK_N_PRECOMPILED,
    TOK_N_BYTELEVEL,
    TOK_N_NMT,
    TOK_N_SEQUENCE,
};

typedef struct tok_normalizer {
    int kind;
    int clean_text, handle_chinese, strip_accents, lowercase; /* BertNormalizer */
    int strip_left, strip_right;                              /* Strip */
    tok_regex re;                                             /* Replace */
    char *content;                                            /* Replace, Prepend */
    int32_t content_len;
    tok_precompiled pc;
    struct tok_normalizer *items; /* Sequence */
    int n_items;
} tok_normalizer;

enum tok_pretok_kind {
    TOK_P_BERT,
    TOK_P_BYTELEVEL,
    TOK_P_WHITESPACE,
    TOK_P_WHITESPACE_SPLIT,
    TOK_P_METASPACE,
    TOK_P_SPLIT,
    TOK_P_PUNCTUATION,
    TOK_P_DIGITS,
    TOK_P_UNICODE_SCRIPTS,
    TOK_P_CHAR_DELIMITER,
    TOK_P_FIXED_LENGTH,
    TOK_P_SEQUENCE,
};

enum tok_prepend_scheme { TOK_PREPEND_ALWAYS, TOK_PREPEND_FIRST, TOK_PREPEND_NEVER };

typedef struct tok_pretokenizer {
    int kind;
    int add_prefix_space, trim_offsets, use_regex; /* ByteLevel */
    uint32_t replacement;                          /* Metaspace */
    char rep_str[8];
    int32_t rep_len;
    int prepend_scheme, split;
    tok_regex re; /* Split, ByteLevel */
    int behavior, invert;
    int individual_digits;
    uint32_t delimiter;
    int length;
    struct tok_pretokenizer *items;
    int n_items;
} tok_pretokenizer;

enum tok_model_kind { TOK_M_WORDPIECE, TOK_M_BPE, TOK_M_UNIGRAM, TOK_M_WORDLEVEL };

typedef struct tok_model {
    int kind;
    uint32_t nul_ph;      /* code point standing for U+0000 in the parsed JSON (0: none) */
    tok_strmap vocab;     /* token -> id */
    const char **id_str;  /* id -> token (NULL for holes) */
    int32_t *id_len;
    int32_t n_ids;        /* max id + 1 */
    int32_t vocab_size;   /* the library's get_vocab_size() */
    int32_t unk_id;       /* -1 when none */
    char *unk_token;
    int32_t unk_len;
    /* WordPiece */
    char *prefix;
    int32_t prefix_len;
    int max_chars;
    /* BPE */
    tok_u64map merges;    /* (left id << 32 | right id) -> (rank << 32 | new id) */
    char *suffix;         /* end_of_word_suffix */
    int32_t suffix_len;
    int has_prefix, has_suffix;
    int fuse_unk, byte_fallback, ignore_merges;
    int32_t byte_ids[256]; /* "<0xXX>" ids, -1 when absent */
    /* Unigram: trie of pieces -> piece id. WordPiece: trie of all keys and
     * trie2 of continuation keys without their prefix -> vocab entry index. */
    double *scores;
    double min_score;
    tok_trie trie, trie2;
} tok_model;

typedef struct tok_added_token {
    char *content;
    int32_t len;
    char *match; /* the form matched against text: content, or its normalized form */
    int32_t match_len;
    char *decode_str; /* what decode() emits: normalized form when it differs */
    int32_t decode_len;
    int32_t id;
    uint8_t special, single_word, lstrip, rstrip, normalized;
} tok_added_token;

/* Leftmost-longest matcher over a small set of patterns. */
typedef struct tok_matcher {
    int32_t *by_byte[256]; /* token indices by first byte, longest first, -1 terminated */
    int any;
} tok_matcher;

typedef struct tok_added_vocab {
    tok_added_token *toks;
    int n;
    tok_strmap by_content; /* content -> index into toks */
    tok_u64map by_id;      /* id -> index into toks */
    tok_strmap special;    /* contents of special tokens */
    tok_matcher raw, norm;
} tok_added_vocab;

typedef struct tok_tpl_piece {
    int is_seq;
    int seq; /* 0: A, 1: B */
    int type_id;
    int special; /* index into specials */
} tok_tpl_piece;

typedef struct tok_special {
    char *name;
    int n;
    int32_t *ids;
    char **toks;
    int32_t *tok_lens;
} tok_special;

enum tok_post_kind { TOK_PP_TEMPLATE, TOK_PP_BERT, TOK_PP_ROBERTA, TOK_PP_BYTELEVEL, TOK_PP_SEQUENCE };

typedef struct tok_postproc {
    int kind;
    tok_tpl_piece *single, *pair;
    int n_single, n_pair;
    tok_special *specials;
    int n_specials;
    int added_single, added_pair;
    char *sep, *cls; /* Bert, Roberta */
    int32_t sep_len, cls_len, sep_id, cls_id;
    int trim_offsets, add_prefix_space;
    struct tok_postproc *items;
    int n_items;
} tok_postproc;

enum tok_dec_kind {
    TOK_D_WORDPIECE,
    TOK_D_BYTELEVEL,
    TOK_D_METASPACE,
    TOK_D_BPE,
    TOK_D_BYTE_FALLBACK,
    TOK_D_FUSE,
    TOK_D_STRIP,
    TOK_D_REPLACE,
    TOK_D_CTC,
    TOK_D_SEQUENCE,
};

typedef struct tok_decoder {
    int kind;
    char *prefix; /* WordPiece prefix, BPE suffix, CTC pad token */
    int32_t prefix_len;
    char *word_delim; /* CTC */
    int32_t word_delim_len;
    int cleanup;
    uint32_t replacement; /* Metaspace, Strip content */
    int prepend_scheme;
    int start, stop; /* Strip */
    tok_regex re;    /* Replace */
    char *content;
    int32_t content_len;
    struct tok_decoder *items;
    int n_items;
} tok_decoder;

struct iv_tokenizer {
    tok_normalizer *normalizer;
    tok_pretokenizer *pretok;
    tok_model model;
    tok_postproc *post;
    tok_decoder *decoder;
    tok_added_vocab added;
    int model_max_length;
    int32_t config_unk_id; /* tokenizer_config.json unk_token's id; -1: not given or not in the vocabulary */
};

/* ------------------------------------------------------------------ */
/* Per-call context. */
typedef struct tok_ctx {
    tok_arena a;
    jmp_buf oom;
    pcre2_match_data *md;
    const iv_tokenizer *tok;
    iv_err *err;
    tok_edits ed; /* scratch edit list */
} tok_ctx;

int tok_ctx_init(tok_ctx *c, const iv_tokenizer *tok, iv_err *err);
void tok_ctx_free(tok_ctx *c);

/* Stage entry points. */
int tok_normalize(tok_ctx *c, const tok_normalizer *n, tok_nstr *ns);
int tok_pretokenize(tok_ctx *c, const tok_pretokenizer *p, tok_splits *splits);
int tok_model_tokenize(tok_ctx *c, const tok_model *m, const char *s, int32_t len, tok_token **out,
                       int32_t *n);
/* Splits text on added tokens (raw phase, then normalization + normalized
 * phase), as AddedVocabulary::extract_and_normalize. */
int tok_extract_and_normalize(tok_ctx *c, const iv_tokenizer *tok, const char *text, int32_t len,
                              tok_splits *out);

/* Encoding under construction (arena). */
typedef struct tok_enc {
    int n, cap;
    int32_t *ids, *type_ids, *offs, *seq;
    uint8_t *special;
    const char **str;
    int32_t *slen;
} tok_enc;

void tok_enc_push(tok_ctx *c, tok_enc *e, int32_t id, int32_t type_id, int32_t s, int32_t en,
                  int32_t seq, int special, const char *str, int32_t slen);
void tok_enc_append(tok_ctx *c, tok_enc *dst, const tok_enc *src);
void tok_enc_truncate(tok_enc *e, int max_len, int left);

/* The texts the offsets of sequence 0 and 1 refer to. */
typedef struct tok_post_text {
    const char *s;
    int32_t len;
    int32_t *b2c, *c2b; /* byte <-> char maps, built when first needed */
    int32_t nchars;
} tok_post_text;
int tok_postprocess(tok_ctx *c, const tok_postproc *pp, tok_enc *encs, int n_enc, int add_special,
                    tok_post_text *texts, tok_enc *out);
int tok_post_added(const tok_postproc *pp, int pair);
/* truncate_encodings: returns -1 with err set when it cannot fit. */
int tok_truncate(tok_ctx *c, tok_enc *a, tok_enc *b, int max_length, int strategy, int left);

/* Decoder: transforms a token list in place (arena strings). */
typedef struct tok_strs {
    char **s;
    int32_t *len;
    int n, cap;
} tok_strs;
void tok_strs_push(tok_ctx *c, tok_strs *l, const char *s, int32_t len);
int tok_decode_chain(tok_ctx *c, const tok_decoder *d, tok_strs *toks);

/* ------------------------------------------------------------------ */
/* Loaders (tokenizer.json sections). Errors name the component and field. */
int tok_load_normalizer(const cJSON *j, tok_normalizer *n, const char *path, iv_err *err);
void tok_free_normalizer(tok_normalizer *n);
int tok_load_pretokenizer(const cJSON *j, tok_pretokenizer *p, const char *path, iv_err *err);
void tok_free_pretokenizer(tok_pretokenizer *p);
int tok_load_model(const cJSON *j, tok_model *m, uint32_t nul_ph, iv_err *err);
void tok_free_model(tok_model *m);
int tok_load_postproc(const cJSON *j, tok_postproc *pp, const char *path, iv_err *err);
void tok_free_postproc(tok_postproc *pp);
int tok_load_decoder(const cJSON *j, tok_decoder *d, const char *path, iv_err *err);
void tok_free_decoder(tok_decoder *d);
int tok_load_added_tokens(const cJSON *arr, iv_tokenizer *tok, iv_err *err);
void tok_free_added(tok_added_vocab *av);
int tok_precompiled_load(tok_precompiled *pc, const char *b64, iv_err *err);
void tok_precompiled_normalize(tok_ctx *c, const tok_precompiled *pc, tok_nstr *ns);
int tok_load_template(const cJSON *j, tok_postproc *pp, const char *what, iv_err *err);
/* Builds the Llama-style template from add_bos_token/add_eos_token. */
int tok_template_from_flags(tok_postproc *pp, const char *bos, int32_t bos_id, const char *eos,
                            int32_t eos_id, int add_bos, int add_eos, iv_err *err);

/* Model loading helpers shared by model_*.c. */
int tok_load_vocab_object(const cJSON *v, tok_model *m, const char *what, iv_err *err);
int tok_json_opt_string(const cJSON *j, const char *key, char **out, int32_t *len, const char *what,
                        iv_err *err);

/* Model lookups used by the loader and the public API. */
int32_t tok_model_token_to_id(const tok_model *m, const char *s, int32_t len);
const char *tok_model_id_to_token(const tok_model *m, int32_t id, int32_t *len);

/* JSON helpers shared by the loaders. */
const char *tok_json_type(const cJSON *j);
/* Size of the "path (type)" label a component's errors start with. */
#define TOK_WHAT_LEN 160
/* The "type" of the tokenizer.json component at `path` (e.g.
 * "normalizer.normalizers[1]"), with `what` set to "path (type)"; NULL with
 * err set when the component has no type. */
const char *tok_json_component(const cJSON *j, const char *path, char what[TOK_WHAT_LEN], iv_err *err);
/* A malloc'd copy of the string j[key] (absent or null: def; no def: an
 * error naming the key) and its length. */
int tok_json_dup_str(const cJSON *j, const char *key, const char *def, char **out, int32_t *len, const char *what,
                     iv_err *err);
/* Compiles j["pattern"], {"String": literal} or {"Regex": pattern}, into re. */
int tok_json_pattern(const cJSON *j, tok_regex *re, const char *what, iv_err *err);
/* Loads one member of a Sequence component (e.g. tok_load_normalizer). */
typedef int (*tok_member_loader)(const cJSON *j, void *member, const char *path, iv_err *err);
/* The members of a Sequence component: j[key] must be an array; *members
 * becomes a calloc'd array of as many elements of member_size bytes, filled
 * in order by load(item, element, "<path>.<key>[i]", err). *n counts the
 * elements load ran on, a failed one included, so the component's free
 * releases whatever was loaded (each loader clears its element first). */
int tok_json_members(const cJSON *j, const char *key, size_t member_size, tok_member_loader load, void **members,
                     int *n, const char *path, const char *what, iv_err *err);
int tok_json_split_behavior(const cJSON *j, const char *key, int def, int *out, const char *what,
                            iv_err *err);
/* Reads a one-character string (Rust char) field. */
int tok_json_char(const cJSON *j, const char *key, uint32_t def, uint32_t *out, const char *what,
                  iv_err *err);
char *tok_xstrdup(const char *s);
/* The bytes of a string from the parsed tokenizer.json, with the U+0000
 * placeholder `ph` (see tok_load.c) turned back into NUL bytes. Returns s
 * itself, or a malloc'd copy stored in *tmp (free it; NULL on OOM). */
const char *tok_json_bytes(const char *s, uint32_t ph, int32_t *len, char **tmp);
/* Finds a code point absent from text, to stand for U+0000 while cJSON
 * parses it, and rewrites the \u0000 escapes; 0 and no copy when the text
 * has none. */
char *tok_json_protect_nul(const char *text, size_t len, size_t *out_len, uint32_t *ph);
char *tok_xmemdup(const char *s, size_t n);

#endif
