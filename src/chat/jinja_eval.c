/* The Jinja evaluator: statements write output, expressions compute
 * values with Python's semantics (int/float arithmetic, floor division and
 * modulo, str and list operators, chained comparisons, `in`), names resolve
 * through scopes as jinja2 compiles them (a for loop's body is a scope of
 * its own each iteration, so `set` inside it never leaks; namespace()
 * objects are how templates carry state out), attribute and item lookup
 * fall back to each other as in the sandboxed environment, and macros and
 * call blocks render into strings. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_internal.h"

enum { FLOW_NORMAL, FLOW_BREAK, FLOW_CONTINUE };

_Noreturn void jr_fail(jrender *R, const jnode *at, const char *fmt, ...)
{
    if (at) iv_errf(R->err, IV_E_INVALID, "chat template line %d: ", at->line);
    else iv_errf(R->err, IV_E_INVALID, "chat template: ");
    size_t k = strlen(R->err->msg);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(R->err->msg + k, sizeof R->err->msg - k, fmt, ap);
    va_end(ap);
    longjmp(R->jb, 1);
}

iv_strbuf *jr_sb(jrender *R)
{
    if (R->nbufs == R->capbufs) {
        size_t cap = R->capbufs ? R->capbufs * 2 : 16;
        iv_strbuf **v = jr_alloc(R, cap * sizeof *v);
        if (R->nbufs) memcpy(v, R->bufs, R->nbufs * sizeof *v);
        R->bufs = v, R->capbufs = cap;
    }
    iv_strbuf *b = jr_alloc(R, sizeof *b);
    iv_sb_init(b);
    R->bufs[R->nbufs++] = b;
    return b;
}

jv jr_sb_value(jrender *R, iv_strbuf *b)
{
    if (b->oom) jr_fail(R, NULL, "%s", "out of memory");
    jv v = jv_str_copy(R, b->data ? b->data : "", b->len);
    iv_sb_free(b);
    return v;
}

void je_step(jrender *R, const jnode *at)
{
    if (++R->steps > IV_JINJA_MAX_STEPS)
        jr_fail(R, at, "the template ran more than %ld steps", (long)IV_JINJA_MAX_STEPS);
}

static void emit(jrender *R, const jnode *at, const char *s, size_t n)
{
    iv_sb_append(R->out, s, n);
    if (R->out->oom) jr_fail(R, at, "%s", "out of memory");
    if (R->out->len > IV_JINJA_MAX_OUTPUT) jr_fail(R, at, "the output exceeds %u bytes", IV_JINJA_MAX_OUTPUT);
}

jv *ja_arg(jargs *a, int pos, const char *kw)
{
    if (pos >= 0 && pos < a->npos) return &a->pos[pos];
    for (int i = 0; kw && i < a->nkw; i++)
        if (!strcmp(a->kw[i], kw)) return &a->kwv[i];
    return NULL;
}

/* ---- scopes ---- */

static jframe *frame_new(jrender *R, jframe *parent)
{
    jframe *f = jr_alloc(R, sizeof *f);
    f->parent = parent;
    return f;
}

static jv lookup(jrender *R, jframe *f, const char *name, size_t n)
{
    for (; f; f = f->parent) {
        jv *v = jd_get_str(&f->vars, name, n);
        if (v) return *v;
    }
    jv g = jg_global(name, n);
    if (g.kind != JV_UNDEF) return g;
    (void)R;
    return jv_undef(name, n);
}

static void set_var(jrender *R, jframe *f, const char *name, size_t n, jv v) { jd_set(R, &f->vars, jv_str(name, n), v); }

static void assign(jrender *R, jframe *f, const jnode *target, jv v)
{
    if (target->kind == N_NAME) {
        set_var(R, f, target->name, target->name_n, v);
        return;
    }
    if (target->kind == N_TUPLE) {
        jlist *items = jv_iter(R, target, v);
        if (items->n != (size_t)target->nkids)
            jr_fail(R, target, "%s values to unpack (expected %d, got %zu)",
                    items->n < (size_t)target->nkids ? "not enough" : "too many", target->nkids, items->n);
        for (int i = 0; i < target->nkids; i++) assign(R, f, target->kids[i], items->items[i]);
        return;
    }
    /* {% set ns.attr = v %} */
    jv ns = lookup(R, f, target->a->name, target->a->name_n);
    if (ns.kind != JV_NS) jr_fail(R, target, "%s", "can not assign attribute on non-namespace object");
    if (target->name[0] == '_')
        jr_fail(R, target, "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '%s'",
                target->name);
    jd_set(R, ns.u.d, jv_str(target->name, target->name_n), v);
}

/* ---- attribute and item lookup ---- */

