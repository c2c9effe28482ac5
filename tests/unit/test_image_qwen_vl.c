/* The Qwen2-VL/Qwen3-VL processor's configuration, smart_resize and the
 * patch layout, without fixtures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/qwen_vl.h"
#include "test.h"

static int parse(iv_qwen_vl_config *c, const char *json, iv_err *err)
{
    iv_qwen_vl_config_default(c);
    return iv_qwen_vl_config_parse(c, json, strlen(json), err);
}

TEST(qwen_vl_config_keys)
{
    iv_qwen_vl_config c;
    iv_err err = {0};
    /* Qwen3-VL's file: size.{shortest,longest}_edge. */
    REQUIRE(parse(&c, "{\"size\": {\"longest_edge\": 16777216, \"shortest_edge\": 65536}, \"patch_size\": 16,"
                      "\"temporal_patch_size\": 2, \"merge_size\": 2, \"image_mean\": [0.5,0.5,0.5],"
                      "\"image_std\": [0.5,0.5,0.5], \"processor_class\": \"Qwen3VLProcessor\","
                      "\"image_processor_type\": \"Qwen2VLImageProcessorFast\"}", &err) == 0);
    CHECK(c.patch_size == 16 && c.merge_size == 2 && c.min_pixels == 65536 && c.max_pixels == 16777216);
    CHECK(c.px.image_std[2] == 0.5 && c.do_resize && c.px.resample == 3);
    /* Qwen2-VL's: min_pixels / max_pixels, which win over size. */
    REQUIRE(parse(&c, "{\"min_pixels\": 3136, \"max_pixels\": 12845056, \"size\": {\"shortest_edge\": 1,"
                      "\"longest_edge\": 2}, \"do_rescale\": true, \"rescale_factor\": 0.00392156862745098,"
                      "\"resample\": 3, \"do_convert_rgb\": true}", &err) == 0);
    CHECK(c.min_pixels == 3136 && c.max_pixels == 12845056 && c.patch_size == 14);
    /* Defaults when the file says nothing. */
    REQUIRE(parse(&c, "{}", &err) == 0);
    CHECK(c.min_pixels == 3136 && c.max_pixels == 1003520 && c.temporal_patch_size == 2);

    struct { const char *json, *needle; } bad[] = {
        {"{\"crop_size\": 224}", "unknown key \"crop_size\""},
        {"{\"size\": {\"height\": 224, \"width\": 224}}", "unknown key \"size.height\""},
        {"{\"size\": 224}", "\"size\" must be an object"},
        {"{\"patch_size\": 0}", "\"patch_size\" must be a positive integer"},
        {"{\"merge_size\": 1.5}", "\"merge_size\" must be a positive integer"},
        {"{\"resample\": 1}", "\"resample\" must be 3 (bicubic) or 2 (bilinear)"},
        {"{\"do_convert_rgb\": false}", "do_convert_rgb"},
        {"{\"do_resize\": 1}", "\"do_resize\" must be true or false"},
        {"{\"image_mean\": [0.5, 0.5]}", "\"image_mean\" must be a number or a list of 3 numbers"},
        {"{\"image_std\": [0.5, 0, 0.5]}", "\"image_std\" has a zero"},
        {"{\"min_pixels\": 5000, \"max_pixels\": 4000}", "is over max_pixels"},
        {"{\"image_processor_type\": \"SiglipImageProcessor\"}", "is not the Qwen2-VL/Qwen3-VL image processor"},
        {"[1, 2]", "not a JSON object"},
        {"{", "preprocessor_config.json"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err.msg[0] = 0;
        CHECK_MSG(parse(&c, bad[i].json, &err) == -1, "accepted %s", bad[i].json);
        CHECK_CONTAINS(err.msg, bad[i].needle);
    }
}

TEST(qwen_vl_config_load_from_dir)
{
    char dir[] = "/tmp/iv_qwen_vl_XXXXXX";
    REQUIRE(mkdtemp(dir));
    char path[256];
    iv_qwen_vl_config c;
    iv_err err = {0};
    CHECK(iv_qwen_vl_config_load(&c, dir, &err) == -1 && err.code == IV_E_NOTFOUND);
    CHECK_CONTAINS(err.msg, "no preprocessor_config.json");
    /* processor_config.json's "image_processor" (newer saves). */
    snprintf(path, sizeof path, "%s/processor_config.json", dir);
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs("{\"image_processor\": {\"patch_size\": 16, \"size\": {\"shortest_edge\": 4096, \"longest_edge\": 65536}}}", f);
    fclose(f);
    CHECK(iv_qwen_vl_config_load(&c, dir, &err) == 0 && c.patch_size == 16 && c.max_pixels == 65536);
    /* preprocessor_config.json wins, and its errors name the file. */
    char path2[256];
    snprintf(path2, sizeof path2, "%s/preprocessor_config.json", dir);
    f = fopen(path2, "w");
    REQUIRE(f);
    fputs("{\"patch_size\": 14, \"bogus\": 1}", f);
    fclose(f);
    CHECK(iv_qwen_vl_config_load(&c, dir, &err) == -1);
    CHECK_CONTAINS(err.msg, "preprocessor_config.json: preprocessor config: unknown key \"bogus\"");
    unlink(path2);
    unlink(path);
    rmdir(dir);
}

