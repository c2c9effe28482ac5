/* The dispatcher and the replicas (see batcher.h, "Replicas").
 *
 * One dispatching thread forms a batch whenever an in-service replica is
 * idle and hands it to the idle replica that has run the fewest batches.
 * Each replica has its own thread, so replicas on different devices run at
 * once. All hand-over state lives under the batcher's ready_lock: the
 * dispatcher waits on ready_cond (items queued, a replica idle, stop), a
 * replica on its own cond (a batch assigned, stop). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/log.h"
#include "engine/batcher_internal.h"
#include "engine/cpu_thread.h"

/* The tokens and count of the job's items that follow `it` in the ready
 * list, itself included (a job's items are queued together). */
static void job_group(const iv_job_item *it, int64_t *tokens, int *count)
{
    *tokens = 0;
    *count = 0;
    for (const iv_job_item *x = it; x && x->job == it->job; x = x->next) {
        *tokens += x->n_tokens;
        (*count)++;
    }
}

int iv_take_batch(iv_batcher *b, iv_job_item **batch, iv_job_item **dropped, int *n_dropped, int64_t *tokens)
{
    int n = 0;
    *n_dropped = 0;
    *tokens = 0;
    iv_task task = IV_TASK_COUNT;
    const iv_job *last_job = NULL;
    for (iv_job_item *it = b->ready_list.head, *next; it && n < b->cap; it = next) {
        next = it->next;
        if (iv_job_abandoned(it->job)) {
            iv_item_list_remove(&b->ready_list, it);
            dropped[(*n_dropped)++] = it;
            continue;
        }
        if (task == IV_TASK_COUNT) task = it->job->task;
        if (it->job->task != task) continue;
        if (n > 0 && it->job != last_job) {
            /* A job's items go together: one that does not fit what is left
             * but would fit a batch of its own waits for the next batch. */
            int64_t g_tokens;
            int g_count;
            job_group(it, &g_tokens, &g_count);
            const int fits_left = *tokens + g_tokens <= b->o.max_batch_tokens && n + g_count <= b->cap;
            const int fits_alone = g_tokens <= b->o.max_batch_tokens && g_count <= b->cap;
            if (!fits_left && fits_alone) break;
        }
        if (n > 0 && *tokens + it->n_tokens > b->o.max_batch_tokens) break;
        iv_item_list_remove(&b->ready_list, it);
        batch[n++] = it;
        *tokens += it->n_tokens;
        last_job = it->job;
    }
    atomic_fetch_sub(&b->ready_count, n + *n_dropped);
    return n;
}

/* The idle in-service replica that has run the fewest batches (the lowest
 * index on a tie), or NULL. Lock held. */
static iv_replica *idle_replica(iv_batcher *b)
{
    iv_replica *best = NULL;
    for (int i = 0; i < b->n_replicas; i++) {
        iv_replica *r = &b->replicas[i];
        if (r->in_service && !r->busy && (!best || r->dispatched < best->dispatched)) best = r;
    }
    return best;
}

static int any_busy(const iv_batcher *b)
{
    for (int i = 0; i < b->n_replicas; i++)
        if (b->replicas[i].busy) return 1;
    return 0;
}

static int others_in_service(const iv_batcher *b, const iv_replica *self)
{
    for (int i = 0; i < b->n_replicas; i++)
        if (&b->replicas[i] != self && b->replicas[i].in_service) return 1;
    return 0;
}

static void *dispatch_main(void *arg)
{
    iv_batcher *b = arg;
    /* Dropped items can come from anywhere in the list; bound by admitted inputs. */
    const int drop_cap = b->o.max_concurrent > b->cap ? b->o.max_concurrent : b->cap;
    iv_job_item **dropped = malloc((size_t)drop_cap * sizeof *dropped);
    if (!dropped) {
        IV_ERROR("batcher: out of memory at start");
        abort();
    }
    pthread_mutex_lock(&b->ready_lock);
    for (;;) {
        iv_replica *r = NULL;
        /* A failing replica may still put its batch back: stop only once
         * nothing is queued and no replica is running. */
        while (!(b->ready_list.head && (r = idle_replica(b))) &&
               !(b->ready_stop && !b->ready_list.head && !any_busy(b)))
            pthread_cond_wait(&b->ready_cond, &b->ready_lock);
        if (!r) break;
        int n_dropped;
        int64_t tokens;
        const int n = iv_take_batch(b, r->batch, dropped, &n_dropped, &tokens);
        if (n) {
            r->n = n;
            r->tokens = tokens;
            r->busy = 1;
            r->dispatched++;
            pthread_cond_signal(&r->cond);
        }
        pthread_mutex_unlock(&b->ready_lock);
        for (int i = 0; i < n_dropped; i++) {
            iv_prepared_free(&dropped[i]->prep);
            iv_item_finished(dropped[i]);
        }
        pthread_mutex_lock(&b->ready_lock);
    }
    b->replicas_stop = 1;
    for (int i = 0; i < b->n_replicas; i++) pthread_cond_signal(&b->replicas[i].cond);
    pthread_mutex_unlock(&b->ready_lock);
    free(dropped);
    return NULL;
}

