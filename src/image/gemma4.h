/* The Gemma4 image processor as Gemma4 checkpoints use it: transformers'
 * Gemma4ImageProcessor (its PIL path, Gemma4ImageProcessorPil) called by
 * Gemma4Processor, configured by the checkpoint's preprocessor_config.json
 * (else processor_config.json's "image_processor").
 *
 *   1. transparency flattened over white (convert_to_rgb, as the other
 *      PIL-path processors);
 *   2. aspect-ratio-preserving resize (get_aspect_ratio_preserving_size):
 *      with max_patches = max_soft_tokens * k^2 (k = pooling_kernel_size)
 *      and u = k * patch_size, each side is scaled by
 *      sqrt(max_patches * p^2 / (h * w)) and floored to a multiple of u; a
 *      side that floors to 0 becomes u and the other
 *      min(floor(long / short) * u, (max_patches / k^2) * u). PIL's resize
 *      (bicubic by default, bit for bit: src/image/resample.c) runs only
 *      when the size changes;
 *   3. rescale (numpy float64 times the factor, cast to float32) and, only
 *      when do_normalize (off in every Gemma4 checkpoint: the model scales
 *      pixels to [-1, 1] itself), float32 (x - mean) / std;
 *   4. patches: [grid_h * grid_w, p * p * 3] in raster order, each row a
 *      patch's (row, column, channel) values (convert_image_to_patches),
 *      with the patch's (x, y) position; the processor pads to max_patches
 *      rows with position -1, which the model drops again, so one image
 *      needs no padding here.
 *
 * Gemma4 unified (transformers' Gemma4UnifiedImageProcessor, named in the
 * file): steps 1-3 are the same (its resize is torchvision's antialiased
 * bicubic on uint8, PIL's algorithm: within 1/255 of ours, equal where the
 * image keeps its size), then patches_merge groups each k x k block of
 * patches into one row: rows are whole (k p)^2 * 3 model patches in raster
 * order, each (row, column, channel) of the block, one soft token each.
 *
 * Each image becomes grid_h * grid_w / k^2 soft tokens; in the text, the
 * image placeholder is replaced by <boi>, that many image tokens, <eoi>
 * (Gemma4Processor.replace_image_token; iv_gemma4_image_token_run). */
#ifndef IV_IMAGE_GEMMA4_H
#define IV_IMAGE_GEMMA4_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "image/image.h"
#include "image/processor_keys.h"

typedef struct iv_gemma4_image_config {
    int patch_size;          /* 16 */
    int max_soft_tokens;     /* 280; one of 70, 140, 280, 560, 1120 as the processor requires */
    int pooling_kernel_size; /* 3 */
    int do_resize;
    iv_pixel_steps px;
    int merged; /* Gemma4UnifiedImageProcessor: each row one k x k block (patches_merge) */
} iv_gemma4_image_config;

/* Gemma4ImageProcessorPil's class defaults. */
void iv_gemma4_image_config_default(iv_gemma4_image_config *cfg);
/* Parses preprocessor_config.json text over cfg. Unknown keys, and values
 * this processor cannot honour, are errors naming the key. */
int iv_gemma4_image_config_parse(iv_gemma4_image_config *cfg, const char *json, size_t len, iv_err *err);
/* From a checkpoint directory: the defaults, then preprocessor_config.json
 * (else processor_config.json's "image_processor" object). */
int iv_gemma4_image_config_load(iv_gemma4_image_config *cfg, const char *dir, iv_err *err);
/* 1 when dir's preprocessor_config.json (else processor_config.json's
 * "image_processor") names Gemma4ImageProcessor (or ...Pil / ...Fast) or
 * Gemma4UnifiedImageProcessor. */
int iv_gemma4_processor_named(const char *dir);

/* The resized height and width (multiples of patch_size *
 * pooling_kernel_size), or the processor's refusal. */
int iv_gemma4_resize_size(const iv_gemma4_image_config *cfg, int height, int width, int *out_h, int *out_w,
                          iv_err *err);
/* The image's soft token count without decoding it. */
int iv_gemma4_soft_tokens(const iv_gemma4_image_config *cfg, int height, int width, int *n, iv_err *err);

typedef struct iv_gemma4_pixels {
    float *pixel_values; /* [3, height, width], channel-major */
    int height, width;   /* the resized size */
    int grid_h, grid_w;  /* in patches */
    int soft_tokens;     /* grid_h * grid_w / k^2 */
} iv_gemma4_pixels;

int iv_gemma4_preprocess(const iv_gemma4_image_config *cfg, const iv_image *img, iv_gemma4_pixels *out,
                         iv_err *err);
void iv_gemma4_pixels_free(iv_gemma4_pixels *p);

/* The side in pixels of the square each pixel_values row covers: p, or
 * k p for the unified processor. */
int iv_gemma4_row_side(const iv_gemma4_image_config *cfg);

/* The processor's pixel_values rows for this image (unpadded): [rows_h *
 * rows_w, s * s * 3] with s = iv_gemma4_row_side and rows_h = height / s,
 * raster order, each row (row, column, channel). out: caller's. */
void iv_gemma4_patchify(const iv_gemma4_image_config *cfg, const iv_gemma4_pixels *px, float *out);

/* The run one image placeholder becomes: boi_id, n_soft image_id, eoi_id.
 * Writes n_soft + 2 ids to out when out is not NULL; returns that count (0
 * when n_soft is not positive). */
int64_t iv_gemma4_image_token_run(int n_soft, int32_t boi_id, int32_t image_id, int32_t eoi_id, int32_t *out);

#endif
