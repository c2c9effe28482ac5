/* Resampling as transformers' soundfile path does it (audio_utils.
 * _load_audio_soundfile, the same steps as librosa.load):
 *     y = soxr.resample(x, src, dst, quality="soxr_hq")   # float32 in, float32 out
 *     y = pad(y, ceil(len(x) * dst / src))[:that]
 * python-soxr wraps libsoxr 0.1.3; we call Debian's libsoxr 0.1.3 with the
 * same recipe (SOXR_HQ, float32 interleaved I/O, one channel). The
 * residual difference is measured in tests/fixtures/audio/README.md. */
#include <math.h>
#include <soxr.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"

int iv_audio_resample(iv_audio *a, int rate, iv_err *err)
{
    if (rate <= 0) return iv_errf(err, IV_E_INVALID, "resample: bad target rate %d", rate);
    if (a->sample_rate == rate) return 0;
    /* ceil(n * rate / src) exactly, in integers. */
    int64_t want = (a->n * (int64_t)rate + a->sample_rate - 1) / a->sample_rate;
    size_t cap = (size_t)want + 64;
    float *y = calloc(cap, sizeof(float));
    if (!y) return iv_errf(err, IV_E_NOMEM, "out of memory resampling audio");
    soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
    size_t done = 0;
    soxr_error_t e = soxr_oneshot((double)a->sample_rate, (double)rate, 1, a->samples, (size_t)a->n, NULL, y, cap,
                                  &done, &io, &q, NULL);
    if (e) {
        free(y);
        return iv_errf(err, IV_E_INTERNAL, "resampling %d Hz -> %d Hz failed: %s", a->sample_rate, rate, e);
    }
    /* Samples past `done` stay zero: the pad; past `want`: the trim. */
    free(a->samples);
    a->samples = y;
    a->n = want;
    a->sample_rate = rate;
    return 0;
}
