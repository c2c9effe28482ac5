/* Values printed as Python prints them: str() for {{ }} output, repr()
 * inside lists and dicts, float repr (shortest round-trip digits, exponent
 * form outside 1e-4..1e16), and json.dumps as transformers' tojson calls it
 * (ensure_ascii=False). Templates print these straight into prompts, so
 * each character must be Python's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "chat/jinja_internal.h"

void jp_float(iv_strbuf *b, double f)
{
    if (isnan(f)) { iv_sb_puts(b, "nan"); return; }
    if (isinf(f)) { iv_sb_puts(b, f < 0 ? "-inf" : "inf"); return; }
    if (f == 0) { iv_sb_puts(b, signbit(f) ? "-0.0" : "0.0"); return; }
    char buf[48];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, f);
        if (strtod(buf, NULL) == f) break;
    }
    /* buf: [-]d[.ddd]e[+-]XX */
    const char *p = buf;
    if (*p == '-') { iv_sb_putc(b, '-'); p++; }
    char digits[24];
    int nd = 0;
    while (*p && *p != 'e') {
        if (*p != '.') digits[nd++] = *p;
        p++;
    }
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    int exp10 = atoi(p + 1);
    int decpt = exp10 + 1;
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            iv_sb_puts(b, "0.");
            for (int i = 0; i < -decpt; i++) iv_sb_putc(b, '0');
            iv_sb_append(b, digits, (size_t)nd);
        } else if (decpt >= nd) {
            iv_sb_append(b, digits, (size_t)nd);
            for (int i = nd; i < decpt; i++) iv_sb_putc(b, '0');
            iv_sb_puts(b, ".0");
        } else {
            iv_sb_append(b, digits, (size_t)decpt);
            iv_sb_putc(b, '.');
            iv_sb_append(b, digits + decpt, (size_t)(nd - decpt));
        }
        return;
    }
    iv_sb_putc(b, digits[0]);
    if (nd > 1) {
        iv_sb_putc(b, '.');
        iv_sb_append(b, digits + 1, (size_t)(nd - 1));
    }
    iv_sb_printf(b, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
}

/* str.isprintable() by Unicode category (as utf8proc knows them). */
int jp_printable(uint32_t cp)
{
    if (cp == ' ') return 1;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return 0;
    default: return 1;
    }
}

static void repr_str(iv_strbuf *b, const char *s, size_t n)
{
    int has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    iv_sb_putc(b, q);
    for (size_t i = 0; i < n;) {
        size_t start = i;
        uint32_t c = ju_next(s, n, &i);
        if (c == (uint32_t)q || c == '\\') { iv_sb_putc(b, '\\'); iv_sb_putc(b, (char)c); }
        else if (c == '\t') iv_sb_puts(b, "\\t");
        else if (c == '\n') iv_sb_puts(b, "\\n");
        else if (c == '\r') iv_sb_puts(b, "\\r");
        else if (c < 0x20 || c == 0x7F) iv_sb_printf(b, "\\x%02x", c);
        else if (c < 0x7F) iv_sb_putc(b, (char)c);
        else if (jp_printable(c)) iv_sb_append(b, s + start, i - start);
        else if (c <= 0xFF) iv_sb_printf(b, "\\x%02x", c);
        else if (c <= 0xFFFF) iv_sb_printf(b, "\\u%04x", c);
        else iv_sb_printf(b, "\\U%08x", c);
    }
    iv_sb_putc(b, q);
}

static void repr_dict(jrender *R, iv_strbuf *b, const jdict *d)
{
    iv_sb_putc(b, '{');
    for (size_t i = 0; i < d->n; i++) {
        if (i) iv_sb_puts(b, ", ");
        jp_repr(R, b, d->keys[i]);
        iv_sb_puts(b, ": ");
        jp_repr(R, b, d->vals[i]);
    }
    iv_sb_putc(b, '}');
}

