#include "base/utf8.h"

#include <string.h>

static int is_cont(char c) { return ((unsigned char)c & 0xC0) == 0x80; }

size_t iv_utf8_chars(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += !is_cont(s[i]);
    return c;
}

size_t iv_utf8_prefix_bytes(const char *s, size_t n, size_t chars, int from_end)
{
    size_t seen = 0;
    if (!from_end) {
        for (size_t i = 0; i < n; i++)
            if (!is_cont(s[i]) && seen++ == chars) return i;
        return n;
    }
    for (size_t i = n; i-- > 0;)
        if (!is_cont(s[i]) && ++seen == chars) return n - i;
    return n;
}

size_t iv_utf8_cut(const char *s, size_t n, size_t max_bytes)
{
    if (n <= max_bytes) return n;
    size_t k = max_bytes;
    /* s[k] is the first byte left out: back up while it continues a character. */
    while (k > 0 && is_cont(s[k])) k--;
    return k;
}

int iv_utf8_seq_len(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    if (n == 0) return 0;
    unsigned c = u[0];
    if (c < 0x80) return 1;
    int len;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;      /* overlong */
        else if (c == 0xED) hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;      /* overlong */
        else if (c == 0xF4) hi = 0x8F; /* past U+10FFFF */
    } else return 0;
    if ((size_t)len > n || u[1] < lo || u[1] > hi) return 0;
    for (int i = 2; i < len; i++)
        if ((u[i] & 0xC0) != 0x80) return 0;
    return len;
}

void iv_utf8_scrub(char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        int k = iv_utf8_seq_len(s + i, n - i);
        if (k) {
            i += (size_t)k;
            continue;
        }
        /* A lead byte whose sequence runs into the end: a cut, not garbage. */
        size_t j = i + 1;
        while (j < n && is_cont(s[j])) j++;
        if (j == n && (unsigned char)s[i] >= 0xC2 && (unsigned char)s[i] <= 0xF4 && n - i < 4) {
            s[i] = 0;
            return;
        }
        s[i++] = '?';
    }
}

long iv_utf8_invalid_at(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        if ((unsigned char)s[i] < 0x80) { /* the common case, and NUL, which seq_len would not take */
            i++;
            continue;
        }
        const int l = iv_utf8_seq_len(s + i, n - i);
        if (l == 0) return (long)i;
        i += (size_t)l;
    }
    return -1;
}
