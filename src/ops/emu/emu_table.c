/* The emulated device (emu_ops.h): BF16/FP16 storage that the host cannot
 * touch, FP32 maths through the CPU table, one rounding per store.
 *
 * Memory. Every dev_alloc is its own anonymous mapping and prepared weights
 * are bump-allocated from 64 MiB slabs (a model is then a handful of
 * mappings, not hundreds). All of them are registered in a sorted region
 * list and stay PROT_NONE: host code that reads or writes device memory
 * without going through the table faults at once, as it would on a GPU.
 * The table itself opens only the pages it is about to access (a view's
 * span, an index array), for reading or for writing, copies them to or from
 * host temporaries and closes them again before the op returns, so between
 * calls everything is PROT_NONE again. A pointer an op is given that lies
 * outside every region, or an access that runs past its region's end, is a
 * caller bug that would fault on a GPU: it aborts with the op named.
 * Fresh dev_alloc memory is filled with 0xff bytes (NaN in every float
 * dtype), so reading device memory nothing wrote poisons the result instead
 * of finding zeros; a GPU gives no zeros either.
 *
 * Ops. Each op converts its input views and weights to dense FP32 host
 * temporaries, runs the CPU op on them, and rounds the FP32 result once into
 * the output view (only its rows x cols elements: the gaps of a strided
 * view are left alone, as a kernel leaves them). Index arrays are copied
 * too, and where an op has both a host and a device copy of the same array
 * (cu_seqlens, bias offsets) the two are compared: a GPU indexes with one
 * and launches with the other.
 *
 * Threads: the region list (and with it every access to device memory) is
 * guarded by a mutex; the CPU op runs outside it on host memory only. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ops/cpu/cpu_ops.h"
#include "ops/emu/emu_ops.h"

#define EMU_SLAB_BYTES ((size_t)64 << 20)
/* Weights above this get a mapping of their own instead of slab space, so a
 * large table (a 250k-row embedding) does not waste most of a slab. */
#define EMU_SLAB_MAX_OBJECT (EMU_SLAB_BYTES / 4)
#define EMU_ALIGN 256 /* what dev_alloc promises */
#define EMU_POISON 0xff

typedef enum { REGION_ALLOC, REGION_SLAB } region_kind;

typedef struct emu_region {
    uintptr_t base;
    size_t len; /* whole pages */
    region_kind kind;
} emu_region;

typedef struct emu_ctx {
    iv_ops ops; /* handed out; ops.ctx points back here */
    iv_dtype dt;
    size_t page;
    pthread_mutex_t lock;
    emu_region *regions; /* sorted by base */
    size_t n_regions, cap_regions;
    /* The slab weights are bump-allocated from (0 bytes left: none yet). */
    uintptr_t slab_next;
    size_t slab_left;
    /* Headers prepare_weight made (their data lives in the regions). */
    iv_tensor **weights;
    size_t n_weights, cap_weights;
} emu_ctx;

static emu_ctx *ctx_of(const iv_ops *ops) { return ops->ctx; }

/* A caller bug the emulated GPU would fault on: there is no error channel
 * out of an op, and continuing would hide it. */
static _Noreturn __attribute__((format(printf, 2, 3))) void emu_die(const char *op, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "infinity_v3: emulated device: %s: ", op);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

/* ---- regions ---- */

static size_t page_round(const emu_ctx *c, size_t bytes)
{
    if (bytes == 0) bytes = 1;
    return (bytes + c->page - 1) & ~(c->page - 1);
}

/* Maps len bytes (whole pages) PROT_NONE and registers them; NULL when out
 * of memory. Called with the lock held. */