static void check_size(jrender *R, iv_strbuf *b)
{
    if (b->oom) jr_fail(R, NULL, "%s", "out of memory");
    if (b->len > IV_JINJA_MAX_OUTPUT) jr_fail(R, NULL, "a value printed longer than %u bytes", IV_JINJA_MAX_OUTPUT);
}

void jp_repr(jrender *R, iv_strbuf *b, jv v)
{
    check_size(R, b);
    switch (v.kind) {
    case JV_UNDEF: iv_sb_puts(b, "Undefined"); return;
    case JV_STR: repr_str(b, v.u.s, v.n); return;
    case JV_LIST: {
        const jlist *l = v.u.l;
        if (l->flags & JL_GEN) { iv_sb_puts(b, "<generator object>"); return; }
        int tuple = l->flags & JL_TUPLE;
        iv_sb_putc(b, tuple ? '(' : '[');
        for (size_t i = 0; i < l->n; i++) {
            if (i) iv_sb_puts(b, ", ");
            jp_repr(R, b, l->items[i]);
        }
        if (tuple && l->n == 1) iv_sb_putc(b, ',');
        iv_sb_putc(b, tuple ? ')' : ']');
        return;
    }
    case JV_DICT: repr_dict(R, b, v.u.d); return;
    default: jp_str(R, b, v);
    }
}

void jp_str(jrender *R, iv_strbuf *b, jv v)
{
    switch (v.kind) {
    case JV_UNDEF: return;
    case JV_NONE: iv_sb_puts(b, "None"); return;
    case JV_BOOL: iv_sb_puts(b, v.u.i ? "True" : "False"); return;
    case JV_INT: iv_sb_int(b, (long long)v.u.i); return;
    case JV_FLOAT: jp_float(b, v.u.f); return;
    case JV_STR: iv_sb_append(b, v.u.s, v.n); return;
    case JV_LIST:
    case JV_DICT: jp_repr(R, b, v); return;
    case JV_NS:
        iv_sb_puts(b, "<Namespace ");
        repr_dict(R, b, v.u.d);
        iv_sb_putc(b, '>');
        return;
    case JV_MACRO:
        iv_sb_printf(b, "<Macro '%.*s'>", (int)v.u.m->def->name_n, v.u.m->def->name);
        return;
    case JV_FUNC: iv_sb_printf(b, "<built-in function %s>", v.u.fn->name); return;
    case JV_LOOP:
        iv_sb_printf(b, "<LoopContext %zu/%zu>", v.u.lp->index0 + 1, v.u.lp->items->n);
        return;
    }
}

/* ---- json.dumps ---- */

static void json_str(iv_strbuf *b, const char *s, size_t n, int ascii)
{
    iv_sb_putc(b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char hex[8];
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c == '\b') esc = "\\b";
        else if (c == '\f') esc = "\\f";
        else if (c < 0x20) {
            snprintf(hex, sizeof hex, "\\u%04x", c);
            esc = hex;
        } else if (c >= 0x80 && ascii) {
            iv_sb_append(b, s + run, i - run);
            size_t j = i;
            uint32_t cp = ju_next(s, n, &j);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                iv_sb_printf(b, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            } else {
                iv_sb_printf(b, "\\u%04x", cp);
            }
            run = j;
            i = j - 1;
            continue;
        }
        if (!esc) continue;
        iv_sb_append(b, s + run, i - run);
        iv_sb_puts(b, esc);
        run = i + 1;
    }
    iv_sb_append(b, s + run, n - run);
    iv_sb_putc(b, '"');
}

static void json_newline(iv_strbuf *b, const char *indent, size_t indent_n, int level)
{
    iv_sb_putc(b, '\n');
    for (int i = 0; i < level; i++) iv_sb_append(b, indent, indent_n);
}

