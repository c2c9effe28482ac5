/* The CUDA table's memory-bound kernels (src/ops/cuda/cuda_kernels.cu: norms,
 * head norm, act, glu, add, scale, embed, rope; the linear epilogue of
 * src/ops/cuda/cuda_linear.cu) run on the CPU under emu_rt.h: each op through
 * its real launcher twice from the same inputs, once with the scalar kernels
 * (iv_cuda_vec_kernels = 0: the kernels as they were before the 16-byte
 * vector kernels) and once with the vector kernels, on random views with odd
 * shapes, ld > cols, column windows (aligned and not), misaligned data,
 * in-place y == x (y == r for the norms, residual == y for the epilogue,
 * glu into x's first half), rows = 0 and specials (0, -0, inf, NaN). No GPU
 * needed; it checks the kernels' logic (indexing, lane groups, barriers,
 * shuffles under random warp schedules, grid-stride loops on small grids,
 * which path a view takes), not the timing or nvcc's code generation.
 *
 *   elementwise ops, rope, embed, epilogue: the two paths' buffers must be
 *     equal bit for bit (inside the views and around them);
 *   norms: the reduction order differs, so each path's output must equal bit
 *     for bit a host model of that kernel: the same per-element formula
 *     (norm_kernel's) from statistics summed in that kernel's order (scalar:
 *     per-thread strided sums, warp butterflies, a butterfly over the warps;
 *     vector: per-lane sums, the butterfly over the lane group, warps in
 *     order); outputs where the two differ are counted and printed.
 * Every buffer ends at a PROT_NONE page, and the space around each view
 * holds a sentinel that must survive.
 *
 * Build and run from the repository root (x86-64; CUDA headers only):
 *   mkdir -p build/gpu_emu
 *   python3 tests/gpu/emu/gen_kernels_emu.py src/ops/cuda build/gpu_emu/kernels_emu.cpp
 *   g++ -std=c++17 -O2 -ffp-contract=off -Isrc -Itests/gpu/emu -Ibuild/gpu_emu -I/usr/local/cuda/include -w \
 *       tests/gpu/emu/kernels_emu_check.cpp tests/gpu/emu/emu_rt.cpp -x c src/tensor/tensor.c \
 *       -o build/gpu_emu/kernels_emu_check
 *   build/gpu_emu/kernels_emu_check          # fixed shapes, then 300 random cases (seconds)
 *   build/gpu_emu/kernels_emu_check 3000 7   # more random cases, seed 7 (EMU_TRACE=1 names each case)
 * Exit status 1 on a failure. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <functional>
#include <vector>

#include "ops/cuda/cuda_internal.h"
#include "emu_rt.h"
#include "emu_kernels.h"
#include "emu_harness.h"

int emu_sms = 2;
int emu_max_blocks = 1 << 24;
int emu_occ = 8;
uint64_t emu_blocks_run = 0;
const void *emu_last_kernel = NULL;
#define g_last_kernel emu_last_kernel

/* The kernels under test, with their launchers (generated). */
#include "kernels_emu.cpp"

static const uint16_t SENTINEL = 0x7fa5; /* a NaN in both dtypes, unlike any the kernels make */
static int g_specials = 1;               /* percent of values that are 0, -0, +-inf or NaN */

static float rvalue(float range)
{
    if (rint_(100) < g_specials) {
        const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN};
        return sp[rint_(5)];
    }
    return runi(-range, range);
}

/* A 16-bit buffer of n elements (sentinels), registered for snapshots. */
struct Buf {
    void *p;
    size_t bytes;
};
static std::vector<Buf> g_bufs;
static uint16_t *buf16(size_t n)
{
    uint16_t *p = (uint16_t *)guarded(n * 2);
    for (size_t i = 0; i < n; i++) p[i] = SENTINEL;
    g_bufs.push_back({p, n * 2});
    return p;
}
/* A [rows, cols] view with row stride ld at column c0 of its buffer,
 * the buffer starting `mis` elements past a 16-byte boundary; values random. */
static iv_view view16(int64_t rows, int64_t cols, int64_t ld, int64_t c0, int mis, float range)
{
    const size_t n = (size_t)(mis + c0 + (rows > 0 ? (rows - 1) * ld + cols : 0) + rint_(3));
    uint16_t *b = buf16(n + 1);
    uint16_t *d = b + mis + c0;
    for (int64_t t = 0; t < rows; t++)
        for (int64_t c = 0; c < cols; c++) d[t * ld + c] = to16(rvalue(range));
    return iv_view_make(d, g_dt, rows, cols, ld);
}

