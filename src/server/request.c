/* Route-facing request helpers: replies, model choice, job submission and
 * the mapping of engine failures to each flavour's errors. */
#include "server/request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "base/utf8.h"
#include "server/http.h"

int64_t iv_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void iv_req_reply(iv_req *r, int status, const char *content_type, iv_strbuf *body)
{
    free(r->reply.body);
    memset(&r->reply, 0, sizeof r->reply);
    r->reply.status = status;
    r->reply.content_type = content_type;
    if (body && body->oom) {
        iv_sb_free(body);
        r->reply.status = 500;
        r->reply.content_type = NULL;
    } else if (body) {
        r->reply.body = body->data;
        r->reply.len = body->len;
        iv_sb_init(body);
    }
    r->has_reply = 1;
}

void iv_req_reply_json(iv_req *r, iv_strbuf *body) { iv_req_reply(r, 200, "application/json", body); }

void iv_req_fail(iv_req *r, const iv_api_error *e)
{
    iv_reply rep;
    iv_error_render(r->flavour, e, &rep);
    free(r->reply.body);
    r->reply = rep;
    r->has_reply = 1;
    r->timing_headers = 0;
    /* A dropped job was counted when it ended (on_job_done). */
    if ((r->method_label || e->kind == IV_API_OVERLOADED) && r->job.stage != IV_JOB_DROPPED) {
        char series[96];
        snprintf(series, sizeof series, "te_request_failure{err=\"%s\"}", iv_error_metric_label(e->kind));
        iv_metrics_inc(r->srv->metrics, series, 1);
    }
}

int iv_req_parse_json(iv_req *r)
{
    iv_api_error e;
    if (r->json) return 0; /* already parsed (POST / looks at the body before it dispatches) */
    if (iv_codec_parse_body(r->body.data ? r->body.data : "", r->body.len, &r->json, &e)) {
        iv_req_fail(r, &e);
        return -1;
    }
    return 0;
}

iv_model_slot *iv_req_pick_model(iv_req *r, const char *field)
{
    iv_api_error e;
    const char *name = NULL;
    if (r->json && iv_codec_opt_string(r->json, field, &name, &e)) {
        iv_req_fail(r, &e);
        return NULL;
    }
    iv_model_slot *m = iv_server_find_model(r->srv, name);
    if (m) return m;
    char names[512] = "";
    size_t off = 0;
    const int inf = r->flavour == IV_FLAVOUR_INFINITY;
    for (int i = 0; i < r->srv->n_models && off < sizeof names; i++)
        off += (size_t)snprintf(names + off, sizeof names - off, inf ? "%s'%s'" : "%s\"%s\"", i ? ", " : "",
                                r->srv->models[i].served_name);
    if (inf)
        iv_api_errorf(&e, IV_API_MODEL_NOT_FOUND,
                      "Invalid model: Engine for model name `%.*s` not found. Available model names are [%s]",
                      IV_UTF8_ECHO(200, name), names);
    else
        iv_api_errorf(&e, IV_API_MODEL_NOT_FOUND,
                      "Input validation error: model `%.*s` is not served here. Available models: [%s]",
                      IV_UTF8_ECHO(200, name), names);
    iv_req_fail(r, &e);
    return NULL;
}

void iv_req_count(iv_req *r, int single)
{
    r->method_label = single ? "single" : "batch";
    char series[64];
    snprintf(series, sizeof series, "te_request_count{method=\"%s\"}", r->method_label);
    iv_metrics_inc(r->srv->metrics, series, 1);
}

int iv_req_check_batch(iv_req *r, int n)
{
    /* TEI's routes keep TEI's limit; the OpenAI, Infinity, Cohere and vLLM
     * APIs take up to 2048 inputs (clients send hundreds at once). */
    const int tei = r->flavour == IV_FLAVOUR_TEI;
    const int max = tei ? r->srv->o.max_client_batch_size : r->srv->o.max_client_batch_size_openai;
    if (n <= max) return 0;
    iv_api_error e;
    if (tei) iv_api_errorf(&e, IV_API_VALIDATION, "batch size %d > maximum allowed batch size %d", n, max);
    else
        iv_api_errorf(&e, IV_API_VALIDATION,
                      "batch size %d > maximum allowed batch size %d (--max-client-batch-size-openai)", n, max);
    if (r->flavour == IV_FLAVOUR_INFINITY) {
        e.kind = IV_API_JSON_DATA;
        iv_api_error_shape(&e, "\"body\",\"input\"", "too_long",
                           "List should have at most %d items after validation, not %d", max, n);
    }
    iv_req_fail(r, &e);
    iv_metrics_inc(r->srv->metrics, "te_request_failure{err=\"batch_size\"}", 1);
    return -1;
}

