/* The Jinja parser: tokens to a syntax tree, following jinja2/parser.py's
 * grammar and precedence (or < and < not < compare < + - < ~ < * / // % <
 * ** < unary < postfix/filters). Whatever the renderer does not support is
 * refused here, at model load, with the construct and its line: other
 * statements (include, extends, import, block, ...), unknown filters and
 * tests, and calls of names that are neither globals nor bound in the
 * template. Syntax errors are IV_E_FORMAT, unsupported constructs
 * IV_E_UNSUPPORTED. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "chat/jinja_internal.h"

#define MAX_NEST 200

typedef struct namelist {
    const char **s;
    size_t *n;
    int count, cap;
} namelist;

typedef struct parser {
    jarena *A;
    const jtok *t;
    size_t ntok, pos;
    iv_err *err;
    jmp_buf jb;
    int depth;      /* expression/statement nesting, bounded against stack overflow */
    int loop_depth; /* for loops around the current statement (macro bodies reset it) */
    namelist bound; /* names the template assigns: set, for, macro, parameters */
    jnode **calls;  /* calls of plain names, checked against `bound` at the end */
    int ncalls, capcalls;
} parser;

_Noreturn __attribute__((format(printf, 4, 5))) static void fail(parser *P, int code, int line, const char *fmt, ...)
{
    iv_errf(P->err, code, "chat template line %d: ", line);
    size_t k = strlen(P->err->msg);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(P->err->msg + k, sizeof P->err->msg - k, fmt, ap);
    va_end(ap);
    longjmp(P->jb, 1);
}

static void *palloc(parser *P, size_t n)
{
    void *p = ja_alloc(P->A, n);
    if (!p) fail(P, IV_E_TOO_LARGE, P->t[P->pos].line, "template too large");
    return p;
}

static const jtok *cur(parser *P) { return &P->t[P->pos]; }
static const jtok *peek(parser *P, int k)
{
    size_t i = P->pos + (size_t)k;
    return &P->t[i < P->ntok ? i : P->ntok - 1];
}
static void advance(parser *P)
{
    if (P->t[P->pos].kind != T_EOF) P->pos++;
}

static int tok_is(const jtok *t, jtok_kind k, const char *s)
{
    return t->kind == k && (!s || (t->n == strlen(s) && !memcmp(t->s, s, t->n)));
}
static int is_op(parser *P, const char *op) { return tok_is(cur(P), T_OP, op); }
static int is_name(parser *P, const char *nm) { return tok_is(cur(P), T_NAME, nm); }

static const char *describe(const jtok *t)
{
    switch (t->kind) {
    case T_EOF: return "end of template";
    case T_VAR_END: return "end of print statement";
    case T_BLOCK_END: return "end of statement block";
    case T_DATA: return "template data";
    case T_STRING: return "string";
    case T_INT: return "integer";
    case T_FLOAT: return "float";
    default: return NULL;
    }
}

_Noreturn static void unexpected(parser *P, const char *expected)
{
    const jtok *t = cur(P);
    const char *d = describe(t);
    if (d) fail(P, IV_E_FORMAT, t->line, "expected %s, got %s", expected, d);
    fail(P, IV_E_FORMAT, t->line, "expected %s, got '%.*s'", expected, (int)(t->n > 40 ? 40 : t->n), t->s);
}

static void expect_op(parser *P, const char *op)
{
    if (!is_op(P, op)) {
        char e[16];
        snprintf(e, sizeof e, "'%s'", op);
        unexpected(P, e);
    }
    advance(P);
}

static void expect_kind(parser *P, jtok_kind k, const char *what)
{
    if (cur(P)->kind != k) unexpected(P, what);
    advance(P);
}

static const jtok *expect_name(parser *P)
{
    if (cur(P)->kind != T_NAME) unexpected(P, "a name");
    const jtok *t = cur(P);
    advance(P);
    return t;
}

static jnode *nnew(parser *P, jnode_kind k, int line)
{
    jnode *n = palloc(P, sizeof *n);
    n->kind = k, n->line = line;
    return n;
}

/* Growable arrays of nodes while parsing (copied into the arena when done). */
typedef struct nvec {
    jnode **v;
    const char **kw;
    int n, cap;
} nvec;