/* The fault hook of the tests: this replica's batch number fault_batch
 * fails the way a device error does. */
static int injected_fault(const iv_batcher *b, const iv_replica *r, iv_err *err)
{
    if (b->o.fault_batch <= 0 || r->index != b->o.fault_replica || r->attempts != b->o.fault_batch) return 0;
    return iv_errf(err, IV_E_INTERNAL, "%s: injected fault (IV_INJECT_REPLICA_FAULT)",
                   iv_engine_device_label(r->engine));
}

/* Hands the results (or the failure) of a finished batch to its jobs. */
static void deliver(iv_batcher *b, iv_job_item **batch, int n, int rc, const iv_err *err, iv_outputs *out,
                    int64_t t0, int64_t t1)
{
    for (int i = 0; i < n; i++) {
        iv_job_item *it = batch[i];
        iv_job *job = it->job;
        it->queue_ns = t0 - it->t_queued;
        it->inference_ns = t1 - t0;
        if (rc) {
            iv_job_fail(job, IV_JOB_FAILED_BACKEND, err);
        } else {
            size_t count = (size_t)out->rows[i] * (size_t)out->cols;
            it->out = malloc(count * sizeof(float) + 1);
            if (!it->out) {
                iv_err oom = {.code = IV_E_NOMEM};
                snprintf(oom.msg, sizeof oom.msg, "out of memory copying results");
                iv_job_fail(job, IV_JOB_FAILED_BACKEND, &oom);
            } else {
                memcpy(it->out, out->data + out->offsets[i], count * sizeof(float));
                it->rows = out->rows[i];
                job->cols = out->cols; /* same for every batch of this model and task */
            }
        }
        /* The sequence is no longer needed: free token buffers early (token
         * classification keeps the offsets for its entities). */
        if (job->task != IV_TASK_TOKEN_CLASSIFY) iv_prepared_free(&it->prep);
        iv_item_finished(it);
    }
}

/* One iv_engine_run, as a call for the shared CPU thread (cpu_thread.h). */
typedef struct engine_call {
    iv_engine *e;
    iv_task task;
    const iv_seq_input *seqs;
    int n;
    iv_outputs *out;
    iv_err *err;
} engine_call;

static int engine_call_run(void *arg)
{
    const engine_call *c = arg;
    return iv_engine_run(c->e, c->task, c->seqs, c->n, c->out, c->err);
}

static int run_engine(const iv_replica *r, iv_task task, int n, iv_outputs *out, iv_err *err)
{
    engine_call c = {r->engine, task, r->seqs, n, out, err};
    return r->on_shared_cpu_thread ? iv_cpu_thread_run(engine_call_run, &c) : engine_call_run(&c);
}

static void run_assigned(iv_replica *r)
{
    iv_batcher *b = r->owner;
    /* The replica is marked idle before its results are delivered, and the
     * dispatcher may then assign the next batch: work on a copy. */
    const int n = r->n;
    const int64_t tokens = r->tokens;
    iv_job_item **batch = r->running;
    memcpy(batch, r->batch, (size_t)n * sizeof *batch);
    for (int i = 0; i < n; i++) r->seqs[i] = batch[i]->prep.seq;
    const iv_task task = batch[0]->job->task;
    iv_outputs out = {0};
    iv_err err = {0};
    r->attempts++;
    const int64_t t0 = iv_batcher_now_ns();
    int rc = injected_fault(b, r, &err);
    if (!rc) rc = run_engine(r, task, n, &out, &err);
    const int64_t t1 = iv_batcher_now_ns();
    /* Input errors were caught before queueing; anything else is the backend's. */
    const int backend_failure = rc && err.code != IV_E_INVALID;

    pthread_mutex_lock(&b->ready_lock);
    r->busy = 0;
    r->stats.busy_ns += t1 - t0;
    const int retry = backend_failure && r->in_service && others_in_service(b, r);
    if (retry) {
        /* Out of service; the batch goes back to the front, in order. */
        r->in_service = 0;
        for (int i = n - 1; i >= 0; i--) iv_item_list_push_front(&b->ready_list, batch[i]);
        atomic_fetch_add(&b->ready_count, n);
    }
    if (rc) {
        r->stats.failures++;
    } else {
        r->stats.batches++;
        r->stats.tokens += tokens;
    }
    pthread_cond_broadcast(&b->ready_cond);
    pthread_mutex_unlock(&b->ready_lock);

    if (retry) {
        IV_ERROR("replica %d (%s) taken out of service: %s; its batch of %d sequences runs on another replica",
                 r->index, iv_engine_device_label(r->engine), err.msg, n);
        return;
    }
    if (rc) IV_ERROR("inference failed on a batch of %d sequences (%lld tokens) on replica %d (%s): %s", n,
                     (long long)tokens, r->index, iv_engine_device_label(r->engine), err.msg);
    atomic_store(&b->unhealthy, backend_failure);
    if (b->o.on_batch) b->o.on_batch(b->o.on_batch_ctx, n, tokens, t1 - t0);
    deliver(b, batch, n, rc, &err, &out, t0, t1);
    if (!rc) iv_outputs_free(&out);
}

