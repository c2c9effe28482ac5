#include "image/planes.h"

#include <stdlib.h>

#include "image/qwen_vl.h" /* iv_image_flatten_on_white */
#include "image/resample.h"

void iv_pixel_lut(const iv_pixel_steps *px, float lut[3][256])
{
    for (int c = 0; c < 3; c++) {
        const float mean = (float)px->image_mean[c], std = (float)px->image_std[c];
        for (int v = 0; v < 256; v++) {
            const float x = px->do_rescale ? (float)((double)v * px->rescale_factor) : (float)v;
            lut[c][v] = px->do_normalize ? (x - mean) / std : x;
        }
    }
}

int iv_image_planes(const iv_image *img, const iv_planes_spec *s, float **pixels, iv_err *err)
{
    *pixels = NULL;
    int W = img->width, H = img->height;
    uint8_t *rgb = malloc((size_t)W * (size_t)H * 3);
    if (!rgb) return iv_errf(err, IV_E_NOMEM, "out of memory preprocessing an image");
    iv_image_flatten_on_white(img, rgb);
    if (s->height != H || s->width != W) {
        uint8_t *r = malloc((size_t)s->width * (size_t)s->height * 3);
        if (!r || iv_resample_rgb(rgb, W, H, r, s->width, s->height, (enum iv_resample_filter)s->px->resample, err)) {
            free(r);
            free(rgb);
            return r ? -1 : iv_errf(err, IV_E_NOMEM, "out of memory resizing an image");
        }
        free(rgb);
        rgb = r;
        W = s->width, H = s->height;
    }
    float lut[3][256];
    iv_pixel_lut(s->px, lut);
    const size_t plane = (size_t)W * (size_t)H;
    float *px = malloc(3 * plane * sizeof(float));
    if (!px) {
        free(rgb);
        return iv_errf(err, IV_E_NOMEM, "out of memory for a %dx%d image", W, H);
    }
    for (size_t i = 0; i < plane; i++)
        for (int c = 0; c < 3; c++) px[c * plane + i] = lut[c][rgb[i * 3 + c]];
    free(rgb);
    *pixels = px;
    return 0;
}
