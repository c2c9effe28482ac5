/* Small UTF-8 helpers over valid UTF-8 (request texts are validated when
 * parsed): counting code points and cutting at character boundaries. */
#ifndef IV_BASE_UTF8_H
#define IV_BASE_UTF8_H

#include <stddef.h>

/* Code points in s[0..n). */
size_t iv_utf8_chars(const char *s, size_t n);
/* Byte length of the first `chars` code points of s (of the last ones when
 * from_end); n when s has no more. */
size_t iv_utf8_prefix_bytes(const char *s, size_t n, size_t chars, int from_end);
/* The longest prefix of s[0..n) of at most max_bytes bytes that ends on a
 * character boundary: what an error message may echo of a client string. */
size_t iv_utf8_cut(const char *s, size_t n, size_t max_bytes);

#endif
