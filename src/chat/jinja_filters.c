/* Jinja filters, with jinja2's signatures and defaults (jinja2/filters.py)
 * and transformers' own tojson. Filters jinja2 returns as generators (map,
 * select, reject, selectattr, rejectattr, unique, batch, reverse) return a
 * list flagged JL_GEN here, so len() and indexing refuse them as Python
 * does while for loops, join and |list work. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "chat/jinja_internal.h"

#define ARG(i, kw) ja_arg(a, (i), (kw))

static jv strv(jrender *R, jv v) { return jv_to_str(R, v); }

static int bool_arg(jv *v, int dflt) { return v ? jv_truthy(*v) : dflt; }

static jv gen_list(jrender *R)
{
    jv l = jv_list_new(R, 0);
    l.u.l->flags = JL_GEN;
    return l;
}

/* jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0. */
static jv attr_get(jrender *R, const jnode *at, jv item, jv attr, jv *dflt)
{
    if (attr.kind != JV_STR) {
        item = je_getitem(R, at, item, attr);
    } else {
        const char *s = attr.u.s;
        size_t n = attr.n, p = 0;
        while (p <= n) {
            const char *dot = memchr(s + p, '.', n - p);
            size_t e = dot ? (size_t)(dot - s) : n;
            jv key = jv_str(s + p, e - p);
            int digits = e > p;
            for (size_t k = p; k < e; k++) digits &= s[k] >= '0' && s[k] <= '9';
            if (digits && e - p < 18) key = jv_int(strtoll(s + p, NULL, 10));
            item = je_getitem(R, at, item, key);
            p = e + 1;
            if (!dot) break;
        }
    }
    if (dflt && item.kind == JV_UNDEF) item = *dflt;
    return item;
}

/* case_sensitive=False: strings compare lowercased. */
static jv fold(jrender *R, jv v, int case_sensitive)
{
    if (case_sensitive || v.kind != JV_STR) return v;
    jargs none = {0};
    jv m = jm_method(R, v, "lower", 5);
    return je_call(R, NULL, m, &none);
}

typedef struct sort_ctx {
    int case_sensitive;
    jv attr;
    int has_attr;
    int by_value; /* dictsort */
} sort_ctx;

static jv sort_key(jrender *R, const jnode *at, jv v, sort_ctx *c)
{
    if (c->has_attr) v = attr_get(R, at, v, c->attr, NULL);
    return fold(R, v, c->case_sensitive);
}

static int cmp_sort(jrender *R, const jnode *at, const jv *x, const jv *y, void *ctx)
{
    sort_ctx *c = ctx;
    return jv_compare(R, at, sort_key(R, at, *x, c), sort_key(R, at, *y, c));
}

static int cmp_dictsort(jrender *R, const jnode *at, const jv *x, const jv *y, void *ctx)
{
    sort_ctx *c = ctx;
    int k = c->by_value;
    return jv_compare(R, at, fold(R, x->u.l->items[k], c->case_sensitive), fold(R, y->u.l->items[k], c->case_sensitive));
}

static jlist *copy_list(jrender *R, jlist *src)
{
    jlist *l = jv_list_new(R, src->n).u.l;
    if (src->n) memcpy(l->items, src->items, src->n * sizeof *l->items);
    l->n = src->n;
    return l;
}

/* ---- string filters ---- */

static jv f_trim(jrender *R, const jnode *at, jv v, jargs *a)
{
    jv *chars = ARG(0, "chars");
    return jm_strip(R, at, strv(R, v), chars ? *chars : jv_none(), 3);
}

static jv call_method(jrender *R, const jnode *at, jv s, const char *name, jargs *a)
{
    jv m = jm_method(R, s, name, strlen(name));
    jargs none = {0};
    return je_call(R, at, m, a ? a : &none);
}

static jv f_upper(jrender *R, const jnode *at, jv v, jargs *a) { return call_method(R, at, strv(R, v), "upper", NULL); }
static jv f_lower(jrender *R, const jnode *at, jv v, jargs *a) { return call_method(R, at, strv(R, v), "lower", NULL); }
static jv f_capitalize(jrender *R, const jnode *at, jv v, jargs *a)
{
    return call_method(R, at, strv(R, v), "capitalize", NULL);
}

/* jinja2's title: words start after spaces and -({[< (not Python's str.title). */
static jv f_title(jrender *R, const jnode *at, jv v, jargs *a)
{
    jv s = strv(R, v);
    iv_strbuf *b = jr_sb(R);
    size_t i = 0;
    while (i < s.n) {
        size_t start = i;
        int sep = 0;
        size_t j = i;
        uint32_t c = ju_next(s.u.s, s.n, &j);
        sep = ju_isspace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
        while (i < s.n) {
            size_t k = i;
            uint32_t d = ju_next(s.u.s, s.n, &k);
            int dsep = ju_isspace(d) || d == '-' || d == '(' || d == '{' || d == '[' || d == '<';
            if (dsep != sep) break;
            i = k;
        }
        jv piece = jv_str(s.u.s + start, i - start);
        if (sep) {
            iv_sb_append(b, piece.u.s, piece.n);
        } else {
            size_t k = 0;
            ju_next(piece.u.s, piece.n, &k);
            jv head = call_method(R, at, jv_str(piece.u.s, k), "upper", NULL);
            jv tail = call_method(R, at, jv_str(piece.u.s + k, piece.n - k), "lower", NULL);
            iv_sb_append(b, head.u.s, head.n);
            iv_sb_append(b, tail.u.s, tail.n);
        }
    }
    return jr_sb_value(R, b);
}