static void *region_new(emu_ctx *c, size_t len, region_kind kind)
{
    /* Slabs need no poison: every weight is written whole when it is
     * placed, and untouched slab pages then never get faulted in. */
    const int poison = kind == REGION_ALLOC;
    void *p = mmap(NULL, len, poison ? PROT_READ | PROT_WRITE : PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    /* Opening a few pages of a transparent huge page would split it. */
    madvise(p, len, MADV_NOHUGEPAGE);
    if (poison) {
        memset(p, EMU_POISON, len);
        if (mprotect(p, len, PROT_NONE) != 0) {
            munmap(p, len);
            return NULL;
        }
    }
    if (c->n_regions == c->cap_regions) {
        size_t cap = c->cap_regions ? 2 * c->cap_regions : 32;
        emu_region *r = realloc(c->regions, cap * sizeof *r);
        if (!r) {
            munmap(p, len);
            return NULL;
        }
        c->regions = r;
        c->cap_regions = cap;
    }
    size_t i = c->n_regions;
    while (i > 0 && c->regions[i - 1].base > (uintptr_t)p) {
        c->regions[i] = c->regions[i - 1];
        i--;
    }
    c->regions[i] = (emu_region){(uintptr_t)p, len, kind};
    c->n_regions++;
    return p;
}

/* Index of the region holding address a, or -1. Called with the lock held. */
static ptrdiff_t region_find(const emu_ctx *c, uintptr_t a)
{
    size_t lo = 0, hi = c->n_regions;
    while (lo < hi) { /* first region with base > a */
        size_t mid = (lo + hi) / 2;
        if (c->regions[mid].base <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0) return -1;
    const emu_region *r = &c->regions[lo - 1];
    return a - r->base < r->len ? (ptrdiff_t)(lo - 1) : -1;
}

/* Opens the pages of [p, p + bytes) with prot for the caller's access;
 * the range must lie in one region. Returns the page range through *lo
 * and *len for access_end. Called with the lock held. */
static void access_begin(emu_ctx *c, const void *p, size_t bytes, int prot, const char *op, const char *what,
                         uintptr_t *lo, size_t *len)
{
    const uintptr_t a = (uintptr_t)p;
    const ptrdiff_t i = region_find(c, a);
    if (i < 0) emu_die(op, "%s (%p) is not device memory of this table", what, p);
    const emu_region *r = &c->regions[i];
    if (bytes > r->len - (a - r->base))
        emu_die(op, "%s: %zu bytes at %p run %zu bytes past the end of its device allocation", what, bytes, p,
                bytes - (r->len - (a - r->base)));
    *lo = a & ~(uintptr_t)(c->page - 1);
    *len = ((a + bytes + c->page - 1) & ~(uintptr_t)(c->page - 1)) - *lo;
    if (mprotect((void *)*lo, *len, prot) != 0) emu_die(op, "mprotect failed opening %s", what);
}

static void access_end(uintptr_t lo, size_t len, const char *op)
{
    if (mprotect((void *)lo, len, PROT_NONE) != 0) emu_die(op, "mprotect failed closing device memory");
}

/* memcpy into device memory (to_dev 1) or out of it (to_dev 0). */
static void dev_copy(emu_ctx *c, void *dst, const void *src, size_t bytes, int to_dev, const char *op, const char *what)
{
    if (bytes == 0) return;
    uintptr_t lo;
    size_t len;
    pthread_mutex_lock(&c->lock);
    access_begin(c, to_dev ? dst : src, bytes, to_dev ? PROT_READ | PROT_WRITE : PROT_READ, op, what, &lo, &len);
    memcpy(dst, src, bytes);
    access_end(lo, len, op);
    pthread_mutex_unlock(&c->lock);
}

/* ---- conversions between device dtypes and FP32 ---- */

static void check_float_dtype(iv_dtype dt, const char *op, const char *what)
{
    if (dt != IV_F32 && dt != IV_F16 && dt != IV_BF16)
        emu_die(op, "%s has dtype %s; the emulated device stores float32, float16 or bfloat16", what,
                iv_dtype_name(dt));
}

static void store_row(void *dst, const float *src, iv_dtype dt, int64_t n)
{
    if (dt == IV_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    } else if (dt == IV_BF16) {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = iv_f32_to_bf16(src[i]);
    } else {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = iv_f32_to_f16(src[i]);
    }
}

static size_t view_span_bytes(iv_view v) { return (size_t)((v.rows - 1) * v.ld + v.cols) * iv_dtype_size(v.dtype); }

/* v's elements as dense FP32 rows [v.rows, v.cols] (iv_cpu_scratch; free()). */
static float *read_view(emu_ctx *c, iv_view v, const char *op, const char *what)
{
    float *h = iv_cpu_scratch((size_t)(v.rows * v.cols) * sizeof(float));
    if (v.rows <= 0 || v.cols <= 0) return h;
    check_float_dtype(v.dtype, op, what);
    if (v.ld < v.cols)
        emu_die(op, "%s: row stride %lld below its %lld columns", what, (long long)v.ld, (long long)v.cols);
    const size_t es = iv_dtype_size(v.dtype);
    uintptr_t lo;
    size_t len;
    pthread_mutex_lock(&c->lock);
    access_begin(c, v.data, view_span_bytes(v), PROT_READ, op, what, &lo, &len);
    for (int64_t r = 0; r < v.rows; r++)
        iv_convert_to_f32(h + r * v.cols, (const char *)v.data + (size_t)(r * v.ld) * es, v.dtype, v.cols);
    access_end(lo, len, op);
    pthread_mutex_unlock(&c->lock);
    return h;
}

/* Rounds FP32 rows [v.rows, v.cols] of h (rows ldh apart) once into v's elements. */
static void write_view_ld(emu_ctx *c, iv_view v, const float *h, int64_t ldh, const char *op, const char *what)
{
    if (v.rows <= 0 || v.cols <= 0) return;
    check_float_dtype(v.dtype, op, what);
    if (v.ld < v.cols)
        emu_die(op, "%s: row stride %lld below its %lld columns", what, (long long)v.ld, (long long)v.cols);
    const size_t es = iv_dtype_size(v.dtype);
    uintptr_t lo;
    size_t len;
    pthread_mutex_lock(&c->lock);
    access_begin(c, v.data, view_span_bytes(v), PROT_READ | PROT_WRITE, op, what, &lo, &len);
    for (int64_t r = 0; r < v.rows; r++)
        store_row((char *)v.data + (size_t)(r * v.ld) * es, h + r * ldh, v.dtype, v.cols);
    access_end(lo, len, op);
    pthread_mutex_unlock(&c->lock);
}

static void write_view(emu_ctx *c, iv_view v, const float *h, const char *op, const char *what)
{
    write_view_ld(c, v, h, v.cols, op, what);
}

/* A weight (any shape, row-major) as dense FP32, or NULL for NULL. */
static float *read_weight(emu_ctx *c, const iv_tensor *w, const char *op, const char *what)
{
    if (!w) return NULL;
    if (w->layout != IV_LAYOUT_ROWS || w->scales) emu_die(op, "%s is not a row-major float weight", what);
    const int64_t n = iv_tensor_numel(w);
    return read_view(c, iv_view_make(w->data, w->dtype, 1, n, n), op, what);
}

/* A host copy of a device index array (iv_cpu_scratch; free()). */
static void *read_array(emu_ctx *c, const void *dev, size_t bytes, const char *op, const char *what)
{
    void *h = iv_cpu_scratch(bytes);
    dev_copy(c, h, dev, bytes, 0, op, what);
    return h;
}

static iv_view dense(float *p, int64_t rows, int64_t cols) { return iv_view_make(p, IV_F32, rows, cols, cols); }

static void check_act_view(const emu_ctx *c, iv_view v, const char *op, const char *what)
{
    if (v.dtype != c->dt)
        emu_die(op, "%s has dtype %s, not the table's %s", what, iv_dtype_name(v.dtype), iv_dtype_name(c->dt));
}

/* The elementwise ops (y of x's shape, or x itself): checks both views
 * and their shapes and returns x's FP32 copy, on which the CPU op then
 * runs in place; elementwise_done stores it to y and frees it. */
static float *elementwise_begin(emu_ctx *c, iv_view y, iv_view x, const char *op)
{
    check_act_view(c, y, op, "y");
    check_act_view(c, x, op, "x");
    if (y.rows != x.rows || y.cols != x.cols) emu_die(op, "shapes do not match");
    return read_view(c, x, op, "x");
}

static void elementwise_done(emu_ctx *c, iv_view y, float *xf, const char *op)
{
    write_view(c, y, xf, op, "y");
    free(xf);
}

/* ---- device memory ---- */

static void *emu_dev_alloc(const iv_ops *ops, size_t bytes)
{
    emu_ctx *c = ctx_of(ops);
    pthread_mutex_lock(&c->lock);
    void *p = region_new(c, page_round(c, bytes), REGION_ALLOC);
    pthread_mutex_unlock(&c->lock);
    return p;
}

static void emu_dev_free(const iv_ops *ops, void *p)
{
    if (!p) return;
    emu_ctx *c = ctx_of(ops);
    pthread_mutex_lock(&c->lock);
    const ptrdiff_t i = region_find(c, (uintptr_t)p);
    if (i < 0 || c->regions[i].base != (uintptr_t)p || c->regions[i].kind != REGION_ALLOC)
        emu_die("dev_free", "%p was not returned by dev_alloc", p);
    munmap(p, c->regions[i].len);
    memmove(&c->regions[i], &c->regions[i + 1], (c->n_regions - (size_t)i - 1) * sizeof *c->regions);
    c->n_regions--;
    pthread_mutex_unlock(&c->lock);
}

static void emu_upload(const iv_ops *ops, void *dst_dev, const void *src_host, size_t bytes)
{
    dev_copy(ctx_of(ops), dst_dev, src_host, bytes, 1, "upload", "destination");
}

static void emu_download(const iv_ops *ops, void *dst_host, const void *src_dev, size_t bytes)
{
    dev_copy(ctx_of(ops), dst_host, src_dev, bytes, 0, "download", "source");
}

static int emu_sync(const iv_ops *ops, iv_err *err) { return 0; }

/* Slab space for a weight of `bytes` (EMU_ALIGN-aligned), or NULL. Called with the lock held. */
static void *weight_alloc(emu_ctx *c, size_t bytes)
{
    bytes = (bytes + EMU_ALIGN - 1) & ~(size_t)(EMU_ALIGN - 1);
    if (bytes == 0) bytes = EMU_ALIGN;
    if (bytes > EMU_SLAB_MAX_OBJECT) return region_new(c, page_round(c, bytes), REGION_SLAB);
    if (bytes > c->slab_left) {
        void *s = region_new(c, EMU_SLAB_BYTES, REGION_SLAB);
        if (!s) return NULL;
        c->slab_next = (uintptr_t)s;
        c->slab_left = EMU_SLAB_BYTES;
    }
    void *p = (void *)c->slab_next;
    c->slab_next += bytes;
    c->slab_left -= bytes;
    return p;
}

static const iv_tensor *emu_prepare_weight(const iv_ops *ops, const iv_tensor *w, int linear, iv_err *err)
{
    emu_ctx *c = ctx_of(ops);
    if (w->layout != IV_LAYOUT_ROWS || w->scales || (w->dtype != IV_F32 && w->dtype != IV_F16 && w->dtype != IV_BF16))
        return iv_errf(err, IV_E_UNSUPPORTED, "the emulated device takes row-major float weights, not %s%s",
                       iv_dtype_name(w->dtype), w->layout != IV_LAYOUT_ROWS ? " in a packed layout" : ""),
               NULL;
    const int64_t n = iv_tensor_numel(w);
    const size_t bytes = (size_t)n * iv_dtype_size(c->dt);
    iv_tensor *t = malloc(sizeof *t);
    float *f32 = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!t || !f32) {
        free(t);
        free(f32);
        return iv_errf(err, IV_E_NOMEM, "out of memory preparing a weight for the emulated device"), NULL;
    }
    *t = *w;
    t->dtype = c->dt;
    t->device = IV_EMULATED;
    t->scales = NULL;
    iv_convert_to_f32(f32, w->data, w->dtype, n);

    pthread_mutex_lock(&c->lock);
    if (c->n_weights == c->cap_weights) {
        const size_t cap = c->cap_weights ? 2 * c->cap_weights : 64;
        iv_tensor **grown = realloc(c->weights, cap * sizeof *grown);
        if (grown) {
            c->weights = grown;
            c->cap_weights = cap;
        }
    }
    t->data = c->n_weights < c->cap_weights ? weight_alloc(c, bytes) : NULL;
    if (t->data) {
        if (n > 0) {
            uintptr_t lo;
            size_t len;
            access_begin(c, t->data, bytes, PROT_READ | PROT_WRITE, "prepare_weight", "weight", &lo, &len);
            store_row(t->data, f32, c->dt, n); /* the one rounding of the weight */
            access_end(lo, len, "prepare_weight");
        }
        c->weights[c->n_weights++] = t;
    }
    pthread_mutex_unlock(&c->lock);
    free(f32);
    if (!t->data) {
        free(t);
        return iv_errf(err, IV_E_NOMEM, "out of emulated device memory for a weight of %lld elements", (long long)n),
               NULL;
    }
    return t;
}

/* ---- ops ---- */

static void emu_linear(const iv_ops *ops, iv_view y, iv_view x, const iv_tensor *w, const iv_tensor *b, iv_act act,
                       const void *residual_or_null)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    check_act_view(c, y, "linear", "y");
    check_act_view(c, x, "linear", "x");
    const int64_t rows = x.rows, in = x.cols, out = y.cols;
    if (!w) emu_die("linear", "no weight");
    if (y.rows != rows || iv_tensor_rows(w) != out || iv_tensor_cols(w) != in || (b && iv_tensor_numel(b) != out))
        emu_die("linear", "shapes do not match: x [%lld, %lld], y [%lld, %lld], w [%lld, %lld]", (long long)rows,
                (long long)in, (long long)y.rows, (long long)out, (long long)iv_tensor_rows(w),
                (long long)iv_tensor_cols(w));
    if (rows == 0 || out == 0) return;
    float *xf = read_view(c, x, "linear", "x");
    float *wf = read_weight(c, w, "linear", "weight");
    float *bf = read_weight(c, b, "linear", "bias");
    /* The residual has y's layout and may be y itself: read it before y is written. */
    float *rf = residual_or_null ? read_view(c, iv_view_make((void *)residual_or_null, y.dtype, rows, out, y.ld),
                                             "linear", "residual")
                                 : NULL;
    float *yf = iv_cpu_scratch((size_t)(rows * out) * sizeof(float));
    iv_tensor wt = iv_tensor_2d(wf, out, in), bt = iv_tensor_1d(bf, out);
    cpu->linear(cpu, dense(yf, rows, out), dense(xf, rows, in), &wt, bf ? &bt : NULL, act, rf);
    write_view(c, y, yf, "linear", "y");
    free(xf);
    free(wf);
    free(bf);
    free(rf);
    free(yf);
}

