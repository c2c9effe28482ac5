/* The Jinja renderer's private types: tokens, the syntax tree, values and
 * the render state, shared by the lexer, parser, evaluator, filters, tests,
 * methods and the Python printers (jinja_*.c). Nothing here is public API.
 *
 * Ownership: everything a compile makes lives in the template's arena and
 * everything a render makes lives in the render's arena, freed in one go;
 * values are plain structs copied by value, so nothing is refcounted.
 * Errors unwind with longjmp to the compile or render entry point (the
 * arenas hold all memory, so nothing leaks on that path). */
#ifndef IV_CHAT_JINJA_INTERNAL_H
#define IV_CHAT_JINJA_INTERNAL_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/strbuf.h"
#include "chat/jinja.h"

/* ---- arena -------------------------------------------------------------- */

typedef struct jchunk jchunk;
typedef struct jarena {
    jchunk *head;
    size_t used, cap; /* cap: bytes this arena may hold before an error */
} jarena;

/* ---- values ------------------------------------------------------------- */

typedef enum {
    JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT,
    JV_NS,    /* namespace(): the one mutable mapping templates may write */
    JV_MACRO, /* a {% macro %} or a {% call %} block's caller */
    JV_FUNC,  /* a global (range, namespace, ...) or a bound method */
    JV_LOOP,  /* the `loop` variable of a for loop */
} jv_kind;

/* List flags: printed as a tuple, or an iterator jinja2 hands back from a
 * filter (map, select, ...) that Python cannot len() or index. */
enum { JL_TUPLE = 1, JL_GEN = 2, JL_GROUP = 4 /* groupby's (grouper, list): a tuple with those attributes */ };

typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jmacro jmacro;
typedef struct jfunc jfunc;
typedef struct jloop jloop;

typedef struct jv {
    uint8_t kind;
    union {
        int64_t i; /* JV_BOOL (0/1), JV_INT */
        double f;
        const char *s; /* JV_STR; JV_UNDEF: the name, or NULL */
        jlist *l;
        jdict *d; /* JV_DICT, JV_NS */
        jmacro *m;
        jfunc *fn;
        jloop *lp;
    } u;
    size_t n; /* JV_STR, JV_UNDEF name: bytes */
    const char *why; /* JV_UNDEF: the error to raise when used (sandbox refusals) */
} jv;

struct jlist {
    jv *items;
    size_t n, cap;
    int flags;
};
struct jdict {
    jv *keys, *vals;
    size_t n, cap;
};

/* ---- tokens ------------------------------------------------------------- */

typedef enum {
    T_DATA, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END,
    T_NAME, T_STRING, T_INT, T_FLOAT, T_OP, T_EOF,
} jtok_kind;

typedef struct jtok {
    jtok_kind kind;
    int line;
    const char *s; /* text (T_STRING: unescaped value; T_OP: operator) */
    size_t n;
    int64_t i;
    double f;
} jtok;

/* ---- syntax tree -------------------------------------------------------- */

typedef enum {
    /* expressions */
    N_CONST, N_NAME, N_LIST, N_TUPLE, N_DICT, N_GETATTR, N_GETITEM, N_SLICE,
    N_CALL, N_FILTER, N_TEST, N_NEG, N_POS, N_NOT, N_BIN, N_COMPARE, N_AND,
    N_OR, N_CONDEXPR, N_CONCAT,
    /* statements */
    S_TEXT, S_PRINT, S_IF, S_FOR, S_SET, S_SET_BLOCK, S_MACRO, S_CALL_BLOCK,
    S_BREAK, S_CONTINUE, S_BODY, S_FILTER_BLOCK,
} jnode_kind;

typedef struct jnode jnode;
typedef struct jfilter_def jfilter_def;
typedef struct jtest_def jtest_def;

struct jnode {
    jnode_kind kind;
    int line;
    int op;           /* N_BIN: operator char code (see jinja_eval.c); N_COMPARE ops in ops[] */
    const char *name; /* N_NAME, N_GETATTR attr, N_FILTER/N_TEST, S_MACRO name */
    size_t name_n;
    jv value;         /* N_CONST */
    jnode *a, *b, *c, *d;
    jnode **kids;     /* list items, call args, statement bodies, ... */
    int nkids;
    const char **kw;  /* N_CALL/N_FILTER/N_TEST: keyword names of the kids after nargs */
    int nargs;        /* positional args among kids */
    int *ops;         /* N_COMPARE operators, nkids of them */
    const jfilter_def *filter;
    const jtest_def *test;
};

