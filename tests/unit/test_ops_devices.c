/* Every op on every op table this machine has, against the CPU FP32 op, in
 * the spirit of ggml's test-backend-ops. Tables: cpu float32, emulated
 * bfloat16 and float16, and cuda bfloat16 / float16 when iv_ops_open finds a
 * GPU in a CUDA build (skipped otherwise).
 *
 * Each case draws FP32 inputs from a seeded RNG (the same draws on every
 * table), rounds them to the table's dtype, uploads them into device memory
 * (weights through prepare_weight when the table has one) and runs the op;
 * the CPU FP32 op then runs on the same rounded values in host memory, with
 * the same layout. Every buffer of the case (outputs, and inputs, which must
 * come back unchanged) is downloaded and compared:
 *  - cpu float32: bit for bit (it is the same function on the same data);
 *  - 16-bit tables: cosine >= 0.9999 and max |got - want| <= u * max|want|,
 *    u the dtype's unit roundoff (2^-8 for bfloat16, 2^-11 for float16): an
 *    op computes in FP32 and rounds once where it stores, and round to
 *    nearest moves a value v by at most u * |v|. FP16 subnormals add 2^-25;
 *    a real GPU adds 2^-17 * max|want| for FP32 summation order and fast
 *    intrinsics;
 *  - the emulated tables, which run the very CPU op, must moreover give
 *    exactly the reference rounded once, element for element;
 *  - elements of a strided buffer outside the op's view must keep their
 *    bytes (a kernel may not write past its view).
 * Set IV_TEST_VERBOSE=1 to print each table's worst error per op.
 *
 * The emulated device's protection is tested too: host code touching its
 * memory dies of SIGSEGV, and an op handed memory that is not the table's,
 * or a view running past its allocation, aborts. */
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ops/emu/emu_ops.h"
#include "ops/ops.h"
#include "ops_test_util.h"
#include "test.h"

/* ---- tables ---- */

#define MAX_TABLES 5

typedef struct table {
    const iv_ops *ops;
    char label[40];
    int emulated;
} table;

/* The tables present here; closed by close_tables. */
static int open_tables(table *t)
{
    static const struct {
        const char *device, *dtype;
        int required;
    } want[] = {{"cpu", "float32", 1},
                {"emulated", "bfloat16", 1},
                {"emulated", "float16", 1},
                {"cuda", "bfloat16", 0},
                {"cuda", "float16", 0}};
    int n = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        iv_err err = {0};
        const iv_ops *ops = iv_ops_open(want[i].device, want[i].dtype, &err);
        if (!ops) {
            /* No GPU, or no CUDA build: those tables are optional. */
            if (want[i].required) iv_test_fail(__FILE__, __LINE__, "%s %s: %s", want[i].device, want[i].dtype, err.msg);
            continue;
        }
        t[n].ops = ops;
        t[n].emulated = ops->device == IV_EMULATED;
        snprintf(t[n].label, sizeof t[n].label, "%s/%s", want[i].device, want[i].dtype);
        n++;
    }
    return n;
}

static void close_tables(table *t, int n)
{
    for (int i = 0; i < n; i++) iv_ops_close(t[i].ops);
}

/* ---- one case on one table ---- */

#define MAX_BUFS 16

/* An activation buffer [rows, ld] with the op's view at column col. */
typedef struct abuf {
    const char *name;
    int64_t rows, cols, col, ld;
    float *host;        /* the reference's copy: view rounded to dt, the rest NaN */
    unsigned char *enc; /* host in dt, as uploaded */
    void *dev;
} abuf;

/* A weight: host FP32 (rounded to dt) and the table's copy. */
typedef struct wbuf {
    float *host;
    iv_tensor ht;
    const iv_tensor *dev;
} wbuf;

typedef struct dctx {
    const iv_ops *ops, *cpu;
    iv_dtype dt;
    const char *label;
    int emulated;
    int broken; /* setting the case up failed: skip running and checking it */
    char what[160];
    abuf *bufs[MAX_BUFS];
    int n_bufs;
    wbuf *wbufs[MAX_BUFS];
    int n_wbufs;
    void *devs[MAX_BUFS];
    int n_devs;
    /* Worst case over the op's cases: error / tolerance, with both. */
    double worst_ratio, worst_err, worst_tol, min_cos;
} dctx;

static float rnd(iv_dtype dt, float v)
{
    if (dt == IV_BF16) return iv_bf16_to_f32(iv_f32_to_bf16(v));
    if (dt == IV_F16) return iv_f16_to_f32(iv_f32_to_f16(v));
    return v;
}

static void encode(void *dst, const float *src, iv_dtype dt, int64_t n)
{
    uint16_t *h = dst;
    if (dt == IV_F32)
        memcpy(dst, src, (size_t)n * sizeof(float));
    else if (dt == IV_BF16)
        for (int64_t i = 0; i < n; i++) h[i] = iv_f32_to_bf16(src[i]);
    else
        for (int64_t i = 0; i < n; i++) h[i] = iv_f32_to_f16(src[i]);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) abort();
    return p;
}

static __attribute__((format(printf, 2, 3))) void case_begin(dctx *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->what, sizeof d->what, fmt, ap);
    va_end(ap);
    d->broken = 0;
}

/* Device memory holding a copy of host (freed at case_end). */
static void *dev_put(dctx *d, const void *host, size_t bytes)
{
    void *p = d->ops->dev_alloc(d->ops, bytes);
    if (!p || d->n_devs == MAX_BUFS) {
        iv_test_fail(__FILE__, __LINE__, "%s %s: dev_alloc of %zu bytes failed", d->label, d->what, bytes);
        d->ops->dev_free(d->ops, p);
        d->broken = 1;
        return NULL;
    }
    if (bytes) d->ops->upload(d->ops, p, host, bytes);
    d->devs[d->n_devs++] = p;
    return p;
}

static void abuf_upload(dctx *d, abuf *b)
{
    if (!b->dev) return;
    for (int64_t t = 0; t < b->rows; t++)
        for (int64_t c = 0; c < b->cols; c++)
            b->host[t * b->ld + b->col + c] = rnd(d->dt, b->host[t * b->ld + b->col + c]);
    encode(b->enc, b->host, d->dt, b->rows * b->ld);
    d->ops->upload(d->ops, b->dev, b->enc, (size_t)(b->rows * b->ld) * iv_dtype_size(d->dt));
}

/* A buffer whose view holds uniform [lo, hi) values (rounded to dt). */
static abuf *abuf_new(dctx *d, ops_rng *r, const char *name, int64_t rows, int64_t cols, int64_t col, int64_t ld,
                      float lo, float hi)
{
    if (col < 0 || col + cols > ld) abort(); /* a bad case, not a bad table */
    abuf *b = xmalloc(sizeof *b);
    *b = (abuf){.name = name, .rows = rows, .cols = cols, .col = col, .ld = ld};
    b->host = xmalloc((size_t)(rows * ld) * sizeof(float));
    b->enc = xmalloc((size_t)(rows * ld) * iv_dtype_size(d->dt));
    for (int64_t i = 0; i < rows * ld; i++) b->host[i] = NAN;
    for (int64_t t = 0; t < rows; t++)
        for (int64_t c = 0; c < cols; c++) b->host[t * ld + col + c] = ops_rng_uniform(r, lo, hi);
    b->dev = d->ops->dev_alloc(d->ops, (size_t)(rows * ld) * iv_dtype_size(d->dt));
    if (!b->dev) {
        iv_test_fail(__FILE__, __LINE__, "%s %s: dev_alloc failed", d->label, d->what);
        d->broken = 1;
    }
    abuf_upload(d, b);
    if (d->n_bufs == MAX_BUFS) abort();
    d->bufs[d->n_bufs++] = b;
    return b;
}

static iv_view hview(const abuf *b) { return iv_view_make(b->host + b->col, IV_F32, b->rows, b->cols, b->ld); }

static iv_view dview(const dctx *d, const abuf *b)
{
    return iv_view_make((char *)b->dev + (size_t)b->col * iv_dtype_size(d->dt), d->dt, b->rows, b->cols, b->ld);
}

/* A weight [rows, cols] (1-D [cols] when rows is 0) uniform in [lo, hi). */
static wbuf *wbuf_new(dctx *d, ops_rng *r, int64_t rows, int64_t cols, float lo, float hi, int linear)
{
    const int64_t n = (rows ? rows : 1) * cols;
    wbuf *w = xmalloc(sizeof *w);
    w->host = xmalloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) w->host[i] = rnd(d->dt, ops_rng_uniform(r, lo, hi));
    w->ht = rows ? iv_tensor_2d(w->host, rows, cols) : iv_tensor_1d(w->host, cols);
    w->dev = &w->ht; /* tables without prepare_weight read host weights */
    if (d->ops->prepare_weight) {
        iv_err err = {0};
        w->dev = d->ops->prepare_weight(d->ops, &w->ht, linear, &err);
        if (!w->dev) {
            iv_test_fail(__FILE__, __LINE__, "%s %s: prepare_weight: %s", d->label, d->what, err.msg);
            d->broken = 1;
        }
    }
    if (d->n_wbufs == MAX_BUFS) abort();
    d->wbufs[d->n_wbufs++] = w;
    return w;
}

/* got (downloaded) against want (the CPU FP32 op), n values. */
static void compare(dctx *d, const char *name, const float *got, const float *want, int64_t n)
{
    if (d->dt == IV_F32) {
        for (int64_t i = 0; i < n; i++)
            if (memcmp(&got[i], &want[i], sizeof(float)) != 0) {
                iv_test_fail(__FILE__, __LINE__, "%s %s %s[%lld]: %.9g, the CPU op gives %.9g", d->label, d->what, name,
                             (long long)i, got[i], want[i]);
                return;
            }
        return;
    }
    double maxref = 0;
    for (int64_t i = 0; i < n; i++) maxref = fmax(maxref, fabs(want[i]));
    const double u = d->dt == IV_BF16 ? 0x1p-8 : 0x1p-11;
    const double tol = u * maxref + (d->dt == IV_F16 ? 0x1p-25 : 0.0) + (d->emulated ? 0.0 : 0x1p-17 * maxref);
    const double err = iv_test_max_abs_diff(got, want, n), cos = iv_test_cosine(got, want, n);
    CHECK_MSG(err <= tol, "%s %s %s: max error %.4g above %.4g", d->label, d->what, name, err, tol);
    CHECK_MSG(cos >= 0.9999, "%s %s %s: cosine %.7f below 0.9999", d->label, d->what, name, cos);
    if (d->emulated) {
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < n; i++)
            if (got[i] != rnd(d->dt, want[i]) && !(isnan(got[i]) && isnan(want[i])) && bad++ == 0) first = i;
        CHECK_MSG(bad == 0, "%s %s %s: %lld values are not the FP32 result rounded once ([%lld]: %.9g, want %.9g)",
                  d->label, d->what, name, (long long)bad, (long long)first, first >= 0 ? got[first] : 0.0,
                  first >= 0 ? rnd(d->dt, want[first]) : 0.0);
    }
    if (tol > 0 && err / tol > d->worst_ratio) {
        d->worst_ratio = err / tol;
        d->worst_err = err;
        d->worst_tol = tol;
    }
    if (cos < d->min_cos) d->min_cos = cos;
}

