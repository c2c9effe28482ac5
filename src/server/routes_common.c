/* Health, metrics and the helpers shared by every flavour's routes. */
#include "server/routes_common.h"
#include "server/replica_report.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <stdlib.h>
#include "base/utf8.h"
#include "heads/scores.h"

void iv_route_health(iv_req *r)
{
    iv_strbuf b;
    iv_sb_init(&b);
    if (!iv_server_healthy(r->srv)) {
        iv_api_error e;
        iv_api_errorf(&e, IV_API_UNHEALTHY, "unhealthy");
        iv_req_fail(r, &e);
        return;
    }
    /* TEI answers 200 with an empty body, Infinity {"unix": time}: this body serves both. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    iv_sb_printf(&b, "{\"unix\":%.6f}", (double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
    iv_req_reply_json(r, &b);
}

void iv_route_metrics(iv_req *r)
{
    int queued = 0;
    for (int i = 0; i < r->srv->n_models; i++) queued += iv_batcher_queue_size(r->srv->models[i].batcher);
    iv_metrics_set(r->srv->metrics, "te_queue_size", queued);
    iv_strbuf b;
    iv_sb_init(&b);
    iv_metrics_render(r->srv->metrics, &b);
    iv_replicas_prometheus(&b, r->srv);
    iv_prefix_prometheus(&b, r->srv);
    iv_req_reply(r, 200, "text/plain; version=0.0.4", &b);
}

/* vLLM's chat-template fields, on every route that takes conversations:
 * `chat_template_kwargs` (template variables over the checkpoint's) and
 * `add_generation_prompt`. */
static int chat_template_opts(iv_req *r, iv_input_opts *o)
{
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(r->json, "chat_template_kwargs");
    const cJSON *agp = cJSON_GetObjectItemCaseSensitive(r->json, "add_generation_prompt");
    iv_api_error e;
    if (kw && !cJSON_IsNull(kw) && !cJSON_IsObject(kw))
        iv_api_errorf(&e, IV_API_VALIDATION, "Input validation error: `chat_template_kwargs` must be an object");
    else if (agp && !cJSON_IsNull(agp) && !cJSON_IsBool(agp))
        iv_api_errorf(&e, IV_API_VALIDATION, "Input validation error: `add_generation_prompt` must be a boolean");
    else {
        o->chat_kwargs = cJSON_IsObject(kw) ? kw : NULL;
        o->generation_prompt = !cJSON_IsBool(agp) ? IV_GEN_PROMPT_DEFAULT
                               : cJSON_IsTrue(agp) ? IV_GEN_PROMPT_ON
                                                   : IV_GEN_PROMPT_OFF;
        return 0;
    }
    iv_req_fail(r, &e);
    return -1;
}

int iv_route_input_opts(iv_req *r, int truncate, int left, const char *prompt_name, int use_prompt, iv_input_opts *o)
{
    *o = iv_input_opts_default();
    o->truncate = truncate < 0 ? r->srv->o.auto_truncate : truncate;
    o->truncate_left = left;
    o->max_length = r->model->max_input_length;
    if (chat_template_opts(r, o)) return -1;
    if (!use_prompt) return 0;
    if (!prompt_name) {
        o->prompt = r->model->default_prompt;
        return 0;
    }
    const iv_st_meta *meta = iv_engine_st_meta(r->model->engine);
    o->prompt = iv_st_meta_prompt(meta, prompt_name);
    if (o->prompt) return 0;
    iv_api_error e;
    if (meta->n_prompts == 0) {
        iv_api_errorf(&e, IV_API_VALIDATION,
                      "Input validation error: `prompt_name` is set to `%.*s` but no prompts were found in the "
                      "Sentence Transformers configuration",
                      IV_UTF8_ECHO(200, prompt_name));
    } else {
        char names[512];
        size_t off = 0;
        for (int i = 0; i < meta->n_prompts && off < sizeof names; i++)
            off += (size_t)snprintf(names + off, sizeof names - off, "%s\"%s\"", i ? ", " : "", meta->prompts[i].name);
        iv_api_errorf(&e, IV_API_VALIDATION,
                      "Input validation error: `prompt_name` is set to `%.*s` but it was not found in the Sentence "
                      "Transformers prompts. Available prompts: [%s]",
                      IV_UTF8_ECHO(200, prompt_name), names);
    }
    iv_req_fail(r, &e);
    return -1;
}

int iv_route_check_nonempty(iv_req *r, const char *what)
{
    iv_api_error e;
    if (r->inputs.n == 0) {
        iv_api_errorf(&e, IV_API_EMPTY, "`%s` cannot be empty", what);
        if (r->flavour == IV_FLAVOUR_INFINITY) {
            char loc[96];
            snprintf(loc, sizeof loc, "\"body\",\"%s\"", what);
            iv_api_error_shape(&e, loc, "too_short", "List should have at least 1 item after validation, not 0");
        }
        iv_req_fail(r, &e);
        return -1;
    }
    /* TEI rejects an empty text; Infinity embeds it (its special tokens), as sentence-transformers does. */
    const int texts_may_be_empty = r->flavour == IV_FLAVOUR_INFINITY;
    for (int i = 0; i < r->inputs.n; i++) {
        const iv_input *in = &r->inputs.items[i];
        int empty = in->messages || in->image || in->audio || in->media_part ? 0 /* checked where it is rendered / decoded */
                    : in->ids    ? in->n_ids == 0
                                 : !texts_may_be_empty && in->text_len == 0 && (!in->pair || in->pair_len == 0);
        if (empty) {
            iv_api_errorf(&e, IV_API_EMPTY, "Input validation error: `inputs` cannot be empty");
            iv_req_fail(r, &e);
            return -1;
        }
    }
    return 0;
}

int iv_route_finish_embedding(iv_req *r, int i)
{
    iv_job_item *it = &r->job.items[i];
    const int dim = r->job.cols;
    int n = r->p.dimensions > 0 && r->p.dimensions < dim ? r->p.dimensions : dim;
    if (r->p.normalize && !r->p.renormalize && n < dim) {
        /* Infinity: normalise the full vector, then slice. */
        iv_embedding_finish(it->out, dim, 0, 1);
        return n;
    }
    return iv_embedding_finish(it->out, dim, n, r->p.normalize);
}

int iv_route_scores(iv_req *r, int i, int raw, int *order)
{
    float *s = r->job.items[i].out;
    const int n = r->job.cols;
    if (!raw) iv_scores_activate(s, n);
    for (int k = 0; k < n; k++)
        if (isnan(s[k])) {
            iv_api_error e;
            iv_api_errorf(&e, IV_API_BACKEND, "score is NaN");
            iv_req_fail(r, &e);
            return 1;
        }
    iv_scores_order(s, n, order);
    return 0;
}

int iv_route_is_multivector(const iv_model_slot *m)
{
    return iv_engine_multivector(m->engine) != NULL;
}

int iv_route_refuse_multivector(iv_req *r, const char *field, const char *why)
{
    iv_api_error e;
    iv_api_errorf(&e, IV_API_VALIDATION,
                  "Input validation error: `%s` is not supported by multi-vector model `%.*s`: %s", field,
                  IV_UTF8_ECHO(200, r->model->served_name), why);
    iv_req_fail(r, &e);
    return -1;
}

int iv_route_check_encoding(iv_req *r)
{
    if (r->p.encoding != IV_ENCODING_TENSOR || iv_route_is_multivector(r->model)) return 0;
    iv_api_error e;
    iv_api_errorf(&e, IV_API_VALIDATION,
                  "Input validation error: `encoding_format` `tensor` is for multi-vector models; model `%.*s` "
                  "returns one vector per input (use `float` or `base64`)",
                  IV_UTF8_ECHO(200, r->model->served_name));
    iv_req_fail(r, &e);
    return -1;
}

long long iv_route_job_tokens(const iv_req *r)
{
    long long t = 0;
    for (int i = 0; i < r->job.n_items; i++) t += r->job.items[i].n_tokens;
    return t;
}

void iv_route_usage(iv_strbuf *b, long long tokens)
{
    iv_sb_printf(b, "\"usage\":{\"prompt_tokens\":%lld,\"total_tokens\":%lld}", tokens, tokens);
}

static int by_score_desc(const void *a, const void *b)
{
    const iv_rank *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? 1 : -1;
    return x->index - y->index;
}

iv_rank *iv_rerank_ranks(iv_req *r)
{
    iv_rank *ranks = malloc((size_t)r->job.n_items * sizeof *ranks);
    if (!ranks) {
        iv_api_error e;
        iv_api_errorf(&e, IV_API_INTERNAL, "out of memory");
        iv_req_fail(r, &e);
        return NULL;
    }
    for (int i = 0; i < r->job.n_items; i++) {
        float s = r->job.items[i].out[0];
        if (!r->p.raw_scores) s = iv_sigmoid(s);
        if (isnan(s)) {
            free(ranks);
            iv_api_error e;
            iv_api_errorf(&e, IV_API_BACKEND, "score is NaN");
            iv_req_fail(r, &e);
            return NULL;
        }
        ranks[i] = (iv_rank){i, s};
    }
    qsort(ranks, (size_t)r->job.n_items, sizeof *ranks, by_score_desc);
    return ranks;
}

void iv_rerank_pairs(iv_req *r, const cJSON *q)
{
    const char *query = q->valuestring;
    size_t ql = iv_codec_str_len(q), qchars = iv_utf8_count(query, ql);
    for (int i = 0; i < r->inputs.n; i++) {
        iv_input *in = &r->inputs.items[i];
        in->pair = in->text;
        in->pair_len = in->text_len;
        in->text = query;
        in->text_len = ql;
        r->inputs.n_chars += qchars;
    }
    r->inputs.single = 0;
}

iv_model_slot *iv_route_reranker(iv_req *r)
{
    iv_model_slot *m = iv_req_pick_model(r, "model");
    if (!m) return NULL;
    r->model = m;
    if (iv_route_is_multivector(m)) return m; /* scored by MaxSim (iv_route_submit_rerank) */
    if (!(m->caps & IV_CAN(IV_TASK_CLASSIFY)) || m->num_labels != 1) {
        iv_req_not_supported(r, "model is not a re-ranker model", "rerank");
        return NULL;
    }
    return m;
}

/* ---- MaxSim rerank for multi-vector models ----
 * The documents and then the query run as one job of token matrices; each
 * document's score is ColBERT's late interaction, the sum over query rows
 * of the best dot product with any document row (rows are L2-normalised),
 * reported raw (no sigmoid). A document given as a data URL
 * ("data:image/...") is an image document on models that take images. */
typedef struct maxsim_job {
    iv_finish_fn finish; /* the route's own reply builder */
} maxsim_job;

static float maxsim(const float *q, int nq, const float *d, int nd, int cols)
{
    double total = 0;
    for (int i = 0; i < nq; i++) {
        float best = nd ? -INFINITY : 0;
        for (int j = 0; j < nd; j++) {
            float dot = 0;
            for (int k = 0; k < cols; k++) dot += q[(int64_t)i * cols + k] * d[(int64_t)j * cols + k];
            if (dot > best) best = dot;
        }
        total += best;
    }
    return (float)total;
}

static void finish_maxsim(iv_req *r)
{
    maxsim_job *mj = r->route_data;
    const int n = r->job.n_items - 1; /* the query is the last item */
    if (r->job.stage == IV_JOB_OK) {
        const iv_job_item *q = &r->job.items[n];
        for (int i = 0; i < n; i++) {
            iv_job_item *d = &r->job.items[i];
            const float s = maxsim(q->out, q->rows, d->out, d->rows, r->job.cols);
            /* The reply builders read a score at out[0] (a matrix of no
             * rows has no buffer). */
            if (!d->out && !(d->out = malloc(sizeof(float)))) {
                iv_api_error e;
                iv_api_errorf(&e, IV_API_INTERNAL, "out of memory");
                iv_req_fail(r, &e);
                return;
            }
            d->out[0] = s;
            iv_input *in = &r->inputs.items[i];
            in->pair = in->image ? in->image : in->text;
            in->pair_len = in->image ? in->image_len : in->text_len;
        }
    }
    r->p.raw_scores = 1;
    r->job.n_items = n;
    r->inputs.n = n;
    mj->finish(r);
    r->job.n_items = n + 1;
    r->inputs.n = n + 1;
}

static void submit_maxsim(iv_req *r, iv_model_slot *m, const cJSON *query, const char *field, int truncate, int left,
                          iv_finish_fn finish)
{
    iv_api_error e;
    if (iv_route_check_nonempty(r, field)) return;
    maxsim_job *mj = calloc(1, sizeof *mj);
    iv_input *items = realloc(r->inputs.items, (size_t)(r->inputs.n + 1) * sizeof *items);
    if (!mj || !items) {
        free(mj);
        iv_api_errorf(&e, IV_API_INTERNAL, "out of memory");
        iv_req_fail(r, &e);
        return;
    }
    r->inputs.items = items;
    const int takes_images = iv_engine_image_proc(m->engine) != NULL;
    for (int i = 0; i < r->inputs.n; i++) {
        iv_input *in = &items[i];
        if (takes_images && in->text && in->text_len > 11 && !strncasecmp(in->text, "data:image/", 11)) {
            in->image = in->text;
            in->image_len = in->text_len;
            in->text = NULL;
            in->text_len = 0;
        }
    }
    items[r->inputs.n] = (iv_input){.text = query->valuestring, .text_len = iv_codec_str_len(query)};
    r->inputs.n_chars += iv_utf8_count(query->valuestring, iv_codec_str_len(query));
    r->inputs.n++;
    r->inputs.single = 0;
    mj->finish = finish;
    r->route_data = mj;
    r->route_data_free = free;
    iv_input_opts o;
    if (iv_route_input_opts(r, truncate, left, NULL, 0, &o)) return;
    r->p.metric_task = "embed";
    iv_req_submit(r, m, IV_TASK_MULTIVECTOR, &o, finish_maxsim);
}

void iv_route_submit_rerank(iv_req *r, iv_model_slot *m, const cJSON *query, const char *field, int truncate, int left,
                            iv_finish_fn finish)
{
    if (iv_route_is_multivector(m)) {
        submit_maxsim(r, m, query, field, truncate, left, finish);
        return;
    }
    iv_rerank_pairs(r, query);
    iv_input_opts o;
    if (iv_route_check_nonempty(r, field)) return;
    if (iv_route_input_opts(r, truncate, left, NULL, 0, &o)) return;
    r->p.metric_task = "predict";
    iv_metrics_inc(r->srv->metrics, "te_predict_count", r->inputs.n);
    iv_req_submit(r, m, IV_TASK_CLASSIFY, &o, finish);
}

