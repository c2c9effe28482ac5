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

/* Separators and key order of one dump. */
typedef struct py_style {
    const char *item, *key; /* ", " / ": " or "," / ":" */
    int sort_keys;
    /* Values left out of the text (iv_pyjson_dumps_holes), or NULL. */
    int (*hole)(const cJSON *v, size_t at, void *ctx);
    void *ctx;
} py_style;

static void dumps(iv_strbuf *b, const cJSON *v, const py_style *st);

static int cmp_keys(const void *a, const void *b)
{
    /* Python sorts str keys by code point: UTF-8 byte order is the same. */
    const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
    return strcmp(x->string ? x->string : "", y->string ? y->string : "");
}

static void dumps_object(iv_strbuf *b, const cJSON *v, const py_style *st)
{
    const int n = cJSON_GetArraySize(v);
    const cJSON **kids = n ? malloc(sizeof *kids * (size_t)n) : NULL;
    int i = 0;
    for (const cJSON *c = v->child; c && kids; c = c->next) kids[i++] = c;
    /* qsort is not stable, but keys of one object are distinct in what Python reads. */
    if (kids && st->sort_keys) qsort(kids, (size_t)n, sizeof *kids, cmp_keys);
    iv_sb_putc(b, '{');
    for (int k = 0; k < i; k++) {
        if (k) iv_sb_puts(b, st->item);
        py_string(b, kids[k]->string ? kids[k]->string : "");
        iv_sb_puts(b, st->key);
        dumps(b, kids[k], st);
    }
    iv_sb_putc(b, '}');
    free(kids);
}

void iv_pyjson_dumps(iv_strbuf *b, const cJSON *v)
{
    static const py_style st = {", ", ": ", 0, NULL, NULL};
    dumps(b, v, &st);
}

void iv_pyjson_dumps_holes(iv_strbuf *b, const cJSON *v, int (*hole)(const cJSON *v, size_t at, void *ctx),
                           void *ctx)
{
    const py_style st = {", ", ": ", 0, hole, ctx};
    dumps(b, v, &st);
}

void iv_pyjson_dumps_compact_sorted(iv_strbuf *b, const cJSON *v)
{
    static const py_style st = {",", ":", 1, NULL, NULL};
    dumps(b, v, &st);
}

static void dumps(iv_strbuf *b, const cJSON *v, const py_style *st)
{
    if (st->hole && st->hole(v, b->len, st->ctx)) return;
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
            if (i) iv_sb_puts(b, st->item);
            dumps(b, c, st);
        }
        iv_sb_putc(b, ']');
    } else if (cJSON_IsObject(v)) {
        dumps_object(b, v, st);
    }
}
