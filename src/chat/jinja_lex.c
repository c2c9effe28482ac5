/* The Jinja lexer: template text to tokens, with jinja2's whitespace rules
 * as transformers configures them (trim_blocks, lstrip_blocks,
 * keep_trailing_newline=False). It follows jinja2/lexer.py's rules one by
 * one, since byte-identical output depends on its exact quirks:
 *  - all newlines become \n and one trailing newline of the source goes;
 *  - `{%-`/`{{-`/`{#-` strip all whitespace before the tag, `-%}`/`-}}`/
 *    `-#}` all whitespace after it;
 *  - lstrip_blocks removes spaces before `{%`/`{#` (not `{{`) when only
 *    whitespace precedes the tag on its line, unless the tag is `{%+`;
 *  - trim_blocks removes one newline after `%}`/`#}` (not `}}`), unless `+%}`;
 *  - an end tag counts only outside brackets ({{ {'a': 1}}} is one dict). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "chat/jinja_internal.h"

typedef struct lexer {
    jarena *A;
    const char *s;
    size_t n, pos;
    int line;
    int line_starting; /* the previous match ended with a newline */
    jtok *toks;
    size_t ntok, cap;
    iv_err *err;
    jmp_buf jb;
} lexer;

_Noreturn static void lex_fail(lexer *L, int code, const char *fmt, const char *arg)
{
    iv_errf(L->err, code, "chat template line %d: ", L->line);
    size_t k = strlen(L->err->msg);
    snprintf(L->err->msg + k, sizeof L->err->msg - k, fmt, arg);
    longjmp(L->jb, 1);
}

static void *lex_alloc(lexer *L, size_t n)
{
    void *p = ja_alloc(L->A, n);
    if (!p) lex_fail(L, IV_E_TOO_LARGE, "%s", "template too large");
    return p;
}

static jtok *push(lexer *L, jtok_kind k, const char *s, size_t n)
{
    if (L->ntok == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        jtok *t = lex_alloc(L, cap * sizeof *t);
        if (L->ntok) memcpy(t, L->toks, L->ntok * sizeof *t);
        L->toks = t, L->cap = cap;
    }
    jtok *t = &L->toks[L->ntok++];
    memset(t, 0, sizeof *t);
    t->kind = k, t->line = L->line, t->s = s, t->n = n;
    return t;
}

static void count_lines(lexer *L, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++) L->line += L->s[i] == '\n';
}

/* Python's \s: ASCII whitespace, \x1c-\x1f and the Unicode spaces. */
static size_t space_len(const char *s, size_t n, size_t i)
{
    if (i >= n) return 0;
    size_t j = i;
    uint32_t cp = ju_next(s, n, &j);
    return ju_isspace(cp) ? j - i : 0;
}

static size_t skip_space(const char *s, size_t n, size_t i)
{
    size_t k;
    while ((k = space_len(s, n, i))) i += k;
    return i;
}

/* Length of text[0..len) without trailing whitespace (Python rstrip()). */
static size_t rstrip_len(const char *t, size_t len)
{
    size_t keep = 0, i = 0;
    while (i < len) {
        uint32_t cp = ju_next(t, len, &i);
        if (!ju_isspace(cp)) keep = i;
    }
    return keep;
}

/* Emits the text before a tag, with the strip rule of the tag's sign. */
static void emit_data(lexer *L, size_t from, size_t to, char sign, int lstrip_ok)
{
    const char *t = L->s + from;
    size_t len = to - from;
    if (sign == '-') {
        len = rstrip_len(t, len);
    } else if (sign != '+' && lstrip_ok) {
        size_t l_pos = 0;
        for (size_t i = len; i > 0; i--)
            if (t[i - 1] == '\n') { l_pos = i; break; }
        if ((l_pos > 0 || L->line_starting) && l_pos < len && skip_space(t, len, l_pos) == len) len = l_pos;
    }
    if (len) push(L, T_DATA, t, len);
    count_lines(L, from, to);
}

/* `{%` sign? \s* word \s* (`-%}`\s* | `%}`), as the raw/endraw rules match
 * it; returns the end of the match or 0. end_forms: 1 = also `+%}`, and
 * `%}` takes one newline (the endraw form). */
