/* Admission, the queue and the tokenization workers (see batcher.h; the
 * dispatcher and the replicas' threads are in replicas.c).
 *
 * Two intrusive FIFO lists of job items, each behind its own mutex:
 *   tokenize list: items waiting for a worker to run iv_prepare_input;
 *   ready list:    tokenized items waiting for a batch.
 * An item lives in at most one list; its job finishes when the last item
 * is accounted for (run, failed or dropped). */
#include "engine/batcher.h"
#include "engine/batcher_internal.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "base/log.h"
#include "base/utf8.h"

int64_t iv_batcher_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void iv_item_list_push(item_list *l, iv_job_item *it)
{
    it->next = NULL;
    it->prev = l->tail;
    if (l->tail) l->tail->next = it;
    else l->head = it;
    l->tail = it;
    l->count++;
}

void iv_item_list_push_front(item_list *l, iv_job_item *it)
{
    it->prev = NULL;
    it->next = l->head;
    if (l->head) l->head->prev = it;
    else l->tail = it;
    l->head = it;
    l->count++;
}

void iv_item_list_remove(item_list *l, iv_job_item *it)
{
    if (it->prev) it->prev->next = it->next;
    else l->head = it->next;
    if (it->next) it->next->prev = it->prev;
    else l->tail = it->prev;
    it->prev = it->next = NULL;
    l->count--;
}

/* ---- job bookkeeping ---- */

void iv_job_fail(iv_job *job, iv_job_stage stage, const iv_err *err)
{
    int expected = 0;
    if (atomic_compare_exchange_strong(&job->failed, &expected, 1)) {
        job->stage = stage;
        if (err) job->err = *err;
    }
}

/* A job is abandoned once one of its inputs failed (the answer is already
 * an error) or its client closed the connection. */
int iv_job_abandoned(iv_job *job)
{
    if (atomic_load(&job->failed)) return 1;
    if (job->client_fd < 0) return 0;
    struct pollfd p = {.fd = job->client_fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) {
        iv_err e = {.code = IV_E_INVALID};
        snprintf(e.msg, sizeof e.msg, "the client closed the connection");
        iv_job_fail(job, IV_JOB_DROPPED, &e);
        return 1;
    }
    return 0;
}

/* Accounts for one item; the last one completes the job. */
void iv_item_finished(iv_job_item *it)
{
    iv_job *job = it->job;
    if (atomic_fetch_sub(&job->pending, 1) == 1) {
        atomic_fetch_sub(&job->owner->permits_used, job->n_items);
        job->done(job);
    }
}

void iv_job_release(iv_job *job)
{
    for (int i = 0; i < job->n_items; i++) {
        iv_prepared_free(&job->items[i].prep);
        free(job->items[i].out);
        job->items[i].out = NULL;
    }
}

/* ---- tokenization ---- */

/* Runs iv_prepare_input with the server's rules on top: a character limit
 * of 250 x the token limit before tokenizing (as TEI, so a huge text cannot
 * keep a worker busy), and TEI's wording for inputs over the token limit. */
static int prepare_item(iv_batcher *b, iv_job *job, iv_job_item *it, iv_err *err)
{
    iv_input in = it->in;
    iv_input_opts o = job->opts;
    const int max = o.max_length > 0 ? o.max_length : iv_engine_max_input_length(b->engine);
    o.max_length = max;
    if (in.ids || in.messages) {
        if (in.ids && in.n_ids > max && !o.truncate)
            return iv_errf(err, IV_E_INVALID, "`inputs` must have less than %d tokens. Given: %d", max, in.n_ids);
        return iv_prepare_input(b->engine, &in, &o, &it->prep, err);
    }
    const size_t limit = (size_t)max * 250;
    size_t chars = iv_utf8_chars(in.text, in.text_len) + (in.pair ? iv_utf8_chars(in.pair, in.pair_len) : 0);
    if (chars > limit) {
        if (!o.truncate)
            return iv_errf(err, IV_E_INVALID, "`inputs` must have less than %zu characters. Given: %zu", limit, chars);
        /* Keep `limit` characters of the text on the side truncation keeps. */
        size_t keep = iv_utf8_prefix_bytes(in.text, in.text_len, limit, o.truncate_left);
        if (o.truncate_left) in.text += in.text_len - keep;
        in.text_len = keep;
        if (in.pair) {
            size_t left = limit > iv_utf8_chars(in.text, in.text_len) ? limit - iv_utf8_chars(in.text, in.text_len) : 0;
            size_t pkeep = iv_utf8_prefix_bytes(in.pair, in.pair_len, left, o.truncate_left);
            if (o.truncate_left) in.pair += in.pair_len - pkeep;
            in.pair_len = pkeep;
        }
    }
    /* Always tokenize with truncation: when the request forbids it, the
     * dropped-token count tells the full length for the error message. */
    const int want_truncate = o.truncate;
    o.truncate = 1;
    if (iv_prepare_input(b->engine, &in, &o, &it->prep, err)) return -1;
    if (job->task == IV_TASK_TOKEN_CLASSIFY) it->in = in; /* offsets are into the text as cut */
    if (!want_truncate && it->prep.enc.n_truncated > 0) {
        int given = it->prep.enc.len + it->prep.enc.n_truncated;
        iv_prepared_free(&it->prep);
        return iv_errf(err, IV_E_INVALID, "`inputs` must have less than %d tokens. Given: %d", max, given);
    }
    return 0;
}

