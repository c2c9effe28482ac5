/* The CPU op table: FP32 kernels on OpenBLAS and OpenMP. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/cpu_ops.h"

void *iv_cpu_scratch(size_t bytes)
{
    void *p = NULL;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, rounded ? rounded : 64) != 0) {
        fprintf(stderr, "infinity_v3: out of memory allocating %zu bytes of CPU scratch\n", bytes);
        abort();
    }
    return p;
}

/* Device memory is host memory: allocations are aligned host blocks and
 * copies are memcpy; there is nothing to wait for. */
static void *cpu_dev_alloc(const iv_ops *ops, size_t bytes)
{
    void *p = NULL;
    size_t rounded = (bytes + 255) & ~(size_t)255;
    return posix_memalign(&p, 256, rounded ? rounded : 256) == 0 ? p : NULL;
}

static void cpu_dev_free(const iv_ops *ops, void *p) { free(p); }

static void cpu_copy(const iv_ops *ops, void *dst, const void *src, size_t bytes)
{
    if (bytes && dst != src) memcpy(dst, src, bytes);
}

static int cpu_sync(const iv_ops *ops, iv_err *err) { return 0; }

static const iv_ops cpu_ops = {
    .name = "cpu",
    .device = IV_CPU,
    .act_dtype = IV_F32,
    .host_visible = 1,
    .dev_alloc = cpu_dev_alloc,
    .dev_free = cpu_dev_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .sync = cpu_sync,
    .linear = iv_cpu_linear,
    .layer_norm = iv_cpu_layer_norm,
    .rms_norm = iv_cpu_rms_norm,
    .head_rms_norm = iv_cpu_head_rms_norm,
    .act = iv_cpu_act,
    .glu = iv_cpu_glu,
    .add = iv_cpu_add,
    .scale = iv_cpu_scale,
    .embed = iv_cpu_embed,
    .embed_bag = iv_cpu_embed_bag,
    .rope = iv_cpu_rope,
    .attention = iv_cpu_attention,
    .attention_rows = iv_cpu_attention_rows,
    .softmax = iv_cpu_softmax,
    .l2_normalize = iv_cpu_l2_normalize,
    .pool = iv_cpu_pool,
    .moe_route = iv_cpu_moe_route,
    .moe_gather = iv_cpu_moe_gather,
    .moe_scatter = iv_cpu_moe_scatter,
    .rel_bias = iv_cpu_rel_bias,
    .im2col = iv_cpu_im2col,
    .gate_mul = iv_cpu_gate_mul,
    .causal_conv1d = iv_cpu_causal_conv1d,
    .delta_rule = iv_cpu_delta_rule,
    .delta_chunk = iv_cpu_delta_chunk,
    .clamp = iv_cpu_clamp,
    .mul_cols = iv_cpu_mul_cols,
    .conv2d = iv_cpu_conv2d,
    .act_stride = iv_cpu_act_stride,
};

const iv_ops *iv_cpu_ops(void) { return &cpu_ops; }
