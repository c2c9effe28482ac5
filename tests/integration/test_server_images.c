/* Images through the real server (docs/vision.md, "Images in requests"):
 * a ColQwen3 checkpoint answers conversations with OpenAI image_url data
 * URLs (/v1/embeddings) and Infinity's modality "image" (/embeddings) with
 * the same matrices as the engine-level fixture (tests/golden/
 * test_vlm_retrievers.c, whose references come from transformers); bad
 * images, images over --max-image-pixels and images for a text-only model
 * get a 4xx and the server keeps serving; /rerank scores text and image
 * documents by MaxSim. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/file.h"
#include "base/strbuf.h"
#include "golden/golden_util.h"
#include "server/codec.h"
#include "server_harness.h"
#include "tensor/safetensors.h"
#include "test.h"

#define MIN_COS 0.99999
#define MAX_ABS 1e-4

static char *fixture_data_url(const char *dir, const char *name)
{
    char path[4096], rel[256];
    snprintf(rel, sizeof rel, "images/%s", name);
    iv_path_join(path, sizeof path, dir, rel);
    char *bytes;
    size_t n;
    iv_err err = {0};
    if (iv_file_read_all(path, 1 << 20, &bytes, &n, &err)) return NULL;
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_printf(&b, "data:image/%s;base64,", strstr(name, ".jpg") ? "jpeg" : strstr(name, ".gif") ? "gif" : "png");
    iv_codec_base64(&b, (const unsigned char *)bytes, n);
    free(bytes);
    return b.data;
}

/* The expected matrix "embeddings.<i>" of the fixture (f32, [rows, cols]). */
static const iv_tensor *want_matrix(iv_weights *w, int i)
{
    char key[64];
    snprintf(key, sizeof key, "embeddings.%d", i);
    const iv_tensor *t;
    iv_err err = {0};
    return iv_weights_f32(w, key, 0, NULL, &t, &err) ? NULL : t;
}

/* One response matrix (float rows) against the fixture's. */
static void check_matrix(const char *what, const cJSON *m, const iv_tensor *want)
{
    REQUIRE(cJSON_IsArray(m) && want);
    const int rows = cJSON_GetArraySize(m), cols = (int)want->shape[1];
    CHECK_EQ_INT(rows, (int)want->shape[0]);
    if (rows != want->shape[0]) return;
    float *got = malloc((size_t)rows * cols * sizeof *got);
    for (int t = 0; t < rows; t++) {
        int n;
        float *row = json_floats(cJSON_GetArrayItem(m, t), &n);
        CHECK_EQ_INT(n, cols);
        if (row && n == cols) memcpy(got + (size_t)t * cols, row, (size_t)cols * sizeof *got);
        free(row);
    }
    CHECK_EQ_INT(golden_compare(what, got, want->data, rows, cols, MIN_COS, MAX_ABS), 0);
    free(got);
}

static void expect(const srv *s, const char *path, const char *body, long status, const char *phrase)
{
    http_resp r;
    REQUIRE(http_post(s, path, body, &r) == 0);
    if (r.status != status || !r.body || !strstr(r.body, phrase))
        iv_test_fail(__FILE__, __LINE__, "%s: got %ld %.300s, want %ld with \"%s\"", path, r.status,
                     r.body ? r.body : "", status, phrase);
    http_resp_free(&r);
}

static float maxsim(const iv_tensor *q, const iv_tensor *d)
{
    const int cols = (int)q->shape[1];
    const float *a = q->data, *b = d->data;
    double total = 0;
    for (int i = 0; i < q->shape[0]; i++) {
        float best = -INFINITY;
        for (int j = 0; j < d->shape[0]; j++) {
            float dot = 0;
            for (int k = 0; k < cols; k++) dot += a[i * cols + k] * b[j * cols + k];
            if (dot > best) best = dot;
        }
        total += best;
    }
    return (float)total;
}

