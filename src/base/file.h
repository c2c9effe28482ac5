/* Whole-file reads and read-only memory maps. */
#ifndef IV_BASE_FILE_H
#define IV_BASE_FILE_H

#include <stddef.h>
#include "base/err.h"

typedef struct iv_mapped_file {
    const unsigned char *data;
    size_t size;
} iv_mapped_file;

int iv_file_map(iv_mapped_file *out, const char *path, iv_err *err);
void iv_file_unmap(iv_mapped_file *m);

/* Reads a whole file into a NUL-terminated malloc'd buffer; max_size bounds it. */
int iv_file_read_all(const char *path, size_t max_size, char **out, size_t *out_len, iv_err *err);
int iv_file_exists(const char *path);
int iv_dir_exists(const char *path);
/* Joins dir and name into out (PATH_MAX); returns out. */
char *iv_path_join(char *out, size_t cap, const char *dir, const char *name);

#endif
