/* Gemma4 unified's audio frames (see gemma4_unified_frames.h). */
#include "audio/gemma4_unified_frames.h"

#include <stdlib.h>
#include <string.h>

#include "base/json.h"

/* save_pretrained's bookkeeping and SequenceFeatureExtractor's batch
 * padding fields: nothing that changes one clip's frames (padding_value
 * pads only between clips of a batch; the clip's own tail is zeros). */
static const char *const ignored[] = {"feature_extractor_type", "processor_class", "padding_side",
                                      "padding_value", "return_attention_mask", "auto_map", NULL};

static int is_ignored(const char *k)
{
    for (int i = 0; ignored[i]; i++)
        if (!strcmp(k, ignored[i])) return 1;
    return 0;
}

static int pos_int(const cJSON *v, const char *key, int max, int *out, iv_err *err)
{
    if (!iv_json_is_integer(v) || v->valuedouble <= 0 || v->valuedouble > max)
        return iv_errf(err, IV_E_FORMAT, "feature extractor: \"%s\" must be a positive integer up to %d", key, max);
    *out = (int)v->valuedouble;
    return 0;
}

int iv_unified_fe_config_parse(iv_unified_fe_config *c, const cJSON *obj, iv_err *err)
{
    c->frame = 640;
    c->sampling_rate = 16000;
    int feature_size = -1;
    const char *type = iv_json_str(obj, "feature_extractor_type", "Gemma4UnifiedAudioFeatureExtractor");
    if (strcmp(type, "Gemma4UnifiedAudioFeatureExtractor"))
        return iv_errf(err, IV_E_UNSUPPORTED, "feature extractor: feature_extractor_type \"%.64s\" is not "
                                              "Gemma4UnifiedAudioFeatureExtractor, which this model's audio takes",
                       type);
    const cJSON *it;
    cJSON_ArrayForEach(it, obj)
    {
        const char *k = it->string;
        if (is_ignored(k)) continue;
        if (!strcmp(k, "audio_samples_per_token")) {
            if (pos_int(it, k, 1 << 20, &c->frame, err)) return -1;
        } else if (!strcmp(k, "feature_size")) {
            if (pos_int(it, k, 1 << 20, &feature_size, err)) return -1;
        } else if (!strcmp(k, "sampling_rate")) {
            if (pos_int(it, k, 1 << 20, &c->sampling_rate, err)) return -1;
        } else {
            return iv_errf(err, IV_E_UNSUPPORTED, "feature extractor: unknown key \"%s\" for "
                                                  "Gemma4UnifiedAudioFeatureExtractor", k);
        }
    }
    if (feature_size >= 0 && feature_size != c->frame)
        return iv_errf(err, IV_E_UNSUPPORTED, "feature extractor: feature_size %d differs from "
                                              "audio_samples_per_token %d",
                       feature_size, c->frame);
    return 0;
}

int iv_unified_frames(const iv_unified_fe_config *c, const float *samples, int64_t n, float **out, int *n_frames,
                      iv_err *err)
{
    *out = NULL;
    *n_frames = 0;
    const int64_t frames = (n + c->frame - 1) / c->frame;
    if (frames > (1 << 24)) return iv_errf(err, IV_E_TOO_LARGE, "audio of %lld samples is too long", (long long)n);
    if (frames == 0) return 0;
    float *f = calloc((size_t)(frames * c->frame), sizeof *f);
    if (!f) return iv_errf(err, IV_E_NOMEM, "out of memory");
    memcpy(f, samples, (size_t)n * sizeof *f);
    *out = f;
    *n_frames = (int)frames;
    return 0;
}
