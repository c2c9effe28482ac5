/* What batcher.c (admission, tokenization) and replicas.c (batch dispatch,
 * one thread per replica) share: the batcher's state and the item lists. */
#ifndef IV_ENGINE_BATCHER_INTERNAL_H
#define IV_ENGINE_BATCHER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include "engine/batcher.h"

typedef struct item_list {
    iv_job_item *head, *tail;
    int count;
} item_list;

/* One complete model on one device and the thread that runs its batches.
 * Every field but the thread's own locals is under the batcher's ready_lock. */
typedef struct iv_replica {
    iv_batcher *owner;
    int index;
    iv_engine *engine;
    pthread_t thread;
    int thread_started;
    pthread_cond_t cond;        /* a batch was assigned, or stop */
    iv_job_item **batch;        /* the assigned batch */
    int n;
    int64_t tokens;
    iv_job_item **running;      /* the replica thread's copy of the batch it runs */
    iv_seq_input *seqs;         /* scratch of the replica's thread */
    int busy;
    int in_service;
    int64_t dispatched;         /* batches handed to it: the balancing key */
    int64_t attempts;           /* batches it started (the fault hook counts these) */
    int on_shared_cpu_thread;   /* its batches run on cpu_thread.h's thread */
    iv_replica_stats stats;
} iv_replica;

struct iv_batcher {
    iv_engine *engine;          /* the first replica: tokenizer and limits */
    iv_batcher_opts o;
    int cap;                    /* sequences per batch */

    pthread_mutex_t tok_lock;
    pthread_cond_t tok_cond;
    item_list tok_list;

    pthread_mutex_t ready_lock;
    pthread_cond_t ready_cond;  /* the dispatcher waits here: items queued, a replica idle, stop */
    item_list ready_list;

    int tok_stop;      /* under tok_lock: workers exit once their list is empty */
    int ready_stop;    /* under ready_lock, set after the workers exited */
    int replicas_stop; /* under ready_lock, set once the dispatcher exited */
    atomic_int permits_used;
    atomic_int unhealthy;
    atomic_int ready_count; /* mirrors ready_list.count for lock-free readers */
    atomic_int tok_count;

    pthread_t *workers;
    int n_workers;
    pthread_t dispatch_thread;
    int dispatch_started;
    iv_replica *replicas;
    int n_replicas;
};

int64_t iv_batcher_now_ns(void);
void iv_item_list_push(item_list *l, iv_job_item *it);
void iv_item_list_push_front(item_list *l, iv_job_item *it);
void iv_item_list_remove(item_list *l, iv_job_item *it);

/* Job bookkeeping (batcher.c). */
void iv_job_fail(iv_job *job, iv_job_stage stage, const iv_err *err);
/* 1 once one of the job's inputs failed or its client closed the connection. */
int iv_job_abandoned(iv_job *job);
/* Accounts for one item; the last one completes the job. */
void iv_item_finished(iv_job_item *it);

/* A tokenization worker is done with item `it` (ok: tokenized; else failed
 * or dropped, and accounted for here). The last of a job's items queues all
 * its tokenized ones together, in the job's order (batcher.h, "Scheduling"). */
void iv_item_tokenized(iv_batcher *b, iv_job_item *it, int ok);

/* Takes the next batch off the ready list (ready_lock held): the oldest
 * item and then, in order, items of its task while the token budget and
 * the request cap allow, a job's items as a whole when they could fit a
 * batch (batcher.h, "Scheduling"). Items of abandoned jobs are removed on
 * the way and returned in *dropped. Returns the batch's size. */
int iv_take_batch(iv_batcher *b, iv_job_item **batch, iv_job_item **dropped, int *n_dropped, int64_t *tokens);

/* replicas.c: allocation, the threads, and their stop (after the workers). */
int iv_replicas_start(iv_batcher *b, iv_engine *const *engines, int n, iv_err *err);
void iv_replicas_stop(iv_batcher *b);

#endif
