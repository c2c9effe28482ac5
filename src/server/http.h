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
/* Closes everything; call once no request is in flight. */
void iv_http_stop(iv_server *s);

void iv_http_suspend(iv_req *r);
void iv_http_resume(iv_req *r);
/* The connection's socket, or -1. */
int iv_http_client_fd(iv_req *r);

/* Frees a request (called when its connection is done with it). */
void iv_req_free(iv_req *r);

#endif
