/* A client's image string to bytes: a data URL or bare base64. The media
 * type of a data URL must say image/..., but the format is taken from the
 * bytes (iv_image_sniff), never from the URL. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/media_source.h"
#include "image/image.h"

int iv_image_source_bytes(const char *s, size_t n, size_t max_bytes, uint8_t **bytes, size_t *n_bytes,
                          iv_err *err)
{
    static const char *const types[] = {"image/", NULL};
    return iv_media_source_bytes(s, n, "image", types, max_bytes ? max_bytes : IV_IMAGE_DEFAULT_MAX_BYTES, bytes,
                                 n_bytes, err);
}

int iv_image_decode_source(const char *s, size_t n, const iv_image_limits *limits, iv_image *out, iv_err *err)
{
    memset(out, 0, sizeof *out);
    uint8_t *b;
    size_t nb;
    if (iv_image_source_bytes(s, n, limits ? limits->max_bytes : 0, &b, &nb, err)) return -1;
    int rc = iv_image_decode(b, nb, limits, out, err);
    free(b);
    return rc;
}
