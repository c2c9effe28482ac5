/* The HTTP server: loaded models (each with its batcher), options, metrics
 * and the libmicrohttpd daemon. `infinity_v3 serve` fills iv_server_opts
 * from its flags, starts the server and stops it on SIGTERM. */
#ifndef IV_SERVER_SERVER_H
#define IV_SERVER_SERVER_H

#include <stdatomic.h>
#include <stddef.h>
#include "decisions/contract.h"
#include "engine/batcher.h"
#include "server/metrics.h"

#define IV_SERVER_VERSION "0.1.0"

typedef struct iv_model_slot {
    char *model_id;           /* as given on the command line */
    char *model_dir;          /* resolved checkpoint directory */
    char *served_name;        /* what `model` fields select; defaults to model_id */
    iv_engine *engine;        /* replicas[0]: what describes the model */
    iv_engine **replicas;     /* one complete model per --device entry */
    int n_replicas;
    iv_batcher *batcher;
    const char *default_prompt; /* prepended when a request names no prompt, or NULL */
    int max_input_length;     /* tokens, after --max-batch-tokens clamping */
    int max_batch_tokens;     /* this model's token budget (server/token_budget.h) */
    const char *max_input_length_source; /* the file it comes from, or "--max-batch-tokens" */
    unsigned caps;            /* IV_CAN bits */
    int num_labels;
} iv_model_slot;

typedef struct iv_model_spec {
    const char *model_id;
    const char *served_name;  /* NULL: model_id */
} iv_model_spec;

typedef struct iv_server_opts {
    const char *hostname;     /* "0.0.0.0" */
    int port;                 /* 7997; 0 picks a free port (logged) */
    const char *uds_path;     /* listen on a Unix socket instead of TCP */
    size_t payload_limit;     /* 2,000,000 bytes */
    const char *api_key;      /* NULL: no authentication */
    int max_client_batch_size;   /* 32: TEI's routes */
    int max_client_batch_size_openai; /* 2048: OpenAI, Infinity, Cohere and vLLM routes */
    const char *url_prefix;      /* every route under this path prefix ("" or NULL: none) */
    int max_concurrent_requests; /* 512 */
    int max_batch_tokens;        /* 16384 */
    int max_batch_tokens_set;    /* 1: given by the operator; 0: sized from a GPU's free memory */
    int max_batch_requests;      /* 0: none */
    int tokenization_workers;    /* 0: cores - 1, clamped to 1..64 */
    int auto_truncate;           /* 1 */
    const char *default_prompt_name;
    const char *default_prompt;
    int http_threads;            /* 0: min(cores, 8), at least 2 */
    int drain_timeout_s;         /* 30: on SIGTERM, longest wait for accepted requests */
    int read_timeout_s;          /* 120: longest a client may take to send a request (0: no limit) */
    const char *revision;        /* hub revision for every --model-id (NULL: main) */
    const char *hub_cache;       /* hub cache root (NULL: HF_HUB_CACHE / HF_HOME/hub / default) */
    const char *otlp_endpoint;   /* OTLP/HTTP collector for traces (NULL: none) */
    const char *otlp_service_name; /* service.name of the spans ("infinity_v3") */
    iv_engine_opts engine;
    /* Typed decisions (/v1/systemone, /v1/decisions; docs/decisions.md). */
    iv_dq_limits decision_limits;   /* 64 questions, 255 options, 10 levels; lenient 0 */
    int decision_max_state_tokens;  /* 65536: a longer state is 413 */
    int decision_extended;          /* 1: every reply in the extended shape */
} iv_server_opts;

void iv_server_opts_default(iv_server_opts *o);

typedef struct iv_http iv_http;

typedef struct iv_server {
    iv_server_opts o;
    int n_models;
    iv_model_slot *models;
    iv_metrics *metrics;
    iv_http *http;
    atomic_int draining;      /* SIGTERM received: /health answers 503, no keep-alive */
    atomic_int live_requests; /* requests between their first byte and their response's end */
    char listen_desc[256];    /* "127.0.0.1:7997" or "unix:/path" */
    struct iv_otlp *otlp;     /* trace exporter, NULL without --otlp-endpoint */
} iv_server;

/* Loads every model, starts their batchers and the HTTP listener. */
int iv_server_start(iv_server **out, const iv_server_opts *o, const iv_model_spec *models, int n_models,
                    iv_err *err);
/* Graceful stop: stop accepting, finish every accepted request (within
 * o.drain_timeout_s; past it, close the connections), free. */
void iv_server_stop(iv_server *s);

/* The model a request names (served name, or model id); NULL name: the first.
 * With a single model any name is accepted (as TEI and Infinity do). */
iv_model_slot *iv_server_find_model(iv_server *s, const char *name);
/* 1 while every batcher is healthy and the server is not draining. */
int iv_server_healthy(iv_server *s);

#endif
