/* Encode and decode: the pipeline of TokenizerImpl::encode_char_offsets
 * (added tokens + normalizer, pre-tokenizer, model, truncation,
 * post-processor) and TokenizerImpl::decode, on immutable components and
 * one arena per call. Offsets are reported in bytes; the CLI converts them
 * to the chars Python reports with iv_tokenizer_char_offsets(). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

int tok_ctx_init(tok_ctx *c, const iv_tokenizer *tok, iv_err *err)
{
    memset(c, 0, sizeof *c);
    tok_arena_init(&c->a, &c->oom);
    c->tok = tok;
    c->err = err;
    c->md = pcre2_match_data_create(1, NULL);
    if (!c->md) return iv_errf(err, IV_E_NOMEM, "out of memory creating regex match data");
    return 0;
}

void tok_ctx_free(tok_ctx *c)
{
    if (c->md) pcre2_match_data_free(c->md);
    c->md = NULL;
    tok_arena_free(&c->a);
}

iv_encode_opts iv_encode_opts_default(void)
{
    iv_encode_opts o;
    memset(&o, 0, sizeof o);
    o.add_special_tokens = 1;
    o.strategy = IV_TRUNC_LONGEST_FIRST;
    return o;
}

/* Every split is tokenized: tokenizers 0.23.3 (the reference) has no
 * early exit under truncation, and truncate_encodings depends on the full
 * lengths (longest_first compares them). */
static int tokenize_splits(tok_ctx *c, tok_splits *sp)
{
    const tok_model *m = &c->tok->model;
    for (int i = 0; i < sp->n; i++) {
        tok_split *s = &sp->v[i];
        if (s->tokenized) continue;
        if (tok_model_tokenize(c, m, s->ns.s, s->ns.len, &s->toks, &s->ntoks)) return -1;
        s->tokenized = 1;
    }
    return 0;
}

static int encode_sequence(tok_ctx *c, const char *text, int32_t len, int seq, tok_enc *out)
{
    const iv_tokenizer *tok = c->tok;
    tok_splits sp = {0};
    if (tok_extract_and_normalize(c, tok, text, len, &sp)) return -1;
    if (tok->pretok && tok_pretokenize(c, tok->pretok, &sp)) return -1;
    if (tokenize_splits(c, &sp)) return -1;
    for (int i = 0; i < sp.n; i++) {
        const tok_split *s = &sp.v[i];
        for (int k = 0; k < s->ntoks; k++) {
            const tok_token *t = &s->toks[k];
            int32_t os, oe;
            tok_ns_to_original(&s->ns, t->s, t->e, &os, &oe);
            tok_enc_push(c, out, t->id, seq, os, oe, seq, 0, t->str, t->slen);
        }
    }
    return 0;
}

static int check_utf8(const char *s, size_t len, const char *which, iv_err *err)
{
    if (len > INT32_MAX / 4) return iv_errf(err, IV_E_TOO_LARGE, "%s text is %zu bytes, over the 512 MiB limit", which, len);
    long bad = tok_utf8_invalid_at(s, len);
    if (bad >= 0)
        return iv_errf(err, IV_E_INVALID, "%s text is not valid UTF-8 (invalid byte 0x%02X at offset %ld)", which,
                       (unsigned char)s[bad], bad);
    return 0;
}

static int copy_out(const tok_enc *e, int want_tokens, iv_encoding *out, iv_err *err)
{
    int n = e->n;
    size_t n1 = n ? (size_t)n : 1;
    /* One block: ids, type_ids, offsets, seq_index, special_mask. */
    size_t bytes = n1 * sizeof(int32_t) * 5 + n1;
    char *blk = malloc(bytes);
    if (!blk) return iv_errf(err, IV_E_NOMEM, "out of memory for the encoding");
    out->len = n;
    out->ids = (int32_t *)blk;
    out->type_ids = out->ids + n1;
    out->offsets = out->type_ids + n1;
    out->seq_index = out->offsets + 2 * n1;
    out->special_mask = (uint8_t *)(out->seq_index + n1);
    out->tokens = NULL;
    for (int i = 0; i < n; i++) {
        out->ids[i] = e->ids[i];
        out->type_ids[i] = e->type_ids[i];
        out->offsets[2 * i] = e->offs[2 * i];
        out->offsets[2 * i + 1] = e->offs[2 * i + 1];
        out->seq_index[i] = e->seq[i];
        out->special_mask[i] = e->special[i];
    }
    if (want_tokens) {
        size_t sbytes = 0;
        for (int i = 0; i < n; i++) sbytes += (size_t)e->slen[i] + 1;
        char *tb = malloc(n1 * (sizeof(char *) + sizeof(int32_t)) + sbytes + 1);
        if (!tb) {
            free(blk);
            memset(out, 0, sizeof *out);
            return iv_errf(err, IV_E_NOMEM, "out of memory for the encoding tokens");
        }
        out->tokens = (char **)tb;
        out->token_lens = (int32_t *)(tb + n1 * sizeof(char *));
        char *p = tb + n1 * (sizeof(char *) + sizeof(int32_t));
        for (int i = 0; i < n; i++) {
            out->tokens[i] = p;
            out->token_lens[i] = e->slen[i];
            memcpy(p, e->str[i], (size_t)e->slen[i]);
            p += e->slen[i];
            *p++ = 0;
        }
    }
    return 0;
}

