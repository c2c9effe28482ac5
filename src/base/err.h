/* Errors: every fallible function returns 0 on success or -1 after filling an
 * iv_err with a code (which maps to an HTTP status in the server) and a
 * message a user can act on. */
#ifndef IV_BASE_ERR_H
#define IV_BASE_ERR_H

enum iv_err_code {
    IV_OK = 0,
    IV_E_INVALID,      /* bad user input: 400/422 */
    IV_E_FORMAT,       /* malformed file (safetensors, json, tokenizer) */
    IV_E_UNSUPPORTED,  /* valid but not supported (architecture, dtype) */
    IV_E_NOTFOUND,     /* missing file, tensor, model */
    IV_E_IO,           /* read/map failure */
    IV_E_NOMEM,
    IV_E_TOO_LARGE,    /* input exceeds a limit: 413 */
    IV_E_OVERLOADED,   /* queue full: 429 */
    IV_E_INTERNAL,
};

typedef struct iv_err {
    int code;
    char msg[1024];
} iv_err;

/* Fills err (when non-NULL) and returns -1, so callers can `return iv_errf(...)`. */
int iv_errf(iv_err *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prepends context: "loading bert: " + existing message. Returns -1. */
int iv_err_prefix(iv_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
