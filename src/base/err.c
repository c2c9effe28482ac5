#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int iv_errf(iv_err *err, int code, const char *fmt, ...)
{
    if (!err) return -1;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

int iv_err_prefix(iv_err *err, const char *fmt, ...)
{
    if (!err) return -1;
    char head[512], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s%s", head, old);
    return -1;
}
