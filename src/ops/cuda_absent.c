/* The CUDA table's entry points in a build without nvcc: every request for
 * a GPU gets a clear answer instead of a link error. */
#ifndef IV_WITH_CUDA
#include "ops/cuda/cuda_ops.h"

const iv_ops *iv_cuda_ops_open(int device_index, iv_dtype dt, iv_err *err)
{
    (void)dt;
    iv_errf(err, IV_E_UNSUPPORTED,
            "device cuda:%d: this build has no CUDA support (build with nvcc on the PATH: make cuda)", device_index);
    return NULL;
}

void iv_cuda_ops_close(const iv_ops *ops) { (void)ops; }
#endif
