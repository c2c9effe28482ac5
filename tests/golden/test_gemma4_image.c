/* tests/fixtures/images through the Gemma4 image processor
 * (tools/gen_gemma4_image_fixtures.py): per configs/gemma4_* checkpoint
 * config, the same resized size, soft token count and patch rows as
 * transformers' Gemma4ImageProcessorPil (bit-identical: sha256 of the
 * float32 rows; sampled values and the sum within 1/255 after
 * normalisation, so a failure says how far off it is), and the same
 * refusals. */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/json.h"
#include "base/sha256.h"
#include "image/gemma4.h"
#include "image/image.h"
#include "test.h"

static int decode_file(const char *dir, const char *name, iv_image *img, iv_err *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *data;
    size_t n;
    if (iv_file_read_all(path, 64 << 20, &data, &n, err)) return -1;
    int rc = iv_image_decode((const uint8_t *)data, n, NULL, img, err);
    free(data);
    return rc;
}

static void check_config(const char *cfg_name)
{
    char dir[4096], cdir[4096], path[4096];
    snprintf(dir, sizeof dir, "%s/images", iv_test_fixtures_dir());
    snprintf(path, sizeof path, "%s/gemma4_expected.json", dir);
    snprintf(cdir, sizeof cdir, "%s/configs/%s", dir, cfg_name);
    cJSON *root = NULL;
    iv_err err = {0};
    if (iv_json_load_file(path, 16 << 20, &root, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return;
    }
    iv_gemma4_image_config cfg;
    if (iv_gemma4_image_config_load(&cfg, cdir, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        cJSON_Delete(root);
        return;
    }
    CHECK(iv_gemma4_processor_named(cdir));
    int n = 0, sizes = 0, identical = 0, compared = 0, refusals = 0;
    double worst = 0;
    const double min_std = cfg.px.do_normalize ? fmin(cfg.px.image_std[0], fmin(cfg.px.image_std[1], cfg.px.image_std[2])) : 1;
    const double tol = 1.0 / 255.0 / min_std + 1e-6;
    const int P = cfg.patch_size;
    const cJSON *e;
    cJSON_ArrayForEach(e, iv_json_get(root, "images"))
    {
        const char *name = iv_json_str(e, "file", "");
        const cJSON *want = iv_json_get(iv_json_get(e, "preprocess"), cfg_name);
        iv_image img;
        if (decode_file(dir, name, &img, &err)) {
            CHECK_MSG(0, "%s: %s", name, err.msg);
            continue;
        }
        n++;
        iv_gemma4_pixels px;
        const int rc = iv_gemma4_preprocess(&cfg, &img, &px, &err);
        int soft = -1;
        const int soft_rc = iv_gemma4_soft_tokens(&cfg, img.height, img.width, &soft, &err);
        iv_image_free(&img);
        if (iv_json_get(want, "error")) {
            CHECK_MSG(rc != 0 && soft_rc != 0, "%s: transformers refuses it (%s), we did not", name,
                      iv_json_str(want, "error", ""));
            refusals += rc != 0;
            if (!rc) iv_gemma4_pixels_free(&px);
            continue;
        }
        if (rc) {
            CHECK_MSG(0, "%s: %s", name, err.msg);
            continue;
        }
        const cJSON *sz = iv_json_get(want, "image_size");
        const int size_ok = px.height == cJSON_GetArrayItem(sz, 0)->valuedouble &&
                            px.width == cJSON_GetArrayItem(sz, 1)->valuedouble &&
                            px.soft_tokens == iv_json_int(want, "soft_tokens", -1) &&
                            px.grid_h * px.grid_w == iv_json_int(want, "patches", -1) && soft_rc == 0 &&
                            soft == px.soft_tokens &&
                            iv_json_int(want, "padded_to", -1) ==
                                cfg.max_soft_tokens * cfg.pooling_kernel_size * cfg.pooling_kernel_size;
        CHECK_MSG(size_ok, "%s: resized to %dx%d (%d soft tokens), transformers %dx%d (%d)", name, px.width,
                  px.height, px.soft_tokens, (int)cJSON_GetArrayItem(sz, 1)->valuedouble,
                  (int)cJSON_GetArrayItem(sz, 0)->valuedouble, (int)iv_json_int(want, "soft_tokens", -1));
        sizes += size_ok;
        if (!size_ok || iv_json_get(e, "known_difference")) {
            iv_gemma4_pixels_free(&px);
            continue;
        }
        const size_t total = (size_t)px.grid_h * px.grid_w * P * P * 3;
        float *rows = malloc(total * sizeof *rows);
        REQUIRE(rows);
        iv_gemma4_patchify(&cfg, &px, rows);
        char hex[65];
        iv_sha256_hex(rows, total * sizeof(float), hex);
        const int same = !strcmp(hex, iv_json_str(want, "pv_sha256", ""));
        identical += same;
        compared++;
        const cJSON *s;
        cJSON_ArrayForEach(s, iv_json_get(want, "samples"))
        {
            const size_t i = (size_t)cJSON_GetArrayItem(s, 0)->valuedouble;
            const double d = fabs((double)rows[i] - cJSON_GetArrayItem(s, 1)->valuedouble);
            if (d > worst) worst = d;
            CHECK_MSG(d <= tol, "%s: pixel_values[%zu] = %g, transformers %g", name, i, rows[i],
                      cJSON_GetArrayItem(s, 1)->valuedouble);
        }
        double sum = 0;
        for (size_t i = 0; i < total; i++) sum += rows[i];
        const double want_sum = iv_json_num(want, "sum", 0);
        CHECK_MSG(fabs(sum - want_sum) <= tol * (double)total, "%s: sum %.6f, transformers %.6f", name, sum, want_sum);
        CHECK_MSG(same, "%s: pixel_values not bit-identical to transformers'", name);
        free(rows);
        iv_gemma4_pixels_free(&px);
    }
    printf("  %s: %d/%d sizes and soft token counts equal, %d refusals as transformers, %d/%d pixel_values "
           "bit-identical, max sampled |diff| %g\n",
           cfg_name, sizes, n, refusals, identical, compared, worst);
    CHECK(n >= 40);
    cJSON_Delete(root);
}

TEST(gemma4_image_default_processor) { check_config("gemma4_default"); }
TEST(gemma4_image_small_processor) { check_config("gemma4_small"); }
TEST(gemma4_image_k2_bilinear_processor) { check_config("gemma4_k2_bilinear"); }

/* The patch row layout: raster patches, each (row, column, channel). */
TEST(gemma4_image_patchify_order)
{
    iv_gemma4_image_config cfg;
    iv_gemma4_image_config_default(&cfg);
    cfg.patch_size = 2, cfg.pooling_kernel_size = 1;
    float pix[3 * 2 * 4];
    for (int i = 0; i < 3 * 2 * 4; i++) pix[i] = (float)i;
    iv_gemma4_pixels px = {.pixel_values = pix, .height = 2, .width = 4, .grid_h = 1, .grid_w = 2, .soft_tokens = 2};
    float out[2 * 12];
    iv_gemma4_patchify(&cfg, &px, out);
    /* Patch 0: (y0, x0) channels 0, 8, 16; then (y0, x1); then (y1, x0). */
    CHECK(out[0] == 0 && out[1] == 8 && out[2] == 16 && out[3] == 1 && out[6] == 4);
    CHECK(out[12] == 2 && out[13] == 10 && out[15] == 3);
}

TEST(gemma4_image_config_errors)
{
    iv_gemma4_image_config cfg;
    iv_err err = {0};
    static const char *const bad[] = {
        "{\"max_soft_tokens\": 100}", "{\"patch_size\": {\"height\": 16, \"width\": 16}}", "{\"resample\": 1}",
        "{\"image_processor_type\": \"SiglipImageProcessor\"}", "{\"do_convert_rgb\": false}",
        "{\"pooling_kernel_size\": 0}", "{\"image_std\": [1, 0, 1]}", "{\"do_pan_and_scan\": true}", "[]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        iv_gemma4_image_config_default(&cfg);
        CHECK_MSG(iv_gemma4_image_config_parse(&cfg, bad[i], strlen(bad[i]), &err) != 0, "accepted %s", bad[i]);
    }
    iv_gemma4_image_config_default(&cfg);
    const char *ok = "{\"do_resize\": false, \"size\": {\"height\": 224, \"width\": 224}, \"image_seq_length\": 280}";
    REQUIRE(iv_gemma4_image_config_parse(&cfg, ok, strlen(ok), &err) == 0);
    int h, w, n;
    CHECK(iv_gemma4_resize_size(&cfg, 96, 144, &h, &w, &err) == 0 && h == 96 && w == 144);
    CHECK(iv_gemma4_soft_tokens(&cfg, 96, 144, &n, &err) == 0 && n == 6);
    CHECK(iv_gemma4_resize_size(&cfg, 96, 100, &h, &w, &err) != 0 && err.code == IV_E_INVALID);
    CHECK(iv_gemma4_resize_size(&cfg, 0, 50, &h, &w, &err) != 0 && err.code == IV_E_INVALID);
    int32_t run[6];
    CHECK(iv_gemma4_image_token_run(4, 7, 9, 8, run) == 6);
    CHECK(run[0] == 7 && run[1] == 9 && run[4] == 9 && run[5] == 8);
    CHECK(iv_gemma4_image_token_run(4, 7, 9, 8, NULL) == 6);
    CHECK(iv_gemma4_image_token_run(0, 7, 9, 8, run) == 0);
}
