/* Audio through the real server (docs/audio.md, "Audio in requests"): the
 * embedding_gemma2_media checkpoint (tools/fixtures/synthetic_eg2_media.py:
 * EmbeddingGemma2 with image and audio towers) answers conversations with
 * OpenAI input_audio parts, audio_url data URLs and image_url parts, one
 * request holding every case so text, images and audio run in one packed
 * batch, with the embeddings transformers computed for each case alone;
 * bare audio inputs (/v1/embeddings items, /embed, Infinity's modality
 * "audio") equal the one-clip case; bad audio gets a 4xx naming the problem
 * and the server keeps serving; a text-only model refuses audio. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/file.h"
#include "base/json.h"
#include "base/strbuf.h"
#include "golden/golden_util.h"
#include "server/codec.h"
#include "server_harness.h"
#include "tensor/safetensors.h"
#include "test.h"

#define MIN_COS 0.99999
#define MAX_ABS 1e-4

/* base64 of a fixture file, with prefix ("" for bare base64). */
static char *file_b64(const char *sub, const char *name, const char *prefix)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/%s", iv_test_fixtures_dir(), sub, name);
    char *bytes;
    size_t n;
    iv_err err = {0};
    if (iv_file_read_all(path, 1 << 24, &bytes, &n, &err)) return NULL;
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_printf(&b, "%s", prefix);
    iv_codec_base64(&b, (const unsigned char *)bytes, n);
    free(bytes);
    return b.data;
}

static const char *ext(const char *name) { return strrchr(name, '.') + 1; }

/* A case's messages with the file names replaced by what a client sends:
 * images (files of images_dir under tests/fixtures) as image_url data URLs;
 * WAV clips as input_audio (bare base64 and a format), other clips as
 * audio_url data URLs. */
static cJSON *request_messages(const cJSON *messages, const char *images_dir)
{
    cJSON *out = cJSON_Duplicate(messages, 1), *m, *part;
    cJSON_ArrayForEach(m, out)
    {
        cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!cJSON_IsArray(content)) continue;
        cJSON_ArrayForEach(part, content)
        {
            const char *type = iv_json_str(part, "type", "");
            cJSON *repl = NULL;
            if (!strcmp(type, "image")) {
                char pre[64];
                snprintf(pre, sizeof pre, "data:image/%s;base64,",
                         !strcmp(ext(iv_json_str(part, "image", "")), "jpg") ? "jpeg" : "png");
                char *url = file_b64(images_dir, iv_json_str(part, "image", ""), pre);
                repl = cJSON_CreateObject();
                cJSON_AddStringToObject(repl, "type", "image_url");
                cJSON_AddStringToObject(cJSON_AddObjectToObject(repl, "image_url"), "url", url);
                free(url);
            } else if (!strcmp(type, "audio")) {
                const char *name = iv_json_str(part, "audio", "");
                repl = cJSON_CreateObject();
                if (!strcmp(ext(name), "wav")) {
                    char *data = file_b64("audio", name, "");
                    cJSON_AddStringToObject(repl, "type", "input_audio");
                    cJSON *ia = cJSON_AddObjectToObject(repl, "input_audio");
                    cJSON_AddStringToObject(ia, "data", data);
                    cJSON_AddStringToObject(ia, "format", "wav");
                    free(data);
                } else {
                    char pre[64];
                    snprintf(pre, sizeof pre, "data:audio/%s;base64,", !strcmp(ext(name), "mp3") ? "mpeg" : ext(name));
                    char *url = file_b64("audio", name, pre);
                    cJSON_AddStringToObject(repl, "type", "audio_url");
                    cJSON_AddStringToObject(cJSON_AddObjectToObject(repl, "audio_url"), "url", url);
                    free(url);
                }
            }
            if (repl) {
                cJSON_ReplaceItemViaPointer(content, part, repl);
                part = repl;
            }
        }
    }
    return out;
}

