/* src/audio against transformers (tools/fixtures/audio_features.py):
 * decoding + downmix + resampling of WAV/FLAC/OGG/MP3 clips at several rates
 * and channel counts gives load_audio's waveform, and Gemma4's log-mel
 * features match Gemma4AudioFeatureExtractor within 1e-4; every bad input
 * gets a clear error. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"
#include "audio/gemma4_features.h"
#include "base/file.h"
#include "base/json.h"
#include "tensor/safetensors.h"
#include "test.h"

static char *fixture_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/audio/%s", iv_test_fixtures_dir(), name);
    return buf;
}

typedef struct {
    cJSON *cases;
    iv_weights *w;
} fixtures;

static int open_fixtures(fixtures *f)
{
    char p[4096];
    iv_err err = {0};
    memset(f, 0, sizeof *f);
    if (iv_json_load_file(fixture_path(p, sizeof p, "cases.json"), 1 << 20, &f->cases, &err) ||
        iv_weights_open_file(&f->w, fixture_path(p, sizeof p, "expected.safetensors"), &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return -1;
    }
    return 0;
}

static void close_fixtures(fixtures *f)
{
    cJSON_Delete(f->cases);
    iv_weights_close(f->w);
}

static const float *expected(fixtures *f, const char *key, const char *what, int64_t n)
{
    char name[256];
    snprintf(name, sizeof name, "%s.%s", key, what);
    const iv_tensor *t;
    iv_err err = {0};
    if (iv_weights_f32(f->w, name, 0, NULL, &t, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return NULL;
    }
    int64_t count = 1;
    for (int i = 0; i < t->ndim; i++) count *= t->shape[i];
    if (count != n) {
        iv_test_fail(__FILE__, __LINE__, "%s: %lld values, expected %lld", name, (long long)count, (long long)n);
        return NULL;
    }
    return t->data;
}

static double max_abs(const float *a, const float *b, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > m || isnan(d)) m = isnan(d) ? INFINITY : d;
    }
    return m;
}

/* Tolerance on the waveform per clip: none. libsndfile's PCM and MP3
 * (libmpg123) decoding and Debian's libsoxr 0.1.3 give python-soxr's and
 * soundfile's samples bit for bit on every fixture, resampled ones
 * included. */
static double wave_tol(const char *file) { return 0.0; }
static double end_tol(const char *file) { return 1e-4; }

TEST(audio_gemma4_features_match_transformers)
{
    fixtures f;
    if (open_fixtures(&f)) return;
    iv_gemma4_fe_config cfg;
    iv_gemma4_fe_config_default(&cfg);
    int rate = (int)iv_json_int(f.cases, "sampling_rate", 0);
    CHECK_EQ_INT(rate, cfg.sampling_rate);
    const cJSON *c;
    int n_cases = 0;
    cJSON_ArrayForEach(c, iv_json_get(f.cases, "cases"))
    {
        const char *file = iv_json_str(c, "file", ""), *key = iv_json_str(c, "key", "");
        int64_t n = iv_json_int(c, "samples", -1);
        int frames = (int)iv_json_int(c, "frames", -1), valid = (int)iv_json_int(c, "valid_frames", -1);
        int tokens = (int)iv_json_int(c, "soft_tokens", -1);
        const float *want_wave = expected(&f, key, "wave", n);
        const float *want_feat = expected(&f, key, "features", (int64_t)frames * cfg.feature_size);
        if (!want_wave || !want_feat) continue;

        /* Features from the reference's own waveform: the extractor alone. */
        iv_gemma4_features feat;
        iv_err err = {0};
        REQUIRE(iv_gemma4_features_compute(&cfg, want_wave, n, &feat, &err) == 0);
        CHECK_EQ_INT(feat.n_frames, frames);
        CHECK_EQ_INT(feat.n_valid, valid);
        CHECK_EQ_INT(iv_gemma4_audio_num_tokens(feat.n_valid), tokens);
        double d_feat = feat.n_frames == frames ? max_abs(feat.data, want_feat, (int64_t)frames * cfg.feature_size) : 1e9;
        CHECK_MSG(d_feat <= 1e-4, "%s: features max abs %.3g", file, d_feat);
        iv_gemma4_features_free(&feat);

        /* The whole path from the file. */
        char p[4096];
        iv_audio a;
        if (iv_audio_load_file(fixture_path(p, sizeof p, file), rate, NULL, &a, &err)) {
            iv_test_fail(__FILE__, __LINE__, "%s: %s", file, err.msg);
            continue;
        }
        CHECK_MSG(a.n == n, "%s: %lld samples, expected %lld", file, (long long)a.n, (long long)n);
        double d_wave = a.n == n ? max_abs(a.samples, want_wave, n) : 1e9;
        CHECK_MSG(d_wave <= wave_tol(file), "%s: waveform max abs %.3g", file, d_wave);
        double d_end = 1e9;
        if (a.n == n && iv_gemma4_features_compute(&cfg, a.samples, a.n, &feat, &err) == 0) {
            d_end = max_abs(feat.data, want_feat, (int64_t)frames * cfg.feature_size);
            iv_gemma4_features_free(&feat);
        }
        CHECK_MSG(d_end <= end_tol(file), "%s: features from the file, max abs %.3g", file, d_end);
        printf("    %-26s %-4s %dch %5d Hz: wave %.2g, features %.2g (from file %.2g)\n", file, a.format, a.channels,
               a.n == n ? rate : 0, d_wave, d_feat, d_end);
        iv_audio_free(&a);
        n_cases++;
    }
    CHECK_EQ_INT(n_cases, 9);
    close_fixtures(&f);
}

