/* Jinja tests (`x is defined`, `n is divisibleby 3`, ...), as
 * jinja2/tests.py defines them; also what select/reject call by name. */
#include <math.h>
#include <string.h>

#include "chat/jinja_internal.h"

static jv *arg0(jrender *R, const jnode *at, jargs *a, const char *name)
{
    jv *v = ja_arg(a, 0, NULL);
    if (!v) jr_fail(R, at, "test '%s' needs an argument", name);
    return v;
}

static int t_defined(jrender *R, const jnode *at, jv v, jargs *a) { return v.kind != JV_UNDEF; }
static int t_undefined(jrender *R, const jnode *at, jv v, jargs *a) { return v.kind == JV_UNDEF; }
static int t_none(jrender *R, const jnode *at, jv v, jargs *a) { return v.kind == JV_NONE; }
static int t_string(jrender *R, const jnode *at, jv v, jargs *a) { return v.kind == JV_STR; }
static int t_mapping(jrender *R, const jnode *at, jv v, jargs *a) { return v.kind == JV_DICT; }
static int t_iterable(jrender *R, const jnode *at, jv v, jargs *a)
{
    return v.kind == JV_UNDEF || v.kind == JV_STR || v.kind == JV_LIST || v.kind == JV_DICT;
}
static int t_sequence(jrender *R, const jnode *at, jv v, jargs *a)
{
    return v.kind == JV_STR || v.kind == JV_DICT || (v.kind == JV_LIST && !(v.u.l->flags & JL_GEN));
}
static int t_number(jrender *R, const jnode *at, jv v, jargs *a) { return jv_is_number(v); }
static int t_integer(jrender *R, const jnode *at, jv v, jargs *a) { return v.kind == JV_INT; }
static int t_float(jrender *R, const jnode *at, jv v, jargs *a) { return v.kind == JV_FLOAT; }
static int t_boolean(jrender *R, const jnode *at, jv v, jargs *a) { return v.kind == JV_BOOL; }
static int t_true(jrender *R, const jnode *at, jv v, jargs *a) { return v.kind == JV_BOOL && v.u.i; }
static int t_false(jrender *R, const jnode *at, jv v, jargs *a) { return v.kind == JV_BOOL && !v.u.i; }
static int t_callable(jrender *R, const jnode *at, jv v, jargs *a) { return v.kind == JV_MACRO || v.kind == JV_FUNC; }
static int t_eq(jrender *R, const jnode *at, jv v, jargs *a) { return jv_equal(v, *arg0(R, at, a, "eq")); }
static int t_ne(jrender *R, const jnode *at, jv v, jargs *a) { return !jv_equal(v, *arg0(R, at, a, "ne")); }
static int t_lt(jrender *R, const jnode *at, jv v, jargs *a) { return jv_compare(R, at, v, *arg0(R, at, a, "lt")) < 0; }
static int t_le(jrender *R, const jnode *at, jv v, jargs *a) { return jv_compare(R, at, v, *arg0(R, at, a, "le")) <= 0; }
static int t_gt(jrender *R, const jnode *at, jv v, jargs *a) { return jv_compare(R, at, v, *arg0(R, at, a, "gt")) > 0; }
static int t_ge(jrender *R, const jnode *at, jv v, jargs *a) { return jv_compare(R, at, v, *arg0(R, at, a, "ge")) >= 0; }

static int t_in(jrender *R, const jnode *at, jv v, jargs *a)
{
    jv seq = *arg0(R, at, a, "in");
    jnode cmp = {.kind = N_COMPARE, .line = at->line};
    jnode ca = {.kind = N_CONST, .value = v}, cb = {.kind = N_CONST, .value = seq};
    jnode *kids[1] = {&cb};
    int ops[1] = {'I'};
    cmp.a = &ca, cmp.kids = kids, cmp.nkids = 1, cmp.ops = ops;
    return jv_truthy(je_eval(R, NULL, &cmp));
}

static int64_t int_of(jrender *R, const jnode *at, jv v, const char *test)
{
    if (v.kind != JV_INT && v.kind != JV_BOOL) jr_fail(R, at, "test '%s' needs an integer, not %s", test, jv_type_name(v));
    return v.u.i;
}
static int t_odd(jrender *R, const jnode *at, jv v, jargs *a)
{
    if (v.kind == JV_FLOAT) return fmod(v.u.f, 2.0) != 0;
    return (int_of(R, at, v, "odd") & 1) != 0;
}
static int t_even(jrender *R, const jnode *at, jv v, jargs *a)
{
    if (v.kind == JV_FLOAT) return fmod(v.u.f, 2.0) == 0;
    return (int_of(R, at, v, "even") & 1) == 0;
}
static int t_divisibleby(jrender *R, const jnode *at, jv v, jargs *a)
{
    jv d = *arg0(R, at, a, "divisibleby");
    if (jv_is_number(v) && jv_is_number(d) && (v.kind == JV_FLOAT || d.kind == JV_FLOAT)) {
        if (jv_num(d) == 0) jr_fail(R, at, "%s", "float modulo");
        return fmod(jv_num(v), jv_num(d)) == 0;
    }
    int64_t x = int_of(R, at, v, "divisibleby"), y = int_of(R, at, d, "divisibleby");
    if (!y) jr_fail(R, at, "%s", "integer division or modulo by zero");
    if (y == -1) return 1;
    return x % y == 0;
}

