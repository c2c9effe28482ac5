#include "base/strbuf.h"

#include "base/float_fmt.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void iv_sb_init(iv_strbuf *b) { memset(b, 0, sizeof *b); }
void iv_sb_free(iv_strbuf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}
void iv_sb_reset(iv_strbuf *b)
{
    b->len = 0;
    if (b->data) b->data[0] = 0;
}

static int reserve(iv_strbuf *b, size_t extra)
{
    if (b->oom) return -1;
    if (b->len + extra + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

void iv_sb_append(iv_strbuf *b, const char *s, size_t n)
{
    if (reserve(b, n)) return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

void iv_sb_puts(iv_strbuf *b, const char *s) { iv_sb_append(b, s, strlen(s)); }
void iv_sb_putc(iv_strbuf *b, char c) { iv_sb_append(b, &c, 1); }

void iv_sb_printf(iv_strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void iv_sb_json_string(iv_strbuf *b, const char *s, size_t n)
{
    iv_sb_putc(b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            run++;
            continue;
        }
        iv_sb_append(b, s + i - run, run);
        run = 0;
        switch (c) {
        case '"': iv_sb_puts(b, "\\\""); break;
        case '\\': iv_sb_puts(b, "\\\\"); break;
        case '\n': iv_sb_puts(b, "\\n"); break;
        case '\r': iv_sb_puts(b, "\\r"); break;
        case '\t': iv_sb_puts(b, "\\t"); break;
        case '\b': iv_sb_puts(b, "\\b"); break;
        case '\f': iv_sb_puts(b, "\\f"); break;
        default: iv_sb_printf(b, "\\u%04x", c); break;
        }
    }
    iv_sb_append(b, s + n - run, run);
    iv_sb_putc(b, '"');
}

void iv_sb_int(iv_strbuf *b, long long v)
{
    char tmp[24], *e = tmp + sizeof tmp, *p = e;
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) *--p = '-';
    iv_sb_append(b, p, (size_t)(e - p));
}

void iv_sb_float(iv_strbuf *b, float f)
{
    if (!isfinite(f)) {
        iv_sb_puts(b, "null");
        return;
    }
    char tmp[32];
    iv_sb_append(b, tmp, (size_t)iv_format_float(tmp, f));
}

void iv_sb_float_array(iv_strbuf *b, const float *v, size_t n)
{
    iv_sb_putc(b, '[');
    for (size_t i = 0; i < n; i++) {
        if (i) iv_sb_putc(b, ',');
        iv_sb_float(b, v[i]);
    }
    iv_sb_putc(b, ']');
}
