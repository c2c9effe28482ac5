/* The Qwen2-VL / Qwen3-VL image processor (transformers'
 * Qwen2VLImageProcessor, its PIL path), configured by the checkpoint's
 * preprocessor_config.json: transparency flattened over white, smart_resize
 * to multiples of patch_size * merge_size within [min_pixels, max_pixels],
 * PIL's bicubic resize, rescale and normalise in float32 as numpy does,
 * each frame repeated temporal_patch_size times (a still image), and the
 * patches flattened in the processor's merge-blocked order. */
#ifndef IV_IMAGE_QWEN_VL_H
#define IV_IMAGE_QWEN_VL_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "image/image.h"
#include "image/processor_keys.h"

typedef struct iv_qwen_vl_config {
    int patch_size, temporal_patch_size, merge_size;
    int64_t min_pixels, max_pixels; /* size.shortest_edge / size.longest_edge */
    int do_resize;
    iv_pixel_steps px;
} iv_qwen_vl_config;

/* The processor class's defaults (patch 14, merge 2, temporal 2, 56*56 to
 * 28*28*1280 pixels, OpenAI CLIP mean/std). */
void iv_qwen_vl_config_default(iv_qwen_vl_config *cfg);
/* Parses preprocessor_config.json text over the defaults. Unknown keys,
 * and known ones with values this processor cannot honour, are errors
 * that name the key. */
int iv_qwen_vl_config_parse(iv_qwen_vl_config *cfg, const char *json, size_t len, iv_err *err);
/* From a checkpoint directory: preprocessor_config.json, else the
 * "image_processor" object of processor_config.json. */
int iv_qwen_vl_config_load(iv_qwen_vl_config *cfg, const char *dir, iv_err *err);

/* transformers' smart_resize: the target height and width. */
int iv_qwen_vl_smart_resize(const iv_qwen_vl_config *cfg, int height, int width, int *out_h,
                            int *out_w, iv_err *err);

/* The image tokens an image of this size becomes, without decoding it
 * (for placeholders and budgets): grid_h * grid_w / merge_size^2 after
 * smart_resize (or of the image as is, when do_resize is off). */
int iv_qwen_vl_num_tokens(const iv_qwen_vl_config *cfg, int height, int width, int64_t *n_tokens, iv_err *err);

typedef struct iv_qwen_vl_patches {
    float *pixel_values; /* rows x cols, row-major */
    int64_t rows;        /* grid_t * grid_h * grid_w */
    int64_t cols;        /* 3 * temporal_patch_size * patch_size^2 */
    int64_t grid_thw[3];
    int64_t n_tokens;    /* grid_t * grid_h * grid_w / merge_size^2: the image tokens */
} iv_qwen_vl_patches;

int iv_qwen_vl_preprocess(const iv_qwen_vl_config *cfg, const iv_image *img, iv_qwen_vl_patches *out,
                          iv_err *err);
void iv_qwen_vl_patches_free(iv_qwen_vl_patches *p);

/* transformers' convert_to_rgb for an image with transparency: PIL's
 * alpha_composite over opaque white, then RGB. rgb is w*h*3 (written). */
void iv_image_flatten_on_white(const iv_image *img, uint8_t *rgb);

#endif