static void emu_layer_norm(const iv_ops *ops, iv_view y, iv_view x, const void *r, const iv_tensor *w,
                           const iv_tensor *b, float eps)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    check_act_view(c, y, "layer_norm", "y");
    check_act_view(c, x, "layer_norm", "x");
    if (y.rows != x.rows || y.cols != x.cols || (w && iv_tensor_numel(w) != x.cols) ||
        (b && iv_tensor_numel(b) != x.cols))
        emu_die("layer_norm", "shapes do not match");
    if (x.rows == 0 || x.cols == 0) return;
    float *xf = read_view(c, x, "layer_norm", "x");
    float *rf =
        r ? read_view(c, iv_view_make((void *)r, x.dtype, x.rows, x.cols, x.ld), "layer_norm", "residual") : NULL;
    float *wf = read_weight(c, w, "layer_norm", "weight"), *bf = read_weight(c, b, "layer_norm", "bias");
    iv_tensor wt = iv_tensor_1d(wf, x.cols), bt = iv_tensor_1d(bf, x.cols);
    /* In place on the temporary: the CPU norm allows y == x. */
    cpu->layer_norm(cpu, dense(xf, x.rows, x.cols), dense(xf, x.rows, x.cols), rf, wf ? &wt : NULL, bf ? &bt : NULL,
                    eps);
    write_view(c, y, xf, "layer_norm", "y");
    free(xf);
    free(rf);
    free(wf);
    free(bf);
}

static void emu_rms_norm(const iv_ops *ops, iv_view y, iv_view x, const void *r, const iv_tensor *w, float eps,
                         float w_offset)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    check_act_view(c, y, "rms_norm", "y");
    check_act_view(c, x, "rms_norm", "x");
    if (y.rows != x.rows || y.cols != x.cols || (w && iv_tensor_numel(w) != x.cols))
        emu_die("rms_norm", "shapes do not match");
    if (x.rows == 0 || x.cols == 0) return;
    float *xf = read_view(c, x, "rms_norm", "x");
    float *rf = r ? read_view(c, iv_view_make((void *)r, x.dtype, x.rows, x.cols, x.ld), "rms_norm", "residual") : NULL;
    float *wf = read_weight(c, w, "rms_norm", "weight");
    iv_tensor wt = iv_tensor_1d(wf, x.cols);
    cpu->rms_norm(cpu, dense(xf, x.rows, x.cols), dense(xf, x.rows, x.cols), rf, wf ? &wt : NULL, eps, w_offset);
    write_view(c, y, xf, "rms_norm", "y");
    free(xf);
    free(rf);
    free(wf);
}

static void emu_head_rms_norm(const iv_ops *ops, iv_view x, int n_heads, int head_dim, const iv_tensor *w, float eps,
                              float w_offset)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    check_act_view(c, x, "head_rms_norm", "x");
    const int64_t cols = (int64_t)n_heads * head_dim;
    if (x.cols < cols || (w && iv_tensor_numel(w) != head_dim)) emu_die("head_rms_norm", "shapes do not match");
    if (x.rows == 0 || cols == 0) return;
    /* Only the heads' columns: the rest of x is not the op's to rewrite. */
    const iv_view xs = iv_view_cols(x, 0, cols);
    float *xf = read_view(c, xs, "head_rms_norm", "x");
    float *wf = read_weight(c, w, "head_rms_norm", "weight");
    iv_tensor wt = iv_tensor_1d(wf, head_dim);
    cpu->head_rms_norm(cpu, dense(xf, x.rows, cols), n_heads, head_dim, wf ? &wt : NULL, eps, w_offset);
    write_view(c, xs, xf, "head_rms_norm", "x");
    free(xf);
    free(wf);
}

static void emu_act(const iv_ops *ops, iv_view y, iv_view x, iv_act act)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    float *xf = elementwise_begin(c, y, x, "act");
    cpu->act(cpu, dense(xf, x.rows, x.cols), dense(xf, x.rows, x.cols), act);
    elementwise_done(c, y, xf, "act");
}

static void emu_glu(const iv_ops *ops, iv_view y, iv_view x, iv_act act, int act_on_first)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    check_act_view(c, y, "glu", "y");
    check_act_view(c, x, "glu", "x");
    if (x.cols != 2 * y.cols || y.rows != x.rows) emu_die("glu", "shapes do not match");
    float *xf = read_view(c, x, "glu", "x");
    float *yf = iv_cpu_scratch((size_t)(y.rows * y.cols) * sizeof(float));
    cpu->glu(cpu, dense(yf, y.rows, y.cols), dense(xf, x.rows, x.cols), act, act_on_first);
    write_view(c, y, yf, "glu", "y");
    free(xf);
    free(yf);
}

static void emu_add(const iv_ops *ops, iv_view y, iv_view a, iv_view b)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    /* FP32 throughout is the other form (attention bias blocks). */
    if (y.dtype != IV_F32 || a.dtype != IV_F32 || b.dtype != IV_F32) {
        check_act_view(c, y, "add", "y");
        check_act_view(c, a, "add", "a");
        check_act_view(c, b, "add", "b");
    }
    if (y.rows != a.rows || y.cols != a.cols || b.rows != a.rows || b.cols != a.cols)
        emu_die("add", "shapes do not match");
    float *af = read_view(c, a, "add", "a"), *bf = read_view(c, b, "add", "b");
    cpu->add(cpu, dense(af, a.rows, a.cols), dense(af, a.rows, a.cols), dense(bf, b.rows, b.cols));
    write_view(c, y, af, "add", "y");
    free(af);
    free(bf);
}

static void emu_scale(const iv_ops *ops, iv_view y, iv_view x, float s)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    float *xf = elementwise_begin(c, y, x, "scale");
    cpu->scale(cpu, dense(xf, x.rows, x.cols), dense(xf, x.rows, x.cols), s);
    elementwise_done(c, y, xf, "scale");
}

