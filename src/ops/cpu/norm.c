/* LayerNorm, RMSNorm and per-head RMSNorm over rows, in FP32 like torch.
 *
 * The optional residual r has x's layout (rows x.ld apart). z = x + r is
 * formed first and written to y, so y may alias x or r. Statistics use two
 * passes (mean, then squared deviations: no cancellation), accumulated in
 * double so that a large common offset (a row of 1000 + noise) costs no
 * precision; biased variance and eps inside the square root, as torch.
 * Everything else is float. */
#include <assert.h>
#include <math.h>
#include <string.h>
#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "ops/cpu/cpu_ops.h"

/* Row functions are inlined into the row loops: called per row, they cost
 * a few percent of a 384-wide LayerNorm. */
#define ROW_INLINE static inline __attribute__((always_inline))

typedef float iv_f4 __attribute__((vector_size(16)));
typedef double iv_d4 __attribute__((vector_size(32)));

/* Four floats as four doubles: one vcvtps2pd on AVX (from the generic
 * form GCC made two 2-float converts and an insert). Through a pointer: a
 * 32-byte vector returned by value would change the ABI of builds without
 * AVX (-Wpsabi). */
static inline void to_d4(iv_d4 *d, iv_f4 v)
{
#if defined(__AVX__)
    *d = (iv_d4)_mm256_cvtps_pd((__m128)v);
#else
    *d = __builtin_convertvector(v, iv_d4);
#endif
}