static jv f_replace(jrender *R, const jnode *at, jv v, jargs *a)
{
    jv *old = ARG(0, "old"), *new_ = ARG(1, "new"), *count = ARG(2, "count");
    if (!old || !new_) jr_fail(R, at, "%s", "replace() needs old and new");
    int64_t c = -1;
    if (count && count->kind != JV_NONE) {
        if (count->kind != JV_INT && count->kind != JV_BOOL) jr_fail(R, at, "%s", "replace() count must be an int");
        c = count->u.i;
    }
    return jm_replace(R, at, strv(R, v), strv(R, *old), strv(R, *new_), c);
}

static jv f_string(jrender *R, const jnode *at, jv v, jargs *a) { return strv(R, v); }
static jv f_safe(jrender *R, const jnode *at, jv v, jargs *a) { return strv(R, v); }

static jv f_escape(jrender *R, const jnode *at, jv v, jargs *a)
{
    jv s = strv(R, v);
    iv_strbuf *b = jr_sb(R);
    for (size_t i = 0; i < s.n; i++) {
        char c = s.u.s[i];
        if (c == '&') iv_sb_puts(b, "&amp;");
        else if (c == '<') iv_sb_puts(b, "&lt;");
        else if (c == '>') iv_sb_puts(b, "&gt;");
        else if (c == '"') iv_sb_puts(b, "&#34;");
        else if (c == '\'') iv_sb_puts(b, "&#39;");
        else iv_sb_putc(b, c);
    }
    return jr_sb_value(R, b);
}

static jv f_indent(jrender *R, const jnode *at, jv v, jargs *a)
{
    jv *w = ARG(0, "width");
    int first = bool_arg(ARG(1, "first"), 0), blank = bool_arg(ARG(2, "blank"), 0);
    jv ind;
    if (w && w->kind == JV_STR) ind = *w;
    else {
        int64_t n = w ? (w->kind == JV_INT || w->kind == JV_BOOL ? w->u.i : -1) : 4;
        if (w && w->kind != JV_INT && w->kind != JV_BOOL) jr_fail(R, at, "%s", "indent width must be an int or str");
        if (n < 0) n = 0;
        if (n > 4096) jr_fail(R, at, "%s", "indent width too large");
        char *sp = jr_alloc(R, (size_t)n + 1);
        memset(sp, ' ', (size_t)n);
        ind = jv_str(sp, (size_t)n);
    }
    jv s = strv(R, v);
    char *t = jr_alloc(R, s.n + 2);
    memcpy(t, s.u.s, s.n);
    t[s.n] = '\n'; /* jinja2 appends one so the last line's end is seen */
    jargs none = {0};
    jv lines = call_method(R, at, jv_str(t, s.n + 1), "splitlines", &none);
    jlist *l = lines.u.l;
    iv_strbuf *b = jr_sb(R);
    if (first) iv_sb_append(b, ind.u.s, ind.n);
    for (size_t i = 0; i < l->n; i++) {
        jv line = l->items[i];
        if (i) {
            iv_sb_putc(b, '\n');
            if (blank || line.n) iv_sb_append(b, ind.u.s, ind.n);
        }
        iv_sb_append(b, line.u.s, line.n);
        if (b->len > IV_JINJA_MAX_OUTPUT) jr_fail(R, at, "a string longer than %u bytes", IV_JINJA_MAX_OUTPUT);
    }
    return jr_sb_value(R, b);
}

static jv f_center(jrender *R, const jnode *at, jv v, jargs *a)
{
    jv *w = ARG(0, "width");
    int64_t width = w && (w->kind == JV_INT || w->kind == JV_BOOL) ? w->u.i : 80;
    jv s = strv(R, v);
    int64_t len = (int64_t)ju_len(s.u.s, s.n);
    if (width <= len) return s;
    if (width > 1 << 20) jr_fail(R, at, "%s", "center width too large");
    int64_t marg = width - len, left = marg / 2 + (marg & width & 1);
    iv_strbuf *b = jr_sb(R);
    for (int64_t i = 0; i < left; i++) iv_sb_putc(b, ' ');
    iv_sb_append(b, s.u.s, s.n);
    for (int64_t i = 0; i < marg - left; i++) iv_sb_putc(b, ' ');
    return jr_sb_value(R, b);
}

static jv f_wordcount(jrender *R, const jnode *at, jv v, jargs *a)
{
    jv s = strv(R, v);
    int64_t words = 0;
    int in_word = 0;
    for (size_t i = 0; i < s.n;) {
        uint32_t c = ju_next(s.u.s, s.n, &i);
        /* Python's \w: letters, numbers and the underscore. */
        utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
        int w = c == '_' || (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) ||
                (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO);
        if (w && !in_word) words++;
        in_word = w;
    }
    return jv_int(words);
}

