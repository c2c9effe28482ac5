/* The int8 quantization pass (see quantize.h). New tensors are model-owned
 * (iv_model_new_tensor, freed with the model); the fused QKV copies the
 * loader made are released once replaced, since nothing reads them again. */
#include "models/quantize.h"

#include <stdlib.h>

#include "models/loader.h"
#include "ops/cpu/int8_ops.h"

/* Original -> quantized, so weights shared between layers stay shared. */
typedef struct quant_map {
    const iv_tensor **from, **to;
    int n;
} quant_map;

static const iv_tensor *map_find(const quant_map *qm, const iv_tensor *w)
{
    for (int i = 0; i < qm->n; i++)
        if (qm->from[i] == w) return qm->to[i];
    return NULL;
}

/* Frees a loader-made tensor (header and data, kept as a pair in m->owned). */
static void release_owned(iv_model *m, const iv_tensor *t)
{
    for (int i = 0; i + 1 < m->n_owned; i++)
        if (m->owned[i] == t && m->owned[i + 1] == t->data) {
            free(m->owned[i + 1]);
            free(m->owned[i]);
            m->owned[i] = m->owned[i + 1] = NULL;
            return;
        }
}

/* An owned IV_I8 tensor for w. Its blob and scales are allocated as
 * model-owned float tensors of the right byte size; the blob's header is
 * then retyped in place, so iv_model_free releases both. */
static const iv_tensor *quantize_one(iv_model *m, const iv_tensor *w, int layer, const char *what,
                                     iv_quant_stats *st, iv_err *err)
{
    const int64_t out = w->shape[0], in = w->shape[1];
    const size_t bytes = iv_int8_packed_bytes(out, in);
    iv_tensor *blob = iv_model_new_tensor(m, (int64_t)((bytes + sizeof(float) - 1) / sizeof(float)), -1);
    iv_tensor *scales = iv_model_new_tensor(m, out, -1);
    if (!blob || !scales)
        return iv_errf(err, IV_E_NOMEM, "out of memory quantizing layer %d %s", layer, what), NULL;
    if (iv_int8_pack_weights(blob->data, scales->data, iv_f32(w), out, in))
        return iv_errf(err, IV_E_FORMAT, "layer %d %s weight holds NaN or infinite values; cannot quantize it",
                       layer, what), NULL;
    *blob = iv_int8_weight_tensor(blob->data, scales->data, out, in);
    st->tensors++;
    st->f32_bytes += (size_t)(out * in) * sizeof(float);
    st->int8_bytes += bytes + (size_t)out * sizeof(float);
    return blob;
}

static int replace(iv_model *m, quant_map *qm, const iv_tensor **slot, int layer, const char *what,
                   iv_quant_stats *st, iv_err *err)
{
    const iv_tensor *w = *slot;
    if (!w || w->dtype != IV_F32 || w->ndim != 2) return 0;
    const iv_tensor *q = map_find(qm, w);
    if (!q) {
        if (w->shape[1] >= IV_INT8_MAX_IN) {
            st->kept_f32++;
            return 0;
        }
        if (!(q = quantize_one(m, w, layer, what, st, err))) return -1;
        qm->from[qm->n] = w;
        qm->to[qm->n++] = q;
    }
    *slot = q;
    return 0;
}

int iv_model_quantize_int8(iv_model *m, iv_quant_stats *stats, iv_err *err)
{
    iv_quant_stats st = {0};
    if (m->ops != iv_cpu_int8_ops())
        return iv_errf(err, IV_E_UNSUPPORTED, "int8 weights need the cpu-int8 op table (model runs on \"%s\")",
                       m->ops ? m->ops->name : "?");
    enum { PER_LAYER = 4 };
    quant_map qm = {calloc((size_t)m->n_layers * PER_LAYER + 1, sizeof *qm.from),
                    calloc((size_t)m->n_layers * PER_LAYER + 1, sizeof *qm.to), 0};
    int rc = 0;
    if (!qm.from || !qm.to) rc = iv_errf(err, IV_E_NOMEM, "out of memory");
    for (int l = 0; l < m->n_layers && !rc; l++) {
        iv_layer *L = &m->layers[l];
        rc = replace(m, &qm, &L->qkv_w, l, "attention QKV", &st, err) ||
             replace(m, &qm, &L->o_w, l, "attention output", &st, err) ||
             replace(m, &qm, &L->up_w, l, "MLP up", &st, err) ||
             replace(m, &qm, &L->down_w, l, "MLP down", &st, err);
    }
    /* Only now, with every layer switched over, drop the loader's copies. */
    for (int i = 0; i < qm.n && !rc; i++) release_owned(m, qm.from[i]);
    free(qm.from);
    free(qm.to);
    if (stats) *stats = st;
    return rc ? -1 : 0;
}
