/* Gemma4 unified's audio "features" (transformers
 * models/gemma4_unified/feature_extraction_gemma4_unified.py,
 * Gemma4UnifiedAudioFeatureExtractor): no spectrogram. The mono waveform at
 * the extractor's rate is zero-padded to a multiple of
 * audio_samples_per_token samples and cut into frames of that many
 * samples; each frame is one audio soft token (ceil(n / frame) of them,
 * Gemma4UnifiedProcessor._compute_audio_num_tokens). */
#ifndef IV_AUDIO_GEMMA4_UNIFIED_FRAMES_H
#define IV_AUDIO_GEMMA4_UNIFIED_FRAMES_H

#include <cJSON.h>
#include <stdint.h>

#include "base/err.h"

typedef struct iv_unified_fe_config {
    int frame;         /* audio_samples_per_token, 640 (= feature_size) */
    int sampling_rate; /* 16000 */
} iv_unified_fe_config;

/* The class defaults, then the JSON object's fields (a
 * preprocessor_config.json, or processor_config.json's
 * "feature_extractor"); a type other than Gemma4UnifiedAudioFeatureExtractor,
 * feature_size unequal to audio_samples_per_token, or an unknown field is
 * an error naming it. */
int iv_unified_fe_config_parse(iv_unified_fe_config *c, const cJSON *obj, iv_err *err);

/* The frames of one clip: *out [*n_frames, c->frame] (malloc'd, the last
 * frame zero-padded); n 0 gives no frames. */
int iv_unified_frames(const iv_unified_fe_config *c, const float *samples, int64_t n, float **out, int *n_frames,
                      iv_err *err);

#endif
