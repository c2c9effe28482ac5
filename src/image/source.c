/* A client's image string to bytes: a data URL or bare base64. The media
 * type of a data URL must say image/..., but the format is taken from the
 * bytes (iv_image_sniff), never from the URL. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/base64.h"
#include "image/image.h"

static int is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

int iv_image_source_bytes(const char *s, size_t n, size_t max_bytes, uint8_t **bytes, size_t *n_bytes,
                          iv_err *err)
{
    *bytes = NULL;
    *n_bytes = 0;
    if (!max_bytes) max_bytes = IV_IMAGE_DEFAULT_MAX_BYTES;
    while (n && is_space((unsigned char)*s)) s++, n--;
    if (n == 0) return iv_errf(err, IV_E_INVALID, "image is empty");
    /* Base64 is 4/3 the size of its bytes: refuse what cannot fit early. */
    if (n / 4 * 3 > max_bytes + 3)
        return iv_errf(err, IV_E_TOO_LARGE, "image data is %zu characters, over the limit of %zu bytes", n, max_bytes);
    if (n >= 5 && !strncasecmp(s, "data:", 5)) {
        const char *comma = memchr(s, ',', n);
        if (!comma) return iv_errf(err, IV_E_INVALID, "invalid data URL: no ',' before the data");
        const char *meta = s + 5;
        size_t mlen = (size_t)(comma - meta);
        if (mlen < 6 || strncasecmp(meta, "image/", 6))
            return iv_errf(err, IV_E_INVALID, "invalid data URL: the media type must be image/..., got \"%.*s\"",
                           (int)(mlen > 64 ? 64 : mlen), meta);
        /* Parameters are ;name=value; the last one must be ;base64. */
        int is_b64 = mlen >= 7 && !strncasecmp(comma - 7, ";base64", 7);
        if (!is_b64) return iv_errf(err, IV_E_INVALID, "invalid data URL: only ;base64 image data is supported");
        const char *data = comma + 1;
        return iv_base64_decode(data, n - (size_t)(data - s), max_bytes, "image", bytes, n_bytes, err);
    }
    if (n >= 8 && (!strncasecmp(s, "http://", 7) || !strncasecmp(s, "https://", 8)))
        return iv_errf(err, IV_E_INVALID, "image URLs are not fetched: send the image as a data URL or base64");
    return iv_base64_decode(s, n, max_bytes, "image", bytes, n_bytes, err);
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