static jv loop_attr(jrender *R, jloop *lp, const char *name, size_t n)
{
    size_t len = lp->items->n, i = lp->index0;
#define IS(s) (n == sizeof(s) - 1 && !memcmp(name, s, n))
    if (IS("index")) return jv_int((int64_t)i + 1);
    if (IS("index0")) return jv_int((int64_t)i);
    if (IS("revindex")) return jv_int((int64_t)(len - i));
    if (IS("revindex0")) return jv_int((int64_t)(len - i - 1));
    if (IS("first")) return jv_bool(i == 0);
    if (IS("last")) return jv_bool(i + 1 == len);
    if (IS("length")) return jv_int((int64_t)len);
    if (IS("depth")) return jv_int(lp->depth);
    if (IS("depth0")) return jv_int(lp->depth - 1);
    if (IS("previtem")) return i ? lp->items->items[i - 1] : jv_undef("previtem", 8);
    if (IS("nextitem")) return i + 1 < len ? lp->items->items[i + 1] : jv_undef("nextitem", 8);
#undef IS
    (void)R;
    return jv_undef(name, n);
}

static jv unsafe_undef(jrender *R, jv obj, const char *name, size_t n)
{
    jv u = jv_undef(name, n);
    char *why = jr_alloc(R, n + 96);
    snprintf(why, n + 96, "access to attribute '%.*s' of '%s' object is unsafe.", (int)n, name, jv_type_name(obj));
    u.why = why;
    return u;
}

jv je_getattr(jrender *R, const jnode *at, jv obj, const char *name, size_t n)
{
    jv_check_defined(R, at, obj);
    if (n && name[0] == '_') {
        if (obj.kind == JV_DICT) {
            jv *v = jd_get_str(obj.u.d, name, n);
            if (v) return *v;
        }
        return unsafe_undef(R, obj, name, n);
    }
    switch (obj.kind) {
    case JV_DICT: {
        jv m = jm_method(R, obj, name, n);
        if (m.kind != JV_UNDEF || m.why) return m;
        jv *v = jd_get_str(obj.u.d, name, n);
        return v ? *v : jv_undef(name, n);
    }
    case JV_NS: {
        jv *v = jd_get_str(obj.u.d, name, n);
        return v ? *v : jv_undef(name, n);
    }
    case JV_STR: return jm_method(R, obj, name, n);
    case JV_LIST:
        if ((obj.u.l->flags & JL_GROUP) && obj.u.l->n == 2) {
            if (n == 7 && !memcmp(name, "grouper", 7)) return obj.u.l->items[0];
            if (n == 4 && !memcmp(name, "list", 4)) return obj.u.l->items[1];
        }
        return jm_method(R, obj, name, n);
    case JV_LOOP:
        if ((n == 5 && !memcmp(name, "cycle", 5)) || (n == 7 && !memcmp(name, "changed", 7)))
            return jm_method(R, obj, name, n);
        return loop_attr(R, obj.u.lp, name, n);
    default: return jv_undef(name, n);
    }
}

/* Python's index normalisation: negative from the end, NULL when outside. */
static int norm_index(jv key, int64_t len, int64_t *out)
{
    if (key.kind != JV_INT && key.kind != JV_BOOL) return 0;
    int64_t i = key.u.i;
    if (i < 0) i += len;
    if (i < 0 || i >= len) return 0;
    *out = i;
    return 1;
}

jv je_getitem(jrender *R, const jnode *at, jv obj, jv key)
{
    jv_check_defined(R, at, obj);
    int64_t i;
    switch (obj.kind) {
    case JV_DICT: {
        jv *v = jd_get(obj.u.d, key);
        if (v) return *v;
        break;
    }
    case JV_LIST:
        if (obj.u.l->flags & JL_GEN) break;
        if (norm_index(key, (int64_t)obj.u.l->n, &i)) return obj.u.l->items[i];
        break;
    case JV_STR:
        if (norm_index(key, (int64_t)ju_len(obj.u.s, obj.n), &i)) {
            size_t p = 0;
            for (int64_t k = 0; k < i; k++) ju_next(obj.u.s, obj.n, &p);
            size_t start = p;
            ju_next(obj.u.s, obj.n, &p);
            return jv_str(obj.u.s + start, p - start);
        }
        break;
    default: break;
    }
    if (key.kind == JV_STR) {
        if (obj.kind == JV_DICT) {
            jv m = jm_method(R, obj, key.u.s, key.n);
            if (m.kind != JV_UNDEF || m.why) return m;
            return jv_undef(key.u.s, key.n);
        }
        return je_getattr(R, at, obj, key.u.s, key.n);
    }
    return jv_undef(NULL, 0);
}

