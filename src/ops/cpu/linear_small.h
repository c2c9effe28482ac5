/* Internal to ops/cpu: the few-rows linear kernel linear.c hands short
 * inputs to (see linear_small.c for why sgemm is the wrong tool there). */
#ifndef IV_OPS_CPU_LINEAR_SMALL_H
#define IV_OPS_CPU_LINEAR_SMALL_H

#include "ops/cpu/cpu_ops.h"

/* Rows up to which the streaming kernel beats sgemm (measured on AVX-512
 * EPYC, 2 threads, BERT-base and MiniLM matrix shapes). */
#define IV_LINEAR_SMALL_MAX_ROWS 16
/* Multiply-adds below which the kernel stays on one thread. */
#define IV_LINEAR_SMALL_PAR_MIN (1 << 18)

/* y = act(x W^T + b) + residual for x.rows <= IV_LINEAR_SMALL_MAX_ROWS, with
 * W row-major [y.cols][x.cols] and the residual in y's layout (it may be y
 * itself; x must not overlap y). Returns 1 when done, 0 when the caller
 * should use the general path (too many rows, or no AVX2/FMA on this CPU). */
int iv_cpu_linear_small(iv_view y, iv_view x, const float *w, const float *bias, iv_act act, const float *residual);

#endif
