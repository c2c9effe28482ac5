/* Methods templates call on values (message.content.strip(),
 * m.get('x'), d.items(), loop.cycle(...)) and the globals (range,
 * namespace, dict, raise_exception, strftime_now). Methods that would
 * mutate a list or dict come back as jinja2's sandbox gives them: an
 * undefined that raises when called. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>
#include <utf8proc.h>

#include "chat/jinja_internal.h"

typedef jv (*jmethod_fn)(jrender *R, const jnode *at, jv self, jargs *a);

static void no_args(jrender *R, const jnode *at, jargs *a, int max, const char *name)
{
    if (a->npos > max) jr_fail(R, at, "%s() takes at most %d argument(s) (%d given)", name, max, a->npos);
}

static jv str_arg(jrender *R, const jnode *at, jv *v, const char *what)
{
    if (!v || v->kind != JV_STR) jr_fail(R, at, "%s must be str, not %s", what, v ? jv_type_name(*v) : "nothing");
    return *v;
}

/* ---- case mapping ---- */

/* One code point's full mapping (kind 'U' upper, 'L' lower, 'T' title,
 * 'F' casefold): Python's several-code-point mappings from the generated
 * table, the one-to-one rest from utf8proc. */
static void put_mapped(iv_strbuf *b, uint32_t cp, char kind)
{
    uint32_t o[3];
    int n = ju_case_full(cp, kind, o);
    if (!n && kind == 'F') kind = 'L', n = ju_case_full(cp, kind, o);
    for (int i = 0; i < n; i++) ju_put(b, o[i]);
    if (n) return;
    utf8proc_int32_t c = (utf8proc_int32_t)cp;
    ju_put(b, (uint32_t)(kind == 'U' ? utf8proc_toupper(c) : kind == 'T' ? utf8proc_totitle(c) : utf8proc_tolower(c)));
}

