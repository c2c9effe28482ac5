/* Jinja values with Python's semantics: the arena they live in, building
 * them (from the cJSON context too), truthiness, equality, ordering,
 * iteration and len(), and the UTF-8 code point helpers that make str
 * length and indexing count characters as Python does. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "chat/jinja_internal.h"

/* ---- arena ---- */

struct jchunk {
    jchunk *next;
    size_t size, used;
    max_align_t data[];
};

void ja_init(jarena *a, size_t cap)
{
    a->head = NULL;
    a->used = 0;
    a->cap = cap;
}

void ja_free(jarena *a)
{
    jchunk *c = a->head;
    while (c) {
        jchunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->used = 0;
}

void *ja_alloc(jarena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    if (n > a->cap || a->used > a->cap - n) return NULL;
    jchunk *c = a->head;
    if (!c || c->size - c->used < n) {
        size_t size = n > 65536 ? n : 65536;
        c = malloc(sizeof *c + size);
        if (!c) return NULL;
        c->size = size, c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    a->used += n;
    memset(p, 0, n);
    return p;
}

void *jr_alloc(jrender *R, size_t n)
{
    void *p = ja_alloc(&R->arena, n);
    if (!p) jr_fail(R, NULL, "the template used more than %zu MiB of memory", R->arena.cap >> 20);
    return p;
}

/* ---- UTF-8 ---- */

uint32_t ju_next(const char *s, size_t n, size_t *i)
{
    const unsigned char *u = (const unsigned char *)s + *i;
    size_t left = n - *i;
    uint32_t c = u[0];
    int len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 1;
    if ((size_t)len > left) len = 1;
    for (int k = 1; k < len; k++)
        if ((u[k] & 0xC0) != 0x80) len = 1;
    if (len == 1) {
        *i += 1;
        return c;
    }
    uint32_t cp = c & (0x7F >> len);
    for (int k = 1; k < len; k++) cp = cp << 6 | (u[k] & 0x3F);
    *i += (size_t)len;
    return cp;
}

size_t ju_len(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; c++) ju_next(s, n, &i);
    return c;
}

void ju_put(iv_strbuf *b, uint32_t cp)
{
    char o[4];
    if (cp < 0x80) {
        iv_sb_putc(b, (char)cp);
        return;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F));
        iv_sb_append(b, o, 2);
    } else if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 0x3F)), o[2] = (char)(0x80 | (cp & 0x3F));
        iv_sb_append(b, o, 3);
    } else {
        o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
        o[2] = (char)(0x80 | (cp >> 6 & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F));
        iv_sb_append(b, o, 4);
    }
}

int ju_isspace(uint32_t c)
{
    return (c >= 9 && c <= 13) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* ---- constructors ---- */

jv jv_undef(const char *name, size_t n) { return (jv){.kind = JV_UNDEF, .u.s = name, .n = n}; }
jv jv_none(void) { return (jv){.kind = JV_NONE}; }
jv jv_bool(int b) { return (jv){.kind = JV_BOOL, .u.i = b != 0}; }
jv jv_int(int64_t i) { return (jv){.kind = JV_INT, .u.i = i}; }
jv jv_float(double f) { return (jv){.kind = JV_FLOAT, .u.f = f}; }
jv jv_str(const char *s, size_t n) { return (jv){.kind = JV_STR, .u.s = s, .n = n}; }
jv jv_cstr(const char *s) { return jv_str(s, strlen(s)); }

jv jv_str_copy(jrender *R, const char *s, size_t n)
{
    if (n > IV_JINJA_MAX_OUTPUT) jr_fail(R, NULL, "a string longer than %u bytes", IV_JINJA_MAX_OUTPUT);
    char *p = jr_alloc(R, n + 1);
    if (n) memcpy(p, s, n);
    return jv_str(p, n);
}

jv jv_list_new(jrender *R, size_t cap)
{
    jlist *l = jr_alloc(R, sizeof *l);
    if (cap) {
        l->items = jr_alloc(R, cap * sizeof *l->items);
        l->cap = cap;
    }
    return (jv){.kind = JV_LIST, .u.l = l};
}

jv jv_dict_new(jrender *R) { return (jv){.kind = JV_DICT, .u.d = jr_alloc(R, sizeof(jdict))}; }

void jl_push(jrender *R, jlist *l, jv v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jv *items = jr_alloc(R, cap * sizeof *items);
        if (l->n) memcpy(items, l->items, l->n * sizeof *items);
        l->items = items, l->cap = cap;
    }
    l->items[l->n++] = v;
}