static int t_lower(jrender *R, const jnode *at, jv v, jargs *a)
{
    jv s = jv_to_str(R, v);
    jargs none = {0};
    return jv_truthy(je_call(R, at, jm_method(R, s, "islower", 7), &none));
}
static int t_upper(jrender *R, const jnode *at, jv v, jargs *a)
{
    jv s = jv_to_str(R, v);
    jargs none = {0};
    return jv_truthy(je_call(R, at, jm_method(R, s, "isupper", 7), &none));
}

/* `is sameas`: Python's identity, which for the values a template sees
 * means the same singleton (None, True, False) or the same object. */
static int t_sameas(jrender *R, const jnode *at, jv v, jargs *a)
{
    jv o = *arg0(R, at, a, "sameas");
    if (v.kind != o.kind) return 0;
    switch (v.kind) {
    case JV_NONE: return 1;
    case JV_BOOL: return v.u.i == o.u.i;
    case JV_INT: return v.u.i == o.u.i && v.u.i >= -5 && v.u.i <= 256; /* CPython's small int cache */
    case JV_STR: return v.u.s == o.u.s && v.n == o.n;
    case JV_LIST: return v.u.l == o.u.l;
    case JV_DICT:
    case JV_NS: return v.u.d == o.u.d;
    default: return jv_equal(v, o);
    }
}

/* `x is filter` / `x is test`: the names jinja2 3.1.6 registers (the
 * environment transformers builds), whether or not this renderer has them. */
static const char *const JINJA2_FILTERS[] = {
    "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape",
    "filesizeformat", "first", "float", "forceescape", "format", "groupby", "indent", "int", "items",
    "join", "last", "length", "list", "lower", "map", "max", "min", "pprint", "random", "reject",
    "rejectattr", "replace", "reverse", "round", "safe", "select", "selectattr", "slice", "sort",
    "string", "striptags", "sum", "title", "tojson", "trim", "truncate", "unique", "upper",
    "urlencode", "urlize", "wordcount", "wordwrap", "xmlattr", NULL};
static const char *const JINJA2_TESTS[] = {
    "!=", "<", "<=", "==", ">", ">=", "boolean", "callable", "defined", "divisibleby", "eq", "equalto",
    "escaped", "even", "false", "filter", "float", "ge", "greaterthan", "gt", "in", "integer",
    "iterable", "le", "lessthan", "lower", "lt", "mapping", "ne", "none", "number", "odd", "sameas",
    "sequence", "string", "test", "true", "undefined", "upper", NULL};

static int name_in(const char *const *names, jv v)
{
    if (v.kind != JV_STR) return 0;
    for (int i = 0; names[i]; i++)
        if (strlen(names[i]) == v.n && !memcmp(names[i], v.u.s, v.n)) return 1;
    return 0;
}
static int t_filter(jrender *R, const jnode *at, jv v, jargs *a) { return name_in(JINJA2_FILTERS, v); }
static int t_test(jrender *R, const jnode *at, jv v, jargs *a) { return name_in(JINJA2_TESTS, v); }

static const jtest_def TESTS[] = {
    {"defined", t_defined}, {"undefined", t_undefined}, {"none", t_none}, {"string", t_string},
    {"mapping", t_mapping}, {"iterable", t_iterable}, {"sequence", t_sequence}, {"number", t_number},
    {"integer", t_integer}, {"float", t_float}, {"boolean", t_boolean}, {"true", t_true}, {"false", t_false},
    {"callable", t_callable}, {"eq", t_eq}, {"equalto", t_eq}, {"==", t_eq}, {"ne", t_ne}, {"!=", t_ne},
    {"lt", t_lt}, {"lessthan", t_lt}, {"<", t_lt}, {"le", t_le}, {"<=", t_le}, {"gt", t_gt},
    {"greaterthan", t_gt}, {">", t_gt}, {"ge", t_ge}, {">=", t_ge}, {"in", t_in}, {"odd", t_odd},
    {"even", t_even}, {"divisibleby", t_divisibleby}, {"lower", t_lower}, {"upper", t_upper},
    {"sameas", t_sameas}, {"filter", t_filter}, {"test", t_test}, {NULL, NULL}};

const jtest_def *jt_find(const char *name, size_t n)
{
    for (int i = 0; TESTS[i].name; i++)
        if (strlen(TESTS[i].name) == n && !memcmp(TESTS[i].name, name, n)) return &TESTS[i];
    return NULL;
}

int jt_apply(jrender *R, const jnode *at, const char *name, jv v, jargs *a)
{
    const jtest_def *t = jt_find(name, strlen(name));
    if (!t) jr_fail(R, at, "test \"%s\" is not supported", name);
    return t->fn(R, at, v, a);
}
