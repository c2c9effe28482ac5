/* Internals of model resolution (resolve.c), split by job:
 *   hub_env.c      where the cache, endpoint, token and offline switch come from
 *   hub_cache.c    the huggingface_hub cache layout: refs, snapshots, blobs, symlinks
 *   hub_files.c    which repository files the engine needs
 *   hub_http.c     libcurl: metadata HEAD, small GETs, resumable verified downloads
 *   hub_download.c one revision of one repository into the cache
 * Only resolve.c and the tests include this header. */
#ifndef IV_ENGINE_HUB_H
#define IV_ENGINE_HUB_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include "base/err.h"

/* ---- hub_env.c ---- */

/* Cache root: HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, HF_HOME/hub,
 * $XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub (as huggingface_hub). */
void iv_hub_cache_root(char *out, size_t cap);
/* HF_ENDPOINT without a trailing slash, default https://huggingface.co. */
void iv_hub_endpoint(char *out, size_t cap);
/* HF_TOKEN, HUGGING_FACE_HUB_TOKEN, else the file HF_TOKEN_PATH or
 * HF_HOME/token; empty string when none. */
void iv_hub_token(char *out, size_t cap);
/* HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is 1/true/yes/on, any case. */
int iv_hub_offline_env(void);

/* ---- hub_cache.c ---- */

/* One repository in the cache: <root>/models--org--name. */
typedef struct iv_hub_repo {
    char id[200];            /* org/name */
    char dir[PATH_MAX];      /* <root>/models--org--name */
    char locks_dir[PATH_MAX]; /* <root>/.locks/models--org--name */
} iv_hub_repo;

void iv_hub_repo_init(iv_hub_repo *r, const char *cache_root, const char *id);
/* 40 lowercase hex digits: a full commit hash. */
int iv_hub_is_commit(const char *s);
/* The commit of a checkpoint directory that is a cache snapshot
 * (<cache>/models--org--name/snapshots/<40 hex>[/]): 0 and commit filled,
 * else -1 (a plain local directory). */
int iv_hub_snapshot_commit(const char *dir, char commit[41]);
/* Branch or tag names as refs/ may hold them: [A-Za-z0-9._/-], no "..",
 * no leading '/', at most 255 characters. */
int iv_hub_revision_valid(const char *rev);
/* The commit a revision names in the cache: itself when a commit hash, else
 * the content of refs/<revision>. Returns 0 with commit filled, -1 when unknown. */
int iv_hub_cached_commit(const iv_hub_repo *r, const char *revision, char commit[41]);
/* Writes refs/<revision> = commit atomically (no-op for a commit hash). */
int iv_hub_write_ref(const iv_hub_repo *r, const char *revision, const char *commit, iv_err *err);
/* snapshots/<commit>[/file] into out. */
void iv_hub_snapshot_path(const iv_hub_repo *r, const char *commit, const char *file, char *out,
                          size_t cap);
/* Points snapshots/<commit>/<file> at blobs/<blob> with a relative symlink
 * (../../blobs/<blob>, one more ../ per directory in file), as huggingface_hub does. */
int iv_hub_link_blob(const iv_hub_repo *r, const char *commit, const char *file, const char *blob,
                     iv_err *err);
/* snprintf for paths: 0, or -1 when the result did not fit (out then holds
 * the empty string, which no file-system call will mistake for a path). */
int iv_pathf(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* mkdir -p for the directory part of path (or path itself when is_dir). */
int iv_mkdirs(const char *path, int is_dir, iv_err *err);

/* ---- hub_files.c ---- */

/* A growable list of strings (file names). */
typedef struct iv_strlist {
    char **items;
    int n, cap;
} iv_strlist;
int iv_strlist_add(iv_strlist *l, const char *s);
int iv_strlist_has(const iv_strlist *l, const char *s);
void iv_strlist_free(iv_strlist *l);

/* The files to fetch before anything else, chosen from the repository's file
 * list: configs, tokenizer, sentence-transformers metadata, and the weights
 * file or the shard index. Fails when config.json or safetensors weights are
 * missing from the repository. */
int iv_hub_select_first(const iv_strlist *repo_files, const char *id, iv_strlist *out, iv_err *err);
/* The files those name, once they are in snapshot_dir: the shards of
 * model.safetensors.index.json, and the configs and safetensors of every
 * sentence-transformers module folder listed in modules.json. */
int iv_hub_select_then(const iv_strlist *repo_files, const char *snapshot_dir, iv_strlist *out,
                       iv_err *err);
/* Whether a snapshot directory has what the engine needs: config.json,
 * complete safetensors weights, a tokenizer (tokenizer.json or vocab.txt)
 * and the config.json of each Pooling/Dense module in modules.json. On 0,
 * missing names the first absent file. */
int iv_hub_snapshot_complete(const char *snapshot_dir, char *missing, size_t cap);

/* ---- hub_http.c ---- */

/* What a HEAD of {endpoint}/{id}/resolve/{rev}/{file} says (redirects within
 * the endpoint followed, a redirect elsewhere reported in location). */
typedef struct iv_http_meta {
    long status;
    char etag[160];        /* X-Linked-Etag (LFS sha256) else ETag, quotes and W/ removed */
    int linked;            /* etag came from X-Linked-Etag */
    int64_t size;          /* X-Linked-Size else Content-Length; -1 unknown */
    char commit[64];       /* X-Repo-Commit */
    char error_code[64];   /* X-Error-Code (RepoNotFound, RevisionNotFound, GatedRepo, ...) */
    char location[4096];   /* where to GET the content: a redirect target, else the url */
} iv_http_meta;

/* Transport failures (DNS, connect, TLS, timeouts) return -1 with IV_E_IO and
 * the curl message; any HTTP status returns 0 with it filled in. token may be
 * empty. */
int iv_http_head(const char *url, const char *token, iv_http_meta *m, iv_err *err);
/* Whether a redirect from `from` to `to` stays on the hub: the same origin,
 * or huggingface.co / hf.co. Only there may the token go. */
int iv_http_hub_origin(const char *from, const char *to);
/* GET into memory (at most max_bytes), following redirects. *body is
 * NUL-terminated and malloc'd; error_code gets X-Error-Code (64 bytes). */
int iv_http_get(const char *url, const char *token, size_t max_bytes, long *status, char **body,
                size_t *len, char error_code[64], iv_err *err);

typedef struct iv_http_download_req {
    const char *url;
    const char *token;
    const char *path;       /* the .incomplete file; appended to when it exists */
    int64_t expected_size;  /* -1 unknown */
    const char *sha256;     /* 64 hex digits to verify, or NULL */
    const char *label;      /* name on the progress bar */
} iv_http_download_req;
/* Downloads into req->path, resuming its existing bytes with a Range request
 * (restarting when the server ignores it), retrying a few times after
 * dropped connections, then checks size and sha256; on a mismatch the file
 * is deleted. On failure *status tells why: the HTTP status of an error
 * answer, -1 for a transport failure, 0 for a local one (file system, size,
 * checksum). */
int iv_http_download(const iv_http_download_req *req, long *status, iv_err *err);

/* "12.3 MB": decimal units, as the hub shows sizes. */
void iv_human_bytes(char *out, size_t cap, double bytes);

/* ---- hub_download.c ---- */

/* Downloads what the engine needs of repo r at revision from endpoint into
 * the cache, then writes refs/<revision>. On success commit holds the
 * snapshot's commit hash. */
int iv_hub_download(const iv_hub_repo *r, const char *endpoint, const char *token,
                    const char *revision, char commit[41], iv_err *err);

#endif
