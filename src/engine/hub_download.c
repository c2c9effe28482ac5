/* One revision of one hub repository into the cache, the way
 * huggingface_hub's hf_hub_download does it, file by file:
 *   GET  {endpoint}/api/models/{id}/revision/{rev}     -> commit, file list
 *   HEAD {endpoint}/{id}/resolve/{commit}/{file}       -> etag, size, location
 *   GET  location -> blobs/<etag>.incomplete -> blobs/<etag>
 *   snapshots/<commit>/<file> -> ../../blobs/<etag>;  refs/<rev> = commit */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/json.h"
#include "base/log.h"
#include "engine/hub.h"

typedef struct hub_ctx {
    const iv_hub_repo *repo;
    const char *endpoint, *token, *revision;
    char commit[41];
} hub_ctx;

/* Percent-encodes everything but unreserved characters (and '/' when keep_slash). */
static void url_encode(char *out, size_t cap, const char *s, int keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (; *s && n + 4 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
            out[n++] = (char)c;
        } else {
            out[n++] = '%';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        }
    }
    out[n] = 0;
}

static int unreachable(const hub_ctx *h, iv_err *err)
{
    return iv_err_prefix(err,
                         "cannot reach the Hugging Face hub at %s to download %s (set "
                         "HF_HUB_OFFLINE=1 to use only the local cache, HF_ENDPOINT for a "
                         "mirror, or pass a local model directory): ",
                         h->endpoint, h->repo->id);
}

/* An HTTP error status from the hub as something the user can act on. */
static int status_error(const hub_ctx *h, long status, const char *code, const char *file,
                        iv_err *err)
{
    const char *id = h->repo->id;
    /* Without a token the hub answers 401 for a missing repository too, as
     * it cannot tell the caller whether a private one exists. */
    if ((status == 401 || status == 403) && !strcmp(code, "RepoNotFound") && !h->token[0])
        return iv_errf(err, IV_E_NOTFOUND,
                       "model %s not found on the hub at %s, or it is gated or private: check "
                       "the id, or set HF_TOKEN to a token with access (HTTP %ld)",
                       id, h->endpoint, status);
    if (status == 401 || status == 403) {
        if (h->token[0])
            return iv_errf(err, IV_E_IO,
                           "%s is gated or private and the token in HF_TOKEN has no access "
                           "(HTTP %ld from %s): accept its terms on the hub or use a token "
                           "with access",
                           id, status, h->endpoint);
        return iv_errf(err, IV_E_IO,
                       "%s is gated or private (HTTP %ld from %s): set HF_TOKEN to a token "
                       "with access to it",
                       id, status, h->endpoint);
    }
    if (status == 404) {
        if (!strcmp(code, "RevisionNotFound"))
            return iv_errf(err, IV_E_NOTFOUND, "revision '%s' of %s not found on the hub at %s",
                           h->revision, id, h->endpoint);
        if (file && !strcmp(code, "EntryNotFound"))
            return iv_errf(err, IV_E_NOTFOUND, "%s of %s@%s not found on the hub at %s", file, id,
                           h->revision, h->endpoint);
        return iv_errf(err, IV_E_NOTFOUND,
                       "model %s not found on the hub at %s (check the id, or pass a local "
                       "directory)",
                       id, h->endpoint);
    }
    return iv_errf(err, IV_E_IO, "the hub at %s answered HTTP %ld for %s%s%s; try again later",
                   h->endpoint, status, id, file ? " " : "", file ? file : "");
}

/* The commit and file list of the revision. */
static int fetch_revision_info(hub_ctx *h, iv_strlist *files, iv_err *err)
{
    char rev[800], url[2048];
    url_encode(rev, sizeof rev, h->revision, 0);
    snprintf(url, sizeof url, "%s/api/models/%s/revision/%s", h->endpoint, h->repo->id, rev);
    long status;
    char *body, code[64];
    size_t len;
    if (iv_http_get(url, h->token, 64u << 20, &status, &body, &len, code, err))
        return err->code == IV_E_IO ? unreachable(h, err) : -1;
    if (status != 200) {
        free(body);
        return status_error(h, status, code, NULL, err);
    }
    cJSON *j;
    int rc = iv_json_parse(body, len, url, &j, err);
    free(body);
    if (rc) return -1;
    const char *sha = iv_json_str(j, "sha", "");
    const cJSON *siblings = cJSON_GetObjectItemCaseSensitive(j, "siblings");
    if (!iv_hub_is_commit(sha) || !cJSON_IsArray(siblings)) {
        cJSON_Delete(j);
        return iv_errf(err, IV_E_FORMAT,
                       "%s did not answer like a Hugging Face hub (no commit sha or siblings); "
                       "check HF_ENDPOINT",
                       url);
    }
    memcpy(h->commit, sha, 41);
    const cJSON *s;
    cJSON_ArrayForEach(s, siblings)
    {
        const char *name = iv_json_str(s, "rfilename", NULL);
        if (name && iv_strlist_add(files, name)) {
            cJSON_Delete(j);
            return iv_errf(err, IV_E_NOMEM, "out of memory");
        }
    }
    cJSON_Delete(j);
    return 0;
}

/* A repository file name we will join under snapshots/: relative, no "..". */
static int file_name_safe(const char *name)
{
    if (!*name || name[0] == '/' || strlen(name) > 1000) return 0;
    for (const char *p = name; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == '\\') return 0;
    for (const char *p = name; *p;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) return 0;
        p += n + (e ? 1 : 0);
    }
    return 1;
}