/* A buffer's view against the reference's, and its gaps unchanged. */
static void abuf_check(dctx *d, const abuf *b)
{
    const int64_t n = b->rows * b->cols;
    float *got = xmalloc((size_t)n * sizeof(float)), *want = xmalloc((size_t)n * sizeof(float));
    iv_ops_download_f32(d->ops, dview(d, b), got);
    for (int64_t t = 0; t < b->rows; t++)
        memcpy(want + t * b->cols, b->host + t * b->ld + b->col, (size_t)b->cols * sizeof(float));
    compare(d, b->name, got, want, n);
    free(got);
    free(want);

    const size_t es = iv_dtype_size(d->dt);
    unsigned char *raw = xmalloc((size_t)(b->rows * b->ld) * es);
    d->ops->download(d->ops, raw, b->dev, (size_t)(b->rows * b->ld) * es);
    int64_t changed = 0;
    for (int64_t t = 0; t < b->rows; t++)
        for (int64_t c = 0; c < b->ld; c++)
            if ((c < b->col || c >= b->col + b->cols) &&
                memcmp(raw + (size_t)(t * b->ld + c) * es, b->enc + (size_t)(t * b->ld + c) * es, es))
                changed++;
    CHECK_MSG(changed == 0, "%s %s %s: %lld elements outside the view were written", d->label, d->what, b->name,
              (long long)changed);
    free(raw);
}

/* Checks every buffer of the case and frees everything it made. */
static void case_end(dctx *d)
{
    for (int i = 0; i < d->n_bufs; i++) {
        abuf *b = d->bufs[i];
        if (!d->broken) abuf_check(d, b);
        d->ops->dev_free(d->ops, b->dev);
        free(b->host);
        free(b->enc);
        free(b);
    }
    for (int i = 0; i < d->n_wbufs; i++) {
        free(d->wbufs[i]->host);
        free(d->wbufs[i]); /* prepared copies belong to the table until it closes */
    }
    for (int i = 0; i < d->n_devs; i++) d->ops->dev_free(d->ops, d->devs[i]);
    d->n_bufs = d->n_wbufs = d->n_devs = 0;
}

/* Runs fn on every case on every table. */
typedef void (*case_fn)(dctx *d, const void *c);

static void for_each_table(const char *op, case_fn fn, const void *cases, size_t case_size, int n_cases)
{
    table t[MAX_TABLES];
    const int n = open_tables(t);
    const char *verbose = getenv("IV_TEST_VERBOSE");
    for (int i = 0; i < n; i++) {
        dctx d = {.ops = t[i].ops,
                  .cpu = iv_cpu_ops(),
                  .dt = t[i].ops->act_dtype,
                  .label = t[i].label,
                  .emulated = t[i].emulated,
                  .min_cos = 1.0};
        for (int c = 0; c < n_cases; c++) fn(&d, (const char *)cases + (size_t)c * case_size);
        if (verbose && verbose[0] == '1' && d.dt != IV_F32)
            printf("    %-14s %-18s worst max error %.3g (tolerance %.3g), min cosine %.8f\n", op, d.label, d.worst_err,
                   d.worst_tol, d.min_cos);
    }
    close_tables(t, n);
}

#define FOR_EACH_TABLE(op, fn, cases)                                                                                  \
    for_each_table(op, fn, cases, sizeof cases[0], (int)(sizeof cases / sizeof cases[0]))

/* ---- linear ---- */

typedef struct lin_case {
    int64_t rows, in, out;
    int bias;
    iv_act act;
    int residual;         /* 0 none, 1 a buffer of y's layout, 2 y itself */
    int64_t x_pad, y_pad; /* ld - cols */
} lin_case;

static void run_linear(dctx *d, const void *cv)
{
    const lin_case *c = cv;
    ops_rng r = {1000 + (uint64_t)(c->rows * 131 + c->in * 7 + c->out)};
    case_begin(d, "linear %lldx%lld->%lld bias %d act %d residual %d", (long long)c->rows, (long long)c->in,
               (long long)c->out, c->bias, (int)c->act, c->residual);
    abuf *x = abuf_new(d, &r, "x", c->rows, c->in, c->x_pad ? 1 : 0, c->in + c->x_pad, -1.0f, 1.0f);
    abuf *y = abuf_new(d, &r, "y", c->rows, c->out, (c->y_pad + 1) / 2, c->out + c->y_pad, -1.0f, 1.0f);
    abuf *res = c->residual == 1 ? abuf_new(d, &r, "residual", c->rows, c->out, y->col, y->ld, -1.0f, 1.0f) : NULL;
    wbuf *w = wbuf_new(d, &r, c->out, c->in, -0.5f, 0.5f, 1);
    wbuf *b = c->bias ? wbuf_new(d, &r, 0, c->out, -0.5f, 0.5f, 0) : NULL;
    if (!d->broken) {
        const abuf *rb = c->residual == 1 ? res : c->residual == 2 ? y : NULL;
        d->cpu->linear(d->cpu, hview(y), hview(x), &w->ht, b ? &b->ht : NULL, c->act, rb ? hview(rb).data : NULL);
        d->ops->linear(d->ops, dview(d, y), dview(d, x), w->dev, b ? b->dev : NULL, c->act,
                       rb ? dview(d, rb).data : NULL);
    }
    case_end(d);
}

TEST(devices_linear)
{
    static const lin_case cases[] = {
        {1, 64, 48, 0, IV_ACT_NONE, 0, 0, 0},
        {7, 130, 100, 1, IV_ACT_GELU, 0, 5, 3},
        {33, 96, 72, 1, IV_ACT_SILU, 1, 2, 9},
        {17, 64, 40, 0, IV_ACT_NONE, 2, 1, 4},
        {9, 72, 56, 1, IV_ACT_GELU_TANH, 2, 0, 6},
        {5, 32, 24, 1, IV_ACT_SIGMOID, 1, 3, 0},
        {6, 40, 33, 0, IV_ACT_TANH, 0, 0, 1},
        /* Weights above the CPU's pack-per-call size: streaming and sgemm paths. */
        {3, 300, 260, 1, IV_ACT_RELU, 1, 4, 2},
        {40, 256, 384, 1, IV_ACT_GELU, 2, 8, 8},
    };
    FOR_EACH_TABLE("linear", run_linear, cases);
}

/* ---- norms ---- */

typedef struct norm_case {
    int64_t rows, cols, pad;
    int residual, w, b, in_place;
    float w_offset; /* rms_norm */
    float lo, hi;   /* x range */
} norm_case;

static void run_layer_norm(dctx *d, const void *cv)
{
    const norm_case *c = cv;
    ops_rng r = {2000 + (uint64_t)(c->rows * 31 + c->cols)};
    case_begin(d, "layer_norm %lldx%lld residual %d w %d b %d in place %d", (long long)c->rows, (long long)c->cols,
               c->residual, c->w, c->b, c->in_place);
    abuf *x = abuf_new(d, &r, "x", c->rows, c->cols, c->pad ? 1 : 0, c->cols + c->pad, c->lo, c->hi);
    abuf *y = c->in_place ? x : abuf_new(d, &r, "y", c->rows, c->cols, 0, c->cols + c->pad, -1.0f, 1.0f);
    abuf *res = c->residual ? abuf_new(d, &r, "residual", c->rows, c->cols, x->col, x->ld, -1.0f, 1.0f) : NULL;
    wbuf *w = c->w ? wbuf_new(d, &r, 0, c->cols, 0.5f, 1.5f, 0) : NULL;
    wbuf *b = c->b ? wbuf_new(d, &r, 0, c->cols, -0.5f, 0.5f, 0) : NULL;
    if (!d->broken) {
        d->cpu->layer_norm(d->cpu, hview(y), hview(x), res ? hview(res).data : NULL, w ? &w->ht : NULL,
                           b ? &b->ht : NULL, 1e-5f);
        d->ops->layer_norm(d->ops, dview(d, y), dview(d, x), res ? dview(d, res).data : NULL, w ? w->dev : NULL,
                           b ? b->dev : NULL, 1e-5f);
    }
    case_end(d);
}

TEST(devices_layer_norm)
{
    static const norm_case cases[] = {
        {5, 64, 0, 0, 1, 1, 0, 0, -2, 2},  {9, 100, 7, 1, 1, 1, 0, 0, -2, 2},
        {3, 48, 3, 1, 1, 0, 1, 0, -2, 2},  {4, 32, 0, 0, 0, 0, 1, 0, -2, 2},
        {6, 80, 2, 1, 0, 1, 0, 0, -2, 2},  {7, 96, 1, 0, 1, 1, 1, 0, 3, 5}, /* a large common offset */
        {1, 384, 0, 1, 1, 1, 1, 0, -1, 1},
    };
    FOR_EACH_TABLE("layer_norm", run_layer_norm, cases);
}

static void run_rms_norm(dctx *d, const void *cv)
{
    const norm_case *c = cv;
    ops_rng r = {3000 + (uint64_t)(c->rows * 31 + c->cols)};
    case_begin(d, "rms_norm %lldx%lld residual %d w %d w_offset %g in place %d", (long long)c->rows, (long long)c->cols,
               c->residual, c->w, c->w_offset, c->in_place);
    abuf *x = abuf_new(d, &r, "x", c->rows, c->cols, (c->pad + 1) / 2, c->cols + c->pad, c->lo, c->hi);
    abuf *y = c->in_place ? x : abuf_new(d, &r, "y", c->rows, c->cols, 1, c->cols + 1, -1.0f, 1.0f);
    abuf *res = c->residual ? abuf_new(d, &r, "residual", c->rows, c->cols, x->col, x->ld, -1.0f, 1.0f) : NULL;
    /* Zero-centred weights (Gemma) with the offset of 1, else around 1. */
    wbuf *w =
        c->w ? wbuf_new(d, &r, 0, c->cols, c->w_offset != 0 ? -0.3f : 0.5f, c->w_offset != 0 ? 0.3f : 1.5f, 0) : NULL;
    if (!d->broken) {
        d->cpu->rms_norm(d->cpu, hview(y), hview(x), res ? hview(res).data : NULL, w ? &w->ht : NULL, 1e-6f,
                         c->w_offset);
        d->ops->rms_norm(d->ops, dview(d, y), dview(d, x), res ? dview(d, res).data : NULL, w ? w->dev : NULL, 1e-6f,
                         c->w_offset);
    }
    case_end(d);
}

