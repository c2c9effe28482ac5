/* libFuzzer target for image decoding and preprocessing (`make fuzz`):
 *   build/fuzz/fuzz_image -max_total_time=60 tests/fuzz/seeds/image
 * The input's bytes are an image (JPEG, PNG, WebP or GIF), or, when they
 * start with "data:" or "{", a data URL or a preprocessor_config.json.
 * A decoded image also goes through the Qwen-VL and Pixtral processors
 * (small bounds, so the fuzzer stays fast); a config goes to both parsers. Anything must decode or fail with an error,
 * never crash, leak or read past the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image/image.h"
#include "image/pixtral.h"
#include "image/qwen_vl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    iv_err err;
    iv_qwen_vl_config cfg;
    iv_qwen_vl_config_default(&cfg);
    if (size >= 1 && data[0] == '{') {
        iv_qwen_vl_config_parse(&cfg, (const char *)data, size, &err);
        iv_pixtral_config px_cfg;
        iv_pixtral_config_default(&px_cfg);
        iv_pixtral_config_parse(&px_cfg, (const char *)data, size, &err);
        return 0;
    }
    /* Small bounds: a 2-megapixel decode limit, at most 64x64 patches out. */
    iv_image_limits lim = {1 << 21, 1 << 22};
    iv_image img;
    int rc = size >= 5 && !memcmp(data, "data:", 5)
                 ? iv_image_decode_source((const char *)data, size, &lim, &img, &err)
                 : iv_image_decode(data, size, &lim, &img, &err);
    if (rc) return 0;
    cfg.min_pixels = 28 * 28;
    cfg.max_pixels = 28 * 28 * 16;
    iv_qwen_vl_patches p;
    if (iv_qwen_vl_preprocess(&cfg, &img, &p, &err) == 0) iv_qwen_vl_patches_free(&p);
    /* Pixtral: longest edge 64, patch 14, merge 2 (at most 3 x 3 tokens). */
    iv_pixtral_config px_cfg;
    iv_pixtral_config_default(&px_cfg);
    px_cfg.patch_size = 14, px_cfg.merge_size = 2, px_cfg.max_height = px_cfg.max_width = 64;
    iv_pixtral_pixels px;
    if (iv_pixtral_preprocess(&px_cfg, &img, &px, &err) == 0) {
        float *patches = malloc((size_t)px.grid_h * px.grid_w * 3 * 14 * 14 * sizeof(float));
        int32_t *run = malloc((size_t)px.rows * (px.cols + 1) * sizeof(int32_t));
        if (patches) iv_pixtral_patchify(&px_cfg, &px, patches);
        if (run) iv_pixtral_image_token_run(px.rows, px.cols, 10, 12, 13, run);
        free(patches);
        free(run);
        iv_pixtral_pixels_free(&px);
    }
    iv_image_free(&img);
    return 0;
}
