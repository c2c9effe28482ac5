/* Temporary directories for tests: made under /tmp with a tag naming the
 * test area, and removed with everything in them. */
#ifndef IV_TESTS_TMP_TEST_UTIL_H
#define IV_TESTS_TMP_TEST_UTIL_H

#include <stddef.h>

/* Makes /tmp/iv_<tag>_XXXXXX and puts its path in out (cap bytes); 0 on
 * success. */
int tmp_dir(char *out, size_t cap, const char *tag);
/* Removes a directory made by tmp_dir and everything in it; links are
 * removed, never followed. Any other path is left alone. */
void tmp_rmtree(const char *dir);
/* Writes text to root/rel, making the folders on the way; 0 on success. */
int tmp_put(const char *root, const char *rel, const char *text);

#endif
