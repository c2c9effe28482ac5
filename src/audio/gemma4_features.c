/* Gemma4AudioFeatureExtractor, step by step (the Python in comments):
 *   pad:      truncate to max_length, pad to a multiple of 128 with zeros
 *   scale:    x *= input_scale_factor
 *   semicausal padding: frame_length // 2 zeros in front
 *   frames:   windows of frame_length + 1 samples every hop (an unfold);
 *             without preemphasis the last sample of each is dropped
 *   window:   periodic Hann (np.hanning(frame_length + 1)[:-1]) in float32
 *   spectrum: |rfft(frame, n=fft_length)|, fft_length the next power of 2
 *   mel:      magnitude @ HTK triangular filters (no norm), float64
 *   log:      log(mel + mel_floor), then optional per-bin mean / stddev
 *   mask:     a frame is valid when its window's last sample is real audio;
 *             invalid frames are zeroed. */
#include "audio/gemma4_features.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "audio/fft.h"
#include "base/json.h"

void iv_gemma4_fe_config_default(iv_gemma4_fe_config *c)
{
    memset(c, 0, sizeof *c);
    c->feature_size = 128;
    c->sampling_rate = 16000;
    c->frame_length_ms = 20.0;
    c->hop_length_ms = 10.0;
    c->min_frequency = 0.0;
    c->max_frequency = 8000.0;
    c->preemphasis = 0.0;
    c->preemphasis_htk_flavor = 1;
    c->fft_overdrive = 0;
    c->input_scale_factor = 1.0;
    c->mel_floor = 1e-3;
    c->padding_value = 0.0;
    c->max_length = 480000;
    c->pad_to_multiple_of = 128;
}

void iv_gemma4_fe_config_free(iv_gemma4_fe_config *c)
{
    free(c->per_bin_mean);
    free(c->per_bin_stddev);
    c->per_bin_mean = c->per_bin_stddev = NULL;
}

static int read_bins(const cJSON *obj, const char *key, int n, double **out, iv_err *err)
{
    const cJSON *a = iv_json_get(obj, key);
    if (!a || cJSON_IsNull(a)) return 0;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n)
        return iv_errf(err, IV_E_FORMAT, "feature extractor: %s must be a list of feature_size (%d) numbers", key,
                       n);
    *out = malloc((size_t)n * sizeof(double));
    if (!*out) return iv_errf(err, IV_E_NOMEM, "out of memory");
    int i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, a)
    {
        if (!cJSON_IsNumber(v)) return iv_errf(err, IV_E_FORMAT, "feature extractor: %s[%d] is not a number", key, i);
        (*out)[i++] = v->valuedouble;
    }
    return 0;
}

int iv_gemma4_fe_config_parse(iv_gemma4_fe_config *c, const cJSON *obj, iv_err *err)
{
    iv_gemma4_fe_config_default(c);
    const char *what = "feature extractor";
    int64_t fs, sr;
    double dither;
    if (iv_json_int_chk(obj, "feature_size", c->feature_size, &fs, what, err) ||
        iv_json_int_chk(obj, "sampling_rate", c->sampling_rate, &sr, what, err) ||
        iv_json_num_chk(obj, "frame_length_ms", c->frame_length_ms, &c->frame_length_ms, what, err) ||
        iv_json_num_chk(obj, "hop_length_ms", c->hop_length_ms, &c->hop_length_ms, what, err) ||
        iv_json_num_chk(obj, "min_frequency", c->min_frequency, &c->min_frequency, what, err) ||
        iv_json_num_chk(obj, "max_frequency", c->max_frequency, &c->max_frequency, what, err) ||
        iv_json_num_chk(obj, "preemphasis", c->preemphasis, &c->preemphasis, what, err) ||
        iv_json_num_chk(obj, "input_scale_factor", c->input_scale_factor, &c->input_scale_factor, what, err) ||
        iv_json_num_chk(obj, "mel_floor", c->mel_floor, &c->mel_floor, what, err) ||
        iv_json_num_chk(obj, "padding_value", c->padding_value, &c->padding_value, what, err) ||
        iv_json_num_chk(obj, "dither", 0.0, &dither, what, err))
        return -1;
    c->preemphasis_htk_flavor = iv_json_bool(obj, "preemphasis_htk_flavor", 1);
    c->fft_overdrive = iv_json_bool(obj, "fft_overdrive", 0);
    if (fs < 1 || fs > 4096) return iv_errf(err, IV_E_FORMAT, "feature extractor: feature_size %lld", (long long)fs);
    if (sr < 1000 || sr > 384000)
        return iv_errf(err, IV_E_FORMAT, "feature extractor: sampling_rate %lld", (long long)sr);
    c->feature_size = (int)fs;
    c->sampling_rate = (int)sr;
    if (dither != 0.0)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "feature extractor: dither=%g adds random noise to every clip; only dither=0 is supported",
                       dither);
    if (c->min_frequency < 0 || c->min_frequency > c->max_frequency)
        return iv_errf(err, IV_E_FORMAT, "feature extractor: min_frequency %g / max_frequency %g", c->min_frequency,
                       c->max_frequency);
    double fl = nearbyint(c->sampling_rate * c->frame_length_ms / 1000.0);
    double hl = nearbyint(c->sampling_rate * c->hop_length_ms / 1000.0);
    if (fl < 2 || fl > 65536 || hl < 1 || hl > 65536)
        return iv_errf(err, IV_E_FORMAT, "feature extractor: frame_length_ms %g / hop_length_ms %g",
                       c->frame_length_ms, c->hop_length_ms);
    if (c->padding_value != 0.0)
        return iv_errf(err, IV_E_UNSUPPORTED, "feature extractor: padding_value=%g; only 0 is supported",
                       c->padding_value);
    if (read_bins(obj, "per_bin_mean", c->feature_size, &c->per_bin_mean, err) ||
        read_bins(obj, "per_bin_stddev", c->feature_size, &c->per_bin_stddev, err)) {
        iv_gemma4_fe_config_free(c);
        return -1;
    }
    return 0;
}