static void nvec_push(parser *P, nvec *a, jnode *x, const char *kw)
{
    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 8;
        jnode **v = palloc(P, (size_t)cap * sizeof *v);
        const char **k = palloc(P, (size_t)cap * sizeof *k);
        if (a->n) {
            memcpy(v, a->v, (size_t)a->n * sizeof *v);
            memcpy(k, a->kw, (size_t)a->n * sizeof *k);
        }
        a->v = v, a->kw = k, a->cap = cap;
    }
    a->kw[a->n] = kw;
    a->v[a->n++] = x;
}

static char *tok_cstr(parser *P, const jtok *t)
{
    char *s = palloc(P, t->n + 1);
    memcpy(s, t->s, t->n);
    return s;
}

static void bind_name(parser *P, const char *s, size_t n)
{
    namelist *b = &P->bound;
    if (b->count == b->cap) {
        int cap = b->cap ? b->cap * 2 : 16;
        const char **ns = palloc(P, (size_t)cap * sizeof *ns);
        size_t *nn = palloc(P, (size_t)cap * sizeof *nn);
        if (b->count) {
            memcpy(ns, b->s, (size_t)b->count * sizeof *ns);
            memcpy(nn, b->n, (size_t)b->count * sizeof *nn);
        }
        b->s = ns, b->n = nn, b->cap = cap;
    }
    b->s[b->count] = s;
    b->n[b->count++] = n;
}

static void enter(parser *P)
{
    if (++P->depth > MAX_NEST) fail(P, IV_E_UNSUPPORTED, cur(P)->line, "template nested too deeply");
}
static void leave(parser *P) { P->depth--; }

static jnode *parse_expression(parser *P, int with_condexpr);
static jnode *parse_tuple(parser *P, int with_condexpr, int explicit_parens, const char *extra_end);
static jnode *parse_unary(parser *P, int with_filter);
static jnode *parse_primary(parser *P);
static jnode *parse_postfix(parser *P, jnode *node);
static jnode *parse_filter_expr(parser *P, jnode *node);

/* ( args ) of a call, filter or test: positional then keyword arguments. */
static void parse_call_args(parser *P, jnode *n)
{
    expect_op(P, "(");
    nvec a = {0};
    int nargs = 0;
    while (!is_op(P, ")")) {
        if (a.n) {
            expect_op(P, ",");
            if (is_op(P, ")")) break;
        }
        if (is_op(P, "*") || is_op(P, "**"))
            fail(P, IV_E_UNSUPPORTED, cur(P)->line, "*args and **kwargs in calls are not supported");
        if (cur(P)->kind == T_NAME && tok_is(peek(P, 1), T_OP, "=")) {
            const char *kw = tok_cstr(P, cur(P));
            advance(P);
            advance(P);
            nvec_push(P, &a, parse_expression(P, 1), kw);
        } else {
            if (nargs != a.n) fail(P, IV_E_FORMAT, cur(P)->line, "invalid syntax for function call expression");
            nvec_push(P, &a, parse_expression(P, 1), NULL);
            nargs++;
        }
    }
    expect_op(P, ")");
    n->kids = a.v, n->kw = a.kw, n->nkids = a.n, n->nargs = nargs;
}

static jnode *parse_filter(parser *P, jnode *input, int start_inline)
{
    while (is_op(P, "|") || start_inline) {
        if (!start_inline) advance(P);
        start_inline = 0;
        const jtok *t = expect_name(P);
        size_t len = t->n;
        while (is_op(P, ".")) {
            advance(P);
            const jtok *more = expect_name(P);
            len = (size_t)(more->s + more->n - t->s);
        }
        jnode *f = nnew(P, N_FILTER, t->line);
        f->name = palloc(P, len + 1);
        memcpy((char *)f->name, t->s, len);
        f->name_n = len;
        f->filter = jf_find(f->name, len);
        if (!f->filter) fail(P, IV_E_UNSUPPORTED, t->line, "filter \"%s\" is not supported", f->name);
        f->a = input;
        if (is_op(P, "(")) parse_call_args(P, f);
        input = f;
    }
    return input;
}

