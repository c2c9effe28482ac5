#include "audio/fft.h"

#include <math.h>
#include <stdlib.h>

int iv_fft_init(iv_fft *f, int n, iv_err *err)
{
    f->n = n;
    f->cos_t = f->sin_t = NULL;
    f->bitrev = NULL;
    if (n < 2 || (n & (n - 1))) return iv_errf(err, IV_E_INVALID, "FFT size %d is not a power of two", n);
    f->cos_t = malloc((size_t)(n / 2) * sizeof(double));
    f->sin_t = malloc((size_t)(n / 2) * sizeof(double));
    f->bitrev = malloc((size_t)n * sizeof(int));
    if (!f->cos_t || !f->sin_t || !f->bitrev) {
        iv_fft_free(f);
        return iv_errf(err, IV_E_NOMEM, "out of memory for an FFT plan");
    }
    for (int k = 0; k < n / 2; k++) {
        double a = -2.0 * M_PI * k / n;
        f->cos_t[k] = cos(a);
        f->sin_t[k] = sin(a);
    }
    int bits = 0;
    while ((1 << bits) < n) bits++;
    for (int i = 0; i < n; i++) {
        int r = 0;
        for (int b = 0; b < bits; b++)
            if (i & (1 << b)) r |= 1 << (bits - 1 - b);
        f->bitrev[i] = r;
    }
    return 0;
}

void iv_fft_free(iv_fft *f)
{
    free(f->cos_t);
    free(f->sin_t);
    free(f->bitrev);
    f->cos_t = f->sin_t = NULL;
    f->bitrev = NULL;
}

void iv_fft_rfft_magnitude(const iv_fft *f, const float *x, int nx, double *work, double *mag)
{
    int n = f->n;
    double *re = work, *im = work + n;
    for (int i = 0; i < n; i++) {
        int j = f->bitrev[i];
        re[j] = i < nx ? (double)x[i] : 0.0;
        im[j] = 0.0;
    }
    for (int len = 2; len <= n; len <<= 1) {
        int half = len / 2, step = n / len;
        for (int s = 0; s < n; s += len)
            for (int k = 0; k < half; k++) {
                double wr = f->cos_t[k * step], wi = f->sin_t[k * step];
                int a = s + k, b = a + half;
                double tr = re[b] * wr - im[b] * wi, ti = re[b] * wi + im[b] * wr;
                re[b] = re[a] - tr;
                im[b] = im[a] - ti;
                re[a] += tr;
                im[a] += ti;
            }
    }
    for (int k = 0; k <= n / 2; k++) mag[k] = sqrt(re[k] * re[k] + im[k] * im[k]);
}
