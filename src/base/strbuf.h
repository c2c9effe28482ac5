/* Growable byte buffer for building JSON responses and output lines. */
#ifndef IV_BASE_STRBUF_H
#define IV_BASE_STRBUF_H

#include <stddef.h>

typedef struct iv_strbuf {
    char *data;
    size_t len, cap;
    int oom; /* set when an allocation failed; later appends are dropped */
} iv_strbuf;

void iv_sb_init(iv_strbuf *b);
void iv_sb_free(iv_strbuf *b);
void iv_sb_reset(iv_strbuf *b);
void iv_sb_append(iv_strbuf *b, const char *s, size_t n);
void iv_sb_puts(iv_strbuf *b, const char *s);
void iv_sb_putc(iv_strbuf *b, char c);
void iv_sb_printf(iv_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string literal with quotes and escapes (input must be valid UTF-8). */
void iv_sb_json_string(iv_strbuf *b, const char *s, size_t n);
/* Decimal integer, without printf. */
void iv_sb_int(iv_strbuf *b, long long v);
/* Shortest decimal that reads back as the same float; non-finite -> null. */
void iv_sb_float(iv_strbuf *b, float f);
/* [f0,f1,...] */
void iv_sb_float_array(iv_strbuf *b, const float *v, size_t n);

#endif