/* The last of a job's items queues every tokenized one in the job's order
 * under one hold of the lock, so the dispatcher sees them together. Then a
 * failed item is accounted for: last, as that may complete (and free) the
 * job, which the tokenized ones still pending keep alive until then. */
void iv_item_tokenized(iv_batcher *b, iv_job_item *it, int ok)
{
    iv_job *job = it->job;
    it->tokenized = ok;
    if (atomic_fetch_sub(&job->untokenized, 1) == 1) {
        const int64_t now = iv_batcher_now_ns();
        int queued = 0;
        pthread_mutex_lock(&b->ready_lock);
        for (int i = 0; i < job->n_items; i++) {
            iv_job_item *x = &job->items[i];
            if (!x->tokenized) continue;
            x->t_queued = now;
            x->tokenize_ns = now - job->t_submit;
            iv_item_list_push(&b->ready_list, x);
            queued++;
        }
        if (queued) {
            atomic_fetch_add(&b->ready_count, queued);
            pthread_cond_signal(&b->ready_cond);
        }
        pthread_mutex_unlock(&b->ready_lock);
    }
    if (!ok) iv_item_finished(it);
}

static void *tokenize_main(void *arg)
{
    iv_batcher *b = arg;
    for (;;) {
        pthread_mutex_lock(&b->tok_lock);
        while (!b->tok_list.head && !b->tok_stop) pthread_cond_wait(&b->tok_cond, &b->tok_lock);
        iv_job_item *it = b->tok_list.head;
        if (!it) {
            pthread_mutex_unlock(&b->tok_lock);
            return NULL;
        }
        iv_item_list_remove(&b->tok_list, it);
        atomic_fetch_sub(&b->tok_count, 1);
        pthread_mutex_unlock(&b->tok_lock);

        iv_job *job = it->job;
        if (iv_job_abandoned(job)) {
            iv_item_tokenized(b, it, 0);
            continue;
        }
        iv_err err = {0};
        if (prepare_item(b, job, it, &err)) {
            iv_job_fail(job, IV_JOB_FAILED_INPUT, &err);
            iv_item_tokenized(b, it, 0);
            continue;
        }
        it->n_tokens = it->prep.seq.len;
        iv_item_tokenized(b, it, 1);
    }
}

/* ---- public ---- */

int iv_batcher_start(iv_batcher **out, iv_engine *const *replicas, int n_replicas, const iv_batcher_opts *opts,
                     iv_err *err)
{
    *out = NULL;
    if (opts->max_batch_tokens <= 0 || opts->max_concurrent <= 0 || opts->tokenization_workers <= 0)
        return iv_errf(err, IV_E_INVALID, "batcher: token budget, concurrency and workers must be positive");
    if (n_replicas <= 0) return iv_errf(err, IV_E_INVALID, "batcher: no replicas");
    iv_batcher *b = calloc(1, sizeof *b);
    if (!b) return iv_errf(err, IV_E_NOMEM, "out of memory");
    b->engine = replicas[0];
    b->o = *opts;
    b->cap = opts->max_batch_requests > 0 ? opts->max_batch_requests : opts->max_concurrent;
    pthread_mutex_init(&b->tok_lock, NULL);
    pthread_cond_init(&b->tok_cond, NULL);
    pthread_mutex_init(&b->ready_lock, NULL);
    pthread_cond_init(&b->ready_cond, NULL);
    b->workers = calloc((size_t)opts->tokenization_workers, sizeof *b->workers);
    if (!b->workers) {
        iv_batcher_stop(b);
        return iv_errf(err, IV_E_NOMEM, "out of memory");
    }
    for (int i = 0; i < opts->tokenization_workers; i++) {
        if (pthread_create(&b->workers[i], NULL, tokenize_main, b)) {
            iv_batcher_stop(b);
            return iv_errf(err, IV_E_INTERNAL, "cannot start tokenization thread");
        }
        b->n_workers++;
    }
    if (iv_replicas_start(b, replicas, n_replicas, err)) {
        iv_batcher_stop(b);
        return -1;
    }
    *out = b;
    return 0;
}

