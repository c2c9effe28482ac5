/* Python's two string formatters as templates reach them: `str % args`
 * (printf-style, also the `format` filter) and str.format / format_map
 * (the format-spec mini-language, with field lookups going through the
 * sandbox's getattr and getitem as jinja2's SandboxedFormatter does).
 * Widths count code points; errors raise where Python raises. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_internal.h"

/* ---- shared pieces ---- */

/* Appends s padded to width code points: align '<' pads right, '>' left,
 * '^' both (the odd one right, as Python centres). */
static void pad(iv_strbuf *b, const char *s, size_t n, int64_t width, uint32_t fill, char align)
{
    int64_t len = (int64_t)ju_len(s, n), gap = width > len ? width - len : 0;
    int64_t left = align == '<' ? 0 : align == '^' ? gap / 2 : gap;
    for (int64_t i = 0; i < left; i++) ju_put(b, fill);
    iv_sb_append(b, s, n);
    for (int64_t i = left; i < gap; i++) ju_put(b, fill);
}

/* The first prec code points of s (all when prec < 0). */
static size_t cut(const char *s, size_t n, int64_t prec)
{
    if (prec < 0) return n;
    size_t i = 0;
    for (int64_t k = 0; k < prec && i < n; k++) ju_next(s, n, &i);
    return i;
}

/* ascii(): repr with every non-ASCII code point escaped. */
static void ascii_of(jrender *R, iv_strbuf *b, jv v)
{
    iv_strbuf *r = jr_sb(R);
    jp_repr(R, r, v);
    for (size_t i = 0; i < r->len;) {
        uint32_t c = ju_next(r->data, r->len, &i);
        char e[16];
        if (c < 0x80) iv_sb_putc(b, (char)c);
        else {
            snprintf(e, sizeof e, c < 0x100 ? "\\x%02x" : c < 0x10000 ? "\\u%04x" : "\\U%08x", (unsigned)c);
            iv_sb_puts(b, e);
        }
    }
}