TEST(srv_images_colqwen3)
{
    const char *dir = srv_fixture("colqwen3_tiny");
    if (!dir) return;
    char path[4096];
    iv_path_join(path, sizeof path, dir, "vlm_expected.safetensors");
    iv_weights *want = NULL;
    iv_err err = {0};
    REQUIRE(iv_weights_open_file(&want, path, &err) == 0);
    char *a = fixture_data_url(dir, "a.png"), *b = fixture_data_url(dir, "b.jpg"), *c = fixture_data_url(dir, "c.png");
    REQUIRE(a && b && c);
    srv s;
    const char *args[] = {"--model-id", dir, NULL};
    REQUIRE(srv_start(&s, args) == 0);
    iv_strbuf q;
    http_resp r;

    /* OpenAI: one conversation with two image_url parts (fixture input 2). */
    iv_sb_init(&q);
    iv_sb_printf(&q,
                 "{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"find the page with a "
                 "chart\"},{\"type\":\"image_url\",\"image_url\":{\"url\":\"%s\"}},{\"type\":\"text\",\"text\":\"and "
                 "the table\"},{\"type\":\"image_url\",\"image_url\":{\"url\":\"%s\"}}]}]}",
                 b, c);
    REQUIRE(http_post(&s, "/v1/embeddings", q.data, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    const cJSON *d0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r.json, "data"), 0);
    check_matrix("/v1/embeddings conversation", cJSON_GetObjectItemCaseSensitive(d0, "embedding"), want_matrix(want, 2));
    /* Image tokens count as prompt tokens. */
    CHECK_EQ_INT(jint(cJSON_GetObjectItemCaseSensitive(r.json, "usage"), "prompt_tokens"), 46);
    http_resp_free(&r);
    iv_sb_free(&q);

    /* One request, a text and a conversation with images: both inputs go
     * through the batcher as one job and run in one packed batch. */
    iv_sb_init(&q);
    iv_sb_printf(&q,
                 "{\"input\":[\"what is in this picture ?\",[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
                 "\"text\":\"find the page with a chart\"},{\"type\":\"image_url\",\"image_url\":{\"url\":\"%s\"}},"
                 "{\"type\":\"text\",\"text\":\"and the table\"},{\"type\":\"image_url\",\"image_url\":{\"url\":"
                 "\"%s\"}}]}]]}",
                 b, c);
    REQUIRE(http_post(&s, "/v1/embeddings", q.data, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(r.json, "data");
    CHECK_EQ_INT(cJSON_GetArraySize(data), 2);
    check_matrix("/v1/embeddings batch: text",
                 cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(data, 0), "embedding"), want_matrix(want, 0));
    check_matrix("/v1/embeddings batch: conversation",
                 cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(data, 1), "embedding"), want_matrix(want, 2));
    http_resp_free(&r);
    iv_sb_free(&q);

    /* Infinity: modality image, a bare image (fixture input 1: the image and
     * "Describe the image."). */
    iv_sb_init(&q);
    iv_sb_printf(&q, "{\"modality\":\"image\",\"input\":[\"%s\"]}", a);
    REQUIRE(http_post(&s, "/embeddings", q.data, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    d0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r.json, "data"), 0);
    check_matrix("/embeddings modality image", cJSON_GetObjectItemCaseSensitive(d0, "embedding"), want_matrix(want, 1));
    http_resp_free(&r);
    iv_sb_free(&q);

    /* OpenAI-style multimodal embedding items (no role): each one a bare
     * image input, the same as Infinity's modality image; TEI /embed too. */
    iv_sb_init(&q);
    iv_sb_printf(&q, "{\"input\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"%s\"}},{\"image\":\"%s\"}]}", a,
                 a);
    REQUIRE(http_post(&s, "/v1/embeddings", q.data, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    for (int k = 0; k < 2; k++)
        check_matrix("/v1/embeddings image items",
                     cJSON_GetObjectItemCaseSensitive(
                         cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r.json, "data"), k), "embedding"),
                     want_matrix(want, 1));
    http_resp_free(&r);
    iv_sb_free(&q);
    iv_sb_init(&q);
    iv_sb_printf(&q, "{\"inputs\":[{\"image\":\"%s\"}]}", a);
    REQUIRE(http_post(&s, "/embed", q.data, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    check_matrix("/embed image item", cJSON_GetArrayItem(r.json, 0), want_matrix(want, 1));
    http_resp_free(&r);
    iv_sb_free(&q);

    /* Bad images: a 4xx naming the problem, and the server serves on. */
    expect(&s, "/embeddings", "{\"modality\":\"image\",\"input\":[\"data:image/png;base64,iVBORw0KGgoAAAANSUhEUg\"]}",
           422, "image 0");
    expect(&s, "/embeddings", "{\"modality\":\"image\",\"input\":[\"data:text/plain;base64,aGVsbG8=\"]}", 422,
           "media type must be image/");
    expect(&s, "/embeddings", "{\"modality\":\"image\",\"input\":[\"https://example.com/a.png\"]}", 422,
           "image URLs are not fetched");
    expect(&s, "/v1/embeddings",
           "{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\",\"input_audio\":{}}]}]}", 422,
           "cannot read");
    expect(&s, "/v1/embeddings", "{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", 422,
           "image_url.url");

    /* MaxSim rerank: a text document and an image document against the text
     * query of fixture input 0; scores are the late interaction of the
     * fixture's matrices (input 0 with itself, input 0 with input 1). */
    iv_sb_init(&q);
    iv_sb_printf(&q, "{\"query\":\"what is in this picture ?\",\"documents\":[\"what is in this picture ?\",\"%s\"]}",
                 a);
    REQUIRE(http_post(&s, "/rerank", q.data, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(r.json, "results"), *it;
    CHECK_EQ_INT(cJSON_GetArraySize(res), 2);
    const float want_scores[2] = {maxsim(want_matrix(want, 0), want_matrix(want, 0)),
                                  maxsim(want_matrix(want, 0), want_matrix(want, 1))};
    cJSON_ArrayForEach(it, res)
    {
        const int idx = jint(it, "index");
        REQUIRE(idx == 0 || idx == 1);
        const double got = jnum(it, "relevance_score");
        if (fabs(got - want_scores[idx]) > 1e-4 * fabs(want_scores[idx]) + 1e-5)
            iv_test_fail(__FILE__, __LINE__, "MaxSim of document %d: %.7f, want %.7f", idx, got, want_scores[idx]);
    }
    http_resp_free(&r);
    iv_sb_free(&q);
    /* TEI's /rerank shape too. */
    REQUIRE(http_post(&s, "/rerank", "{\"query\":\"red square\",\"texts\":[\"blue circle\",\"red square\"]}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(jint(cJSON_GetArrayItem(r.json, 0), "index"), 1);
    http_resp_free(&r);
    /* Single-vector /similarity stays refused. */
    expect(&s, "/similarity", "{\"inputs\":{\"source_sentence\":\"a\",\"sentences\":[\"b\"]}}", 422, "multi-vector");

    REQUIRE(http_post(&s, "/v1/embeddings", "{\"input\":\"red square\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);
    free(a);
    free(b);
    free(c);
    iv_weights_close(want);
}

/* Limits: images over --max-image-pixels (413), images whose runs alone
 * exceed the input limit (refused whole, never cut), text truncated around
 * kept image runs; a text-only model refuses images. */
TEST(srv_images_limits_and_no_tower)
{
    const char *dir = srv_fixture("colqwen3_tiny");
    if (!dir) return;
    char *b = fixture_data_url(dir, "b.jpg"), *c = fixture_data_url(dir, "c.png");
    REQUIRE(b && c);
    srv s;
    /* b.jpg: 22 x 37 = 814 pixels, 15 image tokens; c.png: 31 x 31 = 961 pixels. */
    const char *args[] = {"--model-id", dir, "--max-batch-tokens", "30", "--auto-truncate", "true",
                          "--max-image-pixels", "900", NULL};
    REQUIRE(srv_start(&s, args) == 0);
    iv_strbuf q;
    iv_sb_init(&q);
    iv_sb_printf(&q, "{\"modality\":\"image\",\"input\":[\"%s\"]}", c);
    expect(&s, "/embeddings", q.data, 422, "961 pixels, over the limit of 900 pixels");
    iv_sb_free(&q);
    iv_sb_init(&q);
    iv_sb_printf(&q,
                 "{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":"
                 "\"%s\"}},{\"type\":\"image_url\",\"image_url\":{\"url\":\"%s\"}},{\"type\":\"image_url\","
                 "\"image_url\":{\"url\":\"%s\"}}]}]}",
                 b, b, b);
    expect(&s, "/v1/embeddings", q.data, 422, "alone take 45 tokens");
    iv_sb_free(&q);
    /* One image and a long text: the text is cut, the image run kept whole. */
    iv_sb_init(&q);
    iv_sb_printf(&q,
                 "{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":"
                 "\"%s\"}},{\"type\":\"text\",\"text\":\"find the page with a chart table of results query "
                 "document passage red square blue circle\"}]}]}",
                 b);
    http_resp r;
    REQUIRE(http_post(&s, "/v1/embeddings", q.data, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    const cJSON *emb = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r.json, "data"), 0), "embedding");
    CHECK_EQ_INT(cJSON_GetArraySize(emb), 30);
    http_resp_free(&r);
    iv_sb_free(&q);
    REQUIRE(http_post(&s, "/v1/embeddings", "{\"input\":\"red square\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);

    const char *text_only = srv_fixture("qwen3");
    if (text_only) {
        const char *args2[] = {"--model-id", text_only, NULL};
        REQUIRE(srv_start(&s, args2) == 0);
        iv_sb_init(&q);
        iv_sb_printf(&q, "{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":"
                         "\"%s\"}}]}]}",
                     b);
        expect(&s, "/v1/embeddings", q.data, 422, "no vision tower");
        iv_sb_free(&q);
        iv_sb_init(&q);
        iv_sb_printf(&q, "{\"input\":[{\"image\":\"%s\"}]}", b);
        expect(&s, "/v1/embeddings", q.data, 422, "no vision tower");
        iv_sb_free(&q);
        iv_sb_init(&q);
        iv_sb_printf(&q, "{\"modality\":\"image\",\"input\":[\"%s\"]}", b);
        expect(&s, "/embeddings", q.data, 400, "modality `image`");
        iv_sb_free(&q);
        CHECK_EQ_INT(srv_stop(&s), 0);
    }
    free(b);
    free(c);
}

/* infinity_v3 embed reads image files: {"image": PATH} lines and
 * conversations whose image_url parts name files (file://), with the same
 * matrices as the fixture; a missing file is that line's error. */
TEST(cli_embed_images)
{
    const char *dir = srv_fixture("colqwen3_tiny");
    if (!dir) return;
    char path[4096], tmp[] = "/tmp/iv_cli_images_XXXXXX", in_path[4200], out_path[4200], cmd[16384];
    REQUIRE(mkdtemp(tmp));
    snprintf(in_path, sizeof in_path, "%s/in.jsonl", tmp);
    snprintf(out_path, sizeof out_path, "%s/out.jsonl", tmp);
    FILE *f = fopen(in_path, "w");
    REQUIRE(f);
    fprintf(f, "{\"image\":\"%s/images/a.png\"}\n", dir);
    fprintf(f, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"find the page with a chart\"},"
               "{\"type\":\"image_url\",\"image_url\":{\"url\":\"file://%s/images/b.jpg\"}},{\"type\":\"text\",\"text\":"
               "\"and the table\"},{\"type\":\"image\",\"image\":\"%s/images/c.png\"}]}]}\n",
            dir, dir);
    fprintf(f, "{\"image\":\"%s/no_such_image.png\"}\n", tmp);
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' embed --model-id '%s' < '%s' > '%s' 2>/dev/null", iv_test_binary(), dir, in_path,
             out_path);
    int st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1); /* one line failed */
    char *out = NULL;
    size_t len;
    iv_err err = {0};
    REQUIRE(iv_file_read_all(out_path, 1 << 22, &out, &len, &err) == 0);
    iv_path_join(path, sizeof path, dir, "vlm_expected.safetensors");
    iv_weights *want = NULL;
    REQUIRE(iv_weights_open_file(&want, path, &err) == 0);
    char *line = out, *nl;
    int k = 0;
    const int cases[2] = {1, 2};
    while ((nl = strchr(line, '\n')) && k < 3) {
        *nl = 0;
        cJSON *j = cJSON_Parse(line);
        if (k < 2) check_matrix(k ? "embed conversation with files" : "embed {\"image\": path}", j, want_matrix(want, cases[k]));
        else CHECK_CONTAINS(line, "cannot open");
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
