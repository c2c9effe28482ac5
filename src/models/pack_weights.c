/* The FP32 packing pass (see pack_weights.h), on the shared walk over layer
 * weights (linear_weights.h). */
#include "models/pack_weights.h"

#include <stdint.h>

#include "models/linear_weights.h"
#include "models/loader.h"
#include "ops/cpu/gemm_panel.h"

static const iv_tensor *pack_one(iv_model *m, const iv_tensor *w, const char *what, void *ctx, iv_err *err)
{
    size_t *bytes = ctx;
    const int64_t out = w->shape[0], in = w->shape[1];
    const size_t n = iv_cpu_panel_floats(out, in) * sizeof(float);
    iv_tensor *t = iv_model_alloc(m, sizeof *t);
    char *raw = iv_model_alloc(m, n + 63);
    if (!t || !raw) return iv_errf(err, IV_E_NOMEM, "out of memory packing %s", what), NULL;
    float *packed = (float *)(raw + ((64 - (uintptr_t)raw % 64) % 64));
    iv_cpu_pack_panels(packed, iv_f32(w), out, in);
    *t = iv_cpu_panel_tensor(packed, out, in);
    *bytes += n;
    return t;
}

int iv_model_pack_cpu_weights(iv_model *m, size_t *packed_bytes, iv_err *err)
{
    size_t bytes = 0;
    const int rc = iv_model_replace_linear_weights(m, IV_LW_LAYER_MATMULS | IV_LW_AUX | IV_LW_HEADS, pack_one, &bytes, err);
    if (packed_bytes) *packed_bytes = bytes;
    return rc;
}