static void *replica_main(void *arg)
{
    iv_replica *r = arg;
    iv_batcher *b = r->owner;
    iv_engine_bind_thread(r->engine);
    pthread_mutex_lock(&b->ready_lock);
    for (;;) {
        while (!r->busy && !b->replicas_stop) pthread_cond_wait(&r->cond, &b->ready_lock);
        if (!r->busy) break;
        pthread_mutex_unlock(&b->ready_lock);
        run_assigned(r);
        pthread_mutex_lock(&b->ready_lock);
    }
    pthread_mutex_unlock(&b->ready_lock);
    return NULL;
}

int iv_replicas_start(iv_batcher *b, iv_engine *const *engines, int n, iv_err *err)
{
    if (b->cap < 1) b->cap = 1;
    b->replicas = calloc((size_t)n, sizeof *b->replicas);
    if (!b->replicas) return iv_errf(err, IV_E_NOMEM, "out of memory");
    b->n_replicas = n;
    for (int i = 0; i < n; i++) {
        iv_replica *r = &b->replicas[i];
        r->owner = b;
        r->index = i;
        r->engine = engines[i];
        r->on_shared_cpu_thread = b->o.shared_cpu_thread && iv_engine_uses_all_cores(engines[i]);
        r->in_service = 1;
        r->stats.device = iv_engine_device_label(engines[i]);
        pthread_cond_init(&r->cond, NULL);
        r->batch = malloc((size_t)b->cap * sizeof *r->batch);
        r->running = malloc((size_t)b->cap * sizeof *r->running);
        r->seqs = malloc((size_t)b->cap * sizeof *r->seqs);
        if (!r->batch || !r->running || !r->seqs) return iv_errf(err, IV_E_NOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        iv_replica *r = &b->replicas[i];
        if (pthread_create(&r->thread, NULL, replica_main, r))
            return iv_errf(err, IV_E_INTERNAL, "cannot start the thread of replica %d", i);
        r->thread_started = 1;
    }
    if (pthread_create(&b->dispatch_thread, NULL, dispatch_main, b))
        return iv_errf(err, IV_E_INTERNAL, "cannot start the batching thread");
    b->dispatch_started = 1;
    return 0;
}

void iv_replicas_stop(iv_batcher *b)
{
    pthread_mutex_lock(&b->ready_lock);
    b->ready_stop = 1;
    pthread_cond_broadcast(&b->ready_cond);
    pthread_mutex_unlock(&b->ready_lock);
    if (b->dispatch_started) pthread_join(b->dispatch_thread, NULL);
    /* Without a dispatcher (a failed start) nothing else tells them. */
    pthread_mutex_lock(&b->ready_lock);
    b->replicas_stop = 1;
    for (int i = 0; i < b->n_replicas; i++) pthread_cond_signal(&b->replicas[i].cond);
    pthread_mutex_unlock(&b->ready_lock);
    for (int i = 0; i < b->n_replicas; i++) {
        iv_replica *r = &b->replicas[i];
        if (r->thread_started) pthread_join(r->thread, NULL);
        pthread_cond_destroy(&r->cond);
        free(r->batch);
        free(r->running);
        free(r->seqs);
    }
    free(b->replicas);
    b->replicas = NULL;
    b->n_replicas = 0;
}

int iv_batcher_replica_count(const iv_batcher *b) { return b->n_replicas; }

void iv_batcher_replica_stats(const iv_batcher *b, int i, iv_replica_stats *out)
{
    iv_batcher *mb = (iv_batcher *)b;
    memset(out, 0, sizeof *out);
    if (i < 0 || i >= b->n_replicas) return;
    pthread_mutex_lock(&mb->ready_lock);
    const iv_replica *r = &b->replicas[i];
    *out = r->stats;
    out->in_service = r->in_service;
    out->busy = r->busy;
    pthread_mutex_unlock(&mb->ready_lock);
}