/* Each config switch (preemphasis in both flavours, input scale, per-bin
 * normalisation, FFT overdrive, mel floor, other sizes and bands). */
TEST(audio_gemma4_feature_config_switches)
{
    fixtures f;
    if (open_fixtures(&f)) return;
    const cJSON *first = cJSON_GetArrayItem(iv_json_get(f.cases, "cases"), 0);
    int64_t n = iv_json_int(first, "samples", -1);
    const float *wave = expected(&f, iv_json_str(first, "key", ""), "wave", n);
    const cJSON *v;
    int count = 0;
    cJSON_ArrayForEach(v, iv_json_get(f.cases, "variants"))
    {
        iv_gemma4_fe_config cfg;
        iv_err err = {0};
        REQUIRE(wave);
        REQUIRE(iv_gemma4_fe_config_parse(&cfg, iv_json_get(v, "config"), &err) == 0);
        int frames = (int)iv_json_int(v, "frames", -1);
        const float *want = expected(&f, iv_json_str(v, "key", ""), "features", (int64_t)frames * cfg.feature_size);
        iv_gemma4_features feat;
        REQUIRE(iv_gemma4_features_compute(&cfg, wave, n, &feat, &err) == 0);
        CHECK_EQ_INT(feat.n_frames, frames);
        CHECK_EQ_INT(feat.n_valid, (int)iv_json_int(v, "valid_frames", -1));
        double d = want && feat.n_frames == frames ? max_abs(feat.data, want, (int64_t)frames * cfg.feature_size) : 1e9;
        CHECK_MSG(d <= 1e-4, "%s: max abs %.3g", iv_json_str(v, "key", ""), d);
        printf("    %s: %d frames, max abs %.2g\n", iv_json_str(v, "key", ""), frames, d);
        iv_gemma4_features_free(&feat);
        iv_gemma4_fe_config_free(&cfg);
        count++;
    }
    CHECK_EQ_INT(count, 3);
    close_fixtures(&f);
}

static void parse_fails(const char *json, int code, const char *needle)
{
    cJSON *o = cJSON_Parse(json);
    REQUIRE(o);
    iv_gemma4_fe_config cfg;
    iv_err err = {0};
    int rc = iv_gemma4_fe_config_parse(&cfg, o, &err);
    CHECK_MSG(rc == -1, "%s: parsed", json);
    if (rc == 0) iv_gemma4_fe_config_free(&cfg);
    CHECK_MSG(err.code == code, "%s: code %d (%s)", json, err.code, err.msg);
    CHECK_CONTAINS(err.msg, needle);
    cJSON_Delete(o);
}

