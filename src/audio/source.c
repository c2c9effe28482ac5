/* A client's audio to samples: a data URL or bare base64 (requests), or a
 * file path (CLI, tests). The container is sniffed from the bytes by
 * libsndfile, never taken from the data URL's media type. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "audio/audio.h"
#include "base/media_source.h"
#include "base/file.h"

int iv_audio_source_bytes(const char *s, size_t n, size_t max_bytes, uint8_t **bytes, size_t *n_bytes,
                          iv_err *err)
{
    /* audio/wav, audio/mpeg, audio/flac, ...; application/octet-stream
     * too, which some clients send for any file. */
    static const char *const types[] = {"audio/", "application/octet-stream", NULL};
    return iv_media_source_bytes(s, n, "audio", types, max_bytes ? max_bytes : IV_AUDIO_DEFAULT_MAX_BYTES, bytes,
                                 n_bytes, err);
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