static jnode *parse_test(parser *P, jnode *node)
{
    int line = cur(P)->line;
    advance(P); /* is */
    int negated = 0;
    if (is_name(P, "not")) {
        advance(P);
        negated = 1;
    }
    const jtok *t = expect_name(P);
    size_t len = t->n;
    while (is_op(P, ".")) {
        advance(P);
        const jtok *more = expect_name(P);
        len = (size_t)(more->s + more->n - t->s);
    }
    jnode *n = nnew(P, N_TEST, line);
    n->name = palloc(P, len + 1);
    memcpy((char *)n->name, t->s, len);
    n->name_n = len;
    n->test = jt_find(n->name, len);
    if (!n->test) fail(P, IV_E_UNSUPPORTED, t->line, "test \"%s\" is not supported", n->name);
    n->a = node;
    const jtok *c = cur(P);
    if (is_op(P, "(")) {
        parse_call_args(P, n);
    } else if ((c->kind == T_NAME || c->kind == T_STRING || c->kind == T_INT || c->kind == T_FLOAT || is_op(P, "[") ||
                is_op(P, "{")) &&
               !is_name(P, "else") && !is_name(P, "or") && !is_name(P, "and")) {
        if (is_name(P, "is")) fail(P, IV_E_FORMAT, c->line, "You cannot chain multiple tests with is");
        jnode *arg = parse_postfix(P, parse_primary(P));
        n->kids = palloc(P, sizeof *n->kids);
        n->kids[0] = arg;
        n->nkids = n->nargs = 1;
    }
    if (negated) {
        jnode *x = nnew(P, N_NOT, line);
        x->a = n;
        return x;
    }
    return n;
}

static jnode *const_node(parser *P, int line, jv v)
{
    jnode *n = nnew(P, N_CONST, line);
    n->value = v;
    return n;
}

static jnode *parse_subscript_item(parser *P)
{
    int line = cur(P)->line;
    jnode *parts[3] = {NULL, NULL, NULL};
    if (!is_op(P, ":")) {
        jnode *e = parse_expression(P, 1);
        if (!is_op(P, ":")) return e;
        parts[0] = e;
    }
    advance(P); /* : */
    if (!is_op(P, "]") && !is_op(P, ",") && !is_op(P, ":")) parts[1] = parse_expression(P, 1);
    if (is_op(P, ":")) {
        advance(P);
        if (!is_op(P, "]") && !is_op(P, ",")) parts[2] = parse_expression(P, 1);
    }
    jnode *s = nnew(P, N_SLICE, line);
    s->b = parts[0], s->c = parts[1], s->d = parts[2];
    return s;
}

static jnode *parse_postfix(parser *P, jnode *node)
{
    for (;;) {
        int line = cur(P)->line;
        if (is_op(P, ".")) {
            advance(P);
            if (cur(P)->kind == T_NAME) {
                jnode *g = nnew(P, N_GETATTR, line);
                g->a = node;
                g->name = tok_cstr(P, cur(P));
                g->name_n = cur(P)->n;
                advance(P);
                node = g;
            } else if (cur(P)->kind == T_INT) {
                jnode *g = nnew(P, N_GETITEM, line);
                g->a = node;
                g->b = const_node(P, line, jv_int(cur(P)->i));
                advance(P);
                node = g;
            } else {
                unexpected(P, "a name or number");
            }
        } else if (is_op(P, "[")) {
            advance(P);
            nvec items = {0};
            while (!is_op(P, "]")) {
                if (items.n) expect_op(P, ","); /* jinja2 takes no trailing comma here */
                nvec_push(P, &items, parse_subscript_item(P), NULL);
            }
            expect_op(P, "]");
            if (!items.n) fail(P, IV_E_FORMAT, line, "expected subscript expression");
            jnode *key = items.v[0];
            /* x[1:, 0]: jinja2 writes Python that does not compile. */
            for (int k = 0; items.n > 1 && k < items.n; k++)
                if (items.v[k]->kind == N_SLICE) fail(P, IV_E_FORMAT, line, "a slice among several subscripts");
            if (items.n > 1) {
                key = nnew(P, N_TUPLE, line);
                key->kids = items.v, key->nkids = items.n;
            }
            if (key->kind == N_SLICE) {
                key->a = node;
                node = key;
            } else {
                jnode *g = nnew(P, N_GETITEM, line);
                g->a = node, g->b = key;
                node = g;
            }
        } else if (is_op(P, "(")) {
            jnode *c = nnew(P, N_CALL, line);
            c->a = node;
            parse_call_args(P, c);
            if (node->kind == N_NAME) {
                if (P->ncalls == P->capcalls) {
                    int cap = P->capcalls ? P->capcalls * 2 : 16;
                    jnode **v = palloc(P, (size_t)cap * sizeof *v);
                    if (P->ncalls) memcpy(v, P->calls, (size_t)P->ncalls * sizeof *v);
                    P->calls = v, P->capcalls = cap;
                }
                P->calls[P->ncalls++] = c;
            }
            node = c;
        } else {
            return node;
        }
    }
}