static std::vector<std::vector<unsigned char>> snapshot()
{
    std::vector<std::vector<unsigned char>> s;
    for (auto &b : g_bufs) s.emplace_back((unsigned char *)b.p, (unsigned char *)b.p + b.bytes);
    return s;
}
static void restore(const std::vector<std::vector<unsigned char>> &s)
{
    for (size_t i = 0; i < g_bufs.size(); i++) memcpy(g_bufs[i].p, s[i].data(), g_bufs[i].bytes);
}

/* ---- the two runs ---- */

static int g_fail = 0, g_cases = 0, g_vec_cases = 0;
static long long g_norm_elems = 0, g_norm_ulp1 = 0;
static char g_case[256];

static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL %s: ", g_case);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    g_fail++;
}

/* Runs op with the scalar kernels, then with the vector kernels from the
 * same buffers; returns both end states. `scalar_kernel` is the scalar
 * path's kernel: the vector run must launch something else when expect_vec,
 * and that same kernel when not. */
struct Runs {
    std::vector<std::vector<unsigned char>> before, scalar, vec;
    bool ok;
};
static Runs run_both(const std::function<void()> &op, const void *scalar_kernel, bool expect_vec, bool expect_launch)
{
    Runs r;
    r.ok = false;
    if (getenv("EMU_TRACE")) fprintf(stderr, "case %s\n", g_case);
    r.before = snapshot();
    g_err = 0;
    iv_cuda_vec_kernels = 0;
    const uint64_t b0 = emu_blocks_run;
    g_last_kernel = NULL;
    op();
    if (g_err) {
        fail("scalar run noted an error: %s", g_msg);
        return r;
    }
    if (expect_launch != (emu_blocks_run != b0)) {
        fail("scalar run %s", expect_launch ? "launched nothing" : "launched a kernel");
        return r;
    }
    if (expect_launch && g_last_kernel != scalar_kernel) {
        fail("scalar run took another kernel");
        return r;
    }
    r.scalar = snapshot();
    restore(r.before);
    iv_cuda_vec_kernels = 1;
    const uint64_t b1 = emu_blocks_run;
    g_last_kernel = NULL;
    op();
    if (g_err) {
        fail("vector run noted an error: %s", g_msg);
        return r;
    }
    if (expect_launch != (emu_blocks_run != b1)) {
        fail("vector run %s", expect_launch ? "launched nothing" : "launched a kernel");
        return r;
    }
    if (expect_launch && (g_last_kernel == scalar_kernel) == expect_vec) {
        fail("the view took the %s kernel, expected the %s one", expect_vec ? "scalar" : "vector",
             expect_vec ? "vector" : "scalar");
        return r;
    }
    r.vec = snapshot();
    g_cases++;
    if (expect_vec && expect_launch) g_vec_cases++;
    r.ok = true;
    return r;
}

static bool untouched_outside(const std::vector<unsigned char> &before, const std::vector<unsigned char> &after,
                              const iv_view *w, const void *base);

/* The two end states equal bit for bit, and nothing changed but y's elements. */
static void expect_same(const Runs &r, const iv_view &y)
{
    if (!r.ok) return;
    for (size_t i = 0; i < g_bufs.size(); i++) {
        const bool has_y = (const char *)y.data >= (const char *)g_bufs[i].p &&
                           (const char *)y.data < (const char *)g_bufs[i].p + g_bufs[i].bytes;
        if (!untouched_outside(r.before[i], r.vec[i], has_y ? &y : NULL, g_bufs[i].p) ||
            !untouched_outside(r.before[i], r.scalar[i], has_y ? &y : NULL, g_bufs[i].p)) {
            fail("buffer %zu changed outside y", i);
            return;
        }
    }
    for (size_t i = 0; i < r.scalar.size(); i++)
        if (r.scalar[i] != r.vec[i]) {
            const uint16_t *a = (const uint16_t *)r.scalar[i].data(), *b = (const uint16_t *)r.vec[i].data();
            for (size_t k = 0; k < r.scalar[i].size() / 2; k++)
                if (a[k] != b[k]) {
                    fail("buffer %zu element %zu: scalar %04x (%g), vector %04x (%g)", i, k, a[k], from16(a[k]), b[k],
                         from16(b[k]));
                    return;
                }
            fail("buffer %zu differs", i);
            return;
        }
}

/* Outside `written` (buffer index -> view), every buffer as before. */
static bool untouched_outside(const std::vector<unsigned char> &before, const std::vector<unsigned char> &after,
                              const iv_view *w, const void *base)
{
    const uint16_t *a = (const uint16_t *)before.data(), *b = (const uint16_t *)after.data();
    const size_t n = before.size() / 2;
    for (size_t k = 0; k < n; k++) {
        if (a[k] == b[k]) continue;
        if (w) {
            const int64_t off = (int64_t)k - ((const uint16_t *)w->data - (const uint16_t *)base);
            if (off >= 0 && w->rows > 0) {
                const int64_t t = off / w->ld, c = off % w->ld;
                if (t < w->rows && c < w->cols) continue;
            }
        }
        return false;
    }
    return true;
}

