#include "server/errors.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/strbuf.h"
#include "base/utf8.h"

void iv_api_errorf(iv_api_error *e, iv_api_kind kind, const char *fmt, ...)
{
    memset(e, 0, sizeof *e);
    e->kind = kind;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    /* Echoed client strings are cut at character boundaries
     * (IV_UTF8_ECHO); this catches the buffer's own cut and anything that
     * slipped through, so every error body is valid UTF-8. */
    iv_utf8_scrub(e->msg);
}

void iv_api_error_shape(iv_api_error *e, const char *loc, const char *pyd_type, const char *fmt, ...)
{
    snprintf(e->loc, sizeof e->loc, "%s", loc);
    e->pyd_type = pyd_type;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->pyd_msg, sizeof e->pyd_msg, fmt, ap);
    va_end(ap);
    iv_utf8_scrub(e->pyd_msg);
    iv_utf8_scrub(e->loc);
}

const char *iv_error_type_name(iv_api_kind kind)
{
    switch (kind) {
    case IV_API_EMPTY: return "Empty";
    case IV_API_TOKENIZER: return "Tokenizer";
    case IV_API_OVERLOADED: return "Overloaded";
    case IV_API_BACKEND:
    case IV_API_NOT_SUPPORTED:
    case IV_API_INTERNAL: return "Backend";
    case IV_API_UNHEALTHY: return "Unhealthy";
    default: return "Validation";
    }
}

const char *iv_error_metric_label(iv_api_kind kind)
{
    switch (kind) {
    case IV_API_TOKENIZER: return "tokenization";
    case IV_API_OVERLOADED: return "overloaded";
    case IV_API_BACKEND:
    case IV_API_INTERNAL: return "inference";
    case IV_API_NOT_SUPPORTED: return "model_type";
    default: return "validation";
    }
}

static int tei_status(iv_api_kind kind)
{
    switch (kind) {
    case IV_API_EMPTY: return 400;
    case IV_API_OVERLOADED: return 429;
    case IV_API_BACKEND:
    case IV_API_NOT_SUPPORTED: return 424;
    case IV_API_UNHEALTHY: return 503;
    case IV_API_JSON_SYNTAX: return 400;
    case IV_API_PAYLOAD: return 413;
    case IV_API_CONTENT_TYPE: return 415;
    case IV_API_UNAUTHORIZED: return 401;
    case IV_API_INTERNAL: return 500;
    default: return 422; /* validation, tokenizer, model not found, json data, bad request */
    }
}

static int infinity_status(const iv_api_error *e)
{
    switch (e->kind) {
    case IV_API_EMPTY: return e->pyd_type ? 422 : 400;
    case IV_API_VALIDATION:
    case IV_API_TOKENIZER:
    case IV_API_JSON_SYNTAX:
    case IV_API_JSON_DATA: return 422;
    case IV_API_OVERLOADED: return 429;
    case IV_API_UNHEALTHY: return 503;
    case IV_API_PAYLOAD: return 413;
    case IV_API_CONTENT_TYPE: return 415;
    case IV_API_UNAUTHORIZED: return 401;
    case IV_API_BACKEND:
    case IV_API_INTERNAL: return 500;
    default: return 400; /* not supported, model not found, bad request */
    }
}

/* Cohere and vLLM answer every problem with the request 400. */
static int compat_status(iv_api_kind kind)
{
    switch (kind) {
    case IV_API_OVERLOADED: return 429;
    case IV_API_BACKEND:
    case IV_API_INTERNAL: return 500;
    case IV_API_UNHEALTHY: return 503;
    case IV_API_PAYLOAD: return 413;
    case IV_API_CONTENT_TYPE: return 415;
    case IV_API_UNAUTHORIZED: return 401;
    default: return 400;
    }
}

int iv_error_status(iv_flavour f, const iv_api_error *e)
{
    if (f == IV_FLAVOUR_COHERE || f == IV_FLAVOUR_VLLM) return compat_status(e->kind);
    return f == IV_FLAVOUR_INFINITY ? infinity_status(e) : tei_status(e->kind);
}

static const char *vllm_type(int status)
{
    switch (status) {
    case 400: return "BadRequestError";
    case 413: return "RequestEntityTooLarge";
    case 415: return "UnsupportedMediaType";
    case 429: return "TooManyRequests";
    case 503: return "ServiceUnavailable";
    default: return "InternalServerError";
    }
}