TEST(devices_rms_norm)
{
    static const norm_case cases[] = {
        {5, 64, 0, 0, 1, 0, 0, 0.0f, -2, 2},  {7, 96, 5, 1, 1, 0, 1, 1.0f, -2, 2}, {3, 40, 2, 0, 0, 0, 0, 0.0f, -2, 2},
        {4, 128, 0, 1, 0, 0, 1, 0.0f, -2, 2}, {2, 48, 1, 1, 1, 0, 0, 1.0f, -2, 2}, {6, 72, 3, 0, 1, 0, 1, 0.0f, 1, 3},
    };
    FOR_EACH_TABLE("rms_norm", run_rms_norm, cases);
}

typedef struct head_norm_case {
    int64_t rows;
    int n_heads, head_dim;
    int64_t extra; /* columns after the heads (k, v of a fused buffer) */
    int w;
    float w_offset;
} head_norm_case;

static void run_head_rms_norm(dctx *d, const void *cv)
{
    const head_norm_case *c = cv;
    ops_rng r = {4000 + (uint64_t)(c->n_heads * 100 + c->head_dim)};
    case_begin(d, "head_rms_norm %lld rows %d x %d w %d w_offset %g", (long long)c->rows, c->n_heads, c->head_dim, c->w,
               c->w_offset);
    const int64_t cols = (int64_t)c->n_heads * c->head_dim + c->extra;
    abuf *x = abuf_new(d, &r, "x", c->rows, cols, 1, cols + 3, -2.0f, 2.0f);
    wbuf *w = c->w ? wbuf_new(d, &r, 0, c->head_dim, c->w_offset != 0 ? -0.3f : 0.5f, c->w_offset != 0 ? 0.3f : 1.5f, 0)
                   : NULL;
    if (!d->broken) {
        d->cpu->head_rms_norm(d->cpu, hview(x), c->n_heads, c->head_dim, w ? &w->ht : NULL, 1e-6f, c->w_offset);
        d->ops->head_rms_norm(d->ops, dview(d, x), c->n_heads, c->head_dim, w ? w->dev : NULL, 1e-6f, c->w_offset);
    }
    case_end(d);
}

TEST(devices_head_rms_norm)
{
    static const head_norm_case cases[] = {
        {6, 4, 32, 16, 1, 0.0f},
        {3, 2, 64, 0, 0, 0.0f},
        {5, 8, 16, 8, 1, 1.0f},
        {1, 3, 20, 40, 1, 0.0f},
    };
    FOR_EACH_TABLE("head_rms_norm", run_head_rms_norm, cases);
}

/* ---- elementwise ---- */

typedef struct ew_case {
    int kind; /* 0 act, 1 glu, 2 add, 3 scale */
    iv_act act;
    int flag; /* act, add, scale: in place; glu: act_on_first */
    float s;
} ew_case;

static void run_elementwise(dctx *d, const void *cv)
{
    const ew_case *c = cv;
    ops_rng r = {5000 + (uint64_t)(c->kind * 64 + (int)c->act * 4 + c->flag)};
    const int64_t rows = 5, cols = 70;
    abuf *x, *y;
    switch (c->kind) {
    case 0:
        case_begin(d, "act %d in place %d", (int)c->act, c->flag);
        x = abuf_new(d, &r, "x", rows, cols, 2, cols + 5, -4.0f, 4.0f);
        y = c->flag ? x : abuf_new(d, &r, "y", rows, cols, 0, cols + 1, -1.0f, 1.0f);
        if (d->broken) break;
        d->cpu->act(d->cpu, hview(y), hview(x), c->act);
        d->ops->act(d->ops, dview(d, y), dview(d, x), c->act);
        break;
    case 1:
        case_begin(d, "glu act %d act_on_first %d", (int)c->act, c->flag);
        x = abuf_new(d, &r, "x", rows, 2 * 40, 1, 2 * 40 + 3, -3.0f, 3.0f);
        y = abuf_new(d, &r, "y", rows, 40, 2, 40 + 5, -1.0f, 1.0f);
        if (d->broken) break;
        d->cpu->glu(d->cpu, hview(y), hview(x), c->act, c->flag);
        d->ops->glu(d->ops, dview(d, y), dview(d, x), c->act, c->flag);
        break;
    case 2: {
        case_begin(d, "add in place %d", c->flag);
        abuf *a = abuf_new(d, &r, "a", rows, cols, 1, cols + 2, -2.0f, 2.0f);
        abuf *b = abuf_new(d, &r, "b", rows, cols, 0, cols, -2.0f, 2.0f);
        y = c->flag ? a : abuf_new(d, &r, "y", rows, cols, 3, cols + 4, -1.0f, 1.0f);
        if (d->broken) break;
        d->cpu->add(d->cpu, hview(y), hview(a), hview(b));
        d->ops->add(d->ops, dview(d, y), dview(d, a), dview(d, b));
        break;
    }
    default:
        case_begin(d, "scale %g in place %d", c->s, c->flag);
        x = abuf_new(d, &r, "x", rows, cols, 0, cols + 3, -2.0f, 2.0f);
        y = c->flag ? x : abuf_new(d, &r, "y", rows, cols, 1, cols + 1, -1.0f, 1.0f);
        if (d->broken) break;
        d->cpu->scale(d->cpu, hview(y), hview(x), c->s);
        d->ops->scale(d->ops, dview(d, y), dview(d, x), c->s);
        break;
    }
    case_end(d);
}

TEST(devices_act)
{
    ew_case cases[2 * (IV_ACT_SIGMOID + 1)];
    int n = 0;
    for (int a = IV_ACT_NONE; a <= IV_ACT_SIGMOID; a++)
        for (int in_place = 0; in_place < 2; in_place++) cases[n++] = (ew_case){0, (iv_act)a, in_place, 0};
    for_each_table("act", run_elementwise, cases, sizeof cases[0], n);
}

TEST(devices_glu)
{
    static const ew_case cases[] = {
        {1, IV_ACT_GELU, 1, 0}, {1, IV_ACT_GELU, 0, 0},      {1, IV_ACT_SILU, 1, 0},
        {1, IV_ACT_SILU, 0, 0}, {1, IV_ACT_GELU_TANH, 1, 0}, {1, IV_ACT_SIGMOID, 0, 0},
    };
    FOR_EACH_TABLE("glu", run_elementwise, cases);
}

TEST(devices_add_scale)
{
    static const ew_case cases[] = {
        {2, IV_ACT_NONE, 0, 0},     {2, IV_ACT_NONE, 1, 0},     {3, IV_ACT_NONE, 0, 1.0f},
        {3, IV_ACT_NONE, 1, 0.37f}, {3, IV_ACT_NONE, 0, -2.5f},
    };
    FOR_EACH_TABLE("add/scale", run_elementwise, cases);
}

/* ---- embed ---- */

typedef struct embed_case {
    int64_t vocab, hidden, rows;
} embed_case;

/* A word lookup, then a position table accumulated onto it, as models do.
 * The device stores y in between, but the words are already rounded to its
 * dtype, so the reference's FP32 sum is still rounded only once. */
static void run_embed(dctx *d, const void *cv)
{
    const embed_case *c = cv;
    ops_rng r = {6000 + (uint64_t)c->vocab};
    case_begin(d, "embed vocab %lld hidden %lld rows %lld", (long long)c->vocab, (long long)c->hidden,
               (long long)c->rows);
    abuf *y = abuf_new(d, &r, "y", c->rows, c->hidden, 1, c->hidden + 3, -1.0f, 1.0f);
    wbuf *words = wbuf_new(d, &r, c->vocab, c->hidden, -1.0f, 1.0f, 0);
    wbuf *positions = wbuf_new(d, &r, c->rows, c->hidden, -0.5f, 0.5f, 0);
    int32_t *ids = xmalloc((size_t)c->rows * sizeof(int32_t)), *pos = xmalloc((size_t)c->rows * sizeof(int32_t));
    for (int64_t t = 0; t < c->rows; t++) {
        ids[t] = (int32_t)(ops_rng_next(&r) % (uint64_t)c->vocab);
        pos[t] = (int32_t)(c->rows - 1 - t);
    }
    ids[c->rows - 1] = ids[0]; /* a repeated id */
    const int32_t *ids_dev = dev_put(d, ids, (size_t)c->rows * sizeof(int32_t));
    const int32_t *pos_dev = dev_put(d, pos, (size_t)c->rows * sizeof(int32_t));
    if (!d->broken) {
        d->cpu->embed(d->cpu, hview(y), &words->ht, ids, 0);
        d->cpu->embed(d->cpu, hview(y), &positions->ht, pos, 1);
        d->ops->embed(d->ops, dview(d, y), words->dev, ids_dev, 0);
        d->ops->embed(d->ops, dview(d, y), positions->dev, pos_dev, 1);
    }
    case_end(d);
    free(ids);
    free(pos);
}

TEST(devices_embed)
{
    static const embed_case cases[] = {{50, 40, 9}, {1000, 64, 33}, {7, 16, 1}};
    FOR_EACH_TABLE("embed", run_embed, cases);
}

/* ---- embed_bag ---- */

/* Four weighted taps per row (bilinear resampling of a position grid). */
static void run_embed_bag(dctx *d, const void *cv)
{
    const embed_case *c = cv;
    ops_rng r = {6500 + (uint64_t)c->vocab};
    case_begin(d, "embed_bag table %lld hidden %lld rows %lld", (long long)c->vocab, (long long)c->hidden,
               (long long)c->rows);
    abuf *y = abuf_new(d, &r, "y", c->rows, c->hidden, 1, c->hidden + 3, -1.0f, 1.0f);
    wbuf *grid = wbuf_new(d, &r, c->vocab, c->hidden, -1.0f, 1.0f, 0);
    int32_t *ids = xmalloc((size_t)c->rows * 4 * sizeof(int32_t));
    float *w = xmalloc((size_t)c->rows * 4 * sizeof(float));
    for (int64_t t = 0; t < c->rows * 4; t++) {
        ids[t] = (int32_t)(ops_rng_next(&r) % (uint64_t)c->vocab);
        w[t] = (float)(ops_rng_next(&r) % 1000) / 1000.0f;
    }
    const int32_t *ids_dev = dev_put(d, ids, (size_t)c->rows * 4 * sizeof(int32_t));
    const float *w_dev = dev_put(d, w, (size_t)c->rows * 4 * sizeof(float));
    if (!d->broken) {
        d->cpu->embed_bag(d->cpu, hview(y), &grid->ht, ids, w, 4);
        d->ops->embed_bag(d->ops, dview(d, y), grid->dev, ids_dev, w_dev, 4);
    }
    case_end(d);
    free(ids);
    free(w);
}

TEST(devices_embed_bag)
{
    static const embed_case cases[] = {{16, 40, 9}, {64, 64, 33}, {4, 16, 1}};
    FOR_EACH_TABLE("embed_bag", run_embed_bag, cases);
}

/* ---- rope ---- */