/* ---- elementwise ops ---- */

struct Shape {
    int64_t rows, cols, ld, c0;
    int mis;
};
/* A random view shape: mostly what the vector kernels take, sometimes not. */
static Shape rshape(int64_t rows, int64_t cols, bool allow_odd)
{
    Shape s;
    s.rows = rows;
    s.cols = cols;
    const int kind = allow_odd ? rint_(6) : 0;
    s.c0 = kind == 1 ? 1 + rint_(7) : (rint_(2) ? 8 * rint_(3) : 0);
    s.ld = s.c0 + cols + (rint_(2) ? 8 * rint_(3) : 0);
    if (kind == 2) s.ld += 1 + rint_(7);
    s.mis = kind == 3 ? 1 + rint_(7) : 0;
    return s;
}
static bool shape_vec(const Shape &s) { return s.c0 % 8 == 0 && s.ld % 8 == 0 && s.cols % 8 == 0 && s.mis == 0; }
static iv_view make(const Shape &s, float range) { return view16(s.rows, s.cols, s.ld, s.c0, s.mis, range); }

static void check_elementwise(int rows, int cols, bool odd)
{
    const char *an[] = {"none", "gelu", "gelu_tanh", "silu", "relu", "tanh", "sigmoid"};
    /* act: y separate or in place */
    {
        const int act = rint_(7), inplace = rint_(3) == 0;
        Shape sx = rshape(rows, cols, odd), sy = rshape(rows, cols, odd);
        iv_view x = make(sx, 6.0f), y = inplace ? x : make(sy, 1.0f);
        const bool vec = shape_vec(sx) && (inplace || shape_vec(sy));
        snprintf(g_case, sizeof g_case, "act %s [%d, %d] x ld %lld c0 %lld mis %d%s", an[act], rows, cols,
                 (long long)sx.ld, (long long)sx.c0, sx.mis, inplace ? " in place" : "");
        expect_same(run_both([&] { iv_cuda_act(&g_ctx.ops, y, x, (iv_act)act); }, (const void *)act_kernel, vec,
                             rows > 0 && cols > 0),
                    y);
        g_bufs.clear();
    }
    /* glu: y separate, or x's first half (x's ld) */
    {
        const int act = rint_(7), first = rint_(2), inplace = rint_(3) == 0;
        Shape sx = rshape(rows, 2 * cols, odd), sy = rshape(rows, cols, odd);
        iv_view x = make(sx, 6.0f);
        iv_view y = inplace ? iv_view_make(x.data, g_dt, rows, cols, x.ld) : make(sy, 1.0f);
        const bool vec = shape_vec(sx) && cols % 8 == 0 && (inplace || shape_vec(sy));
        snprintf(g_case, sizeof g_case, "glu %s first %d [%d, %d] x ld %lld c0 %lld mis %d%s", an[act], first, rows,
                 cols, (long long)sx.ld, (long long)sx.c0, sx.mis, inplace ? " in place" : "");
        expect_same(run_both([&] { iv_cuda_glu(&g_ctx.ops, y, x, (iv_act)act, first); }, (const void *)glu_kernel,
                             vec, rows > 0 && cols > 0),
                    y);
        g_bufs.clear();
    }
    /* add: y separate, y == a, or y == b */
    {
        const int mode = rint_(3);
        Shape sa = rshape(rows, cols, odd), sb = rshape(rows, cols, odd), sy = rshape(rows, cols, odd);
        iv_view a = make(sa, 8.0f), b = make(sb, 8.0f), y = mode == 1 ? a : mode == 2 ? b : make(sy, 1.0f);
        const bool vec = shape_vec(sa) && shape_vec(sb) && (mode || shape_vec(sy));
        snprintf(g_case, sizeof g_case, "add [%d, %d] mode %d", rows, cols, mode);
        expect_same(run_both([&] { iv_cuda_add(&g_ctx.ops, y, a, b); }, (const void *)add_kernel, vec,
                             rows > 0 && cols > 0),
                    y);
        g_bufs.clear();
    }
    /* scale */
    {
        const int inplace = rint_(3) == 0;
        const float s = rint_(3) == 0 ? 1.0f : runi(-3.0f, 3.0f);
        Shape sx = rshape(rows, cols, odd), sy = rshape(rows, cols, odd);
        iv_view x = make(sx, 8.0f), y = inplace ? x : make(sy, 1.0f);
        const bool vec = shape_vec(sx) && (inplace || shape_vec(sy));
        snprintf(g_case, sizeof g_case, "scale %g [%d, %d]%s", s, rows, cols, inplace ? " in place" : "");
        expect_same(run_both([&] { iv_cuda_scale(&g_ctx.ops, y, x, s); }, (const void *)scale_kernel, vec,
                             rows > 0 && cols > 0),
                    y);
        g_bufs.clear();
    }
    /* embed */
    {
        const int V = 1 + rint_(40), acc = rint_(2), tmis = odd && rint_(4) == 0 ? 1 + rint_(7) : 0;
        Shape sy = rshape(rows, cols, odd);
        iv_view y = make(sy, 4.0f);
        iv_view tv = view16(V, cols, cols, 0, tmis, 4.0f);
        iv_tensor table;
        memset(&table, 0, sizeof table);
        table.dtype = g_dt;
        table.device = IV_CUDA;
        table.ndim = 2;
        table.shape[0] = V;
        table.shape[1] = cols;
        table.data = tv.data;
        int32_t *ids = (int32_t *)guarded(sizeof(int32_t) * (size_t)(rows > 0 ? rows : 1));
        for (int t = 0; t < rows; t++) ids[t] = rint_(V);
        const bool vec = shape_vec(sy) && tmis == 0 && cols % 8 == 0;
        snprintf(g_case, sizeof g_case, "embed [%d, %d] V %d acc %d table mis %d", rows, cols, V, acc, tmis);
        expect_same(run_both([&] { iv_cuda_embed(&g_ctx.ops, y, &table, ids, acc); }, (const void *)embed_kernel, vec,
                             rows > 0 && cols > 0),
                    y);
        g_bufs.clear();
    }
}