/* Python's slice.indices(): start, stop and step clamped for a length. */
static void slice_indices(jrender *R, const jnode *at, jv s, jv e, jv st, int64_t len, int64_t *start, int64_t *stop,
                          int64_t *step)
{
    const jv *parts[3] = {&s, &e, &st};
    for (int k = 0; k < 3; k++)
        if (parts[k]->kind != JV_NONE && parts[k]->kind != JV_INT && parts[k]->kind != JV_BOOL)
            jr_fail(R, at, "%s", "slice indices must be integers or None");
    *step = st.kind == JV_NONE ? 1 : st.u.i;
    if (*step == 0) jr_fail(R, at, "%s", "slice step cannot be zero");
    if (*step < -INT64_MAX) *step = -INT64_MAX;
    int64_t lower = *step < 0 ? -1 : 0, upper = *step < 0 ? len - 1 : len;
    if (s.kind == JV_NONE) *start = *step < 0 ? upper : lower;
    else {
        *start = s.u.i;
        if (*start < 0) {
            *start = *start < -len ? lower : *start + len;
            if (*start < lower) *start = lower;
        } else if (*start > upper) *start = upper;
    }
    if (e.kind == JV_NONE) *stop = *step < 0 ? lower : upper;
    else {
        *stop = e.u.i;
        if (*stop < 0) {
            *stop = *stop < -len ? lower : *stop + len;
            if (*stop < lower) *stop = lower;
        } else if (*stop > upper) *stop = upper;
    }
}

static jv eval_slice(jrender *R, jframe *f, const jnode *n)
{
    jv obj = je_eval(R, f, n->a);
    jv s = n->b ? je_eval(R, f, n->b) : jv_none(), e = n->c ? je_eval(R, f, n->c) : jv_none(),
       st = n->d ? je_eval(R, f, n->d) : jv_none();
    jv_check_defined(R, n, obj);
    if (obj.kind != JV_STR && !(obj.kind == JV_LIST && !(obj.u.l->flags & JL_GEN))) return jv_undef(NULL, 0);
    int64_t len, start, stop, step;
    size_t *offs = NULL; /* str: byte offset of each code point, and the end */
    if (obj.kind == JV_STR) {
        len = (int64_t)ju_len(obj.u.s, obj.n);
        offs = jr_alloc(R, ((size_t)len + 1) * sizeof *offs);
        size_t p = 0;
        for (int64_t k = 0; k < len; k++) {
            offs[k] = p;
            ju_next(obj.u.s, obj.n, &p);
        }
        offs[len] = obj.n;
    } else {
        len = (int64_t)obj.u.l->n;
    }
    slice_indices(R, n, s, e, st, len, &start, &stop, &step);
    if (obj.kind == JV_STR) {
        if (step == 1) return start < stop ? jv_str(obj.u.s + offs[start], offs[stop] - offs[start]) : jv_str("", 0);
        iv_strbuf *b = jr_sb(R);
        for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
            iv_sb_append(b, obj.u.s + offs[k], offs[k + 1] - offs[k]);
            if (step > 0 ? k > INT64_MAX - step : k < INT64_MIN - step) break;
        }
        return jr_sb_value(R, b);
    }
    jv out = jv_list_new(R, 0);
    out.u.l->flags = obj.u.l->flags & JL_TUPLE;
    for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
        jl_push(R, out.u.l, obj.u.l->items[k]);
        if (step > 0 ? k > INT64_MAX - step : k < INT64_MIN - step) break;
    }
    return out;
}

/* ---- operators ---- */

static int contains(jrender *R, const jnode *at, jv item, jv seq)
{
    switch (seq.kind) {
    case JV_UNDEF:
        jv_check_defined(R, at, seq.why ? seq : jv_none());
        return 0;
    case JV_STR:
        if (item.kind != JV_STR)
            jr_fail(R, at, "'in <string>' requires string as left operand, not %s", jv_type_name(item));
        if (!item.n) return 1;
        return memmem(seq.u.s, seq.n, item.u.s, item.n) != NULL;
    case JV_LIST:
        for (size_t i = 0; i < seq.u.l->n; i++)
            if (jv_equal(seq.u.l->items[i], item)) return 1;
        return 0;
    case JV_DICT: return jd_get(seq.u.d, item) != NULL;
    default: jr_fail(R, at, "argument of type '%s' is not iterable", jv_type_name(seq));
    }
}

