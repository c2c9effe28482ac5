/* One HTTP request as the routes see it: the parsed body, the chosen model,
 * the engine job, and the helpers that answer it. A route handler either
 * replies at once (iv_req_reply*, iv_req_fail) or hands the work to the
 * model's batcher with iv_req_submit; the connection is then suspended and
 * the route's finish function builds the reply once the job is done. */
#ifndef IV_SERVER_REQUEST_H
#define IV_SERVER_REQUEST_H

#include <cJSON.h>
#include <pthread.h>
#include <stdint.h>
#include "base/strbuf.h"
#include "server/codec.h"
#include "server/errors.h"
#include "server/otlp.h"
#include "server/server.h"

struct MHD_Connection;
typedef struct iv_req iv_req;
typedef struct iv_route iv_route;
typedef void (*iv_finish_fn)(iv_req *r);

/* Request options a route parses and reads back when its job finishes. */
typedef struct iv_route_params {
    int normalize;
    int dimensions;      /* 0: full width */
    int renormalize;     /* after Matryoshka truncation (TEI/OpenAI; Infinity slices only) */
    int raw_scores;
    int return_text;
    int top_n;           /* 0: all */
    int encoding;        /* IV_ENCODING_* (encoding_format) */
    int sparse;          /* /embed_sparse */
    int similarity;      /* /similarity: item 0 is the source sentence */
    const char *metric_task; /* "embed" or "predict": te_embed_* / te_predict_* */
    int aggregation;     /* token classification: iv_aggregation */
    const cJSON *ignore_labels; /* token classification: list in r->json, NULL: ["O"] */
} iv_route_params;

enum iv_req_state { IV_REQ_NEW, IV_REQ_RUNNING, IV_REQ_DONE, IV_REQ_REPLIED };

struct iv_req {
    iv_server *srv;
    struct MHD_Connection *conn;
    const iv_route *route;
    const char *method, *path;
    iv_flavour flavour;
    int64_t t_start;          /* ns, monotonic */
    iv_strbuf body;
    size_t discarded;         /* body bytes dropped past the payload limit */
    cJSON *json;
    iv_inputs inputs;
    iv_model_slot *model;
    iv_job job;
    iv_finish_fn finish;
    iv_route_params p;
    const char *method_label; /* "single" / "batch" once the route counted the request */
    pthread_mutex_t lock;     /* state / orphaned, shared with the batcher thread */
    int state;
    int orphaned;
    int suspended_here;       /* set when a route suspended the connection in this callback */
    iv_reply reply;
    int has_reply;
    int timing_headers;
    char request_id[129];     /* x-request-id (server/request_id.h) */
    int64_t t_start_unix_ns;  /* wall clock at the first byte, for the trace span */
    iv_trace_ctx trace;       /* W3C trace context (server/otlp.h), with --otlp-endpoint */
    /* What a route keeps for its finish function beyond the job (freed with the request). */
    void *route_data;
    void (*route_data_free)(void *);
};

/* Replies: the body buffer is taken over (reset to empty). */
void iv_req_reply(iv_req *r, int status, const char *content_type, iv_strbuf *body);
void iv_req_reply_json(iv_req *r, iv_strbuf *body);
void iv_req_fail(iv_req *r, const iv_api_error *e);

/* A query-string argument, or NULL. */
const char *iv_req_query(iv_req *r, const char *name);

/* Parses the body into r->json (replies with the error and returns -1). */
int iv_req_parse_json(iv_req *r);
/* Picks the model from an optional "model" field (replies on error). */
iv_model_slot *iv_req_pick_model(iv_req *r, const char *field);
/* Checks the batch-size limit (replies on error). */
int iv_req_check_batch(iv_req *r, int n);
/* Counts the request in te_request_count{method} (single vs batch). */
void iv_req_count(iv_req *r, int single);

/* Sends r->inputs through the model's batcher as one job; finish runs on
 * an HTTP thread when it is done. Replies (e.g. 429) on failure. */
void iv_req_submit(iv_req *r, iv_model_slot *m, iv_task task, const iv_input_opts *opts, iv_finish_fn finish);
/* Takes n of the model's permits for work the route does itself (given
 * back with iv_batcher_return_permits); -1 after replying 429/422. */
int iv_req_take_permits(iv_req *r, iv_model_slot *m, int n);
/* Maps a failed job to the flavour's error and replies; 1 when the job had failed. */
int iv_req_fail_if_job_failed(iv_req *r);

/* The "can't serve this" error, naming what the model does serve:
 * tei_what is TEI's sentence ("Model is not a classifier model"),
 * capability Infinity's name for what was asked ("rerank"). */
void iv_req_not_supported(iv_req *r, const char *tei_what, const char *capability);
/* Comma-separated routes the model serves, e.g. "/embed, /embed_all, ...". */
void iv_model_routes(const iv_model_slot *m, char *buf, size_t cap);
/* Infinity's capability set, e.g. {'embed'}. */
void iv_model_capability_set(const iv_model_slot *m, char *buf, size_t cap);
/* /info's "tasks" (a JSON array): what the loaded model can do, e.g.
 * ["embed","embed_all"]; then "missing_head", the reason a head config.json
 * declares is absent from the checkpoint, when one is. Starts with a comma. */
void iv_model_tasks_json(const iv_model_slot *m, iv_strbuf *b);

int64_t iv_now_ns(void);

#endif