typedef struct encode_args {
    const char *text, *pair;
    size_t text_len, pair_len;
    const iv_encode_opts *opts;
    iv_encoding *out;
} encode_args;

__attribute__((noinline)) static int encode_impl(tok_ctx *c, const encode_args *a)
{
    const iv_tokenizer *tok = c->tok;
    const iv_encode_opts *opts = a->opts;
    int pair = a->pair != NULL;
    int n_added = tok->post ? tok_post_added(tok->post, pair) : 0;
    int trunc = opts->max_length > 0;
    tok_enc ea = {0}, eb = {0}, fin = {0};
    if (encode_sequence(c, a->text, (int32_t)a->text_len, 0, &ea)) return -1;
    if (pair && encode_sequence(c, a->pair, (int32_t)a->pair_len, 1, &eb)) return -1;
    int before = ea.n + eb.n;
    if (trunc) {
        int max = opts->max_length;
        if (opts->add_special_tokens && n_added > 0) {
            /* The library computes max_length - added in unsigned arithmetic:
             * when the special tokens alone exceed max_length it wraps
             * around and nothing is truncated. */
            if (max < n_added) max = INT32_MAX;
            else max -= n_added;
        }
        if (tok_truncate(c, &ea, pair ? &eb : NULL, max, opts->strategy, opts->truncate_left)) return -1;
    }
    int dropped = before - (ea.n + eb.n);
    tok_enc encs[2] = {ea, eb};
    tok_post_text texts[2] = {{a->text, (int32_t)a->text_len, NULL, NULL, 0},
                              {pair ? a->pair : "", (int32_t)a->pair_len, NULL, NULL, 0}};
    if (tok->post) {
        if (tok_postprocess(c, tok->post, encs, pair ? 2 : 1, opts->add_special_tokens, texts, &fin)) return -1;
    } else {
        tok_enc_append(c, &fin, &encs[0]);
        if (pair) tok_enc_append(c, &fin, &encs[1]);
    }
    if (copy_out(&fin, opts->want_tokens, a->out, c->err)) return -1;
    a->out->n_truncated = dropped;
    return 0;
}

/* Owns the setjmp that catches arena exhaustion during one encode. */
__attribute__((noinline)) static int run_encode(const iv_tokenizer *tok, const encode_args *args, iv_err *err)
{
    tok_ctx c;
    if (tok_ctx_init(&c, tok, err)) return -1;
    int rc;
    if (setjmp(c.oom) == 0) rc = encode_impl(&c, args);
    else rc = iv_errf(err, IV_E_NOMEM, "out of memory while encoding");
    tok_ctx_free(&c);
    return rc;
}

int iv_tokenizer_encode(const iv_tokenizer *tok, const char *text, size_t text_len, const char *pair, size_t pair_len,
                        const iv_encode_opts *opts, iv_encoding *out, iv_err *err)
{
    memset(out, 0, sizeof *out);
    iv_encode_opts def = iv_encode_opts_default();
    if (!opts) opts = &def;
    if (!text && text_len) return iv_errf(err, IV_E_INVALID, "text is NULL");
    if (!text) text = "";
    if (check_utf8(text, text_len, "input", err)) return -1;
    if (pair && check_utf8(pair, pair_len, "pair", err)) return -1;
    if (opts->max_length < 0) return iv_errf(err, IV_E_INVALID, "max_length must be >= 0, got %d", opts->max_length);
    encode_args args = {text, pair, text_len, pair_len, opts, out};
    int rc = run_encode(tok, &args, err);
    if (rc) iv_encoding_free(out);
    return rc;
}

void iv_encoding_free(iv_encoding *enc)
{
    if (!enc) return;
    free(enc->ids);
    free(enc->tokens);
    memset(enc, 0, sizeof *enc);
}

/* ---------------------------------------------------------------- decode */

/* Runs the decoder chain over the token strings and joins what it gives
 * into one malloc'd string. */