TEST(qwen_vl_smart_resize_matches_transformers)
{
    /* (h, w, factor/patch, min, max) -> transformers' smart_resize. */
    struct { int h, w, patch, mn, mx, oh, ow; } cases[] = {
        {1, 1, 16, 65536, 16777216, 256, 256},     {1000, 1000, 14, 3136, 1003520, 980, 980},
        {4000, 3000, 16, 65536, 16777216, 4000, 3008}, {42, 14, 14, 3136, 1003520, 112, 56},
        {70, 98, 14, 3136, 1003520, 56, 112}, /* round() halves to even */
        {8000, 8000, 14, 3136, 1003520, 980, 980}, {10, 2000, 14, 3136, 1003520, 28, 812},
        {5, 900, 14, 3136, 200704, 28, 756},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        iv_qwen_vl_config c;
        iv_qwen_vl_config_default(&c);
        c.patch_size = cases[i].patch, c.min_pixels = cases[i].mn, c.max_pixels = cases[i].mx;
        int oh = 0, ow = 0;
        iv_err err;
        CHECK(iv_qwen_vl_smart_resize(&c, cases[i].h, cases[i].w, &oh, &ow, &err) == 0);
        CHECK_MSG(oh == cases[i].oh && ow == cases[i].ow, "%dx%d -> %dx%d, transformers %dx%d", cases[i].h, cases[i].w,
                  oh, ow, cases[i].oh, cases[i].ow);
    }
    iv_qwen_vl_config c;
    iv_qwen_vl_config_default(&c);
    int oh, ow;
    iv_err err;
    CHECK(iv_qwen_vl_smart_resize(&c, 2, 401, &oh, &ow, &err) == -1);
    CHECK_CONTAINS(err.msg, "aspect ratio 200.5 is over 200");
    CHECK(iv_qwen_vl_smart_resize(&c, 2, 400, &oh, &ow, &err) == 0);
}

TEST(qwen_vl_patch_layout)
{
    /* A 4x4-patch image (patch 2, merge 2, temporal 3) whose pixel values
     * encode their position; no resize, no rescale/normalise. */
    iv_qwen_vl_config c;
    iv_qwen_vl_config_default(&c);
    c.patch_size = 2, c.merge_size = 2, c.temporal_patch_size = 3;
    c.do_resize = c.px.do_rescale = c.px.do_normalize = 0;
    int W = 8, H = 4;
    iv_image img = {W, H, malloc((size_t)W * H * 3), NULL, IV_IMAGE_PNG};
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int ch = 0; ch < 3; ch++) img.rgb[(y * W + x) * 3 + ch] = (uint8_t)(ch * 64 + y * 8 + x);
    iv_qwen_vl_patches p;
    iv_err err;
    REQUIRE(iv_qwen_vl_preprocess(&c, &img, &p, &err) == 0);
    CHECK(p.grid_thw[0] == 1 && p.grid_thw[1] == 2 && p.grid_thw[2] == 4 && p.n_tokens == 2);
    CHECK(p.rows == 8 && p.cols == 3 * 3 * 2 * 2);
    /* Row r = ((bh * (gw/m) + bw) * m + mh) * m + mw; column ((ch*T + t)*P + py)*P + px. */
    int bad = 0;
    for (int bw = 0; bw < 2; bw++)
        for (int mh = 0; mh < 2; mh++)
            for (int mw = 0; mw < 2; mw++)
                for (int ch = 0; ch < 3; ch++)
                    for (int t = 0; t < 3; t++)
                        for (int py = 0; py < 2; py++)
                            for (int px = 0; px < 2; px++) {
                                int r = (bw * 2 + mh) * 2 + mw, col = ((ch * 3 + t) * 2 + py) * 2 + px;
                                int y = mh * 2 + py, x = (bw * 2 + mw) * 2 + px;
                                bad += p.pixel_values[r * p.cols + col] != (float)(ch * 64 + y * 8 + x);
                            }
    CHECK_EQ_INT(bad, 0);
    iv_qwen_vl_patches_free(&p);
    /* Without resizing, sides must be multiples of patch * merge. */
    img.width = 6;
    CHECK(iv_qwen_vl_preprocess(&c, &img, &p, &err) == -1);
    CHECK_CONTAINS(err.msg, "multiples of 4");
    iv_image_free(&img);
}

TEST(qwen_vl_flatten_on_white)
{
    uint8_t rgb[12] = {10, 20, 30, 10, 20, 30, 10, 20, 30, 200, 100, 0}, a[4] = {0, 255, 128, 1}, out[12];
    iv_image img = {4, 1, rgb, a, IV_IMAGE_PNG};
    iv_image_flatten_on_white(&img, out);
    CHECK(out[0] == 255 && out[1] == 255 && out[2] == 255);      /* transparent: white */
    CHECK(out[3] == 10 && out[4] == 20 && out[5] == 30);         /* opaque: unchanged */
    CHECK(out[6] == 132 && out[7] == 137 && out[8] == 142);      /* PIL: alpha_composite */
    CHECK(out[9] == 255 && out[10] == 254 && out[11] == 254);
}
