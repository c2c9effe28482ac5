/* Int8 weights: per-row symmetric quantization and the packed layout the
 * int8 kernels read (described in int8_ops.h). Runs once per weight at load. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/int8_kernels.h"
#include "ops/cpu/int8_ops.h"

size_t iv_int8_sums_offset(int64_t out, int64_t in)
{
    return (size_t)(iv_int8_padded_out(out) * iv_int8_padded_in(in));
}

static size_t qmax_offset(int64_t out, int64_t in)
{
    return iv_int8_sums_offset(out, in) + (size_t)iv_int8_padded_out(out) * sizeof(int32_t);
}

size_t iv_int8_packed_bytes(int64_t out, int64_t in) { return qmax_offset(out, in) + sizeof(int32_t); }

int iv_int8_blob_qmax(const void *blob, int64_t out, int64_t in)
{
    int32_t q;
    memcpy(&q, (const char *)blob + qmax_offset(out, in), sizeof q);
    return q;
}

int iv_int8_weight_qmax(void)
{
    const char *bits = getenv("IV_INT8_WEIGHT_BITS");
    if (bits && !strcmp(bits, "8")) return IV_INT8_QMAX;
    if (bits && !strcmp(bits, "7")) return IV_INT8_QMAX_7BIT;
    if (bits && *bits) return -1;
    return iv_int8_kernel_qmax(iv_int8_kernel_active());
}

/* Where weight (n, k) lives in the blob: panel n / 8, group k / 4. */
static size_t packed_index(int64_t n, int64_t k, int64_t kp)
{
    return (size_t)((n / IV_INT8_PANEL) * IV_INT8_PANEL * kp + (k / 4) * (IV_INT8_PANEL * 4) +
                    (n % IV_INT8_PANEL) * 4 + k % 4);
}

int iv_int8_pack_weights(void *blob, float *scales, const float *w, int64_t out, int64_t in, int qmax)
{
    const float qm = (float)qmax;
    const int64_t kp = iv_int8_padded_in(in);
    int8_t *q = blob;
    int32_t *sums = (int32_t *)((char *)blob + iv_int8_sums_offset(out, in));
    memset(blob, 0, iv_int8_packed_bytes(out, in));
    for (int64_t n = 0; n < out; n++) {
        const float *row = w + n * in;
        float amax = 0.0f;
        for (int64_t k = 0; k < in; k++) {
            if (!isfinite(row[k])) return -1;
            const float a = fabsf(row[k]);
            if (a > amax) amax = a;
        }
        const float s = amax / qm;
        scales[n] = s;
        int32_t sum = 0;
        if (s > 0.0f) {
            for (int64_t k = 0; k < in; k++) {
                float v = nearbyintf(row[k] / s);
                v = fminf(fmaxf(v, -qm), qm);
                q[packed_index(n, k, kp)] = (int8_t)v;
                sum += (int32_t)v;
            }
        }
        sums[n] = sum;
    }
    const int32_t q32 = qmax;
    memcpy((char *)blob + qmax_offset(out, in), &q32, sizeof q32);
    return 0;
}

iv_tensor iv_int8_weight_tensor(void *blob, const float *scales, int64_t out, int64_t in)
{
    iv_tensor t = {.dtype = IV_I8, .device = IV_CPU, .ndim = 2, .shape = {out, in}, .data = blob,
                   .scales = scales};
    return t;
}

int8_t iv_int8_weight_at(const iv_tensor *w, int64_t n, int64_t k)
{
    return ((const int8_t *)w->data)[packed_index(n, k, iv_int8_padded_in(w->shape[1]))];
}