static void emu_embed(const iv_ops *ops, iv_view y, const iv_tensor *table, const int32_t *ids, int accumulate)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    check_act_view(c, y, "embed", "y");
    const int64_t vocab = iv_tensor_rows(table), h = y.cols;
    if (iv_tensor_cols(table) != h || table->layout != IV_LAYOUT_ROWS) emu_die("embed", "table shape does not match y");
    if (y.rows == 0 || h == 0) return;
    int32_t *id = read_array(c, ids, (size_t)y.rows * sizeof(int32_t), "embed", "ids");
    int32_t lo_id = id[0], hi_id = id[0];
    for (int64_t t = 0; t < y.rows; t++) {
        if (id[t] < 0 || id[t] >= vocab)
            emu_die("embed", "id %d of row %lld outside the table's %lld rows", id[t], (long long)t, (long long)vocab);
        lo_id = id[t] < lo_id ? id[t] : lo_id;
        hi_id = id[t] > hi_id ? id[t] : hi_id;
    }
    /* Only the rows the ids name, gathered into a [rows, h] table the CPU
     * op indexes with 0..rows-1: converting a whole vocabulary per call
     * would dominate the forward. */
    const iv_view span = iv_view_make((char *)table->data + (size_t)lo_id * (size_t)h * iv_dtype_size(table->dtype),
                                      table->dtype, hi_id - lo_id + 1, h, h);
    float *rows = read_view(c, span, "embed", "table");
    float *gathered = iv_cpu_scratch((size_t)(y.rows * h) * sizeof(float));
    for (int64_t t = 0; t < y.rows; t++) {
        memcpy(gathered + t * h, rows + (int64_t)(id[t] - lo_id) * h, (size_t)h * sizeof(float));
        id[t] = (int32_t)t;
    }
    free(rows);
    float *yf = accumulate ? read_view(c, y, "embed", "y") : iv_cpu_scratch((size_t)(y.rows * h) * sizeof(float));
    iv_tensor tt = iv_tensor_2d(gathered, y.rows, h);
    cpu->embed(cpu, dense(yf, y.rows, h), &tt, id, accumulate);
    write_view(c, y, yf, "embed", "y");
    free(yf);
    free(gathered);
    free(id);
}

static void emu_embed_bag(const iv_ops *ops, iv_view y, const iv_tensor *table, const int32_t *ids,
                          const float *weights, int taps)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    check_act_view(c, y, "embed_bag", "y");
    const int64_t vocab = iv_tensor_rows(table), h = y.cols, n = y.rows * taps;
    if (iv_tensor_cols(table) != h || table->layout != IV_LAYOUT_ROWS || taps <= 0)
        emu_die("embed_bag", "table shape does not match y");
    if (y.rows == 0 || h == 0) return;
    int32_t *id = read_array(c, ids, (size_t)n * sizeof(int32_t), "embed_bag", "ids");
    float *wt = read_array(c, weights, (size_t)n * sizeof(float), "embed_bag", "weights");
    for (int64_t i = 0; i < n; i++)
        if (id[i] < 0 || id[i] >= vocab)
            emu_die("embed_bag", "id %d of tap %lld outside the table's %lld rows", id[i], (long long)i, (long long)vocab);
    float *tf = read_weight(c, table, "embed_bag", "table"); /* position grids are small */
    float *yf = iv_cpu_scratch((size_t)(y.rows * h) * sizeof(float));
    iv_tensor tt = iv_tensor_2d(tf, vocab, h);
    cpu->embed_bag(cpu, dense(yf, y.rows, h), &tt, id, wt, taps);
    write_view(c, y, yf, "embed_bag", "y");
    free(yf);
    free(tf);
    free(wt);
    free(id);
}

static void emu_rope(const iv_ops *ops, const iv_rope_args *a)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    check_act_view(c, a->x, "rope", "x");
    const int64_t cols = (int64_t)a->n_heads * a->head_dim;
    if (a->x.cols < cols || a->rot_dim > a->head_dim || a->rot_dim % 2) emu_die("rope", "shapes do not match");
    if (a->x.rows == 0 || a->rot_dim == 0) return;
    const iv_view xs = iv_view_cols(a->x, 0, cols);
    float *xf = read_view(c, xs, "rope", "x");
    /* Every axis the frequencies read, each copied as rows [0, x.rows). */
    int axes = 1;
    for (int i = 0; a->freq_section && i < a->rot_dim / 2; i++) {
        if (a->freq_section[i] >= IV_ROPE_MAX_AXES) emu_die("rope", "frequency %d reads axis %d", i, a->freq_section[i]);
        if (a->freq_section[i] + 1 > axes) axes = a->freq_section[i] + 1;
    }
    if (axes > 1 && a->pos_axis_stride < a->x.rows && a->pos_axis_stride != 0)
        emu_die("rope", "position axes %lld apart overlap %lld rows", (long long)a->pos_axis_stride, (long long)a->x.rows);
    int32_t *pos = iv_cpu_scratch((size_t)(axes * a->x.rows) * sizeof(int32_t));
    for (int ax = 0; ax < axes; ax++) {
        int32_t *p = read_array(c, a->pos + ax * a->pos_axis_stride, (size_t)a->x.rows * sizeof(int32_t), "rope", "pos");
        memcpy(pos + ax * a->x.rows, p, (size_t)a->x.rows * sizeof(int32_t));
        free(p);
    }
    iv_rope_args h = *a;
    h.x = dense(xf, xs.rows, cols);
    h.pos = pos;
    h.pos_axis_stride = a->x.rows;
    cpu->rope(cpu, &h);
    write_view(c, xs, xf, "rope", "x");
    free(xf);
    free(pos);
}

/* The device copy of cu_seqlens must hold the host's values: kernels index
 * with one and are launched with the other. */
static void check_cu_seqlens(emu_ctx *c, const int32_t *host, const int32_t *dev, int n_seqs, int64_t rows,
                             const char *op)
{
    if (!host || !dev) emu_die(op, "cu_seqlens and cu_seqlens_dev are both required");
    int32_t *d = read_array(c, dev, (size_t)(n_seqs + 1) * sizeof(int32_t), op, "cu_seqlens_dev");
    for (int s = 0; s <= n_seqs; s++)
        if (d[s] != host[s]) emu_die(op, "cu_seqlens_dev[%d] = %d but cu_seqlens[%d] = %d", s, d[s], s, host[s]);
    free(d);
    for (int s = 0; s < n_seqs; s++)
        if (host[s + 1] < host[s]) emu_die(op, "cu_seqlens decreases at sequence %d", s);
    if (n_seqs > 0 && (host[0] < 0 || host[n_seqs] > rows))
        emu_die(op, "cu_seqlens spans rows %d..%d of a view of %lld", host[0], host[n_seqs], (long long)rows);
}