/* ---- render state ------------------------------------------------------- */

typedef struct jframe jframe;
struct jframe {
    jframe *parent;
    jdict vars;
};

struct jmacro {
    const jnode *def; /* S_MACRO (or S_CALL_BLOCK for a caller) */
    jframe *closure;  /* the scope it was defined in, which its body sees */
    jv caller;        /* the caller a {% call %} passes, or undefined */
};

/* Arguments of a filter, test, method or call: positional, then keyword. */
typedef struct jargs {
    jv *pos;
    int npos;
    const char **kw;
    jv *kwv;
    int nkw;
} jargs;

typedef struct jrender jrender;

struct jfunc {
    const char *name;
    jv self; /* bound methods: the receiver */
    jv (*call)(jrender *R, const jnode *at, jv self, jargs *a);
};

struct jloop {
    jlist *items;
    size_t index0;
    int64_t depth;
    jv last_changed; /* loop.changed()'s last arguments (a tuple), JV_UNDEF before the first call */
};

typedef jv (*jfilter_fn)(jrender *R, const jnode *at, jv v, jargs *a);
typedef int (*jtest_fn)(jrender *R, const jnode *at, jv v, jargs *a);

struct jfilter_def {
    const char *name;
    jfilter_fn fn;
};
struct jtest_def {
    const char *name;
    jtest_fn fn;
};

struct iv_jinja {
    jarena arena;
    jnode *root; /* S_BODY */
};

struct jrender {
    jarena arena;
    jmp_buf jb;
    iv_err *err;
    iv_strbuf *out;    /* the buffer being written (macro calls swap it) */
    iv_strbuf result;  /* the render's output until it succeeds */
    long steps;
    int depth;
    jframe *root;
    /* Scratch buffers from jr_sb, freed when the render ends either way. */
    iv_strbuf **bufs;
    size_t nbufs, capbufs;
};

/* A scratch string buffer that lives until the render ends. */
iv_strbuf *jr_sb(jrender *R);
/* The buffer's bytes as a string value (raises on out-of-memory). */
jv jr_sb_value(jrender *R, iv_strbuf *b);

