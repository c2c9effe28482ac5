/* Internal to ops/cpu: the linear kernel for weights packed at load.
 *
 * A weight W [out, in] (PyTorch layout) is repacked once into panels of
 * IV_PANEL_COLS output columns: panel p holds columns p*32 .. p*32+31 as
 * two halves of 16 columns, each [in][16] floats (zeros past `out`), so
 * step k of the product reads one 64-byte line of each half. The kernel
 * then never repacks W per call the way sgemm must, and streams it in the
 * order it computes. Halves rather than [in][32] rows: the AVX2 kernel
 * runs a panel one 16-column half at a time, and with rows 128 bytes long
 * the lines of one half fell in only the even sets of L1, half of it, where
 * a 384-step piece (24 KiB) could not stay (gemm_panel.c, kernel_avx2).
 *
 * Every output element is one fused multiply-add chain over k in order,
 * whatever the row count, the tile it falls in, the thread that computes
 * it and the vector width (AVX-512, AVX2 and the portable fallback all give
 * the same bits). A sequence's hidden states are therefore the same alone
 * or packed into any batch. */
#ifndef IV_OPS_CPU_GEMM_PANEL_H
#define IV_OPS_CPU_GEMM_PANEL_H

#include <stddef.h>
#include <stdint.h>

#include "ops/cpu/cpu_ops.h"

#define IV_PANEL_COLS 32
#define IV_PANEL_HALF 16 /* columns per half of a panel */
/* Row-major weights up to this many floats (256 KiB) are packed per call by
 * the linear op rather than sent to sgemm. */
#define IV_CPU_PACK_PER_CALL_MAX (1 << 16)

/* Floats of the packed form of an [out, in] weight. */
size_t iv_cpu_panel_floats(int64_t out, int64_t in);
/* Packs row-major w [out, in] into dst (iv_cpu_panel_floats floats, 64-byte aligned). */
void iv_cpu_pack_panels(float *dst, const float *w, int64_t out, int64_t in);
/* The tensor the linear op takes for a packed [out, in] weight. */
iv_tensor iv_cpu_panel_tensor(float *packed, int64_t out, int64_t in);
/* Where element (n, k) of a packed [out, in] weight lies: panel n / 32,
 * half n % 32 / 16, row k of that half; (n, k + 1) is IV_PANEL_HALF floats
 * further on. */
static inline int64_t iv_cpu_panel_index(int64_t in, int64_t n, int64_t k)
{
    return (n / IV_PANEL_COLS) * in * IV_PANEL_COLS + (n % IV_PANEL_COLS / IV_PANEL_HALF) * in * IV_PANEL_HALF +
           k * IV_PANEL_HALF + n % IV_PANEL_HALF;
}
/* Element (n, k) of a packed weight, for tests. */
float iv_cpu_panel_at(const float *packed, int64_t in, int64_t n, int64_t k);

/* y = act(x W^T + b) + residual with W packed; the residual has y's layout
 * and may be y itself; x must not overlap y. */
void iv_cpu_linear_panels(iv_view y, iv_view x, const float *packed, const float *bias, iv_act act,
                          const float *residual);

/* Tests: 1 makes iv_cpu_act_stride pad every width, so that the tiny
 * models run their scratch activations with rows wider than their
 * columns; 0 restores the rule. */
void iv_cpu_act_stride_pad_all(int on);

/* Tests: 1 makes each unit's owner stop after the first half of its
 * panels and leaves the rest to the threads' stealing (which then takes
 * even a last single panel), so that the stealing path runs on every call
 * instead of when the timing happens to call for it; 0 restores the rule. */
void iv_cpu_panel_leave_half_to_thieves(int on);

/* "avx512", "avx2" or "portable": the kernel this CPU runs. */
const char *iv_cpu_panel_kernel_name(void);
/* Switches to one of those kernels, or "auto" (the best this CPU has), for
 * tests and benchmarks; -1 when this CPU cannot run it. */
int iv_cpu_panel_use(const char *name);

#endif