static jv repeat(jrender *R, const jnode *at, jv seq, int64_t times)
{
    if (times < 0) times = 0;
    if (seq.kind == JV_STR) {
        if (seq.n && (uint64_t)times > IV_JINJA_MAX_OUTPUT / seq.n)
            jr_fail(R, at, "a string longer than %u bytes", IV_JINJA_MAX_OUTPUT);
        iv_strbuf *b = jr_sb(R);
        for (int64_t i = 0; i < times; i++) iv_sb_append(b, seq.u.s, seq.n);
        return jr_sb_value(R, b);
    }
    if (seq.u.l->n && (uint64_t)times > (uint64_t)IV_JINJA_MAX_STEPS / seq.u.l->n)
        jr_fail(R, at, "%s", "a list too long");
    jv out = jv_list_new(R, seq.u.l->n * (size_t)times);
    out.u.l->flags = seq.u.l->flags & JL_TUPLE;
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < seq.u.l->n; k++) out.u.l->items[out.u.l->n++] = seq.u.l->items[k];
    return out;
}

static int is_seq(jv v) { return v.kind == JV_LIST && !(v.u.l->flags & JL_GEN); }

/* Python's float // and % (Objects/floatobject.c float_divmod). */
static void float_divmod(double vx, double wx, double *fdiv, double *fmod_out)
{
    double mod = fmod(vx, wx), div = (vx - mod) / wx;
    if (mod) {
        if ((wx < 0) != (mod < 0)) {
            mod += wx;
            div -= 1.0;
        }
    } else {
        mod = copysign(0.0, wx);
    }
    double floordiv;
    if (div) {
        floordiv = floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
    } else {
        floordiv = copysign(0.0, vx / wx);
    }
    *fdiv = floordiv, *fmod_out = mod;
}

static const char *op_text(int op)
{
    switch (op) {
    case 'F': return "//";
    case 'P': return "**";
    case '+': return "+";
    case '-': return "-";
    case '*': return "*";
    case '/': return "/";
    default: return "%";
    }
}

static jv binop(jrender *R, const jnode *at, int op, jv a, jv b)
{
    jv_check_defined(R, at, a);
    /* str % Undefined: str.__mod__ formats it (as '') before Python would
     * try Undefined.__rmod__, which raises. */
    if (op == '%' && a.kind == JV_STR && b.kind == JV_UNDEF && !b.why) return jfmt_percent(R, at, a, b);
    jv_check_defined(R, at, b);
    int ints = (a.kind == JV_INT || a.kind == JV_BOOL) && (b.kind == JV_INT || b.kind == JV_BOOL);
    int nums = jv_is_number(a) && jv_is_number(b);
    int64_t r;
    switch (op) {
    case '+':
        if (ints) {
            if (__builtin_add_overflow(a.u.i, b.u.i, &r)) break;
            return jv_int(r);
        }
        if (nums) return jv_float(jv_num(a) + jv_num(b));
        if (a.kind == JV_STR && b.kind == JV_STR) {
            if (a.n + b.n > IV_JINJA_MAX_OUTPUT) jr_fail(R, at, "a string longer than %u bytes", IV_JINJA_MAX_OUTPUT);
            char *s = jr_alloc(R, a.n + b.n + 1);
            memcpy(s, a.u.s, a.n);
            memcpy(s + a.n, b.u.s, b.n);
            return jv_str(s, a.n + b.n);
        }
        if (is_seq(a) && is_seq(b) && (a.u.l->flags & JL_TUPLE) == (b.u.l->flags & JL_TUPLE)) {
            jv out = jv_list_new(R, a.u.l->n + b.u.l->n);
            out.u.l->flags = a.u.l->flags & JL_TUPLE;
            for (size_t i = 0; i < a.u.l->n; i++) out.u.l->items[out.u.l->n++] = a.u.l->items[i];
            for (size_t i = 0; i < b.u.l->n; i++) out.u.l->items[out.u.l->n++] = b.u.l->items[i];
            return out;
        }
        break;
    case '-':
        if (ints) {
            if (__builtin_sub_overflow(a.u.i, b.u.i, &r)) break;
            return jv_int(r);
        }
        if (nums) return jv_float(jv_num(a) - jv_num(b));
        break;
    case '*':
        if (ints) {
            if (__builtin_mul_overflow(a.u.i, b.u.i, &r)) break;
            return jv_int(r);
        }
        if (nums) return jv_float(jv_num(a) * jv_num(b));
        if ((a.kind == JV_STR || is_seq(a)) && (b.kind == JV_INT || b.kind == JV_BOOL)) return repeat(R, at, a, b.u.i);
        if ((b.kind == JV_STR || is_seq(b)) && (a.kind == JV_INT || a.kind == JV_BOOL)) return repeat(R, at, b, a.u.i);
        break;
    case '/':
        if (nums) {
            if (jv_num(b) == 0) jr_fail(R, at, "%s", "division by zero");
            if (ints) return jv_float((double)a.u.i / (double)b.u.i);
            return jv_float(jv_num(a) / jv_num(b));
        }
        break;
    case 'F':
    case '%':
        if (ints) {
            if (b.u.i == 0) jr_fail(R, at, "%s", "integer division or modulo by zero");
            if (a.u.i == INT64_MIN && b.u.i == -1) break;
            int64_t q = a.u.i / b.u.i, m = a.u.i % b.u.i;
            if (m && ((m < 0) != (b.u.i < 0))) {
                q -= 1;
                m += b.u.i;
            }
            return jv_int(op == 'F' ? q : m);
        }
        if (nums) {
            if (jv_num(b) == 0) jr_fail(R, at, "%s", "float divmod()");
            double q, m;
            float_divmod(jv_num(a), jv_num(b), &q, &m);
            return jv_float(op == 'F' ? q : m);
        }
        if (op == '%' && a.kind == JV_STR) return jfmt_percent(R, at, a, b);
        break;
    case 'P':
        if (ints && b.u.i >= 0) {
            int64_t base = a.u.i, e = b.u.i, acc = 1;
            int ovf = 0;
            while (e > 0 && !ovf) {
                if (e & 1) ovf |= __builtin_mul_overflow(acc, base, &acc);
                e >>= 1;
                if (e) ovf |= __builtin_mul_overflow(base, base, &base);
            }
            if (ovf) break;
            return jv_int(acc);
        }
        if (nums) {
            if (jv_num(a) == 0 && jv_num(b) < 0) jr_fail(R, at, "%s", "0.0 cannot be raised to a negative power");
            return jv_float(pow(jv_num(a), jv_num(b)));
        }
        break;
    }
    if (ints) jr_fail(R, at, "integer overflow in '%s' (Python integers are unbounded; 64 bits here)", op_text(op));
    jr_fail(R, at, "unsupported operand type(s) for %s: '%s' and '%s'", op_text(op), jv_type_name(a), jv_type_name(b));
}