/* ---- the linear epilogue ---- */

static void check_epilogue(int rows, int cols, bool odd)
{
    const int act = rint_(7), has_b = rint_(2), res_mode = rint_(3); /* 0 none, 1 separate, 2 in place (y) */
    Shape sy = rshape(rows, cols, odd);
    iv_view y = make(sy, 4.0f);
    const int amis = odd && rint_(4) == 0 ? 1 + rint_(3) : 0;
    float *acc = (float *)guarded(sizeof(float) * (size_t)(rows * cols + amis + 1)) + amis;
    for (int64_t i = 0; i < (int64_t)rows * cols; i++) acc[i] = rvalue(6.0f);
    g_bufs.push_back({acc - amis, sizeof(float) * (size_t)(rows * cols + amis + 1)});
    iv_view bv = view16(1, cols, cols, 0, odd && rint_(4) == 0 ? 1 : 0, 2.0f);
    const void *bias = has_b ? bv.data : NULL;
    const void *res = NULL;
    if (res_mode == 1) {
        /* the residual has y's layout */
        uint16_t *rb = buf16((size_t)((uint16_t *)y.data - (uint16_t *)g_bufs[0].p) + (size_t)(rows * y.ld) + 8);
        uint16_t *rd = rb + ((uint16_t *)y.data - (uint16_t *)g_bufs[0].p);
        for (int64_t t = 0; t < rows; t++)
            for (int64_t c = 0; c < cols; c++) rd[t * y.ld + c] = to16(rvalue(4.0f));
        res = rd;
    } else if (res_mode == 2) {
        res = y.data;
    }
    const bool vec = shape_vec(sy) && amis == 0 && (!has_b || ((uintptr_t)bias % 16 == 0)) &&
                     (!res || (uintptr_t)res % 16 == 0);
    snprintf(g_case, sizeof g_case, "epilogue act %d bias %d res %d [%d, %d] ld %lld acc mis %d", act, has_b, res_mode,
             rows, cols, (long long)y.ld, amis);
    /* iv_cuda_linear returns before the epilogue when rows or cols is 0 */
    expect_same(run_both(
                    [&] {
                        if (rows > 0 && cols > 0)
                            launch_epilogue(&g_ctx, y.data, y.ld, acc, cols, bias, res, act, rows, cols);
                    },
                         (const void *)linear_epilogue_kernel, vec, rows > 0 && cols > 0),
                y);
    g_bufs.clear();
}

/* ---- norms ---- */

/* The vector kernel's geometry for units of nv vectors (norm_vec_pick). */
static bool norm_geom(int64_t nv, int &G, int &W, int &NV)
{
    G = 32, W = 1;
    if (nv <= 4) G = 4, NV = 1;
    else if (nv <= 8) G = 8, NV = 1;
    else if (nv <= 16) G = 16, NV = 1;
    else if (nv <= 128) NV = (int)((nv + 31) / 32);
    else if (nv <= 192) W = 2, NV = 3;
    else if (nv <= 256) W = 2, NV = 4;
    else if (nv <= 384) W = 4, NV = 3;
    else if (nv <= 512) W = 4, NV = 4;
    else if (nv <= 768) W = 8, NV = 3;
    else if (nv <= 1024) W = 8, NV = 4;
    else return false;
    return true;
}

