/* The placeholders of a rendered, tokenized input replaced by their media
 * runs, images and audio clips together, in text order, and the length
 * rule: runs are kept whole, text is cut around them. The one place both
 * modalities' runs are laid out, so a sequence may hold any mix. */
#ifndef IV_ENGINE_MEDIA_RUNS_H
#define IV_ENGINE_MEDIA_RUNS_H

#include "engine/audio_inputs.h"
#include "engine/image_inputs.h"

/* Replaces the k-th image placeholder by image k's run (the model's
 * image_token_run) and the k-th audio placeholder by clip k's
 * (iv_audio_token_run); *out (malloc'd) receives the expanded ids. The
 * placeholders of each kind must equal its set's count. ip/is or ap/as may
 * be NULL (no media of that kind). */
int iv_media_expand(const iv_image_proc *ip, iv_image_set *is, const iv_audio_proc *ap, iv_audio_set *as,
                    const int32_t *ids, int len, int32_t **out, int *out_len, iv_err *err);

/* Brings an expanded sequence within max tokens: every run is kept whole;
 * text tokens are dropped from the end (from the start when left) until it
 * fits. Errors (IV_E_INVALID): the runs alone exceed max, or truncate is
 * off and the sequence is too long. */
int iv_media_truncate(iv_image_set *is, iv_audio_set *as, int32_t *ids, int *len, int max, int truncate, int left,
                      iv_err *err);

#endif
