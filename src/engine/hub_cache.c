/* The huggingface_hub cache layout, which Python tools read and write too:
 *
 *   <root>/models--org--name/
 *       refs/<revision>            the commit hash a branch or tag pointed at
 *       blobs/<etag>               file contents, named by etag (sha256 for LFS)
 *       snapshots/<commit>/<file>  relative symlinks into blobs/
 *   <root>/.locks/models--org--name/<etag>.lock
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/hub.h"

int iv_pathf(char *out, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, cap, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap) {
        if (cap) out[0] = 0;
        return -1;
    }
    return 0;
}

void iv_hub_repo_init(iv_hub_repo *r, const char *cache_root, const char *id)
{
    snprintf(r->id, sizeof r->id, "%s", id);
    char folder[256] = "models";
    /* Each '/' becomes "--": the folder is one path component. */
    const char *p = id;
    size_t n = strlen(folder);
    strcpy(folder + n, "--");
    n += 2;
    for (; *p && n + 3 < sizeof folder; p++) {
        if (*p == '/') {
            folder[n++] = '-';
            folder[n++] = '-';
        } else {
            folder[n++] = *p;
        }
    }
    folder[n] = 0;
    iv_pathf(r->dir, sizeof r->dir, "%s/%s", cache_root, folder);
    iv_pathf(r->locks_dir, sizeof r->locks_dir, "%s/.locks/%s", cache_root, folder);
}

int iv_hub_is_commit(const char *s)
{
    if (!s || strlen(s) != 40) return 0;
    for (int i = 0; i < 40; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

int iv_hub_revision_valid(const char *rev)
{
    size_t n = rev ? strlen(rev) : 0;
    if (n == 0 || n > 255 || rev[0] == '/' || rev[n - 1] == '/' || strstr(rev, "..") ||
        strstr(rev, "//"))
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = rev[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || c == '/'))
            return 0;
    }
    return 1;
}

int iv_hub_cached_commit(const iv_hub_repo *r, const char *revision, char commit[41])
{
    if (iv_hub_is_commit(revision)) {
        memcpy(commit, revision, 41);
        return 0;
    }
    char path[PATH_MAX + 300];
    snprintf(path, sizeof path, "%s/refs/%s", r->dir, revision);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char buf[64] = {0};
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ')) buf[--n] = 0;
    if (!iv_hub_is_commit(buf)) return -1;
    memcpy(commit, buf, 41);
    return 0;
}

int iv_mkdirs(const char *path, int is_dir, iv_err *err)
{
    char buf[PATH_MAX];
    size_t n = strlen(path);
    if (n >= sizeof buf) return iv_errf(err, IV_E_IO, "path too long: %s", path);
    memcpy(buf, path, n + 1);
    if (!is_dir) {
        char *slash = strrchr(buf, '/');
        if (!slash) return 0;
        *slash = 0;
    }
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == 0) {
            char saved = *p;
            *p = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return iv_errf(err, IV_E_IO, "cannot create directory %s: %s", buf, strerror(errno));
            *p = saved;
            if (!saved) break;
        }
    }
    return 0;
}

int iv_hub_write_ref(const iv_hub_repo *r, const char *revision, const char *commit, iv_err *err)
{
    if (iv_hub_is_commit(revision)) return 0;
    char cur[41];
    if (iv_hub_cached_commit(r, revision, cur) == 0 && !strcmp(cur, commit)) return 0;
    char path[PATH_MAX + 300], tmp[PATH_MAX + 340];
    snprintf(path, sizeof path, "%s/refs/%s", r->dir, revision);
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    if (iv_mkdirs(path, 0, err)) return -1;
    /* Written beside it and renamed, so a concurrent reader never sees half a hash. */
    FILE *f = fopen(tmp, "w");
    if (!f) return iv_errf(err, IV_E_IO, "cannot write %s: %s", tmp, strerror(errno));
    int ok = fputs(commit, f) >= 0;
    ok &= fclose(f) == 0;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return iv_errf(err, IV_E_IO, "cannot write %s: %s", path, strerror(errno));
    }
    return 0;
}

void iv_hub_snapshot_path(const iv_hub_repo *r, const char *commit, const char *file, char *out,
                          size_t cap)
{
    if (file && *file) iv_pathf(out, cap, "%s/snapshots/%s/%s", r->dir, commit, file);
    else iv_pathf(out, cap, "%s/snapshots/%s", r->dir, commit);
}

int iv_hub_link_blob(const iv_hub_repo *r, const char *commit, const char *file, const char *blob,
                     iv_err *err)
{
    char link_path[PATH_MAX];
    iv_hub_snapshot_path(r, commit, file, link_path, sizeof link_path);
    if (iv_mkdirs(link_path, 0, err)) return -1;
    /* snapshots/<commit>/ is two levels below the repo folder, plus one per
     * directory inside the file name (1_Pooling/config.json). */
    char target[PATH_MAX];
    size_t n = 0;
    target[0] = 0;
    for (const char *p = file; *p; p++)
        if (*p == '/') n += (size_t)snprintf(target + n, sizeof target - n, "../");
    snprintf(target + n, sizeof target - n, "../../blobs/%s", blob);
    if (unlink(link_path) != 0 && errno != ENOENT)
        return iv_errf(err, IV_E_IO, "cannot replace %s: %s", link_path, strerror(errno));
    if (symlink(target, link_path) != 0 && errno != EEXIST)
        return iv_errf(err, IV_E_IO, "cannot link %s -> %s: %s", link_path, target, strerror(errno));
    return 0;
}

int iv_hub_snapshot_commit(const char *dir, char commit[41])
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    /* ".../snapshots/" + 40 hex */
    static const char marker[] = "/snapshots/";
    const size_t m = sizeof marker - 1;
    if (n < m + 40 || strncmp(dir + n - 40 - m, marker, m)) return -1;
    char c[41];
    memcpy(c, dir + n - 40, 40);
    c[40] = 0;
    if (!iv_hub_is_commit(c)) return -1;
    memcpy(commit, c, 41);
    return 0;
}