/* ---- sequences ---- */

static jv f_length(jrender *R, const jnode *at, jv v, jargs *a) { return jv_int(jv_len(R, at, v)); }

static jv f_first(jrender *R, const jnode *at, jv v, jargs *a)
{
    jlist *l = jv_iter(R, at, v);
    return l->n ? l->items[0] : jv_undef("first", 5);
}

static jv f_last(jrender *R, const jnode *at, jv v, jargs *a)
{
    if (v.kind == JV_LIST && (v.u.l->flags & JL_GEN)) jr_fail(R, at, "%s", "'generator' object is not reversible");
    jlist *l = jv_iter(R, at, v);
    return l->n ? l->items[l->n - 1] : jv_undef("last", 4);
}

static jv f_list(jrender *R, const jnode *at, jv v, jargs *a)
{
    jv out = {.kind = JV_LIST, .u.l = copy_list(R, jv_iter(R, at, v))};
    return out;
}

static jv f_reverse(jrender *R, const jnode *at, jv v, jargs *a)
{
    if (v.kind == JV_STR) {
        jlist *chars = jv_iter(R, at, v);
        iv_strbuf *b = jr_sb(R);
        for (size_t i = chars->n; i-- > 0;) iv_sb_append(b, chars->items[i].u.s, chars->items[i].n);
        return jr_sb_value(R, b);
    }
    jlist *l = jv_iter(R, at, v);
    jv out = gen_list(R);
    for (size_t i = l->n; i-- > 0;) jl_push(R, out.u.l, l->items[i]);
    return out;
}

static jv f_join(jrender *R, const jnode *at, jv v, jargs *a)
{
    jv *d = ARG(0, "d"), *attr = ARG(1, "attribute");
    jv sep = d ? strv(R, *d) : jv_str("", 0);
    jlist *l = jv_iter(R, at, v);
    iv_strbuf *b = jr_sb(R);
    for (size_t i = 0; i < l->n; i++) {
        if (i) iv_sb_append(b, sep.u.s, sep.n);
        jv it = attr ? attr_get(R, at, l->items[i], *attr, NULL) : l->items[i];
        jp_str(R, b, it);
        if (b->len > IV_JINJA_MAX_OUTPUT) jr_fail(R, at, "a string longer than %u bytes", IV_JINJA_MAX_OUTPUT);
    }
    return jr_sb_value(R, b);
}

static jv f_items(jrender *R, const jnode *at, jv v, jargs *a)
{
    if (v.kind == JV_UNDEF) return gen_list(R);
    if (v.kind != JV_DICT) jr_fail(R, at, "%s", "Can only get item pairs from a mapping.");
    jargs none = {0};
    jv l = call_method(R, at, v, "items", &none);
    l.u.l->flags = JL_GEN;
    return l;
}

static jv f_default(jrender *R, const jnode *at, jv v, jargs *a)
{
    jv *d = ARG(0, "default_value");
    int boolean = bool_arg(ARG(1, "boolean"), 0);
    if (v.kind == JV_UNDEF || (boolean && !jv_truthy(v))) return d ? *d : jv_str("", 0);
    return v;
}

static jv f_sort(jrender *R, const jnode *at, jv v, jargs *a)
{
    sort_ctx c = {.case_sensitive = bool_arg(ARG(1, "case_sensitive"), 0)};
    int rev = bool_arg(ARG(0, "reverse"), 0);
    jv *attr = ARG(2, "attribute");
    if (attr && attr->kind != JV_NONE) c.attr = *attr, c.has_attr = 1;
    jlist *l = copy_list(R, jv_iter(R, at, v));
    if (rev) {
        /* sorted(reverse=True) keeps equal items in their order: reverse, sort stably, reverse. */
        for (size_t i = 0; i < l->n / 2; i++) {
            jv t = l->items[i];
            l->items[i] = l->items[l->n - 1 - i];
            l->items[l->n - 1 - i] = t;
        }
    }
    jv_sort(R, at, l->items, l->n, cmp_sort, &c);
    if (rev)
        for (size_t i = 0; i < l->n / 2; i++) {
            jv t = l->items[i];
            l->items[i] = l->items[l->n - 1 - i];
            l->items[l->n - 1 - i] = t;
        }
    return (jv){.kind = JV_LIST, .u.l = l};
}

static jv f_dictsort(jrender *R, const jnode *at, jv v, jargs *a)
{
    sort_ctx c = {.case_sensitive = bool_arg(ARG(0, "case_sensitive"), 0)};
    jv *by = ARG(1, "by");
    int rev = bool_arg(ARG(2, "reverse"), 0);
    if (by) {
        jv b = strv(R, *by);
        if (b.n == 5 && !memcmp(b.u.s, "value", 5)) c.by_value = 1;
        else if (!(b.n == 3 && !memcmp(b.u.s, "key", 3)))
            jr_fail(R, at, "%s", "You can only sort by either \"key\" or \"value\"");
    }
    if (v.kind != JV_DICT) jr_fail(R, at, "%s", "dictsort needs a mapping");
    jargs none = {0};
    jlist *l = call_method(R, at, v, "items", &none).u.l;
    jv_sort(R, at, l->items, l->n, cmp_dictsort, &c);
    if (rev)
        for (size_t i = 0; i < l->n / 2; i++) {
            jv t = l->items[i];
            l->items[i] = l->items[l->n - 1 - i];
            l->items[l->n - 1 - i] = t;
        }
    return (jv){.kind = JV_LIST, .u.l = l};
}