static int compare_op(jrender *R, const jnode *at, int op, jv a, jv b)
{
    switch (op) {
    case 'E': return jv_equal(a, b);
    case 'N': return !jv_equal(a, b);
    case 'I': return contains(R, at, a, b);
    case 'X': return !contains(R, at, a, b);
    }
    int c = jv_compare(R, at, a, b);
    switch (op) {
    case '<': return c < 0;
    case 'L': return c <= 0;
    case '>': return c > 0;
    default: return c >= 0;
    }
}

/* ---- calls ---- */

static int exec_body(jrender *R, jframe *f, const jnode *body);

static jv call_macro(jrender *R, const jnode *at, jmacro *m, jargs *a)
{
    const jnode *def = m->def;
    if (a->npos > def->nkids)
        jr_fail(R, at, "macro '%.*s' takes not more than %d argument(s)", (int)def->name_n, def->name, def->nkids);
    if (R->depth >= IV_JINJA_MAX_DEPTH) jr_fail(R, at, "macro calls nested deeper than %d", IV_JINJA_MAX_DEPTH);
    je_step(R, at);
    jframe *f = frame_new(R, m->closure);
    for (int k = 0; k < a->nkw; k++) {
        int found = 0;
        for (int p = 0; p < def->nkids; p++)
            if (!strcmp(def->kids[p]->name, a->kw[k])) found = 1 + (p < a->npos);
        if (!found) jr_fail(R, at, "macro '%.*s' takes no keyword argument '%s'", (int)def->name_n, def->name, a->kw[k]);
        if (found == 2) jr_fail(R, at, "macro '%.*s' got multiple values for argument '%s'", (int)def->name_n, def->name, a->kw[k]);
    }
    for (int p = 0; p < def->nkids; p++) {
        const jnode *param = def->kids[p];
        jv *v = ja_arg(a, p, param->name);
        if (v) set_var(R, f, param->name, param->name_n, *v);
        else if (param->a) set_var(R, f, param->name, param->name_n, je_eval(R, f, param->a));
        else set_var(R, f, param->name, param->name_n, jv_undef(param->name, param->name_n));
    }
    if (m->caller.kind != JV_UNDEF) set_var(R, f, "caller", 6, m->caller);
    iv_strbuf *saved = R->out;
    R->out = jr_sb(R);
    R->depth++;
    exec_body(R, f, def->kind == S_MACRO ? def->a : def->a);
    R->depth--;
    iv_strbuf *b = R->out;
    R->out = saved;
    return jr_sb_value(R, b);
}

