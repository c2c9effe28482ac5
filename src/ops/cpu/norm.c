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

/* Returns the row to normalise: x itself, or z = x + r written into y. */
static const float *sum_residual(float *y, const float *x, const float *r, int64_t n)
{
    if (!r) return x;
#pragma omp simd
    for (int64_t c = 0; c < n; c++) y[c] = x[c] + r[c];
    return y;
}

/* The sums run in four independent vectors of four doubles (with one
 * accumulator, the omp simd reduction before, each pass waited on its add
 * chain), still in double: only the order of the partial sums differs.
 * One thread, rows in L2, core cycles per row before -> after: held to
 * AVX2, 384 wide, LayerNorm with a residual 709 -> 574, without 571 ->
 * 434, RMSNorm 358 -> 279; natively (AVX-512) 670 -> 562, 571 -> 417,
 * 364 -> 277, and 768 wide 1370 -> 1145, 997 -> 777, 642 -> 505. */
typedef float iv_f4 __attribute__((vector_size(16)));
typedef double iv_d4 __attribute__((vector_size(32)));

/* *d = four floats from p as doubles: one vcvtps2pd from memory on AVX
 * (from the generic form GCC made two 2-float converts and an insert).
 * Through pointers: a 32-byte vector returned by value would change the
 * ABI of builds without AVX (-Wpsabi). */
static inline void load_d4(iv_d4 *d, const float *p)
{
#if defined(__AVX__)
    *d = (iv_d4)_mm256_cvtps_pd(_mm_loadu_ps(p));
#else
    iv_f4 v;
    memcpy(&v, p, sizeof v);
    *d = __builtin_convertvector(v, iv_d4);
#endif
}

static double sum_d4(const iv_d4 a[4])
{
    const iv_d4 t = (a[0] + a[1]) + (a[2] + a[3]);
    return (t[0] + t[1]) + (t[2] + t[3]);
}

static float row_mean(const float *z, int64_t n)
{
    iv_d4 a[4] = {{0}};
    int64_t c = 0;
    for (; c + 16 <= n; c += 16)
        for (int k = 0; k < 4; k++) {
            iv_d4 v;
            load_d4(&v, z + c + 4 * k);
            a[k] += v;
        }
    double s = sum_d4(a);
    for (; c < n; c++) s += z[c];
    return (float)(s / (double)n);
}

/* mean((z - m)^2), or mean(z^2) with m = 0. */
static float row_mean_sq_dev(const float *z, int64_t n, float m)
{
    iv_d4 a[4] = {{0}};
    const double md = m;
    int64_t c = 0;
    for (; c + 16 <= n; c += 16)
        for (int k = 0; k < 4; k++) {
            iv_d4 d;
            load_d4(&d, z + c + 4 * k);
            d -= md;
            a[k] += d * d;
        }
    double s = sum_d4(a);
    for (; c < n; c++) {
        double d = (double)z[c] - md;
        s += d * d;
    }
    return (float)(s / (double)n);
}

static void layer_norm_row(float *y, const float *x, const float *r, const float *w, const float *b, float eps,
                           int64_t n)
{
    const float *z = sum_residual(y, x, r, n);
    float mean = row_mean(z, n);
    float var = row_mean_sq_dev(z, n, mean);
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
static void rms_norm_row(float *y, const float *x, const float *r, const float *w, float eps, float w_offset,
                         int64_t n)
{
    const float *z = sum_residual(y, x, r, n);
    float rstd = 1.0f / sqrtf(row_mean_sq_dev(z, n, 0.0f) + eps);
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