TEST(audio_gemma4_feature_config_errors)
{
    parse_fails("{\"dither\": 0.0001}", IV_E_UNSUPPORTED, "dither");
    parse_fails("{\"padding_value\": 1.0}", IV_E_UNSUPPORTED, "padding_value");
    parse_fails("{\"per_bin_mean\": [1, 2]}", IV_E_FORMAT, "per_bin_mean");
    parse_fails("{\"per_bin_stddev\": \"x\"}", IV_E_FORMAT, "per_bin_stddev");
    parse_fails("{\"feature_size\": 0}", IV_E_FORMAT, "feature_size");
    parse_fails("{\"sampling_rate\": \"16000\"}", IV_E_FORMAT, "sampling_rate");
    parse_fails("{\"min_frequency\": 9000}", IV_E_FORMAT, "min_frequency");
    parse_fails("{\"hop_length_ms\": 0}", IV_E_FORMAT, "hop_length_ms");
}

/* A clip shorter than one analysis window gives no frames (the reference
 * returns an empty [0, 128] array), not a crash. */
TEST(audio_gemma4_features_short_clip)
{
    iv_gemma4_fe_config cfg;
    iv_gemma4_fe_config_default(&cfg);
    float x[200] = {0.5f};
    iv_gemma4_features feat;
    iv_err err = {0};
    REQUIRE(iv_gemma4_features_compute(&cfg, x, 100, &feat, &err) == 0);
    CHECK_EQ_INT(feat.n_frames, 0);
    CHECK_EQ_INT(iv_gemma4_audio_num_tokens(feat.n_valid), 0);
    iv_gemma4_features_free(&feat);
    REQUIRE(iv_gemma4_features_compute(&cfg, x, 200, &feat, &err) == 0);
    CHECK_EQ_INT(feat.n_frames, 1); /* 256 padded + 160 - 321 -> one frame, past the audio */
    CHECK_EQ_INT(feat.n_valid, 1);
    iv_gemma4_features_free(&feat);
}