jv je_call(jrender *R, const jnode *at, jv callee, jargs *a)
{
    switch (callee.kind) {
    case JV_MACRO: return call_macro(R, at, callee.u.m, a);
    case JV_FUNC: return callee.u.fn->call(R, at, callee.u.fn->self, a);
    case JV_UNDEF: jv_check_defined(R, at, callee); break;
    default: break;
    }
    jr_fail(R, at, "'%s' object is not callable", jv_type_name(callee));
    }

static void eval_args(jrender *R, jframe *f, const jnode *n, jargs *a)
{
    a->npos = n->nargs;
    a->nkw = n->nkids - n->nargs;
    a->pos = a->npos ? jr_alloc(R, (size_t)a->npos * sizeof *a->pos) : NULL;
    a->kwv = a->nkw ? jr_alloc(R, (size_t)a->nkw * sizeof *a->kwv) : NULL;
    a->kw = n->kw ? n->kw + n->nargs : NULL;
    for (int i = 0; i < n->nargs; i++) a->pos[i] = je_eval(R, f, n->kids[i]);
    for (int i = 0; i < a->nkw; i++) a->kwv[i] = je_eval(R, f, n->kids[n->nargs + i]);
}

/* Filters chained on a value: `x|a|b(1)`, and the block forms' filter. */
static jv apply_filters(jrender *R, jframe *f, const jnode *chain, jv v)
{
    if (chain->a) v = apply_filters(R, f, chain->a, v);
    jargs a;
    eval_args(R, f, chain, &a);
    return chain->filter->fn(R, chain, v, &a);
}

/* ---- expressions ---- */

jv je_eval(jrender *R, jframe *f, const jnode *n)
{
    switch (n->kind) {
    case N_CONST: return n->value;
    case N_NAME: return lookup(R, f, n->name, n->name_n);
    case N_LIST:
    case N_TUPLE: {
        jv l = jv_list_new(R, (size_t)n->nkids);
        if (n->kind == N_TUPLE) l.u.l->flags = JL_TUPLE;
        for (int i = 0; i < n->nkids; i++) l.u.l->items[l.u.l->n++] = je_eval(R, f, n->kids[i]);
        return l;
    }
    case N_DICT: {
        jv d = jv_dict_new(R);
        for (int i = 0; i + 1 < n->nkids; i += 2) {
            jv k = je_eval(R, f, n->kids[i]);
            if (k.kind == JV_LIST && !(k.u.l->flags & JL_TUPLE)) jr_fail(R, n, "%s", "unhashable type: 'list'");
            if (k.kind == JV_DICT) jr_fail(R, n, "%s", "unhashable type: 'dict'");
            jd_set(R, d.u.d, k, je_eval(R, f, n->kids[i + 1]));
        }
        return d;
    }
    case N_GETATTR: return je_getattr(R, n, je_eval(R, f, n->a), n->name, n->name_n);
    case N_GETITEM: {
        jv obj = je_eval(R, f, n->a);
        return je_getitem(R, n, obj, je_eval(R, f, n->b));
    }
    case N_SLICE: return eval_slice(R, f, n);
    case N_CALL: {
        jv callee = je_eval(R, f, n->a);
        jargs a;
        eval_args(R, f, n, &a);
        return je_call(R, n, callee, &a);
    }
    case N_FILTER: {
        jv v = n->a ? je_eval(R, f, n->a) : jv_undef(NULL, 0);
        jargs a;
        eval_args(R, f, n, &a);
        return n->filter->fn(R, n, v, &a);
    }
    case N_TEST: {
        jv v = je_eval(R, f, n->a);
        jargs a;
        eval_args(R, f, n, &a);
        return jv_bool(n->test->fn(R, n, v, &a));
    }
    case N_NEG:
    case N_POS: {
        jv v = je_eval(R, f, n->a);
        jv_check_defined(R, n, v);
        if (v.kind == JV_FLOAT) return jv_float(n->kind == N_NEG ? -v.u.f : v.u.f);
        if (v.kind == JV_INT || v.kind == JV_BOOL) {
            if (n->kind == N_POS) return jv_int(v.u.i);
            if (v.u.i == INT64_MIN) jr_fail(R, n, "%s", "integer overflow in unary '-'");
            return jv_int(-v.u.i);
        }
        jr_fail(R, n, "bad operand type for unary %c: '%s'", n->kind == N_NEG ? '-' : '+', jv_type_name(v));
    }
    case N_NOT: return jv_bool(!jv_truthy(je_eval(R, f, n->a)));
    case N_BIN: {
        jv a = je_eval(R, f, n->a);
        return binop(R, n, n->op, a, je_eval(R, f, n->b));
    }
    case N_COMPARE: {
        jv left = je_eval(R, f, n->a);
        for (int i = 0; i < n->nkids; i++) {
            jv right = je_eval(R, f, n->kids[i]);
            if (!compare_op(R, n, n->ops[i], left, right)) return jv_bool(0);
            left = right;
        }
        return jv_bool(1);
    }
    case N_AND: {
        jv a = je_eval(R, f, n->a);
        return jv_truthy(a) ? je_eval(R, f, n->b) : a;
    }
    case N_OR: {
        jv a = je_eval(R, f, n->a);
        return jv_truthy(a) ? a : je_eval(R, f, n->b);
    }
    case N_CONDEXPR:
        if (jv_truthy(je_eval(R, f, n->a))) return je_eval(R, f, n->b);
        return n->c ? je_eval(R, f, n->c) : jv_undef(NULL, 0);
    case N_CONCAT: {
        iv_strbuf *b = jr_sb(R);
        for (int i = 0; i < n->nkids; i++) {
            jv v = je_eval(R, f, n->kids[i]);
            if (v.kind == JV_UNDEF && v.why) jv_check_defined(R, n, v);
            jp_str(R, b, v);
            if (b->len > IV_JINJA_MAX_OUTPUT) jr_fail(R, n, "a string longer than %u bytes", IV_JINJA_MAX_OUTPUT);
        }
        return jr_sb_value(R, b);
    }
    default: jr_fail(R, n, "%s", "internal error: a statement evaluated as an expression");
    }
}

