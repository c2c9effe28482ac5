/* Internal to ops/cpu: the functions cpu_table.c collects into the CPU
 * iv_ops table, and the row helpers the kernels share.
 *
 * Threading: every op parallelises over rows (attention over blocks of
 * queries) with OpenMP, and only when the work is large enough to pay for a
 * fork. BLAS is always called outside parallel regions: OpenBLAS (OpenMP
 * build) shares the OpenMP runtime and threads sgemm itself, so calling it
 * from inside a region would oversubscribe or serialise it. */
#ifndef IV_OPS_CPU_CPU_OPS_H
#define IV_OPS_CPU_CPU_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "ops/ops.h"

/* Elements below which an op stays on one thread (a fork costs microseconds). */
#define IV_CPU_PAR_MIN 32768

/* Aborts with a message on failure: ops have no error channel and a scratch
 * allocation failing means the process is out of memory. 64-byte aligned. */
void *iv_cpu_scratch(size_t bytes);

/* y[i] = act(x[i] + b[i]) + r[i] for i < n; b and r may be NULL. y may
 * alias x or r. */
void iv_cpu_act_row(float *y, const float *x, const float *b, iv_act act, const float *r, int64_t n);
/* The same over rows of y, x and r that are ldy, ldx and ldr floats apart. */
void iv_cpu_act_rows(float *y, int64_t ldy, const float *x, int64_t ldx, const float *b, iv_act act,
                     const float *r, int64_t ldr, int64_t rows, int64_t n);
/* The int8 linear's epilogue (ops/cpu/int8_ops.h): for each row t,
 * x[i] = (float)(acc[i] - zero[t] * sums[i]) * (scale[t] * wscale[i]), then as
 * iv_cpu_act_rows; acc rows ldacc apart. */
void iv_cpu_dequant_act_rows(float *y, int64_t ldy, const int32_t *acc, int64_t ldacc, const int32_t *zero,
                             const float *scale, const int32_t *sums, const float *wscale, const float *b,
                             iv_act act, const float *r, int64_t ldr, int64_t rows, int64_t n);

/* One row of iv_cpu_softmax, in place (the MoE router's softmax is the same function). */
void iv_cpu_softmax_row(float *row, int64_t n);

void iv_cpu_linear(const iv_ops *ops, iv_view y, iv_view x, const iv_tensor *w, const iv_tensor *b,
                   iv_act act, const void *residual_or_null);
void iv_cpu_layer_norm(const iv_ops *ops, iv_view y, iv_view x, const void *r, const iv_tensor *w,
                       const iv_tensor *b, float eps);
void iv_cpu_rms_norm(const iv_ops *ops, iv_view y, iv_view x, const void *r, const iv_tensor *w,
                     float eps, float w_offset);
void iv_cpu_head_rms_norm(const iv_ops *ops, iv_view x, int n_heads, int head_dim, const iv_tensor *w,
                          float eps, float w_offset);
void iv_cpu_act(const iv_ops *ops, iv_view y, iv_view x, iv_act act);
void iv_cpu_glu(const iv_ops *ops, iv_view y, iv_view x, iv_act act, int act_on_first);
void iv_cpu_add(const iv_ops *ops, iv_view y, iv_view a, iv_view b);
void iv_cpu_scale(const iv_ops *ops, iv_view y, iv_view x, float s);
void iv_cpu_embed(const iv_ops *ops, iv_view y, const iv_tensor *table, const int32_t *ids, int accumulate);
void iv_cpu_embed_bag(const iv_ops *ops, iv_view y, const iv_tensor *table, const int32_t *ids, const float *weights,
                      int taps);
void iv_cpu_rope(const iv_ops *ops, const iv_rope_args *a);
void iv_cpu_attention(const iv_ops *ops, const iv_attn_args *a);
void iv_cpu_attention_rows(const iv_ops *ops, const iv_attn_rows_args *a);
void iv_cpu_softmax(const iv_ops *ops, iv_view x);
void iv_cpu_l2_normalize(const iv_ops *ops, iv_view x);
void iv_cpu_pool(const iv_ops *ops, const iv_pool_args *a);
void iv_cpu_moe_route(const iv_ops *ops, const iv_moe_route_args *a);
void iv_cpu_moe_gather(const iv_ops *ops, iv_view y, iv_view x, const int32_t *slots, int top_k);
void iv_cpu_moe_scatter(const iv_ops *ops, const iv_moe_scatter_args *a);
void iv_cpu_rel_bias(const iv_ops *ops, const iv_rel_bias_args *a);
void iv_cpu_im2col(const iv_ops *ops, iv_view y, iv_view x, int kernel, const int32_t *cu_seqlens,
                   const int32_t *cu_seqlens_dev, int n_seqs);
void iv_cpu_gate_mul(const iv_ops *ops, iv_view y, iv_view x, iv_view g, iv_act act);
void iv_cpu_causal_conv1d(const iv_ops *ops, const iv_causal_conv_args *a);
void iv_cpu_delta_rule(const iv_ops *ops, const iv_delta_rule_args *a);
void iv_cpu_delta_chunk(const iv_ops *ops, const iv_delta_rule_args *a);
void iv_cpu_clamp(const iv_ops *ops, iv_view y, iv_view x, float lo, float hi);
void iv_cpu_mul_cols(const iv_ops *ops, iv_view y, iv_view x, const iv_tensor *w);
void iv_cpu_conv2d(const iv_ops *ops, const iv_conv2d_args *a);
int64_t iv_cpu_act_stride(int64_t cols);

#endif