/* Python hashes 1, 1.0 and True alike: dict keys compare with ==. */
jv *jd_get(const jdict *d, jv k)
{
    for (size_t i = 0; i < d->n; i++)
        if (jv_equal(d->keys[i], k)) return &d->vals[i];
    return NULL;
}

jv *jd_get_str(const jdict *d, const char *s, size_t n)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->keys[i].kind == JV_STR && d->keys[i].n == n && !memcmp(d->keys[i].u.s, s, n)) return &d->vals[i];
    return NULL;
}

void jd_set(jrender *R, jdict *d, jv k, jv v)
{
    jv *have = jd_get(d, k);
    if (have) {
        *have = v;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        jv *keys = jr_alloc(R, cap * sizeof *keys), *vals = jr_alloc(R, cap * sizeof *vals);
        if (d->n) {
            memcpy(keys, d->keys, d->n * sizeof *keys);
            memcpy(vals, d->vals, d->n * sizeof *vals);
        }
        d->keys = keys, d->vals = vals, d->cap = cap;
    }
    d->keys[d->n] = k;
    d->vals[d->n++] = v;
}

/* JSON numbers become Python floats when written with a fraction or an
 * exponent (IV_JSON_FLOAT, set by iv_json_mark_floats where the document was
 * parsed), as json.loads makes them; other integral ones within 2^53 ints. */
jv jv_from_json(jrender *R, const void *cjson)
{
    const cJSON *j = cjson;
    if (!j || cJSON_IsNull(j)) return jv_none();
    if (cJSON_IsBool(j)) return jv_bool(cJSON_IsTrue(j));
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (iv_json_is_float(j)) return jv_float(d);
        if (d == floor(d) && fabs(d) <= 9007199254740992.0) return jv_int((int64_t)d);
        return jv_float(d);
    }
    if (cJSON_IsString(j)) return jv_str(j->valuestring, strlen(j->valuestring));
    if (cJSON_IsArray(j)) {
        jv l = jv_list_new(R, 0);
        for (const cJSON *c = j->child; c; c = c->next) jl_push(R, l.u.l, jv_from_json(R, c));
        return l;
    }
    if (cJSON_IsObject(j)) {
        jv d = jv_dict_new(R);
        for (const cJSON *c = j->child; c; c = c->next)
            jd_set(R, d.u.d, jv_cstr(c->string ? c->string : ""), jv_from_json(R, c));
        return d;
    }
    return jv_none();
}

/* ---- semantics ---- */

int jv_is_number(jv v) { return v.kind == JV_BOOL || v.kind == JV_INT || v.kind == JV_FLOAT; }
double jv_num(jv v) { return v.kind == JV_FLOAT ? v.u.f : (double)v.u.i; }

const char *jv_type_name(jv v)
{
    switch (v.kind) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST: return v.u.l->flags & JL_TUPLE ? "tuple" : v.u.l->flags & JL_GEN ? "generator" : "list";
    case JV_DICT: return "dict";
    case JV_NS: return "Namespace";
    case JV_MACRO: return "Macro";
    case JV_FUNC: return "function";
    case JV_LOOP: return "LoopContext";
    }
    return "object";
}

int jv_truthy(jv v)
{
    switch (v.kind) {
    case JV_UNDEF:
    case JV_NONE: return 0;
    case JV_BOOL:
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0;
    case JV_STR: return v.n != 0;
    case JV_LIST: return (v.u.l->flags & JL_GEN) || v.u.l->n != 0;
    case JV_DICT: return v.u.d->n != 0;
    default: return 1;
    }
}

int jv_equal(jv a, jv b)
{
    if (jv_is_number(a) && jv_is_number(b)) {
        if (a.kind != JV_FLOAT && b.kind != JV_FLOAT) return a.u.i == b.u.i;
        return jv_num(a) == jv_num(b);
    }
    if (a.kind != b.kind) return 0;
    switch (a.kind) {
    case JV_UNDEF:
    case JV_NONE: return 1;
    case JV_STR: return a.n == b.n && !memcmp(a.u.s, b.u.s, a.n);
    case JV_LIST:
        if ((a.u.l->flags & (JL_TUPLE | JL_GEN)) != (b.u.l->flags & (JL_TUPLE | JL_GEN))) return 0;
        if (a.u.l->flags & JL_GEN) return a.u.l == b.u.l;
        if (a.u.l->n != b.u.l->n) return 0;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!jv_equal(a.u.l->items[i], b.u.l->items[i])) return 0;
        return 1;
    case JV_DICT:
        if (a.u.d->n != b.u.d->n) return 0;
        for (size_t i = 0; i < a.u.d->n; i++) {
            jv *o = jd_get(b.u.d, a.u.d->keys[i]);
            if (!o || !jv_equal(a.u.d->vals[i], *o)) return 0;
        }
        return 1;
    case JV_NS: return a.u.d == b.u.d;
    case JV_MACRO: return a.u.m == b.u.m;
    case JV_FUNC: return a.u.fn == b.u.fn;
    case JV_LOOP: return a.u.lp == b.u.lp;
    }
    return 0;
}

