/* The engine around one model: tokenization worker threads, a FIFO queue of
 * tokenized sequences, and a dispatching thread that packs them into batches
 * by a token budget and hands each batch to a replica (one complete copy of
 * the model on one device, with its own thread) that runs it through
 * iv_engine_run.
 *
 * A caller (an HTTP route or any other front end) fills an iv_job with one
 * or more inputs and submits it; every input becomes one sequence. The job's
 * `done` callback fires exactly once, from a batcher thread, after every
 * input has either produced its rows or been dropped. Jobs never block the
 * caller: a full server answers iv_batcher_submit with IV_E_OVERLOADED.
 *
 * Scheduling: a job's inputs are queued together, once the last of them
 * is tokenized, so the inputs of one request share a batch (documents of a
 * rerank request then fold their shared prefix, docs/prefix-folding.md).
 * The oldest queued sequence always goes into the next batch; later
 * sequences of the same task join it in arrival order while the token
 * budget (--max-batch-tokens) and the request cap (--max-batch-requests)
 * allow, a job's inputs as a whole: a job that does not fit what is left
 * waits for the next batch, unless it could never fit one (then it is
 * split where the budget runs out, as single inputs always were). iv_engine_run takes one task, so a batch never mixes tasks; a
 * sequence of another task waits at most until it is the oldest.
 *
 * Replicas: a batch is formed only when a replica is idle (so work queued
 * while every replica is busy joins bigger batches) and goes to the idle
 * replica that has run the fewest batches. A replica is marked idle before
 * its results are delivered, so sequential requests alternate between idle
 * replicas. A replica whose batch fails for a reason other than its inputs
 * (out of memory, a device fault) is taken out of service while another one
 * is in service, and its batch is queued again at the front: nothing
 * accepted is lost. The last replica in service is never taken out; its
 * failures fail their jobs and mark the batcher unhealthy until a batch
 * succeeds. */
#ifndef IV_ENGINE_BATCHER_H
#define IV_ENGINE_BATCHER_H

#include <stdatomic.h>
#include <stdint.h>
#include "engine/inputs.h"

typedef struct iv_job iv_job;
typedef struct iv_batcher iv_batcher;

/* Where a failed job failed; decides the HTTP status. */
typedef enum iv_job_stage {
    IV_JOB_OK = 0,
    IV_JOB_FAILED_INPUT,   /* tokenization / validation (err.code IV_E_INVALID, IV_E_UNSUPPORTED) */
    IV_JOB_FAILED_BACKEND, /* iv_engine_run failed */
    IV_JOB_DROPPED,        /* the client hung up before its inputs ran */
} iv_job_stage;

typedef struct iv_job_item {
    iv_input in;              /* filled by the caller; buffers owned by the caller (token
                                 classification: the text as cut by the character limit) */
    /* Filled by the batcher (token classification keeps prep.enc until iv_job_release). */
    iv_prepared prep;
    float *out;               /* rows * job->cols floats (malloc'd), NULL when not run */
    int rows;
    int n_tokens;             /* sequence length after prompt, specials and truncation */
    int64_t tokenize_ns;      /* submit -> queued for batching (includes waiting for a worker) */
    int64_t queue_ns;         /* queued -> its batch started */
    int64_t inference_ns;     /* duration of its batch */
    /* Private: queue links and timestamps. */
    iv_job *job;
    int tokenized;            /* tokenized and valid: queued with the job's others */
    struct iv_job_item *prev, *next;
    int64_t t_queued;
} iv_job_item;

struct iv_job {
    /* Set by the caller before iv_batcher_submit. */
    iv_task task;
    iv_input_opts opts;       /* prompt (kept alive by the caller), truncation */
    int n_items;
    iv_job_item *items;       /* calloc'd by the caller */
    int client_fd;            /* polled for hang-up so abandoned work is skipped; -1: none */
    void (*done)(iv_job *job);
    void *user;
    /* Results, valid once done() runs. */
    iv_job_stage stage;
    iv_err err;               /* first failure */
    int cols;                 /* width of every item's rows */
    /* Private. */
    int64_t t_submit;
    atomic_int pending;
    atomic_int untokenized;   /* inputs a worker has not finished with yet */
    atomic_int failed;
    iv_batcher *owner;
};