typedef struct rope_case {
    int n_heads, head_dim, rot_dim, interleaved;
    float attn_factor;
    int64_t extra;
    int axes; /* 0: one position per row; 2 or 3: per-frequency axes (vision rotary, mRoPE) */
} rope_case;

static void run_rope(dctx *d, const void *cv)
{
    const rope_case *c = cv;
    ops_rng r = {7000 + (uint64_t)(c->head_dim * 10 + c->rot_dim + c->interleaved)};
    case_begin(d, "rope %d heads x %d, rot %d, interleaved %d, attn_factor %g", c->n_heads, c->head_dim, c->rot_dim,
               c->interleaved, c->attn_factor);
    const int64_t rows = 11, cols = (int64_t)c->n_heads * c->head_dim + c->extra;
    abuf *x = abuf_new(d, &r, "x", rows, cols, 3, cols + 5, -2.0f, 2.0f);
    int32_t pos[3 * 11];
    for (int t = 0; t < 3 * 11; t++) pos[t] = (int32_t)(ops_rng_next(&r) % 4096);
    float inv_freq[IV_ROPE_MAX_HALF];
    for (int i = 0; i < c->rot_dim / 2; i++) inv_freq[i] = 1.0f / powf(10000.0f, (float)(2 * i) / (float)c->rot_dim);
    uint8_t section[IV_ROPE_MAX_HALF];
    for (int i = 0; i < c->rot_dim / 2; i++) section[i] = c->axes ? (uint8_t)(i % c->axes) : 0;
    const int32_t *pos_dev = dev_put(d, pos, sizeof pos);
    if (!d->broken) {
        iv_rope_args a = {hview(x), c->n_heads, c->head_dim, c->rot_dim, pos, inv_freq, c->interleaved, c->attn_factor,
                          c->axes ? section : NULL, c->axes ? 11 : 0};
        d->cpu->rope(d->cpu, &a);
        a.x = dview(d, x);
        a.pos = pos_dev;
        d->ops->rope(d->ops, &a);
    }
    case_end(d);
}

TEST(devices_rope)
{
    static const rope_case cases[] = {
        {4, 32, 32, 0, 1.0f, 0, 0}, {4, 32, 32, 1, 1.0f, 16, 0}, {3, 64, 32, 0, 0.0f, 8, 0},
        {2, 64, 16, 1, 0.8f, 0, 0}, {8, 16, 8, 0, 1.2f, 32, 0},
        {4, 32, 32, 0, 1.0f, 0, 3}, {2, 16, 16, 0, 1.0f, 4, 2},
    };
    FOR_EACH_TABLE("rope", run_rope, cases);
}

/* ---- attention ---- */

typedef struct att_case {
    const char *name;
    int n_heads, n_kv_heads, head_dim;
    int causal, window_left, window_right;
    int alibi, bias, key_mask;
    float softcap, q_range;
    int softcap_after_bias;
} att_case;

/* Mixed lengths: a 1-token sequence, an empty one, one of several 64-query blocks. */
static const int ATT_LENS[] = {5, 1, 17, 0, 70, 2};
#define ATT_SEQS (int)(sizeof ATT_LENS / sizeof ATT_LENS[0])

static void run_attention(dctx *d, const void *cv)
{
    const att_case *c = cv;
    /* Only tables with the audio tower's ops take softcap_after_bias (the
     * model needing it is refused elsewhere at load). */
    if (c->softcap_after_bias && !d->ops->conv2d) return;
    ops_rng r = {8000 + (uint64_t)(c->n_heads * 1000 + c->head_dim * 10 + c->causal)};
    case_begin(d, "attention %s", c->name);
    int32_t cu[ATT_SEQS + 1] = {0};
    int max_len = 0;
    for (int s = 0; s < ATT_SEQS; s++) {
        cu[s + 1] = cu[s] + ATT_LENS[s];
        max_len = ATT_LENS[s] > max_len ? ATT_LENS[s] : max_len;
    }
    const int64_t T = cu[ATT_SEQS], d_ = c->head_dim, qw = c->n_heads * d_, kw = c->n_kv_heads * d_;
    /* q, k, v: column windows of one fused buffer. */
    abuf *qkv = abuf_new(d, &r, "qkv", T, qw + 2 * kw, 1, qw + 2 * kw + 3, -1.0f, 1.0f);
    for (int64_t t = 0; t < T; t++)
        for (int64_t k = 0; k < qw; k++) qkv->host[t * qkv->ld + qkv->col + k] *= c->q_range;
    abuf_upload(d, qkv);
    abuf *out = abuf_new(d, &r, "out", T, qw, 2, qw + 5, -1.0f, 1.0f);

    float slopes[16];
    for (int h = 0; h < c->n_heads; h++) slopes[h] = powf(2.0f, -8.0f * (float)(h + 1) / (float)c->n_heads);
    /* Bias blocks with gaps between them, so offsets matter. */
    int64_t offs[ATT_SEQS + 1], total = 0;
    for (int s = 0; s < ATT_SEQS; s++) {
        offs[s] = total;
        total += (int64_t)c->n_heads * ATT_LENS[s] * ATT_LENS[s] + 7;
    }
    offs[ATT_SEQS] = total;
    float *bias = c->bias ? ops_rand(&r, total, -2.0f, 2.0f) : NULL;
    uint8_t mask[128];
    for (int64_t t = 0; t < T; t++) mask[t] = ops_rng_next(&r) % 4 != 0;
    mask[cu[1]] = 0; /* the 1-token sequence sees no key: a zero row */

    const int32_t *cu_dev = dev_put(d, cu, sizeof cu);
    const float *bias_dev = bias ? dev_put(d, bias, (size_t)total * sizeof(float)) : NULL;
    const int64_t *offs_dev = bias ? dev_put(d, offs, sizeof offs) : NULL;
    const uint8_t *mask_dev = c->key_mask ? dev_put(d, mask, (size_t)T) : NULL;
    if (!d->broken) {
        iv_attn_args a = {
            .q = iv_view_cols(hview(qkv), 0, qw),
            .k = iv_view_cols(hview(qkv), qw, kw),
            .v = iv_view_cols(hview(qkv), qw + kw, kw),
            .out = hview(out),
            .cu_seqlens = cu,
            .cu_seqlens_dev = cu,
            .n_seqs = ATT_SEQS,
            .max_seqlen = max_len,
            .n_heads = c->n_heads,
            .n_kv_heads = c->n_kv_heads,
            .head_dim = c->head_dim,
            .scale = 1.0f / sqrtf((float)c->head_dim),
            .causal = c->causal,
            .window_left = c->window_left,
            .window_right = c->window_right,
            .alibi_slopes = c->alibi ? slopes : NULL,
            .bias = bias,
            .bias_offsets = bias ? offs : NULL,
            .bias_offsets_dev = bias ? offs : NULL,
            .key_mask = c->key_mask ? mask : NULL,
            .softcap = c->softcap,
            .softcap_after_bias = c->softcap_after_bias,
        };
        d->cpu->attention(d->cpu, &a);
        a.q = iv_view_cols(dview(d, qkv), 0, qw);
        a.k = iv_view_cols(dview(d, qkv), qw, kw);
        a.v = iv_view_cols(dview(d, qkv), qw + kw, kw);
        a.out = dview(d, out);
        a.cu_seqlens_dev = cu_dev;
        a.bias = bias_dev;
        a.bias_offsets_dev = offs_dev;
        a.key_mask = mask_dev;
        d->ops->attention(d->ops, &a);
    }
    case_end(d);
    free(bias);
}

TEST(devices_attention)
{
    static const att_case cases[] = {
        {"bidirectional", 4, 4, 32, 0, -1, -1, 0, 0, 0, 0.0f, 1.0f, 0},
        {"causal", 3, 3, 64, 1, -1, -1, 0, 0, 0, 0.0f, 1.0f, 0},
        {"sliding window", 2, 2, 16, 0, 5, 3, 0, 0, 0, 0.0f, 1.0f, 0},
        {"causal sliding window", 4, 2, 24, 1, 4, -1, 0, 0, 0, 0.0f, 1.0f, 0},
        {"gqa", 8, 2, 16, 0, -1, -1, 0, 0, 0, 0.0f, 1.0f, 0},
        {"mqa, odd head_dim", 4, 1, 20, 1, -1, -1, 0, 0, 0, 0.0f, 1.0f, 0},
        {"alibi", 4, 4, 16, 0, -1, -1, 1, 0, 0, 0.0f, 1.0f, 0},
        {"bias", 2, 2, 32, 0, -1, -1, 0, 1, 0, 0.0f, 1.0f, 0},
        {"key mask", 2, 2, 20, 0, -1, -1, 0, 0, 1, 0.0f, 1.0f, 0},
        {"softcap", 2, 2, 16, 0, -1, -1, 0, 0, 0, 5.0f, 4.0f, 0},
        {"everything", 4, 2, 17, 1, 40, -1, 1, 1, 1, 8.0f, 3.0f, 0},
        {"everything bidirectional", 6, 3, 33, 0, 50, 20, 1, 1, 1, 8.0f, 3.0f, 0},
        {"softcap after bias (gemma4 audio)", 4, 4, 8, 1, 11, -1, 0, 1, 0, 5.0f, 4.0f, 1},
    };
    FOR_EACH_TABLE("attention", run_attention, cases);
}

/* ---- attention_rows (folded prefixes) ---- */

/* A folded batch's rows: 0..5 a cached prefix (keys only, positions 0..5),
 * then the query runs: A 6..19 (positions 6..19, below the cached rows), B
 * 20..26 (20..26, below A), C 27..31 (20..24, below A), D 32..40 (27..35,
 * below B), E 41..43 (0..2, alone). */
static const int32_t ROWS_Q_CU[] = {0, 14, 21, 26, 35, 38};
#define ROWS_RUNS 5
#define ROWS_T 44
#define ROWS_CACHED 6