static uint8_t *read_fixture(const char *name, size_t *n)
{
    char p[4096];
    char *data = NULL;
    iv_err err = {0};
    if (iv_file_read_all(fixture_path(p, sizeof p, name), 1 << 20, &data, n, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return NULL;
    }
    return (uint8_t *)data;
}

static void decode_fails(const uint8_t *p, size_t n, const iv_audio_limits *lim, int code, const char *needle,
                         const char *what)
{
    iv_audio a;
    iv_err err = {0};
    int rc = iv_audio_decode(p, n, lim, &a, &err);
    CHECK_MSG(rc == -1, "%s: decoded", what);
    if (rc == 0) iv_audio_free(&a);
    CHECK_MSG(err.code == code, "%s: code %d, expected %d (%s)", what, err.code, code, err.msg);
    CHECK_MSG(strstr(err.msg, needle) != NULL, "%s: \"%s\" lacks \"%s\"", what, err.msg, needle);
    CHECK(a.samples == NULL && a.n == 0);
}

TEST(audio_decode_errors)
{
    decode_fails((const uint8_t *)"", 0, NULL, IV_E_INVALID, "empty", "empty");
    const char *text = "this is not audio at all, just some text that is long enough to sniff";
    decode_fails((const uint8_t *)text, strlen(text), NULL, IV_E_INVALID, "unknown format", "text");
    uint8_t png[64] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    decode_fails(png, sizeof png, NULL, IV_E_INVALID, "unknown format", "png magic");
    size_t n_ogg;
    uint8_t *ogg = read_fixture("speech_24k_mono.ogg", &n_ogg);
    REQUIRE(ogg);
    decode_fails(ogg, n_ogg, NULL, IV_E_UNSUPPORTED, "Ogg audio", "ogg");
    free(ogg);
    size_t n;
    uint8_t *wav = read_fixture("speech_16k_mono.wav", &n);
    REQUIRE(wav);
    iv_audio_limits lim = {.max_seconds = 0.1};
    decode_fails(wav, n, &lim, IV_E_TOO_LARGE, "over the limit of 0.1 s", "too long");
    iv_audio_limits small = {.max_bytes = 1000};
    decode_fails(wav, n, &small, IV_E_TOO_LARGE, "over the limit", "too many bytes");
    /* A header with no data: no samples. */
    decode_fails(wav, 44, NULL, IV_E_INVALID, "no samples", "header only");
    free(wav);
    /* Every cut through each container: an error or a shorter clip, never
     * a crash or a read past the cut (ASan). */
    const char *files[] = {"speech_16k_mono.wav", "speech_44k_stereo.flac", "speech_48k_stereo.mp3",
                           "speech_32k_3ch_24bit.wav", "speech_8k_mono_u8.wav"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        uint8_t *p = read_fixture(files[i], &n);
        REQUIRE(p);
        size_t cuts[] = {1, 3, 4, 8, 12, 20, 36, 43, 45, 100, n / 3, n / 2, n - 1};
        for (size_t c = 0; c < sizeof cuts / sizeof *cuts; c++) {
            if (cuts[c] >= n) continue;
            uint8_t *q = malloc(cuts[c]);
            memcpy(q, p, cuts[c]);
            iv_audio a;
            iv_err err = {0};
            if (iv_audio_decode(q, cuts[c], NULL, &a, &err) == 0) {
                CHECK(a.n > 0 && a.samples);
                iv_audio_free(&a);
            } else {
                CHECK_MSG(err.code == IV_E_INVALID, "%s cut at %zu: code %d (%s)", files[i], cuts[c], err.code,
                          err.msg);
            }
            free(q);
        }
        /* Corrupted bytes in the middle: decoded or refused, never a crash. */
        uint8_t *q = malloc(n);
        memcpy(q, p, n);
        for (size_t k = n / 4; k < n; k += 97) q[k] ^= 0x5a;
        iv_audio a;
        iv_err err = {0};
        if (iv_audio_decode(q, n, NULL, &a, &err) == 0) iv_audio_free(&a);
        free(q);
        free(p);
    }
}

static char *b64(const uint8_t *p, size_t n, const char *prefix)
{
    static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t pl = strlen(prefix);
    char *s = malloc(pl + (n + 2) / 3 * 4 + 1);
    memcpy(s, prefix, pl);
    char *o = s + pl;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        *o++ = al[v >> 18 & 63];
        *o++ = al[v >> 12 & 63];
        *o++ = i + 1 < n ? al[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? al[v & 63] : '=';
    }
    *o = 0;
    return s;
}

static void source_fails(const char *s, int code, const char *needle)
{
    iv_audio a;
    iv_err err = {0};
    int rc = iv_audio_load_source(s, strlen(s), 16000, NULL, &a, &err);
    CHECK_MSG(rc == -1, "%.40s: loaded", s);
    if (rc == 0) iv_audio_free(&a);
    CHECK_MSG(err.code == code, "%.40s: code %d (%s)", s, err.code, err.msg);
    CHECK_MSG(strstr(err.msg, needle) != NULL, "%.40s: \"%s\" lacks \"%s\"", s, err.msg, needle);
}

TEST(audio_sources)
{
    size_t n;
    uint8_t *mp3 = read_fixture("speech_48k_stereo.mp3", &n);
    REQUIRE(mp3);
    iv_audio from_file, a;
    iv_err err = {0};
    char p[4096];
    REQUIRE(iv_audio_load_file(fixture_path(p, sizeof p, "speech_48k_stereo.mp3"), 16000, NULL, &from_file, &err) ==
            0);
    const char *prefixes[] = {"data:audio/mpeg;base64,", "data:audio/wav;base64,", "DATA:Audio/X-Whatever;base64,",
                              "data:application/octet-stream;base64,", ""};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
        char *s = b64(mp3, n, prefixes[i]);
        int rc = iv_audio_load_source(s, strlen(s), 16000, NULL, &a, &err);
        CHECK_MSG(rc == 0, "%s: %s", prefixes[i], err.msg);
        if (rc == 0) {
            CHECK(a.n == from_file.n && !memcmp(a.samples, from_file.samples, (size_t)a.n * sizeof(float)));
            CHECK_STR(a.format, "MP3");
            CHECK_EQ_INT(a.channels, 2);
            iv_audio_free(&a);
        }
        free(s);
    }
    iv_audio_free(&from_file);
    free(mp3);
    source_fails("", IV_E_INVALID, "empty");
    source_fails("   ", IV_E_INVALID, "empty");
    source_fails("data:image/png;base64,AAAA", IV_E_INVALID, "audio/");
    source_fails("data:audio/wav,AAAA", IV_E_INVALID, "base64");
    source_fails("data:audio/wav;base64", IV_E_INVALID, "','");
    source_fails("data:audio/wav;base64,AA*A", IV_E_INVALID, "unexpected character");
    source_fails("https://example.com/a.wav", IV_E_INVALID, "not fetched");
    source_fails("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", IV_E_INVALID, "unknown format");
    iv_audio_limits lim = {.max_bytes = 10};
    CHECK(iv_audio_load_source("AAAAAAAAAAAAAAAAAAAAAAAA", 24, 16000, &lim, &a, &err) == -1);
    CHECK_EQ_INT(err.code, IV_E_TOO_LARGE);
    CHECK(iv_audio_load_file("/nonexistent/a.wav", 16000, NULL, &a, &err) == -1);
}

