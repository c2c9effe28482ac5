/* The typed-decision wire contract (TypeSafe "System One v1", as served on
 * POST /v1/systemone and /v1/decisions): parsing and validating a request
 * into questions with their options, independent of any model family.
 *
 *   {"model": "...", "state": string | object | array,
 *    "questions": {"<id>": {"type": "noul" | "choice" | "score",
 *                           "instructions": ..., "criteria": ...}}}
 *
 * Validation errors are collected, not stopped at the first, as FastAPI
 * does: each is {loc, msg, type} (docs/decisions.md). */
#ifndef IV_DECISIONS_CONTRACT_H
#define IV_DECISIONS_CONTRACT_H

#include <cJSON.h>
#include "base/strbuf.h"

typedef enum iv_dq_type { IV_DQ_CHOICE = 0, IV_DQ_SCORE = 1, IV_DQ_NOUL = 2 } iv_dq_type;
const char *iv_dq_type_name(iv_dq_type t);

typedef struct iv_dq_option {
    char *key;  /* the answer's key: choice label, score level "i", noul "false"/"true" */
    char *desc; /* the criterion rendered as text (JSON text when not a string), or NULL */
    const cJSON *raw; /* the criterion as given (score legend), or NULL */
} iv_dq_option;

typedef struct iv_dq_question {
    char *id;           /* as given (UTF-8, may be empty) */
    iv_dq_type type;
    char *instructions; /* a string as is; anything else as JSON text; "" when absent */
    const cJSON *instructions_raw; /* the value as given (borrowed from the body), or NULL */
    int n_options;
    iv_dq_option *options; /* noul: [false, true]; score: level order; choice: request order */
} iv_dq_question;

typedef enum iv_dq_state_kind { IV_DQ_STATE_TEXT, IV_DQ_STATE_OBJECT, IV_DQ_STATE_ARRAY } iv_dq_state_kind;

typedef struct iv_dq_request {
    char *model;        /* owned copy */
    const cJSON *state; /* the request's value (borrowed from the body) */
    iv_dq_state_kind state_kind;
    char *state_text;   /* a string as is, else json.dumps(state, ensure_ascii=False) */
    int n_questions;
    iv_dq_question *questions; /* request order */
    int extended;       /* the request asked for the extended reply ("extended": true) */
    int has_image;      /* the state holds an image part (decisions/state_images.h) */
    int n_images;       /* its image parts, in text order */
    const char **image_src; /* each one's data URL (borrowed from the body) */
    char **state_pieces; /* n_images + 1: state_text cut at each image, or NULL without images */
} iv_dq_request;

typedef struct iv_dq_limits {
    int max_questions; /* 64 */
    int max_options;   /* 255 (choice) */
    int max_levels;    /* 10 (score) */
    int max_images;    /* 8 (images in the state) */
    int lenient;       /* accept unknown top-level and question fields */
} iv_dq_limits;
void iv_dq_limits_default(iv_dq_limits *l);

/* What parsing found wrong: n FastAPI detail items as JSON text, and the
 * status they answer with (422 validation, 413 over a limit). */
typedef struct iv_dq_errors {
    int n;
    int status;
    iv_strbuf items; /* "{...},{...}" */
} iv_dq_errors;
void iv_dq_errors_init(iv_dq_errors *e);
void iv_dq_errors_free(iv_dq_errors *e);
/* Adds one item; loc is a NULL-terminated list of path parts. */
void iv_dq_error(iv_dq_errors *e, int status, const char *type, const char *msg, const char *const *loc);
/* {"detail":[...]} */
void iv_dq_errors_json(const iv_dq_errors *e, iv_strbuf *b);

/* 0 on success; -1 with e->n > 0 when the request is invalid (out: freed). */
int iv_dq_parse(const cJSON *body, const iv_dq_limits *lim, iv_dq_request *out, iv_dq_errors *e);
void iv_dq_request_free(iv_dq_request *r);

#endif
