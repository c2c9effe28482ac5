/* tests/fixtures/images through the Pixtral image processor
 * (tools/gen_pixtral_image_fixtures.py): per configs/pixtral_* checkpoint
 * config, the same resized size and pixel_values as transformers'
 * PixtralImageProcessorPil called as PixtralProcessor calls it
 * (bit-identical: sha256 of the float32 bytes; sampled values and the sum
 * within 1/255 after normalisation, so a failure says how far off it is),
 * the same refusals, and the same [IMG] / [IMG_BREAK] / [IMG_END] layout
 * as PixtralProcessor.replace_image_token. */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/json.h"
#include "base/sha256.h"
#include "image/image.h"
#include "image/pixtral.h"
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

/* The layout's text, as the processor joins the token strings. */
static int layout_matches(int rows, int cols, const char *want_sha)
{
    int32_t *ids = malloc((size_t)rows * (cols + 1) * sizeof *ids);
    char *text = malloc((size_t)rows * (cols + 1) * 12 + 1);
    if (!ids || !text) {
        free(ids);
        free(text);
        return 0;
    }
    int64_t n = iv_pixtral_image_token_run(rows, cols, 0, 1, 2, ids);
    size_t len = 0;
    static const char *const str[] = {"[IMG]", "[IMG_BREAK]", "[IMG_END]"};
    for (int64_t i = 0; i < n; i++) {
        memcpy(text + len, str[ids[i]], strlen(str[ids[i]]));
        len += strlen(str[ids[i]]);
    }
    char hex[65];
    iv_sha256_hex(text, len, hex);
    free(ids);
    free(text);
    return n == (int64_t)rows * (cols + 1) && !strcmp(hex, want_sha);
}

