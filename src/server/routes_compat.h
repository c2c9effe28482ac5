/* Helpers of the Cohere-, Jina- and vLLM-compatible routes
 * (routes_cohere.c, routes_vllm.c). */
#ifndef IV_SERVER_ROUTES_COMPAT_H
#define IV_SERVER_ROUTES_COMPAT_H

#include "server/routes_common.h"

/* A random UUID4 string (36 characters + NUL). */
void iv_compat_uuid(char out[37]);
/* Replies with a 400 of the route's flavour; returns -1. */
int iv_compat_bad_request(iv_req *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An optional positive integer field (absent or null: *out = 0). */
int iv_compat_opt_positive(iv_req *r, const char *key, int *out);

#endif
