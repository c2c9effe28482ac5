#include "base/utf8.h"

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