static void check_config(const char *cfg_name)
{
    char dir[4096], cdir[4096], path[4096];
    snprintf(dir, sizeof dir, "%s/images", iv_test_fixtures_dir());
    snprintf(path, sizeof path, "%s/pixtral_expected.json", dir);
    snprintf(cdir, sizeof cdir, "%s/configs/%s", dir, cfg_name);
    cJSON *root = NULL;
    iv_err err = {0};
    if (iv_json_load_file(path, 16 << 20, &root, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return;
    }
    iv_pixtral_config cfg;
    if (iv_pixtral_config_load(&cfg, cdir, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        cJSON_Delete(root);
        return;
    }
    int n = 0, sizes = 0, identical = 0, compared = 0, layouts = 0, refusals = 0;
    double worst = 0;
    const double min_std = fmin(cfg.px.image_std[0], fmin(cfg.px.image_std[1], cfg.px.image_std[2]));
    const double tol = 1.0 / 255.0 / min_std + 1e-6;
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
        iv_pixtral_pixels px;
        const int rc = iv_pixtral_preprocess(&cfg, &img, &px, &err);
        int rows = -1, cols = -1;
        const int grid_rc = iv_pixtral_token_grid(&cfg, img.height, img.width, &rows, &cols, &err);
        iv_image_free(&img);
        if (iv_json_get(want, "error")) {
            CHECK_MSG(rc != 0 && grid_rc != 0, "%s: transformers refuses it (%s), we did not", name,
                      iv_json_str(want, "error", ""));
            refusals += rc != 0;
            if (!rc) iv_pixtral_pixels_free(&px);
            continue;
        }
        if (rc) {
            CHECK_MSG(0, "%s: %s", name, err.msg);
            continue;
        }
        const cJSON *sz = iv_json_get(want, "image_size");
        const int size_ok = px.height == cJSON_GetArrayItem(sz, 0)->valuedouble &&
                            px.width == cJSON_GetArrayItem(sz, 1)->valuedouble &&
                            px.rows == iv_json_int(want, "rows", -1) && px.cols == iv_json_int(want, "cols", -1) &&
                            grid_rc == 0 && rows == px.rows && cols == px.cols;
        CHECK_MSG(size_ok, "%s: resized to %dx%d (%d x %d tokens), transformers %dx%d", name, px.width, px.height,
                  px.rows, px.cols, (int)cJSON_GetArrayItem(sz, 1)->valuedouble,
                  (int)cJSON_GetArrayItem(sz, 0)->valuedouble);
        sizes += size_ok;
        const int lay = layout_matches(px.rows, px.cols, iv_json_str(want, "layout_sha256", ""));
        CHECK_MSG(lay, "%s: image token layout differs from PixtralProcessor's", name);
        layouts += lay;
        if (!size_ok || iv_json_get(e, "known_difference")) {
            iv_pixtral_pixels_free(&px);
            continue;
        }
        const size_t total = (size_t)3 * px.height * px.width;
        char hex[65];
        iv_sha256_hex(px.pixel_values, total * sizeof(float), hex);
        const int same = !strcmp(hex, iv_json_str(want, "pv_sha256", ""));
        identical += same;
        compared++;
        const cJSON *s;
        cJSON_ArrayForEach(s, iv_json_get(want, "samples"))
        {
            const size_t i = (size_t)cJSON_GetArrayItem(s, 0)->valuedouble;
            const double d = fabs((double)px.pixel_values[i] - cJSON_GetArrayItem(s, 1)->valuedouble);
            if (d > worst) worst = d;
            CHECK_MSG(d <= tol, "%s: pixel_values[%zu] = %g, transformers %g", name, i, px.pixel_values[i],
                      cJSON_GetArrayItem(s, 1)->valuedouble);
        }
        double sum = 0;
        for (size_t i = 0; i < total; i++) sum += px.pixel_values[i];
        const double want_sum = iv_json_num(want, "sum", 0);
        CHECK_MSG(fabs(sum - want_sum) <= tol * (double)total, "%s: sum %.6f, transformers %.6f", name, sum, want_sum);
        CHECK_MSG(same, "%s: pixel_values not bit-identical to transformers'", name);
        iv_pixtral_pixels_free(&px);
    }
    printf("  %s: %d/%d sizes and token grids equal, %d refusals as transformers, %d layouts equal, %d/%d "
           "pixel_values bit-identical, max sampled |diff| %g\n",
           cfg_name, sizes, n, refusals, layouts, identical, compared, worst);
    CHECK(n >= 40);
    cJSON_Delete(root);
}

TEST(pixtral_image_mistral3_processor) { check_config("pixtral_mistral3"); }
TEST(pixtral_image_12b_processor) { check_config("pixtral_12b"); }
TEST(pixtral_image_small_processor) { check_config("pixtral_small"); }

/* The merge-block patch order the tower reads. */
TEST(pixtral_image_patchify_order)
{
    iv_pixtral_config cfg;
    iv_pixtral_config_default(&cfg);
    cfg.patch_size = 2, cfg.merge_size = 2;
    float pix[3 * 4 * 8];
    for (int i = 0; i < 3 * 4 * 8; i++) pix[i] = (float)i;
    iv_pixtral_pixels px = {.pixel_values = pix, .height = 4, .width = 8, .grid_h = 2, .grid_w = 4, .rows = 1,
                            .cols = 2};
    float out[8 * 12];
    iv_pixtral_patchify(&cfg, &px, out);
    /* Row 1: patch (0, 1); row 2: patch (1, 0); row 4: patch (0, 2). */
    CHECK(out[0] == 0 && out[1] == 1 && out[2] == 8 && out[3] == 9 && out[4] == 32);
    CHECK(out[12] == 2 && out[12 + 2] == 10);
    CHECK(out[24] == 16 && out[24 + 2] == 24);
    CHECK(out[48] == 4 && out[48 + 4] == 36);
}

TEST(pixtral_image_config_errors)
{
    iv_pixtral_config cfg;
    iv_err err = {0};
    static const char *const bad[] = {
        "{\"crop_size\": {\"height\": 3}}", "{\"size\": {\"shortest_edge\": 3}}", "{\"patch_size\": {\"height\": 14, \"width\": 16}}",
        "{\"resample\": 1}", "{\"image_processor_type\": \"CLIPImageProcessor\"}", "{\"do_center_crop\": true}",
        "{\"size\": {\"height\": 4}}", "{\"patch_size\": 0}", "{\"image_std\": [1, 0, 1]}", "[]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        iv_pixtral_config_default(&cfg);
        CHECK_MSG(iv_pixtral_config_parse(&cfg, bad[i], strlen(bad[i]), &err) != 0, "accepted %s", bad[i]);
    }
    iv_pixtral_config_default(&cfg);
    const char *ok = "{\"size\": {\"height\": 64, \"width\": 32}, \"patch_size\": {\"height\": 8, \"width\": 8}, "
                     "\"do_pad\": true, \"crop_size\": null}";
    REQUIRE(iv_pixtral_config_parse(&cfg, ok, strlen(ok), &err) == 0);
    int h, w;
    CHECK(iv_pixtral_resize_size(&cfg, 200, 50, &h, &w, &err) == 0 && h == 64 && w == 16);
    CHECK(iv_pixtral_resize_size(&cfg, 0, 50, &h, &w, &err) != 0 && err.code == IV_E_INVALID);
    CHECK(iv_pixtral_resize_size(&cfg, 1, 5000, &h, &w, &err) != 0 && err.code == IV_E_INVALID);
    int32_t run[8];
    CHECK(iv_pixtral_image_token_run(2, 3, 10, 12, 13, run) == 8);
    CHECK(run[3] == 12 && run[7] == 13 && run[4] == 10);
    CHECK(iv_pixtral_image_token_run(0, 3, 10, 12, 13, run) == 0);
}