static void run_attention_rows(dctx *d, const void *cv)
{
    const att_case *c = cv;
    ops_rng r = {9100 + (uint64_t)(c->n_heads * 1000 + c->head_dim * 10 + c->window_left)};
    case_begin(d, "attention_rows %s", c->name);
    int32_t pos[ROWS_T], kv_rows[160], kv_cu[ROWS_RUNS + 1] = {0};
    for (int t = 0; t < 27; t++) pos[t] = t;
    for (int t = 27; t < 32; t++) pos[t] = 20 + (t - 27);
    for (int t = 32; t < 41; t++) pos[t] = 27 + (t - 32);
    for (int t = 41; t < 44; t++) pos[t] = t - 41;
    static const int32_t ranges[ROWS_RUNS][3][2] = {
        {{0, 20}, {0, 0}, {0, 0}}, {{0, 27}, {0, 0}, {0, 0}}, {{0, 20}, {27, 32}, {0, 0}},
        {{0, 27}, {32, 41}, {0, 0}}, {{41, 44}, {0, 0}, {0, 0}}};
    int n = 0, max_keys = 0;
    for (int run = 0; run < ROWS_RUNS; run++) {
        for (int k = 0; k < 3; k++)
            for (int32_t row = ranges[run][k][0]; row < ranges[run][k][1]; row++) kv_rows[n++] = row;
        kv_cu[run + 1] = n;
        if (kv_cu[run + 1] - kv_cu[run] > max_keys) max_keys = kv_cu[run + 1] - kv_cu[run];
    }
    const int64_t Tq = ROWS_T - ROWS_CACHED, d_ = c->head_dim, qw = c->n_heads * d_, kw = c->n_kv_heads * d_;
    abuf *qkv = abuf_new(d, &r, "qkv", ROWS_T, qw + 2 * kw, 1, qw + 2 * kw + 3, -1.0f, 1.0f);
    for (int64_t t = 0; t < ROWS_T; t++)
        for (int64_t k = 0; k < qw; k++) qkv->host[t * qkv->ld + qkv->col + k] *= c->q_range;
    abuf_upload(d, qkv);
    abuf *out = abuf_new(d, &r, "out", Tq, qw, 2, qw + 5, -1.0f, 1.0f);
    const int32_t *q_cu_dev = dev_put(d, ROWS_Q_CU, sizeof ROWS_Q_CU), *kv_cu_dev = dev_put(d, kv_cu, sizeof kv_cu);
    const int32_t *rows_dev = dev_put(d, kv_rows, (size_t)n * sizeof(int32_t)), *pos_dev = dev_put(d, pos, sizeof pos);
    if (!d->broken) {
        iv_attn_rows_args a = {
            .q = iv_view_rows(iv_view_cols(hview(qkv), 0, qw), ROWS_CACHED, ROWS_T),
            .k = iv_view_cols(hview(qkv), qw, kw),
            .v = iv_view_cols(hview(qkv), qw + kw, kw),
            .out = hview(out),
            .n_runs = ROWS_RUNS,
            .q_cu = ROWS_Q_CU, .q_cu_dev = ROWS_Q_CU, .kv_cu = kv_cu, .kv_cu_dev = kv_cu, .kv_rows = kv_rows,
            .q_pos = pos + ROWS_CACHED, .kv_pos = pos,
            .max_keys = max_keys,
            .n_heads = c->n_heads, .n_kv_heads = c->n_kv_heads, .head_dim = c->head_dim,
            .scale = 1.0f / sqrtf((float)c->head_dim),
            .window_left = c->window_left,
            .softcap = c->softcap,
        };
        d->cpu->attention_rows(d->cpu, &a);
        a.q = iv_view_rows(iv_view_cols(dview(d, qkv), 0, qw), ROWS_CACHED, ROWS_T);
        a.k = iv_view_cols(dview(d, qkv), qw, kw);
        a.v = iv_view_cols(dview(d, qkv), qw + kw, kw);
        a.out = dview(d, out);
        a.q_cu_dev = q_cu_dev;
        a.kv_cu_dev = kv_cu_dev;
        a.kv_rows = rows_dev;
        a.q_pos = pos_dev + ROWS_CACHED;
        a.kv_pos = pos_dev;
        /* A table without the op is not checked: the engine never folds there. */
        if (d->ops->attention_rows) d->ops->attention_rows(d->ops, &a);
        else d->broken = 1;
    }
    case_end(d);
}

TEST(devices_attention_rows)
{
    static const att_case cases[] = {
        {"gqa", 8, 2, 16, 1, -1, -1, 0, 0, 0, 0.0f, 1.0f, 0},
        {"window", 4, 2, 24, 1, 6, -1, 0, 0, 0, 0.0f, 1.0f, 0},
        {"mqa, odd head_dim", 4, 1, 20, 1, -1, -1, 0, 0, 0, 0.0f, 1.0f, 0},
        {"softcap, wide head", 2, 2, 128, 1, 30, -1, 0, 0, 0, 5.0f, 4.0f, 0},
    };
    FOR_EACH_TABLE("attention_rows", run_attention_rows, cases);
}

/* ---- softmax, l2_normalize ---- */

typedef struct row_case {
    int kind; /* 0 softmax, 1 l2_normalize */
    int64_t rows, cols, pad;
    float range;
} row_case;

static void run_rows(dctx *d, const void *cv)
{
    const row_case *c = cv;
    ops_rng r = {9000 + (uint64_t)(c->kind * 1000 + c->cols)};
    case_begin(d, "%s %lldx%lld", c->kind ? "l2_normalize" : "softmax", (long long)c->rows, (long long)c->cols);
    abuf *x = abuf_new(d, &r, "x", c->rows, c->cols, c->pad ? 1 : 0, c->cols + c->pad, -c->range, c->range);
    if (c->kind == 1) { /* a zero row: eps keeps it zero */
        for (int64_t k = 0; k < c->cols; k++) x->host[x->ld + x->col + k] = 0.0f;
        abuf_upload(d, x);
    }
    if (!d->broken) {
        if (c->kind == 0) {
            d->cpu->softmax(d->cpu, hview(x));
            d->ops->softmax(d->ops, dview(d, x));
        } else {
            d->cpu->l2_normalize(d->cpu, hview(x));
            d->ops->l2_normalize(d->ops, dview(d, x));
        }
    }
    case_end(d);
}

TEST(devices_softmax)
{
    static const row_case cases[] = {{0, 7, 50, 3, 8.0f}, {0, 3, 130, 0, 2.0f}, {0, 4, 1, 2, 1.0f}};
    FOR_EACH_TABLE("softmax", run_rows, cases);
}

TEST(devices_l2_normalize)
{
    static const row_case cases[] = {{1, 6, 64, 2, 1.0f}, {1, 3, 384, 0, 3.0f}};
    FOR_EACH_TABLE("l2_normalize", run_rows, cases);
}

/* ---- pool ---- */

typedef struct pool_case {
    iv_pool_mode mode;
    int skip;
} pool_case;

static void run_pool(dctx *d, const void *cv)
{
    const pool_case *c = cv;
    static const int lens[] = {6, 1, 5, 9};
    static const int32_t skips[] = {2, 0, 5, 1}; /* 5 >= 5 leaves nothing: counts as 0 */
    const int n_seqs = 4;
    ops_rng r = {10000 + (uint64_t)((int)c->mode * 2 + c->skip)};
    case_begin(d, "pool mode %d skip %d", (int)c->mode, c->skip);
    int32_t cu[5] = {0};
    for (int s = 0; s < n_seqs; s++) cu[s + 1] = cu[s] + lens[s];
    const int64_t H = 48;
    abuf *x = abuf_new(d, &r, "x", cu[n_seqs], H, 1, H + 3, -2.0f, 2.0f);
    abuf *out = abuf_new(d, &r, "out", n_seqs, H, 0, H + 2, -1.0f, 1.0f);
    const int32_t *cu_dev = dev_put(d, cu, sizeof cu);
    const int32_t *skip_dev = c->skip ? dev_put(d, skips, sizeof skips) : NULL;
    if (!d->broken) {
        iv_pool_args a = {hview(out), hview(x), cu, cu, c->skip ? skips : NULL, n_seqs, c->mode};
        d->cpu->pool(d->cpu, &a);
        a = (iv_pool_args){dview(d, out), dview(d, x), cu, cu_dev, skip_dev, n_seqs, c->mode};
        d->ops->pool(d->ops, &a);
    }
    case_end(d);
}

TEST(devices_pool)
{
    pool_case cases[2 * (IV_POOL_WEIGHTED_MEAN + 1)];
    int n = 0;
    for (int m = IV_POOL_NONE; m <= IV_POOL_WEIGHTED_MEAN; m++)
        for (int skip = 0; skip < 2; skip++) cases[n++] = (pool_case){(iv_pool_mode)m, skip};
    for_each_table("pool", run_pool, cases, sizeof cases[0], n);
}

/* ---- index and FP32 outputs (routing, bias blocks) ---- */

/* A device array holding a copy of host, downloaded into a new host array by dev_get. */
static void *dev_get(dctx *d, const void *dev, size_t bytes)
{
    void *h = xmalloc(bytes);
    if (bytes) d->ops->download(d->ops, h, dev, bytes);
    return h;
}

static void check_i32(dctx *d, const char *name, const int32_t *got, const int32_t *want, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            iv_test_fail(__FILE__, __LINE__, "%s %s %s[%lld]: %d, the CPU op gives %d", d->label, d->what, name,
                         (long long)i, got[i], want[i]);
            return;
        }
}

/* FP32 results: the same bits on the CPU and the emulated tables (which run
 * the CPU op on the same values); on a GPU within 2^-17 of the largest. */
static void check_f32(dctx *d, const char *name, const float *got, const float *want, int64_t n)
{
    const int gpu = d->dt != IV_F32 && !d->emulated;
    double maxref = 0;
    for (int64_t i = 0; i < n; i++)
        if (!isnan(want[i])) maxref = fmax(maxref, fabs(want[i]));
    for (int64_t i = 0; i < n; i++) {
        const int same = (isnan(got[i]) && isnan(want[i])) || (!gpu && !memcmp(&got[i], &want[i], sizeof(float))) ||
                         (gpu && fabs((double)got[i] - want[i]) <= 0x1p-17 * maxref);
        if (!same) {
            iv_test_fail(__FILE__, __LINE__, "%s %s %s[%lld]: %.9g, the CPU op gives %.9g", d->label, d->what, name,
                         (long long)i, got[i], want[i]);
            return;
        }
    }
}

/* ---- mixture of experts ---- */

typedef struct moe_case {
    int64_t tokens;
    int experts, top_k, renormalize;
    int ties; /* 1: rows repeat their first three logits, so probabilities tie */
} moe_case;

/* Router logits [T, E] in a padded buffer, ties as the case asks. */
static abuf *moe_logits(dctx *d, ops_rng *r, const moe_case *c)
{
    abuf *x = abuf_new(d, r, "logits", c->tokens, c->experts, 1, c->experts + 3, -3.0f, 3.0f);
    if (c->ties) {
        for (int64_t t = 0; t < c->tokens; t++)
            for (int e = 3; e < c->experts; e++) x->host[t * x->ld + 1 + e] = x->host[t * x->ld + 1 + e % 3];
        for (int e = 0; e < c->experts; e++) x->host[1 + e] = 0.5f; /* a row of equal logits */
        abuf_upload(d, x);
    }
    return x;
}