static void emu_attention(const iv_ops *ops, const iv_attn_args *a)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    check_act_view(c, a->q, "attention", "q");
    check_act_view(c, a->k, "attention", "k");
    check_act_view(c, a->v, "attention", "v");
    check_act_view(c, a->out, "attention", "out");
    const int64_t T = a->q.rows, d = a->head_dim;
    if (a->n_heads <= 0 || a->n_kv_heads <= 0 || a->n_heads % a->n_kv_heads || d <= 0 || a->q.cols < a->n_heads * d ||
        a->k.cols < a->n_kv_heads * d || a->v.cols < a->n_kv_heads * d || a->out.cols < a->n_heads * d ||
        a->k.rows != T || a->v.rows != T || a->out.rows != T)
        emu_die("attention", "shapes do not match");
    if (a->n_seqs <= 0) return;
    check_cu_seqlens(c, a->cu_seqlens, a->cu_seqlens_dev, a->n_seqs, T, "attention");
    int64_t longest = 0;
    for (int s = 0; s < a->n_seqs; s++)
        if (a->cu_seqlens[s + 1] - a->cu_seqlens[s] > longest) longest = a->cu_seqlens[s + 1] - a->cu_seqlens[s];
    if (a->max_seqlen < longest)
        emu_die("attention", "max_seqlen %d is below the longest sequence (%lld)", a->max_seqlen, (long long)longest);

    iv_attn_args h = *a;
    float *qf = read_view(c, a->q, "attention", "q");
    float *kf = read_view(c, a->k, "attention", "k");
    float *vf = read_view(c, a->v, "attention", "v");
    h.q = dense(qf, T, a->q.cols);
    h.k = dense(kf, T, a->k.cols);
    h.v = dense(vf, T, a->v.cols);
    float *of = iv_cpu_scratch((size_t)(T * a->out.cols) * sizeof(float));
    h.out = dense(of, T, a->out.cols);
    h.cu_seqlens_dev = h.cu_seqlens;

    /* Each sequence's bias block, copied to a packed host buffer with its
     * own offsets; the device offsets must equal the host ones. */
    float *bias = NULL;
    int64_t *offs = NULL;
    if (a->bias) {
        if (!a->bias_offsets || !a->bias_offsets_dev)
            emu_die("attention", "bias needs bias_offsets and bias_offsets_dev");
        int64_t *dev_offs =
            read_array(c, a->bias_offsets_dev, (size_t)a->n_seqs * sizeof(int64_t), "attention", "bias_offsets_dev");
        offs = iv_cpu_scratch((size_t)a->n_seqs * sizeof(int64_t));
        int64_t total = 0;
        for (int s = 0; s < a->n_seqs; s++) {
            if (dev_offs[s] != a->bias_offsets[s])
                emu_die("attention", "bias_offsets_dev[%d] = %lld but bias_offsets[%d] = %lld", s,
                        (long long)dev_offs[s], s, (long long)a->bias_offsets[s]);
            const int64_t len = a->cu_seqlens[s + 1] - a->cu_seqlens[s];
            offs[s] = total;
            total += (int64_t)a->n_heads * len * len;
        }
        free(dev_offs);
        bias = iv_cpu_scratch((size_t)total * sizeof(float));
        for (int s = 0; s < a->n_seqs; s++) {
            const int64_t len = a->cu_seqlens[s + 1] - a->cu_seqlens[s];
            dev_copy(c, bias + offs[s], a->bias + a->bias_offsets[s], (size_t)(a->n_heads * len * len) * sizeof(float),
                     0, "attention", "bias block");
        }
        h.bias = bias;
        h.bias_offsets = h.bias_offsets_dev = offs;
    }
    uint8_t *mask = a->key_mask ? read_array(c, a->key_mask, (size_t)T, "attention", "key_mask") : NULL;
    h.key_mask = mask;

    cpu->attention(cpu, &h);
    /* Only the sequences' rows and the heads' columns are the op's output. */
    const int32_t r0 = a->cu_seqlens[0], r1 = a->cu_seqlens[a->n_seqs];
    write_view_ld(c, iv_view_sub(a->out, r0, r1, 0, (int64_t)a->n_heads * d), of + (int64_t)r0 * a->out.cols,
                  a->out.cols, "attention", "out");
    free(qf);
    free(kf);
    free(vf);
    free(of);
    free(bias);
    free(offs);
    free(mask);
}

/* The folded-prefix attention: every index table is read back from device
 * memory and checked (host copies equal, rows and positions in range, key
 * lists in increasing position), then the CPU kernel runs on FP32 copies. */
static void emu_attention_rows(const iv_ops *ops, const iv_attn_rows_args *a)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    const char *op = "attention_rows";
    check_act_view(c, a->q, op, "q");
    check_act_view(c, a->k, op, "k");
    check_act_view(c, a->v, op, "v");
    check_act_view(c, a->out, op, "out");
    const int64_t Tq = a->q.rows, Tk = a->k.rows, d = a->head_dim;
    if (a->n_heads <= 0 || a->n_kv_heads <= 0 || a->n_heads % a->n_kv_heads || d <= 0 || a->q.cols < a->n_heads * d ||
        a->k.cols < a->n_kv_heads * d || a->v.cols < a->n_kv_heads * d || a->out.cols < a->n_heads * d ||
        a->v.rows != Tk || a->out.rows != Tq)
        emu_die(op, "shapes do not match");
    if (a->n_runs <= 0) return;
    check_cu_seqlens(c, a->q_cu, a->q_cu_dev, a->n_runs, Tq, op);
    check_cu_seqlens(c, a->kv_cu, a->kv_cu_dev, a->n_runs, INT32_MAX, op);
    const int64_t nkv = a->kv_cu[a->n_runs];
    int32_t *rows = read_array(c, a->kv_rows, (size_t)(nkv > 0 ? nkv : 1) * sizeof(int32_t), op, "kv_rows");
    int32_t *qp = read_array(c, a->q_pos, (size_t)(Tq > 0 ? Tq : 1) * sizeof(int32_t), op, "q_pos");
    int32_t *kp = read_array(c, a->kv_pos, (size_t)(Tk > 0 ? Tk : 1) * sizeof(int32_t), op, "kv_pos");
    for (int r = 0; r < a->n_runs; r++) {
        const int64_t n = a->kv_cu[r + 1] - a->kv_cu[r];
        if (n > a->max_keys) emu_die(op, "max_keys %d is below run %d's %lld keys", a->max_keys, r, (long long)n);
        for (int64_t j = a->kv_cu[r]; j < a->kv_cu[r + 1]; j++) {
            if (rows[j] < 0 || rows[j] >= Tk) emu_die(op, "kv_rows[%lld] = %d outside %lld rows", (long long)j, rows[j], (long long)Tk);
            if (j > a->kv_cu[r] && kp[rows[j]] <= kp[rows[j - 1]]) emu_die(op, "run %d's keys do not increase in position", r);
        }
    }
    iv_attn_rows_args h = *a;
    float *qf = read_view(c, a->q, op, "q"), *kf = read_view(c, a->k, op, "k"), *vf = read_view(c, a->v, op, "v");
    float *of = iv_cpu_scratch((size_t)(Tq * a->out.cols) * sizeof(float));
    h.q = dense(qf, Tq, a->q.cols);
    h.k = dense(kf, Tk, a->k.cols);
    h.v = dense(vf, Tk, a->v.cols);
    h.out = dense(of, Tq, a->out.cols);
    h.q_cu_dev = h.q_cu;
    h.kv_cu_dev = h.kv_cu;
    h.kv_rows = rows;
    h.q_pos = qp;
    h.kv_pos = kp;
    cpu->attention_rows(cpu, &h);
    const int32_t r0 = a->q_cu[0], r1 = a->q_cu[a->n_runs];
    write_view_ld(c, iv_view_sub(a->out, r0, r1, 0, (int64_t)a->n_heads * d), of + (int64_t)r0 * a->out.cols,
                  a->out.cols, op, "out");
    free(qf);
    free(kf);
    free(vf);
    free(of);
    free(rows);
    free(qp);
    free(kp);
}

static void emu_softmax(const iv_ops *ops, iv_view x)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    float *xf = elementwise_begin(c, x, x, "softmax");
    cpu->softmax(cpu, dense(xf, x.rows, x.cols));
    elementwise_done(c, x, xf, "softmax");
}

static void emu_l2_normalize(const iv_ops *ops, iv_view x)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    float *xf = elementwise_begin(c, x, x, "l2_normalize");
    cpu->l2_normalize(cpu, dense(xf, x.rows, x.cols));
    elementwise_done(c, x, xf, "l2_normalize");
}

static void emu_pool(const iv_ops *ops, const iv_pool_args *a)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    check_act_view(c, a->out, "pool", "out");
    check_act_view(c, a->x, "pool", "x");
    if (a->out.rows != a->n_seqs || a->out.cols != a->x.cols) emu_die("pool", "shapes do not match");
    if (a->n_seqs <= 0) return;
    check_cu_seqlens(c, a->cu_seqlens, a->cu_seqlens_dev, a->n_seqs, a->x.rows, "pool");
    iv_pool_args h = *a;
    float *xf = read_view(c, a->x, "pool", "x");
    float *of = iv_cpu_scratch((size_t)(a->out.rows * a->out.cols) * sizeof(float));
    int32_t *skip = a->skip ? read_array(c, a->skip, (size_t)a->n_seqs * sizeof(int32_t), "pool", "skip") : NULL;
    h.x = dense(xf, a->x.rows, a->x.cols);
    h.out = dense(of, a->out.rows, a->out.cols);
    h.cu_seqlens_dev = h.cu_seqlens;
    h.skip = skip;
    cpu->pool(cpu, &h);
    write_view(c, a->out, of, "pool", "out");
    free(xf);
    free(of);
    free(skip);
}

/* ---- mixture of experts ---- */

