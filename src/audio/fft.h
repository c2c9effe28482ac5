/* A small radix-2 FFT in double precision for the mel front ends: the
 * reference (numpy's pocketfft on float32 frames) is matched to ~5e-7 on
 * log-mel features by computing more precisely, not by copying its order
 * of operations (measured in tests/fixtures/audio/README.md). */
#ifndef IV_AUDIO_FFT_H
#define IV_AUDIO_FFT_H

#include "base/err.h"

typedef struct iv_fft {
    int n;          /* a power of two */
    double *cos_t;  /* n/2 twiddles */
    double *sin_t;
    int *bitrev;    /* n */
} iv_fft;

int iv_fft_init(iv_fft *f, int n, iv_err *err);
void iv_fft_free(iv_fft *f);
/* |rfft(x, n)|: x[0..nx) zero-padded to n (nx <= n); mag gets n/2+1
 * magnitudes. work holds 2n doubles. */
void iv_fft_rfft_magnitude(const iv_fft *f, const float *x, int nx, double *work, double *mag);

#endif
