/* Internal to ops/cpu: the few-rows linear kernel linear.c hands short
 * inputs to (see linear_small.c for why sgemm is the wrong tool there). */
#ifndef IV_OPS_CPU_LINEAR_SMALL_H
#define IV_OPS_CPU_LINEAR_SMALL_H

#include "ops/cpu/cpu_ops.h"

/* Rows up to which the streaming kernel beats sgemm in a model. At 16-48
 * rows sgemm's register blocking wins on the op alone with W warm in cache,
 * but inside a forward pass W comes cold from memory, and OpenBLAS spends
 * ~25% of its time packing it (sgemm_incopy) before the kernel runs. Measured
 * on a 2-core AVX-512 EPYC, 2 threads, bench_engine single requests, p50 ms
 * with sgemm above 12 rows vs this kernel: MiniLM-L6 16 tokens 5.66 -> 3.91,
 * 24: 7.46 -> 5.37, 32: 8.13 -> 6.74, 48: 10.82 -> 9.55; BERT-base 16:
 * 36.6 -> 27.5, 24: 50.4 -> 35.8, 32: 51.8 -> 45.4, 48: 69.4 -> 63.3. At 64
 * rows the two tie on MiniLM and sgemm is ahead on BERT-base. (Those
 * figures predate the packed-panel kernel, which now takes every model
 * weight; this path only serves large row-major weights left unpacked.) */
#define IV_LINEAR_SMALL_MAX_ROWS 16
/* Multiply-adds below which the kernel stays on one thread. */
#define IV_LINEAR_SMALL_PAR_MIN (1 << 18)

/* y = act(x W^T + b) + residual for x.rows <= IV_LINEAR_SMALL_MAX_ROWS, with
 * W row-major [y.cols][x.cols] and the residual in y's layout (it may be y
 * itself; x must not overlap y). Returns 1 when done, 0 when the caller
 * should use the general path (too many rows, or no AVX2/FMA on this CPU). */
int iv_cpu_linear_small(iv_view y, iv_view x, const float *w, const float *bias, iv_act act, const float *residual);

#endif
