/* Per-connection read deadline (see read_deadline.h). The connection list
 * and the sweeper's shutdown() share one mutex with the closing
 * notification, which libmicrohttpd sends before it closes the socket: the
 * sweeper never touches a descriptor that may have been reused. */
#include "server/read_deadline.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "base/log.h"

typedef struct track {
    struct track *prev, *next;
    int fd;
    _Atomic int64_t since_ms; /* when the clock (re)started */
    atomic_int receiving;     /* 1 while a request is awaited or arriving */
    int cut;                  /* shut down already */
} track;

struct iv_read_deadline {
    int timeout_ms;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    int stopping;
    pthread_t sweeper;
    track *head;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *sweep(void *arg)
{
    iv_read_deadline *d = arg;
    /* Checked four times per timeout (at least once a second): a connection
     * is cut between 1 and 1.25 timeouts after its clock started. */
    const int period_ms = d->timeout_ms / 4 < 1000 ? d->timeout_ms / 4 > 50 ? d->timeout_ms / 4 : 50 : 1000;
    pthread_mutex_lock(&d->mu);
    while (!d->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)period_ms * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&d->wake, &d->mu, &ts);
        const int64_t now = now_ms();
        int cut = 0;
        for (track *t = d->head; t && !d->stopping; t = t->next)
            if (!t->cut && atomic_load(&t->receiving) && now - atomic_load(&t->since_ms) > d->timeout_ms) {
                shutdown(t->fd, SHUT_RDWR);
                t->cut = 1;
                cut++;
            }
        if (cut)
            IV_WARN("closed %d connection%s that took over %d s to send a request (--read-timeout)", cut,
                    cut > 1 ? "s" : "", d->timeout_ms / 1000);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

int iv_read_deadline_start(iv_read_deadline **out, int timeout_s, iv_err *err)
{
    *out = NULL;
    iv_read_deadline *d = calloc(1, sizeof *d);
    if (!d) return iv_errf(err, IV_E_NOMEM, "out of memory");
    d->timeout_ms = timeout_s * 1000;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->wake, NULL);
    if (pthread_create(&d->sweeper, NULL, sweep, d)) {
        pthread_mutex_destroy(&d->mu);
        pthread_cond_destroy(&d->wake);
        free(d);
        return iv_errf(err, IV_E_IO, "cannot start the read-deadline thread");
    }
    *out = d;
    return 0;
}

void iv_read_deadline_stop(iv_read_deadline *d)
{
    if (!d) return;
    pthread_mutex_lock(&d->mu);
    const int was = d->stopping;
    d->stopping = 1;
    pthread_cond_signal(&d->wake);
    pthread_mutex_unlock(&d->mu);
    if (!was) pthread_join(d->sweeper, NULL);
}

void iv_read_deadline_free(iv_read_deadline *d)
{
    if (!d) return;
    iv_read_deadline_stop(d);
    for (track *t = d->head, *next; t; t = next) { /* none when the daemon closed every connection */
        next = t->next;
        free(t);
    }
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->wake);
    free(d);
}

void iv_read_deadline_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                             enum MHD_ConnectionNotificationCode code)
{
    iv_read_deadline *d = cls;
    if (!d) return; /* --read-timeout 0 */
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        track *t = fd ? calloc(1, sizeof *t) : NULL;
        *socket_context = t;
        if (!t) return; /* untracked: only the connection timeout applies */
        t->fd = fd->connect_fd;
        atomic_store(&t->since_ms, now_ms());
        atomic_store(&t->receiving, 1);
        pthread_mutex_lock(&d->mu);
        t->next = d->head;
        if (d->head) d->head->prev = t;
        d->head = t;
        pthread_mutex_unlock(&d->mu);
        return;
    }
    track *t = *socket_context;
    if (!t) return;
    *socket_context = NULL;
    pthread_mutex_lock(&d->mu);
    if (t->prev) t->prev->next = t->next;
    else d->head = t->next;
    if (t->next) t->next->prev = t->prev;
    pthread_mutex_unlock(&d->mu);
    free(t);
}

static track *track_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *i = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

void iv_read_deadline_received(struct MHD_Connection *c)
{
    track *t = track_of(c);
    if (t) atomic_store(&t->receiving, 0);
}

void iv_read_deadline_restart(struct MHD_Connection *c)
{
    track *t = track_of(c);
    if (!t) return;
    atomic_store(&t->since_ms, now_ms());
    atomic_store(&t->receiving, 1);
}