static jv f_unique(jrender *R, const jnode *at, jv v, jargs *a)
{
    sort_ctx c = {.case_sensitive = bool_arg(ARG(0, "case_sensitive"), 0)};
    jv *attr = ARG(1, "attribute");
    if (attr && attr->kind != JV_NONE) c.attr = *attr, c.has_attr = 1;
    jlist *l = jv_iter(R, at, v);
    jv out = gen_list(R), seen = jv_list_new(R, 0);
    for (size_t i = 0; i < l->n; i++) {
        jv k = sort_key(R, at, l->items[i], &c);
        if ((k.kind == JV_LIST && !(k.u.l->flags & JL_TUPLE)) || k.kind == JV_DICT)
            jr_fail(R, at, "unhashable type: '%s'", jv_type_name(k));
        int dup = 0;
        for (size_t j = 0; j < seen.u.l->n && !dup; j++) dup = jv_equal(seen.u.l->items[j], k);
        if (dup) continue;
        jl_push(R, seen.u.l, k);
        jl_push(R, out.u.l, l->items[i]);
    }
    return out;
}

static jv min_max(jrender *R, const jnode *at, jv v, jargs *a, int want_max)
{
    sort_ctx c = {.case_sensitive = bool_arg(ARG(0, "case_sensitive"), 0)};
    jv *attr = ARG(1, "attribute");
    if (attr && attr->kind != JV_NONE) c.attr = *attr, c.has_attr = 1;
    jlist *l = jv_iter(R, at, v);
    if (!l->n) return jv_undef(want_max ? "max" : "min", 3);
    jv best = l->items[0];
    for (size_t i = 1; i < l->n; i++) {
        int cmp = cmp_sort(R, at, &l->items[i], &best, &c);
        if (want_max ? cmp > 0 : cmp < 0) best = l->items[i];
    }
    return best;
}
static jv f_min(jrender *R, const jnode *at, jv v, jargs *a) { return min_max(R, at, v, a, 0); }
static jv f_max(jrender *R, const jnode *at, jv v, jargs *a) { return min_max(R, at, v, a, 1); }

static jv f_sum(jrender *R, const jnode *at, jv v, jargs *a)
{
    jv *attr = ARG(0, "attribute"), *start = ARG(1, "start");
    jv acc = start ? *start : jv_int(0);
    jlist *l = jv_iter(R, at, v);
    jnode plus = {.kind = N_BIN, .line = at->line, .op = '+'};
    for (size_t i = 0; i < l->n; i++) {
        jv it = attr && attr->kind != JV_NONE ? attr_get(R, at, l->items[i], *attr, NULL) : l->items[i];
        if (acc.kind == JV_STR) jr_fail(R, at, "%s", "sum() can't sum strings [use ''.join(seq) instead]");
        /* Reuse the + operator's rules through a synthetic node. */
        jnode ca = {.kind = N_CONST, .line = at->line, .value = acc}, cb = {.kind = N_CONST, .line = at->line, .value = it};
        plus.a = &ca, plus.b = &cb;
        acc = je_eval(R, NULL, &plus);
    }
    return acc;
}

static jv f_batch(jrender *R, const jnode *at, jv v, jargs *a)
{
    jv *cnt = ARG(0, "linecount"), *fill = ARG(1, "fill_with");
    if (!cnt || (cnt->kind != JV_INT && cnt->kind != JV_BOOL) || cnt->u.i <= 0)
        jr_fail(R, at, "%s", "batch() needs a positive linecount");
    jlist *l = jv_iter(R, at, v);
    jv out = gen_list(R), tmp = jv_list_new(R, 0);
    for (size_t i = 0; i < l->n; i++) {
        if ((int64_t)tmp.u.l->n == cnt->u.i) {
            jl_push(R, out.u.l, tmp);
            tmp = jv_list_new(R, 0);
        }
        jl_push(R, tmp.u.l, l->items[i]);
    }
    if (tmp.u.l->n) {
        if (fill && fill->kind != JV_NONE)
            while ((int64_t)tmp.u.l->n < cnt->u.i) jl_push(R, tmp.u.l, *fill);
        jl_push(R, out.u.l, tmp);
    }
    return out;
}

