#include "engine/audio_inputs.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/json.h"

/* The feature extractor's JSON: processor_config.json's "feature_extractor"
 * (how EmbeddingGemma2 / Gemma4 processors save it), else a
 * preprocessor_config.json that names a feature extractor. *root owns
 * *obj; both NULL when neither exists. */
static int find_fe_config(const char *dir, cJSON **root, const cJSON **obj, iv_err *err)
{
    char path[4096];
    *root = NULL;
    *obj = NULL;
    iv_path_join(path, sizeof path, dir, "processor_config.json");
    if (iv_file_exists(path)) {
        if (iv_json_load_file(path, 16 << 20, root, err)) return -1;
        *obj = iv_json_get(*root, "feature_extractor");
        if (cJSON_IsObject(*obj)) return 0;
        cJSON_Delete(*root);
        *root = NULL;
        *obj = NULL;
    }
    iv_path_join(path, sizeof path, dir, "preprocessor_config.json");
    if (iv_file_exists(path)) {
        if (iv_json_load_file(path, 16 << 20, root, err)) return -1;
        if (iv_json_get(*root, "feature_extractor_type")) {
            *obj = *root;
            return 0;
        }
        cJSON_Delete(*root);
        *root = NULL;
    }
    return 0;
}

/* What the config may say beyond the extractor's fields: its type must be
 * Gemma4's, and the sample counts save_pretrained writes must be the ones
 * the millisecond fields give (else the checkpoint is ambiguous). */
static int check_fe(const iv_audio_proc *p, const cJSON *obj, const iv_gemma4_audio *a, iv_err *err)
{
    const char *type = iv_json_str(obj, "feature_extractor_type", "Gemma4AudioFeatureExtractor");
    if (strcmp(type, "Gemma4AudioFeatureExtractor") && strcmp(type, "EmbeddingGemma2AudioFeatureExtractor"))
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "feature extractor: feature_extractor_type \"%.64s\" is not Gemma4AudioFeatureExtractor, the "
                       "one this audio tower's features are implemented for",
                       type);
    const struct {
        const char *key;
        double ms;
    } counts[] = {{"frame_length", p->fe.frame_length_ms}, {"hop_length", p->fe.hop_length_ms}};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        const cJSON *v = iv_json_get(obj, counts[i].key);
        const double want = nearbyint(p->fe.sampling_rate * counts[i].ms / 1000.0);
        if (v && (!cJSON_IsNumber(v) || v->valuedouble != want))
            return iv_errf(err, IV_E_UNSUPPORTED,
                           "feature extractor: %s is %g samples but %s_ms gives %g at %d Hz: the config is ambiguous",
                           counts[i].key, cJSON_IsNumber(v) ? v->valuedouble : NAN, counts[i].key, want,
                           p->fe.sampling_rate);
    }
    if (p->fe.feature_size != a->n_mels)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "feature extractor: feature_size %d disagrees with the audio tower's %d mel bins "
                       "(config.json audio_config)",
                       p->fe.feature_size, a->n_mels);
    return 0;
}

int iv_audio_proc_load(iv_audio_proc *p, const char *dir, const iv_model *m, size_t max_bytes, double max_seconds,
                       iv_err *err)
{
    memset(p, 0, sizeof *p);
    if (!m->audio) return 0;
    p->model = m;
    p->limits.max_bytes = max_bytes ? max_bytes : IV_AUDIO_DEFAULT_MAX_BYTES;
    p->limits.max_seconds = max_seconds > 0 ? max_seconds : IV_AUDIO_DEFAULT_MAX_SECONDS;
    /* EmbeddingGemma2Config's ids (its defaults when absent). */
    p->audio_id = m->audio->audio_token_id;
    p->boa_id = (int32_t)iv_json_int(m->cfg.root, "boa_token_id", 256000);
    p->eoa_id = (int32_t)iv_json_int(m->cfg.root, "eoa_token_index", iv_json_int(m->cfg.root, "eoa_token_id", 258883));
    cJSON *root;
    const cJSON *obj;
    if (find_fe_config(dir, &root, &obj, err)) return iv_err_prefix(err, "feature extractor: ");
    if (!obj) {
        snprintf(p->refused, sizeof p->refused,
                 "this checkpoint has an audio tower but no feature extractor config (processor_config.json "
                 "\"feature_extractor\" or preprocessor_config.json), so it cannot take audio");
        iv_gemma4_fe_config_default(&p->fe);
        return 0;
    }
    int rc;
    if (m->audio->raw_frame) {
        p->raw = 1;
        iv_gemma4_fe_config_default(&p->fe);
        rc = iv_unified_fe_config_parse(&p->frames, obj, err);
        p->fe.sampling_rate = p->frames.sampling_rate;
        if (!rc && p->frames.frame != m->audio->raw_frame)
            rc = iv_errf(err, IV_E_UNSUPPORTED, "feature extractor: audio_samples_per_token %d disagrees with the "
                                                "model's audio_embed_dim %d (config.json audio_config)",
                         p->frames.frame, m->audio->raw_frame);
    } else {
        rc = iv_gemma4_fe_config_parse(&p->fe, obj, err);
        if (!rc) rc = check_fe(p, obj, m->audio, err);
    }
    cJSON_Delete(root);
    if (rc) iv_gemma4_fe_config_free(&p->fe);
    return rc;
}