static jnode *parse_filter_expr(parser *P, jnode *node)
{
    for (;;) {
        if (is_op(P, "|")) node = parse_filter(P, node, 0);
        else if (is_name(P, "is")) node = parse_test(P, node);
        else if (is_op(P, "(")) node = parse_postfix(P, node);
        else return node;
    }
}

static jnode *parse_primary(parser *P)
{
    const jtok *t = cur(P);
    int line = t->line;
    enter(P);
    jnode *n = NULL;
    if (t->kind == T_NAME) {
        if (tok_is(t, T_NAME, "true") || tok_is(t, T_NAME, "True")) n = const_node(P, line, jv_bool(1));
        else if (tok_is(t, T_NAME, "false") || tok_is(t, T_NAME, "False")) n = const_node(P, line, jv_bool(0));
        else if (tok_is(t, T_NAME, "none") || tok_is(t, T_NAME, "None")) n = const_node(P, line, jv_none());
        else {
            n = nnew(P, N_NAME, line);
            n->name = tok_cstr(P, t);
            n->name_n = t->n;
        }
        advance(P);
    } else if (t->kind == T_STRING) {
        /* Adjacent literals join, as in Python. */
        size_t len = 0, k = 0;
        while (peek(P, (int)k)->kind == T_STRING) len += peek(P, (int)k++)->n;
        char *s = palloc(P, len + 1);
        len = 0;
        while (cur(P)->kind == T_STRING) {
            memcpy(s + len, cur(P)->s, cur(P)->n);
            len += cur(P)->n;
            advance(P);
        }
        n = const_node(P, line, jv_str(s, len));
    } else if (t->kind == T_INT) {
        n = const_node(P, line, jv_int(t->i));
        advance(P);
    } else if (t->kind == T_FLOAT) {
        n = const_node(P, line, jv_float(t->f));
        advance(P);
    } else if (is_op(P, "(")) {
        advance(P);
        n = parse_tuple(P, 1, 1, NULL);
        expect_op(P, ")");
    } else if (is_op(P, "[")) {
        advance(P);
        nvec items = {0};
        while (!is_op(P, "]")) {
            if (items.n) {
                expect_op(P, ",");
                if (is_op(P, "]")) break;
            }
            nvec_push(P, &items, parse_expression(P, 1), NULL);
        }
        expect_op(P, "]");
        n = nnew(P, N_LIST, line);
        n->kids = items.v, n->nkids = items.n;
    } else if (is_op(P, "{")) {
        advance(P);
        nvec items = {0};
        while (!is_op(P, "}")) {
            if (items.n) {
                expect_op(P, ",");
                if (is_op(P, "}")) break;
            }
            nvec_push(P, &items, parse_expression(P, 1), NULL);
            expect_op(P, ":");
            nvec_push(P, &items, parse_expression(P, 1), NULL);
        }
        expect_op(P, "}");
        n = nnew(P, N_DICT, line);
        n->kids = items.v, n->nkids = items.n;
    } else {
        unexpected(P, "an expression");
    }
    leave(P);
    return n;
}

static jnode *parse_unary(parser *P, int with_filter)
{
    int line = cur(P)->line;
    enter(P);
    jnode *n;
    if (is_op(P, "-") || is_op(P, "+")) {
        int neg = is_op(P, "-");
        advance(P);
        n = nnew(P, neg ? N_NEG : N_POS, line);
        n->a = parse_unary(P, 0);
    } else {
        n = parse_primary(P);
    }
    n = parse_postfix(P, n);
    if (with_filter) n = parse_filter_expr(P, n);
    leave(P);
    return n;
}

static jnode *bin(parser *P, int op, jnode *a, jnode *b, int line)
{
    jnode *n = nnew(P, N_BIN, line);
    n->op = op, n->a = a, n->b = b;
    return n;
}

static jnode *parse_pow(parser *P)
{
    jnode *left = parse_unary(P, 1);
    while (is_op(P, "**")) {
        int line = cur(P)->line;
        advance(P);
        left = bin(P, 'P', left, parse_unary(P, 1), line);
    }
    return left;
}

