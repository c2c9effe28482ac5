#include "unit/tmp_test_util.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define TMP_PREFIX "/tmp/iv_"

int tmp_dir(char *out, size_t cap, const char *tag)
{
    if ((size_t)snprintf(out, cap, TMP_PREFIX "%s_XXXXXX", tag) >= cap) return -1;
    return mkdtemp(out) ? 0 : -1;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

void tmp_rmtree(const char *dir)
{
    if (dir && !strncmp(dir, TMP_PREFIX, strlen(TMP_PREFIX))) nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int tmp_put(const char *root, const char *rel, const char *text)
{
    char path[1024];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", root, rel) >= sizeof path) return -1;
    for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
        *p = 0;
        if (mkdir(path, 0755) && errno != EEXIST) return -1;
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}
