/* Linear layer: y = act(x W^T + b) (+ residual). Weights packed at load
 * (every linear weight of a model the engine loads, heads and Dense
 * layers included: IV_LAYOUT_CPU_PANELS) and small row-major ones go to
 * gemm_panel.c. For large row-major weights (models run without the
 * engine's load-time packing), a few rows go to the
 * streaming kernel of linear_small.c; otherwise OpenBLAS sgemm does the
 * product (row-major, W transposed in place, strides from the views), then
 * one parallel pass over y applies bias, activation and residual.
 *
 * The residual has y's layout (rows y.ld apart). It may be y itself: with
 * no activation, sgemm accumulates onto it (beta = 1) and only the bias is
 * left for the epilogue; with an activation the product goes to a scratch
 * buffer first. x must not overlap y. */
#include <assert.h>
#include <cblas.h>
#include <stdlib.h>

#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/gemm_panel.h"
#include "ops/cpu/linear_small.h"

void iv_cpu_linear(const iv_ops *ops, iv_view y, iv_view x, const iv_tensor *w, const iv_tensor *b,
                   iv_act act, const void *residual_or_null)
{
    const float *residual = residual_or_null;
    int64_t rows = x.rows, in = x.cols, out = y.cols;
    assert(w->dtype == IV_F32 && iv_tensor_rows(w) == out && iv_tensor_cols(w) == in);
    assert(!b || (b->dtype == IV_F32 && iv_tensor_numel(b) == out));
    assert(y.rows == rows);
    if (rows == 0 || out == 0) return;
    const float *bias = b ? iv_f32(b) : NULL;
    if (w->layout == IV_LAYOUT_CPU_PANELS) {
        iv_cpu_linear_panels(y, x, iv_f32(w), bias, act, residual);
        return;
    }
    /* Small row-major weights (per-batch windows of DeBERTa's position
     * projections, models run without the engine) are packed for the call:
     * a copy that costs less than the product, and keeps every output in the
     * panel kernel's one summation order, whatever the batch. */
    if (out * in <= IV_CPU_PACK_PER_CALL_MAX) {
        float *packed = iv_cpu_scratch(iv_cpu_panel_floats(out, in) * sizeof(float));
        iv_cpu_pack_panels(packed, iv_f32(w), out, in);
        iv_cpu_linear_panels(y, x, packed, bias, act, residual);
        free(packed);
        return;
    }
    if (iv_cpu_linear_small(y, x, iv_f32(w), bias, act, residual)) return;

    /* Where sgemm writes, and with which beta. */
    float *dst = y.data;
    int64_t ldd = y.ld;
    float beta = 0.0f;
    float *tmp = NULL;
    if (residual == ((float *)y.data)) {
        if (act == IV_ACT_NONE) {
            beta = 1.0f;
            residual = NULL; /* already in y */
        } else {
            tmp = iv_cpu_scratch((size_t)(rows * out) * sizeof(float));
            dst = tmp;
            ldd = out;
        }
    }

    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)rows, (blasint)out, (blasint)in, 1.0f,
                ((float *)x.data), (blasint)x.ld, iv_f32(w), (blasint)in, beta, dst, (blasint)ldd);

    if (bias || act != IV_ACT_NONE || residual || tmp) {
#pragma omp parallel for schedule(static) if (rows * out >= IV_CPU_PAR_MIN)
        for (int64_t t = 0; t < rows; t++)
            iv_cpu_act_row(((float *)y.data) + t * y.ld, dst + t * ldd, bias, act, residual ? residual + t * y.ld : NULL,
                           out);
    }
    free(tmp);
}
