/* Audio from request bytes to the mono float32 waveform transformers'
 * load_audio gives a feature extractor (docs/audio.md).
 *
 * transformers' default path here (no torchcodec installed) is
 * audio_utils._load_audio_soundfile: soundfile (libsndfile) reads float32
 * frames, channels are averaged (numpy mean over the channel axis in
 * float32), and a clip at another rate is resampled with soxr at "soxr_hq"
 * and padded/trimmed to ceil(n * rate / src_rate) samples. We do the same
 * with the Debian libraries: libsndfile (WAV, FLAC, AIFF and, since 1.1,
 * MP3 through libmpg123; Ogg is refused, see decode.c) and libsoxr at
 * SOXR_HQ. */
#ifndef IV_AUDIO_AUDIO_H
#define IV_AUDIO_AUDIO_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

typedef struct iv_audio {
    float *samples;   /* n mono samples in [-1, 1] (as libsndfile scales them) */
    int64_t n;
    int sample_rate;  /* Hz */
    int channels;     /* of the source, before the downmix */
    char format[16];  /* "WAV", "FLAC", "MP3", ... as libsndfile names the container */
} iv_audio;

/* Checked before and while decoding. 0 means the default. max_seconds
 * bounds the decoded duration (an hour of 48 kHz stereo is 1.4 GB of
 * floats: refuse long clips before allocating them); the feature extractor
 * has its own, separate cut (its max_length, 30 s for Gemma4). */
typedef struct iv_audio_limits {
    size_t max_bytes;
    double max_seconds;
} iv_audio_limits;

#define IV_AUDIO_DEFAULT_MAX_BYTES ((size_t)64 << 20)
#define IV_AUDIO_DEFAULT_MAX_SECONDS 600.0

/* Decodes p[0..n) into *out, mono at the file's own rate (zeroed on
 * failure). Errors: IV_E_INVALID for empty, corrupt, truncated-to-nothing
 * or unknown-format bytes and for clips with no samples; IV_E_UNSUPPORTED
 * for Ogg; IV_E_TOO_LARGE over a limit. limits may be NULL (defaults). */
int iv_audio_decode(const uint8_t *p, size_t n, const iv_audio_limits *limits, iv_audio *out, iv_err *err);
void iv_audio_free(iv_audio *a);

/* Resamples a to rate in place, as librosa.load / transformers do: soxr
 * "HQ" quality on float32, output ceil(n * rate / a->sample_rate) samples
 * (zero-padded or trimmed to it). A no-op when the rates agree. */
int iv_audio_resample(iv_audio *a, int rate, iv_err *err);

/* A client's audio string: a data URL (data:audio/...;base64,...) or bare
 * base64. *bytes is malloc'd. */
int iv_audio_source_bytes(const char *s, size_t n, size_t max_bytes, uint8_t **bytes, size_t *n_bytes,
                          iv_err *err);
/* Source string or file -> decode -> resample to rate (rate 0: keep the
 * file's own). */
int iv_audio_load_source(const char *s, size_t n, int rate, const iv_audio_limits *limits, iv_audio *out,
                         iv_err *err);
int iv_audio_load_file(const char *path, int rate, const iv_audio_limits *limits, iv_audio *out, iv_err *err);

#endif