/* ---- statements ---- */

static int exec_for(jrender *R, jframe *f, const jnode *n)
{
    jv seq = je_eval(R, f, n->b);
    jlist *items = jv_iter(R, n, seq);
    if (n->c) {
        /* `for x in xs if cond`: jinja2 filters first, so loop.length and
         * loop.last count only the items that pass. */
        jlist *kept = jv_list_new(R, items->n).u.l;
        jframe *tf = frame_new(R, f);
        for (size_t i = 0; i < items->n; i++) {
            je_step(R, n);
            tf->vars.n = 0;
            assign(R, tf, n->a, items->items[i]);
            if (jv_truthy(je_eval(R, tf, n->c))) kept->items[kept->n++] = items->items[i];
        }
        items = kept;
    }
    jloop *lp = jr_alloc(R, sizeof *lp);
    lp->items = items;
    lp->depth = 1; /* only recursive loops (unsupported) go deeper */
    lp->last_changed = jv_undef(NULL, 0);
    jframe *lf = frame_new(R, f);
    for (size_t i = 0; i < items->n; i++) {
        je_step(R, n);
        lp->index0 = i;
        lf->vars.n = 0; /* each iteration starts a fresh scope */
        assign(R, lf, n->a, items->items[i]);
        set_var(R, lf, "loop", 4, (jv){.kind = JV_LOOP, .u.lp = lp});
        if (exec_body(R, lf, n->kids[0]) == FLOW_BREAK) break;
    }
    if (!items->n && n->kids[1]) return exec_body(R, frame_new(R, f), n->kids[1]);
    return FLOW_NORMAL;
}

