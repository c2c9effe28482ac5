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
    size_t hn = strlen(head);
    if (hn >= sizeof err->msg) hn = sizeof err->msg - 1;
    memcpy(err->msg, head, hn);
    size_t on = strnlen(old, sizeof old);
    if (on > sizeof err->msg - 1 - hn) on = sizeof err->msg - 1 - hn;
    memcpy(err->msg + hn, old, on);
    err->msg[hn + on] = 0;
    return -1;
}