/* select/reject (by test) and selectattr/rejectattr (on an attribute). */
static jv select_any(jrender *R, const jnode *at, jv v, jargs *a, int on_attr, int keep)
{
    int first_test = on_attr ? 1 : 0;
    jv attr = jv_none();
    if (on_attr) {
        if (a->npos < 1) jr_fail(R, at, "%s", "selectattr needs an attribute");
        attr = a->pos[0];
    }
    const char *test = NULL;
    char buf[64];
    if (a->npos > first_test) {
        jv t = strv(R, a->pos[first_test]);
        if (t.n >= sizeof buf) jr_fail(R, at, "%s", "unknown test");
        memcpy(buf, t.u.s, t.n);
        buf[t.n] = 0;
        test = buf;
    }
    /* (no pointer arithmetic on pos when there are no arguments: it is NULL) */
    int ntest = a->npos > first_test + 1 ? a->npos - first_test - 1 : 0;
    jargs targs = {.pos = ntest ? a->pos + first_test + 1 : NULL, .npos = ntest, .kw = a->kw, .kwv = a->kwv,
                   .nkw = a->nkw};
    jlist *l = jv_iter(R, at, v);
    jv out = gen_list(R);
    for (size_t i = 0; i < l->n; i++) {
        jv x = on_attr ? attr_get(R, at, l->items[i], attr, NULL) : l->items[i];
        int ok = test ? jt_apply(R, at, test, x, &targs) : jv_truthy(x);
        if (ok == keep) jl_push(R, out.u.l, l->items[i]);
    }
    return out;
}
static jv f_select(jrender *R, const jnode *at, jv v, jargs *a) { return select_any(R, at, v, a, 0, 1); }
static jv f_reject(jrender *R, const jnode *at, jv v, jargs *a) { return select_any(R, at, v, a, 0, 0); }
static jv f_selectattr(jrender *R, const jnode *at, jv v, jargs *a) { return select_any(R, at, v, a, 1, 1); }
static jv f_rejectattr(jrender *R, const jnode *at, jv v, jargs *a) { return select_any(R, at, v, a, 1, 0); }

static jv f_map(jrender *R, const jnode *at, jv v, jargs *a)
{
    jlist *l = jv_iter(R, at, v);
    jv out = gen_list(R);
    jv *attr = ja_arg(a, -1, "attribute");
    if (attr) {
        jv *dflt = ja_arg(a, -1, "default");
        for (size_t i = 0; i < l->n; i++) jl_push(R, out.u.l, attr_get(R, at, l->items[i], *attr, dflt));
        return out;
    }
    if (a->npos < 1) jr_fail(R, at, "%s", "map requires a filter argument");
    jv name = strv(R, a->pos[0]);
    char buf[64];
    if (name.n >= sizeof buf) jr_fail(R, at, "%s", "unknown filter");
    memcpy(buf, name.u.s, name.n);
    buf[name.n] = 0;
    jargs rest = {.pos = a->pos + 1, .npos = a->npos - 1, .kw = a->kw, .kwv = a->kwv, .nkw = a->nkw};
    for (size_t i = 0; i < l->n; i++) jl_push(R, out.u.l, jf_apply(R, at, buf, l->items[i], &rest));
    return out;
}

/* ---- numbers ---- */

static jv f_abs(jrender *R, const jnode *at, jv v, jargs *a)
{
    if (v.kind == JV_FLOAT) return jv_float(fabs(v.u.f));
    if (v.kind == JV_INT || v.kind == JV_BOOL) {
        if (v.u.i == INT64_MIN) jr_fail(R, at, "%s", "integer overflow in abs");
        return jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
    }
    jr_fail(R, at, "bad operand type for abs(): '%s'", jv_type_name(v));
}

static int parse_int_text(jv s, int64_t base, int64_t *out)
{
    char buf[80];
    jv t = s;
    size_t start = 0, end = t.n;
    while (start < end && ju_isspace((unsigned char)t.u.s[start])) start++;
    while (end > start && ju_isspace((unsigned char)t.u.s[end - 1])) end--;
    size_t k = 0;
    for (size_t i = start; i < end && k < sizeof buf - 1; i++)
        if (t.u.s[i] != '_') buf[k++] = t.u.s[i];
    if (!k || end - start >= sizeof buf) return 0;
    buf[k] = 0;
    char *e;
    if (base < 2 || base > 36) return 0;
    long long v = strtoll(buf, &e, (int)base);
    if (*e) return 0;
    *out = v;
    return 1;
}

static jv f_int(jrender *R, const jnode *at, jv v, jargs *a)
{
    jv *d = ARG(0, "default"), *b = ARG(1, "base");
    jv dflt = d ? *d : jv_int(0);
    int64_t base = b && (b->kind == JV_INT) ? b->u.i : 10;
    if (v.kind == JV_INT || v.kind == JV_BOOL) return jv_int(v.u.i);
    if (v.kind == JV_FLOAT) {
        if (!isfinite(v.u.f) || fabs(v.u.f) >= 9.2e18) return dflt;
        return jv_int((int64_t)v.u.f);
    }
    if (v.kind == JV_STR) {
        int64_t r;
        if (parse_int_text(v, base, &r)) return jv_int(r);
        /* jinja2 then tries int(float(value)). */
        char buf[80];
        if (v.n < sizeof buf) {
            memcpy(buf, v.u.s, v.n);
            buf[v.n] = 0;
            char *e;
            double f = strtod(buf, &e);
            while (*e && ju_isspace((unsigned char)*e)) e++;
            if (e != buf && !*e && isfinite(f) && fabs(f) < 9.2e18) return jv_int((int64_t)f);
        }
    }
    return dflt;
}