/* An etag usable as a blob file name. */
static int etag_safe(const char *etag)
{
    if (!*etag || etag[0] == '.' || strlen(etag) > 128) return 0;
    for (const char *p = etag; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_' || *p == '.'))
            return 0;
    return 1;
}

static int is_sha256(const char *s)
{
    if (strlen(s) != 64) return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F')))
            return 0;
    return 1;
}

/* Holds <locks>/<etag>.lock, the lock huggingface_hub's filelock takes too
 * (flock on Linux), so two processes never write the same blob. */
static int lock_blob(const hub_ctx *h, const char *etag, const char *file, iv_err *err)
{
    char path[PATH_MAX + 200];
    snprintf(path, sizeof path, "%s/%s.lock", h->repo->locks_dir, etag);
    if (iv_mkdirs(path, 0, err)) return -1;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) return iv_errf(err, IV_E_IO, "cannot open %s: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        IV_INFO("waiting for another process downloading %s (%s)", file, path);
        if (flock(fd, LOCK_EX) != 0) {
            close(fd);
            return iv_errf(err, IV_E_IO, "cannot lock %s: %s", path, strerror(errno));
        }
    }
    return fd;
}

static int fetch_file(const hub_ctx *h, const char *file, iv_err *err)
{
    const iv_hub_repo *r = h->repo;
    if (!file_name_safe(file))
        return iv_errf(err, IV_E_FORMAT, "the hub listed an unsafe file name '%s' in %s", file,
                       r->id);
    char pointer[PATH_MAX];
    iv_hub_snapshot_path(r, h->commit, file, pointer, sizeof pointer);
    struct stat st;
    if (stat(pointer, &st) == 0) return 0;

    char enc[3200], url[4096];
    url_encode(enc, sizeof enc, file, 1);
    snprintf(url, sizeof url, "%s/%s/resolve/%s/%s", h->endpoint, r->id, h->commit, enc);
    iv_http_meta m;
    if (iv_http_head(url, h->token, &m, err)) return unreachable(h, err);
    if (m.status != 200) return status_error(h, m.status, m.error_code, file, err);
    if (!etag_safe(m.etag))
        return iv_errf(err, IV_E_FORMAT,
                       "%s: no usable ETag in the answer; is HF_ENDPOINT (%s) a Hugging Face hub?",
                       url, h->endpoint);

    char blob[PATH_MAX + 200], partial[PATH_MAX + 240];
    snprintf(blob, sizeof blob, "%s/blobs/%s", r->dir, m.etag);
    snprintf(partial, sizeof partial, "%s.incomplete", blob);
    if (iv_mkdirs(blob, 0, err)) return -1;
    int lock = lock_blob(h, m.etag, file, err);
    if (lock < 0) return -1;
    int rc = 0;
    if (stat(blob, &st) != 0) {
        iv_http_download_req req = {
            .url = m.location,
            /* A signed storage URL needs no token, and must not see it. */
            .token = iv_http_hub_origin(url, m.location) ? h->token : "",
            .path = partial,
            .expected_size = m.size,
            .sha256 = m.linked && is_sha256(m.etag) ? m.etag : NULL,
            .label = file,
        };
        if (!isatty(STDERR_FILENO)) {
            char size[32] = "size unknown";
            if (m.size >= 0) iv_human_bytes(size, sizeof size, (double)m.size);
            IV_INFO("downloading %s/%s (%s)", r->id, file, size);
        }
        long status;
        rc = iv_http_download(&req, &status, err);
        if (rc && status > 0) status_error(h, status, "", file, err);
        else if (rc && status < 0) unreachable(h, err);
        if (!rc && rename(partial, blob) != 0)
            rc = iv_errf(err, IV_E_IO, "cannot rename %s to %s: %s", partial, blob,
                         strerror(errno));
    }
    close(lock); /* releases the flock */
    if (rc) return -1;
    return iv_hub_link_blob(r, h->commit, file, m.etag, err);
}

static int fetch_all(const hub_ctx *h, const iv_strlist *files, iv_err *err)
{
    for (int i = 0; i < files->n; i++)
        if (fetch_file(h, files->items[i], err)) return -1;
    return 0;
}

int iv_hub_download(const iv_hub_repo *r, const char *endpoint, const char *token,
                    const char *revision, char commit[41], iv_err *err)
{
    hub_ctx h = {.repo = r, .endpoint = endpoint, .token = token, .revision = revision};
    iv_strlist files = {0}, first = {0}, then = {0};
    int rc = -1;
    if (fetch_revision_info(&h, &files, err)) goto out;
    if (iv_hub_select_first(&files, r->id, &first, err)) goto out;
    if (fetch_all(&h, &first, err)) goto out;
    char snapshot[PATH_MAX];
    iv_hub_snapshot_path(r, h.commit, NULL, snapshot, sizeof snapshot);
    if (iv_hub_select_then(&files, snapshot, &then, err)) goto out;
    if (fetch_all(&h, &then, err)) goto out;
    if (iv_hub_write_ref(r, revision, h.commit, err)) goto out;
    memcpy(commit, h.commit, 41);
    rc = 0;
out:
    iv_strlist_free(&files);
    iv_strlist_free(&first);
    iv_strlist_free(&then);
    return rc;
}
