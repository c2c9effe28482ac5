/* Small row-wise ops: add, scale, embedding gather, softmax, L2 normalise. */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/gemm_panel.h"
#include "ops/cpu/vmath.h"

void iv_cpu_add(const iv_ops *ops, iv_view y, iv_view a, iv_view b)
{
    assert(y.rows == a.rows && y.cols == a.cols && b.rows == a.rows && b.cols == a.cols);
#pragma omp parallel for schedule(static) if (y.rows * y.cols >= IV_CPU_PAR_MIN)
    for (int64_t t = 0; t < y.rows; t++) {
        float *yr = ((float *)y.data) + t * y.ld;
        const float *ar = ((float *)a.data) + t * a.ld, *br = ((float *)b.data) + t * b.ld;
#pragma omp simd
        for (int64_t c = 0; c < y.cols; c++) yr[c] = ar[c] + br[c];
    }
}

void iv_cpu_scale(const iv_ops *ops, iv_view y, iv_view x, float s)
{
    assert(y.rows == x.rows && y.cols == x.cols);
#pragma omp parallel for schedule(static) if (y.rows * y.cols >= IV_CPU_PAR_MIN)
    for (int64_t t = 0; t < y.rows; t++) {
        float *yr = ((float *)y.data) + t * y.ld;
        const float *xr = ((float *)x.data) + t * x.ld;
        if (s == 1.0f) { /* a copy: x * 1 is x */
            if (yr != xr) memcpy(yr, xr, (size_t)y.cols * sizeof(float));
            continue;
        }
#pragma omp simd
        for (int64_t c = 0; c < y.cols; c++) yr[c] = xr[c] * s;
    }
}

/* A table may be in the linear kernel's panel layout: a tied MLM decoder
 * packed at load (models/pack_weights.h) is also the word embedding table,
 * stored once. Row id is then column id % 16 of its half of a panel, 16
 * floats apart (ops/cpu/gemm_panel.h). */
void iv_cpu_embed(const iv_ops *ops, iv_view y, const iv_tensor *table, const int32_t *ids, int accumulate)
{
    assert(table->dtype == IV_F32 && iv_tensor_cols(table) == y.cols);
    const int64_t h = y.cols;
    const int64_t stride = table->layout == IV_LAYOUT_CPU_PANELS ? IV_PANEL_HALF : 1;
#pragma omp parallel for schedule(static) if (y.rows * y.cols >= IV_CPU_PAR_MIN)
    for (int64_t t = 0; t < y.rows; t++) {
        const int64_t id = ids[t];
        const float *src = iv_f32(table) + (stride == 1 ? id * h : iv_cpu_panel_index(h, id, 0));
        float *dst = ((float *)y.data) + t * y.ld;
        if (stride > 1 && accumulate) {
            for (int64_t c = 0; c < h; c++) dst[c] += src[c * stride];
        } else if (stride > 1) {
            for (int64_t c = 0; c < h; c++) dst[c] = src[c * stride];
        } else if (accumulate) {
#pragma omp simd
            for (int64_t c = 0; c < h; c++) dst[c] += src[c];
        } else {
            memcpy(dst, src, (size_t)h * sizeof(float));
        }
    }
}

/* Products in float32 summed in tap order, as torch's (table[ids] *
 * weights[..., None]).sum(1) over a handful of taps. Row-major tables only. */
void iv_cpu_embed_bag(const iv_ops *ops, iv_view y, const iv_tensor *table, const int32_t *ids, const float *weights,
                      int taps)
{
    (void)ops;
    assert(table->dtype == IV_F32 && table->layout == IV_LAYOUT_ROWS && iv_tensor_cols(table) == y.cols);
    const int64_t h = y.cols;
#pragma omp parallel for schedule(static) if (y.rows * y.cols * taps >= IV_CPU_PAR_MIN)
    for (int64_t t = 0; t < y.rows; t++) {
        float *dst = ((float *)y.data) + t * y.ld;
        for (int j = 0; j < taps; j++) {
            const float *src = iv_f32(table) + (int64_t)ids[t * taps + j] * h;
            const float w = weights[t * taps + j];
            if (j == 0) {
#pragma omp simd
                for (int64_t c = 0; c < h; c++) dst[c] = src[c] * w;
            } else {
#pragma omp simd
                for (int64_t c = 0; c < h; c++) dst[c] += src[c] * w;
            }
        }
    }
}

/* exp(x - max) over a row, returning the sum. Lanes past n stay untouched. */
static float exp_shifted_row(float *x, int64_t n, float max)
{
    vf acc = v_zero();
    int64_t i = 0;
    for (; i + IV_VL <= n; i += IV_VL) {
        vf e = v_exp(v_load(x + i) - max);
        v_store(x + i, e);
        acc = acc + e;
    }
    if (i < n) {
        /* Padding lanes are -inf so their exp is 0 and the sum is unchanged. */
        float buf[IV_VL];
        for (int k = 0; k < IV_VL; k++) buf[k] = i + k < n ? x[i + k] : -INFINITY;
        vf e = v_exp(v_load(buf) - max);
        v_store_part(x + i, e, n - i);
        acc = acc + e;
    }
    return v_hsum(acc);
}

/* Row softmax with max subtraction; multiplies by 1/sum as torch's CPU
 * kernel does. A row of all -inf has no defined softmax: it becomes NaN,
 * as in torch. */
void iv_cpu_softmax_row(float *row, int64_t n)
{
    if (n == 0) return;
    float max = row[0];
    for (int64_t c = 1; c < n; c++) max = row[c] > max ? row[c] : max;
    float inv = 1.0f / exp_shifted_row(row, n, max);
#pragma omp simd
    for (int64_t c = 0; c < n; c++) row[c] *= inv;
}

void iv_cpu_softmax(const iv_ops *ops, iv_view x)
{
#pragma omp parallel for schedule(static) if (x.rows * x.cols >= IV_CPU_PAR_MIN)
    for (int64_t t = 0; t < x.rows; t++) iv_cpu_softmax_row(((float *)x.data) + t * x.ld, x.cols);
}

/* x / max(||x||, 1e-12), as torch.nn.functional.normalize (which divides). */
void iv_cpu_l2_normalize(const iv_ops *ops, iv_view x)
{
#pragma omp parallel for schedule(static) if (x.rows * x.cols >= IV_CPU_PAR_MIN)
    for (int64_t t = 0; t < x.rows; t++) {
        float *row = ((float *)x.data) + t * x.ld;
        float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
        for (int64_t c = 0; c < x.cols; c++) ss += row[c] * row[c];
        float norm = sqrtf(ss);
        float denom = norm > 1e-12f ? norm : 1e-12f;
#pragma omp simd
        for (int64_t c = 0; c < x.cols; c++) row[c] /= denom;
    }
}
