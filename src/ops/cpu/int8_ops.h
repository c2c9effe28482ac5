/* The optional int8 path of the CPU ops (`--dtype int8`).
 *
 * Weights of the large linear layers are quantized once at load, per output
 * row, symmetric: q = round(w / s) in [-qmax, qmax] with s = max|w_row| / qmax,
 * qmax = 127 (or 63: see the AVX2 kernel below).
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
 * The integer sum is exact in int32 for in < IV_INT8_MAX_IN, with each
 * kernel:
 *   - VNNI (vpdpbusd, AVX512-VNNI): u8 x s8 products summed in fours
 *     straight into int32, 32 per instruction on 256-bit vectors (64 on
 *     512-bit ones where the CPU has AVX-512F/BW too), no saturation.
 *   - AVX2 without VNNI (Zen 2/3, Haswell..Skylake client): vpmaddubsw,
 *     32 u8 x s8 products per instruction summed in pairs into 16 bits,
 *     then vpmaddwd against ones into int32. The pair sum saturates unless
 *     |w| <= 63 (2 * 255 * 63 < 32767), so where this is the best kernel the
 *     weights are quantized to 7 bits (+-63), as oneDNN (weights scaled by
 *     0.5 without VNNI) and onnxruntime (reduce_range) do. It costs some
 *     accuracy (README's int8 paragraph has the figures), so IV_INT8_WEIGHT_BITS=8
 *     keeps 8-bit weights there, with the exact vpmaddwd kernel:
 *     activations widened to 16 bits against sign-extended weights, 16
 *     multiply-adds per instruction, about 20% slower.
 * On the same quantized weights every kernel gives the same integers, so
 * results do not depend on the kernel, only on the weights' bit width.
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
/* Weight ranges: 8-bit (+-127) and the 7-bit one vpmaddubsw needs (+-63). */
#define IV_INT8_QMAX 127
#define IV_INT8_QMAX_7BIT 63

/* The CPU op table with int8-aware linear: IV_I8 weights take the int8
 * kernel, IV_F32 weights the FP32 one. Every other op is the FP32 table's. */
const iv_ops *iv_cpu_int8_ops(void);

/* Packed weight blob: panels of 8 output rows; within a panel, groups of 4
 * input columns, each group 32 bytes (row r's 4 values at r * 4). Output rows
 * are padded to a multiple of 32 and inputs to a multiple of 4 with zeros.
 * The int32 row sums of the quantized values follow at offset
 * iv_int8_sums_offset, then the weights' qmax (an int32). */
size_t iv_int8_packed_bytes(int64_t out, int64_t in);
size_t iv_int8_sums_offset(int64_t out, int64_t in);

/* Quantizes w [out, in] (row-major f32) into blob (iv_int8_packed_bytes;
 * any alignment, 64 bytes is fastest) and scales [out]: q = round(w / s) in
 * [-qmax, qmax] (IV_INT8_QMAX or IV_INT8_QMAX_7BIT), s = max|w_row| / qmax.
 * An all-zero row gets scale 0. Returns -1 when w holds a NaN or an
 * infinity (nothing sensible to quantize). */
int iv_int8_pack_weights(void *blob, float *scales, const float *w, int64_t out, int64_t in, int qmax);
/* The weights' qmax recorded in a blob of that shape. */
int iv_int8_blob_qmax(const void *blob, int64_t out, int64_t in);
/* The qmax load-time quantization uses: IV_INT8_WEIGHT_BITS=8 or 7 when set,
 * else the active kernel's (7 bits only where vpmaddubsw is the best kernel);
 * -1 when the variable holds anything else. */
int iv_int8_weight_qmax(void);

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
    IV_INT8_KERNEL_AVX2,      /* vpmaddwd: exact on 8-bit weights */
    IV_INT8_KERNEL_AVX2_UBSW, /* vpmaddubsw: 7-bit weights only */
    IV_INT8_KERNEL_VNNI,    /* vpdpbusd on 256-bit vectors */
    IV_INT8_KERNEL_VNNI512, /* vpdpbusd on 512-bit vectors, four panels per tile */
    IV_INT8_KERNEL_COUNT
} iv_int8_kernel;
int iv_int8_kernel_available(iv_int8_kernel k);
iv_int8_kernel iv_int8_kernel_active(void);
void iv_int8_kernel_select(iv_int8_kernel k); /* ignored when not available */
const char *iv_int8_kernel_name(iv_int8_kernel k);
/* The widest weights k is exact on: IV_INT8_QMAX or IV_INT8_QMAX_7BIT. */
int iv_int8_kernel_qmax(iv_int8_kernel k);

#endif