static void take(iv_strbuf *b, iv_reply *out, const char *ctype)
{
    out->body = b->data;
    out->len = b->len;
    out->content_type = ctype;
}

static void plain(iv_reply *out, const char *prefix, const char *msg)
{
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_puts(&b, prefix);
    iv_sb_puts(&b, msg);
    take(&b, out, "text/plain; charset=utf-8");
}

/* FastAPI's RequestValidationError body. */
static void pydantic_detail(const iv_api_error *e, iv_strbuf *b)
{
    iv_sb_puts(b, "{\"detail\":[{\"type\":");
    const char *type = e->pyd_type ? e->pyd_type : e->kind == IV_API_JSON_SYNTAX ? "json_invalid" : "value_error";
    iv_sb_json_string(b, type, strlen(type));
    iv_sb_puts(b, ",\"loc\":[");
    iv_sb_puts(b, e->loc[0] ? e->loc : "\"body\"");
    iv_sb_puts(b, "],\"msg\":");
    const char *msg = e->pyd_type && e->pyd_msg[0] ? e->pyd_msg : e->msg;
    iv_sb_json_string(b, msg, strlen(msg));
    iv_sb_puts(b, "}]}");
}

void iv_error_render(iv_flavour f, const iv_api_error *e, iv_reply *out)
{
    memset(out, 0, sizeof *out);
    out->status = iv_error_status(f, e);
    iv_strbuf b;
    iv_sb_init(&b);
    if (e->kind == IV_API_UNAUTHORIZED) {
        /* TEI: bare 401. FastAPI's HTTPBearer dependency: detail + challenge. */
        if (f == IV_FLAVOUR_INFINITY) {
            iv_sb_puts(&b, "{\"detail\":\"Unauthorized\"}");
            take(&b, out, "application/json");
            out->www_authenticate = "Bearer";
        }
        return;
    }
    if (f == IV_FLAVOUR_COHERE || f == IV_FLAVOUR_VLLM) {
        const char *msg = e->msg;
        char buf[1100];
        if (e->kind == IV_API_JSON_SYNTAX || e->kind == IV_API_JSON_DATA) {
            snprintf(buf, sizeof buf, "invalid request: %s", e->msg);
            msg = buf;
        }
        if (f == IV_FLAVOUR_COHERE) {
            iv_sb_puts(&b, "{\"message\":");
            iv_sb_json_string(&b, msg, strlen(msg));
            iv_sb_putc(&b, '}');
        } else {
            iv_sb_puts(&b, "{\"object\":\"error\",\"message\":");
            iv_sb_json_string(&b, msg, strlen(msg));
            iv_sb_printf(&b, ",\"type\":\"%s\",\"param\":null,\"code\":%d}", vllm_type(out->status), out->status);
        }
        take(&b, out, "application/json");
        return;
    }
    if (f == IV_FLAVOUR_INFINITY) {
        if (e->kind == IV_API_JSON_SYNTAX || e->kind == IV_API_JSON_DATA || (e->kind == IV_API_EMPTY && e->pyd_type)) {
            pydantic_detail(e, &b);
        } else {
            iv_sb_puts(&b, "{\"error\":{\"message\":");
            iv_sb_json_string(&b, e->msg, strlen(e->msg));
            iv_sb_printf(&b, ",\"type\":null,\"param\":null,\"code\":%d}}", out->status);
        }
        take(&b, out, "application/json");
        return;
    }
    switch (e->kind) {
    case IV_API_JSON_SYNTAX: plain(out, "Failed to parse the request body as JSON: ", e->msg); return;
    case IV_API_JSON_DATA: plain(out, "Failed to deserialize the JSON body into the target type: ", e->msg); return;
    case IV_API_PAYLOAD: plain(out, "Failed to buffer the request body: ", "length limit exceeded"); return;
    case IV_API_CONTENT_TYPE: plain(out, "Expected request with `Content-Type: application/json`", ""); return;
    default: break;
    }
    const char *type = iv_error_type_name(e->kind);
    if (f == IV_FLAVOUR_OPENAI) {
        iv_sb_puts(&b, "{\"message\":");
        iv_sb_json_string(&b, e->msg, strlen(e->msg));
        iv_sb_printf(&b, ",\"code\":%d,\"type\":\"%s\"}", out->status, type);
    } else {
        iv_sb_puts(&b, "{\"error\":");
        iv_sb_json_string(&b, e->msg, strlen(e->msg));
        iv_sb_printf(&b, ",\"error_type\":\"%s\"}", type);
    }
    take(&b, out, "application/json");
}
