/* The prefix cache: a bounded LRU of token blocks whose states (every
 * layer's keys and values, and the final hidden rows) a folded forward
 * computed, so a later batch that starts with the same tokens copies them
 * instead of computing them (models/fold.h). Like vLLM's automatic prefix
 * caching, every sequence's full blocks of IV_PREFIX_BLOCK tokens are kept,
 * not only prefixes shared within a batch: a block is keyed by its tokens
 * and the block before it (so by the whole token prefix up to its end), and
 * the blocks form a tree. A repeated request finds all of each sequence but
 * its last partial block; a new request that shares the instruction, query
 * and part of a document finds every full block up to where it differs.
 *
 * One cache per engine, that is per model replica, in that replica's
 * device memory: the model is implicit. Entries are pinned while a forward
 * reads or fills them and are never evicted then; only leaves (blocks no
 * other block continues) are evicted, least recently used first, so a
 * cached block's ancestors are always cached. A block being filled is
 * invisible to lookups until committed. Every call takes the cache's mutex,
 * so the statistics may be read from any thread (the /metrics route) while
 * a replica runs. docs/prefix-folding.md. */
#ifndef IV_ENGINE_PREFIX_CACHE_H
#define IV_ENGINE_PREFIX_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "models/fold.h"
#include "ops/ops.h"

typedef struct iv_prefix_cache iv_prefix_cache;
typedef struct iv_prefix_entry iv_prefix_entry;

typedef struct iv_prefix_stats {
    uint64_t hits, misses;      /* sequences that found / did not find a cached block */
    uint64_t inserts, evictions; /* blocks */
    uint64_t tokens_reused;     /* tokens served from the cache */
    size_t bytes, capacity;     /* device bytes held by blocks, and the bound */
    int entries;                /* blocks */
} iv_prefix_stats;

/* Tokens per block (vLLM's default). A sequence's tokens after its last
 * full block are recomputed on every hit; a sequence of whole blocks is
 * served from the cache entirely, final rows included. */
#define IV_PREFIX_BLOCK 16

/* A cache of at most capacity bytes of ops' device memory for a model of
 * n_layers layers with kv_cols key (and value) columns per layer and final
 * rows out_cols wide. NULL when out of memory. */
iv_prefix_cache *iv_prefix_cache_new(const iv_ops *ops, size_t capacity, int n_layers, int64_t kv_cols,
                                     int64_t out_cols);
void iv_prefix_cache_free(iv_prefix_cache *c);

/* The longest chain of committed blocks that covers ids[0, k * IV_PREFIX_BLOCK)
 * for the largest k <= len / IV_PREFIX_BLOCK: its blocks in order into
 * chain[] (room for len / IV_PREFIX_BLOCK), each pinned and marked used.
 * Returns k. Not counted: the caller counts what it used (iv_prefix_cache_count). */
int iv_prefix_cache_lookup(iv_prefix_cache *c, const int32_t *ids, int len, iv_prefix_entry **chain);
/* The states of a block (valid while pinned): its IV_PREFIX_BLOCK rows.
 * pos0 is set; parent is -1 (the caller indexes its own prefixes). */
iv_fold_prefix iv_prefix_entry_states(const iv_prefix_entry *e);
/* A block for the IV_PREFIX_BLOCK tokens ids[0, IV_PREFIX_BLOCK) that follow
 * `parent` (a block the caller holds pinned, or NULL for a sequence's first
 * block). Returns
 * - a new pinned, uncommitted block (*fresh = 1) whose views (states) the
 *   forward fills, evicting least recently used unpinned leaves to make room;
 * - the block already reserved for these tokens by the same owner (*fresh = 0:
 *   another sequence of the same batch fills it; it may parent further blocks);
 * - NULL when the block exists otherwise (committed, or being filled by
 *   another owner), cannot fit, or out of memory: the sequence stores no
 *   further block. */
iv_prefix_entry *iv_prefix_cache_reserve(iv_prefix_cache *c, iv_prefix_entry *parent, const int32_t *ids,
                                         const void *owner, int *fresh, iv_fold_prefix *states);
/* After the forward that filled it: commit = 1 makes the block visible,
 * 0 (the forward failed) drops it. Either way it is unpinned. Blocks
 * reserved together are finished in the reverse order of reserve (a
 * dropped block's children first). */
void iv_prefix_cache_finish(iv_prefix_cache *c, iv_prefix_entry *e, int commit);
/* Unpins n blocks lookup returned. */
void iv_prefix_cache_release(iv_prefix_cache *c, iv_prefix_entry *const *e, int n);

/* Adds to the hit and miss counters: sequences that did / did not start
 * from a cached block in a forward, and the tokens they reused. */
void iv_prefix_cache_count(iv_prefix_cache *c, int hits, int misses, uint64_t tokens_reused);
void iv_prefix_cache_stats(iv_prefix_cache *c, iv_prefix_stats *out);

#endif