static jv f_float(jrender *R, const jnode *at, jv v, jargs *a)
{
    jv *d = ARG(0, "default");
    jv dflt = d ? *d : jv_float(0.0);
    if (jv_is_number(v)) return jv_float(jv_num(v));
    if (v.kind == JV_STR) {
        char buf[128];
        if (v.n >= sizeof buf) return dflt;
        size_t k = 0;
        for (size_t i = 0; i < v.n; i++)
            if (v.u.s[i] != '_') buf[k++] = v.u.s[i];
        buf[k] = 0;
        char *s = buf;
        while (*s && ju_isspace((unsigned char)*s)) s++;
        char *e;
        double f = strtod(s, &e);
        while (*e && ju_isspace((unsigned char)*e)) e++;
        if (e != s && !*e) return jv_float(f);
    }
    return dflt;
}

static jv f_round(jrender *R, const jnode *at, jv v, jargs *a)
{
    jv *p = ARG(0, "precision"), *m = ARG(1, "method");
    int64_t prec = p && (p->kind == JV_INT || p->kind == JV_BOOL) ? p->u.i : 0;
    jv method = m ? strv(R, *m) : jv_cstr("common");
    if (!jv_is_number(v)) jr_fail(R, at, "type %s doesn't define __round__ method", jv_type_name(v));
    double x = jv_num(v);
    if (!(method.n == 6 && !memcmp(method.u.s, "common", 6))) {
        double scale = pow(10.0, (double)prec);
        int ceil_ = method.n == 4 && !memcmp(method.u.s, "ceil", 4);
        int floor_ = method.n == 5 && !memcmp(method.u.s, "floor", 5);
        if (!ceil_ && !floor_) jr_fail(R, at, "%s", "method must be common, ceil or floor");
        return jv_float((ceil_ ? ceil(x * scale) : floor(x * scale)) / scale);
    }
    if (!isfinite(x)) return jv_float(x);
    if (prec == 0) return jv_float(nearbyint(x));
    if (prec < 0 || prec > 300) return jv_float(prec > 0 ? x : nearbyint(x / pow(10.0, (double)-prec)) * pow(10.0, (double)-prec));
    /* Python rounds the exact binary value half-even, as printf does. */
    char buf[400];
    snprintf(buf, sizeof buf, "%.*f", (int)prec, x);
    return jv_float(strtod(buf, NULL));
}

/* ---- tojson ---- */

static jv f_tojson(jrender *R, const jnode *at, jv v, jargs *a)
{
    jv *ea = ARG(0, "ensure_ascii"), *ind = ARG(1, "indent"), *seps = ARG(2, "separators"), *sk = ARG(3, "sort_keys");
    const char *indent = NULL;
    size_t indent_n = 0;
    if (ind && ind->kind != JV_NONE) {
        if (ind->kind == JV_STR) indent = ind->u.s, indent_n = ind->n;
        else if (ind->kind == JV_INT || ind->kind == JV_BOOL) {
            int64_t n = ind->u.i < 0 ? 0 : ind->u.i;
            if (n > 1024) jr_fail(R, at, "%s", "tojson indent too large");
            char *sp = jr_alloc(R, (size_t)n + 1);
            memset(sp, ' ', (size_t)n);
            indent = sp, indent_n = (size_t)n;
        } else jr_fail(R, at, "%s", "tojson indent must be an int or str");
    }
    const char *item_sep = NULL, *key_sep = NULL;
    if (seps && seps->kind != JV_NONE) {
        jlist *l = jv_iter(R, at, *seps);
        if (l->n != 2 || l->items[0].kind != JV_STR || l->items[1].kind != JV_STR)
            jr_fail(R, at, "%s", "tojson separators must be two strings");
        item_sep = jv_str_copy(R, l->items[0].u.s, l->items[0].n).u.s;
        key_sep = jv_str_copy(R, l->items[1].u.s, l->items[1].n).u.s;
    }
    iv_strbuf *b = jr_sb(R);
    jp_json(R, at, b, v, indent, indent_n, item_sep, key_sep, (sk && jv_truthy(*sk) ? JP_SORT_KEYS : 0) | (ea && jv_truthy(*ea) ? JP_ASCII : 0), 0);
    return jr_sb_value(R, b);
}

/* ---- table ---- */