/* The code point ending just before byte `end` (a bad byte as itself). */
static uint32_t prev_cp(const char *s, size_t end, size_t *start)
{
    size_t i = end - 1;
    while (i > 0 && end - i < 4 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
    size_t k = i;
    uint32_t c = ju_next(s, end, &k);
    if (k != end) i = end - 1, k = i, c = ju_next(s, end, &k);
    *start = i;
    return c;
}

/* Python's lower_ucs4: a capital sigma is final (ς) after a cased letter
 * and not before one, case-ignorable code points skipped both ways. */
static void put_lower(iv_strbuf *b, const char *s, size_t n, size_t at, size_t next, uint32_t cp)
{
    if (cp != 0x3A3) {
        put_mapped(b, cp, 'L');
        return;
    }
    int fin = 0;
    for (size_t j = at; j > 0;) {
        uint32_t c = prev_cp(s, j, &j);
        if (ju_is_case_ignorable(c)) continue;
        fin = ju_is_cased(c);
        break;
    }
    for (size_t j = next; fin && j < n;) {
        uint32_t c = ju_next(s, n, &j);
        if (ju_is_case_ignorable(c)) continue;
        fin = !ju_is_cased(c);
        break;
    }
    ju_put(b, fin ? 0x3C2 : 0x3C3);
}

/* str.lower, upper, title, capitalize, swapcase and casefold as
 * CPython's do_lower ... do_casefold write them. */
static void map_case(iv_strbuf *b, const char *s, size_t n, int mode /* 0 lower, 1 upper, 2 title, 3 capitalize, 4 swapcase, 5 casefold */)
{
    int prev_cased = 0;
    size_t i = 0;
    while (i < n) {
        size_t at = i;
        uint32_t c = ju_next(s, n, &i);
        switch (mode) {
        case 0: put_lower(b, s, n, at, i, c); break;
        case 1: put_mapped(b, c, 'U'); break;
        case 2:
            if (prev_cased) put_lower(b, s, n, at, i, c);
            else put_mapped(b, c, 'T');
            prev_cased = ju_is_cased(c);
            break;
        case 3:
            if (at == 0) put_mapped(b, c, 'T');
            else put_lower(b, s, n, at, i, c);
            break;
        case 4:
            if (ju_is_upper(c)) put_lower(b, s, n, at, i, c);
            else if (ju_is_lower(c)) put_mapped(b, c, 'U');
            else ju_put(b, c);
            break;
        default: put_mapped(b, c, 'F'); break;
        }
    }
}

static jv m_upper(jrender *R, const jnode *at, jv self, jargs *a)
{
    no_args(R, at, a, 0, "upper");
    iv_strbuf *b = jr_sb(R);
    map_case(b, self.u.s, self.n, 1);
    return jr_sb_value(R, b);
}
static jv m_lower(jrender *R, const jnode *at, jv self, jargs *a)
{
    no_args(R, at, a, 0, "lower");
    iv_strbuf *b = jr_sb(R);
    map_case(b, self.u.s, self.n, 0);
    return jr_sb_value(R, b);
}
static jv m_title(jrender *R, const jnode *at, jv self, jargs *a)
{
    no_args(R, at, a, 0, "title");
    iv_strbuf *b = jr_sb(R);
    map_case(b, self.u.s, self.n, 2);
    return jr_sb_value(R, b);
}
static jv m_capitalize(jrender *R, const jnode *at, jv self, jargs *a)
{
    no_args(R, at, a, 0, "capitalize");
    iv_strbuf *b = jr_sb(R);
    map_case(b, self.u.s, self.n, 3);
    return jr_sb_value(R, b);
}
static jv m_swapcase(jrender *R, const jnode *at, jv self, jargs *a)
{
    no_args(R, at, a, 0, "swapcase");
    iv_strbuf *b = jr_sb(R);
    map_case(b, self.u.s, self.n, 4);
    return jr_sb_value(R, b);
}
static jv m_casefold(jrender *R, const jnode *at, jv self, jargs *a)
{
    no_args(R, at, a, 0, "casefold");
    iv_strbuf *b = jr_sb(R);
    map_case(b, self.u.s, self.n, 5);
    return jr_sb_value(R, b);
}

/* ---- strip / split ---- */

static int in_chars(uint32_t c, jv chars)
{
    if (chars.kind != JV_STR) return ju_isspace(c);
    for (size_t i = 0; i < chars.n;)
        if (ju_next(chars.u.s, chars.n, &i) == c) return 1;
    return 0;
}

/* Python's str.strip family: which = 1 left, 2 right, 3 both. */
jv jm_strip(jrender *R, const jnode *at, jv s, jv chars, int which)
{
    if (chars.kind != JV_STR && chars.kind != JV_NONE && chars.kind != JV_UNDEF)
        jr_fail(R, at, "strip arg must be None or str, not %s", jv_type_name(chars));
    size_t start = 0, end = s.n;
    if (which & 1) {
        while (start < end) {
            size_t i = start;
            if (!in_chars(ju_next(s.u.s, s.n, &i), chars)) break;
            start = i;
        }
    }
    if (which & 2) {
        while (end > start) {
            size_t j = end - 1;
            while (j > start && ((unsigned char)s.u.s[j] & 0xC0) == 0x80) j--;
            size_t i = j;
            if (!in_chars(ju_next(s.u.s, end, &i), chars)) break;
            end = j;
        }
    }
    return jv_str(s.u.s + start, end - start);
}

static jv m_strip_any(jrender *R, const jnode *at, jv self, jargs *a, int which)
{
    no_args(R, at, a, 1, "strip");
    jv *c = ja_arg(a, 0, "chars");
    return jm_strip(R, at, self, c ? *c : jv_none(), which);
}
static jv m_strip(jrender *R, const jnode *at, jv self, jargs *a) { return m_strip_any(R, at, self, a, 3); }
static jv m_lstrip(jrender *R, const jnode *at, jv self, jargs *a) { return m_strip_any(R, at, self, a, 1); }
static jv m_rstrip(jrender *R, const jnode *at, jv self, jargs *a) { return m_strip_any(R, at, self, a, 2); }

static int64_t int_arg(jrender *R, const jnode *at, jv *v, int64_t dflt)
{
    if (!v || v->kind == JV_NONE) return dflt;
    if (v->kind != JV_INT && v->kind != JV_BOOL) jr_fail(R, at, "an integer is required, not %s", jv_type_name(*v));
    return v->u.i;
}

static jv split_any(jrender *R, const jnode *at, jv self, jargs *a, int from_right)
{
    no_args(R, at, a, 2, "split");
    jv *sepv = ja_arg(a, 0, "sep");
    int64_t maxsplit = int_arg(R, at, ja_arg(a, 1, "maxsplit"), -1);
    jv out = jv_list_new(R, 0);
    const char *s = self.u.s;
    size_t n = self.n;
    if (sepv && sepv->kind != JV_NONE) {
        jv sep = str_arg(R, at, sepv, "separator");
        if (!sep.n) jr_fail(R, at, "%s", "empty separator");
        if (!from_right) {
            size_t p = 0;
            while (maxsplit < 0 || (int64_t)out.u.l->n < maxsplit) {
                const char *hit = memmem(s + p, n - p, sep.u.s, sep.n);
                if (!hit) break;
                jl_push(R, out.u.l, jv_str(s + p, (size_t)(hit - (s + p))));
                p = (size_t)(hit - s) + sep.n;
            }
            jl_push(R, out.u.l, jv_str(s + p, n - p));
            return out;
        }
        size_t end = n;
        jv rev = jv_list_new(R, 0);
        while (maxsplit < 0 || (int64_t)rev.u.l->n < maxsplit) {
            size_t k = end;
            int found = 0;
            while (k >= sep.n) {
                if (!memcmp(s + k - sep.n, sep.u.s, sep.n)) { found = 1; break; }
                k--;
            }
            if (!found) break;
            jl_push(R, rev.u.l, jv_str(s + k, end - k));
            end = k - sep.n;
        }
        jl_push(R, out.u.l, jv_str(s, end));
        for (size_t i = rev.u.l->n; i-- > 0;) jl_push(R, out.u.l, rev.u.l->items[i]);
        return out;
    }
    /* No separator: runs of whitespace split, and none at the ends count. */
    if (!from_right) {
        size_t p = 0;
        for (;;) {
            size_t q = p;
            while (q < n) {
                size_t i = q;
                if (!ju_isspace(ju_next(s, n, &i))) break;
                q = i;
            }
            if (q >= n) break;
            if (maxsplit >= 0 && (int64_t)out.u.l->n >= maxsplit) {
                jl_push(R, out.u.l, jv_str(s + q, n - q)); /* the rest keeps its trailing spaces */
                break;
            }
            size_t w = q;
            while (w < n) {
                size_t i = w;
                if (ju_isspace(ju_next(s, n, &i))) break;
                w = i;
            }
            jl_push(R, out.u.l, jv_str(s + q, w - q));
            p = w;
        }
        return out;
    }
    jv rev = jv_list_new(R, 0);
    size_t end = n;
    for (;;) {
        jv t = jm_strip(R, at, jv_str(s, end), jv_none(), 2);
        end = t.n;
        if (!end) break;
        if (maxsplit >= 0 && (int64_t)rev.u.l->n >= maxsplit) {
            jl_push(R, rev.u.l, jv_str(s, end)); /* the rest keeps its leading spaces */
            break;
        }
        size_t k = end;
        while (k > 0) {
            size_t j = k - 1;
            while (j > 0 && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
            size_t i = j;
            if (ju_isspace(ju_next(s, end, &i))) break;
            k = j;
        }
        jl_push(R, rev.u.l, jv_str(s + k, end - k));
        end = k;
    }
    for (size_t i = rev.u.l->n; i-- > 0;) jl_push(R, out.u.l, rev.u.l->items[i]);
    return out;
}
static jv m_split(jrender *R, const jnode *at, jv self, jargs *a) { return split_any(R, at, self, a, 0); }
static jv m_rsplit(jrender *R, const jnode *at, jv self, jargs *a) { return split_any(R, at, self, a, 1); }

static jv m_splitlines(jrender *R, const jnode *at, jv self, jargs *a)
{
    no_args(R, at, a, 1, "splitlines");
    jv *kv = ja_arg(a, 0, "keepends");
    int keep = kv && jv_truthy(*kv);
    jv out = jv_list_new(R, 0);
    const char *s = self.u.s;
    size_t n = self.n, start = 0, i = 0;
    while (i < n) {
        size_t at_i = i;
        uint32_t c = ju_next(s, n, &i);
        int brk = c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == 0x1C || c == 0x1D || c == 0x1E ||
                  c == 0x85 || c == 0x2028 || c == 0x2029;
        if (!brk) continue;
        if (c == '\r' && i < n && s[i] == '\n') i++;
        jl_push(R, out.u.l, jv_str(s + start, (keep ? i : at_i) - start));
        start = i;
    }
    if (start < n) jl_push(R, out.u.l, jv_str(s + start, n - start));
    return out;
}

/* ---- search ---- */

/* Byte range of code points [start, end) of s, Python-clamped. */
static void cp_range(jrender *R, const jnode *at, jv self, jargs *a, int first, size_t *lo, size_t *hi)
{
    int64_t len = (int64_t)ju_len(self.u.s, self.n);
    int64_t st = int_arg(R, at, ja_arg(a, first, "start"), 0), en = int_arg(R, at, ja_arg(a, first + 1, "end"), len);
    if (st < 0) st = st + len < 0 ? 0 : st + len;
    if (en < 0) en = en + len < 0 ? 0 : en + len;
    if (st > len) st = len + 1; /* finds nothing, even "" */
    if (en > len) en = len;
    size_t p = 0, b_lo = self.n + 1, b_hi = self.n;
    for (int64_t k = 0; k <= len; k++) {
        if (k == st) b_lo = p;
        if (k == en) b_hi = p;
        if (p < self.n) ju_next(self.u.s, self.n, &p);
    }
    *lo = b_lo, *hi = b_hi;
}

static int64_t cp_index(jv self, size_t byte) { return (int64_t)ju_len(self.u.s, byte); }

static jv find_any(jrender *R, const jnode *at, jv self, jargs *a, int from_right, int raise)
{
    jv sub = str_arg(R, at, ja_arg(a, 0, "sub"), "substring");
    size_t lo, hi;
    cp_range(R, at, self, a, 1, &lo, &hi);
    if (lo <= self.n && lo <= hi && hi - lo >= sub.n) {
        if (!from_right) {
            const char *hit = sub.n ? memmem(self.u.s + lo, hi - lo, sub.u.s, sub.n) : self.u.s + lo;
            if (hit) return jv_int(cp_index(self, (size_t)(hit - self.u.s)));
        } else {
            for (size_t k = hi - sub.n + 1; k-- > lo;)
                if (!sub.n || !memcmp(self.u.s + k, sub.u.s, sub.n)) return jv_int(cp_index(self, k));
        }
    }
    if (raise) jr_fail(R, at, "%s", "substring not found");
    return jv_int(-1);
}
static jv m_find(jrender *R, const jnode *at, jv self, jargs *a) { return find_any(R, at, self, a, 0, 0); }
static jv m_rfind(jrender *R, const jnode *at, jv self, jargs *a) { return find_any(R, at, self, a, 1, 0); }
static jv m_index(jrender *R, const jnode *at, jv self, jargs *a) { return find_any(R, at, self, a, 0, 1); }
static jv m_rindex(jrender *R, const jnode *at, jv self, jargs *a) { return find_any(R, at, self, a, 1, 1); }

static jv m_count(jrender *R, const jnode *at, jv self, jargs *a)
{
    jv sub = str_arg(R, at, ja_arg(a, 0, "sub"), "substring");
    size_t lo, hi;
    cp_range(R, at, self, a, 1, &lo, &hi);
    if (lo > self.n || lo > hi) return jv_int(0);
    if (!sub.n) return jv_int((int64_t)ju_len(self.u.s + lo, hi - lo) + 1);
    int64_t c = 0;
    for (size_t p = lo; p + sub.n <= hi;) {
        const char *hit = memmem(self.u.s + p, hi - p, sub.u.s, sub.n);
        if (!hit) break;
        c++;
        p = (size_t)(hit - self.u.s) + sub.n;
    }
    return jv_int(c);
}

static int affix_one(jv self, jv x, size_t lo, size_t hi, int end)
{
    if (hi < lo || hi - lo < x.n) return 0;
    return !memcmp(self.u.s + (end ? hi - x.n : lo), x.u.s, x.n);
}

static jv affix(jrender *R, const jnode *at, jv self, jargs *a, int end)
{
    jv *x = ja_arg(a, 0, NULL);
    size_t lo, hi;
    cp_range(R, at, self, a, 1, &lo, &hi);
    if (lo > self.n) return jv_bool(0);
    if (x && x->kind == JV_LIST && (x->u.l->flags & JL_TUPLE)) {
        for (size_t i = 0; i < x->u.l->n; i++)
            if (affix_one(self, str_arg(R, at, &x->u.l->items[i], "tuple item"), lo, hi, end)) return jv_bool(1);
        return jv_bool(0);
    }
    if (!x || x->kind != JV_STR)
        jr_fail(R, at, "%s first arg must be str or a tuple of str, not %s", end ? "endswith" : "startswith",
                x ? jv_type_name(*x) : "nothing");
    return jv_bool(affix_one(self, *x, lo, hi, end));
}
static jv m_startswith(jrender *R, const jnode *at, jv self, jargs *a) { return affix(R, at, self, a, 0); }
static jv m_endswith(jrender *R, const jnode *at, jv self, jargs *a) { return affix(R, at, self, a, 1); }

jv jm_replace(jrender *R, const jnode *at, jv self, jv old, jv new_, int64_t count)
{
    iv_strbuf *b = jr_sb(R);
    int64_t done = 0;
    if (!old.n) {
        /* "" matches before every character and at the end. */
        size_t i = 0;
        while (count < 0 || done < count) {
            iv_sb_append(b, new_.u.s, new_.n);
            done++;
            if (i >= self.n) break;
            size_t s = i;
            ju_next(self.u.s, self.n, &i);
            iv_sb_append(b, self.u.s + s, i - s);
            if (b->len > IV_JINJA_MAX_OUTPUT) jr_fail(R, at, "a string longer than %u bytes", IV_JINJA_MAX_OUTPUT);
        }
        iv_sb_append(b, self.u.s + i, self.n - i);
        return jr_sb_value(R, b);
    }
    size_t p = 0;
    while (count < 0 || done < count) {
        const char *hit = memmem(self.u.s + p, self.n - p, old.u.s, old.n);
        if (!hit) break;
        iv_sb_append(b, self.u.s + p, (size_t)(hit - self.u.s) - p);
        iv_sb_append(b, new_.u.s, new_.n);
        if (b->len > IV_JINJA_MAX_OUTPUT) jr_fail(R, at, "a string longer than %u bytes", IV_JINJA_MAX_OUTPUT);
        p = (size_t)(hit - self.u.s) + old.n;
        done++;
    }
    iv_sb_append(b, self.u.s + p, self.n - p);
    return jr_sb_value(R, b);
}

static jv m_replace(jrender *R, const jnode *at, jv self, jargs *a)
{
    jv old = str_arg(R, at, ja_arg(a, 0, NULL), "replace() argument 1");
    jv new_ = str_arg(R, at, ja_arg(a, 1, NULL), "replace() argument 2");
    return jm_replace(R, at, self, old, new_, int_arg(R, at, ja_arg(a, 2, "count"), -1));
}

static jv m_join(jrender *R, const jnode *at, jv self, jargs *a)
{
    jv *seq = ja_arg(a, 0, NULL);
    if (!seq) jr_fail(R, at, "%s", "join() takes exactly one argument");
    jlist *items = jv_iter(R, at, *seq);
    iv_strbuf *b = jr_sb(R);
    for (size_t i = 0; i < items->n; i++) {
        jv it = items->items[i];
        if (it.kind != JV_STR)
            jr_fail(R, at, "sequence item %zu: expected str instance, %s found", i, jv_type_name(it));
        if (i) iv_sb_append(b, self.u.s, self.n);
        iv_sb_append(b, it.u.s, it.n);
        if (b->len > IV_JINJA_MAX_OUTPUT) jr_fail(R, at, "a string longer than %u bytes", IV_JINJA_MAX_OUTPUT);
    }
    return jr_sb_value(R, b);
}

static jv m_removeprefix(jrender *R, const jnode *at, jv self, jargs *a)
{
    jv x = str_arg(R, at, ja_arg(a, 0, NULL), "removeprefix() argument");
    if (self.n >= x.n && !memcmp(self.u.s, x.u.s, x.n)) return jv_str(self.u.s + x.n, self.n - x.n);
    return self;
}
static jv m_removesuffix(jrender *R, const jnode *at, jv self, jargs *a)
{
    jv x = str_arg(R, at, ja_arg(a, 0, NULL), "removesuffix() argument");
    if (x.n && self.n >= x.n && !memcmp(self.u.s + self.n - x.n, x.u.s, x.n)) return jv_str(self.u.s, self.n - x.n);
    return self;
}

/* str.isX(): every character has the property (and there is one). */
static jv char_class(jv self, int (*pred)(uint32_t))
{
    if (!self.n) return jv_bool(0);
    for (size_t i = 0; i < self.n;)
        if (!pred(ju_next(self.u.s, self.n, &i))) return jv_bool(0);
    return jv_bool(1);
}
static int is_digit_cp(uint32_t c)
{
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_ND || (c >= 0xB2 && c <= 0xB3) || c == 0xB9 || (c >= 0x2070 && c <= 0x2079) ||
           (c >= 0x2080 && c <= 0x2089) || (c >= 0x2460 && c <= 0x2468);
}
static int is_alpha_cp(uint32_t c)
{
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT ||
           k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_LO;
}
static int is_numeric_cp(uint32_t c)
{
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return is_digit_cp(c) || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}
static int is_alnum_cp(uint32_t c) { return is_alpha_cp(c) || is_numeric_cp(c); }
static int is_space_cp(uint32_t c) { return ju_isspace(c); }
static jv m_isdigit(jrender *R, const jnode *at, jv self, jargs *a) { return char_class(self, is_digit_cp); }
static jv m_isalpha(jrender *R, const jnode *at, jv self, jargs *a) { return char_class(self, is_alpha_cp); }
static jv m_isalnum(jrender *R, const jnode *at, jv self, jargs *a) { return char_class(self, is_alnum_cp); }
static jv m_isspace(jrender *R, const jnode *at, jv self, jargs *a) { return char_class(self, is_space_cp); }
static jv m_isnumeric(jrender *R, const jnode *at, jv self, jargs *a) { return char_class(self, is_numeric_cp); }

static int is_title_cp(uint32_t c) { return utf8proc_category((utf8proc_int32_t)c) == UTF8PROC_CATEGORY_LT; }

/* islower/isupper: at least one cased character, and none of the other
 * case or titlecase (CPython's unicode_islower / unicode_isupper). */
static jv case_check(jv self, int want_upper)
{
    int cased = 0;
    for (size_t i = 0; i < self.n;) {
        uint32_t c = ju_next(self.u.s, self.n, &i);
        int up = ju_is_upper(c), lo = ju_is_lower(c);
        if (is_title_cp(c) || (want_upper ? lo : up)) return jv_bool(0);
        if (want_upper ? up : lo) cased = 1;
    }
    return jv_bool(cased);
}

static jv m_istitle(jrender *R, const jnode *at, jv self, jargs *a)
{
    int cased = 0, prev = 0;
    for (size_t i = 0; i < self.n;) {
        uint32_t c = ju_next(self.u.s, self.n, &i);
        if (ju_is_upper(c) || is_title_cp(c)) {
            if (prev) return jv_bool(0);
            prev = cased = 1;
        } else if (ju_is_lower(c)) {
            if (!prev) return jv_bool(0);
            prev = cased = 1;
        } else {
            prev = 0;
        }
    }
    return jv_bool(cased);
}

static jv m_isascii(jrender *R, const jnode *at, jv self, jargs *a)
{
    for (size_t i = 0; i < self.n; i++)
        if ((unsigned char)self.u.s[i] >= 0x80) return jv_bool(0);
    return jv_bool(1);
}

static jv m_isprintable(jrender *R, const jnode *at, jv self, jargs *a)
{
    for (size_t i = 0; i < self.n;)
        if (!jp_printable(ju_next(self.u.s, self.n, &i))) return jv_bool(0);
    return jv_bool(1);
}

/* Identifier characters approximated by category (XID_Start/XID_Continue). */
static jv m_isidentifier(jrender *R, const jnode *at, jv self, jargs *a)
{
    if (!self.n) return jv_bool(0);
    for (size_t i = 0; i < self.n;) {
        int first = i == 0;
        uint32_t c = ju_next(self.u.s, self.n, &i);
        utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
        int start = c == '_' || is_alpha_cp(c) || k == UTF8PROC_CATEGORY_NL;
        int cont = start || k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_MC ||
                   k == UTF8PROC_CATEGORY_PC;
        if (!(first ? start : cont)) return jv_bool(0);
    }
    return jv_bool(1);
}

/* ---- padding and partitions ---- */

static uint32_t fill_arg(jrender *R, const jnode *at, jargs *a)
{
    jv *f = ja_arg(a, 1, "fillchar");
    if (!f) return ' ';
    if (f->kind != JV_STR) jr_fail(R, at, "The fill character must be a unicode character, not %s", jv_type_name(*f));
    if (ju_len(f->u.s, f->n) != 1) jr_fail(R, at, "%s", "The fill character must be exactly one character long");
    size_t i = 0;
    return ju_next(f->u.s, f->n, &i);
}

/* center (mode 0), ljust (1), rjust (2) */
static jv justify(jrender *R, const jnode *at, jv self, jargs *a, int mode)
{
    jv *w = ja_arg(a, 0, "width");
    if (!w) jr_fail(R, at, "%s", "expected at least 1 argument, got 0");
    int64_t width = int_arg(R, at, w, 0);
    uint32_t fill = fill_arg(R, at, a);
    int64_t len = (int64_t)ju_len(self.u.s, self.n);
    if (width <= len) return self;
    if (width > IV_JINJA_MAX_OUTPUT) jr_fail(R, at, "a string longer than %u bytes", IV_JINJA_MAX_OUTPUT);
    int64_t marg = width - len;
    int64_t left = mode == 0 ? marg / 2 + (marg & width & 1) : mode == 1 ? 0 : marg;
    iv_strbuf *b = jr_sb(R);
    for (int64_t i = 0; i < left; i++) ju_put(b, fill);
    iv_sb_append(b, self.u.s, self.n);
    for (int64_t i = left; i < marg; i++) ju_put(b, fill);
    return jr_sb_value(R, b);
}
static jv m_center(jrender *R, const jnode *at, jv self, jargs *a) { return justify(R, at, self, a, 0); }
static jv m_ljust(jrender *R, const jnode *at, jv self, jargs *a) { return justify(R, at, self, a, 1); }
static jv m_rjust(jrender *R, const jnode *at, jv self, jargs *a) { return justify(R, at, self, a, 2); }

static jv m_zfill(jrender *R, const jnode *at, jv self, jargs *a)
{
    jv *w = ja_arg(a, 0, "width");
    if (!w) jr_fail(R, at, "%s", "zfill() takes exactly one argument (0 given)");
    int64_t width = int_arg(R, at, w, 0), len = (int64_t)ju_len(self.u.s, self.n);
    if (width <= len) return self;
    if (width > IV_JINJA_MAX_OUTPUT) jr_fail(R, at, "a string longer than %u bytes", IV_JINJA_MAX_OUTPUT);
    iv_strbuf *b = jr_sb(R);
    size_t k = self.n && (self.u.s[0] == '+' || self.u.s[0] == '-');
    iv_sb_append(b, self.u.s, k);
    for (int64_t i = 0; i < width - len; i++) iv_sb_putc(b, '0');
    iv_sb_append(b, self.u.s + k, self.n - k);
    return jr_sb_value(R, b);
}

static jv partition(jrender *R, const jnode *at, jv self, jargs *a, int from_right)
{
    jv sep = str_arg(R, at, ja_arg(a, 0, NULL), "partition() argument");
    if (!sep.n) jr_fail(R, at, "%s", "empty separator");
    jv t = jv_list_new(R, 3);
    t.u.l->flags = JL_TUPLE;
    const char *hit = NULL;
    if (sep.n <= self.n)
        for (size_t i = 0; i + sep.n <= self.n; i++) {
            size_t k = from_right ? self.n - sep.n - i : i;
            if (!memcmp(self.u.s + k, sep.u.s, sep.n)) {
                hit = self.u.s + k;
                break;
            }
        }
    jv e = jv_str("", 0);
    if (!hit) {
        jv parts[3] = {from_right ? e : self, e, from_right ? self : e};
        for (int i = 0; i < 3; i++) t.u.l->items[t.u.l->n++] = parts[i];
        return t;
    }
    size_t h = (size_t)(hit - self.u.s);
    t.u.l->items[t.u.l->n++] = jv_str(self.u.s, h);
    t.u.l->items[t.u.l->n++] = jv_str(hit, sep.n);
    t.u.l->items[t.u.l->n++] = jv_str(hit + sep.n, self.n - h - sep.n);
    return t;
}
static jv m_partition(jrender *R, const jnode *at, jv self, jargs *a) { return partition(R, at, self, a, 0); }
static jv m_rpartition(jrender *R, const jnode *at, jv self, jargs *a) { return partition(R, at, self, a, 1); }

static jv m_expandtabs(jrender *R, const jnode *at, jv self, jargs *a)
{
    int64_t tab = int_arg(R, at, ja_arg(a, 0, "tabsize"), 8), col = 0;
    iv_strbuf *b = jr_sb(R);
    for (size_t i = 0; i < self.n;) {
        size_t at0 = i;
        uint32_t c = ju_next(self.u.s, self.n, &i);
        if (c == '\t') {
            if (tab > 0) {
                int64_t k = tab - col % tab;
                if (k > IV_JINJA_MAX_OUTPUT || b->len > IV_JINJA_MAX_OUTPUT)
                    jr_fail(R, at, "a string longer than %u bytes", IV_JINJA_MAX_OUTPUT);
                for (int64_t j = 0; j < k; j++) iv_sb_putc(b, ' ');
                col += k;
            }
            continue;
        }
        iv_sb_append(b, self.u.s + at0, i - at0);
        col = c == '\n' || c == '\r' ? 0 : col + 1;
    }
    return jr_sb_value(R, b);
}
static jv m_islower(jrender *R, const jnode *at, jv self, jargs *a) { return case_check(self, 0); }
static jv m_isupper(jrender *R, const jnode *at, jv self, jargs *a) { return case_check(self, 1); }

static jv m_str_unsupported(jrender *R, const jnode *at, jv self, jargs *a)
{
    jr_fail(R, at, "%s", "this str method is not supported by the chat template renderer");
}

/* ---- list and dict ---- */

static jv m_list_index(jrender *R, const jnode *at, jv self, jargs *a)
{
    jv *x = ja_arg(a, 0, NULL);
    if (!x) jr_fail(R, at, "%s", "index expected 1 argument");
    for (size_t i = 0; i < self.u.l->n; i++)
        if (jv_equal(self.u.l->items[i], *x)) return jv_int((int64_t)i);
    jr_fail(R, at, "%s", "x not in list");
}
static jv m_list_count(jrender *R, const jnode *at, jv self, jargs *a)
{
    jv *x = ja_arg(a, 0, NULL);
    if (!x) jr_fail(R, at, "%s", "count expected 1 argument");
    int64_t c = 0;
    for (size_t i = 0; i < self.u.l->n; i++) c += jv_equal(self.u.l->items[i], *x);
    return jv_int(c);
}
static jv m_copy(jrender *R, const jnode *at, jv self, jargs *a)
{
    if (self.kind == JV_LIST) {
        jv l = jv_list_new(R, self.u.l->n);
        memcpy(l.u.l->items, self.u.l->items, self.u.l->n * sizeof(jv));
        l.u.l->n = self.u.l->n;
        return l;
    }
    jv d = jv_dict_new(R);
    for (size_t i = 0; i < self.u.d->n; i++) jd_set(R, d.u.d, self.u.d->keys[i], self.u.d->vals[i]);
    return d;
}

static jv m_items(jrender *R, const jnode *at, jv self, jargs *a)
{
    no_args(R, at, a, 0, "items");
    jv l = jv_list_new(R, self.u.d->n);
    for (size_t i = 0; i < self.u.d->n; i++) {
        jv pair = jv_list_new(R, 2);
        pair.u.l->flags = JL_TUPLE;
        pair.u.l->items[0] = self.u.d->keys[i];
        pair.u.l->items[1] = self.u.d->vals[i];
        pair.u.l->n = 2;
        l.u.l->items[l.u.l->n++] = pair;
    }
    return l;
}
static jv m_keys(jrender *R, const jnode *at, jv self, jargs *a)
{
    no_args(R, at, a, 0, "keys");
    jv l = jv_list_new(R, self.u.d->n);
    memcpy(l.u.l->items, self.u.d->keys, self.u.d->n * sizeof(jv));
    l.u.l->n = self.u.d->n;
    return l;
}
static jv m_values(jrender *R, const jnode *at, jv self, jargs *a)
{
    no_args(R, at, a, 0, "values");
    jv l = jv_list_new(R, self.u.d->n);
    memcpy(l.u.l->items, self.u.d->vals, self.u.d->n * sizeof(jv));
    l.u.l->n = self.u.d->n;
    return l;
}
static jv m_get(jrender *R, const jnode *at, jv self, jargs *a)
{
    no_args(R, at, a, 2, "get");
    jv *k = ja_arg(a, 0, NULL);
    if (!k) jr_fail(R, at, "%s", "get expected at least 1 argument, got 0");
    jv *v = jd_get(self.u.d, *k);
    if (v) return *v;
    jv *d = ja_arg(a, 1, NULL);
    return d ? *d : jv_none();
}

static jv m_cycle(jrender *R, const jnode *at, jv self, jargs *a)
{
    if (!a->npos) jr_fail(R, at, "%s", "no items for cycling given");
    return a->pos[self.u.lp->index0 % (size_t)a->npos];
}

/* loop.changed(*args): true on the first call and whenever the arguments
 * differ from the last call's. */
static jv m_changed(jrender *R, const jnode *at, jv self, jargs *a)
{
    (void)at;
    jv now = jv_list_new(R, (size_t)a->npos);
    now.u.l->flags = JL_TUPLE;
    for (int i = 0; i < a->npos; i++) now.u.l->items[now.u.l->n++] = a->pos[i];
    jloop *lp = self.u.lp;
    if (lp->last_changed.kind != JV_UNDEF && jv_equal(lp->last_changed, now)) return jv_bool(0);
    lp->last_changed = now;
    return jv_bool(1);
}

static jv m_format(jrender *R, const jnode *at, jv self, jargs *a) { return jfmt_format(R, at, self, a, NULL); }

static jv m_format_map(jrender *R, const jnode *at, jv self, jargs *a)
{
    if (a->npos != 1 || a->nkw) jr_fail(R, at, "format_map() takes exactly one argument (%d given)", a->npos + a->nkw);
    jv m = a->pos[0];
    if (m.kind != JV_DICT && m.kind != JV_NS) jr_fail(R, at, "'%s' object is not subscriptable", jv_type_name(m));
    return jfmt_format(R, at, self, a, m.u.d);
}

/* ---- lookup ---- */

typedef struct method {
    const char *name;
    jmethod_fn fn;
} method;

static const method STR_METHODS[] = {
    {"upper", m_upper}, {"lower", m_lower}, {"title", m_title}, {"capitalize", m_capitalize},
    {"strip", m_strip}, {"lstrip", m_lstrip}, {"rstrip", m_rstrip}, {"split", m_split}, {"rsplit", m_rsplit},
    {"splitlines", m_splitlines}, {"startswith", m_startswith}, {"endswith", m_endswith}, {"replace", m_replace},
    {"find", m_find}, {"rfind", m_rfind}, {"index", m_index}, {"rindex", m_rindex}, {"count", m_count},
    {"join", m_join}, {"removeprefix", m_removeprefix}, {"removesuffix", m_removesuffix},
    {"isdigit", m_isdigit}, {"isdecimal", m_isdigit}, {"isalpha", m_isalpha}, {"isalnum", m_isalnum},
    {"isspace", m_isspace}, {"isnumeric", m_isnumeric}, {"islower", m_islower}, {"isupper", m_isupper},
    /* Python has these too: found, but refused when called. */
    {"format", m_format}, {"format_map", m_format_map}, {"center", m_center},
    {"ljust", m_ljust}, {"rjust", m_rjust}, {"zfill", m_zfill},
    {"swapcase", m_swapcase}, {"casefold", m_casefold}, {"partition", m_partition},
    {"rpartition", m_rpartition}, {"expandtabs", m_expandtabs}, {"encode", m_str_unsupported},
    {"istitle", m_istitle}, {"isidentifier", m_isidentifier}, {"isprintable", m_isprintable},
    {"isascii", m_isascii}, {"translate", m_str_unsupported}, {"maketrans", m_str_unsupported},
    {NULL, NULL}};
static const method LIST_METHODS[] = {{"index", m_list_index}, {"count", m_list_count}, {"copy", m_copy}, {NULL, NULL}};
static const method DICT_METHODS[] = {{"items", m_items}, {"keys", m_keys}, {"values", m_values}, {"get", m_get},
                                      {"copy", m_copy}, {NULL, NULL}};
static const char *const LIST_MUTATORS[] = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", NULL};
static const char *const DICT_MUTATORS[] = {"clear", "pop", "popitem", "setdefault", "update", NULL};

static int name_is(const char *name, size_t n, const char *s) { return strlen(s) == n && !memcmp(name, s, n); }

jv jm_method(jrender *R, jv self, const char *name, size_t n)
{
    const method *table = self.kind == JV_STR ? STR_METHODS : self.kind == JV_DICT ? DICT_METHODS : LIST_METHODS;
    const char *const *mutators = self.kind == JV_DICT ? DICT_MUTATORS : self.kind == JV_LIST ? LIST_MUTATORS : NULL;
    if (self.kind == JV_LOOP) {
        static const method LOOP_METHODS[] = {{"cycle", m_cycle}, {"changed", m_changed}, {NULL, NULL}};
        table = LOOP_METHODS;
    }
    if (self.kind == JV_LIST && (self.u.l->flags & JL_GEN)) return jv_undef(name, n);
    for (int i = 0; table[i].name; i++) {
        if (!name_is(name, n, table[i].name)) continue;
        if (self.kind == JV_LIST && (self.u.l->flags & JL_TUPLE) && table[i].fn == m_copy) break;
        jfunc *fn = jr_alloc(R, sizeof *fn);
        fn->name = table[i].name;
        fn->self = self;
        fn->call = table[i].fn;
        return (jv){.kind = JV_FUNC, .u.fn = fn};
    }
    for (int i = 0; mutators && mutators[i]; i++) {
        if (!name_is(name, n, mutators[i])) continue;
        if (self.kind == JV_LIST && (self.u.l->flags & JL_TUPLE)) break;
        jv u = jv_undef(name, n);
        char *why = jr_alloc(R, 128);
        snprintf(why, 128, "access to attribute '%s' of '%s' object is unsafe.", mutators[i], jv_type_name(self));
        u.why = why;
        return u;
    }
    return jv_undef(name, n);
}

/* ---- globals ---- */

static jv g_range(jrender *R, const jnode *at, jv self, jargs *a)
{
    if (a->nkw) jr_fail(R, at, "%s", "range() takes no keyword arguments");
    if (a->npos < 1 || a->npos > 3) jr_fail(R, at, "range expected 1 to 3 arguments, got %d", a->npos);
    int64_t v[3];
    for (int i = 0; i < a->npos; i++) {
        if (a->pos[i].kind != JV_INT && a->pos[i].kind != JV_BOOL)
            jr_fail(R, at, "'%s' object cannot be interpreted as an integer", jv_type_name(a->pos[i]));
        v[i] = a->pos[i].u.i;
    }
    int64_t start = a->npos == 1 ? 0 : v[0], stop = a->npos == 1 ? v[0] : v[1], step = a->npos == 3 ? v[2] : 1;
    if (step == 0) jr_fail(R, at, "%s", "range() arg 3 must not be zero");
    double count = step > 0 ? ((double)stop - (double)start) / (double)step : ((double)start - (double)stop) / (double)-step;
    count = count <= 0 ? 0 : ceil(count);
    /* jinja2's sandbox refuses ranges over MAX_RANGE items. */
    if (count > 100000)
        jr_fail(R, at, "%s", "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    jv l = jv_list_new(R, (size_t)count);
    for (int64_t k = 0; k < (int64_t)count; k++) l.u.l->items[l.u.l->n++] = jv_int(start + k * step);
    return l;
}

static void fill_mapping(jrender *R, const jnode *at, jdict *d, jargs *a, int ns)
{
    if (a->npos > 1) jr_fail(R, at, "expected at most 1 argument, got %d", a->npos);
    if (a->npos == 1) {
        jv src = a->pos[0];
        if (src.kind == JV_DICT || src.kind == JV_NS) {
            for (size_t i = 0; i < src.u.d->n; i++) jd_set(R, d, src.u.d->keys[i], src.u.d->vals[i]);
        } else {
            jlist *items = jv_iter(R, at, src);
            for (size_t i = 0; i < items->n; i++) {
                jlist *pair = jv_iter(R, at, items->items[i]);
                if (pair->n != 2) jr_fail(R, at, "dictionary update sequence element #%zu has length %zu; 2 is required", i, pair->n);
                jd_set(R, d, pair->items[0], pair->items[1]);
            }
        }
    }
    for (int i = 0; i < a->nkw; i++) jd_set(R, d, jv_cstr(a->kw[i]), a->kwv[i]);
    if (ns)
        for (size_t i = 0; i < d->n; i++)
            if (d->keys[i].kind == JV_STR && d->keys[i].n && d->keys[i].u.s[0] == '_')
                jr_fail(R, at, "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '%.*s'",
                        (int)d->keys[i].n, d->keys[i].u.s);
}

static jv g_namespace(jrender *R, const jnode *at, jv self, jargs *a)
{
    jv ns = jv_dict_new(R);
    ns.kind = JV_NS;
    fill_mapping(R, at, ns.u.d, a, 1);
    return ns;
}

static jv g_dict(jrender *R, const jnode *at, jv self, jargs *a)
{
    jv d = jv_dict_new(R);
    fill_mapping(R, at, d.u.d, a, 0);
    return d;
}

static jv g_raise_exception(jrender *R, const jnode *at, jv self, jargs *a)
{
    jv *msg = ja_arg(a, 0, "message");
    jv s = msg ? jv_to_str(R, *msg) : jv_str("", 0);
    jr_fail(R, at, "%.*s", (int)(s.n > 900 ? 900 : s.n), s.u.s);
}

static jv g_strftime_now(jrender *R, const jnode *at, jv self, jargs *a)
{
    jv *fmt = ja_arg(a, 0, "format");
    if (!fmt || fmt->kind != JV_STR) jr_fail(R, at, "%s", "strftime_now() argument must be str");
    char *f = jr_alloc(R, fmt->n + 1);
    memcpy(f, fmt->u.s, fmt->n);
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char out[512];
    size_t n = fmt->n ? strftime(out, sizeof out, f, &tm) : 0;
    return jv_str_copy(R, out, n);
}

/* joiner(sep=", "): a callable giving '' the first time, then sep. Its
 * state lives in a two-item list the function holds as its receiver. */
static jv joiner_call(jrender *R, const jnode *at, jv self, jargs *a)
{
    no_args(R, at, a, 0, "joiner");
    if (!self.u.l->items[1].u.i) {
        self.u.l->items[1] = jv_bool(1);
        return jv_str("", 0);
    }
    return self.u.l->items[0];
}

static jv g_joiner(jrender *R, const jnode *at, jv self, jargs *a)
{
    jv *sep = ja_arg(a, 0, "sep");
    jv st = jv_list_new(R, 2);
    st.u.l->items[0] = sep ? *sep : jv_str(", ", 2);
    st.u.l->items[1] = jv_bool(0);
    st.u.l->n = 2;
    jfunc *fn = jr_alloc(R, sizeof *fn);
    fn->name = "joiner";
    fn->self = st;
    fn->call = joiner_call;
    return (jv){.kind = JV_FUNC, .u.fn = fn};
}

static jfunc GLOBALS[] = {
    {"range", {0}, g_range},
    {"joiner", {0}, g_joiner},
    {"namespace", {0}, g_namespace},
    {"dict", {0}, g_dict},
    {"raise_exception", {0}, g_raise_exception},
    {"strftime_now", {0}, g_strftime_now},
};

jv jg_global(const char *name, size_t n)
{
    for (size_t i = 0; i < sizeof GLOBALS / sizeof *GLOBALS; i++)
        if (name_is(name, n, GLOBALS[i].name)) return (jv){.kind = JV_FUNC, .u.fn = &GLOBALS[i]};
    return jv_undef(name, n);
}

int jg_is_global(const char *name, size_t n) { return jg_global(name, n).kind == JV_FUNC; }