void iv_audio_proc_free(iv_audio_proc *p)
{
    iv_gemma4_fe_config_free(&p->fe);
    memset(p, 0, sizeof *p);
}

static int grow(iv_audio_set *s)
{
    if (s->n < s->cap) return 0;
    const int cap = s->cap ? 2 * s->cap : 4;
    iv_audio_input *in = realloc(s->in, (size_t)cap * sizeof *in);
    if (in) s->in = in;
    float **f = realloc(s->features, (size_t)cap * sizeof *f);
    if (f) s->features = f;
    int64_t *rs = realloc(s->run_start, (size_t)cap * sizeof *rs);
    if (rs) s->run_start = rs;
    int64_t *rl = realloc(s->run_len, (size_t)cap * sizeof *rl);
    if (rl) s->run_len = rl;
    if (!in || !f || !rs || !rl) return -1;
    s->cap = cap;
    return 0;
}

int64_t iv_audio_token_run(const iv_audio_proc *p, const iv_audio_input *clip, int32_t *out, int64_t *start)
{
    const int n = iv_gemma4_audio_tokens(p->model->audio, clip->n_frames);
    *start = 1;
    if (out) {
        out[0] = p->boa_id;
        for (int i = 0; i < n; i++) out[1 + i] = p->audio_id;
        out[1 + n] = p->eoa_id;
    }
    return (int64_t)n + 2;
}

/* Gemma4 unified: the decoded clip's raw frames, one soft token each. */
static int add_frames(const iv_audio_proc *p, iv_audio_set *s, iv_audio *a, iv_err *err)
{
    const int k = s->n;
    float *frames;
    int n_frames;
    const int64_t samples = a->n;
    const int rc = iv_unified_frames(&p->frames, a->samples, a->n, &frames, &n_frames, err);
    iv_audio_free(a);
    if (rc) return iv_err_prefix(err, "audio %d: ", k);
    if (n_frames <= 0)
        return iv_errf(err, IV_E_INVALID, "audio %d is empty (%lld samples), so no audio token", k,
                       (long long)samples);
    s->features[k] = frames;
    s->in[k] = (iv_audio_input){.features = frames, .n_frames = n_frames, .n_mels = p->frames.frame};
    int64_t start;
    s->run_len[k] = iv_audio_token_run(p, &s->in[k], NULL, &start);
    s->run_start[k] = 0;
    s->n++;
    return 0;
}

int iv_audio_set_add(const iv_audio_proc *p, iv_audio_set *s, const char *src, size_t n, iv_err *err)
{
    const int k = s->n;
    if (!p->model) return iv_errf(err, IV_E_INVALID, "this model takes no audio (it has no audio tower)");
    if (p->refused[0]) return iv_errf(err, IV_E_INVALID, "%s", p->refused);
    if (grow(s)) return iv_errf(err, IV_E_NOMEM, "out of memory");
    iv_audio a;
    if (iv_audio_load_source(src, n, p->fe.sampling_rate, &p->limits, &a, err))
        return iv_err_prefix(err, "audio %d: ", k);
    if (p->raw) return add_frames(p, s, &a, err);
    iv_gemma4_features f;
    const int rc = iv_gemma4_features_compute(&p->fe, a.samples, a.n, &f, err);
    const int64_t samples = a.n;
    iv_audio_free(&a);
    if (rc) return iv_err_prefix(err, "audio %d: ", k);
    /* The processor would insert <boa><eoa> and no audio token, and the
     * model then has nothing to put there: refuse the clip by name. */
    if (iv_gemma4_audio_num_tokens(f.n_valid) <= 0) {
        iv_gemma4_features_free(&f);
        return iv_errf(err, IV_E_INVALID,
                       "audio %d is too short: %lld samples at %d Hz fill no whole mel frame, so no audio token", k,
                       (long long)samples, p->fe.sampling_rate);
    }
    s->features[k] = f.data;
    s->in[k] = (iv_audio_input){.features = f.data, .n_frames = f.n_valid, .n_mels = f.feature_size};
    int64_t start;
    s->run_len[k] = iv_audio_token_run(p, &s->in[k], NULL, &start);
    s->run_start[k] = 0;
    s->n++;
    return 0;
}

void iv_audio_set_free(iv_audio_set *s)
{
    for (int i = 0; i < s->n; i++) free(s->features[i]);
    free(s->in);
    free(s->features);
    free(s->run_start);
    free(s->run_len);
    memset(s, 0, sizeof *s);
}