int jv_compare(jrender *R, const jnode *at, jv a, jv b)
{
    jv_check_defined(R, at, a);
    jv_check_defined(R, at, b);
    if (jv_is_number(a) && jv_is_number(b)) {
        if (a.kind != JV_FLOAT && b.kind != JV_FLOAT) return (a.u.i > b.u.i) - (a.u.i < b.u.i);
        double x = jv_num(a), y = jv_num(b);
        return (x > y) - (x < y);
    }
    if (a.kind == JV_STR && b.kind == JV_STR) {
        /* UTF-8 byte order is code point order. */
        size_t m = a.n < b.n ? a.n : b.n;
        int c = m ? memcmp(a.u.s, b.u.s, m) : 0;
        if (c) return c < 0 ? -1 : 1;
        return (a.n > b.n) - (a.n < b.n);
    }
    if (a.kind == JV_LIST && b.kind == JV_LIST && !((a.u.l->flags | b.u.l->flags) & JL_GEN) &&
        (a.u.l->flags & JL_TUPLE) == (b.u.l->flags & JL_TUPLE)) {
        for (size_t i = 0; i < a.u.l->n && i < b.u.l->n; i++) {
            if (jv_equal(a.u.l->items[i], b.u.l->items[i])) continue;
            return jv_compare(R, at, a.u.l->items[i], b.u.l->items[i]);
        }
        return (a.u.l->n > b.u.l->n) - (a.u.l->n < b.u.l->n);
    }
    jr_fail(R, at, "'<' not supported between instances of '%s' and '%s'", jv_type_name(a), jv_type_name(b));
}

void jv_check_defined(jrender *R, const jnode *at, jv v)
{
    if (v.kind != JV_UNDEF) return;
    if (v.why) jr_fail(R, at, "%s", v.why);
    if (v.u.s) jr_fail(R, at, "'%.*s' is undefined", (int)(v.n > 200 ? 200 : v.n), v.u.s);
    jr_fail(R, at, "%s", "a value is undefined");
}

jlist *jv_iter(jrender *R, const jnode *at, jv v)
{
    switch (v.kind) {
    case JV_UNDEF:
        if (v.why) jv_check_defined(R, at, v);
        return jv_list_new(R, 0).u.l;
    case JV_LIST: return v.u.l;
    case JV_DICT: {
        jlist *l = jv_list_new(R, v.u.d->n).u.l;
        for (size_t i = 0; i < v.u.d->n; i++) l->items[l->n++] = v.u.d->keys[i];
        return l;
    }
    case JV_STR: {
        jlist *l = jv_list_new(R, v.n).u.l;
        for (size_t i = 0; i < v.n;) {
            size_t s = i;
            ju_next(v.u.s, v.n, &i);
            l->items[l->n++] = jv_str(v.u.s + s, i - s);
        }
        return l;
    }
    default: jr_fail(R, at, "'%s' object is not iterable", jv_type_name(v));
    }
}

int64_t jv_len(jrender *R, const jnode *at, jv v)
{
    switch (v.kind) {
    case JV_UNDEF: return 0;
    case JV_STR: return (int64_t)ju_len(v.u.s, v.n);
    case JV_LIST:
        if (!(v.u.l->flags & JL_GEN)) return (int64_t)v.u.l->n;
        break;
    case JV_DICT: return (int64_t)v.u.d->n;
    default: break;
    }
    jr_fail(R, at, "object of type '%s' has no len()", jv_type_name(v));
}

jv jv_to_str(jrender *R, jv v)
{
    if (v.kind == JV_STR) return v;
    iv_strbuf *b = jr_sb(R);
    jp_str(R, b, v);
    return jr_sb_value(R, b);
}

/* Merge sort: stable like Python's, and its scratch memory is arena-owned,
 * so a comparison that raises (longjmp) leaks nothing. */
void jv_sort(jrender *R, const jnode *at, jv *items, size_t n, jv_cmp_fn cmp, void *ctx)
{
    if (n < 2) return;
    jv *tmp = jr_alloc(R, n * sizeof *tmp);
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = cmp(R, at, &items[j], &items[i], ctx) < 0 ? items[j++] : items[i++];
            while (i < mid) tmp[k++] = items[i++];
            while (j < hi) tmp[k++] = items[j++];
        }
        memcpy(items, tmp, n * sizeof *items);
    }
}
