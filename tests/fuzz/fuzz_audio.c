/* libFuzzer target for audio decoding and Gemma4 features (`make fuzz`):
 *   build/fuzz/fuzz_audio -max_total_time=60 tests/fuzz/seeds/audio
 * The input's bytes are an audio file (WAV, FLAC, MP3, anything libsndfile
 * sniffs), or, when they start with "data:" or "{", a data URL or a feature
 * extractor config. A decoded clip (at most 2 s) is resampled to 16 kHz and
 * goes through the feature extractor. Anything must decode or fail with an
 * error, never crash, leak or read past the input. */
#include <cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"
#include "audio/gemma4_features.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    iv_err err;
    iv_gemma4_fe_config cfg;
    if (size >= 1 && data[0] == '{') {
        cJSON *o = cJSON_ParseWithLength((const char *)data, size);
        if (o && iv_gemma4_fe_config_parse(&cfg, o, &err) == 0) {
            /* A short clip through whatever config parsed (bounded sizes). */
            float x[4000];
            for (int i = 0; i < 4000; i++) x[i] = (float)((i * 7919) % 201 - 100) / 100.0f;
            iv_gemma4_features f;
            if (cfg.feature_size <= 256 && iv_gemma4_features_compute(&cfg, x, 4000, &f, &err) == 0)
                iv_gemma4_features_free(&f);
            iv_gemma4_fe_config_free(&cfg);
        }
        cJSON_Delete(o);
        return 0;
    }
    iv_audio_limits lim = {1 << 22, 2.0};
    iv_audio a;
    int rc = size >= 5 && !memcmp(data, "data:", 5)
                 ? iv_audio_load_source((const char *)data, size, 16000, &lim, &a, &err)
                 : iv_audio_decode(data, size, &lim, &a, &err);
    if (rc) return 0;
    if (iv_audio_resample(&a, 16000, &err) == 0) {
        iv_gemma4_fe_config_default(&cfg);
        iv_gemma4_features f;
        if (iv_gemma4_features_compute(&cfg, a.samples, a.n, &f, &err) == 0) iv_gemma4_features_free(&f);
    }
    iv_audio_free(&a);
    return 0;
}
