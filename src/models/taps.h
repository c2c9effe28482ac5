/* Activation taps: named intermediate states of a forward pass (the
 * embeddings, each layer's attention output and output, the final states),
 * so that when a device disagrees with the CPU the first layer and op where
 * they part can be named. A tap sees device memory through its view and
 * reads it only with iv_ops_download_f32. Off unless a tap is set, or the
 * environment variable IV_TAP_DIR names a directory: each tap is then
 * written there as <layer>_<name>.f32 (raw FP32 rows) with a line
 * "<file> <rows> <cols>" appended to index.txt. */
#ifndef IV_MODELS_TAPS_H
#define IV_MODELS_TAPS_H

#include "ops/ops.h"

/* layer -1: before the first layer (embeddings) or after the last (final). */
typedef void (*iv_tap_fn)(void *ctx, const iv_ops *ops, const char *name, int layer, iv_view v);

/* Process-wide tap (NULL: none); for debugging tools and tests, not for
 * concurrent engines. */
void iv_taps_set(iv_tap_fn fn, void *ctx);
/* 1 when taps are recorded (a tap set, or IV_TAP_DIR): forwards then keep
 * the batch's own rows (no prefix folding), which is what taps describe. */
int iv_taps_active(void);
/* Hands v to the tap, if any. */
void iv_tap(const iv_ops *ops, const char *name, int layer, iv_view v);

#endif
