/* Sniffing, limits and dispatch to the per-format decoders. */
#include <stdlib.h>
#include <string.h>

#include "image/image.h"

enum iv_image_format iv_image_sniff(const uint8_t *p, size_t n)
{
    if (n >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF) return IV_IMAGE_JPEG;
    if (n >= 8 && !memcmp(p, "\x89PNG\r\n\x1a\n", 8)) return IV_IMAGE_PNG;
    if (n >= 12 && !memcmp(p, "RIFF", 4) && !memcmp(p + 8, "WEBP", 4)) return IV_IMAGE_WEBP;
    if (n >= 6 && (!memcmp(p, "GIF87a", 6) || !memcmp(p, "GIF89a", 6))) return IV_IMAGE_GIF;
    return IV_IMAGE_UNKNOWN;
}

const char *iv_image_format_name(enum iv_image_format f)
{
    switch (f) {
    case IV_IMAGE_JPEG: return "jpeg";
    case IV_IMAGE_PNG: return "png";
    case IV_IMAGE_WEBP: return "webp";
    case IV_IMAGE_GIF: return "gif";
    default: return "unknown";
    }
}

int iv_image_alloc(iv_image *out, int64_t w, int64_t h, int with_alpha, int64_t max_pixels,
                   const char *what, iv_err *err)
{
    if (w <= 0 || h <= 0)
        return iv_errf(err, IV_E_INVALID, "%s image has a zero size (%lldx%lld)", what, (long long)w,
                       (long long)h);
    if (w > max_pixels || h > max_pixels || w * h > max_pixels)
        return iv_errf(err, IV_E_TOO_LARGE,
                       "%s image is %lldx%lld = %lld pixels, over the limit of %lld pixels", what,
                       (long long)w, (long long)h, (long long)(w * h), (long long)max_pixels);
    out->width = (int)w;
    out->height = (int)h;
    out->rgb = malloc((size_t)(w * h * 3));
    out->alpha = with_alpha ? malloc((size_t)(w * h)) : NULL;
    if (!out->rgb || (with_alpha && !out->alpha)) {
        iv_image_free(out);
        return iv_errf(err, IV_E_NOMEM, "out of memory for a %lldx%lld image", (long long)w, (long long)h);
    }
    return 0;
}

void iv_image_free(iv_image *img)
{
    if (!img) return;
    free(img->rgb);
    free(img->alpha);
    memset(img, 0, sizeof *img);
}

int iv_image_decode(const uint8_t *p, size_t n, const iv_image_limits *limits, iv_image *out,
                    iv_err *err)
{
    memset(out, 0, sizeof *out);
    int64_t max_pixels = limits && limits->max_pixels > 0 ? limits->max_pixels : IV_IMAGE_DEFAULT_MAX_PIXELS;
    size_t max_bytes = limits && limits->max_bytes > 0 ? limits->max_bytes : IV_IMAGE_DEFAULT_MAX_BYTES;
    if (!p || n == 0) return iv_errf(err, IV_E_INVALID, "image is empty (0 bytes)");
    if (n > max_bytes)
        return iv_errf(err, IV_E_TOO_LARGE, "image is %zu bytes, over the limit of %zu bytes", n, max_bytes);
    iv_image_dec d = {p, n, max_pixels};
    enum iv_image_format f = iv_image_sniff(p, n);
    int rc;
    switch (f) {
    case IV_IMAGE_JPEG: rc = iv_image_decode_jpeg(&d, out, err); break;
    case IV_IMAGE_PNG: rc = iv_image_decode_png(&d, out, err); break;
    case IV_IMAGE_WEBP: rc = iv_image_decode_webp(&d, out, err); break;
    case IV_IMAGE_GIF: rc = iv_image_decode_gif(&d, out, err); break;
    default:
        return iv_errf(err, IV_E_INVALID,
                       "unknown image format (the bytes are not JPEG, PNG, WebP or GIF; first bytes %02x %02x %02x %02x)",
                       p[0], n > 1 ? p[1] : 0, n > 2 ? p[2] : 0, n > 3 ? p[3] : 0);
    }
    if (rc) {
        iv_image_free(out);
        return -1;
    }
    out->format = f;
    return 0;
}