static size_t match_raw_tag(const lexer *L, size_t p, const char *word, char *sign, int endraw)
{
    const char *s = L->s;
    size_t n = L->n;
    if (p + 2 > n || s[p] != '{' || s[p + 1] != '%') return 0;
    p += 2;
    *sign = 0;
    if (p < n && (s[p] == '-' || s[p] == '+')) *sign = s[p++];
    p = skip_space(s, n, p);
    size_t wl = strlen(word);
    if (p + wl > n || memcmp(s + p, word, wl)) return 0;
    p += wl;
    p = skip_space(s, n, p);
    if (endraw && p + 3 <= n && s[p] == '+' && s[p + 1] == '%' && s[p + 2] == '}') return p + 3;
    if (p + 3 <= n && s[p] == '-' && s[p + 1] == '%' && s[p + 2] == '}') return skip_space(s, n, p + 3);
    if (p + 2 <= n && s[p] == '%' && s[p + 1] == '}') {
        p += 2;
        if (endraw && p < n && s[p] == '\n') p++;
        return p;
    }
    return 0;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_name_char(char c) { return is_name_start(c) || is_digit(c); }

/* (\d+_)*\d+ at p: end or 0. */
static size_t digits_(const char *s, size_t n, size_t p)
{
    if (p >= n || !is_digit(s[p])) return 0;
    for (;;) {
        while (p < n && is_digit(s[p])) p++;
        if (p + 1 < n && s[p] == '_' && is_digit(s[p + 1])) { p++; continue; }
        return p;
    }
}

/* jinja2's float_re at p (not right after a '.'): end or 0. */
static size_t match_float(const char *s, size_t n, size_t p)
{
    if (p > 0 && s[p - 1] == '.') return 0;
    size_t q = digits_(s, n, p);
    if (!q) return 0;
    size_t frac = 0;
    if (q < n && s[q] == '.') frac = digits_(s, n, q + 1);
    size_t e = frac ? frac : q;
    if (e < n && (s[e] == 'e' || s[e] == 'E')) {
        size_t x = e + 1;
        if (x < n && (s[x] == '+' || s[x] == '-')) x++;
        size_t end = digits_(s, n, x);
        if (end) return end;
    }
    return frac;
}

static int hexval(char c)
{
    if (is_digit(c)) return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* jinja2's integer_re at p: end or 0 (value in *v, overflow flagged). */
static size_t match_int(const char *s, size_t n, size_t p, int64_t *v, int *overflow)
{
    *v = 0, *overflow = 0;
    if (p >= n || !is_digit(s[p])) return 0;
    int base = 10;
    size_t q = p;
    if (s[p] == '0' && p + 2 < n && strchr("bBoOxX", s[p + 1])) {
        char c = (char)(s[p + 1] | 0x20);
        base = c == 'b' ? 2 : c == 'o' ? 8 : 16;
        q = p + 2;
    }
    int zero_only = base == 10 && s[p] == '0'; /* 0(_?0)* */
    size_t end = 0;
    for (int first = 1;; first = 0) {
        size_t r = q;
        /* An underscore may separate digits, and lead them after 0x. */
        if (r < n && s[r] == '_' && (!first || base != 10)) r++;
        if (r >= n) break;
        int d = hexval(s[r]);
        if (d < 0 || d >= base || (zero_only && d != 0)) break;
        if (__builtin_mul_overflow(*v, base, v) || __builtin_add_overflow(*v, d, v)) *overflow = 1;
        q = end = r + 1;
    }
    if (base != 10 && !end) return p + 1; /* "0" then a name "x..." */
    return end;
}

/* Python's unicode-escape decoding of a string literal's body. */
static void unescape(lexer *L, jtok *t, const char *s, size_t n)
{
    iv_strbuf b;
    iv_sb_init(&b);
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c != '\\' || i + 1 >= n) { iv_sb_putc(&b, c); continue; }
        char e = s[++i];
        int digits = 0;
        switch (e) {
        case '\n': break;
        case '\\': iv_sb_putc(&b, '\\'); break;
        case '\'': iv_sb_putc(&b, '\''); break;
        case '"': iv_sb_putc(&b, '"'); break;
        case 'a': iv_sb_putc(&b, '\a'); break;
        case 'b': iv_sb_putc(&b, '\b'); break;
        case 'f': iv_sb_putc(&b, '\f'); break;
        case 'n': iv_sb_putc(&b, '\n'); break;
        case 'r': iv_sb_putc(&b, '\r'); break;
        case 't': iv_sb_putc(&b, '\t'); break;
        case 'v': iv_sb_putc(&b, '\v'); break;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        default:
            if (e >= '0' && e <= '7') {
                uint32_t v = 0;
                int k = 0;
                while (k < 3 && i < n && s[i] >= '0' && s[i] <= '7') v = v * 8 + (uint32_t)(s[i++] - '0'), k++;
                i--;
                ju_put(&b, v);
            } else {
                iv_sb_putc(&b, '\\');
                iv_sb_putc(&b, e);
            }
        }
        if (digits) {
            uint32_t v = 0;
            for (int k = 0; k < digits; k++) {
                int h = i + 1 < n ? hexval(s[i + 1]) : -1;
                if (h < 0) {
                    iv_sb_free(&b);
                    lex_fail(L, IV_E_FORMAT, "%s", "truncated escape in a string literal");
                }
                v = v * 16 + (uint32_t)h, i++;
            }
            if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
                iv_sb_free(&b);
                lex_fail(L, IV_E_FORMAT, "%s", "bad code point escape in a string literal");
            }
            ju_put(&b, v);
        }
    }
    if (b.oom) lex_fail(L, IV_E_NOMEM, "%s", "out of memory");
    char *v = lex_alloc(L, b.len + 1);
    if (b.len) memcpy(v, b.data, b.len);
    v[b.len] = 0;
    t->s = v, t->n = b.len;
    iv_sb_free(&b);
}