/* numpy.linspace(start, stop, num)[i]: i * step + start, the last exactly stop. */
static double linspace_at(double start, double stop, int num, int i)
{
    if (i == num - 1) return stop;
    return (double)i * ((stop - start) / (num - 1)) + start;
}

static double hz_to_mel_htk(double f) { return 2595.0 * log10(1.0 + f / 700.0); }
static double mel_to_hz_htk(double m) { return 700.0 * (pow(10.0, m / 2595.0) - 1.0); }

/* audio_utils.mel_filter_bank(norm=None, mel_scale="htk"), [bins][mels]. */
static double *mel_filters(int n_bins, int n_mels, double fmin, double fmax, int sr)
{
    double *filt = malloc((size_t)n_bins * n_mels * sizeof(double));
    double *ff = malloc((size_t)(n_mels + 2) * sizeof(double));
    if (!filt || !ff) {
        free(filt);
        free(ff);
        return NULL;
    }
    double mmin = hz_to_mel_htk(fmin), mmax = hz_to_mel_htk(fmax);
    for (int i = 0; i < n_mels + 2; i++) ff[i] = mel_to_hz_htk(linspace_at(mmin, mmax, n_mels + 2, i));
    for (int b = 0; b < n_bins; b++) {
        double f = linspace_at(0.0, (double)(sr / 2), n_bins, b);
        for (int m = 0; m < n_mels; m++) {
            double down = -(ff[m] - f) / (ff[m + 1] - ff[m]);
            double up = (ff[m + 2] - f) / (ff[m + 2] - ff[m + 1]);
            double v = down < up ? down : up;
            filt[(size_t)b * n_mels + m] = v > 0.0 ? v : 0.0;
        }
    }
    free(ff);
    return filt;
}

void iv_gemma4_features_free(iv_gemma4_features *f)
{
    free(f->data);
    memset(f, 0, sizeof *f);
}

int iv_gemma4_audio_num_tokens(int n)
{
    for (int i = 0; i < 2; i++) n = n <= 0 ? 0 : (n + 2 * 1 - 3) / 2 + 1;
    return n;
}

