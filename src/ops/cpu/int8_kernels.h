/* Internal to the int8 CPU path: padding rules of the packed weights and the
 * integer micro-kernels int8_linear.c tiles the product with. */
#ifndef IV_OPS_CPU_INT8_KERNELS_H
#define IV_OPS_CPU_INT8_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "ops/cpu/int8_ops.h"

#define IV_INT8_PANEL 8 /* output rows per packed panel */
#define IV_INT8_MR 6    /* activation rows per micro-tile */

static inline int64_t iv_int8_padded_in(int64_t in) { return (in + 3) & ~(int64_t)3; }
static inline int64_t iv_int8_padded_out(int64_t out) { return (out + 31) & ~(int64_t)31; }

/* One micro-tile: c[r * ldc + j] = sum_{k < kp} a_r[k] * w_j[k] for r < rows
 * (1..IV_INT8_MR) and j < the kernel's cols. a_r starts a_stride bytes after
 * a_{r-1}; its elements are uint8 or, for `wide` kernels, uint16 (values
 * 0..255 either way). w is the first of cols / IV_INT8_PANEL consecutive
 * packed panels; kp = iv_int8_padded_in(in). pf, unless NULL, is the start
 * of the cols * kp bytes of panels to prefetch while the tile computes
 * (the next ones: int8_linear.c); the VNNI kernels ignore it. */
typedef void (*iv_int8_tile_fn)(const void *a, size_t a_stride, int rows, const int8_t *w, int64_t kp,
                                int32_t *c, int64_t ldc, const int8_t *pf);

typedef struct iv_int8_kernel_desc {
    const char *name;
    int cols; /* output columns per tile: a multiple of IV_INT8_PANEL dividing 32 */
    int wide; /* activations as uint16 (1) or uint8 (0) */
    int qmax; /* exact for weights within +-qmax (IV_INT8_QMAX or IV_INT8_QMAX_7BIT) */
    int (*available)(void);
    iv_int8_tile_fn tile;
} iv_int8_kernel_desc;

const iv_int8_kernel_desc *iv_int8_kernel_desc_of(iv_int8_kernel k);

#endif
