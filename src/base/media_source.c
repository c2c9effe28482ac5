#include "base/media_source.h"

#include <string.h>
#include <strings.h>

#include "base/base64.h"

static int is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static int type_accepted(const char *meta, size_t mlen, const char *const *types)
{
    for (; *types; types++) {
        const size_t k = strlen(*types);
        if (mlen >= k && !strncasecmp(meta, *types, k)) return 1;
    }
    return 0;
}

int iv_media_source_bytes(const char *s, size_t n, const char *what, const char *const *types, size_t max_bytes,
                          uint8_t **bytes, size_t *n_bytes, iv_err *err)
{
    *bytes = NULL;
    *n_bytes = 0;
    while (n && is_space((unsigned char)*s)) s++, n--;
    if (n == 0) return iv_errf(err, IV_E_INVALID, "%s is empty", what);
    /* Base64 is 4/3 the size of its bytes: refuse what cannot fit early. */
    if (n / 4 * 3 > max_bytes + 3)
        return iv_errf(err, IV_E_TOO_LARGE, "%s data is %zu characters, over the limit of %zu bytes", what, n,
                       max_bytes);
    if (n >= 5 && !strncasecmp(s, "data:", 5)) {
        const char *comma = memchr(s, ',', n);
        if (!comma) return iv_errf(err, IV_E_INVALID, "invalid data URL: no ',' before the data");
        const char *meta = s + 5;
        const size_t mlen = (size_t)(comma - meta);
        if (!type_accepted(meta, mlen, types))
            return iv_errf(err, IV_E_INVALID, "invalid data URL: the media type must be %s..., got \"%.*s\"", types[0],
                           (int)(mlen > 64 ? 64 : mlen), meta);
        /* Parameters are ;name=value; the last one must be ;base64. */
        if (!(mlen >= 7 && !strncasecmp(comma - 7, ";base64", 7)))
            return iv_errf(err, IV_E_INVALID, "invalid data URL: only ;base64 %s data is supported", what);
        const char *data = comma + 1;
        return iv_base64_decode(data, n - (size_t)(data - s), max_bytes, what, bytes, n_bytes, err);
    }
    if (n >= 8 && (!strncasecmp(s, "http://", 7) || !strncasecmp(s, "https://", 8)))
        return iv_errf(err, IV_E_INVALID, "%s URLs are not fetched: send the %s as a data URL or base64", what, what);
    return iv_base64_decode(s, n, max_bytes, what, bytes, n_bytes, err);
}
