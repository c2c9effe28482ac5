/* tests/fixtures/images (tools/gen_image_fixtures.py): every image decoded
 * exactly as PIL's Image.open(f).convert("RGB") (and its transparency as
 * convert("RGBA")'s alpha), and run through the Qwen2-VL/Qwen3-VL image
 * processor with each configs/NAME/preprocessor_config.json exactly as
 * transformers' Qwen2VLImageProcessorPil: the same grid, token count and
 * pixel_values: bit-identical (sha256 of the float32 bytes), and the
 * sampled values and the sum within 1/255 after normalisation (so a
 * failure says how far off it is). */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/json.h"
#include "base/sha256.h"
#include "image/image.h"
#include "image/qwen_vl.h"
#include "test.h"

static cJSON *load_expected(char *dir, size_t cap)
{
    snprintf(dir, cap, "%s/images", iv_test_fixtures_dir());
    char path[4096];
    snprintf(path, sizeof path, "%s/expected.json", dir);
    cJSON *root = NULL;
    iv_err err;
    if (iv_json_load_file(path, 16 << 20, &root, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return NULL;
    }
    return root;
}

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

TEST(image_fixtures_decode_like_pil)
{
    char dir[4096];
    cJSON *root = load_expected(dir, sizeof dir);
    REQUIRE(root);
    int n = 0, same = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, iv_json_get(root, "images"))
    {
        const char *name = iv_json_str(e, "file", "");
        iv_image img;
        iv_err err = {0};
        n++;
        if (decode_file(dir, name, &img, &err)) {
            CHECK_MSG(0, "%s: %s", name, err.msg);
            continue;
        }
        CHECK_STR(iv_image_format_name(img.format), iv_json_str(e, "format", ""));
        CHECK_EQ_INT(img.width, iv_json_int(e, "width", -1));
        CHECK_EQ_INT(img.height, iv_json_int(e, "height", -1));
        char hex[65];
        iv_sha256_hex(img.rgb, (size_t)img.width * img.height * 3, hex);
        int ok = !strcmp(hex, iv_json_str(e, "rgb_sha256", ""));
        CHECK_MSG(ok, "%s: RGB differs from PIL's convert(\"RGB\")", name);
        const char *want_hex = iv_json_str(e, "rgb_hex", NULL);
        if (want_hex) {
            char got[64 * 6 + 1];
            for (int i = 0; i < img.width * img.height * 3; i++) snprintf(got + 2 * i, 3, "%02x", img.rgb[i]);
            CHECK_STR(got, want_hex);
        }
        const char *want_alpha = iv_json_str(e, "alpha_sha256", NULL);
        const char *known = iv_json_str(e, "known_difference", NULL);
        if (known) printf("  %s: alpha not compared (%s)\n", name, known);
        CHECK_MSG(!want_alpha == !img.alpha, "%s: transparency %s, PIL %s", name, img.alpha ? "kept" : "none",
                  want_alpha ? "has it" : "has none");
        if (want_alpha && img.alpha && !known) {
            iv_sha256_hex(img.alpha, (size_t)img.width * img.height, hex);
            CHECK_MSG(!strcmp(hex, want_alpha), "%s: alpha differs from PIL's convert(\"RGBA\")", name);
        }
        same += ok;
        iv_image_free(&img);
    }
    printf("  %d/%d images byte-identical to PIL's RGB\n", same, n);
    CHECK(n >= 40);
    cJSON_Delete(root);
}