/* Digits of |v| in base 2, 8, 10 or 16. */
static void int_digits(char *out, uint64_t u, int base, int upper)
{
    char tmp[72];
    int n = 0;
    const char *dig = upper ? "0123456789ABCDEF" : "0123456789abcdef";
    do {
        tmp[n++] = dig[u % (unsigned)base];
        u /= (unsigned)base;
    } while (u);
    for (int i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
    out[n] = 0;
}

/* Fixed, exponent or general notation of |f| with C's printf (glibc's
 * conversions are correctly rounded, as Python's are); inf and nan as
 * Python spells them. */
static void float_body(char *out, size_t cap, double f, char type, int prec, int alt)
{
    f = fabs(f);
    if (isinf(f) || isnan(f)) {
        int up = type == 'E' || type == 'F' || type == 'G';
        snprintf(out, cap, "%s", isinf(f) ? (up ? "INF" : "inf") : (up ? "NAN" : "nan"));
        return;
    }
    char fmt[16];
    snprintf(fmt, sizeof fmt, "%%%s.*%c", alt ? "#" : "", type);
    snprintf(out, cap, fmt, prec, f);
}

/* ---- str % args ---- */

typedef struct pctx {
    jrender *R;
    const jnode *at;
    jv args;
    const jlist *tuple; /* args when a tuple */
    int has_dict;       /* args is a mapping (Python: anything with __getitem__ but str and tuple) */
    int64_t arglen, argidx;
} pctx;

static jv next_arg(pctx *c)
{
    if (c->argidx < c->arglen) {
        int64_t i = c->argidx++;
        return c->arglen < 0 ? c->args : c->tuple->items[i];
    }
    jr_fail(c->R, c->at, "%s", "not enough arguments for format string");
}

static int64_t int_of(pctx *c, jv v, char type, int any_real)
{
    if (v.kind == JV_INT || v.kind == JV_BOOL) return v.u.i;
    if (v.kind == JV_FLOAT && any_real) {
        if (isinf(v.u.f)) jr_fail(c->R, c->at, "%s", "cannot convert float infinity to integer");
        if (isnan(v.u.f)) jr_fail(c->R, c->at, "%s", "cannot convert float NaN to integer");
        return (int64_t)trunc(v.u.f); /* callers take |v| >= 2^63 as digits first */
    }
    if (any_real) jr_fail(c->R, c->at, "%%%c format: a real number is required, not %s", type, jv_type_name(v));
    jr_fail(c->R, c->at, "%%%c format: an integer is required, not %s", type, jv_type_name(v));
}

/* Sign, prefix and digits laid out by the % flags: '-' left-justifies, '0'
 * pads with zeros after the sign and prefix. */
static void put_number(iv_strbuf *b, const char *sign_prefix, const char *body, int64_t width, int left, int zero)
{
    size_t hn = strlen(sign_prefix), bn = strlen(body);
    int64_t len = (int64_t)(hn + bn), gap = width > len ? width - len : 0;
    if (left) {
        iv_sb_puts(b, sign_prefix);
        iv_sb_puts(b, body);
        for (int64_t i = 0; i < gap; i++) iv_sb_putc(b, ' ');
        return;
    }
    if (!zero)
        for (int64_t i = 0; i < gap; i++) iv_sb_putc(b, ' ');
    iv_sb_puts(b, sign_prefix);
    if (zero)
        for (int64_t i = 0; i < gap; i++) iv_sb_putc(b, '0');
    iv_sb_puts(b, body);
}

static int64_t read_num(const char *s, size_t n, size_t *i)
{
    int64_t v = 0;
    while (*i < n && s[*i] >= '0' && s[*i] <= '9') {
        if (v < 100000000) v = v * 10 + (s[*i] - '0');
        (*i)++;
    }
    return v;
}

jv jfmt_percent(jrender *R, const jnode *at, jv fmt, jv args)
{
    pctx c = {R, at, args, NULL, 0, -1, -2};
    if (args.kind == JV_LIST && (args.u.l->flags & JL_TUPLE)) {
        c.tuple = args.u.l;
        c.arglen = (int64_t)args.u.l->n;
        c.argidx = 0;
    } else if (args.kind == JV_DICT || args.kind == JV_LIST || args.kind == JV_UNDEF) {
        c.has_dict = 1;
    }
    const char *s = fmt.u.s;
    size_t n = fmt.n, i = 0;
    iv_strbuf *b = jr_sb(R);
    while (i < n) {
        const char *pct = memchr(s + i, '%', n - i);
        if (!pct) {
            iv_sb_append(b, s + i, n - i);
            break;
        }
        iv_sb_append(b, s + i, (size_t)(pct - (s + i)));
        size_t start = (size_t)(pct - s);
        i = start + 1;
        jv arg = {0};
        int have_arg = 0;
        if (i < n && s[i] == '(') {
            if (!c.has_dict) jr_fail(R, at, "%s", "format requires a mapping");
            size_t k0 = ++i;
            int depth = 1;
            while (i < n && depth) {
                if (s[i] == '(') depth++;
                else if (s[i] == ')') depth--;
                i++;
            }
            if (depth) jr_fail(R, at, "%s", "incomplete format key");
            jv key = jv_str(s + k0, i - 1 - k0);
            if (args.kind != JV_DICT) jr_fail(R, at, "%s indices must be integers or slices, not str", jv_type_name(args));
            jv *v = jd_get(args.u.d, key);
            if (!v) jr_fail(R, at, "KeyError: '%.*s'", (int)key.n, key.u.s);
            arg = *v, have_arg = 1;
            c.arglen = -1, c.argidx = -2;
        }
        int left = 0, plus = 0, space = 0, alt = 0, zero = 0;
        for (; i < n; i++) {
            char f = s[i];
            if (f == '-') left = 1;
            else if (f == '+') plus = 1;
            else if (f == ' ') space = 1;
            else if (f == '#') alt = 1;
            else if (f == '0') zero = 1;
            else break;
        }
        int64_t width = -1, prec = -1;
        if (i < n && s[i] == '*') {
            jv w = next_arg(&c);
            if (w.kind != JV_INT && w.kind != JV_BOOL) jr_fail(R, at, "%s", "* wants int");
            width = w.u.i;
            if (width < 0) left = 1, width = -width;
            if (width > 100000000) jr_fail(R, at, "%s", "width too big");
            i++;
        } else {
            width = read_num(s, n, &i);
        }
        if (i < n && s[i] == '.') {
            i++;
            if (i < n && s[i] == '*') {
                jv p = next_arg(&c);
                if (p.kind != JV_INT && p.kind != JV_BOOL) jr_fail(R, at, "%s", "* wants int");
                prec = p.u.i < 0 ? 0 : p.u.i;
                i++;
            } else {
                prec = read_num(s, n, &i);
            }
        }
        if (width > 1000000 || prec > 1000000) jr_fail(R, at, "%s", "width or precision too big");
        while (i < n && (s[i] == 'h' || s[i] == 'l' || s[i] == 'L')) i++;
        if (i >= n) jr_fail(R, at, "%s", "incomplete format");
        char type = s[i++];
        if (type == '%') {
            iv_sb_putc(b, '%');
            continue;
        }
        if (!have_arg && !strchr("sradiuoxXeEfFgGc", type)) {
            /* Python names the character before it takes an argument */
            jr_fail(R, at, "unsupported format character '%c' (0x%x) at index %zu", type, (unsigned char)type,
                    i - 1);
        }
        if (!have_arg) arg = next_arg(&c);
        char sp[8] = {0};
        switch (type) {
        case 's':
        case 'r':
        case 'a': {
            iv_strbuf *t = jr_sb(R);
            if (type == 's') jp_str(R, t, arg);
            else if (type == 'r') jp_repr(R, t, arg);
            else ascii_of(R, t, arg);
            size_t m = cut(t->data ? t->data : "", t->len, prec);
            pad(b, t->data ? t->data : "", m, width, ' ', left ? '<' : '>');
            break;
        }
        case 'd':
        case 'i':
        case 'u':
        case 'o':
        case 'x':
        case 'X': {
            int real = type == 'd' || type == 'i' || type == 'u';
            char dig[400], body[520];
            int64_t v;
            if (real && arg.kind == JV_FLOAT && isfinite(arg.u.f) && fabs(arg.u.f) >= 9.2e18) {
                /* int(f) of a big float: its exact decimal digits */
                v = arg.u.f < 0 ? -1 : 1;
                snprintf(dig, sizeof dig, "%.0f", fabs(arg.u.f));
            } else {
                v = int_of(&c, arg, type, real);
                uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
                int_digits(dig, u, type == 'o' ? 8 : real ? 10 : 16, type == 'X');
            }
            size_t dn = strlen(dig);
            int64_t zeros = prec > (int64_t)dn ? prec - (int64_t)dn : 0;
            if (zeros > 100) jr_fail(R, at, "%s", "precision too big");
            if (dn > 400) jr_fail(R, at, "%s", "number too long");
            memset(body, '0', (size_t)zeros);
            memcpy(body + zeros, dig, dn + 1);
            size_t k = 0;
            if (v < 0) sp[k++] = '-';
            else if (plus) sp[k++] = '+';
            else if (space) sp[k++] = ' ';
            if (alt && !real) sp[k++] = '0', sp[k++] = type == 'o' ? 'o' : type;
            put_number(b, sp, body, width, left, zero);
            break;
        }
        case 'e':
        case 'E':
        case 'f':
        case 'F':
        case 'g':
        case 'G': {
            if (!jv_is_number(arg)) jr_fail(R, at, "must be real number, not %s", jv_type_name(arg));
            double f = jv_num(arg);
            char body[1400];
            float_body(body, sizeof body, f, type, prec < 0 ? 6 : (int)(prec > 1000 ? 1000 : prec), alt);
            size_t k = 0;
            if (signbit(f) && !isnan(f)) sp[k++] = '-';
            else if (plus) sp[k++] = '+';
            else if (space) sp[k++] = ' ';
            put_number(b, sp, body, width, left, zero && isfinite(f));
            break;
        }
        case 'c': {
            iv_strbuf *t = jr_sb(R);
            if (arg.kind == JV_STR) {
                if (ju_len(arg.u.s, arg.n) != 1)
                    jr_fail(R, at, "%s", "%c requires an int or a unicode character, not a string of length != 1");
                iv_sb_append(t, arg.u.s, arg.n);
            } else if (arg.kind == JV_INT || arg.kind == JV_BOOL) {
                if (arg.u.i < 0 || arg.u.i > 0x10FFFF) jr_fail(R, at, "%s", "%c arg not in range(0x110000)");
                ju_put(t, (uint32_t)arg.u.i);
            } else {
                jr_fail(R, at, "%%c requires an int or a unicode character, not %s", jv_type_name(arg));
            }
            pad(b, t->data, t->len, width, ' ', left ? '<' : '>');
            break;
        }
        default:
            jr_fail(R, at, "unsupported format character '%c' (0x%x) at index %zu", type, (unsigned char)type, i - 1);
        }
        if (b->len > (64u << 20)) jr_fail(R, at, "%s", "formatted string too long");
    }
    if (c.argidx < c.arglen && !c.has_dict)
        jr_fail(R, at, "%s", "not all arguments converted during string formatting");
    return jr_sb_value(R, b);
}

/* ---- str.format ---- */

typedef struct fspec {
    uint32_t fill;
    char align; /* 0 when not given */
    char sign;  /* 0, '+', '-', ' ' */
    int z, alt, zero;
    int64_t width, prec; /* -1 when not given */
    char group;          /* 0, ',', '_' */
    char type;           /* 0 when not given */
} fspec;

static void parse_spec(jrender *R, const jnode *at, const char *s, size_t n, fspec *f)
{
    memset(f, 0, sizeof *f);
    f->fill = ' ', f->width = -1, f->prec = -1;
    size_t i = 0;
    if (n) {
        size_t j = 0;
        uint32_t cp = ju_next(s, n, &j);
        if (j < n && strchr("<>=^", s[j]) && s[j]) {
            f->fill = cp, f->align = s[j], i = j + 1;
        } else if (strchr("<>=^", s[0]) && s[0]) {
            f->align = s[0], i = 1;
        }
    }
    if (i < n && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) f->sign = s[i++];
    if (i < n && s[i] == 'z') f->z = 1, i++;
    if (i < n && s[i] == '#') f->alt = 1, i++;
    if (i < n && s[i] == '0') f->zero = 1, i++;
    if (i < n && s[i] >= '0' && s[i] <= '9') f->width = read_num(s, n, &i);
    if (i < n && (s[i] == ',' || s[i] == '_')) f->group = s[i++];
    if (i < n && (s[i] == ',' || s[i] == '_')) jr_fail(R, at, "%s", "Cannot specify both ',' and '_'.");
    if (i < n && s[i] == '.') {
        i++;
        if (i >= n || s[i] < '0' || s[i] > '9') jr_fail(R, at, "%s", "Format specifier missing precision");
        f->prec = read_num(s, n, &i);
    }
    if (i < n) f->type = s[i++];
    if (i < n) jr_fail(R, at, "%s", "Invalid format specifier");
    if (f->width > 1000000 || f->prec > 1000000) jr_fail(R, at, "%s", "Too many decimal digits in format string");
    /* '0' before the width: zeros as the fill, after the sign for numbers
     * ('=' alignment), at the default left alignment for strings. */
    if (f->zero && !f->align) f->fill = '0';
}

/* Groups the leading run of decimal (or every-4 hex/bin/oct) digits. */
static void group_digits(iv_strbuf *out, const char *d, size_t n, char sep, int every)
{
    for (size_t i = 0; i < n; i++) {
        iv_sb_putc(out, d[i]);
        size_t left = n - 1 - i;
        if (sep && left && left % (size_t)every == 0) iv_sb_putc(out, sep);
    }
}

/* Lays out a number: sign and prefix, then body, aligned per the spec
 * ('=' puts the fill between the sign and the digits). */
static void put_spec_number(iv_strbuf *b, const fspec *f, const char *head, const char *body, size_t bn)
{
    size_t hn = strlen(head);
    int64_t len = (int64_t)(hn + ju_len(body, bn)), gap = f->width > len ? f->width - len : 0;
    char align = f->align ? f->align : f->zero ? '=' : '>';
    if (align == '=') {
        iv_sb_puts(b, head);
        for (int64_t i = 0; i < gap; i++) ju_put(b, f->fill);
        iv_sb_append(b, body, bn);
        return;
    }
    int64_t left = align == '<' ? 0 : align == '^' ? gap / 2 : gap;
    for (int64_t i = 0; i < left; i++) ju_put(b, f->fill);
    iv_sb_puts(b, head);
    iv_sb_append(b, body, bn);
    for (int64_t i = left; i < gap; i++) ju_put(b, f->fill);
}

static void format_float(jrender *R, const jnode *at, iv_strbuf *b, double v, const fspec *f)
{
    char type = f->type;
    char buf[1400];
    int prec = f->prec < 0 ? 6 : (int)(f->prec > 1000 ? 1000 : f->prec);
    double a = v;
    if (type == '%') a = v * 100;
    if (!type && f->prec < 0) {
        iv_strbuf *t = jr_sb(R);
        jp_float(t, fabs(v));
        snprintf(buf, sizeof buf, "%.*s", (int)t->len, t->data);
    } else if (!type) {
        float_body(buf, sizeof buf, a, 'g', prec ? prec : 1, f->alt);
        if (isfinite(a) && !strpbrk(buf, ".e")) strcat(buf, ".0");
    } else {
        char t = type == '%' ? 'f' : type == 'n' ? 'g' : type;
        float_body(buf, sizeof buf, a, t, prec, f->alt);
        if (type == '%') strcat(buf, "%");
    }
    int neg = signbit(v) && !isnan(v);
    if (neg && f->z && !strpbrk(buf, "123456789")) neg = 0;
    char head[4] = {0};
    if (neg) head[0] = '-';
    else if (f->sign == '+') head[0] = '+';
    else if (f->sign == ' ') head[0] = ' ';
    iv_strbuf *body = jr_sb(R);
    if (f->group && isfinite(a)) {
        size_t ip = strspn(buf, "0123456789");
        group_digits(body, buf, ip, f->group, 3);
        iv_sb_puts(body, buf + ip);
    } else {
        iv_sb_puts(body, buf);
    }
    (void)at;
    put_spec_number(b, f, head, body->data, body->len);
}

static void format_value(jrender *R, const jnode *at, iv_strbuf *b, jv v, const char *spec, size_t sn)
{
    if (v.kind != JV_STR && v.kind != JV_INT && v.kind != JV_BOOL && v.kind != JV_FLOAT) {
        if (sn) jr_fail(R, at, "unsupported format string passed to %s.__format__", jv_type_name(v));
        jp_str(R, b, v);
        return;
    }
    if (v.kind == JV_BOOL && !sn) {
        jp_str(R, b, v);
        return;
    }
    fspec f;
    parse_spec(R, at, spec, sn, &f);
    if (v.kind == JV_STR) {
        if (f.type && f.type != 's') jr_fail(R, at, "Unknown format code '%c' for object of type 'str'", f.type);
        if (f.sign) jr_fail(R, at, "%s", "Sign not allowed in string format specifier");
        if (f.alt) jr_fail(R, at, "%s", "Alternate form (#) not allowed in string format specifier");
        if (f.group) jr_fail(R, at, "Cannot specify '%c' with 's'.", f.group);
        if (f.align == '=') jr_fail(R, at, "%s", "'=' alignment not allowed in string format specifier");
        pad(b, v.u.s, cut(v.u.s, v.n, f.prec), f.width, f.fill, f.align ? f.align : '<');
        return;
    }
    if (v.kind == JV_FLOAT || (f.type && strchr("eEfFgG%", f.type))) {
        if (f.type && !strchr("eEfFgGn%", f.type))
            jr_fail(R, at, "Unknown format code '%c' for object of type 'float'", f.type);
        format_float(R, at, b, jv_num(v), &f);
        return;
    }
    /* int (and bool with a spec) */
    char type = f.type ? f.type : 'd';
    if (!strchr("bcdoxXn", type)) jr_fail(R, at, "Unknown format code '%c' for object of type 'int'", type);
    if (f.prec >= 0) jr_fail(R, at, "%s", "Precision not allowed in integer format specifier");
    int64_t x = v.u.i;
    iv_strbuf *body = jr_sb(R);
    char head[8] = {0};
    size_t k = 0;
    if (type == 'c') {
        if (f.sign) jr_fail(R, at, "%s", "Sign not allowed with integer format specifier 'c'");
        if (x < 0 || x > 0x10FFFF) jr_fail(R, at, "%s", "%c arg not in range(0x110000)");
        ju_put(body, (uint32_t)x);
    } else {
        uint64_t u = x < 0 ? (uint64_t)0 - (uint64_t)x : (uint64_t)x;
        char dig[80];
        int base = type == 'b' ? 2 : type == 'o' ? 8 : (type == 'x' || type == 'X') ? 16 : 10;
        int_digits(dig, u, base, type == 'X');
        if (x < 0) head[k++] = '-';
        else if (f.sign == '+') head[k++] = '+';
        else if (f.sign == ' ') head[k++] = ' ';
        if (f.alt && base != 10) head[k++] = '0', head[k++] = type == 'X' ? 'X' : type;
        if (f.group == ',' && base != 10) jr_fail(R, at, "Cannot specify ',' with '%c'.", type);
        group_digits(body, dig, strlen(dig), f.group, base == 10 ? 3 : 4);
    }
    put_spec_number(b, &f, head, body->data, body->len);
}

typedef struct fctx {
    jrender *R;
    const jnode *at;
    jargs *a;
    const jdict *map; /* format_map's mapping */
    int auto_idx;     /* -1 once a field was numbered by hand */
    int manual;
} fctx;

/* (bounded: format strings are slices of other strings, not NUL-terminated) */
static int all_digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return n > 0;
}