static int exec_stmt(jrender *R, jframe *f, const jnode *n)
{
    je_step(R, n);
    switch (n->kind) {
    case S_TEXT: emit(R, n, n->value.u.s, n->value.n); return FLOW_NORMAL;
    case S_PRINT: {
        jv v = je_eval(R, f, n->a);
        if (v.kind == JV_UNDEF && v.why) jv_check_defined(R, n, v);
        if (v.kind == JV_STR) {
            emit(R, n, v.u.s, v.n);
        } else {
            iv_strbuf *b = jr_sb(R);
            jp_str(R, b, v);
            emit(R, n, b->data ? b->data : "", b->len);
            iv_sb_free(b);
        }
        return FLOW_NORMAL;
    }
    case S_IF:
        if (jv_truthy(je_eval(R, f, n->a))) return exec_body(R, f, n->b);
        return n->c ? exec_body(R, f, n->c) : FLOW_NORMAL;
    case S_FOR: return exec_for(R, f, n);
    case S_SET: assign(R, f, n->a, je_eval(R, f, n->b)); return FLOW_NORMAL;
    case S_SET_BLOCK: {
        iv_strbuf *saved = R->out;
        R->out = jr_sb(R);
        exec_body(R, frame_new(R, f), n->b);
        iv_strbuf *b = R->out;
        R->out = saved;
        jv v = jr_sb_value(R, b);
        if (n->c) v = apply_filters(R, f, n->c, v);
        assign(R, f, n->a, v);
        return FLOW_NORMAL;
    }
    case S_MACRO: {
        jmacro *m = jr_alloc(R, sizeof *m);
        m->def = n, m->closure = f, m->caller = jv_undef(NULL, 0);
        set_var(R, f, n->name, n->name_n, (jv){.kind = JV_MACRO, .u.m = m});
        return FLOW_NORMAL;
    }
    case S_CALL_BLOCK: {
        if (!n->b) { /* {% generation %} */
            if (R->depth >= IV_JINJA_MAX_DEPTH) jr_fail(R, n, "blocks nested deeper than %d", IV_JINJA_MAX_DEPTH);
            R->depth++;
            exec_body(R, frame_new(R, f), n->a);
            R->depth--;
            return FLOW_NORMAL;
        }
        jmacro *caller = jr_alloc(R, sizeof *caller);
        caller->def = n, caller->closure = f, caller->caller = jv_undef(NULL, 0);
        const jnode *call = n->b;
        jv callee = je_eval(R, f, call->a);
        jargs a;
        eval_args(R, f, call, &a);
        jv cv = {.kind = JV_MACRO, .u.m = caller};
        jv result;
        if (callee.kind == JV_MACRO) {
            jmacro with = *callee.u.m;
            with.caller = cv;
            result = call_macro(R, call, &with, &a);
        } else {
            result = je_call(R, call, callee, &a);
        }
        iv_strbuf *b = jr_sb(R);
        jp_str(R, b, result);
        emit(R, n, b->data ? b->data : "", b->len);
        iv_sb_free(b);
        return FLOW_NORMAL;
    }
    case S_FILTER_BLOCK: {
        iv_strbuf *saved = R->out;
        R->out = jr_sb(R);
        exec_body(R, frame_new(R, f), n->a);
        iv_strbuf *b = R->out;
        R->out = saved;
        jv v = apply_filters(R, f, n->c, jr_sb_value(R, b));
        iv_strbuf *o = jr_sb(R);
        jp_str(R, o, v);
        emit(R, n, o->data ? o->data : "", o->len);
        iv_sb_free(o);
        return FLOW_NORMAL;
    }
    case S_BREAK: return FLOW_BREAK;
    case S_CONTINUE: return FLOW_CONTINUE;
    case S_BODY: return exec_body(R, f, n);
    default: jr_fail(R, n, "%s", "internal error: an expression executed as a statement");
    }
}

static int exec_body(jrender *R, jframe *f, const jnode *body)
{
    if (!body) return FLOW_NORMAL;
    for (int i = 0; i < body->nkids; i++) {
        int flow = exec_stmt(R, f, body->kids[i]);
        if (flow != FLOW_NORMAL) return flow;
    }
    return FLOW_NORMAL;
}

/* ---- public API ---- */

#define COMPILE_ARENA_CAP ((size_t)256 << 20)
#define RENDER_ARENA_CAP ((size_t)1 << 30)

int iv_jinja_compile(iv_jinja **out, const char *src, size_t len, iv_err *err)
{
    *out = NULL;
    iv_jinja *t = calloc(1, sizeof *t);
    if (!t) return iv_errf(err, IV_E_NOMEM, "out of memory");
    ja_init(&t->arena, COMPILE_ARENA_CAP);
    jtok *toks;
    size_t ntok;
    if (jl_lex(&t->arena, src ? src : "", src ? len : 0, &toks, &ntok, err) || jp_parse(t, toks, ntok, err)) {
        iv_jinja_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

int iv_jinja_render(const iv_jinja *t, const cJSON *ctx, iv_strbuf *out, iv_err *err)
{
    jrender *R = calloc(1, sizeof *R);
    if (!R) return iv_errf(err, IV_E_NOMEM, "out of memory");
    ja_init(&R->arena, RENDER_ARENA_CAP);
    R->err = err;
    iv_sb_init(&R->result);
    volatile int rc = -1;
    if (setjmp(R->jb) == 0) {
        R->out = &R->result;
        R->root = frame_new(R, NULL);
        if (ctx && cJSON_IsObject(ctx))
            for (const cJSON *c = ctx->child; c; c = c->next)
                if (c->string) set_var(R, R->root, c->string, strlen(c->string), jv_from_json(R, c));
        exec_body(R, R->root, t->root);
        if (R->result.oom) iv_errf(err, IV_E_NOMEM, "out of memory");
        else rc = 0;
    }
    if (rc == 0) {
        iv_sb_append(out, R->result.data ? R->result.data : "", R->result.len);
        if (out->oom) rc = iv_errf(err, IV_E_NOMEM, "out of memory");
    }
    iv_sb_free(&R->result);
    for (size_t i = 0; i < R->nbufs; i++) iv_sb_free(R->bufs[i]);
    ja_free(&R->arena);
    free(R);
    return rc;
}

void iv_jinja_free(iv_jinja *t)
{
    if (!t) return;
    ja_free(&t->arena);
    free(t);
}
