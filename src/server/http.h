/* libmicrohttpd glue: listening (TCP or Unix socket), body accumulation
 * under the payload limit, authentication, dispatch to the router, and
 * suspending a connection while its batch runs so a few threads can hold
 * thousands of waiting clients. */
#ifndef IV_SERVER_HTTP_H
#define IV_SERVER_HTTP_H

#include "base/err.h"
#include "server/request.h"

int iv_http_start(iv_server *s, iv_err *err);
/* Stops accepting connections (open ones carry on). */
void iv_http_quiesce(iv_server *s);
/* The drain's deadline passed: no request starts on the model any more
 * (those whose body completes answer 503), and returns once every request
 * already running on it has its response queued, so that iv_http_stop
 * may close the remaining connections. */
void iv_http_finish_running(iv_server *s);
/* Closes everything, connections still open included. */
void iv_http_stop(iv_server *s);

void iv_http_suspend(iv_req *r);
void iv_http_resume(iv_req *r);
/* The connection's socket, or -1. */
int iv_http_client_fd(iv_req *r);

/* Frees a request (called when its connection is done with it). */
void iv_req_free(iv_req *r);

#endif
