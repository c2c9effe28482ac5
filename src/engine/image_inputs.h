/* Images in requests, between the client's bytes and iv_seq_input.images
 * (docs/vision.md, "Images in requests"):
 *
 *   source string (data URL / base64) -> decode (src/image/) -> the
 *   checkpoint's processor (Qwen-VL: smart_resize, patches) -> an
 *   iv_image_input with owned pixel values
 *
 * and, once the chat template has rendered one placeholder token per image
 * and the text is tokenized, the family's expansion of each placeholder
 * (iv_model.image_token_run) and a truncation that never cuts an image. */
#ifndef IV_ENGINE_IMAGE_INPUTS_H
#define IV_ENGINE_IMAGE_INPUTS_H

#include <stdint.h>

#include "base/err.h"
#include "image/image.h"
#include "image/gemma4.h"
#include "image/pixtral.h"
#include "image/qwen_vl.h"
#include "models/model.h"
#include "models/vision_gemma4.h"
#include "models/vision_pixtral.h"
#include "models/vision_qwen3vl.h"

/* How one checkpoint takes images. Present (model set) only when the model
 * has a vision tower and an image_token_run hook. */
typedef struct iv_image_proc {
    const iv_model *model;   /* NULL: the model takes no images */
    /* The checkpoint's image processor: Qwen2/3-VL's, Pixtral's for a
     * Mistral3 tower (pixtral set), or Gemma4's (gemma4 set). */
    int pixtral, gemma4;
    iv_qwen_vl_config qwen;
    iv_pixtral_config pix;
    iv_gemma4_image_config g4;
    iv_image_limits limits;  /* decoding bounds (pixels, bytes) */
    /* Text a bare image input gets after the image in its user message
     * (ColQwen3's "Describe the image."), or NULL. */
    const char *image_doc_text;
    /* Why images are refused though the model has a tower (its processor
     * config is missing), "" when they are taken. */
    char refused[512];
} iv_image_proc;

/* Reads the processor config of a model with a tower (preprocessor_config.json
 * or processor_config.json; absent: images are refused with p->refused
 * naming the file, the model still loads for text) and checks it
 * against the tower (patch, temporal patch and merge sizes must agree;
 * Pixtral: patch and spatial merge, and the tokenizer must hold
 * [IMG_BREAK] / [IMG_END], whose ids the caller sets on the model first).
 * max_pixels 0: IV_IMAGE_DEFAULT_MAX_PIXELS. A model without a tower leaves
 * p->model NULL and succeeds. */
int iv_image_proc_load(iv_image_proc *p, const char *dir, const iv_model *m, int64_t max_pixels, iv_err *err);

/* The images of one input, in the order their placeholders come. */
typedef struct iv_image_set {
    int n, cap;
    iv_image_input *in;      /* token_offset set by iv_image_expand */
    float **pixels;          /* owned pixel values of in[i] */
    int64_t *run_start;      /* where image i's run starts in the expanded ids */
    int64_t *run_len;
} iv_image_set;

/* Decodes and preprocesses one image source (a data URL or bare base64;
 * "http(s)://" URLs are refused: the server fetches nothing for requests).
 * Errors name the image by index: IV_E_INVALID for bad bytes, IV_E_TOO_LARGE
 * over a limit. */
int iv_image_set_add(const iv_image_proc *p, iv_image_set *s, const char *src, size_t n, iv_err *err);
void iv_image_set_free(iv_image_set *s);
/* Appends image k of from, already decoded, to s: the pixel values are
 * borrowed (from must outlive s; s frees only what it decoded). */
int iv_image_set_borrow(iv_image_set *s, const iv_image_set *from, int k, iv_err *err);

/* Replaces the k-th placeholder token of ids by image k's run; *out
 * (malloc'd) receives the expanded ids. The number of placeholders must
 * equal s->n. */
int iv_image_expand(const iv_image_proc *p, iv_image_set *s, const int32_t *ids, int len, int32_t **out,
                    int *out_len, iv_err *err);

/* Brings an expanded sequence within max tokens: image runs are always
 * kept whole; text tokens are dropped from the end (from the start when
 * left) until it fits. Errors (IV_E_INVALID): the runs alone exceed max, or
 * truncate is off and the sequence is too long. */
int iv_image_truncate(iv_image_set *s, int32_t *ids, int *len, int max, int truncate, int left, iv_err *err);

/* Total tokens of every run. */
int64_t iv_image_set_tokens(const iv_image_set *s);

#endif