static jnode *parse_math2(parser *P)
{
    jnode *left = parse_pow(P);
    for (;;) {
        int line = cur(P)->line, op;
        if (is_op(P, "*")) op = '*';
        else if (is_op(P, "/")) op = '/';
        else if (is_op(P, "//")) op = 'F';
        else if (is_op(P, "%")) op = '%';
        else return left;
        advance(P);
        left = bin(P, op, left, parse_pow(P), line);
    }
}

static jnode *parse_concat(parser *P)
{
    int line = cur(P)->line;
    jnode *first = parse_math2(P);
    if (!is_op(P, "~")) return first;
    nvec args = {0};
    nvec_push(P, &args, first, NULL);
    while (is_op(P, "~")) {
        advance(P);
        nvec_push(P, &args, parse_math2(P), NULL);
    }
    jnode *n = nnew(P, N_CONCAT, line);
    n->kids = args.v, n->nkids = args.n;
    return n;
}

static jnode *parse_math1(parser *P)
{
    jnode *left = parse_concat(P);
    while (is_op(P, "+") || is_op(P, "-")) {
        int line = cur(P)->line, op = is_op(P, "+") ? '+' : '-';
        advance(P);
        left = bin(P, op, left, parse_concat(P), line);
    }
    return left;
}

static jnode *parse_compare(parser *P)
{
    int line = cur(P)->line;
    jnode *expr = parse_math1(P);
    nvec operands = {0};
    int ops[64], nops = 0;
    for (;;) {
        int op;
        if (is_op(P, "==")) op = 'E';
        else if (is_op(P, "!=")) op = 'N';
        else if (is_op(P, "<")) op = '<';
        else if (is_op(P, "<=")) op = 'L';
        else if (is_op(P, ">")) op = '>';
        else if (is_op(P, ">=")) op = 'G';
        else if (is_name(P, "in")) op = 'I';
        else if (is_name(P, "not") && tok_is(peek(P, 1), T_NAME, "in")) {
            advance(P);
            op = 'X';
        } else break;
        advance(P);
        if (nops == 64) fail(P, IV_E_UNSUPPORTED, line, "too many chained comparisons");
        ops[nops++] = op;
        nvec_push(P, &operands, parse_math1(P), NULL);
    }
    if (!nops) return expr;
    jnode *n = nnew(P, N_COMPARE, line);
    n->a = expr;
    n->kids = operands.v, n->nkids = operands.n;
    n->ops = palloc(P, (size_t)nops * sizeof *n->ops);
    memcpy(n->ops, ops, (size_t)nops * sizeof *n->ops);
    return n;
}

static jnode *parse_not(parser *P)
{
    if (is_name(P, "not")) {
        int line = cur(P)->line;
        advance(P);
        enter(P);
        jnode *n = nnew(P, N_NOT, line);
        n->a = parse_not(P);
        leave(P);
        return n;
    }
    return parse_compare(P);
}

static jnode *parse_and(parser *P)
{
    jnode *left = parse_not(P);
    while (is_name(P, "and")) {
        int line = cur(P)->line;
        advance(P);
        jnode *n = nnew(P, N_AND, line);
        n->a = left, n->b = parse_not(P);
        left = n;
    }
    return left;
}

static jnode *parse_or(parser *P)
{
    jnode *left = parse_and(P);
    while (is_name(P, "or")) {
        int line = cur(P)->line;
        advance(P);
        jnode *n = nnew(P, N_OR, line);
        n->a = left, n->b = parse_and(P);
        left = n;
    }
    return left;
}

static jnode *parse_condexpr(parser *P)
{
    jnode *expr1 = parse_or(P);
    while (is_name(P, "if")) {
        int line = cur(P)->line;
        advance(P);
        enter(P);
        jnode *n = nnew(P, N_CONDEXPR, line);
        n->a = parse_or(P); /* condition */
        n->b = expr1;
        if (is_name(P, "else")) {
            advance(P);
            n->c = parse_condexpr(P);
        }
        leave(P);
        expr1 = n;
    }
    return expr1;
}

static jnode *parse_expression(parser *P, int with_condexpr)
{
    enter(P);
    jnode *n = with_condexpr ? parse_condexpr(P) : parse_or(P);
    leave(P);
    return n;
}

static int tuple_end(parser *P, const char *extra_end)
{
    const jtok *t = cur(P);
    return t->kind == T_VAR_END || t->kind == T_BLOCK_END || is_op(P, ")") || (extra_end && is_name(P, extra_end));
}