void iv_model_routes(const iv_model_slot *m, char *buf, size_t cap)
{
    size_t off = 0;
    buf[0] = 0;
#define ADD(s)                                                                          \
    do {                                                                                \
        if (off < cap) off += (size_t)snprintf(buf + off, cap - off, "%s%s", off ? ", " : "", s); \
    } while (0)
    if (m->caps & IV_CAN(IV_TASK_EMBED)) ADD("/embed, /v1/embeddings, /embeddings, /similarity");
    if (iv_engine_multivector(m->engine)) ADD("/embed, /v1/embeddings, /embeddings (multi-vector), /rerank (MaxSim)");
    if (m->caps & IV_CAN(IV_TASK_EMBED_ALL)) ADD("/embed_all");
    if (m->caps & IV_CAN(IV_TASK_SPARSE)) ADD("/embed_sparse");
    if (m->caps & IV_CAN(IV_TASK_CLASSIFY)) ADD(m->num_labels == 1 ? "/rerank, /predict, /classify" : "/predict, /classify");
    if (m->caps & IV_CAN(IV_TASK_TOKEN_CLASSIFY)) ADD("/predict, /token_classify");
    if (iv_engine_tokenizer(m->engine)) ADD("/tokenize, /decode");
#undef ADD
}

void iv_model_capability_set(const iv_model_slot *m, char *buf, size_t cap)
{
    size_t off = (size_t)snprintf(buf, cap, "{");
    int first = 1;
#define ADD(s)                                                                                   \
    do {                                                                                         \
        if (off < cap) off += (size_t)snprintf(buf + off, cap - off, "%s'%s'", first ? "" : ", ", s); \
        first = 0;                                                                               \
    } while (0)
    if ((m->caps & IV_CAN(IV_TASK_EMBED)) || iv_engine_multivector(m->engine)) ADD("embed");
    if (m->caps & IV_CAN(IV_TASK_CLASSIFY)) ADD(m->num_labels == 1 ? "rerank" : "classify");
    if (iv_engine_multivector(m->engine)) ADD("rerank"); /* MaxSim */
#undef ADD
    if (off < cap) snprintf(buf + off, cap - off, "}");
}

void iv_model_tasks_json(const iv_model_slot *m, iv_strbuf *b)
{
    static const struct {
        iv_task task;
        const char *name;
    } k_tasks[] = {{IV_TASK_EMBED, "embed"},       {IV_TASK_EMBED_ALL, "embed_all"},
                   {IV_TASK_SPARSE, "embed_sparse"}, {IV_TASK_CLASSIFY, "classify"},
                   {IV_TASK_TOKEN_CLASSIFY, "token_classify"}, {IV_TASK_MULTIVECTOR, "multi_vector"}};
    iv_sb_puts(b, ",\"tasks\":[");
    int n = 0;
    for (size_t i = 0; i < sizeof k_tasks / sizeof *k_tasks; i++) {
        if (!(m->caps & IV_CAN(k_tasks[i].task))) continue;
        iv_sb_printf(b, "%s\"%s\"", n++ ? "," : "", k_tasks[i].name);
        if (k_tasks[i].task == IV_TASK_CLASSIFY && m->num_labels == 1) iv_sb_puts(b, ",\"rerank\"");
    }
    iv_sb_putc(b, ']');
    const char *missing = iv_engine_missing_head(m->engine);
    if (missing[0]) {
        iv_sb_puts(b, ",\"missing_head\":");
        iv_sb_json_string(b, missing, strlen(missing));
    }
}

void iv_req_not_supported(iv_req *r, const char *tei_what, const char *capability)
{
    iv_api_error e;
    const iv_model_slot *m = r->model;
    /* A head the config declares but the checkpoint lacks: say so (it names its task). */
    const char *missing = iv_engine_missing_head(m->engine);
    if (r->flavour == IV_FLAVOUR_INFINITY) {
        char caps[128];
        iv_model_capability_set(m, caps, sizeof caps);
        iv_api_errorf(&e, IV_API_NOT_SUPPORTED,
                      "ModelNotDeployedError: model=`%.*s` does not support `%s`. Reason: the loaded moded cannot "
                      "fullyfill `%s`. Options are %s.%s%s",
                      IV_UTF8_ECHO(200, m->served_name), capability, capability, caps, missing[0] ? " " : "", missing);
    } else {
        char routes[256];
        iv_model_routes(m, routes, sizeof routes);
        iv_api_errorf(&e, IV_API_NOT_SUPPORTED, "Backend error: %s. Model `%.*s` (%s) serves: %s%s%s", tei_what,
                      IV_UTF8_ECHO(200, m->served_name), iv_engine_architecture(m->engine), routes[0] ? routes : "nothing",
                      missing[0] ? ". " : "", missing);
    }
    iv_req_fail(r, &e);
}