/* jinja2's do_truncate (leeway 5, its default policy). */
static jv f_truncate(jrender *R, const jnode *at, jv v, jargs *a)
{
    jv s = strv(R, v);
    jv *lv = ARG(0, "length"), *endv = ARG(2, "end"), *lw = ARG(3, "leeway");
    int64_t length = lv && lv->kind != JV_NONE ? (lv->kind == JV_INT || lv->kind == JV_BOOL ? lv->u.i : -1) : 255;
    if (lv && lv->kind != JV_NONE && lv->kind != JV_INT && lv->kind != JV_BOOL)
        jr_fail(R, at, "%s", "truncate length must be an integer");
    int killwords = bool_arg(ARG(1, "killwords"), 0);
    jv end = endv ? strv(R, *endv) : jv_str("...", 3);
    int64_t leeway = 5;
    if (lw && lw->kind != JV_NONE) {
        if (lw->kind != JV_INT && lw->kind != JV_BOOL) jr_fail(R, at, "%s", "truncate leeway must be an integer");
        leeway = lw->u.i;
    }
    int64_t end_len = (int64_t)ju_len(end.u.s, end.n), len = (int64_t)ju_len(s.u.s, s.n);
    if (length < end_len) jr_fail(R, at, "expected length >= %lld, got %lld", (long long)end_len, (long long)length);
    if (leeway < 0) jr_fail(R, at, "expected leeway >= 0, got %lld", (long long)leeway);
    if (len <= length + leeway) return s;
    size_t cut = 0;
    for (int64_t k = 0; k < length - end_len; k++) ju_next(s.u.s, s.n, &cut);
    if (!killwords) {
        /* s[:length - len(end)].rsplit(" ", 1)[0] */
        const char *sp = NULL;
        for (size_t k = cut; k > 0; k--)
            if (s.u.s[k - 1] == ' ') {
                sp = s.u.s + k - 1;
                break;
            }
        if (sp) cut = (size_t)(sp - s.u.s);
    }
    iv_strbuf *b = jr_sb(R);
    iv_sb_append(b, s.u.s, cut);
    iv_sb_append(b, end.u.s, end.n);
    return jr_sb_value(R, b);
}

/* jinja2's sync_do_slice: n columns, the first len % n one item longer. */
static jv f_slice(jrender *R, const jnode *at, jv v, jargs *a)
{
    jv *nv = ARG(0, "slices"), *fill = ARG(1, "fill_with");
    if (!nv || (nv->kind != JV_INT && nv->kind != JV_BOOL)) jr_fail(R, at, "%s", "slice needs an integer count");
    int64_t slices = nv->u.i;
    jlist *l = jv_iter(R, at, v);
    int64_t len = (int64_t)l->n;
    if (slices <= 0) {
        if (slices == 0 && len) jr_fail(R, at, "%s", "integer division or modulo by zero");
        if (slices == 0) jr_fail(R, at, "%s", "integer division or modulo by zero");
        return gen_list(R);
    }
    if (slices > 100000) jr_fail(R, at, "%s", "too many slices");
    int64_t per = len / slices, extra = len % slices, offset = 0;
    jv out = gen_list(R);
    for (int64_t k = 0; k < slices; k++) {
        int64_t start = offset + k * per;
        if (k < extra) offset++;
        int64_t end = offset + (k + 1) * per;
        jv col = jv_list_new(R, 0);
        for (int64_t i = start; i < end && i < len; i++) jl_push(R, col.u.l, l->items[i]);
        if (fill && fill->kind != JV_NONE && k >= extra) jl_push(R, col.u.l, *fill);
        jl_push(R, out.u.l, col);
        je_step(R, at);
    }
    return out;
}