static void check_config(const char *cfg_name)
{
    char dir[4096], cdir[4096];
    cJSON *root = load_expected(dir, sizeof dir);
    REQUIRE(root);
    snprintf(cdir, sizeof cdir, "%s/configs/%s", dir, cfg_name);
    iv_qwen_vl_config cfg;
    iv_err err = {0};
    if (iv_qwen_vl_config_load(&cfg, cdir, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        cJSON_Delete(root);
        return;
    }
    int n = 0, compared = 0, identical = 0, grids = 0;
    double worst = 0;
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
        iv_qwen_vl_patches p;
        int rc = iv_qwen_vl_preprocess(&cfg, &img, &p, &err), img_h = img.height, img_w = img.width;
        iv_image_free(&img);
        n++;
        if (iv_json_get(want, "error")) {
            CHECK_MSG(rc != 0, "%s: transformers refuses it (%s), we did not", name, iv_json_str(want, "error", ""));
            if (rc) grids++;
            continue;
        }
        if (rc) {
            CHECK_MSG(0, "%s: %s", name, err.msg);
            continue;
        }
        const cJSON *g = iv_json_get(want, "grid_thw"), *shape = iv_json_get(want, "shape");
        int grid_ok = p.grid_thw[0] == cJSON_GetArrayItem(g, 0)->valuedouble &&
                      p.grid_thw[1] == cJSON_GetArrayItem(g, 1)->valuedouble &&
                      p.grid_thw[2] == cJSON_GetArrayItem(g, 2)->valuedouble &&
                      p.n_tokens == iv_json_int(want, "tokens", -1) &&
                      p.rows == cJSON_GetArrayItem(shape, 0)->valuedouble &&
                      p.cols == cJSON_GetArrayItem(shape, 1)->valuedouble;
        CHECK_MSG(grid_ok, "%s: grid %lldx%lldx%lld, %lld tokens differ from transformers'", name,
                  (long long)p.grid_thw[0], (long long)p.grid_thw[1], (long long)p.grid_thw[2], (long long)p.n_tokens);
        int64_t nt = -1;
        CHECK(iv_qwen_vl_num_tokens(&cfg, img_h, img_w, &nt, &err) == 0 && nt == p.n_tokens);
        grids += grid_ok;
        if (!grid_ok) {
            iv_qwen_vl_patches_free(&p);
            continue;
        }
        if (iv_json_get(e, "known_difference")) { /* the flattening follows the alpha */
            iv_qwen_vl_patches_free(&p);
            continue;
        }
        size_t total = (size_t)(p.rows * p.cols);
        char hex[65];
        iv_sha256_hex(p.pixel_values, total * sizeof(float), hex);
        int same = !strcmp(hex, iv_json_str(want, "pv_sha256", ""));
        CHECK_MSG(same, "%s: pixel_values not bit-identical to transformers'", name);
        identical += same;
        compared++;
        /* 1/255 of the range, in normalised units: 1/255/std. */
        double tol = 1.0 / 255.0 / (cfg.px.image_std[0] < cfg.px.image_std[1] ? (cfg.px.image_std[0] < cfg.px.image_std[2] ? cfg.px.image_std[0] : cfg.px.image_std[2])
                                                                        : (cfg.px.image_std[1] < cfg.px.image_std[2] ? cfg.px.image_std[1] : cfg.px.image_std[2])) + 1e-6;
        const cJSON *s;
        cJSON_ArrayForEach(s, iv_json_get(want, "samples"))
        {
            size_t i = (size_t)cJSON_GetArrayItem(s, 0)->valuedouble;
            double d = fabs((double)p.pixel_values[i] - cJSON_GetArrayItem(s, 1)->valuedouble);
            if (d > worst) worst = d;
            CHECK_MSG(d <= tol, "%s: pixel_values[%zu] = %g, transformers %g", name, i, p.pixel_values[i],
                      cJSON_GetArrayItem(s, 1)->valuedouble);
        }
        double sum = 0;
        for (size_t i = 0; i < total; i++) sum += p.pixel_values[i];
        double want_sum = iv_json_num(want, "sum", 0);
        CHECK_MSG(fabs(sum - want_sum) <= tol * (double)total, "%s: sum %.6f, transformers %.6f", name, sum, want_sum);
        iv_qwen_vl_patches_free(&p);
    }
    printf("  %s: %d/%d grids and token counts (or refusals) equal, %d/%d pixel_values bit-identical, "
           "max sampled |diff| %g\n", cfg_name, grids, n, identical, compared, worst);
    CHECK(n >= 40);
    cJSON_Delete(root);
}

TEST(image_fixtures_qwen3vl_processor) { check_config("qwen3vl"); }
TEST(image_fixtures_qwen2vl_processor) { check_config("qwen2vl"); }
