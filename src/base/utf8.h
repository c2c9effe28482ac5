/* Small UTF-8 helpers over valid UTF-8 (request texts are validated when
 * parsed): counting code points and cutting at character boundaries. */
#ifndef IV_BASE_UTF8_H
#define IV_BASE_UTF8_H

#include <stddef.h>
#include <string.h>

/* Code points in s[0..n). */
size_t iv_utf8_chars(const char *s, size_t n);
/* Byte length of the first `chars` code points of s (of the last ones when
 * from_end); n when s has no more. */
size_t iv_utf8_prefix_bytes(const char *s, size_t n, size_t chars, int from_end);
/* The longest prefix of s[0..n) of at most max_bytes bytes that ends on a
 * character boundary: what an error message may echo of a client string. */
size_t iv_utf8_cut(const char *s, size_t n, size_t max_bytes);
/* printf arguments for "%.*s" that echo at most max bytes of the
 * NUL-terminated client string s, cut at a character boundary. */
#define IV_UTF8_ECHO(max, s) (int)iv_utf8_cut((s), strlen(s), (max)), (s)
/* Length (1..4) of the well-formed UTF-8 sequence at s[0..n) (RFC 3629: no
 * overlong forms, surrogates or code points past U+10FFFF), 0 if there is none. */
int iv_utf8_seq_len(const char *s, size_t n);
/* Byte offset of the first ill-formed sequence in s[0..n), or -1 when all
 * of it is well-formed UTF-8 (U+0000 included). */
long iv_utf8_invalid_at(const char *s, size_t n);
/* Makes the NUL-terminated s valid UTF-8 in place: a sequence cut short at
 * the end (a message truncated to its buffer) is dropped, any other
 * ill-formed byte becomes '?'. */
void iv_utf8_scrub(char *s);

#endif
