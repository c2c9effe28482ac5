/* Helpers shared by the model resolution tests: temporary directories and
 * saving / restoring the Hugging Face environment variables. */
#ifndef IV_TESTS_RESOLVE_UTIL_H
#define IV_TESTS_RESOLVE_UTIL_H

#include <stddef.h>

/* Every variable resolution reads; rt_env_save unsets them all. */
#define RT_ENV_COUNT 11
typedef struct rt_env {
    char *old[RT_ENV_COUNT]; /* NULL: was unset */
} rt_env;
void rt_env_save(rt_env *e);
void rt_env_restore(rt_env *e);

/* A fresh directory under /tmp (out: 4096 bytes); 0 on success. */
int rt_tmpdir(char *out);
void rt_rmtree(const char *dir);
/* Writes a file, creating its directories; 0 on success. */
int rt_write(const char *path, const void *data, size_t len);
int rt_write_str(const char *path, const char *text);
/* Reads a whole file (malloc'd, NUL-terminated) or NULL. */
char *rt_read(const char *path, size_t *len);

#endif
