/* The engine's side of prefix folding (models/fold.h): whether a batch
 * folds, which cached prefixes it starts from, which shared prefixes
 * become cache entries, and the pins held until the device is done.
 * docs/prefix-folding.md. */
#ifndef IV_ENGINE_PREFIX_FOLD_H
#define IV_ENGINE_PREFIX_FOLD_H

#include <stdatomic.h>

#include "engine/engine.h"
#include "engine/prefix_cache.h"
#include "models/model.h"

/* Cache blocks a folded batch holds: read (looked up, each once) and being
 * filled (reserved, in reserve order). Released by iv_fold_pins_release
 * once the device has run the batch (after the engine's sync). */
typedef struct iv_fold_pins {
    iv_prefix_entry **read, **filled;
    int n_read, n_filled;
} iv_fold_pins;

/* Counters of one engine's folding, for /metrics: atomics, so the route
 * reads them while the replica runs a batch under the engine's lock. */
typedef struct iv_fold_stats {
    _Atomic uint64_t batches, tokens_in, tokens_computed;
} iv_fold_stats;

/* Runs b folded when the model (m->no_fold_reason), the table
 * (attention_rows) and the batch (text, no key masks) allow it, and either
 * it pays (iv_fold_worthwhile, counting cached blocks) or, with a cache,
 * some sequence has a full block the cache lacks (every sequence's blocks
 * are cached, as vLLM's automatic prefix caching does): 1 with *hidden set as
 * iv_model_forward sets it, 0 when the caller should run the plain
 * forward, -1 on error. cache may be NULL. */
int iv_fold_forward(const iv_model *m, iv_prefix_cache *cache, const iv_seq_input *seqs, const iv_batch *b,
                    const iv_fwd_mem *mem, iv_fold_pins *pins, iv_fold_stats *stats, iv_view *hidden, iv_err *err);
/* Unpins what iv_fold_forward pinned; ok = 0 drops the entries it filled. */
void iv_fold_pins_release(iv_prefix_cache *cache, iv_fold_pins *pins, int ok);

#endif
