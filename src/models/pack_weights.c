/* The FP32 packing pass (see pack_weights.h), on the shared walk over layer
 * weights (linear_weights.h). */
#include "models/pack_weights.h"

#include "models/linear_weights.h"
#include "models/loader.h"
#include "models/weight_region.h"
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

static size_t packed_bytes_of(const iv_tensor *w)
{
    return iv_cpu_panel_floats(w->shape[0], w->shape[1]) * sizeof(float);
}

/* The first walk sizes the region and keeps every weight. */
static const iv_tensor *count_one(iv_model *m, const iv_tensor *w, const char *what, void *ctx, iv_err *err)
{
    *(size_t *)ctx += iv_weight_region_piece(packed_bytes_of(w));
    return w;
}

typedef struct pack_ctx {
    iv_weight_region region;
    size_t bytes; /* packed bytes so far */
} pack_ctx;

static const iv_tensor *pack_one(iv_model *m, const iv_tensor *w, const char *what, void *ctx, iv_err *err)
{
    pack_ctx *c = ctx;
    const int64_t out = w->shape[0], in = w->shape[1];
    const size_t n = packed_bytes_of(w);
    iv_tensor *t = iv_model_alloc(m, sizeof *t);
    float *packed = iv_weight_region_take(&c->region, m, n);
    if (!t || !packed) return iv_errf(err, IV_E_NOMEM, "out of memory packing %s", what), NULL;
    iv_pack_panels_releasing(packed, w, m->weights);
    *t = iv_cpu_panel_tensor(packed, out, in);
    c->bytes += n;
    return t;
}

int iv_model_pack_cpu_weights(iv_model *m, size_t *packed_bytes, iv_err *err)
{
    const unsigned kinds = IV_LW_LAYER_MATMULS | IV_LW_AUX | IV_LW_HEADS;
    pack_ctx c = {{0}, 0};
    size_t total = 0;
    if (iv_model_replace_linear_weights(m, kinds, count_one, &total, err)) return -1;
    iv_weight_region_reserve(&c.region, m, total);
    const int rc = iv_model_replace_linear_weights(m, kinds, pack_one, &c, err);
    if (packed_bytes) *packed_bytes = c.bytes;
    return rc;
}
