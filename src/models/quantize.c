/* The int8 quantization pass (see quantize.h), on the shared walk over
 * layer weights (linear_weights.h). New tensors are model-owned
 * (iv_model_alloc, freed with the model). */
#include "models/quantize.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "models/linear_weights.h"
#include "models/loader.h"
#include "ops/cpu/int8_ops.h"

/* A model-owned IV_I8 tensor for w; the blob 64-byte aligned so the
 * kernels' 32-byte weight loads never straddle cache lines. */
static const iv_tensor *quantize_one(iv_model *m, const iv_tensor *w, const char *what, iv_quant_stats *st,
                                     iv_err *err)
{
    const int64_t out = w->shape[0], in = w->shape[1];
    const size_t bytes = iv_int8_packed_bytes(out, in);
    iv_tensor *t = iv_model_alloc(m, sizeof *t);
    char *raw = iv_model_alloc(m, bytes + 63);
    float *scales = iv_model_alloc(m, (size_t)out * sizeof(float));
    if (!t || !raw || !scales) return iv_errf(err, IV_E_NOMEM, "out of memory quantizing %s", what), NULL;
    void *blob = raw + ((64 - (uintptr_t)raw % 64) % 64);
    if (iv_int8_pack_weights(blob, scales, iv_f32(w), out, in, st->qmax))
        return iv_errf(err, IV_E_FORMAT, "%s weight holds NaN or infinite values; cannot quantize it", what), NULL;
    *t = iv_int8_weight_tensor(blob, scales, out, in);
    st->tensors++;
    st->f32_bytes += (size_t)(out * in) * sizeof(float);
    st->int8_bytes += bytes + (size_t)out * sizeof(float);
    return t;
}

/* The walk's callback: weights too wide to quantize exactly stay FP32. */
static const iv_tensor *quantize_or_keep(iv_model *m, const iv_tensor *w, const char *what, void *ctx, iv_err *err)
{
    iv_quant_stats *st = ctx;
    if (w->shape[1] >= IV_INT8_MAX_IN) {
        st->kept_f32++;
        return w;
    }
    return quantize_one(m, w, what, st, err);
}

int iv_model_quantize_int8(iv_model *m, iv_quant_stats *stats, iv_err *err)
{
    iv_quant_stats st = {.qmax = iv_int8_weight_qmax()};
    if (st.qmax < 0)
        return iv_errf(err, IV_E_INVALID, "IV_INT8_WEIGHT_BITS is \"%s\": it must be 8 or 7", getenv("IV_INT8_WEIGHT_BITS"));
    if (m->ops != iv_cpu_int8_ops())
        return iv_errf(err, IV_E_UNSUPPORTED, "int8 weights need the cpu-int8 op table (model runs on \"%s\")",
                       m->ops ? m->ops->name : "?");
    const int rc = iv_model_replace_linear_weights(m, IV_LW_LAYER_MATMULS, quantize_or_keep, &st, err);
    if (stats) *stats = st;
    return rc;
}