static void run_moe_route(dctx *d, const void *cv)
{
    const moe_case *c = cv;
    ops_rng r = {11000 + (uint64_t)(c->tokens * 64 + c->experts * 4 + c->top_k)};
    case_begin(d, "moe_route %lld tokens, %d experts, top %d, renormalize %d, ties %d", (long long)c->tokens,
               c->experts, c->top_k, c->renormalize, c->ties);
    const int64_t slots = c->tokens * c->top_k, E = c->experts;
    abuf *x = moe_logits(d, &r, c);
    int32_t *choice = xmalloc((size_t)slots * sizeof(int32_t)), *offsets = xmalloc((size_t)(E + 1) * sizeof(int32_t));
    int32_t *order = xmalloc((size_t)slots * sizeof(int32_t));
    float *weight = xmalloc((size_t)slots * sizeof(float));
    /* Outputs start as garbage the op must overwrite whole. */
    memset(choice, 0x7f, (size_t)slots * sizeof(int32_t));
    memset(offsets, 0x7f, (size_t)(E + 1) * sizeof(int32_t));
    memset(order, 0x7f, (size_t)slots * sizeof(int32_t));
    memset(weight, 0xff, (size_t)slots * sizeof(float));
    iv_moe_route_args a = {hview(x), c->top_k, c->renormalize, dev_put(d, choice, (size_t)slots * sizeof(int32_t)),
                           dev_put(d, weight, (size_t)slots * sizeof(float)),
                           dev_put(d, offsets, (size_t)(E + 1) * sizeof(int32_t)),
                           dev_put(d, order, (size_t)slots * sizeof(int32_t))};
    if (!d->broken) {
        const iv_moe_route_args h = {hview(x), c->top_k, c->renormalize, choice, weight, offsets, order};
        d->cpu->moe_route(d->cpu, &h);
        a.logits = dview(d, x);
        d->ops->moe_route(d->ops, &a);
        int32_t *got_choice = dev_get(d, a.choice, (size_t)slots * sizeof(int32_t));
        float *got_weight = dev_get(d, a.weight, (size_t)slots * sizeof(float));
        int32_t *got_offsets = dev_get(d, a.offsets, (size_t)(E + 1) * sizeof(int32_t));
        int32_t *got_slots = dev_get(d, a.slots, (size_t)slots * sizeof(int32_t));
        check_i32(d, "choice", got_choice, choice, slots);
        check_f32(d, "weight", got_weight, weight, slots);
        check_i32(d, "offsets", got_offsets, offsets, E + 1);
        check_i32(d, "slots", got_slots, order, slots);
        free(got_choice);
        free(got_weight);
        free(got_offsets);
        free(got_slots);
    }
    case_end(d);
    free(choice);
    free(weight);
    free(offsets);
    free(order);
}

static const moe_case MOE_CASES[] = {
    {9, 8, 2, 1, 0}, {17, 6, 1, 0, 0}, {5, 4, 4, 1, 1}, {33, 64, 8, 1, 0}, {12, 5, 3, 0, 1}, {1, 3, 2, 0, 0},
};

TEST(devices_moe_route) { FOR_EACH_TABLE("moe_route", run_moe_route, MOE_CASES); }

/* One layer's gathers and scatters, experts in ascending order, routed by
 * the CPU op (the route itself is tested above). */
static void run_moe_gather_scatter(dctx *d, const void *cv)
{
    const moe_case *c = cv;
    ops_rng r = {12000 + (uint64_t)(c->tokens * 64 + c->experts * 4 + c->top_k)};
    const int64_t T = c->tokens, H = 24, slots = T * c->top_k, E = c->experts;
    const int with_bias = c->top_k % 2 == 0, with_residual = c->renormalize;
    case_begin(d, "moe gather/scatter %lld tokens, %d experts, top %d, bias %d, residual %d", (long long)T,
               c->experts, c->top_k, with_bias, with_residual);
    abuf *x = abuf_new(d, &r, "x", T, H, 2, H + 3, -2.0f, 2.0f);
    abuf *xe = abuf_new(d, &r, "gathered", slots, H, 1, H + 1, -1.0f, 1.0f);
    abuf *ye = abuf_new(d, &r, "expert outputs", slots, H, 0, H, -2.0f, 2.0f);
    abuf *out = abuf_new(d, &r, "out", T, H, 1, H + 2, 0.0f, 1.0f);
    for (int64_t t = 0; t < T; t++) /* never read: each token's first expert starts from 0 */
        for (int64_t k = 0; k < H; k++) out->host[t * out->ld + out->col + k] = NAN;
    abuf_upload(d, out);
    abuf *res = with_residual ? abuf_new(d, &r, "residual", T, H, out->col, out->ld, -1.0f, 1.0f) : NULL;
    wbuf *bias = with_bias ? wbuf_new(d, &r, 0, H, -0.5f, 0.5f, 0) : NULL;
    abuf *logits = moe_logits(d, &r, c);
    int32_t *choice = xmalloc((size_t)slots * sizeof(int32_t)), *offsets = xmalloc((size_t)(E + 1) * sizeof(int32_t));
    int32_t *order = xmalloc((size_t)slots * sizeof(int32_t));
    float *weight = xmalloc((size_t)slots * sizeof(float));
    const iv_moe_route_args route = {hview(logits), c->top_k, c->renormalize, choice, weight, offsets, order};
    d->cpu->moe_route(d->cpu, &route);
    const int32_t *choice_dev = dev_put(d, choice, (size_t)slots * sizeof(int32_t));
    const float *weight_dev = dev_put(d, weight, (size_t)slots * sizeof(float));
    const int32_t *order_dev = dev_put(d, order, (size_t)slots * sizeof(int32_t));
    int last = -1;
    for (int e = 0; e < E; e++)
        if (offsets[e + 1] > offsets[e]) last = e;
    for (int e = 0; e < E && !d->broken; e++) {
        const int64_t r0 = offsets[e], r1 = offsets[e + 1];
        if (r1 == r0) continue;
        d->cpu->moe_gather(d->cpu, iv_view_rows(hview(xe), r0, r1), hview(x), order + r0, c->top_k);
        d->ops->moe_gather(d->ops, iv_view_rows(dview(d, xe), r0, r1), dview(d, x), order_dev + r0, c->top_k);
        iv_moe_scatter_args a = {hview(out), iv_view_rows(hview(ye), r0, r1), order + r0, weight, choice,
                                 c->top_k, e, bias ? &bias->ht : NULL, res ? hview(res).data : NULL};
        d->cpu->moe_scatter(d->cpu, &a);
        a = (iv_moe_scatter_args){dview(d, out), iv_view_rows(dview(d, ye), r0, r1), order_dev + r0, weight_dev,
                                  choice_dev, c->top_k, e, bias ? bias->dev : NULL, res ? dview(d, res).data : NULL};
        d->ops->moe_scatter(d->ops, &a);
        /* The device stores out between experts: so does the reference,
         * all but the last store, which compare() rounds. */
        if (e != last)
            for (int64_t t = 0; t < T; t++)
                for (int64_t k = 0; k < H; k++)
                    out->host[t * out->ld + out->col + k] = rnd(d->dt, out->host[t * out->ld + out->col + k]);
    }
    case_end(d);
    free(choice);
    free(weight);
    free(offsets);
    free(order);
}

TEST(devices_moe_gather_scatter) { FOR_EACH_TABLE("moe_gather/scatter", run_moe_gather_scatter, MOE_CASES); }

/* ---- relative-position bias ---- */

typedef struct rel_case {
    int c2p, p2c, head;
} rel_case;

static void run_rel_bias(dctx *d, const void *cv)
{
    const rel_case *c = cv;
    static const int lens[] = {5, 1, 9, 0, 3};
    enum { N_SEQS = 5, N_HEADS = 3, COLS = 7, MID = 10 };
    ops_rng r = {13000 + (uint64_t)(c->c2p * 4 + c->p2c * 2 + c->head)};
    case_begin(d, "rel_bias c2p %d p2c %d head %d", c->c2p, c->p2c, c->head);
    int32_t cu[N_SEQS + 1] = {0};
    int64_t offs[N_SEQS + 1] = {0};
    for (int s = 0; s < N_SEQS; s++) {
        cu[s + 1] = cu[s] + lens[s];
        offs[s + 1] = offs[s] + (int64_t)N_HEADS * lens[s] * lens[s] + 5; /* gaps between blocks */
    }
    const int64_t T = cu[N_SEQS], total = offs[N_SEQS];
    abuf *c2p = c->c2p ? abuf_new(d, &r, "c2p", T, COLS, 1, COLS + 2, -3.0f, 3.0f) : NULL;
    abuf *p2c = c->p2c ? abuf_new(d, &r, "p2c", T, COLS, 0, COLS + 1, -3.0f, 3.0f) : NULL;
    int32_t idx[2][2 * MID + 1];
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2 * MID + 1; k++) idx[i][k] = (int32_t)(ops_rng_next(&r) % COLS);
    float *bias = xmalloc((size_t)total * sizeof(float));
    for (int64_t i = 0; i < total; i++) bias[i] = NAN; /* only head `head`'s rows may change */
    iv_rel_bias_args a = {
        .bias = dev_put(d, bias, (size_t)total * sizeof(float)), .offsets = offs,
        .offsets_dev = dev_put(d, offs, sizeof offs), .cu_seqlens = cu, .cu_seqlens_dev = dev_put(d, cu, sizeof cu),
        .n_seqs = N_SEQS, .head = c->head, .c2p_idx = dev_put(d, idx[0], sizeof idx[0]),
        .p2c_idx = dev_put(d, idx[1], sizeof idx[1]), .idx_mid = MID, .scale = sqrtf(24.0f),
    };
    if (!d->broken) {
        iv_rel_bias_args h = a;
        h.bias = bias;
        h.offsets_dev = offs;
        h.cu_seqlens_dev = cu;
        h.c2p = c2p ? hview(c2p) : (iv_view){0};
        h.p2c = p2c ? hview(p2c) : (iv_view){0};
        h.c2p_idx = idx[0];
        h.p2c_idx = idx[1];
        d->cpu->rel_bias(d->cpu, &h);
        a.c2p = c2p ? dview(d, c2p) : (iv_view){0};
        a.p2c = p2c ? dview(d, p2c) : (iv_view){0};
        d->ops->rel_bias(d->ops, &a);
        float *got = dev_get(d, a.bias, (size_t)total * sizeof(float));
        check_f32(d, "bias", got, bias, total);
        free(got);
    }
    case_end(d);
    free(bias);
}

TEST(devices_rel_bias)
{
    static const rel_case cases[] = {{1, 1, 0}, {1, 1, 2}, {1, 0, 1}, {0, 1, 0}};
    FOR_EACH_TABLE("rel_bias", run_rel_bias, cases);
}

/* ---- im2col ---- */

static void run_im2col(dctx *d, const void *cv)
{
    const int kernel = *(const int *)cv;
    static const int lens[] = {4, 1, 7, 2};
    enum { N_SEQS = 4, H = 12 };
    ops_rng r = {14000 + (uint64_t)kernel};
    case_begin(d, "im2col kernel %d", kernel);
    int32_t cu[N_SEQS + 1] = {0};
    for (int s = 0; s < N_SEQS; s++) cu[s + 1] = cu[s] + lens[s];
    const int64_t T = cu[N_SEQS];
    abuf *x = abuf_new(d, &r, "x", T, H, 1, H + 2, -2.0f, 2.0f);
    abuf *y = abuf_new(d, &r, "y", T, (int64_t)kernel * H, 2, (int64_t)kernel * H + 3, -1.0f, 1.0f);
    const int32_t *cu_dev = dev_put(d, cu, sizeof cu);
    if (!d->broken) {
        d->cpu->im2col(d->cpu, hview(y), hview(x), kernel, cu, cu, N_SEQS);
        d->ops->im2col(d->ops, dview(d, y), dview(d, x), kernel, cu, cu_dev, N_SEQS);
    }
    case_end(d);
}