static inline iv_f4 load_f4(const float *p)
{
    iv_f4 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static double sum_d4(const iv_d4 a[4])
{
    const iv_d4 t = (a[0] + a[1]) + (a[2] + a[3]);
    return (t[0] + t[1]) + (t[2] + t[3]);
}

/* The sum over a row of z (squares = 0) or of (z - m)^2 (squares = 1),
 * where z is x, or x + r written into y on the way when r is given.
 * The sums run in four independent vectors of four doubles (with one
 * accumulator, the omp simd reduction before, each pass waited on its add
 * chain), still in double: only the order of the partial sums differs.
 * One thread, rows in L2, core cycles per row before -> after: held to
 * AVX2, 384 wide, LayerNorm with a residual 709 -> 574, without 571 ->
 * 434, RMSNorm 358 -> 279; natively (AVX-512) 670 -> 562, 571 -> 417,
 * 364 -> 277, and 768 wide 1370 -> 1145, 997 -> 777, 642 -> 505.
 * Adding the residual here costs it no pass of its own, and RMSNorm makes
 * one pass fewer (same sums in the same order, same bits): LayerNorm +
 * residual 574 -> 525 held to AVX2, 562 -> 491 natively; RMSNorm 277 ->
 * 240 and 275 -> 230 (768 wide, natively: 496 -> 403); LayerNorm alone
 * unchanged (432, 414). */
ROW_INLINE double row_sum(float *y, const float *x, const float *r, int64_t n, double m, const int squares)
{
    iv_d4 a[4] = {{0}};
    int64_t c = 0;
    for (; c + 16 <= n; c += 16)
        for (int k = 0; k < 4; k++) {
            const int64_t o = c + 4 * k;
            iv_f4 z = load_f4(x + o);
            if (r) {
                z = z + load_f4(r + o);
                memcpy(y + o, &z, sizeof z);
            }
            iv_d4 d;
            to_d4(&d, z);
            if (squares) {
                d -= m;
                a[k] += d * d;
            } else {
                a[k] += d;
            }
        }
    double s = sum_d4(a);
    for (; c < n; c++) {
        const float z = r ? (y[c] = x[c] + r[c]) : x[c];
        const double d = (double)z - m;
        s += squares ? d * d : (double)z;
    }
    return s;
}

ROW_INLINE void layer_norm_row(float *y, const float *x, const float *r, const float *w, const float *b, float eps,
                               int64_t n)
{
    /* Two instances, so the loop without a residual has no test of r. */
    const double sum = r ? row_sum(y, x, r, n, 0.0, 0) : row_sum(NULL, x, NULL, n, 0.0, 0);
    const float mean = (float)(sum / (double)n);
    const float *z = r ? y : x;
    const float var = (float)(row_sum(NULL, z, NULL, n, mean, 1) / (double)n);
    float rstd = 1.0f / sqrtf(var + eps);
    if (w && b) {
#pragma omp simd
        for (int64_t c = 0; c < n; c++) y[c] = (z[c] - mean) * rstd * w[c] + b[c];
    } else if (w) {
#pragma omp simd
        for (int64_t c = 0; c < n; c++) y[c] = (z[c] - mean) * rstd * w[c];
    } else if (b) {
#pragma omp simd
        for (int64_t c = 0; c < n; c++) y[c] = (z[c] - mean) * rstd + b[c];
    } else {
#pragma omp simd
        for (int64_t c = 0; c < n; c++) y[c] = (z[c] - mean) * rstd;
    }
}

void iv_cpu_layer_norm(const iv_ops *ops, iv_view y, iv_view x, const void *res, const iv_tensor *w,
                       const iv_tensor *b, float eps)
{
    const float *r = res;
    assert(y.rows == x.rows && y.cols == x.cols);
    assert(!w || iv_tensor_numel(w) == x.cols);
    assert(!b || iv_tensor_numel(b) == x.cols);
    const float *wd = w ? iv_f32(w) : NULL, *bd = b ? iv_f32(b) : NULL;
#pragma omp parallel for schedule(static) if (x.rows * x.cols >= IV_CPU_PAR_MIN)
    for (int64_t t = 0; t < x.rows; t++)
        layer_norm_row(((float *)y.data) + t * y.ld, ((float *)x.data) + t * x.ld, r ? r + t * x.ld : NULL, wd, bd, eps, x.cols);
}

/* y = z / rms(z) * (w + w_offset), w NULL meaning a scale of 1. Torch order:
 * (z * rsqrt(mean(z^2) + eps)) first, then the weight. */
ROW_INLINE void rms_norm_row(float *y, const float *x, const float *r, const float *w, float eps, float w_offset,
                             int64_t n)
{
    const double sum = r ? row_sum(y, x, r, n, 0.0, 1) : row_sum(NULL, x, NULL, n, 0.0, 1);
    const float ms = (float)(sum / (double)n);
    const float *z = r ? y : x;
    float rstd = 1.0f / sqrtf(ms + eps);
    if (w) {
#pragma omp simd
        for (int64_t c = 0; c < n; c++) y[c] = (z[c] * rstd) * (w[c] + w_offset);
    } else {
#pragma omp simd
        for (int64_t c = 0; c < n; c++) y[c] = z[c] * rstd;
    }
}

void iv_cpu_rms_norm(const iv_ops *ops, iv_view y, iv_view x, const void *res, const iv_tensor *w, float eps,
                     float w_offset)
{
    const float *r = res;
    assert(y.rows == x.rows && y.cols == x.cols);
    assert(!w || iv_tensor_numel(w) == x.cols);
    const float *wd = w ? iv_f32(w) : NULL;
#pragma omp parallel for schedule(static) if (x.rows * x.cols >= IV_CPU_PAR_MIN)
    for (int64_t t = 0; t < x.rows; t++)
        rms_norm_row(((float *)y.data) + t * y.ld, ((float *)x.data) + t * x.ld, r ? r + t * x.ld : NULL, wd, eps, w_offset, x.cols);
}

void iv_cpu_head_rms_norm(const iv_ops *ops, iv_view x, int n_heads, int head_dim, const iv_tensor *w, float eps,
                          float w_offset)
{
    assert(x.cols >= (int64_t)n_heads * head_dim);
    assert(!w || iv_tensor_numel(w) == head_dim);
    const float *wd = w ? iv_f32(w) : NULL;
#pragma omp parallel for schedule(static) if (x.rows * n_heads * head_dim >= IV_CPU_PAR_MIN)
    for (int64_t t = 0; t < x.rows; t++)
        for (int h = 0; h < n_heads; h++) {
            float *row = ((float *)x.data) + t * x.ld + (int64_t)h * head_dim;
            rms_norm_row(row, row, NULL, wd, eps, w_offset, head_dim);
        }
}
