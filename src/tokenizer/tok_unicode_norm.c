/* Unicode normalization forms with alignment information, emitting the same
 * (char, change) stream as the unicode-normalization-alignments crate the
 * library uses: each decomposed char is 0 for the first char of a
 * decomposition and 1 for the following ones, canonical reordering carries
 * the changes along, and every composition merges two changes as
 * `a + b - 1`. utf8proc supplies the Unicode data. */
#include <string.h>
#include <utf8proc.h>

#include "tokenizer/tok_internal.h"

enum {
    HANGUL_S = 0xAC00,
    HANGUL_L = 0x1100,
    HANGUL_V = 0x1161,
    HANGUL_T = 0x11A7,
    HANGUL_LCOUNT = 19,
    HANGUL_VCOUNT = 21,
    HANGUL_TCOUNT = 28,
    HANGUL_SCOUNT = 11172,
};

static int ccc(uint32_t c)
{
    if (c < 0x300) return 0;
    return utf8proc_get_property((utf8proc_int32_t)c)->combining_class;
}

/* Primary composite of (a, b), or 0. */
static uint32_t compose(uint32_t a, uint32_t b)
{
    if (a >= HANGUL_L && a < HANGUL_L + HANGUL_LCOUNT && b >= HANGUL_V && b < HANGUL_V + HANGUL_VCOUNT)
        return HANGUL_S + ((a - HANGUL_L) * HANGUL_VCOUNT + (b - HANGUL_V)) * HANGUL_TCOUNT;
    if (a >= HANGUL_S && a < HANGUL_S + HANGUL_SCOUNT && b > HANGUL_T && b < HANGUL_T + HANGUL_TCOUNT &&
        (a - HANGUL_S) % HANGUL_TCOUNT == 0)
        return a + (b - HANGUL_T);
    /* utf8proc marks chars that can start a composition with comb_index <
     * 0x8000 and chars that can end one with the 0x8000 bit; only such pairs
     * need the composition table, which utf8proc exposes through
     * normalize_utf32 on the two-char sequence. */
    const utf8proc_property_t *pa = utf8proc_get_property((utf8proc_int32_t)a);
    const utf8proc_property_t *pb = utf8proc_get_property((utf8proc_int32_t)b);
    if (pa->comb_index >= 0x8000 || pb->comb_index < 0x8000 || pb->comb_index == UINT16_MAX) return 0;
    if (pa->combining_class != 0) return 0;
    utf8proc_int32_t buf[2] = {(utf8proc_int32_t)a, (utf8proc_int32_t)b};
    utf8proc_ssize_t n = utf8proc_normalize_utf32(buf, 2, UTF8PROC_COMPOSE | UTF8PROC_STABLE);
    return n == 1 ? (uint32_t)buf[0] : 0;
}

typedef struct dec_item {
    uint32_t cp;
    int32_t chg;
    int32_t cls;
} dec_item;

static void emit(tok_ctx *c, tok_edits *out, uint32_t cp, int32_t chg)
{
    tok_edits_push(c, out, cp, chg);
}

void tok_unicode_normalize(tok_ctx *c, const char *s, int32_t len, int form, tok_edits *out)
{
    tok_edits_reset(c, out, len + 8);
    int compat = form == TOK_NFKD || form == TOK_NFKC;
    int composing = form == TOK_NFC || form == TOK_NFKC;
    utf8proc_option_t opts = UTF8PROC_DECOMPOSE | (compat ? UTF8PROC_COMPAT : 0);

    /* 1. Full decomposition. */
    int cap = len + 16, n = 0;
    dec_item *d = tok_alloc(&c->a, sizeof *d * (size_t)cap);
    for (int32_t i = 0; i < len;) {
        uint32_t cp;
        i += tok_utf8_decode(s + i, &cp);
        utf8proc_int32_t buf[32];
        int bc = 0;
        utf8proc_ssize_t k = 1;
        buf[0] = (utf8proc_int32_t)cp;
        /* Nothing below U+00A0 decomposes, nothing below U+00C0 canonically. */
        if (cp >= (compat ? 0xA0u : 0xC0u)) {
            k = utf8proc_decompose_char((utf8proc_int32_t)cp, buf, 32, opts, &bc);
            if (k <= 0 || k > 32) {
                k = 1;
                buf[0] = (utf8proc_int32_t)cp;
            }
        }
        if (n + k > cap) d = tok_grow(&c->a, d, &cap, n + (int)k, sizeof *d);
        for (utf8proc_ssize_t j = 0; j < k; j++)
            d[n++] = (dec_item){(uint32_t)buf[j], j == 0 ? 0 : 1, ccc((uint32_t)buf[j])};
    }

    /* 2. Canonical ordering: stable sort of every run of non-starters. */
    for (int i = 0; i < n;) {
        if (d[i].cls == 0) {
            i++;
            continue;
        }
        int j = i;
        while (j < n && d[j].cls != 0) j++;
        for (int a = i + 1; a < j; a++) {
            dec_item x = d[a];
            int b = a - 1;
            while (b >= i && d[b].cls > x.cls) {
                d[b + 1] = d[b];
                b--;
            }
            d[b + 1] = x;
        }
        i = j;
    }

    if (!composing) {
        for (int i = 0; i < n; i++) emit(c, out, d[i].cp, d[i].chg);
        return;
    }

    /* 3. Canonical composition, as the crate's Recompositions iterator. */
    int has_composee = 0;
    dec_item composee = {0, 0, 0};
    int last_ccc = -1; /* -1: none */
    int bcap = 16, bn = 0;
    dec_item *buffer = tok_alloc(&c->a, sizeof *buffer * (size_t)bcap);
    for (int i = 0; i < n; i++) {
        dec_item ch = d[i];
        if (!has_composee) {
            if (ch.cls != 0) {
                emit(c, out, ch.cp, ch.chg);
                continue;
            }
            composee = ch;
            has_composee = 1;
            continue;
        }
        if (last_ccc < 0) {
            uint32_t r = compose(composee.cp, ch.cp);
            if (r) {
                composee.cp = r;
                composee.chg = composee.chg + ch.chg - 1;
                continue;
            }
            if (ch.cls == 0) {
                emit(c, out, composee.cp, composee.chg);
                composee = ch;
                continue;
            }
            if (bn == bcap) buffer = tok_grow(&c->a, buffer, &bcap, bn + 1, sizeof *buffer);
            buffer[bn++] = ch;
            last_ccc = ch.cls;
            continue;
        }
        if (last_ccc >= ch.cls) {
            /* ch is blocked from the composee */
            if (ch.cls == 0) {
                emit(c, out, composee.cp, composee.chg);
                for (int b = 0; b < bn; b++) emit(c, out, buffer[b].cp, buffer[b].chg);
                bn = 0;
                composee = ch;
                last_ccc = -1;
                continue;
            }
            if (bn == bcap) buffer = tok_grow(&c->a, buffer, &bcap, bn + 1, sizeof *buffer);
            buffer[bn++] = ch;
            last_ccc = ch.cls;
            continue;
        }
        uint32_t r = compose(composee.cp, ch.cp);
        if (r) {
            composee.cp = r;
            composee.chg = composee.chg + ch.chg - 1;
            continue;
        }
        if (bn == bcap) buffer = tok_grow(&c->a, buffer, &bcap, bn + 1, sizeof *buffer);
        buffer[bn++] = ch;
        last_ccc = ch.cls;
    }
    if (has_composee) emit(c, out, composee.cp, composee.chg);
    for (int b = 0; b < bn; b++) emit(c, out, buffer[b].cp, buffer[b].chg);
}
