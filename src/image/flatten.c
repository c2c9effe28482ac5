/* PIL's alpha_composite(white, image) then convert("RGB"): what
 * transformers' convert_to_rgb does to an image with transparency. PIL's
 * integer formula (7 extra bits of precision, divisions by 255 by shifts)
 * is reproduced so the bytes match. */
#include <string.h>

#include "image/qwen_vl.h"

#define PREC 7
#define SHIFTDIV255(a) ((((a) >> 8) + (a)) >> 8)

void iv_image_flatten_on_white(const iv_image *img, uint8_t *rgb)
{
    size_t n = (size_t)img->width * (size_t)img->height;
    if (!img->alpha) {
        memcpy(rgb, img->rgb, n * 3);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t a = img->alpha[i];
        const uint8_t *s = img->rgb + i * 3;
        uint8_t *o = rgb + i * 3;
        if (a == 0) {
            o[0] = o[1] = o[2] = 255;
            continue;
        }
        uint32_t blend = 255 * (255 - a); /* the background is opaque */
        uint32_t outa255 = a * 255 + blend;
        uint32_t coef1 = a * 255 * 255 * (1u << PREC) / outa255;
        uint32_t coef2 = 255 * (1u << PREC) - coef1;
        for (int c = 0; c < 3; c++) {
            uint32_t t = s[c] * coef1 + 255u * coef2;
            o[c] = (uint8_t)(SHIFTDIV255(t + (0x80u << PREC)) >> PREC);
        }
    }
}
