/* The int8 quantization pass (see quantize.h). New tensors are model-owned
 * (iv_model_alloc, freed with the model); the FP32 copies the loader made
 * (fused QKV, fused gate/up) are released once replaced, since nothing reads
 * them again. */
#include "models/quantize.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "models/loader.h"
#include "ops/cpu/int8_ops.h"

/* Original -> quantized, so weights shared between layers stay shared. */
typedef struct quant_map {
    const iv_tensor **from, **to;
    int n, cap;
} quant_map;

static int map_add(quant_map *qm, const iv_tensor *from, const iv_tensor *to)
{
    if (qm->n == qm->cap) {
        int cap = qm->cap ? 2 * qm->cap : 64;
        const iv_tensor **f = realloc(qm->from, (size_t)cap * sizeof *f);
        if (f) qm->from = f;
        const iv_tensor **t = realloc(qm->to, (size_t)cap * sizeof *t);
        if (t) qm->to = t;
        if (!f || !t) return -1;
        qm->cap = cap;
    }
    qm->from[qm->n] = from;
    qm->to[qm->n++] = to;
    return 0;
}

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
    if (iv_int8_pack_weights(blob, scales, iv_f32(w), out, in))
        return iv_errf(err, IV_E_FORMAT, "%s weight holds NaN or infinite values; cannot quantize it", what), NULL;
    *t = iv_int8_weight_tensor(blob, scales, out, in);
    st->tensors++;
    st->f32_bytes += (size_t)(out * in) * sizeof(float);
    st->int8_bytes += bytes + (size_t)out * sizeof(float);
    return t;
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
        char name[96];
        snprintf(name, sizeof name, "layer %d %s", layer, what);
        if (!(q = quantize_one(m, w, name, st, err))) return -1;
        if (map_add(qm, w, q)) return iv_errf(err, IV_E_NOMEM, "out of memory");
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
    quant_map qm = {0};
    int rc = 0;
    for (int l = 0; l < m->n_layers && !rc; l++) {
        iv_layer *L = &m->layers[l];
        rc = replace(m, &qm, &L->qkv_w, l, "attention QKV", &st, err) ||
             replace(m, &qm, &L->o_w, l, "attention output", &st, err) ||
             replace(m, &qm, &L->up_w, l, "MLP up", &st, err) ||
             replace(m, &qm, &L->down_w, l, "MLP down", &st, err);
        /* Routed experts are MLPs too; the router is a small head and stays FP32. */
        for (int e = 0; L->moe && e < L->moe->n_experts && !rc; e++)
            rc = replace(m, &qm, &L->moe->up_w[e], l, "expert up", &st, err) ||
                 replace(m, &qm, &L->moe->down_w[e], l, "expert down", &st, err);
    }
    /* Only now, with every layer switched over, drop the loader's copies. */
    for (int i = 0; i < qm.n && !rc; i++) release_owned(m, qm.from[i]);
    free(qm.from);
    free(qm.to);
    if (stats) *stats = st;
    return rc ? -1 : 0;
}
