/* Patterns of Split, Replace and ByteLevel. tokenizer.json regexes are
 * written for Oniguruma; PCRE2 with UTF+UCP reads the same syntax for
 * everything these files use (\p{L}, \p{N}, (?i:...), (?!\S), {1,3}) except
 * \s, whose PCRE2 meaning adds U+180E, and \uHHHH, which PCRE2 spells
 * \x{HHHH}. Both are rewritten (\s and \S to the explicit White_Space set
 * that Oniguruma and Rust use). String patterns are plain substring
 * searches. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

static const char WS_BODY[] =
    "\\x{9}-\\x{D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"
    "\\x{205F}\\x{3000}";

static int is_hex4(const char *p)
{
    for (int k = 0; k < 4; k++) {
        char c = p[k];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return 0;
    }
    return 1;
}

/* Rewrites \s, \S and \uHHHH; returns a malloc'd pattern or NULL on OOM. */
static char *rewrite_pattern(const char *p, size_t len, size_t *out_len)
{
    size_t cap = len * 4 + sizeof WS_BODY * 4 + 16, o = 0;
    int in_class = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    for (size_t i = 0; i < len; i++) {
        if (o + sizeof WS_BODY + 8 > cap) {
            cap *= 2;
            char *n = realloc(out, cap);
            if (!n) {
                free(out);
                return NULL;
            }
            out = n;
        }
        char ch = p[i];
        if (ch == '\\' && i + 1 < len) {
            char nx = p[i + 1];
            if (nx == 's') {
                if (in_class) {
                    memcpy(out + o, WS_BODY, sizeof WS_BODY - 1);
                    o += sizeof WS_BODY - 1;
                } else {
                    out[o++] = '[';
                    memcpy(out + o, WS_BODY, sizeof WS_BODY - 1);
                    o += sizeof WS_BODY - 1;
                    out[o++] = ']';
                }
                i++;
                continue;
            }
            if (nx == 'S' && !in_class) {
                out[o++] = '[';
                out[o++] = '^';
                memcpy(out + o, WS_BODY, sizeof WS_BODY - 1);
                o += sizeof WS_BODY - 1;
                out[o++] = ']';
                i++;
                continue;
            }
            if (nx == 'u' && i + 5 < len && is_hex4(p + i + 2)) {
                /* Oniguruma's \uHHHH is PCRE2's \x{HHHH}. */
                memcpy(out + o, "\\x{", 3);
                memcpy(out + o + 3, p + i + 2, 4);
                out[o + 7] = '}';
                o += 8;
                i += 5;
                continue;
            }
            out[o++] = ch;
            out[o++] = nx;
            i++;
            continue;
        }
        if (!in_class && ch == '[') {
            in_class = 1;
            out[o++] = ch;
            /* A ']' right after '[' or '[^' is a literal. */
            if (i + 1 < len && p[i + 1] == '^') out[o++] = p[++i];
            if (i + 1 < len && p[i + 1] == ']') out[o++] = p[++i];
            continue;
        }
        if (in_class && ch == '[' && i + 1 < len && p[i + 1] == ':') {
            /* POSIX class [:name:] inside a bracket expression. */
            const char *end = strstr(p + i + 2, ":]");
            if (end && (size_t)(end - p) < len) {
                size_t n = (size_t)(end - (p + i)) + 2;
                while (o + n + 8 > cap) {
                    cap *= 2;
                    char *nn = realloc(out, cap);
                    if (!nn) {
                        free(out);
                        return NULL;
                    }
                    out = nn;
                }
                memcpy(out + o, p + i, n);
                o += n;
                i += n - 1;
                continue;
            }
        }
        if (in_class && ch == ']') in_class = 0;
        out[o++] = ch;
    }
    out[o] = 0;
    *out_len = o;
    return out;
}

int tok_regex_compile(tok_regex *re, const char *pattern, size_t len, int is_regex, const char *what,
                      iv_err *err)
{
    memset(re, 0, sizeof *re);
    if (!is_regex && len > 0) {
        re->literal = tok_xmemdup(pattern, len);
        if (!re->literal) return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
        re->literal_len = (int32_t)len;
        return 0;
    }
    size_t plen = 0;
    char *p = rewrite_pattern(pattern, len, &plen);
    if (!p) return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
    int ec = 0;
    PCRE2_SIZE eo = 0;
    re->code = pcre2_compile((PCRE2_SPTR)p, plen, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    free(p);
    if (!re->code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return iv_errf(err, IV_E_FORMAT, "%s: cannot compile regex \"%.*s\": %s", what, (int)len,
                       pattern, (const char *)msg);
    }
    /* JIT is an optimisation; the interpreter is the fallback. */
    (void)pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);
    return 0;
}

void tok_regex_free(tok_regex *re)
{
    if (re->code) pcre2_code_free(re->code);
    free(re->literal);
    memset(re, 0, sizeof *re);
}

static void push(tok_ctx *c, tok_matches *out, int32_t s, int32_t e, int m)
{
    out->v = tok_grow(&c->a, out->v, &out->cap, out->n + 1, sizeof *out->v);
    out->v[out->n++] = (tok_match){s, e, m};
}

int tok_regex_find_matches(tok_ctx *c, const tok_regex *re, const char *s, int32_t len, tok_matches *out)
{
    out->n = 0;
    if (len == 0) {
        push(c, out, 0, 0, 0);
        return 0;
    }
    int32_t prev = 0;
    if (re->literal) {
        const char *p = s, *end = s + len;
        while (p + re->literal_len <= end) {
            const char *f = memmem(p, (size_t)(end - p), re->literal, (size_t)re->literal_len);
            if (!f) break;
            int32_t ms = (int32_t)(f - s), me = ms + re->literal_len;
            if (prev != ms) push(c, out, prev, ms, 0);
            push(c, out, ms, me, 1);
            prev = me;
            p = f + re->literal_len;
        }
    } else {
        /* Oniguruma's find_iter: an empty match right where the previous
         * match ended is skipped by advancing one char. */
        int32_t last_end = 0, last_match_end = -1;
        while (last_end <= len) {
            int rc = pcre2_match(re->code, (PCRE2_SPTR)s, (PCRE2_SIZE)len, (PCRE2_SIZE)last_end,
                                 PCRE2_NO_UTF_CHECK, c->md, NULL);
            if (rc == PCRE2_ERROR_JIT_STACKLIMIT) /* deep backtracking: use the interpreter */
                rc = pcre2_match(re->code, (PCRE2_SPTR)s, (PCRE2_SIZE)len, (PCRE2_SIZE)last_end,
                                 PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, c->md, NULL);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) {
                PCRE2_UCHAR msg[256];
                pcre2_get_error_message(rc, msg, sizeof msg);
                return iv_errf(c->err, IV_E_INTERNAL, "regex match failed: %s", (const char *)msg);
            }
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
            int32_t ms = (int32_t)ov[0], me = (int32_t)ov[1];
            if (ms == me && last_match_end == me) {
                last_end += last_end < len ? tok_utf8_len((unsigned char)s[last_end]) : 1;
                continue;
            }
            last_end = me;
            last_match_end = me;
            if (prev != ms) push(c, out, prev, ms, 0);
            push(c, out, ms, me, 1);
            prev = me;
        }
    }
    if (prev != len) push(c, out, prev, len, 0);
    return 0;
}
