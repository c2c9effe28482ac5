/* Gemma4's audio feature extractor (transformers
 * models/gemma4/feature_extraction_gemma4.py, Gemma4AudioFeatureExtractor),
 * which EmbeddingGemma2 reuses: log-mel frames of a mono waveform at the
 * extractor's rate. See docs/audio.md for each step. */
#ifndef IV_AUDIO_GEMMA4_FEATURES_H
#define IV_AUDIO_GEMMA4_FEATURES_H

#include <cJSON.h>
#include <stdint.h>

#include "base/err.h"

typedef struct iv_gemma4_fe_config {
    int feature_size;        /* mel bins, 128 */
    int sampling_rate;       /* 16000 */
    double frame_length_ms;  /* 20 */
    double hop_length_ms;    /* 10 */
    double min_frequency, max_frequency; /* 0, 8000 */
    double preemphasis;      /* 0 */
    int preemphasis_htk_flavor; /* 1 */
    int fft_overdrive;       /* 0 */
    double input_scale_factor; /* 1 */
    double mel_floor;        /* 1e-3 */
    double padding_value;    /* 0 */
    double *per_bin_mean;    /* feature_size values or NULL (owned) */
    double *per_bin_stddev;
    /* __call__'s defaults: truncate to max_length samples, pad the batch
     * to a multiple of pad_to_multiple_of samples. */
    int64_t max_length;      /* 480000 */
    int pad_to_multiple_of;  /* 128 */
} iv_gemma4_fe_config;

void iv_gemma4_fe_config_default(iv_gemma4_fe_config *c);
/* Reads the feature extractor's fields from its JSON object (a
 * preprocessor_config.json, or processor_config.json's "feature_extractor").
 * A field we do not implement (dither > 0: random noise) is
 * IV_E_UNSUPPORTED naming it. */
int iv_gemma4_fe_config_parse(iv_gemma4_fe_config *c, const cJSON *obj, iv_err *err);
void iv_gemma4_fe_config_free(iv_gemma4_fe_config *c);

/* The extractor's output for one clip: n_frames x feature_size floats
 * (row-major); frames past n_valid read padding and are zero, as the
 * extractor's mask leaves them. */
typedef struct iv_gemma4_features {
    float *data;
    int n_frames, n_valid, feature_size;
} iv_gemma4_features;

/* samples: mono at c->sampling_rate (the caller resamples). A clip too
 * short to fill one frame gives n_frames 0. */
int iv_gemma4_features_compute(const iv_gemma4_fe_config *c, const float *samples, int64_t n,
                               iv_gemma4_features *out, iv_err *err);
void iv_gemma4_features_free(iv_gemma4_features *f);

/* Audio soft tokens a clip of n_valid valid mel frames becomes: the two
 * stride-2 convolutions (kernel 3, padding 1) of the audio tower's
 * subsampler, as EmbeddingGemma2Processor.compute_sscp counts them. */
int iv_gemma4_audio_num_tokens(int n_valid_frames);

#endif
