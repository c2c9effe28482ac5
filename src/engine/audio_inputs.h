/* Audio in requests, between the client's bytes and iv_seq_input.audios
 * (docs/audio.md, "Audio in requests"); the audio twin of
 * engine/image_inputs.h:
 *
 *   source string (data URL / base64) -> decode, downmix, resample
 *   (src/audio/) -> the checkpoint's feature extractor (Gemma4 log-mel, or
 *   Gemma4 unified's raw frames) ->
 *   an iv_audio_input with owned features
 *
 * and, once the chat template has rendered one placeholder token (the
 * audio token) per clip and the text is tokenized, each placeholder
 * replaced by the processor's run <boa> + N x <audio> + <eoa>
 * (engine/media_runs.h expands and truncates images and audio together). */
#ifndef IV_ENGINE_AUDIO_INPUTS_H
#define IV_ENGINE_AUDIO_INPUTS_H

#include <stdint.h>

#include "audio/audio.h"
#include "audio/gemma4_features.h"
#include "audio/gemma4_unified_frames.h"
#include "base/err.h"
#include "models/audio_gemma4.h"

/* How one checkpoint takes audio. model set only when it has an audio tower. */
typedef struct iv_audio_proc {
    const iv_model *model;   /* NULL: the model takes no audio */
    iv_gemma4_fe_config fe;  /* the feature extractor (EmbeddingGemma2Processor's Gemma4AudioFeatureExtractor) */
    /* Gemma4 unified (the model's audio raw_frame set): raw frames instead
     * of log-mel features (Gemma4UnifiedAudioFeatureExtractor); fe then
     * only carries the sampling rate clips are resampled to. */
    int raw;
    iv_unified_fe_config frames;
    iv_audio_limits limits;  /* decoding bounds (bytes, seconds) */
    /* The run a clip becomes: boa_id, N x audio_id, eoa_id; the chat template
     * writes audio_id once per clip as its placeholder. */
    int32_t audio_id, boa_id, eoa_id;
    /* Why audio is refused though the model has a tower (its feature
     * extractor config is missing), "" when it is taken. */
    char refused[512];
} iv_audio_proc;

/* Reads the feature extractor config of a model with an audio tower
 * (processor_config.json's "feature_extractor", else a
 * preprocessor_config.json that is one; absent: audio is refused with
 * p->refused naming the files, the model still loads) and checks it
 * against the tower (feature_size = the tower's mel bins). Limits 0: the
 * defaults. A model without a tower leaves p->model NULL and succeeds. */
int iv_audio_proc_load(iv_audio_proc *p, const char *dir, const iv_model *m, size_t max_bytes, double max_seconds,
                       iv_err *err);
void iv_audio_proc_free(iv_audio_proc *p);

/* The clips of one input, in the order their placeholders come. */
typedef struct iv_audio_set {
    int n, cap;
    iv_audio_input *in;      /* token_offset set by the expansion */
    float **features;        /* owned features of in[i] */
    int64_t *run_start;      /* where clip i's run starts in the expanded ids */
    int64_t *run_len;
} iv_audio_set;

/* Decodes one audio source (a data URL or bare base64) and computes its
 * features. Errors name the clip by index: IV_E_INVALID for bad or too
 * short audio, IV_E_UNSUPPORTED for Ogg, IV_E_TOO_LARGE over a limit. */
int iv_audio_set_add(const iv_audio_proc *p, iv_audio_set *s, const char *src, size_t n, iv_err *err);
void iv_audio_set_free(iv_audio_set *s);

/* Writes clip k's run into out (NULL: only counts); returns its length and
 * sets *start to the offset of its first audio token within the run. */
int64_t iv_audio_token_run(const iv_audio_proc *p, const iv_audio_input *clip, int32_t *out, int64_t *start);

#endif