typedef struct iv_batcher_opts {
    int max_batch_tokens;     /* token budget of one forward (16384) */
    int max_batch_requests;   /* sequences per forward; 0: no cap */
    int max_concurrent;       /* inputs admitted at once; more gives IV_E_OVERLOADED */
    int tokenization_workers; /* >= 1 */
    int max_input_length;     /* applied to every job (0: the model's); below the model's own limit */
    /* Called from a replica's thread after every forward (metrics). */
    void (*on_batch)(void *ctx, int n_seqs, int64_t n_tokens, int64_t inference_ns);
    void *on_batch_ctx;
    /* Test hook (IV_INJECT_REPLICA_FAULT in the server): batch number
     * fault_batch (1-based) of replica fault_replica fails as a device
     * error would. fault_batch 0: off. */
    int fault_replica;
    int fault_batch;
    /* 1: replicas running on every core of this host run their batches on
     * the process's shared CPU thread (engine/cpu_thread.h), as a server
     * of several CPU models must. */
    int shared_cpu_thread;
} iv_batcher_opts;

/* One replica as /info and /metrics report it. */
typedef struct iv_replica_stats {
    const char *device;       /* e.g. "cuda:1", "cpu" */
    int in_service;
    int busy;                 /* running a batch now */
    int64_t batches;          /* batches completed (successfully) */
    int64_t tokens;           /* tokens of those batches */
    int64_t failures;         /* batches that failed on this replica */
    int64_t busy_ns;          /* time spent running batches */
} iv_replica_stats;

/* replicas: n >= 1 engines loaded from the same checkpoint (the first
 * tokenizes); the batcher does not own them. */
int iv_batcher_start(iv_batcher **out, iv_engine *const *replicas, int n_replicas, const iv_batcher_opts *opts,
                     iv_err *err);
/* Finishes every submitted job, then stops the threads and frees. */
void iv_batcher_stop(iv_batcher *b);

/* Admits the job: one permit per input (--max-concurrent-requests).
 * IV_E_OVERLOADED when the permits are exhausted, IV_E_INVALID for a job
 * without inputs or with more inputs than there are permits (it could
 * never run); done() is then never called. */
int iv_batcher_admit(iv_batcher *b, iv_job *job, iv_err *err);
/* The permits alone, for work done outside the queue (/tokenize): the
 * same errors as iv_batcher_admit for n inputs. */
int iv_batcher_take_permits(iv_batcher *b, int n, iv_err *err);
void iv_batcher_return_permits(iv_batcher *b, int n);
/* Queues an admitted job's inputs for tokenization; done() follows. */
void iv_batcher_enqueue(iv_batcher *b, iv_job *job);
/* Both of the above. */
int iv_batcher_submit(iv_batcher *b, iv_job *job, iv_err *err);

/* Frees what the batcher allocated inside the job's items (not the items). */
void iv_job_release(iv_job *job);

/* Sequences waiting for a batch / inputs waiting for tokenization. */
int iv_batcher_queue_size(const iv_batcher *b);
int iv_batcher_tokenize_backlog(const iv_batcher *b);
int iv_batcher_permits_in_use(const iv_batcher *b);
/* 1 after a forward failed for a reason other than its inputs on the last
 * replica in service, until one succeeds. */
int iv_batcher_unhealthy(const iv_batcher *b);
int iv_batcher_replica_count(const iv_batcher *b);
void iv_batcher_replica_stats(const iv_batcher *b, int i, iv_replica_stats *out);
const iv_batcher_opts *iv_batcher_options(const iv_batcher *b);

#endif