/* The vector kernel's sum over z (sq: of squares; else of z - mean squared
 * when dev, else of z): per-lane partial sums, the butterfly over each warp's
 * G lanes, then the W warps in order. */
static float model_sum(const float *z, int64_t n, int G, int W, int NV, int mode, float mean)
{
    const int64_t nv = n / 8;
    const int lanes = G * W;
    std::vector<float> part(lanes, 0.0f);
    for (int g = 0; g < lanes; g++) {
        float a = 0.0f;
        for (int j = 0; j < NV; j++) {
            const int64_t v = g + (int64_t)lanes * j;
            if (v >= nv) continue;
            for (int k = 0; k < 8; k++) {
                const float e = z[v * 8 + k];
                if (mode == 0) a += e;
                else if (mode == 1) a += e * e;
                else {
                    const float d = e - mean;
                    a += d * d;
                }
            }
        }
        part[g] = a;
    }
    std::vector<float> wsum(W);
    for (int w = 0; w < W; w++) {
        std::vector<float> l(part.begin() + w * G, part.begin() + w * G + G);
        for (int o = G / 2; o > 0; o >>= 1) {
            std::vector<float> nl(G);
            for (int i = 0; i < G; i++) nl[i] = l[i] + l[i ^ o];
            l = nl;
        }
        wsum[w] = l[0];
    }
    float s = wsum[0];
    for (int w = 1; w < W; w++) s += wsum[w];
    return s;
}

/* 32 values summed by the xor butterfly (warp_sum): lane 0's result. */
static float butterfly32(std::vector<float> l)
{
    for (int o = 16; o > 0; o >>= 1) {
        std::vector<float> nl(32);
        for (int i = 0; i < 32; i++) nl[i] = l[i] + l[i ^ o];
        l = nl;
    }
    return l[0];
}

/* The scalar kernels' sums: norm_kernel (T threads, each summing columns
 * c = tid, tid + T, ..., then block_sum: each warp's butterfly, then a
 * butterfly over the warps' sums), or head_rms_norm_kernel (T = 32: one
 * warp's butterfly). */
static float model_sum_scalar(const float *z, int64_t n, int T, int mode, float mean)
{
    std::vector<float> part(T, 0.0f);
    for (int t = 0; t < T; t++) {
        float a = 0.0f;
        for (int64_t c = t; c < n; c += T) {
            const float e = z[c];
            if (mode == 0) a += e;
            else if (mode == 1) a += e * e;
            else {
                const float d = e - mean;
                a += d * d;
            }
        }
        part[t] = a;
    }
    const int nw = T / 32;
    std::vector<float> red(32, 0.0f);
    for (int w = 0; w < nw; w++) red[w] = butterfly32(std::vector<float>(part.begin() + 32 * w, part.begin() + 32 * w + 32));
    return nw == 1 ? red[0] : butterfly32(red);
}

static bool is_nan16(uint16_t v) { return g_dt == IV_BF16 ? (v & 0x7fff) > 0x7f80 : (v & 0x7fff) > 0x7c00; }
/* Distance in representable values (same sign), 0 for two NaNs, else a large number. */
static int ulps16(uint16_t a, uint16_t b)
{
    if (a == b) return 0;
    if (is_nan16(a) && is_nan16(b)) return 0;
    if ((a ^ b) & 0x8000) return (a & 0x7fff) == 0 && (b & 0x7fff) == 0 ? 0 : 1 << 20;
    return abs((int)(a & 0x7fff) - (int)(b & 0x7fff));
}