static int decoded_string(tok_ctx *c, tok_strs *toks, char **out, size_t *out_len)
{
    const iv_tokenizer *tok = c->tok;
    if (tok->decoder && tok_decode_chain(c, tok->decoder, toks)) return -1;
    size_t total = 0;
    for (int i = 0; i < toks->n; i++) total += (size_t)toks->len[i] + 1;
    char *s = malloc(total + 1);
    if (!s) return iv_errf(c->err, IV_E_NOMEM, "out of memory while decoding");
    size_t o = 0;
    for (int i = 0; i < toks->n; i++) {
        /* Without a decoder the library joins tokens with spaces. */
        if (!tok->decoder && i > 0) s[o++] = ' ';
        memcpy(s + o, toks->s[i], (size_t)toks->len[i]);
        o += (size_t)toks->len[i];
    }
    s[o] = 0;
    *out = s;
    if (out_len) *out_len = o;
    return 0;
}

typedef struct decode_args {
    const int32_t *ids;
    int n, skip_special;
    char **out;
    size_t *out_len;
} decode_args;

__attribute__((noinline)) static int decode_impl(tok_ctx *c, const decode_args *a)
{
    const iv_tokenizer *tok = c->tok;
    tok_strs toks = {0};
    for (int i = 0; i < a->n; i++) {
        const char *s = NULL;
        int32_t len = 0;
        uint64_t idx;
        if (tok_u64map_get(&tok->added.by_id, (uint64_t)(uint32_t)a->ids[i], &idx)) {
            const tok_added_token *t = &tok->added.toks[idx];
            s = t->decode_str;
            len = t->decode_len;
        } else {
            s = tok_model_id_to_token(&tok->model, a->ids[i], &len);
        }
        if (!s) continue;
        if (a->skip_special && tok_strmap_get(&tok->added.special, s, len) >= 0) continue;
        tok_strs_push(c, &toks, s, len);
    }
    return decoded_string(c, &toks, a->out, a->out_len);
}

int iv_tokenizer_decode(const iv_tokenizer *tok, const int32_t *ids, int n, int skip_special_tokens, char **out,
                        iv_err *err)
{
    return iv_tokenizer_decode_n(tok, ids, n, skip_special_tokens, out, NULL, err);
}

int iv_tokenizer_decode_n(const iv_tokenizer *tok, const int32_t *ids, int n, int skip_special_tokens, char **out,
                          size_t *out_len, iv_err *err)
{
    *out = NULL;
    if (out_len) *out_len = 0;
    decode_args args = {ids, n, skip_special_tokens, out, out_len};
    tok_ctx c;
    if (tok_ctx_init(&c, tok, err)) return -1;
    int rc;
    if (setjmp(c.oom) == 0) {
        rc = decode_impl(&c, &args);
    } else {
        rc = iv_errf(err, IV_E_NOMEM, "out of memory while decoding");
    }
    tok_ctx_free(&c);
    return rc;
}

typedef struct decode_tokens_args {
    const char *const *tokens;
    const int32_t *lens;
    int n;
    char **out;
    size_t *out_len;
} decode_tokens_args;

__attribute__((noinline)) static int decode_tokens_impl(tok_ctx *c, const decode_tokens_args *a)
{
    tok_strs toks = {0};
    for (int i = 0; i < a->n; i++)
        tok_strs_push(c, &toks, a->tokens[i], a->lens ? a->lens[i] : (int32_t)strlen(a->tokens[i]));
    return decoded_string(c, &toks, a->out, a->out_len);
}

int iv_tokenizer_decode_tokens(const iv_tokenizer *tok, const char *const *tokens, const int32_t *lens, int n,
                               char **out, size_t *out_len, iv_err *err)
{
    *out = NULL;
    if (out_len) *out_len = 0;
    decode_tokens_args args = {tokens, lens, n, out, out_len};
    tok_ctx c;
    if (tok_ctx_init(&c, tok, err)) return -1;
    int rc;
    if (setjmp(c.oom) == 0) rc = decode_tokens_impl(&c, &args);
    else rc = iv_errf(err, IV_E_NOMEM, "out of memory while decoding");
    tok_ctx_free(&c);
    return rc;
}

