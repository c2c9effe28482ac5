/* The test's OTLP collector (see fake_collector.h). */
#include "fake_collector.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    fake_collector *c = cls;
    iv_strbuf *body = *con_cls;
    if (!body) {
        body = calloc(1, sizeof *body);
        if (!body) return MHD_NO;
        iv_sb_init(body);
        *con_cls = body;
        return MHD_YES;
    }
    if (*upload_size) {
        iv_sb_append(body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    pthread_mutex_lock(&c->mu);
    if (!strcmp(method, "POST") && c->n_posts < FAKE_COLLECTOR_MAX) {
        c->posts[c->n_posts] = body->data ? cJSON_ParseWithLength(body->data, body->len) : NULL;
        snprintf(c->paths[c->n_posts], sizeof c->paths[0], "%s", url);
        c->n_posts++;
    }
    const unsigned status = c->fail_status ? (unsigned)c->fail_status : 200;
    pthread_mutex_unlock(&c->mu);
    iv_sb_free(body);
    free(body);
    *con_cls = NULL;
    struct MHD_Response *r = MHD_create_response_from_buffer(2, (void *)"{}", MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ok = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ok;
}

fake_collector *fake_collector_start(void)
{
    fake_collector *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    pthread_mutex_init(&c->mu, NULL);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    c->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, handle, c, MHD_OPTION_SOCK_ADDR,
                                 (struct sockaddr *)&addr, MHD_OPTION_END);
    const union MHD_DaemonInfo *info = c->daemon ? MHD_get_daemon_info(c->daemon, MHD_DAEMON_INFO_BIND_PORT) : NULL;
    c->port = info ? info->port : 0;
    if (!c->port) {
        fake_collector_free(c);
        return NULL;
    }
    snprintf(c->endpoint, sizeof c->endpoint, "http://127.0.0.1:%d", c->port);
    return c;
}

void fake_collector_free(fake_collector *c)
{
    if (!c) return;
    if (c->daemon) MHD_stop_daemon(c->daemon);
    for (int i = 0; i < c->n_posts; i++) cJSON_Delete(c->posts[i]);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

cJSON *fake_collector_spans(fake_collector *c)
{
    cJSON *all = cJSON_CreateArray();
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->n_posts; i++) {
        const cJSON *rs;
        cJSON_ArrayForEach(rs, cJSON_GetObjectItem(c->posts[i], "resourceSpans"))
        {
            const cJSON *ss;
            cJSON_ArrayForEach(ss, cJSON_GetObjectItem(rs, "scopeSpans"))
            {
                const cJSON *span;
                cJSON_ArrayForEach(span, cJSON_GetObjectItem(ss, "spans"))
                    cJSON_AddItemToArray(all, cJSON_Duplicate(span, 1));
            }
        }
    }
    pthread_mutex_unlock(&c->mu);
    return all;
}
