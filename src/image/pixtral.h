/* The Pixtral image processor as Mistral3 (and Pixtral) checkpoints use it:
 * transformers' PixtralImageProcessor (its PIL path,
 * PixtralImageProcessorPil) called by PixtralProcessor, configured by the
 * checkpoint's preprocessor_config.json and processor_config.json.
 *
 *   1. transparency flattened over white (convert_to_rgb);
 *   2. resize: with ratio = max(h / max_h, w / max_w), when ratio > 1 each
 *      side becomes floor(side / ratio) (floor, not round, so the image
 *      stays within longest_edge); then each side is rounded *up* to a
 *      multiple of the unit u = patch_size * spatial_merge_size
 *      (PixtralProcessor passes that product as the image processor's
 *      patch_size): ((side - 1) // u + 1) * u. Small images are therefore
 *      enlarged to one unit; a side that floors to 0 is refused, as the
 *      processor refuses it. PIL's resize (bicubic by default, bit for bit,
 *      src/image/resample.c) runs even when the size does not change;
 *   3. rescale and normalise in float32 exactly as numpy does (as the
 *      Qwen processor, the same backend);
 *   4. pixel_values [3, H, W] (the processor pads a batch to its largest
 *      image; the model crops each back, so one image needs no padding).
 *
 * The model reads those pixels as patches (iv_pixtral_patchify), and the
 * text holds for each image rows = H / u lines of cols = W / u [IMG]
 * tokens, each line ended by [IMG_BREAK] except the last, ended by
 * [IMG_END] (iv_pixtral_image_token_run). */
#ifndef IV_IMAGE_PIXTRAL_H
#define IV_IMAGE_PIXTRAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "image/image.h"
#include "image/processor_keys.h"

typedef struct iv_pixtral_config {
    int patch_size;            /* the vision tower's patch (processor_config.json, else preprocessor_config.json) */
    int merge_size;            /* processor_config.json spatial_merge_size (PixtralProcessor's default 1) */
    int max_height, max_width; /* size.longest_edge for both, or size.height / size.width */
    int do_resize;
    iv_pixel_steps px;
} iv_pixtral_config;

/* PixtralImageProcessor's defaults (patch 16, longest edge 1024, OpenAI
 * CLIP mean/std, bicubic) and PixtralProcessor's (no merge). */
void iv_pixtral_config_default(iv_pixtral_config *cfg);
/* Parses preprocessor_config.json text over cfg. Unknown keys, and values
 * this processor cannot honour, are errors naming the key. */
int iv_pixtral_config_parse(iv_pixtral_config *cfg, const char *json, size_t len, iv_err *err);
/* From a checkpoint directory: the defaults, then preprocessor_config.json
 * (else processor_config.json's "image_processor" object), then
 * processor_config.json's patch_size and spatial_merge_size. */
int iv_pixtral_config_load(iv_pixtral_config *cfg, const char *dir, iv_err *err);

/* 1 when dir's preprocessor_config.json (else processor_config.json's
 * "image_processor") names PixtralImageProcessor (or ...Fast), else 0. */
int iv_pixtral_processor_named(const char *dir);

/* The resized height and width (multiples of patch_size * merge_size). */
int iv_pixtral_resize_size(const iv_pixtral_config *cfg, int height, int width, int *out_h, int *out_w,
                           iv_err *err);
/* The image's token grid without decoding it: rows and columns of [IMG]
 * tokens; the run it takes in the text is rows * (cols + 1) tokens. */
int iv_pixtral_token_grid(const iv_pixtral_config *cfg, int height, int width, int *rows, int *cols,
                          iv_err *err);

typedef struct iv_pixtral_pixels {
    float *pixel_values; /* [3, height, width], channel-major as the processor returns it */
    int height, width;   /* the resized size (image_sizes) */
    int grid_h, grid_w;  /* in patches: height / patch_size, width / patch_size */
    int rows, cols;      /* in [IMG] tokens: grid / merge_size */
} iv_pixtral_pixels;

int iv_pixtral_preprocess(const iv_pixtral_config *cfg, const iv_image *img, iv_pixtral_pixels *out, iv_err *err);
void iv_pixtral_pixels_free(iv_pixtral_pixels *p);

/* The patches the vision tower reads: [grid_h * grid_w, 3 * p * p], each
 * row one patch's (channel, row, column) values (the Conv2d's input
 * order), rows in merge-block order (block row, block column, row in the
 * block, column in the block) so that each merge_size^2 consecutive rows
 * are one merged token, as models/vision_pixtral.h expects. out: caller's. */
void iv_pixtral_patchify(const iv_pixtral_config *cfg, const iv_pixtral_pixels *px, float *out);

/* The token run one image becomes in the text (PixtralProcessor's
 * replace_image_token): rows lines of cols img_id, each followed by
 * break_id, the last by end_id instead. Writes rows * (cols + 1) ids to
 * out; returns that count (0 when rows or cols is not positive). This is
 * the expansion of one image placeholder for Mistral3 checkpoints: the ids
 * are the tokenizer's "[IMG]", "[IMG_BREAK]" and "[IMG_END]" (config.json
 * image_token_index is [IMG]'s). */
int64_t iv_pixtral_image_token_run(int rows, int cols, int32_t img_id, int32_t break_id, int32_t end_id,
                                   int32_t *out);

#endif
