/* PIL's Image.resize for 8-bit RGB, bit for bit (its ImagingResample):
 * separable (horizontal pass first unless the height shrinks much more,
 * as Pillow 13 does), the filter's support widened by the
 * scale when shrinking (antialiasing), coefficients normalised per output
 * pixel then rounded to 22-bit fixed point, each pass rounded and clipped
 * to 8 bits. */
#ifndef IV_IMAGE_RESAMPLE_H
#define IV_IMAGE_RESAMPLE_H

#include <stdint.h>

#include "base/err.h"

enum iv_resample_filter {
    IV_RESAMPLE_BILINEAR = 2, /* PIL's Resampling enum values */
    IV_RESAMPLE_BICUBIC = 3,
};

/* src: sw x sh x 3; dst: dw x dh x 3 (caller-allocated). */
int iv_resample_rgb(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh,
                    enum iv_resample_filter filter, iv_err *err);

#endif