static jv field_value(fctx *c, const char *s, size_t n)
{
    jrender *R = c->R;
    size_t i = 0;
    while (i < n && s[i] != '.' && s[i] != '[') i++;
    jv v;
    if (i == 0) {
        if (c->manual) jr_fail(R, c->at, "%s", "cannot switch from manual field specification to automatic field numbering");
        c->auto_idx++;
        int k = c->auto_idx - 1;
        if (c->map || k >= c->a->npos) jr_fail(R, c->at, "Replacement index %d out of range for positional args tuple", k);
        v = c->a->pos[k];
    } else if (all_digits(s, i)) {
        if (c->auto_idx) jr_fail(R, c->at, "%s", "cannot switch from automatic field numbering to manual field specification");
        c->manual = 1;
        size_t j = 0;
        int64_t k = read_num(s, i, &j);
        if (c->map || k >= c->a->npos) jr_fail(R, c->at, "Replacement index %lld out of range for positional args tuple", (long long)k);
        v = c->a->pos[k];
    } else {
        jv *p = NULL;
        if (c->map) p = jd_get_str(c->map, s, i);
        else
            for (int k = 0; k < c->a->nkw; k++)
                if (strlen(c->a->kw[k]) == i && !memcmp(c->a->kw[k], s, i)) p = &c->a->kwv[k];
        if (!p) jr_fail(R, c->at, "KeyError: '%.*s'", (int)i, s);
        v = *p;
    }
    while (i < n) {
        if (s[i] == '.') {
            size_t k0 = ++i;
            while (i < n && s[i] != '.' && s[i] != '[') i++;
            if (i == k0) jr_fail(R, c->at, "%s", "Empty attribute in format string");
            v = je_getattr(R, c->at, v, s + k0, i - k0);
        } else if (s[i] == '[') {
            size_t k0 = ++i;
            while (i < n && s[i] != ']') i++;
            if (i >= n) jr_fail(R, c->at, "%s", "Missing ']' in format string");
            if (i == k0) jr_fail(R, c->at, "%s", "Empty attribute in format string");
            size_t kn = i - k0;
            jv key = all_digits(s + k0, kn) ? jv_int(read_num(s + k0, kn, &(size_t){0})) : jv_str_copy(R, s + k0, kn);
            v = je_getitem(R, c->at, v, key);
            i++;
            if (i < n && s[i] != '.' && s[i] != '[')
                jr_fail(R, c->at, "%s", "Only '.' or '[' may follow ']' in format field specifier");
        } else {
            jr_fail(R, c->at, "%s", "Only '.' or '[' may follow ']' in format field specifier");
        }
    }
    return v; /* an undefined (a sandbox refusal too) formats as '' */
}