static void emu_moe_route(const iv_ops *ops, const iv_moe_route_args *a)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    check_act_view(c, a->logits, "moe_route", "logits");
    const int64_t T = a->logits.rows, E = a->logits.cols, k = a->top_k;
    if (k < 1 || k > E) emu_die("moe_route", "top_k %lld of %lld experts", (long long)k, (long long)E);
    iv_moe_route_args h = *a;
    float *xf = read_view(c, a->logits, "moe_route", "logits");
    h.logits = dense(xf, T, E);
    h.choice = iv_cpu_scratch((size_t)(T * k) * sizeof(int32_t));
    h.weight = iv_cpu_scratch((size_t)(T * k) * sizeof(float));
    h.offsets = iv_cpu_scratch((size_t)(E + 1) * sizeof(int32_t));
    h.slots = iv_cpu_scratch((size_t)(T * k) * sizeof(int32_t));
    cpu->moe_route(cpu, &h);
    dev_copy(c, a->choice, h.choice, (size_t)(T * k) * sizeof(int32_t), 1, "moe_route", "choice");
    dev_copy(c, a->weight, h.weight, (size_t)(T * k) * sizeof(float), 1, "moe_route", "weight");
    dev_copy(c, a->offsets, h.offsets, (size_t)(E + 1) * sizeof(int32_t), 1, "moe_route", "offsets");
    dev_copy(c, a->slots, h.slots, (size_t)(T * k) * sizeof(int32_t), 1, "moe_route", "slots");
    free(xf);
    free(h.choice);
    free(h.weight);
    free(h.offsets);
    free(h.slots);
}

/* The slots of one expert's run (a host copy), each checked against the
 * T * top_k slots of the tokens; *lo and *hi the first and last token named. */
static int32_t *read_slots(emu_ctx *c, const int32_t *slots, int64_t n, int64_t tokens, int top_k, const char *op,
                           int64_t *lo, int64_t *hi)
{
    if (top_k < 1) emu_die(op, "top_k %d", top_k);
    int32_t *s = read_array(c, slots, (size_t)n * sizeof(int32_t), op, "slots");
    *lo = tokens;
    *hi = -1;
    for (int64_t r = 0; r < n; r++) {
        if (s[r] < 0 || s[r] >= tokens * top_k)
            emu_die(op, "slot %d of row %lld outside the %lld tokens' slots", s[r], (long long)r, (long long)tokens);
        const int64_t t = s[r] / top_k;
        *lo = t < *lo ? t : *lo;
        *hi = t > *hi ? t : *hi;
    }
    return s;
}

static void emu_moe_gather(const iv_ops *ops, iv_view y, iv_view x, const int32_t *slots, int top_k)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    check_act_view(c, y, "moe_gather", "y");
    check_act_view(c, x, "moe_gather", "x");
    if (y.cols != x.cols) emu_die("moe_gather", "shapes do not match");
    if (y.rows == 0 || y.cols == 0) return;
    int64_t lo, hi;
    int32_t *s = read_slots(c, slots, y.rows, x.rows, top_k, "moe_gather", &lo, &hi);
    /* Only the rows between the first and last token named, indexed from there. */
    for (int64_t r = 0; r < y.rows; r++) s[r] -= (int32_t)(lo * top_k);
    float *xf = read_view(c, iv_view_rows(x, lo, hi + 1), "moe_gather", "x");
    float *yf = iv_cpu_scratch((size_t)(y.rows * y.cols) * sizeof(float));
    cpu->moe_gather(cpu, dense(yf, y.rows, y.cols), dense(xf, hi + 1 - lo, x.cols), s, top_k);
    write_view(c, y, yf, "moe_gather", "y");
    free(s);
    free(xf);
    free(yf);
}

static void emu_moe_scatter(const iv_ops *ops, const iv_moe_scatter_args *a)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    const iv_view out = a->out, y = a->y;
    check_act_view(c, out, "moe_scatter", "out");
    check_act_view(c, y, "moe_scatter", "y");
    const int64_t H = out.cols, T = out.rows, k = a->top_k;
    if (y.cols != H || (a->bias && iv_tensor_numel(a->bias) != H)) emu_die("moe_scatter", "shapes do not match");
    if (y.rows == 0 || H == 0) return;
    int64_t lo, hi;
    int32_t *s = read_slots(c, a->slots, y.rows, T, a->top_k, "moe_scatter", &lo, &hi);
    for (int64_t r = 0; r < y.rows; r++) s[r] -= (int32_t)(lo * k);
    /* The rows between the first and last token, raw: rows of other tokens
     * go back byte for byte. */
    const iv_view span = iv_view_rows(out, lo, hi + 1);
    const int64_t n = span.rows;
    const size_t es = iv_dtype_size(out.dtype), span_bytes = view_span_bytes(span);
    unsigned char *raw = iv_cpu_scratch(span_bytes);
    dev_copy(c, raw, span.data, span_bytes, 0, "moe_scatter", "out");
    float *of = iv_cpu_scratch((size_t)(n * H) * sizeof(float));
    for (int64_t t = 0; t < n; t++) iv_convert_to_f32(of + t * H, raw + (size_t)(t * out.ld) * es, out.dtype, H);
    int32_t *choice = read_array(c, a->choice + lo * k, (size_t)(n * k) * sizeof(int32_t), "moe_scatter", "choice");
    float *weight = read_array(c, a->weight + lo * k, (size_t)(n * k) * sizeof(float), "moe_scatter", "weight");
    float *yf = read_view(c, y, "moe_scatter", "y");
    float *rf = a->residual ? read_view(c, iv_view_make((char *)a->residual + (size_t)(lo * out.ld) * es, out.dtype,
                                                        n, H, out.ld),
                                        "moe_scatter", "residual")
                            : NULL;
    float *bf = read_weight(c, a->bias, "moe_scatter", "bias");
    iv_tensor bt = iv_tensor_1d(bf, H);
    const iv_moe_scatter_args h = {
        .out = dense(of, n, H), .y = dense(yf, y.rows, H), .slots = s, .weight = weight, .choice = choice,
        .top_k = a->top_k, .expert = a->expert, .bias = bf ? &bt : NULL, .residual = rf,
    };
    cpu->moe_scatter(cpu, &h);
    for (int64_t r = 0; r < y.rows; r++) {
        const int64_t t = s[r] / k;
        store_row(raw + (size_t)(t * out.ld) * es, of + t * H, out.dtype, H);
    }
    dev_copy(c, span.data, raw, span_bytes, 1, "moe_scatter", "out");
    free(s);
    free(raw);
    free(of);
    free(choice);
    free(weight);
    free(yf);
    free(rf);
    free(bf);
}

/* ---- gathers: relative-position bias, im2col ---- */