/* A dict key as json.dumps writes it (str, or the JSON text of a scalar). */
static void json_key(jrender *R, const jnode *at, iv_strbuf *b, jv k, int ascii)
{
    switch (k.kind) {
    case JV_STR: json_str(b, k.u.s, k.n, ascii); return;
    case JV_NONE: iv_sb_puts(b, "\"null\""); return;
    case JV_BOOL: iv_sb_puts(b, k.u.i ? "\"true\"" : "\"false\""); return;
    case JV_INT: iv_sb_putc(b, '"'); iv_sb_int(b, (long long)k.u.i); iv_sb_putc(b, '"'); return;
    case JV_FLOAT: {
        iv_sb_putc(b, '"');
        if (isnan(k.u.f)) iv_sb_puts(b, "NaN");
        else if (isinf(k.u.f)) iv_sb_puts(b, k.u.f < 0 ? "-Infinity" : "Infinity");
        else jp_float(b, k.u.f);
        iv_sb_putc(b, '"');
        return;
    }
    default: jr_fail(R, at, "keys must be str, int, float, bool or None, not %s", jv_type_name(k));
    }
}

static int cmp_plain(jrender *R, const jnode *at, const jv *a, const jv *b, void *ctx)
{
    return jv_compare(R, at, *a, *b);
}

void jp_json(jrender *R, const jnode *at, iv_strbuf *b, jv v, const char *indent, size_t indent_n,
             const char *item_sep, const char *key_sep, int flags, int level)
{
    check_size(R, b);
    if (level > IV_JINJA_MAX_DEPTH * 4) jr_fail(R, at, "%s", "tojson: value nested too deeply");
    if (!item_sep) item_sep = indent ? "," : ", ";
    if (!key_sep) key_sep = ": ";
    switch (v.kind) {
    case JV_NONE: iv_sb_puts(b, "null"); return;
    case JV_BOOL: iv_sb_puts(b, v.u.i ? "true" : "false"); return;
    case JV_INT: iv_sb_int(b, (long long)v.u.i); return;
    case JV_FLOAT:
        if (isnan(v.u.f)) iv_sb_puts(b, "NaN");
        else if (isinf(v.u.f)) iv_sb_puts(b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else jp_float(b, v.u.f);
        return;
    case JV_STR: json_str(b, v.u.s, v.n, flags & JP_ASCII); return;
    case JV_LIST: {
        const jlist *l = v.u.l;
        if (l->flags & JL_GEN) break;
        if (!l->n) { iv_sb_puts(b, "[]"); return; }
        iv_sb_putc(b, '[');
        for (size_t i = 0; i < l->n; i++) {
            if (i) iv_sb_puts(b, item_sep);
            if (indent) json_newline(b, indent, indent_n, level + 1);
            jp_json(R, at, b, l->items[i], indent, indent_n, item_sep, key_sep, flags, level + 1);
        }
        if (indent) json_newline(b, indent, indent_n, level);
        iv_sb_putc(b, ']');
        return;
    }
    case JV_DICT: {
        const jdict *d = v.u.d;
        if (!d->n) { iv_sb_puts(b, "{}"); return; }
        jv *keys = d->keys;
        if (flags & JP_SORT_KEYS) {
            keys = jr_alloc(R, d->n * sizeof *keys);
            memcpy(keys, d->keys, d->n * sizeof *keys);
            jv_sort(R, at, keys, d->n, cmp_plain, NULL);
        }
        iv_sb_putc(b, '{');
        for (size_t i = 0; i < d->n; i++) {
            if (i) iv_sb_puts(b, item_sep);
            if (indent) json_newline(b, indent, indent_n, level + 1);
            json_key(R, at, b, keys[i], flags & JP_ASCII);
            iv_sb_puts(b, key_sep);
            jp_json(R, at, b, *jd_get(d, keys[i]), indent, indent_n, item_sep, key_sep, flags, level + 1);
        }
        if (indent) json_newline(b, indent, indent_n, level);
        iv_sb_putc(b, '}');
        return;
    }
    default: break;
    }
    jr_fail(R, at, "Object of type %s is not JSON serializable", jv_type_name(v));
}
