/* Request tracing: every request carries an id, the client's x-request-id
 * when it is valid (1..IV_REQUEST_ID_MAX visible ASCII characters, 0x21 to
 * 0x7e: no spaces or control bytes that could forge a log line or a
 * header), else a generated one: 32 lowercase hex digits from the kernel's
 * random source, the format of nginx's $request_id. The id is sent back as
 * x-request-id on every response, errors included, and ends the request's
 * log line (" id=..."). */
#ifndef IV_SERVER_REQUEST_ID_H
#define IV_SERVER_REQUEST_ID_H

#include <stddef.h>

#define IV_REQUEST_ID_MAX 128

/* 1 when s may be used as a request id as given. */
int iv_request_id_valid(const char *s);
/* Writes the request's id to out: given when valid, else a new one. */
void iv_request_id(const char *given, char out[IV_REQUEST_ID_MAX + 1]);
/* n_bytes (at most 32) random bytes as 2 * n_bytes lowercase hex digits and a NUL. */
void iv_random_hex(char *out, int n_bytes);

/* Copies s into out (cap bytes, NUL-terminated, cut short when full) with
 * every byte outside visible ASCII and space written as \xHH, for log
 * lines: a request path is URL-decoded, so %0A would otherwise start a
 * forged line. */
void iv_log_escape(const char *s, char *out, size_t cap);

#endif