int iv_tokenizer_prepend_lowercase(iv_tokenizer *tok, iv_err *err)
{
    tok_normalizer *n = tok->normalizer;
    if (n && n->kind == TOK_N_LOWERCASE) return 0;
    const int seq = n && n->kind == TOK_N_SEQUENCE;
    for (int i = 0; seq && i < n->n_items; i++)
        if (n->items[i].kind == TOK_N_LOWERCASE) return 0;
    const int rest = seq ? n->n_items : n ? 1 : 0;
    tok_normalizer *s = calloc(1, sizeof *s);
    tok_normalizer *items = calloc((size_t)rest + 1, sizeof *items);
    if (!s || !items) {
        free(s);
        free(items);
        return iv_errf(err, IV_E_NOMEM, "out of memory");
    }
    items[0].kind = TOK_N_LOWERCASE;
    if (seq) {
        memcpy(items + 1, n->items, (size_t)rest * sizeof *items); /* members move; the old shell goes */
        free(n->items);
    } else if (n) {
        items[1] = *n;
    }
    free(n);
    s->kind = TOK_N_SEQUENCE;
    s->items = items;
    s->n_items = rest + 1;
    tok->normalizer = s;
    return 0;
}

/* ------------------------------------------------------------- lookups */

int32_t iv_tokenizer_unk_id(const iv_tokenizer *tok)
{
    return tok->config_unk_id >= 0 ? tok->config_unk_id : tok->model.unk_id;
}

int iv_tokenizer_has_subword_prefix(const iv_tokenizer *tok)
{
    const tok_model *m = &tok->model;
    if (m->kind == TOK_M_WORDPIECE) return m->prefix_len > 0;
    return m->kind == TOK_M_BPE && m->has_prefix && m->prefix_len > 0;
}

int iv_tokenizer_vocab_size(const iv_tokenizer *tok)
{
    /* get_vocab_size(with_added_tokens=True) */
    int n = tok->model.vocab_size, added = 0, overlap = 0;
    for (int i = 0; i < tok->added.by_content.n; i++) {
        const tok_strmap_ent *e = &tok->added.by_content.ents[i];
        added++;
        if (tok_model_token_to_id(&tok->model, e->key, e->len) >= 0) overlap++;
    }
    return n + added - overlap;
}

int32_t iv_tokenizer_token_to_id(const iv_tokenizer *tok, const char *token)
{
    int32_t len = (int32_t)strlen(token);
    int32_t idx = tok_strmap_get(&tok->added.by_content, token, len);
    if (idx >= 0) return tok->added.toks[idx].id;
    return tok_model_token_to_id(&tok->model, token, len);
}

const char *iv_tokenizer_id_to_token(const iv_tokenizer *tok, int32_t id)
{
    uint64_t idx;
    if (tok_u64map_get(&tok->added.by_id, (uint64_t)(uint32_t)id, &idx)) return tok->added.toks[idx].decode_str;
    int32_t len;
    return tok_model_id_to_token(&tok->model, id, &len);
}

int iv_tokenizer_num_special_tokens(const iv_tokenizer *tok, int pair)
{
    return tok->post ? tok_post_added(tok->post, pair) : 0;
}

int iv_tokenizer_is_special_id(const iv_tokenizer *tok, int32_t id)
{
    uint64_t idx;
    return tok_u64map_get(&tok->added.by_id, (uint64_t)(uint32_t)id, &idx) && tok->added.toks[idx].special;
}

int iv_tokenizer_model_max_length(const iv_tokenizer *tok)
{
    return tok->model_max_length;
}

int32_t iv_utf8_byte_to_char_offset(const char *text, size_t len, int32_t byte_off)
{
    if (byte_off <= 0) return 0;
    if ((size_t)byte_off > len) return tok_utf8_count(text, (int32_t)len) + (int32_t)((size_t)byte_off - len);
    return tok_utf8_count(text, byte_off);
}

int iv_tokenizer_char_offsets(const char *text, size_t len, int32_t *pairs, int n)
{
    /* The library's BytesToCharOffsetConverter: every byte of a char maps to
     * the char's index; an end past the last byte maps to (char of byte
     * end-1) + 1; a start outside the text leaves the pair in bytes. */
    if (n <= 0) return 0;
    int32_t *map = malloc(sizeof *map * (len ? len : 1));
    if (!map) return -1;
    int32_t ci = -1;
    for (size_t i = 0; i < len; i++) {
        ci += ((unsigned char)text[i] & 0xC0) != 0x80;
        map[i] = ci;
    }
    for (int k = 0; k < n; k++) {
        int32_t s = pairs[2 * k], e = pairs[2 * k + 1];
        if (s < 0 || (size_t)s > len) continue;
        /* A start at the very end is where the library's byte-level offset
         * trimming leaves empty tokens (it works on chars): report the char
         * count. */
        int32_t cs = (size_t)s == len ? ci + 1 : map[s], ce;
        if (e >= 0 && (size_t)e < len) ce = map[e];
        else if (e >= 1 && (size_t)(e - 1) < len) ce = map[e - 1] + 1;
        else if ((size_t)s == len) ce = cs;
        else ce = cs + 2;
        pairs[2 * k] = cs;
        pairs[2 * k + 1] = ce;
    }
    free(map);
    return 0;
}
