/* WebP through libwebp's animation decoder, as PIL reads every WebP
 * (still or animated): the first frame composed on a transparent canvas,
 * RGBA with non-premultiplied alpha, the library's default (fancy) chroma
 * upsampling. The canvas size comes from the headers (WebPGetFeatures)
 * and is checked against the pixel limit before anything is decoded. */
#include <stdlib.h>
#include <string.h>

#include <webp/decode.h>
#include <webp/demux.h>

#include "image/image.h"

int iv_image_decode_webp(const iv_image_dec *d, iv_image *out, iv_err *err)
{
    WebPBitstreamFeatures feat;
    VP8StatusCode st = WebPGetFeatures(d->p, d->n, &feat);
    if (st == VP8_STATUS_NOT_ENOUGH_DATA)
        return iv_errf(err, IV_E_INVALID, "invalid WebP image: the data ends early (truncated file)");
    if (st != VP8_STATUS_OK) return iv_errf(err, IV_E_INVALID, "invalid WebP image: bad header (status %d)", (int)st);
    if (iv_image_alloc(out, feat.width, feat.height, feat.has_alpha, d->max_pixels, "WebP", err)) return -1;

    WebPAnimDecoderOptions opt;
    if (!WebPAnimDecoderOptionsInit(&opt)) {
        iv_image_free(out);
        return iv_errf(err, IV_E_INTERNAL, "libwebp version mismatch");
    }
    opt.color_mode = MODE_RGBA;
    opt.use_threads = 0;
    WebPData data = {d->p, d->n};
    WebPAnimDecoder *dec = WebPAnimDecoderNew(&data, &opt);
    if (!dec) {
        iv_image_free(out);
        return iv_errf(err, IV_E_INVALID, "invalid WebP image: cannot parse its chunks (truncated or corrupt)");
    }
    WebPAnimInfo ai;
    uint8_t *buf = NULL;
    int ts = 0;
    if (!WebPAnimDecoderGetInfo(dec, &ai) || (int)ai.canvas_width != out->width ||
        (int)ai.canvas_height != out->height || !WebPAnimDecoderGetNext(dec, &buf, &ts) || !buf) {
        WebPAnimDecoderDelete(dec);
        iv_image_free(out);
        return iv_errf(err, IV_E_INVALID, "invalid WebP image: cannot decode its first frame (truncated or corrupt)");
    }
    size_t n = (size_t)out->width * (size_t)out->height;
    for (size_t i = 0; i < n; i++) {
        out->rgb[i * 3 + 0] = buf[i * 4 + 0];
        out->rgb[i * 3 + 1] = buf[i * 4 + 1];
        out->rgb[i * 3 + 2] = buf[i * 4 + 2];
        if (out->alpha) out->alpha[i] = buf[i * 4 + 3];
    }
    WebPAnimDecoderDelete(dec);
    return 0;
}
