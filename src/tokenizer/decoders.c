/* Decoders: loading and decode_chain over a list of token strings
 * (WordPiece, ByteLevel, Metaspace, BPEDecoder, ByteFallback, Fuse, Strip,
 * Replace, CTC, Sequence). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "tokenizer/tok_internal.h"

/* ------------------------------------------------------------- loading */

/* tok_json_members' view of tok_load_decoder. */
static int load_member(const cJSON *j, void *member, const char *path, iv_err *err)
{
    return tok_load_decoder(j, member, path, err);
}

int tok_load_decoder(const cJSON *j, tok_decoder *d, const char *path, iv_err *err)
{
    memset(d, 0, sizeof *d);
    char what[TOK_WHAT_LEN];
    const char *type = tok_json_component(j, path, what, err);
    if (!type) return -1;
    if (!strcmp(type, "WordPiece")) {
        d->kind = TOK_D_WORDPIECE;
        return tok_json_dup_str(j, "prefix", "##", &d->prefix, &d->prefix_len, what, err) ||
                       iv_json_bool_chk(j, "cleanup", 1, &d->cleanup, what, err)
                   ? -1
                   : 0;
    }
    if (!strcmp(type, "ByteLevel")) {
        d->kind = TOK_D_BYTELEVEL;
        return 0;
    }
    if (!strcmp(type, "Metaspace")) {
        d->kind = TOK_D_METASPACE;
        if (tok_json_char(j, "replacement", 0x2581, &d->replacement, what, err)) return -1;
        const char *scheme = iv_json_str(j, "prepend_scheme", NULL);
        int add_prefix = -1;
        if (iv_json_bool_chk(j, "add_prefix_space", -1, &add_prefix, what, err)) return -1;
        d->prepend_scheme = TOK_PREPEND_ALWAYS;
        if (scheme) {
            if (!strcmp(scheme, "first")) d->prepend_scheme = TOK_PREPEND_FIRST;
            else if (!strcmp(scheme, "never")) d->prepend_scheme = TOK_PREPEND_NEVER;
            else if (strcmp(scheme, "always"))
                return iv_errf(err, IV_E_FORMAT, "%s: \"prepend_scheme\" must be first, always or never", what);
        } else if (add_prefix == 0) {
            d->prepend_scheme = TOK_PREPEND_NEVER;
        }
        return 0;
    }
    if (!strcmp(type, "BPEDecoder")) {
        d->kind = TOK_D_BPE;
        return tok_json_dup_str(j, "suffix", "</w>", &d->prefix, &d->prefix_len, what, err);
    }
    if (!strcmp(type, "ByteFallback")) {
        d->kind = TOK_D_BYTE_FALLBACK;
        return 0;
    }
    if (!strcmp(type, "Fuse")) {
        d->kind = TOK_D_FUSE;
        return 0;
    }
    if (!strcmp(type, "Strip")) {
        d->kind = TOK_D_STRIP;
        int64_t start = 0, stop = 0;
        if (tok_json_char(j, "content", ' ', &d->replacement, what, err) ||
            iv_json_int_chk(j, "start", 0, &start, what, err) || iv_json_int_chk(j, "stop", 0, &stop, what, err))
            return -1;
        if (start < 0 || stop < 0 || start > 1 << 20 || stop > 1 << 20)
            return iv_errf(err, IV_E_FORMAT, "%s: \"start\" and \"stop\" must be small non-negative integers", what);
        d->start = (int)start;
        d->stop = (int)stop;
        return 0;
    }
    if (!strcmp(type, "Replace")) {
        d->kind = TOK_D_REPLACE;
        if (tok_json_pattern(j, &d->re, what, err)) return -1;
        return tok_json_dup_str(j, "content", NULL, &d->content, &d->content_len, what, err);
    }
    if (!strcmp(type, "CTC")) {
        d->kind = TOK_D_CTC;
        if (tok_json_dup_str(j, "pad_token", "<pad>", &d->prefix, &d->prefix_len, what, err) ||
            tok_json_dup_str(j, "word_delimiter_token", "|", &d->word_delim, &d->word_delim_len, what, err))
            return -1;
        return iv_json_bool_chk(j, "cleanup", 1, &d->cleanup, what, err);
    }
    if (!strcmp(type, "Sequence")) {
        d->kind = TOK_D_SEQUENCE;
        void *items;
        const int rc =
            tok_json_members(j, "decoders", sizeof *d->items, load_member, &items, &d->n_items, path, what, err);
        d->items = items;
        return rc;
    }
    return iv_errf(err, IV_E_UNSUPPORTED, "%s: unknown decoder type \"%s\"", path, type);
}

