/* Reading the tokenizer fixtures (JSON lines written by the Python
 * generator). cJSON handles numbers and structure; strings are decoded with
 * their length because some fixtures hold U+0000, which cJSON cuts. */
#ifndef IV_TESTS_TOK_JSONL_H
#define IV_TESTS_TOK_JSONL_H

#include <stddef.h>
#include <stdint.h>

/* Start of the value of top-level member `key` of the object in line, or NULL. */
const char *tokt_member(const char *line, size_t len, const char *key);
/* Decodes the string value of `key` (malloc'd); 0 when absent or null, -1 on error. */
int tokt_string(const char *line, size_t len, const char *key, char **out, size_t *out_len, int *present);
/* Decodes an array of strings; *n elements, each malloc'd. */
int tokt_string_array(const char *line, size_t len, const char *key, char ***out, size_t **lens, int *n);
void tokt_free_strings(char **v, size_t *lens, int n);
/* Reads a whole file (malloc'd, NUL-terminated); NULL when missing. */
char *tokt_read_file(const char *path, size_t *len);
/* Sorted subdirectory names of dir (malloc'd); count in *n. */
char **tokt_list_dirs(const char *dir, int *n);
void tokt_free_list(char **v, int n);

#endif