static void vformat(fctx *c, iv_strbuf *b, const char *s, size_t n, int depth)
{
    jrender *R = c->R;
    if (depth < 0) jr_fail(R, c->at, "%s", "Max string recursion exceeded");
    size_t i = 0;
    while (i < n) {
        char ch = s[i];
        if (ch == '}') {
            if (i + 1 < n && s[i + 1] == '}') {
                iv_sb_putc(b, '}');
                i += 2;
                continue;
            }
            jr_fail(R, c->at, "%s", "Single '}' encountered in format string");
        }
        if (ch != '{') {
            iv_sb_putc(b, ch);
            i++;
            continue;
        }
        if (i + 1 < n && s[i + 1] == '{') {
            iv_sb_putc(b, '{');
            i += 2;
            continue;
        }
        /* a field: up to the matching '}' */
        size_t f0 = ++i;
        int nest = 1;
        size_t colon = 0, bang = 0;
        while (i < n) {
            if (s[i] == '[' && !colon) {
                while (i < n && s[i] != ']') i++;
                if (i >= n) break;
            } else if (s[i] == '{') {
                nest++;
            } else if (s[i] == '}') {
                if (--nest == 0) break;
            } else if (s[i] == ':' && !colon && nest == 1) {
                colon = i;
            } else if (s[i] == '!' && !colon && !bang && nest == 1) {
                bang = i;
            }
            i++;
        }
        if (i >= n) jr_fail(R, c->at, "%s", nest > 1 || colon ? "unmatched '{' in format spec" : "expected '}' before end of string");
        size_t f1 = i++;
        size_t name_end = bang ? bang : colon ? colon : f1;
        char conv = 0;
        if (bang) {
            size_t ce = colon ? colon : f1;
            if (ce != bang + 2) jr_fail(R, c->at, "%s", "expected ':' after conversion specifier");
            conv = s[bang + 1];
            if (conv != 's' && conv != 'r' && conv != 'a')
                jr_fail(R, c->at, "Unknown conversion specifier %c", conv);
        }
        jv v = field_value(c, s + f0, name_end - f0);
        if (conv) {
            iv_strbuf *t = jr_sb(R);
            if (conv == 's') jp_str(R, t, v);
            else if (conv == 'r') jp_repr(R, t, v);
            else ascii_of(R, t, v);
            v = jr_sb_value(R, t);
        }
        iv_strbuf *spec = jr_sb(R);
        if (colon) vformat(c, spec, s + colon + 1, f1 - colon - 1, depth - 1);
        format_value(R, c->at, b, v, spec->data ? spec->data : "", spec->len);
        if (b->len > (64u << 20)) jr_fail(R, c->at, "%s", "formatted string too long");
    }
}

jv jfmt_format(jrender *R, const jnode *at, jv fmt, jargs *a, const jdict *map)
{
    fctx c = {R, at, a, map, 0, 0};
    iv_strbuf *b = jr_sb(R);
    vformat(&c, b, fmt.u.s, fmt.n, 2);
    return jr_sb_value(R, b);
}
