/* Load-time int8 quantization of a model's large linear layers (`--dtype
 * int8` on CPU). The pass replaces, in every layer, the fused QKV, attention
 * output, MLP up and MLP down weights (and each routed expert's up and down)
 * by IV_I8 tensors (per-output-row symmetric int8, ops/cpu/int8_ops.h);
 * embeddings, norms, biases, MoE routers and heads stay FP32. The model must run on the int8 op table (iv_cpu_int8_ops),
 * whose linear takes either dtype, so model code is unchanged. */
#ifndef IV_MODELS_QUANTIZE_H
#define IV_MODELS_QUANTIZE_H

#include <stddef.h>

#include "models/model.h"

typedef struct iv_quant_stats {
    int tensors;       /* weights replaced (a tensor shared by layers counts once) */
    int kept_f32;      /* too wide to quantize exactly (in >= IV_INT8_MAX_IN) */
    size_t f32_bytes;  /* their FP32 size */
    size_t int8_bytes; /* their int8 size, scales included */
    int qmax;          /* weights quantized to +-qmax (127, or 63 for vpmaddubsw: ops/cpu/int8_ops.h) */
} iv_quant_stats;

/* Quantizes m's layers in place; stats may be NULL. Weights with NaN or
 * infinite values are an error naming the layer. */
int iv_model_quantize_int8(iv_model *m, iv_quant_stats *stats, iv_err *err);

#endif
