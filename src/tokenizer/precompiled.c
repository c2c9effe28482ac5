/* The SentencePiece `precompiled_charsmap` normalizer (XLM-R, T5, ...).
 * The blob is [u32 trie size][trie: u32 units][normalized strings, NUL
 * separated]. The trie is a Darts double array keyed by UTF-8 bytes; a leaf
 * value is the offset of the replacement in the strings blob. The text is
 * walked grapheme by grapheme exactly as spm_precompiled does: a grapheme
 * shorter than 6 bytes is replaced as a whole when any prefix of it is a
 * key (the shortest prefix wins), otherwise each char is looked up alone. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer/tok_internal.h"

static int b64_val(unsigned char ch)
{
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '+') return 62;
    if (ch == '/') return 63;
    return -1;
}

/* Standard base64 with optional padding; returns a malloc'd buffer. */
static unsigned char *b64_decode(const char *s, size_t *out_len)
{
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == '=') n--;
    if (n % 4 == 1) return NULL;
    unsigned char *out = malloc(n / 4 * 3 + 3);
    if (!out) return NULL;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_val((unsigned char)s[i]);
        if (v < 0) {
            free(out);
            return NULL;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    *out_len = o;
    return out;
}

int tok_precompiled_load(tok_precompiled *pc, const char *b64, iv_err *err)
{
    memset(pc, 0, sizeof *pc);
    size_t n = 0;
    unsigned char *raw = b64_decode(b64, &n);
    if (!raw) return iv_errf(err, IV_E_FORMAT, "\"precompiled_charsmap\" is not valid base64");
    if (n < 4) {
        free(raw);
        return iv_errf(err, IV_E_FORMAT, "\"precompiled_charsmap\" is too short");
    }
    uint32_t trie_bytes = (uint32_t)raw[0] | (uint32_t)raw[1] << 8 | (uint32_t)raw[2] << 16 | (uint32_t)raw[3] << 24;
    size_t units = trie_bytes / 4;
    if (4 + units * 4 > n || units == 0) {
        free(raw);
        return iv_errf(err, IV_E_FORMAT, "\"precompiled_charsmap\": trie size %u exceeds the blob", trie_bytes);
    }
    pc->trie = malloc(sizeof *pc->trie * units);
    size_t norm_len = n - 4 - units * 4;
    pc->normalized = malloc(norm_len + 1);
    if (!pc->trie || !pc->normalized) {
        free(raw);
        free(pc->trie);
        free(pc->normalized);
        memset(pc, 0, sizeof *pc);
        return iv_errf(err, IV_E_NOMEM, "out of memory loading precompiled_charsmap");
    }
    for (size_t i = 0; i < units; i++) {
        const unsigned char *p = raw + 4 + i * 4;
        pc->trie[i] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    }
    memcpy(pc->normalized, raw + 4 + units * 4, norm_len);
    pc->normalized[norm_len] = 0;
    pc->trie_len = units;
    pc->norm_len = norm_len;
    free(raw);
    if (tok_utf8_invalid_at(pc->normalized, norm_len) >= 0) {
        free(pc->trie);
        free(pc->normalized);
        memset(pc, 0, sizeof *pc);
        return iv_errf(err, IV_E_FORMAT, "\"precompiled_charsmap\": replacement strings are not UTF-8");
    }
    return 0;
}

static uint32_t unit_offset(uint32_t u)
{
    return (u >> 10) << ((u & (1u << 9)) >> 6);
}

/* Replacement for the shortest key that prefixes key[0..len), or NULL. */
static const char *lookup(const tok_precompiled *pc, const char *key, int32_t len, int32_t *out_len)
{
    size_t pos = 0;
    uint32_t unit = pc->trie[0];
    pos ^= unit_offset(unit);
    for (int32_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)key[i];
        if (ch == 0) break;
        pos ^= ch;
        if (pos >= pc->trie_len) return NULL;
        unit = pc->trie[pos];
        if ((unit & ((1u << 31) | 0xFFu)) != ch) return NULL;
        pos ^= unit_offset(unit);
        if ((unit >> 8) & 1) {
            if (pos >= pc->trie_len) return NULL;
            size_t idx = pc->trie[pos] & ((1u << 31) - 1);
            if (idx > pc->norm_len) return NULL;
            size_t end = idx;
            while (end < pc->norm_len && pc->normalized[end]) end++;
            *out_len = (int32_t)(end - idx);
            return pc->normalized + idx;
        }
    }
    return NULL;
}

/* spm_precompiled's replace(): the new chars replace the old ones one for
 * one; extra new chars are insertions; fewer chars fold the removal into
 * the last change pushed so far. */
static void replace(tok_ctx *c, tok_edits *ed, int32_t old_chars, const char *nw, int32_t nlen)
{
    int32_t new_chars = 0;
    for (int32_t i = 0; i < nlen;) {
        uint32_t cp;
        i += tok_utf8_decode(nw + i, &cp);
        tok_edits_push(c, ed, cp, 0);
        new_chars++;
    }
    int32_t diff = new_chars - old_chars;
    if (diff > 0) {
        for (int32_t k = 0; k < diff && k < ed->n; k++) ed->chg[ed->n - 1 - k] = 1;
    } else if (diff < 0 && ed->n > 0) {
        ed->chg[ed->n - 1] += diff;
    }
}

void tok_precompiled_normalize(tok_ctx *c, const tok_precompiled *pc, tok_nstr *ns)
{
    tok_edits *ed = &c->ed;
    tok_edits_reset(c, ed, ns->len + 8);
    int modified = 0;
    const char *s = ns->s;
    int32_t len = ns->len;
    utf8proc_int32_t state = 0;
    int32_t g0 = 0;
    while (g0 < len) {
        /* Find the end of the extended grapheme cluster starting at g0. */
        uint32_t prev;
        int32_t g1 = g0 + tok_utf8_decode(s + g0, &prev);
        int32_t nchars = 1;
        while (g1 < len) {
            uint32_t cur;
            int l = tok_utf8_decode(s + g1, &cur);
            if (utf8proc_grapheme_break_stateful((utf8proc_int32_t)prev, (utf8proc_int32_t)cur, &state)) break;
            prev = cur;
            g1 += l;
            nchars++;
        }
        int32_t glen = g1 - g0, nl = 0;
        const char *norm;
        if (glen < 6 && (norm = lookup(pc, s + g0, glen, &nl))) {
            modified = 1;
            replace(c, ed, nchars, norm, nl);
        } else {
            for (int32_t i = g0; i < g1;) {
                uint32_t cp;
                int l = tok_utf8_decode(s + i, &cp);
                if ((norm = lookup(pc, s + i, l, &nl))) {
                    modified = 1;
                    replace(c, ed, 1, norm, nl);
                } else {
                    tok_edits_push(c, ed, cp, 0);
                }
                i += l;
            }
        }
        g0 = g1;
    }
    if (modified) tok_ns_transform(c, ns, ed, 0);
}