static void check_embedding(const char *what, const cJSON *emb, iv_weights *w, const char *key)
{
    const iv_tensor *t;
    iv_err err = {0};
    REQUIRE(iv_weights_f32(w, key, 0, NULL, &t, &err) == 0);
    int n;
    float *got = json_floats(emb, &n);
    REQUIRE(got);
    CHECK_EQ_INT(n, (int)t->shape[0]);
    if (n == t->shape[0]) CHECK_EQ_INT(golden_compare(what, got, t->data, 1, n, MIN_COS, MAX_ABS), 0);
    free(got);
}

static void expect(const srv *s, const char *path, const char *body, long status, const char *phrase)
{
    http_resp r;
    REQUIRE(http_post(s, path, body, &r) == 0);
    if (r.status != status || !r.body || !strstr(r.body, phrase))
        iv_test_fail(__FILE__, __LINE__, "%s %.90s: got %ld %.200s, want %ld with \"%s\"", path, body, r.status,
                     r.body ? r.body : "", status, phrase);
    http_resp_free(&r);
}

static const cJSON *data_embedding(const cJSON *json, int i)
{
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(json, "data"), i),
                                            "embedding");
}

/* Every case of dir's media_cases.json in one request (one packed batch of
 * text, images and audio), then each alone (a single sequence with every
 * modality: "mixed"), against media_expected.safetensors. */
static void check_media_cases(const srv *s, const char *dir, iv_weights *want)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/media_cases.json", dir);
    cJSON *doc = NULL;
    iv_err err = {0};
    REQUIRE(iv_json_load_file(path, 1 << 20, &doc, &err) == 0);
    const char *images_dir = iv_json_str(doc, "images_dir", "images");
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(doc, "cases"), *c;
    cJSON *req = cJSON_CreateObject(), *input = cJSON_AddArrayToObject(req, "input");
    cJSON_ArrayForEach(c, cases)
        cJSON_AddItemToArray(input, request_messages(cJSON_GetObjectItemCaseSensitive(c, "messages"), images_dir));
    char *body = cJSON_PrintUnformatted(req);
    http_resp r;
    REQUIRE(http_post(s, "/v1/embeddings", body, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    int i = 0, total = 0;
    cJSON_ArrayForEach(c, cases)
    {
        char what[96];
        snprintf(what, sizeof what, "batch: %s", iv_json_str(c, "name", ""));
        check_embedding(what, data_embedding(r.json, i), want, iv_json_str(c, "name", ""));
        total += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(c, "input_ids"));
        i++;
    }
    /* The expanded runs count as prompt tokens: the processor's ids lengths. */
    CHECK_EQ_INT(jint(cJSON_GetObjectItemCaseSensitive(r.json, "usage"), "prompt_tokens"), total);
    http_resp_free(&r);
    free(body);
    cJSON_Delete(req);
    cJSON_ArrayForEach(c, cases)
    {
        req = cJSON_CreateObject();
        cJSON_AddItemToObject(req, "input",
                              request_messages(cJSON_GetObjectItemCaseSensitive(c, "messages"), images_dir));
        body = cJSON_PrintUnformatted(req);
        REQUIRE(http_post(s, "/v1/embeddings", body, &r) == 0);
        CHECK_MSG(r.status == 200, "%s: %ld %.300s", iv_json_str(c, "name", ""), r.status, r.body ? r.body : "");
        check_embedding(iv_json_str(c, "name", ""), data_embedding(r.json, 0), want, iv_json_str(c, "name", ""));
        http_resp_free(&r);
        free(body);
        cJSON_Delete(req);
    }
    cJSON_Delete(doc);
}

/* dir's media_expected.safetensors, or NULL after a test failure. */
static iv_weights *media_expected(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/media_expected.safetensors", dir);
    iv_weights *w = NULL;
    iv_err err = {0};
    if (iv_weights_open_file(&w, path, &err)) iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
    return w;
}

