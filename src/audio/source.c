/* A client's audio to samples: a data URL or bare base64 (requests), or a
 * file path (CLI, tests). The container is sniffed from the bytes by
 * libsndfile, never taken from the data URL's media type. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "audio/audio.h"
#include "base/base64.h"
#include "base/file.h"

static int is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

int iv_audio_source_bytes(const char *s, size_t n, size_t max_bytes, uint8_t **bytes, size_t *n_bytes,
                          iv_err *err)
{
    *bytes = NULL;
    *n_bytes = 0;
    if (!max_bytes) max_bytes = IV_AUDIO_DEFAULT_MAX_BYTES;
    while (n && is_space((unsigned char)*s)) s++, n--;
    if (n == 0) return iv_errf(err, IV_E_INVALID, "audio is empty");
    if (n >= 5 && !strncasecmp(s, "data:", 5)) {
        const char *comma = memchr(s, ',', n);
        if (!comma) return iv_errf(err, IV_E_INVALID, "invalid data URL: no ',' before the data");
        const char *meta = s + 5;
        size_t mlen = (size_t)(comma - meta);
        /* audio/wav, audio/mpeg, audio/flac, ...; application/octet-stream
         * too, which some clients send for any file. */
        if (!(mlen >= 6 && !strncasecmp(meta, "audio/", 6)) &&
            !(mlen >= 24 && !strncasecmp(meta, "application/octet-stream", 24)))
            return iv_errf(err, IV_E_INVALID, "invalid data URL: the media type must be audio/..., got \"%.*s\"",
                           (int)(mlen > 64 ? 64 : mlen), meta);
        if (!(mlen >= 7 && !strncasecmp(comma - 7, ";base64", 7)))
            return iv_errf(err, IV_E_INVALID, "invalid data URL: only ;base64 audio data is supported");
        const char *data = comma + 1;
        return iv_base64_decode(data, n - (size_t)(data - s), max_bytes, "audio", bytes, n_bytes, err);
    }
    if (n >= 8 && (!strncasecmp(s, "http://", 7) || !strncasecmp(s, "https://", 8)))
        return iv_errf(err, IV_E_INVALID, "audio URLs are not fetched: send the audio as a data URL or base64");
    return iv_base64_decode(s, n, max_bytes, "audio", bytes, n_bytes, err);
}

static int decode_and_resample(const uint8_t *b, size_t nb, int rate, const iv_audio_limits *limits,
                               iv_audio *out, iv_err *err)
{
    if (iv_audio_decode(b, nb, limits, out, err)) return -1;
    if (rate > 0 && iv_audio_resample(out, rate, err)) {
        iv_audio_free(out);
        return -1;
    }
    return 0;
}

int iv_audio_load_source(const char *s, size_t n, int rate, const iv_audio_limits *limits, iv_audio *out,
                         iv_err *err)
{
    memset(out, 0, sizeof *out);
    uint8_t *b;
    size_t nb;
    if (iv_audio_source_bytes(s, n, limits ? limits->max_bytes : 0, &b, &nb, err)) return -1;
    int rc = decode_and_resample(b, nb, rate, limits, out, err);
    free(b);
    return rc;
}

int iv_audio_load_file(const char *path, int rate, const iv_audio_limits *limits, iv_audio *out, iv_err *err)
{
    memset(out, 0, sizeof *out);
    size_t max = limits && limits->max_bytes ? limits->max_bytes : IV_AUDIO_DEFAULT_MAX_BYTES;
    char *data = NULL;
    size_t nb = 0;
    if (iv_file_read_all(path, max, &data, &nb, err)) return -1;
    int rc = decode_and_resample((const uint8_t *)data, nb, rate, limits, out, err);
    free(data);
    return rc;
}