static jnode *parse_tuple(parser *P, int with_condexpr, int explicit_parens, const char *extra_end)
{
    int line = cur(P)->line;
    nvec args = {0};
    int is_tuple = 0;
    for (;;) {
        if (args.n) expect_op(P, ",");
        if (tuple_end(P, extra_end)) break;
        nvec_push(P, &args, parse_expression(P, with_condexpr), NULL);
        if (is_op(P, ",")) is_tuple = 1;
        else break;
    }
    if (!is_tuple) {
        if (args.n) return args.v[0];
        if (!explicit_parens) unexpected(P, "an expression");
    }
    jnode *n = nnew(P, N_TUPLE, line);
    n->kids = args.v, n->nkids = args.n;
    return n;
}

/* A name, or names in a tuple (for/set targets); ns.attr where allowed. */
static jnode *parse_assign_target(parser *P, int with_namespace, const char *extra_end)
{
    int line = cur(P)->line;
    if (with_namespace && cur(P)->kind == T_NAME && tok_is(peek(P, 1), T_OP, ".")) {
        const jtok *ns = expect_name(P);
        advance(P);
        const jtok *attr = expect_name(P);
        jnode *n = nnew(P, N_GETATTR, line);
        n->a = nnew(P, N_NAME, line);
        n->a->name = tok_cstr(P, ns), n->a->name_n = ns->n;
        n->name = tok_cstr(P, attr), n->name_n = attr->n;
        return n;
    }
    nvec names = {0};
    int parens = 0, is_tuple = 0;
    if (is_op(P, "(")) {
        advance(P);
        parens = 1;
    }
    for (;;) {
        if (names.n) expect_op(P, ",");
        if ((parens && is_op(P, ")")) || tuple_end(P, extra_end) || is_op(P, "=")) break;
        const jtok *t = expect_name(P);
        jnode *n = nnew(P, N_NAME, t->line);
        n->name = tok_cstr(P, t), n->name_n = t->n;
        bind_name(P, n->name, n->name_n);
        nvec_push(P, &names, n, NULL);
        if (is_op(P, ",")) is_tuple = 1;
        else break;
    }
    if (parens) expect_op(P, ")");
    if (!names.n) unexpected(P, "a name");
    if (!is_tuple && !parens) return names.v[0];
    if (!is_tuple && names.n == 1) return names.v[0];
    jnode *n = nnew(P, N_TUPLE, line);
    n->kids = names.v, n->nkids = names.n;
    return n;
}

/* ---- statements ---- */

static jnode *parse_body(parser *P, const char *const *ends);

static void end_block(parser *P) { expect_kind(P, T_BLOCK_END, "end of statement block"); }

/* Consumes `{% name %}` where name is the awaited end tag. */
static void expect_end_tag(parser *P, const char *name)
{
    expect_kind(P, T_BLOCK_BEGIN, "a block");
    if (!is_name(P, name)) {
        char e[40];
        snprintf(e, sizeof e, "'%s'", name);
        unexpected(P, e);
    }
    advance(P);
    end_block(P);
}

static jnode *parse_for(parser *P, int line)
{
    jnode *n = nnew(P, S_FOR, line);
    n->a = parse_assign_target(P, 0, "in");
    if (!is_name(P, "in")) unexpected(P, "'in'");
    advance(P);
    n->b = parse_tuple(P, 0, 0, "recursive");
    if (is_name(P, "if")) {
        advance(P);
        n->c = parse_expression(P, 1);
    }
    if (is_name(P, "recursive")) fail(P, IV_E_UNSUPPORTED, line, "recursive for loops are not supported");
    end_block(P);
    static const char *const ends[] = {"endfor", "else", NULL};
    P->loop_depth++;
    jnode *body = parse_body(P, ends);
    P->loop_depth--;
    n->kids = palloc(P, 2 * sizeof *n->kids);
    n->kids[0] = body;
    n->nkids = 2;
    advance(P); /* {% */
    if (is_name(P, "else")) {
        advance(P);
        end_block(P);
        static const char *const ends2[] = {"endfor", NULL};
        n->kids[1] = parse_body(P, ends2);
        advance(P);
    }
    advance(P); /* endfor */
    end_block(P);
    return n;
}