/* Raise a runtime error: IV_E_INVALID with "chat template line N: ...". */
_Noreturn void jr_fail(jrender *R, const jnode *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- arena (jinja_value.c) ---------------------------------------------- */
void ja_init(jarena *a, size_t cap);
void ja_free(jarena *a);
/* NULL when the arena is full or malloc fails. */
void *ja_alloc(jarena *a, size_t n);
void *jr_alloc(jrender *R, size_t n); /* raises on failure */

/* ---- values (jinja_value.c) --------------------------------------------- */
jv jv_undef(const char *name, size_t n);
jv jv_none(void);
jv jv_bool(int b);
jv jv_int(int64_t i);
jv jv_float(double f);
jv jv_str(const char *s, size_t n); /* borrows s */
jv jv_str_copy(jrender *R, const char *s, size_t n);
jv jv_cstr(const char *s);
jv jv_list_new(jrender *R, size_t cap);
jv jv_dict_new(jrender *R);
void jl_push(jrender *R, jlist *l, jv v);
void jd_set(jrender *R, jdict *d, jv k, jv v);
/* Pointer to the value of key k, NULL if absent. */
jv *jd_get(const jdict *d, jv k);
jv *jd_get_str(const jdict *d, const char *s, size_t n);
jv jv_from_json(jrender *R, const void *cjson);

int jv_truthy(jv v);
int jv_equal(jv a, jv b);
/* Python ordering (<0, 0, >0); raises on incomparable types. */
int jv_compare(jrender *R, const jnode *at, jv a, jv b);
int jv_is_number(jv v); /* bool, int or float */
double jv_num(jv v);
const char *jv_type_name(jv v);
/* Iterates like Python's iter(): list items, dict keys, str characters,
 * nothing for undefined; raises otherwise. */
jlist *jv_iter(jrender *R, const jnode *at, jv v);
/* Python's stable sort with cmp (<0, 0, >0); cmp may raise. */
typedef int (*jv_cmp_fn)(jrender *R, const jnode *at, const jv *a, const jv *b, void *ctx);
void jv_sort(jrender *R, const jnode *at, jv *items, size_t n, jv_cmp_fn cmp, void *ctx);
/* Python len(); raises where Python does. */
int64_t jv_len(jrender *R, const jnode *at, jv v);
/* Raise if v is undefined (an operation jinja2's Undefined refuses). */
void jv_check_defined(jrender *R, const jnode *at, jv v);

/* ---- UTF-8 code points -------------------------------------------------- */
/* Decodes the code point at s[*i] (advancing *i); bad bytes decode as
 * themselves, one byte each, so no input is ever refused. */
uint32_t ju_next(const char *s, size_t n, size_t *i);
size_t ju_len(const char *s, size_t n);
void ju_put(iv_strbuf *b, uint32_t cp);
int ju_isspace(uint32_t cp);

/* Python's case data beyond utf8proc (jinja_unicase.c, generated): the
 * full mapping of cp when it has several code points (kind 'U', 'L', 'T',
 * or 'F' where casefold differs from lower), its count or 0; and the
 * classes str methods test. */
int ju_case_full(uint32_t cp, char kind, uint32_t out[3]);
int ju_is_upper(uint32_t cp);
int ju_is_lower(uint32_t cp);
int ju_is_cased(uint32_t cp);
int ju_is_case_ignorable(uint32_t cp);
/* ---- Python printing (jinja_pyrepr.c) ----------------------------------- */
void jp_str(jrender *R, iv_strbuf *b, jv v);  /* str(v) */
void jp_repr(jrender *R, iv_strbuf *b, jv v); /* repr(v) */
void jp_float(iv_strbuf *b, double f);        /* repr(float) */
int jp_printable(uint32_t cp);                /* str.isprintable() of one code point */
/* json.dumps(v, ensure_ascii, indent, separators, sort_keys): indent
 * NULL = none; item_sep/key_sep NULL = the default for indent; flags
 * JP_SORT_KEYS, JP_ASCII (ensure_ascii=True). */
enum { JP_SORT_KEYS = 1, JP_ASCII = 2 };
void jp_json(jrender *R, const jnode *at, iv_strbuf *b, jv v, const char *indent, size_t indent_n,
             const char *item_sep, const char *key_sep, int flags, int level);
jv jv_to_str(jrender *R, jv v); /* str(v) as a value */

/* ---- evaluation (jinja_eval.c) ------------------------------------------ */
jv je_eval(jrender *R, jframe *f, const jnode *n);
jv je_call(jrender *R, const jnode *at, jv callee, jargs *a);
jv je_getattr(jrender *R, const jnode *at, jv obj, const char *name, size_t n);
jv je_getitem(jrender *R, const jnode *at, jv obj, jv key);
void je_step(jrender *R, const jnode *at);
/* Arguments by position or keyword: NULL when not given. */
jv *ja_arg(jargs *a, int pos, const char *kw);

/* ---- filters, tests, methods -------------------------------------------- */
const jfilter_def *jf_find(const char *name, size_t n);
const jtest_def *jt_find(const char *name, size_t n);
jv jf_apply(jrender *R, const jnode *at, const char *name, jv v, jargs *a); /* by name, for map() */
int jt_apply(jrender *R, const jnode *at, const char *name, jv v, jargs *a);
/* The attribute `name` of a str, list or dict (a bound method), or undefined. */
jv jm_method(jrender *R, jv self, const char *name, size_t n);
/* str.strip family (which: 1 left, 2 right, 3 both; chars none = spaces)
 * and str.replace (count < 0: all), shared with the filters. */
jv jm_strip(jrender *R, const jnode *at, jv s, jv chars, int which);
jv jm_replace(jrender *R, const jnode *at, jv self, jv old, jv new_, int64_t count);
/* Python's `fmt % args` and fmt.format(*a) / fmt.format_map(map)
 * (jinja_format.c); map NULL for format. */
jv jfmt_percent(jrender *R, const jnode *at, jv fmt, jv args);
jv jfmt_format(jrender *R, const jnode *at, jv fmt, jargs *a, const jdict *map);
/* A global function by name (range, namespace, dict, ...), or undefined. */
jv jg_global(const char *name, size_t n);
int jg_is_global(const char *name, size_t n);

/* ---- lexer and parser --------------------------------------------------- */
/* Tokens of src (after newline normalization), terminated by T_EOF. */
int jl_lex(jarena *A, const char *src, size_t len, jtok **out, size_t *ntok, iv_err *err);
int jp_parse(iv_jinja *t, const jtok *toks, size_t ntok, iv_err *err);

#endif