/* jinja2's do_filesizeformat. */
static jv f_filesizeformat(jrender *R, const jnode *at, jv v, jargs *a)
{
    double bytes;
    if (jv_is_number(v)) bytes = jv_num(v);
    else {
        jargs none = {0};
        bytes = jv_num(jf_apply(R, at, "float", v, &none));
        if (v.kind == JV_STR) {
            char *end, buf[64];
            snprintf(buf, sizeof buf, "%.*s", (int)(v.n < 63 ? v.n : 63), v.u.s);
            strtod(buf, &end);
            if (end == buf) jr_fail(R, at, "could not convert string to float: '%.*s'", (int)v.n, v.u.s);
        }
    }
    int binary = bool_arg(ARG(0, "binary"), 0);
    double base = binary ? 1024 : 1000;
    static const char *const dec[] = {"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
    static const char *const bin[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
    iv_strbuf *b = jr_sb(R);
    if (bytes == 1) iv_sb_puts(b, "1 Byte");
    else if (bytes < base) {
        if (!isfinite(bytes)) jr_fail(R, at, "%s", "cannot convert float to integer");
        if (fabs(bytes) >= 9.2e18) iv_sb_printf(b, "%.0f Bytes", trunc(bytes));
        else iv_sb_printf(b, "%lld Bytes", (long long)bytes);
    } else {
        double unit = base;
        int i;
        for (i = 0; i < 8; i++) {
            unit *= base;
            if (bytes < unit) break;
        }
        if (i == 8) i = 7;
        iv_sb_printf(b, "%.1f %s", base * bytes / unit, binary ? bin[i] : dec[i]);
    }
    return jr_sb_value(R, b);
}

static int cmp_group(jrender *R, const jnode *at, const jv *a, const jv *b, void *ctx)
{
    (void)ctx;
    return jv_compare(R, at, a->u.l->items[0], b->u.l->items[0]);
}

/* jinja2's sync_do_groupby: sorted by the attribute (lowercased strings
 * unless case_sensitive), then runs of equal keys; each group's grouper
 * is the first item's own value. */
static jv f_groupby(jrender *R, const jnode *at, jv v, jargs *a)
{
    jv *attr = ARG(0, "attribute"), *dflt = ARG(1, "default");
    if (!attr) jr_fail(R, at, "%s", "groupby() missing required argument: 'attribute'");
    int cs = bool_arg(ARG(2, "case_sensitive"), 0);
    jlist *l = jv_iter(R, at, v);
    jv pairs = jv_list_new(R, l->n);
    for (size_t i = 0; i < l->n; i++) {
        jv p = jv_list_new(R, 2);
        p.u.l->items[0] = fold(R, attr_get(R, at, l->items[i], *attr, dflt), cs);
        p.u.l->items[1] = l->items[i];
        p.u.l->n = 2;
        pairs.u.l->items[pairs.u.l->n++] = p;
    }
    jv_sort(R, at, pairs.u.l->items, pairs.u.l->n, cmp_group, NULL);
    jv out = jv_list_new(R, 0);
    for (size_t i = 0; i < pairs.u.l->n;) {
        jv key = pairs.u.l->items[i].u.l->items[0];
        jv members = jv_list_new(R, 0);
        size_t j = i;
        for (; j < pairs.u.l->n && jv_equal(pairs.u.l->items[j].u.l->items[0], key); j++)
            jl_push(R, members.u.l, pairs.u.l->items[j].u.l->items[1]);
        jv g = jv_list_new(R, 2);
        g.u.l->flags = JL_TUPLE | JL_GROUP;
        g.u.l->items[0] = cs ? key : attr_get(R, at, members.u.l->items[0], *attr, dflt);
        g.u.l->items[1] = members;
        g.u.l->n = 2;
        jl_push(R, out.u.l, g);
        i = j;
    }
    return out;
}

/* jinja2's do_format: str(value) % (kwargs or args). */
static jv f_format(jrender *R, const jnode *at, jv v, jargs *a)
{
    if (a->npos && a->nkw) jr_fail(R, at, "%s", "can't handle positional and keyword arguments at the same time");
    jv args;
    if (a->nkw) {
        args = jv_dict_new(R);
        for (int i = 0; i < a->nkw; i++) jd_set(R, args.u.d, jv_cstr(a->kw[i]), a->kwv[i]);
    } else {
        args = jv_list_new(R, (size_t)a->npos);
        args.u.l->flags = JL_TUPLE;
        for (int i = 0; i < a->npos; i++) args.u.l->items[args.u.l->n++] = a->pos[i];
    }
    return jfmt_percent(R, at, jv_to_str(R, v), args);
}

/* jinja2's do_attr: the sandbox's getattr, never an item lookup. */
static jv f_attr(jrender *R, const jnode *at, jv v, jargs *a)
{
    jv *name = ARG(0, "name");
    if (!name || name->kind != JV_STR) jr_fail(R, at, "%s", "attribute name must be a string");
    if (v.kind == JV_DICT) {
        jv m = jm_method(R, v, name->u.s, name->n);
        return m;
    }
    return je_getattr(R, at, v, name->u.s, name->n);
}

static const jfilter_def FILTERS[] = {
    {"abs", f_abs}, {"attr", f_attr}, {"batch", f_batch}, {"capitalize", f_capitalize}, {"center", f_center},
    {"count", f_length}, {"d", f_default}, {"default", f_default}, {"dictsort", f_dictsort},
    {"e", f_escape}, {"escape", f_escape}, {"filesizeformat", f_filesizeformat}, {"first", f_first}, {"float", f_float}, {"format", f_format},
    {"groupby", f_groupby}, {"indent", f_indent},
    {"int", f_int}, {"items", f_items}, {"join", f_join}, {"last", f_last}, {"length", f_length},
    {"list", f_list}, {"lower", f_lower}, {"map", f_map}, {"max", f_max}, {"min", f_min},
    {"reject", f_reject}, {"rejectattr", f_rejectattr}, {"replace", f_replace}, {"reverse", f_reverse},
    {"round", f_round}, {"safe", f_safe}, {"select", f_select}, {"selectattr", f_selectattr}, {"slice", f_slice},
    {"sort", f_sort}, {"string", f_string}, {"sum", f_sum}, {"title", f_title}, {"tojson", f_tojson},
    {"trim", f_trim}, {"truncate", f_truncate}, {"unique", f_unique}, {"upper", f_upper}, {"wordcount", f_wordcount},
    {NULL, NULL}};

const jfilter_def *jf_find(const char *name, size_t n)
{
    for (int i = 0; FILTERS[i].name; i++)
        if (strlen(FILTERS[i].name) == n && !memcmp(FILTERS[i].name, name, n)) return &FILTERS[i];
    return NULL;
}

jv jf_apply(jrender *R, const jnode *at, const char *name, jv v, jargs *a)
{
    const jfilter_def *f = jf_find(name, strlen(name));
    if (!f) jr_fail(R, at, "filter \"%s\" is not supported", name);
    return f->fn(R, at, v, a);
}
