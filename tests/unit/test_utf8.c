/* src/base/utf8: cutting at character boundaries and scrubbing ill-formed bytes. */
#include <string.h>

#include "base/utf8.h"
#include "test.h"

TEST(utf8_cut_and_validate)
{
    const char *s = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"; /* a é € 😀: 1+2+3+4 bytes */
    size_t n = strlen(s);
    CHECK_EQ_INT(iv_utf8_cut(s, n, 100), n);
    CHECK_EQ_INT(iv_utf8_cut(s, n, 2), 1);  /* inside é */
    CHECK_EQ_INT(iv_utf8_cut(s, n, 3), 3);
    CHECK_EQ_INT(iv_utf8_cut(s, n, 5), 3);  /* inside € */
    CHECK_EQ_INT(iv_utf8_cut(s, n, 9), 6);  /* inside 😀 */
    CHECK_EQ_INT(iv_utf8_cut(s, n, 0), 0);
    CHECK_EQ_INT(iv_utf8_chars(s, n), 4);
    CHECK_EQ_INT(iv_utf8_seq_len(s + 6, 4), 4);
    CHECK_EQ_INT(iv_utf8_seq_len(s + 6, 3), 0);          /* cut short */
    CHECK_EQ_INT(iv_utf8_seq_len("\xc0\xaf", 2), 0);     /* overlong */
    CHECK_EQ_INT(iv_utf8_seq_len("\xe0\x80\xaf", 3), 0); /* overlong */
    CHECK_EQ_INT(iv_utf8_seq_len("\xed\xa0\x80", 3), 0); /* surrogate */
    CHECK_EQ_INT(iv_utf8_seq_len("\xf4\x90\x80\x80", 4), 0); /* past U+10FFFF */
    CHECK_EQ_INT(iv_utf8_seq_len("\xef\xbf\xbd", 3), 3);
    CHECK_EQ_INT(iv_utf8_seq_len("\x80", 1), 0);

    char a[] = "ok \xc3\xa9 \xff x \xe2\x82"; /* a stray byte, then a sequence cut at the end */
    iv_utf8_scrub(a);
    CHECK_STR(a, "ok \xc3\xa9 ? x ");
    char b[] = "\xe2\x82 mid";
    iv_utf8_scrub(b);
    CHECK_STR(b, "?? mid");
}