void tok_free_decoder(tok_decoder *d)
{
    if (!d) return;
    free(d->prefix);
    free(d->word_delim);
    free(d->content);
    tok_regex_free(&d->re);
    for (int i = 0; i < d->n_items; i++) tok_free_decoder(&d->items[i]);
    free(d->items);
    memset(d, 0, sizeof *d);
}

/* ------------------------------------------------------------ decoding */

void tok_strs_push(tok_ctx *c, tok_strs *l, const char *s, int32_t len)
{
    if (l->n == l->cap) {
        int cap = l->cap, cap2 = l->cap;
        l->s = tok_grow(&c->a, l->s, &cap, l->n + 1, sizeof *l->s);
        l->len = tok_grow(&c->a, l->len, &cap2, l->n + 1, sizeof *l->len);
        l->cap = cap;
    }
    l->s[l->n] = tok_strdup_arena(&c->a, s, len);
    l->len[l->n] = len;
    l->n++;
}

/* A growable arena string. */
typedef struct sbuf {
    char *p;
    int32_t n, cap;
} sbuf;

static void sb_add(tok_ctx *c, sbuf *b, const char *s, int32_t n)
{
    if (b->n + n + 1 > b->cap) b->p = tok_grow(&c->a, b->p, &b->cap, b->n + n + 1, 1);
    memcpy(b->p + b->n, s, (size_t)n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_cp(tok_ctx *c, sbuf *b, uint32_t cp)
{
    char u[4];
    sb_add(c, b, u, tok_utf8_encode(cp, u));
}

/* Rust str::replace: all non-overlapping occurrences, left to right. */
static void replace_all(tok_ctx *c, char **s, int32_t *len, const char *from, const char *to)
{
    int32_t fl = (int32_t)strlen(from), tl = (int32_t)strlen(to);
    const char *hit = memmem(*s, (size_t)*len, from, (size_t)fl);
    if (!hit) return;
    sbuf b = {0};
    const char *p = *s, *end = *s + *len;
    while (hit) {
        sb_add(c, &b, p, (int32_t)(hit - p));
        sb_add(c, &b, to, tl);
        p = hit + fl;
        hit = memmem(p, (size_t)(end - p), from, (size_t)fl);
    }
    sb_add(c, &b, p, (int32_t)(end - p));
    *s = b.p;
    *len = b.n;
}

static void wordpiece_cleanup(tok_ctx *c, char **s, int32_t *len)
{
    static const char *pairs[][2] = {
        {" .", "."},   {" ?", "?"},     {" !", "!"},          {" ,", ","},   {" ' ", "'"},  {" n't", "n't"},
        {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) replace_all(c, s, len, pairs[i][0], pairs[i][1]);
}

/* String::from_utf8_lossy: each maximal invalid subpart becomes U+FFFD. */
static void lossy_utf8(tok_ctx *c, sbuf *out, const unsigned char *s, int32_t n)
{
    int32_t i = 0;
    while (i < n) {
        unsigned char b = s[i];
        if (b < 0x80) {
            sb_add(c, out, (const char *)s + i, 1);
            i++;
            continue;
        }
        int need;
        unsigned char lo = 0x80, hi = 0xBF;
        if (b >= 0xC2 && b <= 0xDF) need = 1;
        else if (b >= 0xE0 && b <= 0xEF) {
            need = 2;
            if (b == 0xE0) lo = 0xA0;
            if (b == 0xED) hi = 0x9F;
        } else if (b >= 0xF0 && b <= 0xF4) {
            need = 3;
            if (b == 0xF0) lo = 0x90;
            if (b == 0xF4) hi = 0x8F;
        } else {
            sb_cp(c, out, 0xFFFD);
            i++;
            continue;
        }
        int32_t j = i + 1;
        int ok = 1;
        for (int k = 0; k < need; k++, j++) {
            unsigned char lo_k = k == 0 ? lo : 0x80, hi_k = k == 0 ? hi : 0xBF;
            if (j >= n || s[j] < lo_k || s[j] > hi_k) {
                ok = 0;
                break;
            }
        }
        if (ok) {
            sb_add(c, out, (const char *)s + i, need + 1);
            i += need + 1;
        } else {
            sb_cp(c, out, 0xFFFD);
            i = j;
        }
    }
}

static void set_single(tok_ctx *c, tok_strs *t, const sbuf *b)
{
    t->n = 0;
    tok_strs_push(c, t, b->p ? b->p : "", b->n);
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

static void flush_bytes(tok_ctx *c, tok_strs *out, sbuf *bytes)
{
    if (!bytes->n) return;
    if (tok_utf8_invalid_at(bytes->p, (size_t)bytes->n) < 0) {
        tok_strs_push(c, out, bytes->p, bytes->n);
    } else {
        for (int32_t k = 0; k < bytes->n; k++) tok_strs_push(c, out, "\xEF\xBF\xBD", 3);
    }
    bytes->n = 0;
}

int tok_decode_chain(tok_ctx *c, const tok_decoder *d, tok_strs *t)
{
    switch (d->kind) {
    case TOK_D_WORDPIECE:
        for (int i = 0; i < t->n; i++) {
            if (i != 0) {
                if (t->len[i] >= d->prefix_len && !memcmp(t->s[i], d->prefix, (size_t)d->prefix_len)) {
                    t->s[i] += d->prefix_len;
                    t->len[i] -= d->prefix_len;
                } else {
                    sbuf b = {0};
                    sb_add(c, &b, " ", 1);
                    sb_add(c, &b, t->s[i], t->len[i]);
                    t->s[i] = b.p;
                    t->len[i] = b.n;
                }
            }
            if (d->cleanup) wordpiece_cleanup(c, &t->s[i], &t->len[i]);
        }
        return 0;
    case TOK_D_BYTELEVEL: {
        sbuf raw = {0};
        for (int i = 0; i < t->n; i++) {
            int32_t start = raw.n, ok = 1;
            for (int32_t k = 0; k < t->len[i] && ok;) {
                uint32_t cp;
                k += tok_utf8_decode(t->s[i] + k, &cp);
                int b = tok_char_to_byte(cp);
                if (b < 0) ok = 0;
                else {
                    char ch = (char)b;
                    sb_add(c, &raw, &ch, 1);
                }
            }
            if (!ok) {
                raw.n = start;
                sb_add(c, &raw, t->s[i], t->len[i]);
            }
        }
        sbuf out = {0};
        lossy_utf8(c, &out, (const unsigned char *)raw.p, raw.n);
        set_single(c, t, &out);
        return 0;
    }
    case TOK_D_METASPACE:
        for (int i = 0; i < t->n; i++) {
            sbuf b = {0};
            for (int32_t k = 0; k < t->len[i];) {
                uint32_t cp;
                int l = tok_utf8_decode(t->s[i] + k, &cp);
                if (cp == d->replacement) {
                    if (!(i == 0 && d->prepend_scheme != TOK_PREPEND_NEVER)) sb_add(c, &b, " ", 1);
                } else {
                    sb_add(c, &b, t->s[i] + k, l);
                }
                k += l;
            }
            t->s[i] = b.p ? b.p : "";
            t->len[i] = b.n;
        }
        return 0;
    case TOK_D_BPE:
        for (int i = 0; i < t->n; i++) replace_all(c, &t->s[i], &t->len[i], d->prefix, i == t->n - 1 ? "" : " ");
        return 0;
    case TOK_D_BYTE_FALLBACK: {
        tok_strs out = {0};
        sbuf bytes = {0};
        for (int i = 0; i < t->n; i++) {
            const char *s = t->s[i];
            int hv = -1;
            if (t->len[i] == 6 && !memcmp(s, "<0x", 3) && s[5] == '>' && hexval(s[3]) >= 0 && hexval(s[4]) >= 0)
                hv = hexval(s[3]) * 16 + hexval(s[4]);
            if (hv >= 0) {
                char ch = (char)hv;
                sb_add(c, &bytes, &ch, 1);
            } else {
                flush_bytes(c, &out, &bytes);
                tok_strs_push(c, &out, s, t->len[i]);
            }
        }
        flush_bytes(c, &out, &bytes);
        *t = out;
        return 0;
    }
    case TOK_D_FUSE: {
        sbuf b = {0};
        for (int i = 0; i < t->n; i++) sb_add(c, &b, t->s[i], t->len[i]);
        set_single(c, t, &b);
        return 0;
    }
    case TOK_D_STRIP:
        for (int i = 0; i < t->n; i++) {
            int32_t nch = tok_utf8_count(t->s[i], t->len[i]);
            uint32_t *cps = tok_alloc(&c->a, sizeof *cps * (size_t)(nch + 1));
            for (int32_t k = 0, j = 0; k < t->len[i]; j++) k += tok_utf8_decode(t->s[i] + k, &cps[j]);
            int32_t start_cut = 0, stop_cut = nch;
            for (int32_t k = 0; k < d->start && k < nch; k++) {
                if (cps[k] != d->replacement) break;
                start_cut = k + 1;
            }
            for (int32_t k = 0; k < d->stop && k < nch; k++) {
                int32_t idx = nch - k - 1;
                if (cps[idx] != d->replacement) break;
                stop_cut = idx;
            }
            sbuf b = {0};
            for (int32_t k = start_cut; k < stop_cut; k++) sb_cp(c, &b, cps[k]);
            t->s[i] = b.p ? b.p : "";
            t->len[i] = b.n;
        }
        return 0;
    case TOK_D_REPLACE:
        for (int i = 0; i < t->n; i++) {
            tok_matches m = {0};
            if (tok_regex_find_matches(c, &d->re, t->s[i], t->len[i], &m)) return -1;
            sbuf b = {0};
            for (int k = 0; k < m.n; k++) {
                if (m.v[k].m) sb_add(c, &b, d->content, d->content_len);
                else sb_add(c, &b, t->s[i] + m.v[k].s, m.v[k].e - m.v[k].s);
            }
            t->s[i] = b.p ? b.p : "";
            t->len[i] = b.n;
        }
        return 0;
    case TOK_D_CTC: {
        tok_strs out = {0};
        for (int i = 0; i < t->n; i++) {
            if (i > 0 && t->len[i] == t->len[i - 1] && !memcmp(t->s[i], t->s[i - 1], (size_t)t->len[i])) continue;
            char *s = t->s[i];
            int32_t len = t->len[i];
            if (d->prefix_len) replace_all(c, &s, &len, d->prefix, "");
            if (d->cleanup) {
                wordpiece_cleanup(c, &s, &len);
                if (d->word_delim_len) replace_all(c, &s, &len, d->word_delim, " ");
            }
            if (len) tok_strs_push(c, &out, s, len);
        }
        *t = out;
        return 0;
    }
    case TOK_D_SEQUENCE:
        for (int i = 0; i < d->n_items; i++)
            if (tok_decode_chain(c, &d->items[i], t)) return -1;
        return 0;
    default:
        return iv_errf(c->err, IV_E_INTERNAL, "unknown decoder kind %d", d->kind);
    }
}