/* A norm's unit u: the element offsets of its n values in x. */
static void check_norm_case(int layer, int head, int64_t rows, int64_t n, int nh, bool odd)
{
    const int has_w = rint_(4) != 0, has_b = layer && rint_(3) != 0, has_r = !head && rint_(2);
    const int ymode = head ? 1 : rint_(3); /* 0 separate, 1 y == x, 2 y == r */
    const float eps = rint_(2) ? 1e-5f : 1e-6f, w_offset = !layer && rint_(3) == 0 ? 1.0f : 0.0f;
    const int64_t cols = head ? (int64_t)nh * n + (rint_(2) ? 8 * rint_(3) : 0) : n;
    Shape sx = rshape(rows, cols, odd);
    const float range = rint_(2) ? 3.0f : 200.0f, offset = layer && rint_(2) ? runi(-50, 50) : 0.0f;
    iv_view x = make(sx, range);
    for (int64_t t = 0; t < rows; t++)
        for (int64_t c = 0; c < cols; c++) {
            uint16_t *p = (uint16_t *)x.data + t * x.ld + c;
            *p = to16(from16(*p) + offset);
        }
    Shape sr = sx;
    sr.c0 = sx.c0; /* r has x's ld */
    iv_view r = has_r ? make(sr, range) : iv_view{};
    if (has_r && ymode == 2) {
        /* y == r */
    }
    const int wmis = odd && rint_(6) == 0 ? 1 : 0;
    iv_view wv = view16(1, n, n, 0, wmis, 1.5f), bv = view16(1, n, n, 0, 0, 1.0f);
    iv_tensor wt, bt;
    memset(&wt, 0, sizeof wt);
    wt.dtype = g_dt;
    wt.device = IV_CUDA;
    wt.ndim = 1;
    wt.shape[0] = n;
    wt.data = wv.data;
    bt = wt;
    bt.data = bv.data;
    Shape sy = rshape(rows, cols, odd);
    iv_view y = ymode == 1 ? x : ymode == 2 && has_r ? iv_view_make(r.data, g_dt, rows, cols, x.ld) : make(sy, 1.0f);
    const int yvec = ymode == 1 || (ymode == 2 && has_r) ? shape_vec(sx) : shape_vec(sy);
    int G, W, NV;
    const bool fits = norm_geom(n / 8, G, W, NV);
    const bool vec = shape_vec(sx) && yvec && n % 8 == 0 && fits && (!has_w || wmis == 0);
    snprintf(g_case, sizeof g_case,
             "%s [%lld, %lld] n %lld heads %d ld %lld c0 %lld mis %d w %d b %d r %d ymode %d G %d W %d NV %d",
             head ? "head_rms_norm" : layer ? "layer_norm" : "rms_norm", (long long)rows, (long long)cols, (long long)n,
             nh, (long long)x.ld, (long long)sx.c0, sx.mis, has_w, has_b, has_r, ymode, G, W, NV);
    const iv_tensor *w = has_w ? &wt : NULL, *b = has_b ? &bt : NULL;
    const void *rp = has_r ? r.data : NULL;
    /* the inputs before the runs, for the model */
    std::vector<float> zin((size_t)(rows * nh * n));
    for (int64_t t = 0; t < rows; t++)
        for (int h = 0; h < nh; h++)
            for (int64_t i = 0; i < n; i++) {
                const int64_t o = t * x.ld + h * n + i;
                float z = from16(((uint16_t *)x.data)[o]);
                if (rp) z = z + from16(((const uint16_t *)rp)[o]);
                zin[(size_t)((t * nh + h) * n + i)] = z;
            }
    Runs R = run_both(
        [&] {
            if (head) iv_cuda_head_rms_norm(&g_ctx.ops, x, nh, (int)n, w, eps, w_offset);
            else if (layer) iv_cuda_layer_norm(&g_ctx.ops, y, x, rp, w, b, eps);
            else iv_cuda_rms_norm(&g_ctx.ops, y, x, rp, w, eps, w_offset);
        },
        head ? (const void *)head_rms_norm_kernel : (const void *)norm_kernel, vec, rows > 0 && n > 0 && nh > 0);
    if (!R.ok) return;
    /* which buffer holds y */
    size_t yb = 0;
    for (size_t i = 0; i < g_bufs.size(); i++)
        if ((const char *)y.data >= (const char *)g_bufs[i].p &&
            (const char *)y.data < (const char *)g_bufs[i].p + g_bufs[i].bytes)
            yb = i;
    /* every other buffer unchanged by either run; y's outside the written columns */
    for (size_t i = 0; i < g_bufs.size(); i++) {
        if (i == yb) continue;
        if (R.before[i] != R.scalar[i] || R.before[i] != R.vec[i]) {
            fail("buffer %zu (not y) changed", i);
            return;
        }
    }
    const iv_view yw = head ? iv_view_make(y.data, g_dt, rows, (int64_t)nh * n, y.ld) : y;
    if (!untouched_outside(R.before[yb], R.vec[yb], &yw, g_bufs[yb].p) ||
        !untouched_outside(R.before[yb], R.scalar[yb], &yw, g_bufs[yb].p)) {
        fail("a write outside y");
        return;
    }
    const uint16_t *ys = (const uint16_t *)R.scalar[yb].data() + ((uint16_t *)y.data - (uint16_t *)g_bufs[yb].p);
    const uint16_t *yv = (const uint16_t *)R.vec[yb].data() + ((uint16_t *)y.data - (uint16_t *)g_bufs[yb].p);
    const uint16_t *wr = (const uint16_t *)wv.data, *br = (const uint16_t *)bv.data;
    /* The scalar kernel's threads (row_threads; a warp for the head norm). */
    int T = 32;
    if (!head) {
        int64_t tt = ((n + 3) / 4 + 31) / 32 * 32;
        T = tt < 32 ? 32 : tt > 1024 ? 1024 : (int)tt;
    }
    for (int64_t t = 0; t < rows; t++)
        for (int h = 0; h < nh; h++) {
            const float *z = &zin[(size_t)((t * nh + h) * n)];
            /* path 0: the scalar kernel's sums, 1: the vector kernel's */
            float mean[2] = {0.0f, 0.0f}, rstd[2];
            for (int pth = 0; pth < 2; pth++) {
                if (pth == 1 && !vec) {
                    mean[1] = mean[0];
                    rstd[1] = rstd[0];
                    continue;
                }
                auto sum = [&](int mode, float m) {
                    return pth == 0 ? model_sum_scalar(z, n, T, mode, m) : model_sum(z, n, G, W, NV, mode, m);
                };
                const float s1 = sum(layer ? 0 : 1, 0.0f);
                float var;
                if (layer) {
                    mean[pth] = s1 / (float)n;
                    var = sum(2, mean[pth]) / (float)n;
                } else {
                    var = s1 / (float)n;
                }
                rstd[pth] = 1.0f / sqrtf(var + eps);
            }
            for (int64_t i = 0; i < n; i++) {
                const int64_t o = t * y.ld + h * n + i;
                g_norm_elems++;
                const uint16_t got[2] = {ys[o], yv[o]};
                uint16_t m[2];
                for (int pth = 0; pth < 2; pth++) {
                    /* norm_kernel's per-element formula */
                    float e;
                    if (layer) {
                        e = (z[i] - mean[pth]) * rstd[pth];
                        if (w) e = e * from16(wr[i]);
                        if (b) e = e + from16(br[i]);
                    } else {
                        e = z[i] * rstd[pth];
                        if (w) e = e * (from16(wr[i]) + w_offset);
                    }
                    m[pth] = to16(e);
                    if (m[pth] != got[pth] && !(is_nan16(m[pth]) && is_nan16(got[pth]))) {
                        fail("row %lld head %d col %lld: %s kernel %04x (%g), its model %04x (%g)", (long long)t, h,
                             (long long)i, pth ? "vector" : "scalar", got[pth], from16(got[pth]), m[pth],
                             from16(m[pth]));
                        return;
                    }
                }
                if (ulps16(ys[o], yv[o]) != 0) g_norm_ulp1++;
            }
        }
    g_bufs.clear();
}

