#include "fake_hub.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/sha256.h"

fake_hub *fake_hub_new(void)
{
    fake_hub *h = calloc(1, sizeof *h);
    if (h) pthread_mutex_init(&h->mu, NULL);
    return h;
}

fake_repo *fake_hub_add_repo(fake_hub *h, const char *id, const char *commit)
{
    fake_repo *r = &h->repos[h->n_repos++];
    memset(r, 0, sizeof *r);
    snprintf(r->id, sizeof r->id, "%s", id);
    snprintf(r->commit, sizeof r->commit, "%s", commit);
    return r;
}

fake_file *fake_repo_add(fake_repo *r, const char *name, const void *data, size_t len, int lfs)
{
    fake_file *f = &r->files[r->n_files++];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->data = malloc(len ? len : 1);
    memcpy(f->data, data, len);
    f->len = len;
    f->lfs = lfs;
    iv_sha256_hex(data, len, f->sha256);
    /* Plain files carry a git blob sha1 as etag; any 40 hex digits do here. */
    memcpy(f->etag, f->sha256 + 24, 40);
    return f;
}

static void log_request(fake_hub *h, const char *method, const char *url, const char *range)
{
    pthread_mutex_lock(&h->mu);
    if (h->n_requests < FAKE_HUB_MAX_LOG)
        snprintf(h->log[h->n_requests], sizeof h->log[0], "%s %s%s%s", method, url,
                 range ? " range=" : "", range ? range : "");
    h->n_requests++;
    pthread_mutex_unlock(&h->mu);
}

int fake_hub_count(fake_hub *h, const char *needle)
{
    pthread_mutex_lock(&h->mu);
    int n = 0, total = h->n_requests < FAKE_HUB_MAX_LOG ? h->n_requests : FAKE_HUB_MAX_LOG;
    for (int i = 0; i < total; i++)
        if (strstr(h->log[i], needle)) n++;
    pthread_mutex_unlock(&h->mu);
    return n;
}

void fake_hub_reset_log(fake_hub *h)
{
    pthread_mutex_lock(&h->mu);
    h->n_requests = 0;
    h->cdn_bytes = 0;
    h->cdn_auth = 0;
    pthread_mutex_unlock(&h->mu);
}

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *body,
                                 const char *error_code)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    if (error_code) MHD_add_response_header(r, "X-Error-Code", error_code);
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* Body bytes [offset, len) of data, possibly corrupted or cut short. */
typedef struct body_ctx {
    fake_hub *hub;
    unsigned char *data; /* owned copy */
    size_t len;
    size_t cut;          /* end the connection with an error at this position */
    int cdn;
} body_ctx;

static ssize_t read_body(void *cls, uint64_t pos, char *buf, size_t max)
{
    body_ctx *b = cls;
    if (pos >= b->cut) return MHD_CONTENT_READER_END_WITH_ERROR;
    size_t end = b->len < b->cut ? b->len : b->cut;
    if (pos >= end) return MHD_CONTENT_READER_END_OF_STREAM;
    size_t n = end - (size_t)pos < max ? end - (size_t)pos : max;
    memcpy(buf, b->data + pos, n);
    if (b->cdn) {
        pthread_mutex_lock(&b->hub->mu);
        b->hub->cdn_bytes += n;
        pthread_mutex_unlock(&b->hub->mu);
    }
    return (ssize_t)n;
}

static void free_body(void *cls)
{
    body_ctx *b = cls;
    free(b->data);
    free(b);
}