TEST(srv_audio_media_batch)
{
    const char *dir = srv_fixture("embedding_gemma2_media");
    if (!dir) return;
    iv_weights *want = media_expected(dir);
    REQUIRE(want);
    srv s;
    const char *args[] = {"--model-id", dir, NULL};
    REQUIRE(srv_start(&s, args) == 0);
    check_media_cases(&s, dir, want);
    http_resp r;
    /* Bare clips: the "audio_flac" case is one user message with the clip. */
    char *flac = file_b64("audio", "speech_44k_stereo.flac", "data:audio/flac;base64,");
    iv_strbuf q;
    iv_sb_init(&q);
    iv_sb_printf(&q, "{\"input\":[{\"type\":\"audio_url\",\"audio_url\":{\"url\":\"%s\"}},{\"audio\":\"%s\"}]}", flac,
                 flac);
    REQUIRE(http_post(&s, "/v1/embeddings", q.data, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    check_embedding("/v1/embeddings audio_url item", data_embedding(r.json, 0), want, "audio_flac");
    check_embedding("/v1/embeddings audio item", data_embedding(r.json, 1), want, "audio_flac");
    http_resp_free(&r);
    iv_sb_free(&q);
    iv_sb_init(&q);
    iv_sb_printf(&q, "{\"inputs\":[{\"audio\":\"%s\"}]}", flac);
    REQUIRE(http_post(&s, "/embed", q.data, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    check_embedding("/embed audio item", cJSON_GetArrayItem(r.json, 0), want, "audio_flac");
    http_resp_free(&r);
    iv_sb_free(&q);
    iv_sb_init(&q);
    iv_sb_printf(&q, "{\"modality\":\"audio\",\"input\":[\"%s\"]}", flac);
    REQUIRE(http_post(&s, "/embeddings", q.data, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    check_embedding("/embeddings modality audio", data_embedding(r.json, 0), want, "audio_flac");
    http_resp_free(&r);
    iv_sb_free(&q);
    /* An OpenAI input_audio item (no role) as a bare input. */
    char *tone = file_b64("audio", "tone_440_16k.wav", "");
    iv_sb_init(&q);
    iv_sb_printf(&q, "{\"input\":[{\"type\":\"input_audio\",\"input_audio\":{\"data\":\"%s\",\"format\":\"wav\"}}]}",
                 tone);
    REQUIRE(http_post(&s, "/v1/embeddings", q.data, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    http_resp_free(&r);
    iv_sb_free(&q);

    /* Bad audio: a 4xx naming the problem; the server serves on. */
    char *ogg = file_b64("audio", "speech_24k_mono.ogg", "data:audio/ogg;base64,");
    iv_sb_init(&q);
    iv_sb_printf(&q, "{\"modality\":\"audio\",\"input\":[\"%s\"]}", ogg);
    expect(&s, "/embeddings", q.data, 422, "Ogg");
    iv_sb_free(&q);
    iv_sb_init(&q);
    iv_sb_printf(&q, "{\"input\":[{\"type\":\"input_audio\",\"input_audio\":{\"data\":\"%s\",\"format\":\"ogg\"}}]}",
                 tone);
    expect(&s, "/v1/embeddings", q.data, 422, "Ogg (Vorbis, Opus) audio is refused");
    iv_sb_free(&q);
    iv_sb_init(&q);
    iv_sb_printf(&q, "{\"input\":[{\"type\":\"input_audio\",\"input_audio\":{\"data\":\"%s\",\"format\":\"aac\"}}]}",
                 tone);
    expect(&s, "/v1/embeddings", q.data, 422, "is not one of wav, mp3, flac");
    iv_sb_free(&q);
    expect(&s, "/embeddings", "{\"modality\":\"audio\",\"input\":[\"UklGRiQAAABXQVZFZm10IBAAAAABAAEA\"]}", 422,
           "audio 0");
    expect(&s, "/embeddings", "{\"modality\":\"audio\",\"input\":[\"aGVsbG8gd29ybGQsIHRoaXMgaXMgbm90IGF1ZGlv\"]}", 422,
           "audio 0");
    expect(&s, "/embeddings", "{\"modality\":\"audio\",\"input\":[\"\"]}", 422, "audio is empty");
    expect(&s, "/v1/embeddings", "{\"input\":[{\"audio\":\"data:image/png;base64,iVBORw0KGgo=\"}]}", 422,
           "media type must be audio/");
    expect(&s, "/v1/embeddings", "{\"input\":[{\"audio\":\"https://example.com/a.wav\"}]}", 422,
           "audio URLs are not fetched");
    expect(&s, "/v1/embeddings",
           "{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\",\"input_audio\":{}}]}]}", 422,
           "input_audio.data");
    /* A clip shorter than one mel frame (10 samples of 16 kHz WAV). */
    static const unsigned char tiny_wav[] = {
        'R', 'I', 'F', 'F', 56, 0, 0, 0, 'W', 'A', 'V', 'E', 'f', 'm', 't', ' ', 16, 0, 0, 0, 1, 0, 1, 0,
        0x80, 0x3e, 0, 0, 0, 0x7d, 0, 0, 2, 0, 16, 0, 'd', 'a', 't', 'a', 20, 0, 0, 0,
        1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8, 0, 9, 0, 10, 0};
    iv_strbuf tw;
    iv_sb_init(&tw);
    iv_codec_base64(&tw, tiny_wav, sizeof tiny_wav);
    iv_sb_init(&q);
    iv_sb_printf(&q, "{\"modality\":\"audio\",\"input\":[\"%s\"]}", tw.data);
    expect(&s, "/embeddings", q.data, 422, "too short");
    iv_sb_free(&q);
    iv_sb_free(&tw);
    REQUIRE(http_post(&s, "/v1/embeddings", "{\"input\":\"hello world\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);

    /* Limits: bytes and seconds (speech_44k_stereo.flac: 23307 bytes; speech_16k_mono.wav 0.6 s, tone_440_16k.wav 0.35 s). */
    const char *args2[] = {"--model-id", dir, "--max-audio-bytes", "20000", "--max-audio-seconds", "0.5", NULL};
    REQUIRE(srv_start(&s, args2) == 0);
    iv_sb_init(&q);
    iv_sb_printf(&q, "{\"modality\":\"audio\",\"input\":[\"%s\"]}", flac);
    expect(&s, "/embeddings", q.data, 422, "over the limit of 20000 bytes");
    iv_sb_free(&q);
    iv_sb_init(&q);
    iv_sb_printf(&q, "{\"modality\":\"audio\",\"input\":[\"%s\"]}", tone);
    expect(&s, "/embeddings", q.data, 200, "embedding");
    iv_sb_free(&q);
    char *speech = file_b64("audio", "speech_16k_mono.wav", "");
    iv_sb_init(&q);
    iv_sb_printf(&q, "{\"modality\":\"audio\",\"input\":[\"%s\"]}", speech);
    expect(&s, "/embeddings", q.data, 422, "over the limit of 0.5");
    iv_sb_free(&q);
    CHECK_EQ_INT(srv_stop(&s), 0);

    /* A model without an audio tower. */
    const char *text_only = srv_fixture("qwen3");
    if (text_only) {
        const char *args3[] = {"--model-id", text_only, NULL};
        REQUIRE(srv_start(&s, args3) == 0);
        iv_sb_init(&q);
        iv_sb_printf(&q, "{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\",\"input_audio\":"
                         "{\"data\":\"%s\",\"format\":\"wav\"}}]}]}",
                     tone);
        expect(&s, "/v1/embeddings", q.data, 422, "no audio tower");
        iv_sb_free(&q);
        iv_sb_init(&q);
        iv_sb_printf(&q, "{\"input\":[{\"audio\":\"%s\"}]}", tone);
        expect(&s, "/v1/embeddings", q.data, 422, "no audio tower");
        iv_sb_free(&q);
        iv_sb_init(&q);
        iv_sb_printf(&q, "{\"modality\":\"audio\",\"input\":[\"%s\"]}", tone);
        expect(&s, "/embeddings", q.data, 400, "modality `audio`");
        iv_sb_free(&q);
        CHECK_EQ_INT(srv_stop(&s), 0);
    }
    free(speech);
    free(ogg);
    free(tone);
    free(flac);
    iv_weights_close(want);
}

/* Gemma4 unified (tests/fixtures/models/g4u_media, made by
 * tools/fixtures/synthetic_gemma4_unified.py: the raw-frame audio embedder
 * and the encoder-free image embedder): its conversations, packed and
 * alone; bad media gets a 4xx and the server serves on. */
TEST(srv_gemma4_unified_media)
{
    const char *dir = srv_fixture("g4u_media");
    if (!dir) return;
    iv_weights *want = media_expected(dir);
    REQUIRE(want);
    srv s;
    const char *args[] = {"--model-id", dir, NULL};
    REQUIRE(srv_start(&s, args) == 0);
    check_media_cases(&s, dir, want);
    expect(&s, "/v1/embeddings",
           "{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":"
           "\"data:image/png;base64,aGVsbG8gd29ybGQ=\"}}]}]}",
           422, "image 0");
    expect(&s, "/embeddings", "{\"modality\":\"audio\",\"input\":[\"aGVsbG8gd29ybGQsIHRoaXMgaXMgbm90IGF1ZGlv\"]}", 422,
           "audio 0");
    expect(&s, "/embeddings", "{\"modality\":\"audio\",\"input\":[\"\"]}", 422, "audio is empty");
    http_resp r;
    REQUIRE(http_post(&s, "/v1/embeddings", "{\"input\":\"hello world\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);
    iv_weights_close(want);
}

/* The offline CLI: audio file paths in {"audio": PATH} and in a
 * conversation's audio parts (files read by the CLI, as images are) give
 * the fixture's embeddings; an Ogg file is a per-line error naming it. */
TEST(cli_embed_audio)
{
    const char *dir = srv_fixture("embedding_gemma2_media");
    if (!dir) return;
    const char *fx = iv_test_fixtures_dir();
    char path[4096], tmp[] = "/tmp/iv_cli_audio_XXXXXX", in_path[4200], out_path[4200], cmd[16384];
    REQUIRE(mkdtemp(tmp));
    snprintf(in_path, sizeof in_path, "%s/in.jsonl", tmp);
    snprintf(out_path, sizeof out_path, "%s/out.jsonl", tmp);
    FILE *f = fopen(in_path, "w");
    REQUIRE(f);
    fprintf(f, "{\"audio\":\"%s/audio/speech_44k_stereo.flac\"}\n", fx);
    fprintf(f,
            "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"look at this picture\"},{\"type\":"
            "\"image\",\"image\":\"%s/images/chelsea_p64.png\"},{\"type\":\"text\",\"text\":\"and listen to the "
            "clip\"},{\"type\":\"audio_url\",\"audio_url\":{\"url\":\"file://%s/audio/speech_16k_mono.wav\"}},"
            "{\"type\":\"text\",\"text\":\"then describe it\"}]}]\n",
            fx, fx);
    fprintf(f, "{\"audio\":\"%s/audio/speech_24k_mono.ogg\"}\n", fx);
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' embed --model-id '%s' < '%s' > '%s' 2>/dev/null", iv_test_binary(), dir, in_path,
             out_path);
    int st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1); /* one line failed */
    char *out = NULL;
    size_t len;
    iv_err err = {0};
    REQUIRE(iv_file_read_all(out_path, 1 << 22, &out, &len, &err) == 0);
    snprintf(path, sizeof path, "%s/media_expected.safetensors", dir);
    iv_weights *want = NULL;
    REQUIRE(iv_weights_open_file(&want, path, &err) == 0);
    static const char *const keys[] = {"audio_flac", "mixed"};
    char *line = out, *nl;
    int k = 0;
    while ((nl = strchr(line, '\n')) && k < 3) {
        *nl = 0;
        cJSON *j = cJSON_Parse(line);
        if (k < 2) check_embedding(keys[k], j, want, keys[k]);
        else CHECK_CONTAINS(line, "Ogg");
        cJSON_Delete(j);
        line = nl + 1;
        k++;
    }
    CHECK_EQ_INT(k, 3);
    iv_weights_close(want);
    free(out);
    remove(in_path);
    remove(out_path);
    rmdir(tmp);
}