static jnode *parse_if(parser *P, int line)
{
    jnode *n = nnew(P, S_IF, line);
    n->a = parse_tuple(P, 1, 0, NULL);
    end_block(P);
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    n->b = parse_body(P, ends);
    advance(P); /* {% */
    if (is_name(P, "elif")) {
        int l2 = cur(P)->line;
        advance(P);
        /* An elif is an if nested in the else, sharing the endif. */
        jnode *inner = parse_if(P, l2);
        n->c = nnew(P, S_BODY, l2);
        n->c->kids = palloc(P, sizeof *n->c->kids);
        n->c->kids[0] = inner;
        n->c->nkids = 1;
        return n;
    }
    if (is_name(P, "else")) {
        advance(P);
        end_block(P);
        static const char *const ends2[] = {"endif", NULL};
        n->c = parse_body(P, ends2);
        advance(P);
    }
    advance(P); /* endif */
    end_block(P);
    return n;
}

static jnode *parse_set(parser *P, int line)
{
    jnode *target = parse_assign_target(P, 1, NULL);
    if (is_op(P, "=")) {
        advance(P);
        jnode *n = nnew(P, S_SET, line);
        n->a = target;
        n->b = parse_tuple(P, 1, 0, NULL);
        end_block(P);
        return n;
    }
    if (target->kind != N_NAME) fail(P, IV_E_UNSUPPORTED, line, "a block set must assign one name");
    jnode *n = nnew(P, S_SET_BLOCK, line);
    n->a = target;
    if (is_op(P, "|")) n->c = parse_filter(P, NULL, 0);
    end_block(P);
    static const char *const ends[] = {"endset", NULL};
    n->b = parse_body(P, ends);
    expect_end_tag(P, "endset");
    return n;
}

/* (a, b=default, ...) of a macro or a call block's caller. */
static void parse_signature(parser *P, jnode *n)
{
    nvec params = {0};
    expect_op(P, "(");
    while (!is_op(P, ")")) {
        if (params.n) expect_op(P, ",");
        const jtok *t = expect_name(P);
        jnode *p = nnew(P, N_NAME, t->line);
        p->name = tok_cstr(P, t), p->name_n = t->n;
        bind_name(P, p->name, p->name_n);
        if (is_op(P, "=")) {
            advance(P);
            p->a = parse_expression(P, 1); /* the default */
        } else {
            for (int i = 0; i < params.n; i++)
                if (params.v[i]->a) fail(P, IV_E_FORMAT, t->line, "non-default argument follows default argument");
        }
        nvec_push(P, &params, p, NULL);
    }
    expect_op(P, ")");
    n->kids = params.v, n->nkids = params.n;
}

static jnode *parse_macro(parser *P, int line)
{
    jnode *n = nnew(P, S_MACRO, line);
    const jtok *t = expect_name(P);
    n->name = tok_cstr(P, t), n->name_n = t->n;
    bind_name(P, n->name, n->name_n);
    parse_signature(P, n);
    end_block(P);
    static const char *const ends[] = {"endmacro", NULL};
    int loops = P->loop_depth;
    P->loop_depth = 0;
    n->a = parse_body(P, ends);
    P->loop_depth = loops;
    expect_end_tag(P, "endmacro");
    return n;
}

static jnode *parse_call_block(parser *P, int line)
{
    jnode *n = nnew(P, S_CALL_BLOCK, line);
    n->name = "caller", n->name_n = 6;
    if (is_op(P, "(")) parse_signature(P, n);
    n->b = parse_expression(P, 1);
    if (n->b->kind != N_CALL) fail(P, IV_E_FORMAT, line, "expected call");
    end_block(P);
    static const char *const ends[] = {"endcall", NULL};
    int loops = P->loop_depth;
    P->loop_depth = 0;
    n->a = parse_body(P, ends);
    P->loop_depth = loops;
    expect_end_tag(P, "endcall");
    return n;
}