/* File content with Range support and the failure switches. */
static enum MHD_Result send_content(fake_hub *h, struct MHD_Connection *c, const fake_file *f,
                                    const char *commit, int cdn, int head)
{
    const char *range = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range");
    size_t offset = 0;
    unsigned status = MHD_HTTP_OK;
    char content_range[96] = "";
    if (range && !h->ignore_range && !head) {
        unsigned long long start;
        if (sscanf(range, "bytes=%llu-", &start) != 1) return send_text(c, 400, "{}", NULL);
        if (start >= f->len) {
            snprintf(content_range, sizeof content_range, "bytes */%zu", f->len);
            struct MHD_Response *r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
            MHD_add_response_header(r, "Content-Range", content_range);
            enum MHD_Result ret = MHD_queue_response(c, 416, r);
            MHD_destroy_response(r);
            return ret;
        }
        offset = (size_t)start;
        status = MHD_HTTP_PARTIAL_CONTENT;
        snprintf(content_range, sizeof content_range, "bytes %zu-%zu/%zu", offset, f->len - 1,
                 f->len);
    }
    body_ctx *b = calloc(1, sizeof *b);
    b->hub = h;
    b->len = f->len - offset;
    b->data = malloc(b->len ? b->len : 1);
    memcpy(b->data, f->data + offset, b->len);
    b->cdn = cdn && !head;
    b->cut = SIZE_MAX;
    if (cdn && h->corrupt_lfs && b->len) b->data[b->len / 2] ^= 0x5a;
    pthread_mutex_lock(&h->mu);
    if (cdn && !head && h->drops_left > 0) {
        h->drops_left--;
        b->cut = h->drop_after;
    }
    pthread_mutex_unlock(&h->mu);
    struct MHD_Response *r = MHD_create_response_from_callback(b->len, 16384, read_body, b, free_body);
    if (content_range[0]) MHD_add_response_header(r, "Content-Range", content_range);
    MHD_add_response_header(r, "Accept-Ranges", "bytes");
    if (commit) {
        char quoted[48];
        snprintf(quoted, sizeof quoted, "\"%s\"", f->etag);
        MHD_add_response_header(r, "ETag", quoted);
        MHD_add_response_header(r, "X-Repo-Commit", commit);
    }
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static fake_repo *find_repo(fake_hub *h, const char *url, const char **rest)
{
    for (int i = 0; i < h->n_repos; i++) {
        size_t n = strlen(h->repos[i].id);
        if (!strncmp(url, h->repos[i].id, n) && url[n] == '/') {
            *rest = url + n + 1;
            return &h->repos[i];
        }
    }
    return NULL;
}

static int revision_known(const fake_repo *r, const char *rev, size_t n)
{
    return (n == 4 && !strncmp(rev, "main", 4)) || (n == 2 && !strncmp(rev, "v1", 2)) ||
           (n == 40 && !strncmp(rev, r->commit, 40));
}

static int authorised(fake_hub *h, struct MHD_Connection *c)
{
    if (!h->require_token) return 1;
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    char want[256];
    snprintf(want, sizeof want, "Bearer %s", h->require_token);
    return auth && !strcmp(auth, want);
}

static enum MHD_Result api_revision(fake_hub *h, struct MHD_Connection *c, const char *path)
{
    const char *rest;
    fake_repo *r = find_repo(h, path, &rest);
    if (!authorised(h, c)) return send_text(c, 401, "{\"error\":\"gated\"}", NULL);
    /* Like the hub: an unknown repository is 401 to anonymous callers, 404 to others. */
    if (!r || strncmp(rest, "revision/", 9))
        return send_text(c,
                         MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization") ? 404
                                                                                           : 401,
                         "{\"error\":\"Repository not found\"}", "RepoNotFound");
    const char *rev = rest + 9;
    if (!revision_known(r, rev, strlen(rev)))
        return send_text(c, 404, "{\"error\":\"Invalid rev id\"}", "RevisionNotFound");
    char body[8192];
    size_t n = (size_t)snprintf(body, sizeof body, "{\"id\":\"%s\",\"sha\":\"%s\",\"siblings\":[",
                                r->id, r->commit);
    for (int i = 0; i < r->n_files; i++)
        n += (size_t)snprintf(body + n, sizeof body - n, "%s{\"rfilename\":\"%s\"}", i ? "," : "",
                              r->files[i].name);
    snprintf(body + n, sizeof body - n, "]}");
    return send_text(c, 200, body, NULL);
}

static enum MHD_Result resolve_file(fake_hub *h, struct MHD_Connection *c, const char *path,
                                    int head)
{
    const char *rest;
    fake_repo *r = find_repo(h, path, &rest);
    if (!authorised(h, c)) return send_text(c, 401, "{}", NULL);
    if (!r || strncmp(rest, "resolve/", 8)) return send_text(c, 404, "{}", "RepoNotFound");
    const char *rev = rest + 8, *slash = strchr(rev, '/');
    if (!slash || !revision_known(r, rev, (size_t)(slash - rev)))
        return send_text(c, 404, "{}", "RevisionNotFound");
    const fake_file *f = NULL;
    for (int i = 0; i < r->n_files && !f; i++)
        if (!strcmp(r->files[i].name, slash + 1)) f = &r->files[i];
    if (!f) return send_text(c, 404, "{}", "EntryNotFound");
    char quoted[80];
    if (f->lfs) {
        char location[160], size[32];
        snprintf(location, sizeof location, "http://localhost:%d/cdn/%s", h->port, f->sha256);
        snprintf(quoted, sizeof quoted, "\"%s\"", f->sha256);
        snprintf(size, sizeof size, "%zu", f->len);
        struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(resp, "Location", location);
        MHD_add_response_header(resp, "X-Linked-Etag", quoted);
        MHD_add_response_header(resp, "X-Linked-Size", size);
        MHD_add_response_header(resp, "ETag", "\"0123456789abcdef0123456789abcdef01234567\"");
        MHD_add_response_header(resp, "X-Repo-Commit", r->commit);
        enum MHD_Result ret = MHD_queue_response(c, 302, resp);
        MHD_destroy_response(resp);
        return ret;
    }
    return send_content(h, c, f, r->commit, 0, head);
}

static const fake_file *find_blob(fake_hub *h, const char *sha)
{
    for (int i = 0; i < h->n_repos; i++)
        for (int j = 0; j < h->repos[i].n_files; j++)
            if (h->repos[i].files[j].lfs && !strcmp(h->repos[i].files[j].sha256, sha))
                return &h->repos[i].files[j];
    return NULL;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls)
{
    fake_hub *h = cls;
    int head = !strcmp(method, "HEAD");
    log_request(h, method, url, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range"));
    if (!strncmp(url, "/api/models/", 12)) return api_revision(h, c, url + 12);
    if (!strncmp(url, "/cdn/", 5)) {
        if (MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization")) {
            pthread_mutex_lock(&h->mu);
            h->cdn_auth++;
            pthread_mutex_unlock(&h->mu);
        }
        const fake_file *f = find_blob(h, url + 5);
        if (!f) return send_text(c, 404, "{}", NULL);
        return send_content(h, c, f, NULL, 1, head);
    }
    return resolve_file(h, c, url + 1, head);
}

int fake_hub_start(fake_hub *h)
{
    if (h->daemon) return 0;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    h->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, handle, h,
                                 MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_END);
    if (!h->daemon) return -1;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : 0;
    snprintf(h->endpoint, sizeof h->endpoint, "http://127.0.0.1:%d", h->port);
    return h->port ? 0 : -1;
}

void fake_hub_stop(fake_hub *h)
{
    if (!h->daemon) return;
    MHD_stop_daemon(h->daemon);
    h->daemon = NULL;
}

void fake_hub_free(fake_hub *h)
{
    fake_hub_stop(h);
    for (int i = 0; i < h->n_repos; i++)
        for (int j = 0; j < h->repos[i].n_files; j++) free(h->repos[i].files[j].data);
    pthread_mutex_destroy(&h->mu);
    free(h);
}
