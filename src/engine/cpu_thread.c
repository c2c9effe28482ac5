#include "engine/cpu_thread.h"

#include <pthread.h>

/* A call waiting in line: the caller's stack holds it until done. */
typedef struct cpu_call {
    int (*fn)(void *);
    void *arg;
    int rc, done;
    struct cpu_call *next;
} cpu_call;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queued = PTHREAD_COND_INITIALIZER, finished = PTHREAD_COND_INITIALIZER;
static cpu_call *head, *tail;
static int started; /* 1: running, -1: could not start */

/* Lives as long as the process: the callers (replica threads) wait on it. */
static void *cpu_thread_main(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!head) pthread_cond_wait(&queued, &lock);
        cpu_call *c = head;
        head = c->next;
        if (!head) tail = NULL;
        pthread_mutex_unlock(&lock);
        const int rc = c->fn(c->arg);
        pthread_mutex_lock(&lock);
        c->rc = rc;
        c->done = 1;
        pthread_cond_broadcast(&finished);
    }
    return NULL;
}

int iv_cpu_thread_run(int (*fn)(void *arg), void *arg)
{
    pthread_mutex_lock(&lock);
    if (!started) {
        pthread_t t;
        started = pthread_create(&t, NULL, cpu_thread_main, NULL) == 0 ? 1 : -1;
        if (started == 1) pthread_detach(t);
    }
    if (started < 0) {
        pthread_mutex_unlock(&lock);
        return fn(arg);
    }
    cpu_call c = {fn, arg, 0, 0, NULL};
    if (tail) tail->next = &c;
    else head = &c;
    tail = &c;
    pthread_cond_signal(&queued);
    while (!c.done) pthread_cond_wait(&finished, &lock);
    pthread_mutex_unlock(&lock);
    return c.rc;
}
