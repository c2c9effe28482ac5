/* Reading an image processor's preprocessor_config.json, shared by every
 * processor (qwen_vl.c, pixtral.c, gemma4.c): where the keys are, the keys
 * that change nothing for one image, the pixel steps they all configure
 * alike, and the same types and error messages naming the key. */
#ifndef IV_IMAGE_PROCESSOR_KEYS_H
#define IV_IMAGE_PROCESSOR_KEYS_H

#include <cJSON.h>
#include <stddef.h>

#include "base/err.h"

/* The steps after the processor's own resize rule: the resize filter,
 * then the rescale and the normalisation of each 8-bit level. */
typedef struct iv_pixel_steps {
    int resample; /* PIL's enum: 3 bicubic (default), 2 bilinear */
    int do_rescale, do_normalize;
    double rescale_factor;
    double image_mean[3], image_std[3];
} iv_pixel_steps;

/* Bicubic, rescaled by 1/255, normalised with mean and std (the class
 * defaults of every processor here but Gemma4's, which does not normalise). */
void iv_pixel_steps_default(iv_pixel_steps *px, const double mean[3], const double std[3]);

/* OpenAI CLIP's mean and std, the default of the Qwen-VL and Pixtral processors. */
extern const double iv_clip_mean[3], iv_clip_std[3];

/* Key k with value v, when it is one of the pixel steps' keys (do_rescale,
 * do_normalize, rescale_factor, resample, image_mean, image_std, and
 * do_convert_rgb, which must stay true): 1 read into px, 0 another key,
 * -1 a value no processor here honours. */
int iv_processor_pixel_key(const char *k, const cJSON *v, iv_pixel_steps *px, iv_err *err);

/* 1 when k describes the file, the batch or the call and changes nothing
 * for one image: the keys every processor has, then the processor's own
 * (extra, NULL-terminated; may be NULL). */
int iv_processor_key_ignored(const char *k, const char *const *extra);

/* true / false. */
int iv_processor_key_bool(const cJSON *v, const char *key, int *out, iv_err *err);

/* The processor's keys in checkpoint directory dir:
 * preprocessor_config.json, else processor_config.json's "image_processor"
 * object. *root is the parsed file (cJSON_Delete it), *keys the object in
 * it, path (n bytes) the file's path for error prefixes. IV_E_NOTFOUND
 * when dir has neither file. */
int iv_processor_keys_load(const char *dir, char *path, size_t n, cJSON **root, const cJSON **keys, iv_err *err);

/* image_processor_type as dir's processor keys name it, copied into type
 * (n bytes); "" when absent or unreadable. */
void iv_processor_type_of(const char *dir, char *type, size_t n);

/* A processor's parser of its keys into its config (the object may be
 * preprocessor_config.json or processor_config.json's "image_processor"). */
typedef int (*iv_processor_parse_fn)(void *cfg, const cJSON *keys, iv_err *err);

/* parse over the JSON text json (len bytes), called preprocessor_config.json
 * in errors. */
int iv_processor_config_parse(void *cfg, iv_processor_parse_fn parse, const char *json, size_t len, iv_err *err);

/* parse over dir's processor keys (iv_processor_keys_load), its errors
 * prefixed with the file's path. */
int iv_processor_config_load(void *cfg, iv_processor_parse_fn parse, const char *dir, iv_err *err);

#endif
