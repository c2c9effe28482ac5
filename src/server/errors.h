/* API errors and their bodies and status codes in each API flavour.
 *
 * A route describes what went wrong once (kind + TEI-style message, and for
 * request-shape problems the pydantic-style location/type Infinity's
 * FastAPI reports); iv_error_render turns it into the exact body of the
 * flavour the route belongs to:
 *   TEI:      {"error": msg, "error_type": "Validation"}          (router/src/lib.rs)
 *   OpenAI:   {"message": msg, "code": 422, "type": "Validation"} (TEI's /v1/embeddings)
 *   Infinity: {"error": {"message", "type": null, "param": null, "code"}}, and
 *             FastAPI's 422 {"detail": [{"type", "loc", "msg"}]} for request-shape errors.
 *   Cohere:   {"message": msg} (400 for every request problem)
 *   vLLM:     {"object": "error", "message", "type": "BadRequestError", "param": null, "code"}
 * TEI's framework-level rejections (JSON syntax 400, JSON types 422, body
 * too large 413, content type 415) are plain text, as axum sends them. */
#ifndef IV_SERVER_ERRORS_H
#define IV_SERVER_ERRORS_H

#include <stddef.h>

typedef enum iv_flavour {
    IV_FLAVOUR_TEI = 0,
    IV_FLAVOUR_OPENAI,
    IV_FLAVOUR_INFINITY,
    IV_FLAVOUR_COHERE, /* Cohere's /v1|v2/embed, /v1|v2/rerank: {"message": msg}, 400 for bad requests */
    IV_FLAVOUR_VLLM,   /* vLLM's /score: {"object":"error","message","type","param":null,"code"} */
} iv_flavour;

typedef enum iv_api_kind {
    IV_API_EMPTY,           /* empty input: 400 */
    IV_API_VALIDATION,      /* 422 */
    IV_API_TOKENIZER,       /* 422 */
    IV_API_OVERLOADED,      /* 429 */
    IV_API_BACKEND,         /* inference failure: TEI 424, Infinity 500 */
    IV_API_UNHEALTHY,       /* 503 */
    IV_API_NOT_SUPPORTED,   /* the model cannot serve the route: TEI 424, Infinity 400 */
    IV_API_MODEL_NOT_FOUND, /* `model` names no loaded model: TEI/OpenAI 422, Infinity 400 */
    IV_API_BAD_REQUEST,     /* other application errors Infinity answers with 400 */
    IV_API_JSON_SYNTAX,     /* TEI 400 text, Infinity 422 detail */
    IV_API_JSON_DATA,       /* wrong type / missing field: TEI 422 text, Infinity 422 detail */
    IV_API_PAYLOAD,         /* body over --payload-limit: 413 */
    IV_API_CONTENT_TYPE,    /* TEI: not application/json: 415 */
    IV_API_UNAUTHORIZED,    /* 401 */
    IV_API_INTERNAL,        /* 500 */
} iv_api_kind;

typedef struct iv_api_error {
    iv_api_kind kind;
    char msg[1024];       /* full message as TEI words it */
    /* Request-shape errors (JSON_DATA, and EMPTY for an empty list): */
    char loc[192];        /* JSON array items, e.g. "\"body\",\"input\",2" */
    const char *pyd_type; /* pydantic error type, e.g. "string_type" */
    char pyd_msg[256];    /* pydantic message, e.g. "Input should be a valid string" */
} iv_api_error;

void iv_api_errorf(iv_api_error *e, iv_api_kind kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Adds the pydantic view of a request-shape error. */
void iv_api_error_shape(iv_api_error *e, const char *loc, const char *pyd_type, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

typedef struct iv_reply {
    int status;
    char *body;               /* malloc'd (may be NULL with len 0) */
    size_t len;
    const char *content_type; /* static string or NULL */
    const char *www_authenticate;
} iv_reply;

/* Renders e for a route of flavour f. */
void iv_error_render(iv_flavour f, const iv_api_error *e, iv_reply *out);
int iv_error_status(iv_flavour f, const iv_api_error *e);
/* TEI's error_type name for a kind ("Validation", ...). */
const char *iv_error_type_name(iv_api_kind kind);
/* The te_request_failure{err=...} label for a kind. */
const char *iv_error_metric_label(iv_api_kind kind);

#endif