static void emu_rel_bias(const iv_ops *ops, const iv_rel_bias_args *a)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    const int have_c2p = a->c2p.data != NULL, have_p2c = a->p2c.data != NULL;
    if (have_c2p) check_act_view(c, a->c2p, "rel_bias", "c2p");
    if (have_p2c) check_act_view(c, a->p2c, "rel_bias", "p2c");
    if (a->n_seqs <= 0) return;
    const int64_t rows = have_c2p ? a->c2p.rows : have_p2c ? a->p2c.rows : INT64_MAX;
    if (have_c2p && have_p2c && a->p2c.rows != rows) emu_die("rel_bias", "c2p and p2c have different rows");
    check_cu_seqlens(c, a->cu_seqlens, a->cu_seqlens_dev, a->n_seqs, rows, "rel_bias");
    if (!a->offsets || !a->offsets_dev) emu_die("rel_bias", "offsets and offsets_dev are both required");
    int64_t *dev_offs = read_array(c, a->offsets_dev, (size_t)a->n_seqs * sizeof(int64_t), "rel_bias", "offsets_dev");
    int64_t *offs = iv_cpu_scratch((size_t)a->n_seqs * sizeof(int64_t)), total = 0, longest = 0;
    for (int s = 0; s < a->n_seqs; s++) {
        if (dev_offs[s] != a->offsets[s])
            emu_die("rel_bias", "offsets_dev[%d] = %lld but offsets[%d] = %lld", s, (long long)dev_offs[s], s,
                    (long long)a->offsets[s]);
        const int64_t L = a->cu_seqlens[s + 1] - a->cu_seqlens[s];
        offs[s] = total; /* head `head`'s slice of each block, packed */
        total += L * L;
        longest = L > longest ? L : longest;
    }
    free(dev_offs);
    if (a->idx_mid < longest - 1)
        emu_die("rel_bias", "idx_mid %d below the longest sequence (%lld)", a->idx_mid, (long long)longest);
    if (a->head < 0) emu_die("rel_bias", "head %d", a->head);
    const size_t n_idx = (size_t)(2 * (int64_t)a->idx_mid + 1);
    iv_rel_bias_args h = *a;
    int32_t *idx[2] = {NULL, NULL};
    float *vf[2] = {NULL, NULL};
    const iv_view *views[2] = {&a->c2p, &a->p2c};
    const int32_t *dev_idx[2] = {a->c2p_idx, a->p2c_idx};
    for (int i = 0; i < 2; i++) {
        if (!views[i]->data) continue;
        idx[i] = read_array(c, dev_idx[i], n_idx * sizeof(int32_t), "rel_bias", "index table");
        for (size_t d = 0; d < n_idx; d++)
            if (idx[i][d] < 0 || idx[i][d] >= views[i]->cols)
                emu_die("rel_bias", "index %d at %zu outside the %lld columns", idx[i][d], d,
                        (long long)views[i]->cols);
        vf[i] = read_view(c, *views[i], "rel_bias", i ? "p2c" : "c2p");
    }
    h.c2p = have_c2p ? dense(vf[0], a->c2p.rows, a->c2p.cols) : (iv_view){0};
    h.p2c = have_p2c ? dense(vf[1], a->p2c.rows, a->p2c.cols) : (iv_view){0};
    h.c2p_idx = idx[0];
    h.p2c_idx = idx[1];
    float *bias = iv_cpu_scratch((size_t)(total > 0 ? total : 1) * sizeof(float));
    h.bias = bias;
    h.offsets = h.offsets_dev = offs;
    h.cu_seqlens_dev = h.cu_seqlens;
    h.head = 0;
    cpu->rel_bias(cpu, &h);
    for (int s = 0; s < a->n_seqs; s++) {
        const int64_t L = a->cu_seqlens[s + 1] - a->cu_seqlens[s];
        dev_copy(c, a->bias + a->offsets[s] + (int64_t)a->head * L * L, bias + offs[s], (size_t)(L * L) * sizeof(float),
                 1, "rel_bias", "bias block");
    }
    free(offs);
    free(bias);
    for (int i = 0; i < 2; i++) {
        free(idx[i]);
        free(vf[i]);
    }
}

static void emu_im2col(const iv_ops *ops, iv_view y, iv_view x, int kernel, const int32_t *cu_seqlens,
                       const int32_t *cu_seqlens_dev, int n_seqs)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    check_act_view(c, y, "im2col", "y");
    check_act_view(c, x, "im2col", "x");
    if (kernel < 1 || kernel % 2 == 0 || y.rows != x.rows || y.cols != (int64_t)kernel * x.cols)
        emu_die("im2col", "shapes do not match (kernel %d)", kernel);
    if (x.rows == 0 || x.cols == 0) return;
    check_cu_seqlens(c, cu_seqlens, cu_seqlens_dev, n_seqs, x.rows, "im2col");
    if (n_seqs <= 0 || cu_seqlens[0] != 0 || cu_seqlens[n_seqs] != x.rows)
        emu_die("im2col", "the sequences do not cover the %lld rows", (long long)x.rows);
    float *xf = read_view(c, x, "im2col", "x");
    float *yf = iv_cpu_scratch((size_t)(y.rows * y.cols) * sizeof(float));
    cpu->im2col(cpu, dense(yf, y.rows, y.cols), dense(xf, x.rows, x.cols), kernel, cu_seqlens, cu_seqlens, n_seqs);
    write_view(c, y, yf, "im2col", "y");
    free(xf);
    free(yf);
}

/* ---- Gated DeltaNet: gated products, the short convolution, the delta rule ---- */

static void emu_gate_mul(const iv_ops *ops, iv_view y, iv_view x, iv_view g, iv_act act)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    check_act_view(c, y, "gate_mul", "y");
    check_act_view(c, x, "gate_mul", "x");
    check_act_view(c, g, "gate_mul", "g");
    if (x.rows != y.rows || x.cols != y.cols || g.rows != x.rows || (g.cols != x.cols && g.cols != 1))
        emu_die("gate_mul", "shapes do not match");
    if (x.rows == 0 || x.cols == 0) return;
    float *xf = read_view(c, x, "gate_mul", "x");
    float *gf = read_view(c, g, "gate_mul", "g");
    cpu->gate_mul(cpu, dense(xf, x.rows, x.cols), dense(xf, x.rows, x.cols), dense(gf, g.rows, g.cols), act);
    write_view(c, y, xf, "gate_mul", "y");
    free(xf);
    free(gf);
}

static void emu_causal_conv1d(const iv_ops *ops, const iv_causal_conv_args *a)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    check_act_view(c, a->y, "causal_conv1d", "y");
    check_act_view(c, a->x, "causal_conv1d", "x");
    const int64_t C = a->x.cols, K = iv_tensor_cols(a->w);
    if (a->y.rows != a->x.rows || a->y.cols != C || iv_tensor_rows(a->w) != C || (a->b && iv_tensor_numel(a->b) != C))
        emu_die("causal_conv1d", "shapes do not match");
    if (a->x.rows == 0 || C == 0) return;
    check_cu_seqlens(c, a->cu_seqlens, a->cu_seqlens_dev, a->n_seqs, a->x.rows, "causal_conv1d");
    if (a->n_seqs <= 0 || a->cu_seqlens[0] != 0 || a->cu_seqlens[a->n_seqs] != a->x.rows)
        emu_die("causal_conv1d", "the sequences do not cover the %lld rows", (long long)a->x.rows);
    float *xf = read_view(c, a->x, "causal_conv1d", "x");
    float *wf = read_weight(c, a->w, "causal_conv1d", "weight");
    float *bf = read_weight(c, a->b, "causal_conv1d", "bias");
    float *yf = iv_cpu_scratch((size_t)(a->y.rows * C) * sizeof(float));
    iv_tensor wt = iv_tensor_2d(wf, C, K), bt = iv_tensor_1d(bf, C);
    iv_causal_conv_args h = *a;
    h.x = dense(xf, a->x.rows, C);
    h.y = dense(yf, a->y.rows, C);
    h.w = &wt;
    h.b = bf ? &bt : NULL;
    h.cu_seqlens_dev = a->cu_seqlens;
    cpu->causal_conv1d(cpu, &h);
    write_view(c, a->y, yf, "causal_conv1d", "y");
    free(xf);
    free(wf);
    free(bf);
    free(yf);
}

/* Both forms of the delta rule: the CPU's `chunked` or token-by-token kernel
 * on the FP32 copies of the inputs, the output rounded to storage. */
static void emu_delta_rule_with(const iv_ops *ops, const iv_delta_rule_args *a, int chunked)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    const iv_view *in[] = {&a->q, &a->k, &a->v, &a->a, &a->b};
    static const char *const names[] = {"q", "k", "v", "a", "b"};
    check_act_view(c, a->out, "delta_rule", "out");
    for (int i = 0; i < 5; i++) {
        check_act_view(c, *in[i], "delta_rule", names[i]);
        if (in[i]->rows != a->out.rows) emu_die("delta_rule", "%s has %lld rows, out %lld", names[i],
                                                (long long)in[i]->rows, (long long)a->out.rows);
    }
    const int Hk = a->n_k_heads, Hv = a->n_v_heads;
    if (Hk <= 0 || Hv <= 0 || Hv % Hk || a->q.cols != (int64_t)Hk * a->k_head_dim || a->k.cols != a->q.cols ||
        a->v.cols != (int64_t)Hv * a->v_head_dim || a->out.cols != a->v.cols || a->a.cols != Hv || a->b.cols != Hv ||
        iv_tensor_numel(a->a_log) != Hv || iv_tensor_numel(a->dt_bias) != Hv)
        emu_die("delta_rule", "shapes do not match");
    if (chunked && (a->chunk < 1 || a->chunk > IV_DELTA_CHUNK_MAX))
        emu_die("delta_chunk", "chunk %d is not in 1..%d", a->chunk, IV_DELTA_CHUNK_MAX);
    if (a->out.rows == 0) return;
    check_cu_seqlens(c, a->cu_seqlens, a->cu_seqlens_dev, a->n_seqs, a->out.rows, "delta_rule");
    if (a->n_seqs <= 0 || a->cu_seqlens[0] != 0 || a->cu_seqlens[a->n_seqs] != a->out.rows)
        emu_die("delta_rule", "the sequences do not cover the %lld rows", (long long)a->out.rows);
    iv_delta_rule_args h = *a;
    iv_view *hv[] = {&h.q, &h.k, &h.v, &h.a, &h.b};
    float *f[5];
    for (int i = 0; i < 5; i++) {
        f[i] = read_view(c, *in[i], "delta_rule", names[i]);
        *hv[i] = dense(f[i], in[i]->rows, in[i]->cols);
    }
    float *al = read_weight(c, a->a_log, "delta_rule", "A_log"), *dt = read_weight(c, a->dt_bias, "delta_rule", "dt_bias");
    iv_tensor alt = iv_tensor_1d(al, Hv), dtt = iv_tensor_1d(dt, Hv);
    h.a_log = &alt;
    h.dt_bias = &dtt;
    float *of = iv_cpu_scratch((size_t)(a->out.rows * a->out.cols) * sizeof(float));
    h.out = dense(of, a->out.rows, a->out.cols);
    h.cu_seqlens_dev = a->cu_seqlens;
    if (chunked)
        cpu->delta_chunk(cpu, &h);
    else
        cpu->delta_rule(cpu, &h);
    write_view(c, a->out, of, "delta_rule", "out");
    for (int i = 0; i < 5; i++) free(f[i]);
    free(al);
    free(dt);
    free(of);
}

