/* Reading keys of an image processor's preprocessor_config.json, shared by
 * every processor (qwen_vl.c, pixtral.c): the same types, the same error
 * messages naming the key. */
#ifndef IV_IMAGE_PROCESSOR_KEYS_H
#define IV_IMAGE_PROCESSOR_KEYS_H

#include <cJSON.h>

#include "base/err.h"

/* true / false. */
int iv_processor_key_bool(const cJSON *v, const char *key, int *out, iv_err *err);
/* One number for all three channels, or a list of 3 (image_mean, image_std). */
int iv_processor_key_triple(const cJSON *v, const char *key, double out[3], iv_err *err);

#endif
