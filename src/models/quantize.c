/* The int8 quantization pass (see quantize.h), on the shared walk over
 * layer weights (linear_weights.h). New tensors are model-owned
 * (iv_model_alloc, freed with the model). */
#include "models/quantize.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "models/linear_weights.h"
#include "models/loader.h"
#include "models/weight_region.h"
#include "ops/cpu/int8_ops.h"

/* Weights too wide to quantize exactly stay FP32. */
static int stays_f32(const iv_tensor *w) { return w->shape[1] >= IV_INT8_MAX_IN; }

typedef struct quant_ctx {
    iv_weight_region region;
    iv_quant_stats st;
} quant_ctx;

/* A model-owned IV_I8 tensor for w; the blob 64-byte aligned so the
 * kernels' 32-byte weight loads never straddle cache lines. */
static const iv_tensor *quantize_one(iv_model *m, const iv_tensor *w, const char *what, quant_ctx *c, iv_err *err)
{
    iv_quant_stats *st = &c->st;
    const int64_t out = w->shape[0], in = w->shape[1];
    const size_t bytes = iv_int8_packed_bytes(out, in);
    iv_tensor *t = iv_model_alloc(m, sizeof *t);
    void *blob = iv_weight_region_take(&c->region, m, bytes);
    float *scales = iv_model_alloc(m, (size_t)out * sizeof(float));
    if (!t || !blob || !scales) return iv_errf(err, IV_E_NOMEM, "out of memory quantizing %s", what), NULL;
    if (iv_int8_pack_weights(blob, scales, iv_f32(w), out, in, st->qmax))
        return iv_errf(err, IV_E_FORMAT, "%s weight holds NaN or infinite values; cannot quantize it", what), NULL;
    *t = iv_int8_weight_tensor(blob, scales, out, in);
    st->tensors++;
    st->f32_bytes += (size_t)(out * in) * sizeof(float);
    st->int8_bytes += bytes + (size_t)out * sizeof(float);
    return t;
}

/* The first walk sizes the region and keeps every weight. */
static const iv_tensor *count_one(iv_model *m, const iv_tensor *w, const char *what, void *ctx, iv_err *err)
{
    if (!stays_f32(w)) *(size_t *)ctx += iv_weight_region_piece(iv_int8_packed_bytes(w->shape[0], w->shape[1]));
    return w;
}

static const iv_tensor *quantize_or_keep(iv_model *m, const iv_tensor *w, const char *what, void *ctx, iv_err *err)
{
    quant_ctx *c = ctx;
    if (stays_f32(w)) {
        c->st.kept_f32++;
        return w;
    }
    return quantize_one(m, w, what, c, err);
}

int iv_model_quantize_int8(iv_model *m, iv_quant_stats *stats, iv_err *err)
{
    quant_ctx c = {.st = {.qmax = iv_int8_weight_qmax()}};
    if (c.st.qmax < 0)
        return iv_errf(err, IV_E_INVALID, "IV_INT8_WEIGHT_BITS is \"%s\": it must be 8 or 7", getenv("IV_INT8_WEIGHT_BITS"));
    if (m->ops != iv_cpu_int8_ops())
        return iv_errf(err, IV_E_UNSUPPORTED, "int8 weights need the cpu-int8 op table (model runs on \"%s\")",
                       m->ops ? m->ops->name : "?");
    size_t total = 0;
    if (iv_model_replace_linear_weights(m, IV_LW_LAYER_MATMULS, count_one, &total, err)) return -1;
    iv_weight_region_reserve(&c.region, m, total);
    const int rc = iv_model_replace_linear_weights(m, IV_LW_LAYER_MATMULS, quantize_or_keep, &c, err);
    if (stats) *stats = c.st;
    return rc;
}
