/* The CUDA table (the .cu files of ops/cuda, built when nvcc is present): FP16 or
 * BF16 activations and weights, FP32 accumulation, one instance per GPU
 * (its own stream, cuBLASLt handle and workspace). Without a CUDA build,
 * ops/cuda_absent.c answers that it is not built in. */
#ifndef IV_OPS_CUDA_CUDA_OPS_H
#define IV_OPS_CUDA_CUDA_OPS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Inside the extern "C" block: ops.h's inline helpers call C functions
 * (iv_dtype_size) that a C++ file must see with C linkage. */
#include "ops/ops.h"

/* dt: IV_BF16 or IV_F16. NULL with err set when no such GPU, the build has
 * no CUDA, or the dtype is not supported. */
const iv_ops *iv_cuda_ops_open(int device_index, iv_dtype dt, iv_err *err);
void iv_cuda_ops_close(const iv_ops *ops);

#ifdef __cplusplus
}
#endif

#endif