static jnode *parse_statement(parser *P)
{
    const jtok *t = cur(P);
    int line = t->line;
    if (t->kind != T_NAME) unexpected(P, "a statement name");
    advance(P);
    enter(P);
    jnode *n;
    if (tok_is(t, T_NAME, "for")) n = parse_for(P, line);
    else if (tok_is(t, T_NAME, "if")) n = parse_if(P, line);
    else if (tok_is(t, T_NAME, "set")) n = parse_set(P, line);
    else if (tok_is(t, T_NAME, "macro")) n = parse_macro(P, line);
    else if (tok_is(t, T_NAME, "call")) n = parse_call_block(P, line);
    else if (tok_is(t, T_NAME, "break") || tok_is(t, T_NAME, "continue")) {
        if (!P->loop_depth) fail(P, IV_E_FORMAT, line, "'%.*s' outside of a loop", (int)t->n, t->s);
        n = nnew(P, t->n == 5 ? S_BREAK : S_CONTINUE, line);
        end_block(P);
    } else if (tok_is(t, T_NAME, "generation")) {
        /* transformers' AssistantTracker: the body renders as is, in a
         * caller scope of its own. */
        end_block(P);
        static const char *const ends[] = {"endgeneration", NULL};
        n = nnew(P, S_CALL_BLOCK, line);
        n->a = parse_body(P, ends);
        expect_end_tag(P, "endgeneration");
    } else if (tok_is(t, T_NAME, "filter")) {
        n = nnew(P, S_FILTER_BLOCK, line);
        n->c = parse_filter(P, NULL, 1);
        end_block(P);
        static const char *const ends[] = {"endfilter", NULL};
        n->a = parse_body(P, ends);
        expect_end_tag(P, "endfilter");
    } else {
        static const char *const known[] = {"include", "extends", "import", "from", "block", "with", "autoescape",
                                            "do", "trans", "pluralize", "endblock", NULL};
        for (int i = 0; known[i]; i++)
            if (tok_is(t, T_NAME, known[i]))
                fail(P, IV_E_UNSUPPORTED, line, "statement \"%s\" is not supported", known[i]);
        static const char *const ends[] = {"endfor", "endif", "else", "elif", "endset", "endmacro", "endcall",
                                           "endgeneration", "endfilter", "endraw", NULL};
        for (int i = 0; ends[i]; i++)
            if (tok_is(t, T_NAME, ends[i])) fail(P, IV_E_FORMAT, line, "unexpected '%s'", ends[i]);
        fail(P, IV_E_UNSUPPORTED, line, "statement \"%.*s\" is not supported", (int)(t->n > 40 ? 40 : t->n), t->s);
    }
    leave(P);
    return n;
}

static jnode *parse_body(parser *P, const char *const *ends)
{
    int line = cur(P)->line;
    nvec kids = {0};
    for (;;) {
        const jtok *t = cur(P);
        if (t->kind == T_EOF) {
            if (ends) fail(P, IV_E_FORMAT, t->line, "unexpected end of template, expected '%s'", ends[0]);
            break;
        }
        if (t->kind == T_DATA) {
            jnode *n = nnew(P, S_TEXT, t->line);
            n->value = jv_str(t->s, t->n);
            nvec_push(P, &kids, n, NULL);
            advance(P);
        } else if (t->kind == T_VAR_BEGIN) {
            advance(P);
            jnode *n = nnew(P, S_PRINT, t->line);
            n->a = parse_tuple(P, 1, 0, NULL);
            expect_kind(P, T_VAR_END, "end of print statement");
            nvec_push(P, &kids, n, NULL);
        } else if (t->kind == T_BLOCK_BEGIN) {
            const jtok *nm = peek(P, 1);
            int is_end = 0;
            for (int i = 0; ends && ends[i]; i++)
                if (tok_is(nm, T_NAME, ends[i])) is_end = 1;
            if (is_end) break;
            advance(P);
            nvec_push(P, &kids, parse_statement(P), NULL);
        } else {
            unexpected(P, "template data or a tag");
        }
    }
    jnode *b = nnew(P, S_BODY, line);
    b->kids = kids.v, b->nkids = kids.n;
    return b;
}

static int is_bound(parser *P, const char *s, size_t n)
{
    if ((n == 6 && !memcmp(s, "caller", 6)) || jg_is_global(s, n)) return 1;
    for (int i = 0; i < P->bound.count; i++)
        if (P->bound.n[i] == n && !memcmp(P->bound.s[i], s, n)) return 1;
    return 0;
}

int jp_parse(iv_jinja *t, const jtok *toks, size_t ntok, iv_err *err)
{
    parser P = {.A = &t->arena, .t = toks, .ntok = ntok, .err = err};
    if (setjmp(P.jb)) return -1;
    t->root = parse_body(&P, NULL);
    for (int i = 0; i < P.ncalls; i++) {
        const jnode *callee = P.calls[i]->a;
        if (!is_bound(&P, callee->name, callee->name_n))
            fail(&P, IV_E_UNSUPPORTED, callee->line, "function \"%s\" is not supported", callee->name);
    }
    return 0;
}
