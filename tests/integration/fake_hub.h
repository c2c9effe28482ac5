/* A small Hugging Face hub on 127.0.0.1 (random port), run by libmicrohttpd
 * in the test process, for testing downloads without the network. It serves
 *   GET  /api/models/{id}/revision/{rev}    commit + siblings JSON
 *   HEAD/GET /{id}/resolve/{rev}/{file}      plain files with ETag, LFS files as a
 *                                            302 to /cdn/{sha256} with X-Linked-Etag/Size,
 *                                            on another origin (localhost instead of
 *                                            127.0.0.1) as the hub's storage is
 *   GET  /cdn/{sha256}                       LFS content, honouring Range
 * with switches for the failure modes the client must handle. */
#ifndef IV_TESTS_FAKE_HUB_H
#define IV_TESTS_FAKE_HUB_H

#include <pthread.h>
#include <stddef.h>

#define FAKE_HUB_MAX_FILES 16
#define FAKE_HUB_MAX_LOG 256

typedef struct fake_file {
    char name[96];
    unsigned char *data;
    size_t len;
    int lfs;          /* served through /cdn with X-Linked-Etag */
    char sha256[65];
    char etag[41];    /* the "git" etag of a plain file */
} fake_file;

typedef struct fake_repo {
    char id[96];
    char commit[41];
    fake_file files[FAKE_HUB_MAX_FILES];
    int n_files;
} fake_repo;

typedef struct fake_hub {
    struct MHD_Daemon *daemon;
    int port;
    char endpoint[64];
    fake_repo repos[4];
    int n_repos;
    /* Failure switches, set before a request. */
    const char *require_token; /* 401 unless "Authorization: Bearer <token>" */
    int corrupt_lfs;           /* flip one byte of every LFS body */
    int ignore_range;          /* answer 200 with the whole body to Range requests */
    size_t drop_after;         /* with drops_left > 0: cut the connection after this many bytes */
    int drops_left;
    /* What was asked, for assertions. */
    pthread_mutex_t mu;
    int n_requests;
    char log[FAKE_HUB_MAX_LOG][160]; /* "METHOD /path [range]" */
    size_t cdn_bytes;                /* body bytes sent by /cdn */
    int cdn_auth;                    /* /cdn requests that carried an Authorization header */
} fake_hub;

/* An empty hub, not yet serving. */
fake_hub *fake_hub_new(void);
/* Adds a repository / a file (copied) to it. */
fake_repo *fake_hub_add_repo(fake_hub *h, const char *id, const char *commit);
fake_file *fake_repo_add(fake_repo *r, const char *name, const void *data, size_t len, int lfs);

/* Starts serving; 0 on success. */
int fake_hub_start(fake_hub *h);
/* Stops serving (idempotent); the repositories stay. */
void fake_hub_stop(fake_hub *h);
/* Stops and frees everything. */
void fake_hub_free(fake_hub *h);
/* How many logged requests contain needle. */
int fake_hub_count(fake_hub *h, const char *needle);
void fake_hub_reset_log(fake_hub *h);

#endif