TEST(devices_im2col)
{
    static const int kernels[] = {1, 3, 5};
    FOR_EACH_TABLE("im2col", run_im2col, kernels);
}

/* ---- Gemma4 audio: clamp, mul_cols, conv2d ---- */

static void run_clamp_mul_cols(dctx *d, const void *cv)
{
    const int which = *(const int *)cv;
    if (!d->ops->clamp) return; /* a table without them refuses the audio tower at load */
    ops_rng r = {17000 + (uint64_t)which};
    case_begin(d, "%s", which ? "mul_cols" : "clamp");
    abuf *x = abuf_new(d, &r, "x", 9, 24, 1, 27, -3.0f, 3.0f);
    abuf *y = abuf_new(d, &r, "y", 9, 24, 2, 28, -1.0f, 1.0f);
    wbuf *w = wbuf_new(d, &r, 0, 8, -2.0f, 2.0f, 0);
    if (!d->broken) {
        if (which) {
            d->cpu->mul_cols(d->cpu, hview(y), hview(x), &w->ht);
            d->ops->mul_cols(d->ops, dview(d, y), dview(d, x), w->dev);
        } else {
            d->cpu->clamp(d->cpu, hview(y), hview(x), -1.25f, 0.5f);
            d->ops->clamp(d->ops, dview(d, y), dview(d, x), -1.25f, 0.5f);
        }
    }
    case_end(d);
}

TEST(devices_clamp_mul_cols)
{
    static const int cases[] = {0, 1};
    FOR_EACH_TABLE("clamp/mul_cols", run_clamp_mul_cols, cases);
}

typedef struct conv2d_case {
    int c_in, c_out, w_in, kernel, stride, pad;
} conv2d_case;

static void run_conv2d(dctx *d, const void *cv)
{
    const conv2d_case *c = cv;
    if (!d->ops->conv2d) return;
    static const int lens[] = {7, 1, 12, 0, 4};
    enum { N_SEQS = 5 };
    ops_rng r = {18000 + (uint64_t)(c->c_in * 10 + c->kernel)};
    case_begin(d, "conv2d %dx%d k%d s%d p%d", c->c_in, c->c_out, c->kernel, c->stride, c->pad);
    int32_t cu_in[N_SEQS + 1] = {0}, cu_out[N_SEQS + 1] = {0};
    for (int s = 0; s < N_SEQS; s++) {
        cu_in[s + 1] = cu_in[s] + lens[s];
        cu_out[s + 1] = cu_out[s] + (lens[s] + 2 * c->pad >= c->kernel ? (lens[s] + 2 * c->pad - c->kernel) / c->stride + 1 : 0);
    }
    const int w_out = (c->w_in + 2 * c->pad - c->kernel) / c->stride + 1;
    const int64_t xc = (int64_t)c->w_in * c->c_in, yc = (int64_t)w_out * c->c_out;
    abuf *x = abuf_new(d, &r, "x", cu_in[N_SEQS], xc, 1, xc + 2, -2.0f, 2.0f);
    abuf *y = abuf_new(d, &r, "y", cu_out[N_SEQS], yc, 2, yc + 3, -1.0f, 1.0f);
    wbuf *w = wbuf_new(d, &r, c->c_out, (int64_t)c->c_in * c->kernel * c->kernel, -0.5f, 0.5f, 0);
    const int32_t *in_dev = dev_put(d, cu_in, sizeof cu_in), *out_dev = dev_put(d, cu_out, sizeof cu_out);
    if (!d->broken) {
        iv_conv2d_args a = {
            .y = hview(y), .x = hview(x), .w = &w->ht, .c_in = c->c_in, .c_out = c->c_out, .w_in = c->w_in,
            .w_out = w_out, .kernel = c->kernel, .stride = c->stride, .pad = c->pad, .cu_in = cu_in,
            .cu_out = cu_out, .cu_in_dev = cu_in, .cu_out_dev = cu_out, .n_seqs = N_SEQS,
        };
        d->cpu->conv2d(d->cpu, &a);
        a.y = dview(d, y), a.x = dview(d, x), a.w = w->dev, a.cu_in_dev = in_dev, a.cu_out_dev = out_dev;
        d->ops->conv2d(d->ops, &a);
    }
    case_end(d);
}

TEST(devices_conv2d)
{
    static const conv2d_case cases[] = {{1, 6, 16, 3, 2, 1}, {6, 3, 8, 3, 2, 1}, {2, 4, 5, 3, 1, 0}};
    FOR_EACH_TABLE("conv2d", run_conv2d, cases);
}

/* ---- Gated DeltaNet's gate_mul and short convolution ---- */

typedef struct gate_case {
    int one_col, in_place;
    iv_act act;
} gate_case;

static void run_gate_mul(dctx *d, const void *cv)
{
    const gate_case *c = cv;
    if (!d->ops->gate_mul) return; /* a table without it refuses such layers at load */
    ops_rng r = {19000 + (uint64_t)(c->one_col * 10 + c->in_place * 3 + (int)c->act)};
    case_begin(d, "gate_mul %s g, act %d, in place %d", c->one_col ? "one-column" : "full", (int)c->act, c->in_place);
    abuf *x = abuf_new(d, &r, "x", 7, 37, 1, 40, -3.0f, 3.0f);
    abuf *g = abuf_new(d, &r, "g", 7, c->one_col ? 1 : 37, 0, c->one_col ? 3 : 38, -4.0f, 4.0f);
    abuf *y = c->in_place ? x : abuf_new(d, &r, "y", 7, 37, 2, 41, -1.0f, 1.0f);
    if (!d->broken) {
        d->cpu->gate_mul(d->cpu, hview(y), hview(x), hview(g), c->act);
        d->ops->gate_mul(d->ops, dview(d, y), dview(d, x), dview(d, g), c->act);
    }
    case_end(d);
}

TEST(devices_gate_mul)
{
    static const gate_case cases[] = {{0, 0, IV_ACT_SILU}, {0, 1, IV_ACT_SILU}, {1, 0, IV_ACT_SIGMOID}, {1, 1, IV_ACT_SIGMOID}};
    FOR_EACH_TABLE("gate_mul", run_gate_mul, cases);
}

typedef struct conv1d_case {
    int kernel, bias;
    iv_act act;
} conv1d_case;

static void run_causal_conv1d(dctx *d, const void *cv)
{
    const conv1d_case *c = cv;
    if (!d->ops->causal_conv1d) return;
    static const int lens[] = {6, 1, 0, 11};
    enum { N_SEQS = 4, C = 29 };
    ops_rng r = {19500 + (uint64_t)(c->kernel * 4 + c->bias)};
    case_begin(d, "causal_conv1d kernel %d bias %d act %d", c->kernel, c->bias, (int)c->act);
    int32_t cu[N_SEQS + 1] = {0};
    for (int s = 0; s < N_SEQS; s++) cu[s + 1] = cu[s] + lens[s];
    abuf *x = abuf_new(d, &r, "x", cu[N_SEQS], C, 1, C + 3, -2.0f, 2.0f);
    abuf *y = abuf_new(d, &r, "y", cu[N_SEQS], C, 0, C + 1, -1.0f, 1.0f);
    wbuf *w = wbuf_new(d, &r, C, c->kernel, -1.0f, 1.0f, 0);
    wbuf *b = c->bias ? wbuf_new(d, &r, 0, C, -0.5f, 0.5f, 0) : NULL;
    const int32_t *cu_dev = dev_put(d, cu, sizeof cu);
    if (!d->broken) {
        iv_causal_conv_args a = {.y = hview(y), .x = hview(x), .w = &w->ht, .b = b ? &b->ht : NULL, .act = c->act,
                                 .cu_seqlens = cu, .cu_seqlens_dev = cu, .n_seqs = N_SEQS};
        d->cpu->causal_conv1d(d->cpu, &a);
        a.y = dview(d, y), a.x = dview(d, x), a.w = w->dev, a.b = b ? b->dev : NULL, a.cu_seqlens_dev = cu_dev;
        d->ops->causal_conv1d(d->ops, &a);
    }
    case_end(d);
}

TEST(devices_causal_conv1d)
{
    static const conv1d_case cases[] = {{4, 0, IV_ACT_SILU}, {4, 1, IV_ACT_SILU}, {3, 1, IV_ACT_NONE}, {1, 0, IV_ACT_NONE}};
    FOR_EACH_TABLE("causal_conv1d", run_causal_conv1d, cases);
}

/* ---- Gated DeltaNet's delta rule, token by token and chunked ---- */

typedef struct delta_case {
    int chunked, chunk;
} delta_case;

static void run_delta(dctx *d, const void *cv)
{
    const delta_case *c = cv;
    void (*op)(const iv_ops *, const iv_delta_rule_args *) = c->chunked ? d->ops->delta_chunk : d->ops->delta_rule;
    if (!op) return; /* a table without it (CUDA: no delta_chunk) runs the other form */
    static const int lens[] = {5, 1, 40, 3};
    enum { N_SEQS = 4, HK = 2, HV = 4, DK = 8, DV = 6 };
    ops_rng r = {16000 + (uint64_t)c->chunk};
    case_begin(d, "%s chunk %d", c->chunked ? "delta_chunk" : "delta_rule", c->chunk);
    int32_t cu[N_SEQS + 1] = {0};
    for (int s = 0; s < N_SEQS; s++) cu[s + 1] = cu[s] + lens[s];
    const int64_t T = cu[N_SEQS];
    abuf *q = abuf_new(d, &r, "q", T, HK * DK, 1, HK * DK + 2, -1.0f, 1.0f);
    abuf *k = abuf_new(d, &r, "k", T, HK * DK, 0, HK * DK + 1, -1.0f, 1.0f);
    abuf *v = abuf_new(d, &r, "v", T, HV * DV, 2, HV * DV + 3, -2.0f, 2.0f);
    abuf *a = abuf_new(d, &r, "a", T, HV, 1, HV + 1, -3.0f, 1.0f);
    abuf *b = abuf_new(d, &r, "b", T, HV, 0, HV + 2, -2.0f, 2.0f);
    abuf *out = abuf_new(d, &r, "out", T, HV * DV, 1, HV * DV + 1, -1.0f, 1.0f);
    wbuf *a_log = wbuf_new(d, &r, 0, HV, -0.5f, 0.5f, 0), *dt = wbuf_new(d, &r, 0, HV, -0.5f, 0.5f, 0);
    const int32_t *cu_dev = dev_put(d, cu, sizeof cu);
    if (!d->broken) {
        iv_delta_rule_args h = {
            .out = hview(out), .q = hview(q), .k = hview(k), .v = hview(v), .a = hview(a), .b = hview(b),
            .a_log = &a_log->ht, .dt_bias = &dt->ht, .n_k_heads = HK, .n_v_heads = HV, .k_head_dim = DK,
            .v_head_dim = DV, .cu_seqlens = cu, .cu_seqlens_dev = cu, .n_seqs = N_SEQS, .chunk = c->chunk,
        };
        if (c->chunked)
            d->cpu->delta_chunk(d->cpu, &h);
        else
            d->cpu->delta_rule(d->cpu, &h);
        iv_delta_rule_args g = h;
        g.out = dview(d, out), g.q = dview(d, q), g.k = dview(d, k), g.v = dview(d, v), g.a = dview(d, a);
        g.b = dview(d, b), g.a_log = a_log->dev, g.dt_bias = dt->dev, g.cu_seqlens_dev = cu_dev;
        op(d->ops, &g);
    }
    case_end(d);
}

