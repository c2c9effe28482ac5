/* Load-time packing of a CPU model's FP32 linear weights (layers, MoE
 * routers, embedding projection, token convolution, and every head step,
 * a tied MLM decoder with its embedding table) into the panels of the CPU
 * linear kernel (ops/cpu/gemm_panel.h), so no call repacks them and no
 * output depends on what a sequence is batched with. Runs after int8
 * quantization (which leaves some weights FP32) and after anything that
 * reads weights as rows at load (a causal LM's score head, ColBERT's
 * projection check), before the first forward; values are unchanged, only
 * their order. */
#ifndef IV_MODELS_PACK_WEIGHTS_H
#define IV_MODELS_PACK_WEIGHTS_H

#include <stddef.h>

#include "models/model.h"

/* Packs row-major FP32 w [out, in] into dst (iv_cpu_panel_floats floats) a
 * slice of panels at a time, handing each slice's source pages back to the
 * kernel when they are mapped from `weights`: a large tensor (a tied 94 MB
 * decoder) is never resident twice while it is packed. */
void iv_pack_panels_releasing(float *dst, const iv_tensor *w, iv_weights *weights);

/* Packs m's FP32 linear weights; *packed_bytes (may be NULL) receives
 * the size of the packed copies. */
int iv_model_pack_cpu_weights(iv_model *m, size_t *packed_bytes, iv_err *err);

#endif
