/* The emulated device: a second op table on the CPU that stores activations
 * and weights in BF16 or FP16, computes every op in FP32 with the CPU
 * kernels and rounds once where the op stores, as a GPU kernel does. Its
 * buffers are mapped PROT_NONE outside its own ops, so any host access to
 * device memory that bypasses the table crashes in the tests. Selected with
 * `--device emulated --dtype bfloat16|float16`. */
#ifndef IV_OPS_EMU_EMU_OPS_H
#define IV_OPS_EMU_EMU_OPS_H

#include "ops/ops.h"

/* dt: IV_BF16 or IV_F16. NULL with err set otherwise. */
const iv_ops *iv_emu_ops_open(iv_dtype dt, iv_err *err);
void iv_emu_ops_close(const iv_ops *ops);

#endif