/* The audio tower fixture (tools/fixtures/synthetic_gemma4_audio.py): its
 * input features are what src/audio computes from the same files, and the
 * soft-token count we derive from the valid mel frames is the number of
 * valid positions the real Gemma4AudioModel returned. */
TEST(audio_gemma4_tower_fixture_inputs)
{
    char dir[4096], p[4200];
    snprintf(dir, sizeof dir, "%s/models/embedding_gemma2_audio", iv_test_fixtures_dir());
    cJSON *cases = NULL;
    iv_weights *w = NULL;
    iv_err err = {0};
    snprintf(p, sizeof p, "%s/audio_cases.json", dir);
    REQUIRE(iv_json_load_file(p, 1 << 20, &cases, &err) == 0);
    snprintf(p, sizeof p, "%s/audio_expected.safetensors", dir);
    if (iv_weights_open_file(&w, p, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
        cJSON_Delete(cases);
        return;
    }
    iv_gemma4_fe_config cfg;
    iv_gemma4_fe_config_default(&cfg);
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, iv_json_get(cases, "clips"))
    {
        iv_audio a;
        REQUIRE(iv_audio_load_file(fixture_path(p, sizeof p, iv_json_str(c, "file", "")), cfg.sampling_rate, NULL,
                                   &a, &err) == 0);
        iv_gemma4_features feat;
        REQUIRE(iv_gemma4_features_compute(&cfg, a.samples, a.n, &feat, &err) == 0);
        int frames = (int)iv_json_int(c, "mel_frames", -1);
        CHECK_EQ_INT(feat.n_valid, frames);
        CHECK_EQ_INT(iv_gemma4_audio_num_tokens(feat.n_valid), (int)iv_json_int(c, "soft_tokens", -1));
        char name[64];
        snprintf(name, sizeof name, "%s.features", iv_json_str(c, "key", ""));
        const iv_tensor *t;
        int64_t shape[2] = {frames, cfg.feature_size};
        if (iv_weights_f32(w, name, 2, shape, &t, &err) == 0 && feat.n_valid == frames) {
            double d = max_abs(feat.data, t->data, (int64_t)frames * cfg.feature_size);
            CHECK_MSG(d <= 1e-4, "%s: max abs %.3g", name, d);
        } else {
            iv_test_fail(__FILE__, __LINE__, "%s: %s", name, err.msg);
        }
        iv_gemma4_features_free(&feat);
        iv_audio_free(&a);
        n++;
    }
    CHECK_EQ_INT(n, 2);
    iv_weights_close(w);
    cJSON_Delete(cases);
}
