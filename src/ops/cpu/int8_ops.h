/* The optional int8 path of the CPU ops (`--dtype int8`).
 *
 * Weights of the large linear layers are quantized once at load, per output
 * row, symmetric: q = round(w / s) in [-127, 127] with s = max|w_row| / 127.
 * Activations are quantized on every call, per token row, asymmetric over
 * [lo, hi] = [min(x, 0), max(x, 0)]: s = (hi - lo) / 255, zero point
 * z = round(-lo / s), q = clamp(round(x / s) + z, 0, 255). Asymmetric
 * because LayerNorm outputs with outlier features and GELU outputs (bounded
 * below by -0.17) waste much of a symmetric range: on all-MiniLM-L6-v2 the
 * worst sentence's cosine to FP32 is 0.9935 this way, 0.9857 with symmetric
 * int8 activations. Then
 *
 *     x . w  ~  s_x * s_w * (sum_k q_x[k] q_w[k]  -  z * sum_k q_w[k])
 *
 * The integer sum is exact in int32 for in < IV_INT8_MAX_IN, with either
 * kernel:
 *   - AVX2 (any x86-64-v3 CPU, Zen2 included): activations widened to 16 bits
 *     and vpmaddwd against sign-extended weights, 16 multiply-adds per
 *     instruction. vpmaddubsw does 32 but saturates its 16-bit pair sums
 *     (2 * 255 * 127 > 32767); the ways to keep it exact cost accuracy: 7-bit
 *     activations (MiniLM worst cosine 0.972), 7-bit weights (0.990) or the
 *     vpsignb trick, which needs symmetric activations (0.986).
 *   - VNNI (vpdpbusd, AVX512-VNNI): u8 x s8 products summed in fours
 *     straight into int32, 32 per instruction on 256-bit vectors (64 on
 *     512-bit ones where the CPU has AVX-512F/BW too), no saturation.
 * Both give the same integers, so results do not depend on the kernel.
 * The float epilogue (scales, bias, activation, residual) is the FP32
 * linear's row epilogue, iv_cpu_act_row.
 *
 * An int8 weight is an iv_tensor of dtype IV_I8 and shape [out, in] whose
 * data is the packed blob below and whose `scales` holds the [out] row
 * scales. Model code never sees the difference: the int8 table's linear
 * dispatches on the weight dtype. */
#ifndef IV_OPS_CPU_INT8_OPS_H
#define IV_OPS_CPU_INT8_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "ops/ops.h"

/* Largest input width whose int32 sums cannot overflow: 255 * 127 * in < 2^31. */
#define IV_INT8_MAX_IN 66000

/* The CPU op table with int8-aware linear: IV_I8 weights take the int8
 * kernel, IV_F32 weights the FP32 one. Every other op is the FP32 table's. */
const iv_ops *iv_cpu_int8_ops(void);

/* Packed weight blob: panels of 8 output rows; within a panel, groups of 4
 * input columns, each group 32 bytes (row r's 4 values at r * 4). Output rows
 * are padded to a multiple of 32 and inputs to a multiple of 4 with zeros.
 * The int32 row sums of the quantized values follow at offset
 * iv_int8_sums_offset. */
size_t iv_int8_packed_bytes(int64_t out, int64_t in);
size_t iv_int8_sums_offset(int64_t out, int64_t in);

/* Quantizes w [out, in] (row-major f32) into blob (iv_int8_packed_bytes;
 * any alignment, 64 bytes is fastest) and scales [out]. An all-zero row gets scale 0. Returns
 * -1 when w holds a NaN or an infinity (nothing sensible to quantize). */
int iv_int8_pack_weights(void *blob, float *scales, const float *w, int64_t out, int64_t in);

/* Makes an IV_I8 tensor header over blob and scales (no allocation). */
iv_tensor iv_int8_weight_tensor(void *blob, const float *scales, int64_t out, int64_t in);

/* The quantized value of weight (row n, column k); for tests and tools. */
int8_t iv_int8_weight_at(const iv_tensor *w, int64_t n, int64_t k);

/* Quantizes one activation row of n floats to q[n] (values 0..255); sets
 * *scale and *zero so that x[i] ~ *scale * (q[i] - *zero). Exactly:
 * q[i] = clamp(nearbyintf(x[i] * (1 / *scale)) + *zero, 0, 255). An all-zero
 * row gets scale 0; a row holding a NaN or an infinity gets *scale = NaN, so
 * its outputs are NaN as in FP32. */
void iv_int8_quantize_row(const float *x, int64_t n, uint8_t *q, float *scale, int32_t *zero);

/* The int8 linear: same contract as iv_ops.linear, w of dtype IV_I8. */
void iv_cpu_linear_int8(const iv_ops *ops, iv_view y, iv_view x, const iv_tensor *w, const iv_tensor *b,
                        iv_act act, const void *residual_or_null);

/* Integer kernels. The best one compiled in is used; tests and benchmarks
 * may switch to another available one (not thread-safe: do it before use). */
typedef enum iv_int8_kernel {
    IV_INT8_KERNEL_SCALAR = 0, /* portable C, the fallback without AVX2 */
    IV_INT8_KERNEL_AVX2,
    IV_INT8_KERNEL_VNNI,    /* vpdpbusd on 256-bit vectors */
    IV_INT8_KERNEL_VNNI512, /* vpdpbusd on 512-bit vectors, four panels per tile */
    IV_INT8_KERNEL_COUNT
} iv_int8_kernel;
int iv_int8_kernel_available(iv_int8_kernel k);
iv_int8_kernel iv_int8_kernel_active(void);
void iv_int8_kernel_select(iv_int8_kernel k); /* ignored when not available */
const char *iv_int8_kernel_name(iv_int8_kernel k);

#endif
