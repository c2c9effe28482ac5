/* The prefix cache: a bounded LRU of token prefixes whose states (every
 * layer's keys and values, and the final hidden rows) a folded forward
 * computed, so a later batch that starts with the same tokens copies them
 * instead of computing them (models/fold.h). One cache per engine, that is
 * per model replica, in that replica's device memory: the key is the token
 * prefix, the model is implicit. docs/prefix-folding.md.
 *
 * Entries are pinned while a forward reads or fills them and are never
 * evicted then; an entry being filled is invisible to lookups until
 * committed. Every call takes the cache's mutex, so the statistics may be
 * read from any thread (the /metrics route) while a replica runs. */
#ifndef IV_ENGINE_PREFIX_CACHE_H
#define IV_ENGINE_PREFIX_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "models/fold.h"
#include "ops/ops.h"

typedef struct iv_prefix_cache iv_prefix_cache;
typedef struct iv_prefix_entry iv_prefix_entry;

typedef struct iv_prefix_stats {
    uint64_t hits, misses;      /* sequences that found / did not find a cached prefix */
    uint64_t inserts, evictions;
    uint64_t tokens_reused;     /* prefix tokens served from the cache */
    size_t bytes, capacity;     /* device bytes held by entries, and the bound */
    int entries;
} iv_prefix_stats;

/* Shortest prefix worth an entry (shorter shared runs are recomputed). */
#define IV_PREFIX_CACHE_MIN_TOKENS 16

/* A cache of at most capacity bytes of ops' device memory for a model of
 * n_layers layers with kv_cols key (and value) columns per layer and final
 * rows out_cols wide. NULL when out of memory. */
iv_prefix_cache *iv_prefix_cache_new(const iv_ops *ops, size_t capacity, int n_layers, int64_t kv_cols,
                                     int64_t out_cols);
void iv_prefix_cache_free(iv_prefix_cache *c);

/* The longest committed entry whose tokens are a prefix of ids[0, len),
 * pinned; NULL when none. Not counted: the caller counts what it used
 * (iv_prefix_cache_count). */
iv_prefix_entry *iv_prefix_cache_lookup(iv_prefix_cache *c, const int32_t *ids, int len);
/* The states of an entry (valid while pinned). */
const iv_fold_prefix *iv_prefix_entry_states(const iv_prefix_entry *e);
/* A new pinned, uncommitted entry for ids[0, len), evicting the least
 * recently used unpinned entries to make room; NULL when the tokens are
 * already cached or being filled, when it cannot fit, or out of memory.
 * store/store_final receive the views a folded forward copies into. */
iv_prefix_entry *iv_prefix_cache_reserve(iv_prefix_cache *c, const int32_t *ids, int len, iv_fold_kv *store,
                                         iv_view *store_final);
/* After the forward that filled it: commit = 1 makes the entry visible,
 * 0 (the forward failed) drops it. Either way it is unpinned. */
void iv_prefix_cache_finish(iv_prefix_cache *c, iv_prefix_entry *e, int commit);
/* Unpins an entry lookup returned. */
void iv_prefix_cache_release(iv_prefix_cache *c, iv_prefix_entry *e);

/* Adds to the hit and miss counters: sequences that did / did not start
 * from a cached prefix in a forward, and the prefix tokens they reused. */
void iv_prefix_cache_count(iv_prefix_cache *c, int hits, int misses, uint64_t tokens_reused);
void iv_prefix_cache_stats(iv_prefix_cache *c, iv_prefix_stats *out);

#endif
