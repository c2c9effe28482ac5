#include "decisions/pyjson.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* json.dumps(ensure_ascii=False) escapes exactly what iv_sb_json_string does:
 * the quote, the backslash and the control bytes. */
static void py_string(iv_strbuf *b, const char *s) { iv_sb_json_string(b, s, strlen(s)); }

/* Python's float repr: the shortest %.Ng that reads back the same double;
 * fixed notation for 1e-4 <= |v| < 1e16, always with a '.' or exponent. */
static void py_float(iv_strbuf *b, double v)
{
    if (isnan(v)) {
        iv_sb_puts(b, "NaN");
        return;
    }
    if (isinf(v)) {
        iv_sb_puts(b, v > 0 ? "Infinity" : "-Infinity");
        return;
    }
    char buf[64];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
        if (strtod(buf, NULL) == v) break;
    }
    /* buf: d.ddde[+-]XX with prec significant digits */
    int exp10 = atoi(strchr(buf, 'e') + 1);
    char digits[32];
    int nd = 0;
    for (const char *p = buf; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    if (v < 0) iv_sb_putc(b, '-');
    if (exp10 < -4 || exp10 >= 16) {
        iv_sb_putc(b, digits[0]);
        if (nd > 1) iv_sb_putc(b, '.'), iv_sb_puts(b, digits + 1);
        iv_sb_printf(b, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    } else if (exp10 < 0) {
        iv_sb_puts(b, "0.");
        for (int i = 0; i < -exp10 - 1; i++) iv_sb_putc(b, '0');
        iv_sb_puts(b, digits);
    } else {
        for (int i = 0; i <= exp10; i++) iv_sb_putc(b, i < nd ? digits[i] : '0');
        iv_sb_putc(b, '.');
        if (nd > exp10 + 1) iv_sb_puts(b, digits + exp10 + 1);
        else iv_sb_putc(b, '0');
    }
}

void iv_pyjson_dumps(iv_strbuf *b, const cJSON *v)
{
    if (cJSON_IsNull(v)) iv_sb_puts(b, "null");
    else if (cJSON_IsTrue(v)) iv_sb_puts(b, "true");
    else if (cJSON_IsFalse(v)) iv_sb_puts(b, "false");
    else if (cJSON_IsString(v)) py_string(b, v->valuestring);
    else if (cJSON_IsNumber(v)) {
        const double d = v->valuedouble;
        if (isfinite(d) && d == floor(d) && fabs(d) < 9007199254740992.0) iv_sb_printf(b, "%.0f", d);
        else py_float(b, d);
    } else if (cJSON_IsArray(v)) {
        iv_sb_putc(b, '[');
        int i = 0;
        for (const cJSON *c = v->child; c; c = c->next, i++) {
            if (i) iv_sb_puts(b, ", ");
            iv_pyjson_dumps(b, c);
        }
        iv_sb_putc(b, ']');
    } else if (cJSON_IsObject(v)) {
        iv_sb_putc(b, '{');
        int i = 0;
        for (const cJSON *c = v->child; c; c = c->next, i++) {
            if (i) iv_sb_puts(b, ", ");
            py_string(b, c->string ? c->string : "");
            iv_sb_puts(b, ": ");
            iv_pyjson_dumps(b, c);
        }
        iv_sb_putc(b, '}');
    }
}