TEST(devices_delta_rule)
{
    static const delta_case cases[] = {{0, 0}, {1, 1}, {1, 16}, {1, 64}};
    FOR_EACH_TABLE("delta_rule", run_delta, cases);
}

/* ---- add on FP32 views (attention bias blocks) ---- */

static void run_add_f32(dctx *d, const void *cv)
{
    const int in_place = *(const int *)cv;
    enum { ROWS = 3, COLS = 50, LD = 53 };
    ops_rng r = {15000 + (uint64_t)in_place};
    case_begin(d, "add float32 views, in place %d", in_place);
    float *a = ops_rand(&r, ROWS * LD, -2.0f, 2.0f), *b = ops_rand(&r, ROWS * LD, -2.0f, 2.0f);
    float *y = ops_rand(&r, ROWS * LD, -1.0f, 1.0f);
    float *a_dev = dev_put(d, a, sizeof(float) * ROWS * LD), *b_dev = dev_put(d, b, sizeof(float) * ROWS * LD);
    float *y_dev = in_place ? a_dev : dev_put(d, y, sizeof(float) * ROWS * LD);
    float *yh = in_place ? a : y;
    if (!d->broken) {
        d->cpu->add(d->cpu, iv_view_make(yh + 1, IV_F32, ROWS, COLS, LD), iv_view_make(a + 1, IV_F32, ROWS, COLS, LD),
                    iv_view_make(b + 2, IV_F32, ROWS, COLS, LD));
        d->ops->add(d->ops, iv_view_make(y_dev + 1, IV_F32, ROWS, COLS, LD),
                    iv_view_make(a_dev + 1, IV_F32, ROWS, COLS, LD), iv_view_make(b_dev + 2, IV_F32, ROWS, COLS, LD));
        float *got = dev_get(d, y_dev, sizeof(float) * ROWS * LD);
        check_f32(d, "y", got, yh, ROWS * LD); /* the gaps included */
        free(got);
    }
    case_end(d);
    free(a);
    free(b);
    free(y);
}

TEST(devices_add_f32)
{
    static const int cases[] = {0, 1};
    FOR_EACH_TABLE("add float32", run_add_f32, cases);
}

/* ---- the emulated table itself ---- */

TEST(devices_emulated_table)
{
    iv_err err = {0};
    CHECK(!iv_emu_ops_open(IV_F32, &err));
    CHECK_EQ_INT(err.code, IV_E_UNSUPPORTED);
    const iv_ops *ops = iv_ops_open("emulated", "float16", &err);
    REQUIRE(ops);
    CHECK_STR(ops->name, "emulated");
    CHECK_EQ_INT(ops->device, IV_EMULATED);
    CHECK_EQ_INT(ops->act_dtype, IV_F16);
    CHECK_EQ_INT(ops->host_visible, 0);
    CHECK(ops->prepare_weight && !ops->act_stride);
    CHECK_EQ_INT(ops->sync(ops, &err), 0);
    ops->dev_free(ops, NULL);

    /* Fresh memory is NaN, not zeros; upload and download round-trip. */
    uint16_t *p = ops->dev_alloc(ops, 1000);
    REQUIRE(p);
    CHECK_EQ_INT((uintptr_t)p % 256, 0);
    uint16_t got[500], src[500];
    ops->download(ops, got, p, sizeof got);
    CHECK(isnan(iv_f16_to_f32(got[0])) && isnan(iv_f16_to_f32(got[499])));
    for (int i = 0; i < 500; i++) src[i] = iv_f32_to_f16((float)i);
    ops->upload(ops, p, src, sizeof src);
    ops->download(ops, got, p, sizeof got);
    CHECK(!memcmp(got, src, sizeof src));
    ops->dev_free(ops, p);

    /* Weights: rounded once; only row-major float weights. */
    float w[3] = {1.0f, 1.0f + 0x1p-12f, -3.14159265f};
    iv_tensor wt = iv_tensor_1d(w, 3);
    const iv_tensor *pw = ops->prepare_weight(ops, &wt, 0, &err);
    REQUIRE(pw);
    CHECK_EQ_INT(pw->dtype, IV_F16);
    CHECK_EQ_INT(pw->device, IV_EMULATED);
    CHECK_EQ_INT(pw->ndim, 1);
    CHECK_EQ_INT(pw->shape[0], 3);
    float back[3];
    iv_ops_download_f32(ops, iv_view_of(pw), back);
    for (int i = 0; i < 3; i++) CHECK(back[i] == rnd(IV_F16, w[i]));
    iv_tensor bad = wt;
    bad.dtype = IV_I8;
    CHECK(!ops->prepare_weight(ops, &bad, 0, &err));
    CHECK_EQ_INT(err.code, IV_E_UNSUPPORTED);

    /* Many allocations and ops: region lookups stay right and cheap. */
    enum { N = 300 };
    void *bufs[N];
    for (int i = 0; i < N; i++) {
        bufs[i] = ops->dev_alloc(ops, (size_t)(64 + i) * sizeof(uint16_t));
        REQUIRE(bufs[i]);
        uint16_t v[364];
        for (int k = 0; k < 64 + i; k++) v[k] = iv_f32_to_f16((float)(i % 7));
        ops->upload(ops, bufs[i], v, (size_t)(64 + i) * sizeof(uint16_t));
    }
    for (int rep = 0; rep < 10; rep++)
        for (int i = 0; i < N; i++) {
            iv_view v = iv_view_make(bufs[i], IV_F16, 1, 64 + i, 64 + i);
            ops->scale(ops, v, v, 2.0f);
        }
    for (int i = 0; i < N; i += 37) {
        float f[364];
        iv_ops_download_f32(ops, iv_view_make(bufs[i], IV_F16, 1, 64 + i, 64 + i), f);
        CHECK(f[0] == (float)(i % 7) * 1024.0f && f[63 + i] == f[0]);
    }
    for (int i = N - 1; i >= 0; i -= 2) ops->dev_free(ops, bufs[i]);
    for (int i = 0; i < N; i += 2) ops->dev_free(ops, bufs[i]);
    iv_ops_close(ops);
}

/* Child modes of the protection test. */
enum { CHILD_WRITE, CHILD_READ, CHILD_WEIGHT_READ, CHILD_PAST_END, CHILD_HOST_POINTER };

/* Runs in a forked child; returns only through _exit or a signal. */
static void protection_child(int mode)
{
    /* No core files, no ASan report on the log; the default SIGSEGV action
     * (where the sanitizer lets a program choose it) so the parent sees the
     * signal itself. */
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    const int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, 2);
    signal(SIGSEGV, SIG_DFL);

    iv_err err = {0};
    const iv_ops *ops = iv_emu_ops_open(IV_BF16, &err);
    if (!ops) _exit(3);
    volatile uint16_t *p = ops->dev_alloc(ops, 4096);
    if (!p) _exit(4);
    /* Through the table, device memory works. */
    uint16_t src[8] = {1, 2, 3, 4, 5, 6, 7, 8}, got[8];
    ops->upload(ops, (void *)p, src, sizeof src);
    ops->download(ops, got, (const void *)p, sizeof got);
    if (memcmp(src, got, sizeof src)) _exit(5);
    float w[4] = {1, 2, 3, 4};
    iv_tensor wt = iv_tensor_1d(w, 4);
    const iv_tensor *pw = ops->prepare_weight(ops, &wt, 0, &err);
    if (!pw) _exit(6);
    uint16_t host[64] = {0};
    switch (mode) {
    case CHILD_WRITE: p[1] = 7; break;
    case CHILD_READ: got[0] = p[1]; break;
    case CHILD_WEIGHT_READ: got[0] = *(volatile const uint16_t *)pw->data; break;
    case CHILD_PAST_END: /* 8192 bytes of a 4096-byte allocation */
        ops->scale(ops, iv_view_make((void *)p, IV_BF16, 1, 4096, 4096),
                   iv_view_make((void *)p, IV_BF16, 1, 4096, 4096), 2.0f);
        break;
    case CHILD_HOST_POINTER:
        ops->scale(ops, iv_view_make(host, IV_BF16, 1, 64, 64), iv_view_make(host, IV_BF16, 1, 64, 64), 2.0f);
        break;
    }
    _exit(7); /* still alive: the access went through */
}

TEST(devices_emulated_protection)
{
    static const struct {
        int mode, sig;
        const char *what;
    } cases[] = {
        {CHILD_WRITE, SIGSEGV, "a host write to device memory"},
        {CHILD_READ, SIGSEGV, "a host read of device memory"},
        {CHILD_WEIGHT_READ, SIGSEGV, "a host read of a prepared weight"},
        {CHILD_PAST_END, SIGABRT, "an op on a view past its allocation"},
        {CHILD_HOST_POINTER, SIGABRT, "an op on host memory"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fflush(stdout);
        fflush(stderr);
        const pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) protection_child(cases[i].mode);
        int status = 0;
        REQUIRE(waitpid(pid, &status, 0) == pid);
        if (WIFSIGNALED(status)) {
            CHECK_MSG(WTERMSIG(status) == cases[i].sig, "%s: the child died of signal %d, not %d", cases[i].what,
                      WTERMSIG(status), cases[i].sig);
            continue;
        }
#if IV_TEST_SANITIZED
        /* A sanitizer that keeps its own SEGV handler reports and exits 1. */
        if (cases[i].sig == SIGSEGV && WIFEXITED(status) && WEXITSTATUS(status) == 1) continue;
#endif
        iv_test_fail(__FILE__, __LINE__, "%s: the child %s %d instead of dying of signal %d", cases[i].what,
                     WIFEXITED(status) ? "exited with status" : "stopped with",
                     WIFEXITED(status) ? WEXITSTATUS(status) : status, cases[i].sig);
    }
}