void iv_batcher_stop(iv_batcher *b)
{
    if (!b) return;
    /* Workers drain the tokenize list before exiting; the dispatcher then
     * drains the ready list (it only exits once that list is empty and every
     * replica is idle), and the replicas' threads stop after it. */
    pthread_mutex_lock(&b->tok_lock);
    b->tok_stop = 1;
    pthread_cond_broadcast(&b->tok_cond);
    pthread_mutex_unlock(&b->tok_lock);
    for (int i = 0; i < b->n_workers; i++) pthread_join(b->workers[i], NULL);
    iv_replicas_stop(b);
    free(b->workers);
    pthread_mutex_destroy(&b->tok_lock);
    pthread_cond_destroy(&b->tok_cond);
    pthread_mutex_destroy(&b->ready_lock);
    pthread_cond_destroy(&b->ready_cond);
    free(b);
}

int iv_batcher_take_permits(iv_batcher *b, int n, iv_err *err)
{
    if (n <= 0) return iv_errf(err, IV_E_INVALID, "no inputs");
    /* More inputs than permits can never run, however idle the server:
     * that is the request's fault (422), not a busy server's (429). */
    if (n > b->o.max_concurrent)
        return iv_errf(err, IV_E_INVALID, "batch size %d > maximum concurrent inputs %d (--max-concurrent-requests)", n,
                       b->o.max_concurrent);
    int used = atomic_load(&b->permits_used);
    do {
        if (used + n > b->o.max_concurrent) return iv_errf(err, IV_E_OVERLOADED, "Model is overloaded");
    } while (!atomic_compare_exchange_weak(&b->permits_used, &used, used + n));
    return 0;
}

void iv_batcher_return_permits(iv_batcher *b, int n) { atomic_fetch_sub(&b->permits_used, n); }

int iv_batcher_admit(iv_batcher *b, iv_job *job, iv_err *err)
{
    if (iv_batcher_take_permits(b, job->n_items, err)) return -1;
    job->owner = b;
    return 0;
}

int iv_batcher_submit(iv_batcher *b, iv_job *job, iv_err *err)
{
    if (iv_batcher_admit(b, job, err)) return -1;
    iv_batcher_enqueue(b, job);
    return 0;
}

void iv_batcher_enqueue(iv_batcher *b, iv_job *job)
{
    job->stage = IV_JOB_OK;
    job->cols = 0;
    memset(&job->err, 0, sizeof job->err);
    atomic_store(&job->failed, 0);
    atomic_store(&job->pending, job->n_items);
    atomic_store(&job->untokenized, job->n_items);
    if (b->o.max_input_length > 0 &&
        (job->opts.max_length <= 0 || job->opts.max_length > b->o.max_input_length))
        job->opts.max_length = b->o.max_input_length;
    job->t_submit = iv_batcher_now_ns();
    pthread_mutex_lock(&b->tok_lock);
    for (int i = 0; i < job->n_items; i++) {
        iv_job_item *it = &job->items[i];
        it->job = job;
        it->out = NULL;
        it->rows = 0;
        it->n_tokens = 0;
        it->tokenized = 0;
        it->tokenize_ns = it->queue_ns = it->inference_ns = 0;
        memset(&it->prep, 0, sizeof it->prep);
        iv_item_list_push(&b->tok_list, it);
    }
    atomic_fetch_add(&b->tok_count, job->n_items);
    if (job->n_items == 1) pthread_cond_signal(&b->tok_cond);
    else pthread_cond_broadcast(&b->tok_cond);
    pthread_mutex_unlock(&b->tok_lock);
}

int iv_batcher_queue_size(const iv_batcher *b) { return atomic_load(&((iv_batcher *)b)->ready_count); }
int iv_batcher_tokenize_backlog(const iv_batcher *b) { return atomic_load(&((iv_batcher *)b)->tok_count); }
int iv_batcher_permits_in_use(const iv_batcher *b) { return atomic_load(&((iv_batcher *)b)->permits_used); }
int iv_batcher_unhealthy(const iv_batcher *b) { return atomic_load(&((iv_batcher *)b)->unhealthy); }
const iv_batcher_opts *iv_batcher_options(const iv_batcher *b) { return &b->o; }
