/* Images in a typed-decision state (issue 19; docs/decisions.md "Images in
 * the state"). An image part - {"type": "image_url", "image_url": {"url":
 * DATA_URL}} (or the url as a string), or {"type": "input_image",
 * "image_url": DATA_URL} - may stand anywhere in an array or object state:
 * top level (OpenRouter's mixed list of strings and images) or inside chat
 * messages' content (llama.cpp's form). The state still reads as its JSON
 * text, json.dumps(state, ensure_ascii=False), but each image part stands
 * there as the image itself: the text is cut at every image, and the
 * recipe's user message becomes [text, image, text, ...] content parts that
 * the chat template renders with its own image placeholders. */
#ifndef IV_DECISIONS_STATE_IMAGES_H
#define IV_DECISIONS_STATE_IMAGES_H

#include <cJSON.h>
#include <stddef.h>

#include "decisions/contract.h"

/* Finds the image parts of state in text order, fills r->n_images,
 * r->image_src (borrowed from the body) and r->state_pieces (n_images + 1
 * texts, owned). An image part without its image as a string is 422 and
 * more than lim->max_images images 413 (both added to e). */
void iv_dq_state_images(const cJSON *state, const iv_dq_limits *lim, iv_dq_request *r, iv_dq_errors *e);
void iv_dq_state_images_free(iv_dq_request *r);

/* A recipe's user content around the state: the string before + state_text
 * + after when the state holds no image, else the content parts
 * [{"type":"text","text": before + piece 0}, {"type":"image"},
 *  {"type":"text","text": piece 1}, ..., {"type":"text","text": piece n + after}]
 * (the images, in order, are the request's; the engine decodes them once).
 * NULL out of memory. */
cJSON *iv_dq_state_content(const iv_dq_request *r, const char *before, const char *after);

/* A recipe's conversation: system, then the user message "State:\n" +
 * the state + after (iv_dq_state_content). NULL out of memory. */
cJSON *iv_dq_messages(const iv_dq_request *r, const char *system, const char *after);

#endif
