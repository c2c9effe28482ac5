/* The FP32 packing pass (see pack_weights.h), on the shared walk over layer
 * weights (linear_weights.h). */
#include "models/pack_weights.h"

#include <stdint.h>

#include "models/linear_weights.h"
#include "models/loader.h"
#include "ops/cpu/gemm_panel.h"

/* Panels packed per slice: 64 panels of 32 source rows (2048 rows, 6 MiB
 * of a 768-wide weight). */
#define PACK_SLICE_PANELS 64

void iv_pack_panels_releasing(float *dst, const iv_tensor *w, iv_weights *weights)
{
    const int64_t out = w->shape[0], in = w->shape[1], slice = PACK_SLICE_PANELS * IV_PANEL_COLS;
    for (int64_t r0 = 0; r0 < out; r0 += slice) {
        const int64_t rows = out - r0 < slice ? out - r0 : slice;
        const float *src = iv_f32(w) + r0 * in;
        iv_cpu_pack_panels(dst + r0 * in, src, rows, in); /* panel r0 / 32 starts r0 * in floats in */
        const iv_tensor done = iv_tensor_2d((float *)src, rows, in);
        iv_weights_release(weights, &done);
    }
}

static const iv_tensor *pack_one(iv_model *m, const iv_tensor *w, const char *what, void *ctx, iv_err *err)
{
    size_t *bytes = ctx;
    const int64_t out = w->shape[0], in = w->shape[1];
    const size_t n = iv_cpu_panel_floats(out, in) * sizeof(float);
    iv_tensor *t = iv_model_alloc(m, sizeof *t);
    char *raw = iv_model_alloc(m, n + 63);
    if (!t || !raw) return iv_errf(err, IV_E_NOMEM, "out of memory packing %s", what), NULL;
    float *packed = (float *)(raw + ((64 - (uintptr_t)raw % 64) % 64));
    iv_pack_panels_releasing(packed, w, m->weights);
    *t = iv_cpu_panel_tensor(packed, out, in);
    *bytes += n;
    return t;
}

int iv_model_pack_cpu_weights(iv_model *m, size_t *packed_bytes, iv_err *err)
{
    size_t bytes = 0;
    const unsigned kinds = IV_LW_LAYER_MATMULS | IV_LW_AUX | IV_LW_HEADS;
    const int rc = iv_model_replace_linear_weights(m, kinds, pack_one, &bytes, err);
    if (packed_bytes) *packed_bytes = bytes;
    return rc;
}
