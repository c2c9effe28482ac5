/* Internal to ops/cpu: the few-rows linear kernel linear.c hands short
 * inputs to (see linear_small.c for why sgemm is the wrong tool there). */
#ifndef IV_OPS_CPU_LINEAR_SMALL_H
#define IV_OPS_CPU_LINEAR_SMALL_H

#include "ops/cpu/cpu_ops.h"

/* Rows up to which the streaming kernel beats sgemm. Measured on a 2-core
 * AVX-512 EPYC, 2 threads, every BERT-base and MiniLM matrix shape, GELU
 * epilogue, W not in cache: at 4-12 rows it takes 0.3-0.8x sgemm's time
 * (e.g. 768x3072 at 8 rows 0.72 ms vs 1.09 ms); at 16 rows it still wins on
 * the 3072-wide shapes but loses ~10-25% on the square ones; from 24 rows
 * sgemm's register blocking wins everywhere. */
#define IV_LINEAR_SMALL_MAX_ROWS 12
/* Multiply-adds below which the kernel stays on one thread. */
#define IV_LINEAR_SMALL_PAR_MIN (1 << 18)

/* y = act(x W^T + b) + residual for x.rows <= IV_LINEAR_SMALL_MAX_ROWS, with
 * W row-major [y.cols][x.cols] and the residual in y's layout (it may be y
 * itself; x must not overlap y). Returns 1 when done, 0 when the caller
 * should use the general path (too many rows, or no AVX2/FMA on this CPU). */
int iv_cpu_linear_small(iv_view y, iv_view x, const float *w, const float *bias, iv_act act, const float *residual);

#endif