static void emu_delta_rule(const iv_ops *ops, const iv_delta_rule_args *a) { emu_delta_rule_with(ops, a, 0); }
static void emu_delta_chunk(const iv_ops *ops, const iv_delta_rule_args *a) { emu_delta_rule_with(ops, a, 1); }

/* ---- Gemma4's audio tower: clamp, mul_cols, conv2d (the CPU kernels on
 * FP32 copies, outputs rounded to storage) ---- */

static void emu_clamp(const iv_ops *ops, iv_view y, iv_view x, float lo, float hi)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    float *xf = elementwise_begin(c, y, x, "clamp");
    if (x.rows > 0 && x.cols > 0) cpu->clamp(cpu, dense(xf, x.rows, x.cols), dense(xf, x.rows, x.cols), lo, hi);
    elementwise_done(c, y, xf, "clamp");
}

static void emu_mul_cols(const iv_ops *ops, iv_view y, iv_view x, const iv_tensor *w)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    const int64_t n = iv_tensor_numel(w);
    if (n <= 0 || x.cols % n) emu_die("mul_cols", "shapes do not match");
    float *xf = elementwise_begin(c, y, x, "mul_cols");
    float *wf = read_weight(c, w, "mul_cols", "weight");
    iv_tensor wt = iv_tensor_1d(wf, n);
    if (x.rows > 0 && x.cols > 0) cpu->mul_cols(cpu, dense(xf, x.rows, x.cols), dense(xf, x.rows, x.cols), &wt);
    elementwise_done(c, y, xf, "mul_cols");
    free(wf);
}

static void emu_conv2d(const iv_ops *ops, const iv_conv2d_args *a)
{
    emu_ctx *c = ctx_of(ops);
    const iv_ops *cpu = iv_cpu_ops();
    check_act_view(c, a->y, "conv2d", "y");
    check_act_view(c, a->x, "conv2d", "x");
    const int64_t patch = (int64_t)a->c_in * a->kernel * a->kernel;
    if (a->kernel < 1 || a->stride < 1 || a->pad < 0 || a->c_in < 1 || a->c_out < 1 ||
        a->x.cols != (int64_t)a->w_in * a->c_in || a->y.cols != (int64_t)a->w_out * a->c_out ||
        a->w_out != (a->w_in + 2 * a->pad - a->kernel) / a->stride + 1 || iv_tensor_rows(a->w) != a->c_out ||
        iv_tensor_numel(a->w) != a->c_out * patch)
        emu_die("conv2d", "shapes do not match");
    check_cu_seqlens(c, a->cu_in, a->cu_in_dev, a->n_seqs, a->x.rows, "conv2d");
    check_cu_seqlens(c, a->cu_out, a->cu_out_dev, a->n_seqs, a->y.rows, "conv2d");
    for (int s = 0; s < a->n_seqs; s++) {
        const int in_len = a->cu_in[s + 1] - a->cu_in[s], out_len = a->cu_out[s + 1] - a->cu_out[s];
        if (out_len != (in_len + 2 * a->pad >= a->kernel ? (in_len + 2 * a->pad - a->kernel) / a->stride + 1 : 0))
            emu_die("conv2d", "image %d: %d output rows for %d input rows", s, out_len, in_len);
    }
    if (a->y.rows == 0) return;
    float *xf = read_view(c, a->x, "conv2d", "x");
    float *wf = read_weight(c, a->w, "conv2d", "weight");
    float *yf = iv_cpu_scratch((size_t)(a->y.rows * a->y.cols) * sizeof(float));
    memset(yf, 0, (size_t)(a->y.rows * a->y.cols) * sizeof(float));
    iv_tensor wt = iv_tensor_2d(wf, a->c_out, patch);
    iv_conv2d_args h = *a;
    h.x = dense(xf, a->x.rows, a->x.cols);
    h.y = dense(yf, a->y.rows, a->y.cols);
    h.w = &wt;
    h.cu_in_dev = a->cu_in;
    h.cu_out_dev = a->cu_out;
    cpu->conv2d(cpu, &h);
    write_view(c, a->y, yf, "conv2d", "y");
    free(xf);
    free(wf);
    free(yf);
}

/* ---- the table ---- */

const iv_ops *iv_emu_ops_open(iv_dtype dt, iv_err *err)
{
    if (dt != IV_BF16 && dt != IV_F16)
        return iv_errf(err, IV_E_UNSUPPORTED, "the emulated device runs bfloat16 or float16, not %s",
                       iv_dtype_name(dt)),
               NULL;
    emu_ctx *c = calloc(1, sizeof *c);
    if (!c) return iv_errf(err, IV_E_NOMEM, "out of memory opening the emulated device"), NULL;
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        free(c);
        return iv_errf(err, IV_E_INTERNAL, "cannot create the emulated device's lock"), NULL;
    }
    c->dt = dt;
    const long page = sysconf(_SC_PAGESIZE);
    c->page = page > 0 ? (size_t)page : 4096;
    c->ops = (iv_ops){
        .name = "emulated",
        .device = IV_EMULATED,
        .act_dtype = dt,
        .host_visible = 0,
        .ctx = c,
        .dev_alloc = emu_dev_alloc,
        .dev_free = emu_dev_free,
        .upload = emu_upload,
        .download = emu_download,
        .sync = emu_sync,
        .prepare_weight = emu_prepare_weight,
        .linear = emu_linear,
        .layer_norm = emu_layer_norm,
        .rms_norm = emu_rms_norm,
        .head_rms_norm = emu_head_rms_norm,
        .act = emu_act,
        .glu = emu_glu,
        .add = emu_add,
        .scale = emu_scale,
        .embed = emu_embed,
        .embed_bag = emu_embed_bag,
        .rope = emu_rope,
        .attention = emu_attention,
        .attention_rows = emu_attention_rows,
        .attention_rows_max_head_dim = 256, /* the CUDA kernel's, so the same models take its paths here */
        .softmax = emu_softmax,
        .l2_normalize = emu_l2_normalize,
        .pool = emu_pool,
        .moe_route = emu_moe_route,
        .moe_gather = emu_moe_gather,
        .moe_scatter = emu_moe_scatter,
        .rel_bias = emu_rel_bias,
        .im2col = emu_im2col,
        .gate_mul = emu_gate_mul,
        .causal_conv1d = emu_causal_conv1d,
        .delta_rule = emu_delta_rule,
        .delta_chunk = emu_delta_chunk,
        .clamp = emu_clamp,
        .mul_cols = emu_mul_cols,
        .conv2d = emu_conv2d,
        .act_stride = NULL,
    };
    return &c->ops;
}

void iv_emu_ops_close(const iv_ops *ops)
{
    if (!ops) return;
    emu_ctx *c = ctx_of(ops);
    for (size_t i = 0; i < c->n_weights; i++) free(c->weights[i]);
    free(c->weights);
    /* Slabs, and any allocation the caller did not free. */
    for (size_t i = 0; i < c->n_regions; i++) munmap((void *)c->regions[i].base, c->regions[i].len);
    free(c->regions);
    pthread_mutex_destroy(&c->lock);
    free(c);
}
