/* Tensors: a typed, shaped view of memory on one device. Tensors never own
 * their memory; weights live in the model (mapped or converted at load) and
 * activations in the per-batch arena. Rows are contiguous (row-major). */
#ifndef IV_TENSOR_TENSOR_H
#define IV_TENSOR_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#define IV_MAX_DIMS 4

typedef enum iv_dtype {
    IV_F32 = 0,
    IV_F16,
    IV_BF16,
    IV_F64,
    IV_I64,
    IV_I32,
    IV_I16,
    IV_I8,
    IV_U8,
    IV_BOOL,
    IV_DTYPE_COUNT
} iv_dtype;

typedef enum iv_device { IV_CPU = 0, IV_CUDA = 1, IV_EMULATED = 2 } iv_device;

/* How a 2-D weight's values are arranged in data. */
typedef enum iv_layout {
    IV_LAYOUT_ROWS = 0,   /* row-major, as in safetensors: every tensor unless noted */
    IV_LAYOUT_CPU_PANELS, /* FP32 weights packed at load for the CPU linear (ops/cpu/gemm_panel.h) */
} iv_layout;

typedef struct iv_tensor {
    iv_dtype dtype;
    iv_device device;
    int ndim;
    int64_t shape[IV_MAX_DIMS];
    void *data;
    /* Quantized weights only (dtype IV_I8, made at load by models/quantize.c
     * for `--dtype int8`): one dequantization scale per row, [shape[0]], and
     * data holds the values in the packed layout of the device's int8 linear
     * (ops/cpu/int8_ops.h), not row-major. NULL for every other tensor. */
    const float *scales;
    iv_layout layout;
} iv_tensor;

size_t iv_dtype_size(iv_dtype dt);
const char *iv_dtype_name(iv_dtype dt);
/* Parses safetensors dtype names ("F32", "BF16", ...); -1 when unknown. */
int iv_dtype_from_safetensors(const char *name);

int64_t iv_tensor_numel(const iv_tensor *t);
size_t iv_tensor_nbytes(const iv_tensor *t);
/* Rows = product of all dims but the last; cols = last dim. */
int64_t iv_tensor_rows(const iv_tensor *t);
int64_t iv_tensor_cols(const iv_tensor *t);
static inline float *iv_f32(const iv_tensor *t) { return (float *)t->data; }
/* A 2-D f32 CPU tensor over data. */
iv_tensor iv_tensor_2d(float *data, int64_t rows, int64_t cols);
iv_tensor iv_tensor_1d(float *data, int64_t n);
/* "[2, 3]" into buf, for error messages. */
const char *iv_shape_str(const iv_tensor *t, char *buf, size_t cap);

/* Scalar conversions (round-to-nearest-even on the narrowing side). */
float iv_f16_to_f32(uint16_t h);
uint16_t iv_f32_to_f16(float f);
float iv_bf16_to_f32(uint16_t h);
uint16_t iv_f32_to_bf16(float f);
/* Converts n elements of src (any float dtype) to f32. */
void iv_convert_to_f32(float *dst, const void *src, iv_dtype src_dt, int64_t n);

#endif
