#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int iv_file_map(iv_mapped_file *out, const char *path, iv_err *err)
{
    out->data = NULL;
    out->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return iv_errf(err, errno == ENOENT ? IV_E_NOTFOUND : IV_E_IO, "cannot open %s: %s", path,
                       strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return iv_errf(err, IV_E_IO, "%s is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return iv_errf(err, IV_E_FORMAT, "%s is empty", path);
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return iv_errf(err, IV_E_IO, "cannot map %s: %s", path, strerror(errno));
    out->data = p;
    out->size = (size_t)st.st_size;
    return 0;
}

void iv_file_unmap(iv_mapped_file *m)
{
    if (m->data) munmap((void *)m->data, m->size);
    m->data = NULL;
    m->size = 0;
}

int iv_file_read_all(const char *path, size_t max_size, char **out, size_t *out_len, iv_err *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return iv_errf(err, errno == ENOENT ? IV_E_NOTFOUND : IV_E_IO, "cannot open %s: %s", path,
                       strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return iv_errf(err, IV_E_IO, "%s is not a regular file", path);
    }
    if ((size_t)st.st_size > max_size) {
        fclose(f);
        return iv_errf(err, IV_E_TOO_LARGE, "%s is %lld bytes, over the %zu byte limit", path,
                       (long long)st.st_size, max_size);
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        fclose(f);
        return iv_errf(err, IV_E_NOMEM, "out of memory reading %s", path);
    }
    if (fread(buf, 1, n, f) != n) {
        free(buf);
        fclose(f);
        return iv_errf(err, IV_E_IO, "short read on %s", path);
    }
    fclose(f);
    buf[n] = 0;
    *out = buf;
    if (out_len) *out_len = n;
    return 0;
}

int iv_file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int iv_dir_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

char *iv_path_join(char *out, size_t cap, const char *dir, const char *name)
{
    size_t n = strlen(dir);
    if (n && dir[n - 1] == '/') snprintf(out, cap, "%s%s", dir, name);
    else snprintf(out, cap, "%s/%s", dir, name);
    return out;
}