/* ---- jobs ---- */

static void on_job_done(iv_job *job)
{
    iv_req *r = job->user;
    /* Counted here, not with the reply: once the client hung up, MHD may
     * close the connection on resume without asking for the reply. */
    if (job->stage == IV_JOB_DROPPED) iv_metrics_inc(r->srv->metrics, "te_request_failure{err=\"dropped\"}", 1);
    pthread_mutex_lock(&r->lock);
    r->state = IV_REQ_DONE;
    int orphan = r->orphaned;
    pthread_mutex_unlock(&r->lock);
    if (orphan) iv_req_free(r);
    else iv_http_resume(r);
}

/* Replies to a refused admission: 429 while the permits are taken, 422
 * when the request could never fit. */
static void fail_admit(iv_req *r, const iv_model_slot *m, const iv_err *err)
{
    iv_api_error e;
    if (err->code != IV_E_OVERLOADED) iv_api_errorf(&e, IV_API_VALIDATION, "%s", err->msg);
    else if (r->flavour == IV_FLAVOUR_INFINITY)
        iv_api_errorf(&e, IV_API_OVERLOADED, "model %.*s is currently overloaded", IV_UTF8_ECHO(200, m->served_name));
    else iv_api_errorf(&e, IV_API_OVERLOADED, "Model is overloaded");
    iv_req_fail(r, &e);
}

int iv_req_take_permits(iv_req *r, iv_model_slot *m, int n)
{
    iv_err err = {0};
    if (!iv_batcher_take_permits(m->batcher, n, &err)) return 0;
    fail_admit(r, m, &err);
    return -1;
}

void iv_req_submit(iv_req *r, iv_model_slot *m, iv_task task, const iv_input_opts *opts, iv_finish_fn finish)
{
    iv_job *job = &r->job;
    memset(job, 0, sizeof *job);
    job->task = task;
    job->opts = *opts;
    job->n_items = r->inputs.n;
    job->items = calloc((size_t)(r->inputs.n > 0 ? r->inputs.n : 1), sizeof *job->items);
    iv_api_error e;
    if (!job->items) {
        iv_api_errorf(&e, IV_API_INTERNAL, "out of memory");
        iv_req_fail(r, &e);
        return;
    }
    for (int i = 0; i < r->inputs.n; i++) job->items[i].in = r->inputs.items[i];
    job->client_fd = iv_http_client_fd(r);
    job->done = on_job_done;
    job->user = r;
    iv_err err = {0};
    if (iv_batcher_admit(m->batcher, job, &err)) {
        fail_admit(r, m, &err);
        return;
    }
    r->model = m;
    r->finish = finish;
    r->timing_headers = 1;
    pthread_mutex_lock(&r->lock);
    r->state = IV_REQ_RUNNING;
    pthread_mutex_unlock(&r->lock);
    /* Suspend first: the job may finish (and resume) before enqueue returns. */
    r->suspended_here = 1;
    iv_http_suspend(r);
    iv_batcher_enqueue(m->batcher, job);
}

int iv_req_fail_if_job_failed(iv_req *r)
{
    const iv_job *job = &r->job;
    if (job->stage == IV_JOB_OK) return 0;
    iv_api_error e;
    const int inf = r->flavour == IV_FLAVOUR_INFINITY;
    switch (job->stage) {
    case IV_JOB_FAILED_INPUT:
        /* A bad or oversized input (media over a limit included) is the client's. */
        if (job->err.code == IV_E_INVALID || job->err.code == IV_E_UNSUPPORTED || job->err.code == IV_E_TOO_LARGE)
            iv_api_errorf(&e, IV_API_VALIDATION, "Input validation error: %s", job->err.msg);
        else iv_api_errorf(&e, IV_API_TOKENIZER, "tokenizer error %s", job->err.msg);
        break;
    case IV_JOB_DROPPED:
        iv_api_errorf(&e, IV_API_BACKEND, "request dropped: %s", job->err.msg);
        break;
    default:
        iv_api_errorf(&e, IV_API_BACKEND, inf ? "InternalServerError: %s" : "Backend error: %s", job->err.msg);
        break;
    }
    iv_req_fail(r, &e);
    return 1;
}
