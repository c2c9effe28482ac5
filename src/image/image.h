/* Images from request bytes to 8-bit RGB, the way PIL's
 * Image.open(f).convert("RGB") sees them (docs/images.md).
 *
 * The decoders are the Debian-packaged libraries (libjpeg-turbo, libpng,
 * libwebp with its demux, giflib); each one's file (decode_<fmt>.c) turns
 * the library's output into PIL's pixels: palette lookup, grayscale
 * replicated, alpha dropped (not composited), 16-bit samples reduced as
 * PIL reduces them, CMYK JPEG inverted as Adobe writes it. EXIF
 * orientation is not applied (PIL's open does not).
 *
 * Besides RGB, an image keeps the alpha PIL's convert("RGBA") would give
 * when PIL would consider it transparent (an alpha band or a transparency
 * entry): processors that flatten transparency over white, as
 * transformers' convert_to_rgb does, need it. */
#ifndef IV_IMAGE_IMAGE_H
#define IV_IMAGE_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

enum iv_image_format {
    IV_IMAGE_UNKNOWN = 0,
    IV_IMAGE_JPEG,
    IV_IMAGE_PNG,
    IV_IMAGE_WEBP,
    IV_IMAGE_GIF,
};

typedef struct iv_image {
    int width, height;
    uint8_t *rgb;   /* width*height*3, row-major */
    uint8_t *alpha; /* width*height, or NULL when PIL sees no transparency */
    enum iv_image_format format;
} iv_image;

/* Bounds checked before any pixel is decoded: max_pixels against the
 * dimensions in the header (a decompression bomb costs nothing), max_bytes
 * against the encoded size. 0 means the default. */
typedef struct iv_image_limits {
    int64_t max_pixels;
    size_t max_bytes;
} iv_image_limits;

/* PIL's Image.MAX_IMAGE_PIXELS (its warning threshold; PIL refuses at twice
 * that): about 9459x9459, 268 MB of RGB. */
#define IV_IMAGE_DEFAULT_MAX_PIXELS ((int64_t)89478485)
#define IV_IMAGE_DEFAULT_MAX_BYTES ((size_t)64 << 20)

/* The format by magic bytes (the MIME a client claims is not trusted). */
enum iv_image_format iv_image_sniff(const uint8_t *p, size_t n);
const char *iv_image_format_name(enum iv_image_format f);

/* Decodes p[0..n) into *out (zeroed on failure). Errors: IV_E_INVALID for
 * empty, truncated, corrupt or unknown-format bytes and zero-sized images;
 * IV_E_TOO_LARGE over a limit. limits may be NULL (defaults). */
int iv_image_decode(const uint8_t *p, size_t n, const iv_image_limits *limits, iv_image *out,
                    iv_err *err);
void iv_image_free(iv_image *img);

/* A client's image string: a data URL (data:image/png;base64,...; the
 * media type must be image/<something> and is otherwise ignored) or bare
 * base64 (standard or URL-safe alphabet, padding optional, whitespace
 * ignored). *bytes is malloc'd. */
int iv_image_source_bytes(const char *s, size_t n, size_t max_bytes, uint8_t **bytes,
                          size_t *n_bytes, iv_err *err);
/* iv_image_source_bytes then iv_image_decode. */
int iv_image_decode_source(const char *s, size_t n, const iv_image_limits *limits, iv_image *out,
                           iv_err *err);

/* ---- internal to src/image: one decoder per format ---- */
typedef struct iv_image_dec {
    const uint8_t *p;
    size_t n;
    int64_t max_pixels;
} iv_image_dec;

int iv_image_decode_jpeg(const iv_image_dec *d, iv_image *out, iv_err *err);
int iv_image_decode_png(const iv_image_dec *d, iv_image *out, iv_err *err);
int iv_image_decode_webp(const iv_image_dec *d, iv_image *out, iv_err *err);
int iv_image_decode_gif(const iv_image_dec *d, iv_image *out, iv_err *err);
/* Checks w x h against the limit and allocates out->rgb (and alpha when
 * with_alpha). */
int iv_image_alloc(iv_image *out, int64_t w, int64_t h, int with_alpha, int64_t max_pixels,
                   const char *what, iv_err *err);

#endif