static const char *const OPS[] = {"**", "//", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[", "]",
                                  "(", ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"};

/* Tokens inside {{ }} or {% %} up to the end tag; returns the position
 * after the end tag. */
static size_t lex_tag(lexer *L, size_t p, int block)
{
    const char *s = L->s;
    size_t n = L->n;
    char stack[256];
    int depth = 0;
    for (;;) {
        if (p >= n) lex_fail(L, IV_E_FORMAT, "%s", block ? "unexpected end of template: unclosed '{%'" : "unexpected end of template: unclosed '{{'");
        if (depth == 0) {
            size_t end = 0;
            if (block) {
                if (p + 3 <= n && s[p] == '+' && !memcmp(s + p + 1, "%}", 2)) end = p + 3;
                else if (p + 3 <= n && s[p] == '-' && !memcmp(s + p + 1, "%}", 2)) end = skip_space(s, n, p + 3);
                else if (p + 2 <= n && !memcmp(s + p, "%}", 2)) end = p + 2 + (p + 2 < n && s[p + 2] == '\n');
            } else {
                if (p + 3 <= n && s[p] == '-' && !memcmp(s + p + 1, "}}", 2)) end = skip_space(s, n, p + 3);
                else if (p + 2 <= n && !memcmp(s + p, "}}", 2)) end = p + 2;
            }
            if (end) {
                push(L, block ? T_BLOCK_END : T_VAR_END, s + p, end - p);
                count_lines(L, p, end);
                L->line_starting = s[end - 1] == '\n';
                return end;
            }
        }
        size_t q = skip_space(s, n, p);
        if (q > p) { count_lines(L, p, q); p = q; continue; }
        if ((q = match_float(s, n, p))) {
            jtok *t = push(L, T_FLOAT, s + p, q - p);
            char buf[128];
            size_t k = 0;
            for (size_t i = p; i < q && k < sizeof buf - 1; i++)
                if (s[i] != '_') buf[k++] = s[i];
            buf[k] = 0;
            t->f = strtod(buf, NULL);
            p = q;
            continue;
        }
        int64_t iv;
        int ovf;
        if ((q = match_int(s, n, p, &iv, &ovf))) {
            if (ovf) lex_fail(L, IV_E_UNSUPPORTED, "%s", "integer literal beyond 64 bits is not supported");
            push(L, T_INT, s + p, q - p)->i = iv;
            p = q;
            continue;
        }
        if (is_name_start(s[p])) {
            q = p;
            while (q < n && is_name_char(s[q])) q++;
            push(L, T_NAME, s + p, q - p);
            p = q;
            continue;
        }
        if (s[p] == '\'' || s[p] == '"') {
            char quote = s[p];
            q = p + 1;
            while (q < n && s[q] != quote) q += s[q] == '\\' ? 2 : 1;
            if (q >= n) lex_fail(L, IV_E_FORMAT, "%s", "unterminated string literal");
            jtok *t = push(L, T_STRING, s + p, q + 1 - p);
            unescape(L, t, s + p + 1, q - p - 1);
            count_lines(L, p, q + 1);
            p = q + 1;
            continue;
        }
        const char *op = NULL;
        for (size_t k = 0; k < sizeof OPS / sizeof *OPS; k++) {
            size_t ol = strlen(OPS[k]);
            if (p + ol <= n && !memcmp(s + p, OPS[k], ol)) { op = OPS[k]; break; }
        }
        if (!op) {
            char c[8];
            size_t cl = (size_t)iv_utf8_seq_len(s + p, n - p);
            if (!cl) cl = 1;
            memcpy(c, s + p, cl);
            c[cl] = 0;
            lex_fail(L, IV_E_FORMAT, "unexpected character '%s'", c);
        }
        char c = op[0];
        if (!op[1] && (c == '(' || c == '[' || c == '{')) {
            if (depth == (int)sizeof stack) lex_fail(L, IV_E_UNSUPPORTED, "%s", "brackets nested too deeply");
            stack[depth++] = c == '(' ? ')' : c == '[' ? ']' : '}';
        } else if (!op[1] && (c == ')' || c == ']' || c == '}')) {
            if (!depth) lex_fail(L, IV_E_FORMAT, "unexpected '%s'", op);
            if (stack[--depth] != c) lex_fail(L, IV_E_FORMAT, "unexpected '%s'", op);
        }
        push(L, T_OP, op, strlen(op));
        p += strlen(op);
    }
}

static size_t lex_comment(lexer *L, size_t p)
{
    const char *s = L->s;
    size_t n = L->n;
    for (size_t q = p; q + 2 <= n; q++) {
        size_t end = 0;
        if (s[q] == '+' && q + 3 <= n && !memcmp(s + q + 1, "#}", 2)) end = q + 3;
        else if (s[q] == '-' && q + 3 <= n && !memcmp(s + q + 1, "#}", 2)) end = skip_space(s, n, q + 3);
        else if (!memcmp(s + q, "#}", 2)) end = q + 2 + (q + 2 < n && s[q + 2] == '\n');
        if (end) {
            count_lines(L, p, end);
            L->line_starting = s[end - 1] == '\n';
            return end;
        }
    }
    lex_fail(L, IV_E_FORMAT, "%s", "missing end of comment tag");
}

static size_t lex_raw(lexer *L, size_t p)
{
    for (size_t q = p; q < L->n; q++) {
        char sign;
        size_t end = match_raw_tag(L, q, "endraw", &sign, 1);
        if (!end) continue;
        emit_data(L, p, q, sign, 1);
        count_lines(L, q, end);
        L->line_starting = L->s[end - 1] == '\n';
        return end;
    }
    lex_fail(L, IV_E_FORMAT, "%s", "missing end of raw directive");
}

static void lex_root(lexer *L)
{
    const char *s = L->s;
    size_t n = L->n, p = 0;
    L->line_starting = 1;
    while (p < n) {
        size_t q = p;
        while (q + 1 < n && !(s[q] == '{' && (s[q + 1] == '{' || s[q + 1] == '%' || s[q + 1] == '#'))) q++;
        if (q + 1 >= n) {
            emit_data(L, p, n, 0, 0);
            return;
        }
        char sign;
        size_t raw_end = match_raw_tag(L, q, "raw", &sign, 0);
        if (raw_end) {
            emit_data(L, p, q, sign, 1);
            count_lines(L, q, raw_end);
            L->line_starting = 0;
            p = lex_raw(L, raw_end);
            continue;
        }
        char kind = s[q + 1];
        sign = q + 2 < n && (s[q + 2] == '-' || s[q + 2] == '+') ? s[q + 2] : 0;
        emit_data(L, p, q, sign, kind != '{');
        size_t body = q + 2 + (sign != 0);
        L->line_starting = 0;
        if (kind == '#') {
            p = lex_comment(L, body);
        } else {
            push(L, kind == '{' ? T_VAR_BEGIN : T_BLOCK_BEGIN, s + q, body - q);
            p = lex_tag(L, body, kind == '%');
        }
    }
}

int jl_lex(jarena *A, const char *src, size_t len, jtok **out, size_t *ntok, iv_err *err)
{
    lexer L = {.A = A, .line = 1, .err = err};
    if (setjmp(L.jb)) return -1;
    /* Newlines normalized to \n and one trailing newline dropped, as
     * tokeniter does before it matches anything. */
    char *s = lex_alloc(&L, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            s[n++] = src[i];
        }
    }
    if (n && s[n - 1] == '\n') n--;
    s[n] = 0;
    L.s = s, L.n = n;
    for (size_t i = 0; i < n;) {
        int k = iv_utf8_seq_len(s + i, n - i);
        if (!k) {
            count_lines(&L, 0, i);
            lex_fail(&L, IV_E_FORMAT, "%s", "template is not valid UTF-8");
        }
        i += (size_t)k;
    }
    lex_root(&L);
    push(&L, T_EOF, s + n, 0);
    *out = L.toks, *ntok = L.ntok;
    return 0;
}