/* ---- rope ---- */

static void check_rope(int rows, int nh, int hd, int rot, int inter, bool odd)
{
    const int64_t cols = (int64_t)nh * hd + (rint_(2) ? 8 * rint_(3) : 0);
    Shape sx = rshape(rows, cols, odd);
    iv_view x = make(sx, 4.0f);
    int32_t *pos = (int32_t *)guarded(sizeof(int32_t) * (size_t)(rows > 0 ? rows : 1));
    const int big = rint_(4) == 0;
    for (int t = 0; t < rows; t++) pos[t] = big ? rint_(300000) : rint_(4096);
    std::vector<float> inv(rot / 2 > 0 ? rot / 2 : 1);
    for (int i = 0; i < rot / 2; i++) inv[i] = powf(10000.0f, -2.0f * i / (float)rot);
    iv_rope_args a;
    memset(&a, 0, sizeof a);
    a.x = x;
    a.n_heads = nh;
    a.head_dim = hd;
    a.rot_dim = rot;
    a.pos = pos;
    a.inv_freq = inv.data();
    a.interleaved = inter;
    a.attn_factor = rint_(3) == 0 ? runi(0.5f, 1.5f) : 0.0f;
    const int npairs = rot / 2;
    const bool vec = shape_vec(sx) && hd % 8 == 0 && (inter ? rot % 8 == 0 : npairs % 8 == 0);
    snprintf(g_case, sizeof g_case, "rope [%d, %lld] heads %d hd %d rot %d inter %d ld %lld c0 %lld mis %d big %d",
             rows, (long long)cols, nh, hd, rot, inter, (long long)x.ld, (long long)sx.c0, sx.mis, big);
    const iv_view yw = iv_view_make(x.data, g_dt, rows, (int64_t)nh * hd, x.ld);
    expect_same(run_both([&] { iv_cuda_rope(&g_ctx.ops, &a); }, (const void *)rope_kernel, vec,
                         rows > 0 && npairs > 0 && nh > 0),
                yw);
    g_bufs.clear();
}

/* ---- driver ---- */

static void set_dtype(iv_dtype dt)
{
    g_dt = dt;
    memset(&g_ctx, 0, sizeof g_ctx);
    g_ctx.ops.ctx = &g_ctx;
    g_ctx.dt = dt;
    g_ctx.bf16 = dt == IV_BF16;
    g_ctx.device = 0;
    g_ctx.stream = 0;
}

