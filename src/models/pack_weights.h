/* Load-time packing of a CPU model's FP32 backbone linear weights (layers,
 * MoE routers, embedding projection, token convolution) into the panels of
 * the CPU linear kernel (ops/cpu/gemm_panel.h), so no call repacks them.
 * Runs after int8 quantization (which leaves some weights FP32) and before
 * the first forward; values are unchanged, only their order. */
#ifndef IV_MODELS_PACK_WEIGHTS_H
#define IV_MODELS_PACK_WEIGHTS_H

#include <stddef.h>

#include "models/model.h"

/* Packs m's FP32 layer linear weights; *packed_bytes (may be NULL) receives
 * the size of the packed copies. */
int iv_model_pack_cpu_weights(iv_model *m, size_t *packed_bytes, iv_err *err);

#endif
