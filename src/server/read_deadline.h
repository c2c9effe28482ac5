/* A bound on how long a client may take to send a request. libmicrohttpd's
 * connection timeout only measures silence: a client that trickles one byte
 * of its headers or body every few seconds holds its connection (and, while
 * the server drains, its shutdown) for ever. Here each connection's clock
 * starts at its accept and again when a response is done; when the next
 * request has not fully arrived (headers and body) within --read-timeout
 * seconds, a sweeper thread shuts the socket down and libmicrohttpd closes
 * the connection. The clock stops while the server works on the request.
 * An idle keep-alive connection is closed after the same time, as the
 * connection timeout (set to the same value) already did. */
#ifndef IV_SERVER_READ_DEADLINE_H
#define IV_SERVER_READ_DEADLINE_H

#include <microhttpd.h>

#include "base/err.h"

typedef struct iv_read_deadline iv_read_deadline;

int iv_read_deadline_start(iv_read_deadline **out, int timeout_s, iv_err *err);
/* Stops the sweeper; call before the daemon stops (its closing
 * notifications free what is left). NULL is fine. */
void iv_read_deadline_stop(iv_read_deadline *d);
/* Frees the list after the daemon stopped. NULL is fine. */
void iv_read_deadline_free(iv_read_deadline *d);

/* MHD_OPTION_NOTIFY_CONNECTION callback; cls is the iv_read_deadline. */
void iv_read_deadline_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                             enum MHD_ConnectionNotificationCode code);
/* The request has fully arrived: its clock stops. */
void iv_read_deadline_received(struct MHD_Connection *c);
/* Its response is done: the clock starts again for the next request. */
void iv_read_deadline_restart(struct MHD_Connection *c);

#endif