static void random_grid()
{
    emu_sms = 1 + rint_(4);
    emu_max_blocks = rint_(3) == 0 ? 1 + rint_(3) : 1 << 24;
    emu_occ = 1 + rint_(4);
    emu.rng = rnext() | 1;
}

static void fixed_cases()
{
    const iv_dtype dts[2] = {IV_BF16, IV_F16};
    for (int d = 0; d < 2; d++) {
        set_dtype(dts[d]);
        /* the profiled shapes, scaled down in rows */
        const int norm_n[] = {8, 16, 24, 32, 40, 64, 128, 136, 256, 264, 512, 520, 768, 1024, 1032, 1536, 2048, 2056,
                              3072, 4096, 6144, 8192, 8200, 7, 100, 770};
        for (int n : norm_n)
            for (int layer = 0; layer < 2; layer++) {
                random_grid();
                check_norm_case(layer, 0, n > 2048 ? 3 : 9, n, 1, false);
            }
        const int hds[] = {8, 32, 64, 80, 128, 256, 12};
        for (int hd : hds) {
            random_grid();
            check_norm_case(0, 1, 5, hd, 1 + rint_(17), false);
        }
        const int ew_cols[] = {8, 16, 64, 96, 128, 384, 768, 1024, 3072, 1, 7, 100};
        for (int c : ew_cols) {
            random_grid();
            check_elementwise(1 + rint_(12), c, false);
            random_grid();
            check_epilogue(1 + rint_(12), c, false);
        }
        /* Qwen3 (hd 128, NeoX), GPT-J style, partial rotary, odd rot */
        random_grid();
        check_rope(7, 16, 128, 128, 0, false);
        random_grid();
        check_rope(7, 8, 128, 128, 0, false);
        random_grid();
        check_rope(5, 4, 64, 64, 1, false);
        random_grid();
        check_rope(5, 6, 64, 32, 0, false);
        random_grid();
        check_rope(5, 3, 80, 24, 0, false);
        random_grid();
        check_rope(5, 3, 64, 16, 1, false);
        /* rows = 0 */
        check_elementwise(0, 64, false);
        check_epilogue(0, 64, false);
        check_norm_case(1, 0, 0, 64, 1, false);
        check_norm_case(0, 1, 0, 64, 4, false);
        check_rope(0, 4, 64, 64, 0, false);
        free_all();
    }
}

static void random_cases(int n)
{
    for (int i = 0; i < n; i++) {
        set_dtype(rint_(2) ? IV_BF16 : IV_F16);
        random_grid();
        g_specials = rint_(3) == 0 ? 5 : 0;
        const int what = rint_(5);
        const int rows = rint_(8) == 0 ? 0 : 1 + rint_(20);
        if (what == 0) {
            const int cols = rint_(3) ? 8 * (1 + rint_(80)) : 1 + rint_(300);
            check_elementwise(rows, cols, true);
        } else if (what == 1) {
            const int cols = rint_(3) ? 8 * (1 + rint_(80)) : 1 + rint_(300);
            check_epilogue(rows, cols, true);
        } else if (what == 2) {
            const int n8 = rint_(4) ? 8 * (1 + rint_(rint_(3) ? 140 : 1030)) : 1 + rint_(600);
            check_norm_case(rint_(2), 0, rint_(6) == 0 ? 0 : 1 + rint_(n8 > 2000 ? 3 : 8), n8, 1, true);
        } else if (what == 3) {
            const int hd = rint_(4) ? 8 * (1 + rint_(32)) : 1 + rint_(100);
            check_norm_case(0, 1, rows > 6 ? 6 : rows, hd, 1 + rint_(12), true);
        } else {
            const int hd = rint_(4) ? 8 * (1 + rint_(32)) : 2 * (1 + rint_(50));
            int rot = hd;
            if (rint_(3) == 0) rot = 2 * rint_(hd / 2 + 1);
            check_rope(rows, 1 + rint_(12), hd, rot, rint_(2), true);
        }
        g_specials = 1;
        free_all();
    }
}

int main(int argc, char **argv)
{
    const int n = argc > 1 ? atoi(argv[1]) : 300;
    rs = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
    fixed_cases();
    printf("fixed cases: %d checked (%d on the vector kernels), %d failures\n", g_cases, g_vec_cases, g_fail);
    random_cases(n);
    printf("all cases: %d checked (%d on the vector kernels), %d failures; norms: %lld outputs, %lld differ from "
           "the scalar kernel (reduction order; each kernel matched its own model)\n",
           g_cases, g_vec_cases, g_fail, g_norm_elems, g_norm_ulp1);
    printf("%d passed, %d failed\n", g_cases - g_fail, g_fail);
    return g_fail ? 1 : 0;
}