int iv_gemma4_features_compute(const iv_gemma4_fe_config *c, const float *samples, int64_t n,
                               iv_gemma4_features *out, iv_err *err)
{
    memset(out, 0, sizeof *out);
    out->feature_size = c->feature_size;
    if (n < 0) return iv_errf(err, IV_E_INVALID, "negative sample count");
    const int frame = (int)nearbyint(c->sampling_rate * c->frame_length_ms / 1000.0);
    const int hop = (int)nearbyint(c->sampling_rate * c->hop_length_ms / 1000.0);
    int fft_n = 1;
    while (fft_n < frame) fft_n <<= 1;
    if (c->fft_overdrive) fft_n *= 2;
    const int n_bins = fft_n / 2 + 1, n_mels = c->feature_size;

    /* pad(): truncation to max_length (rounded up to the multiple), then
     * zero padding to the multiple. */
    int64_t m = c->pad_to_multiple_of > 0 ? c->pad_to_multiple_of : 1;
    int64_t max_len = c->max_length;
    if (max_len > 0 && max_len % m) max_len = (max_len / m + 1) * m;
    if (max_len > 0 && n > max_len) n = max_len;
    int64_t padded = (n + m - 1) / m * m;
    const int pad_left = frame / 2;
    int64_t total = padded + pad_left;
    int64_t nf64 = total - (frame + 1) < 0 ? 0 : (total - (frame + 1)) / hop + 1;
    if (nf64 > (int64_t)1 << 24) return iv_errf(err, IV_E_TOO_LARGE, "audio too long: %lld frames", (long long)nf64);
    int nf = (int)nf64;
    out->n_frames = nf;
    if (nf == 0) return 0;

    float *x = calloc((size_t)total, sizeof(float));
    float *win = malloc((size_t)frame * sizeof(float));
    float *buf = malloc((size_t)frame * sizeof(float));
    double *work = malloc((size_t)fft_n * 2 * sizeof(double));
    double *mag = malloc((size_t)n_bins * sizeof(double));
    double *filt = mel_filters(n_bins, n_mels, c->min_frequency, c->max_frequency, c->sampling_rate);
    out->data = calloc((size_t)nf * n_mels, sizeof(float));
    iv_fft fft = {0};
    int rc = -1;
    if (!x || !win || !buf || !work || !mag || !filt || !out->data) {
        iv_errf(err, IV_E_NOMEM, "out of memory computing audio features");
        goto done;
    }
    if (iv_fft_init(&fft, fft_n, err)) goto done;
    /* The waveform as the extractor sees it: float32, scaled (float32 times
     * a Python float stays float32). */
    const float scale = (float)c->input_scale_factor;
    for (int64_t i = 0; i < n; i++) x[pad_left + i] = c->input_scale_factor != 1.0 ? samples[i] * scale : samples[i];
    /* np.hanning(frame + 1)[:-1] with numpy's own formula (0.5 + 0.5 cos(pi k
     * / (M - 1)), k = 1 - M, 3 - M, ...), so the float32 cast rounds alike. */
    for (int i = 0; i < frame; i++) {
        double k = (double)(1 - (frame + 1) + 2 * i);
        win[i] = (float)(0.5 + 0.5 * cos(M_PI * k / frame));
    }
    const float p = (float)c->preemphasis;
    int n_valid = 0;
    for (int t = 0; t < nf; t++) {
        const float *f = x + (int64_t)t * hop; /* frame + 1 samples */
        if (c->preemphasis > 0.0) {
            if (c->preemphasis_htk_flavor) {
                buf[0] = f[0] * (float)(1.0 - c->preemphasis);
                for (int i = 1; i < frame; i++) buf[i] = f[i] - p * f[i - 1];
            } else {
                for (int i = 0; i < frame; i++) buf[i] = f[i + 1] - p * f[i];
            }
        } else {
            memcpy(buf, f, (size_t)frame * sizeof(float));
        }
        for (int i = 0; i < frame; i++) buf[i] *= win[i];
        /* The last sample of the window must be real audio. */
        int64_t end = (int64_t)t * hop + frame;
        if (!(end >= pad_left && end < pad_left + n)) continue; /* stays zero */
        n_valid++;
        iv_fft_rfft_magnitude(&fft, buf, frame, work, mag);
        float *o = out->data + (size_t)t * n_mels;
        for (int k = 0; k < n_mels; k++) {
            double s = 0.0;
            for (int b = 0; b < n_bins; b++) s += mag[b] * filt[(size_t)b * n_mels + k];
            double v = log(s + c->mel_floor);
            if (c->per_bin_mean) v -= c->per_bin_mean[k];
            if (c->per_bin_stddev) v /= c->per_bin_stddev[k];
            o[k] = (float)v;
        }
    }
    out->n_valid = n_valid;
    rc = 0;
done:
    iv_fft_free(&fft);
    free(x);
    free(win);
    free(buf);
    free(work);
    free(mag);
    free(filt);
    if (rc) iv_gemma4_features_free(out);
    return rc;
}
