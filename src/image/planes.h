/* The last steps most image processors share (Pixtral's, Gemma4's): RGB
 * with transparency flattened over white, resized with PIL's filter when
 * the size changes (PIL copies otherwise), then rescaled and normalised as
 * numpy does into channel-major float planes [3, H, W]. */
#ifndef IV_IMAGE_PLANES_H
#define IV_IMAGE_PLANES_H

#include "base/err.h"
#include "image/image.h"
#include "image/processor_keys.h"

typedef struct iv_planes_spec {
    int width, height;        /* the target size */
    const iv_pixel_steps *px; /* the filter, rescale and normalisation */
} iv_planes_spec;

/* Each 8-bit level's float per channel: the float64 rescale cast to
 * float32, then (with do_normalize) float32 (x - mean) / std. */
void iv_pixel_lut(const iv_pixel_steps *px, float lut[3][256]);

/* *pixels (malloc'd): [3, height, width], each level mapped by iv_pixel_lut. */
int iv_image_planes(const iv_image *img, const iv_planes_spec *s, float **pixels, iv_err *err);

#endif
