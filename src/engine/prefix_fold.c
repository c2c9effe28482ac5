/* Folding a batch in the engine (engine/prefix_fold.h). */
#include "engine/prefix_fold.h"

#include <string.h>

#include "models/fold.h"
#include "models/taps.h"

/* Cached blocks already in a batch's prefixes array: an open-addressing
 * map from block to index, so a block many sequences share is pinned and
 * loaded once. */
typedef struct block_map {
    iv_prefix_entry **key;
    int *val;
    size_t mask;
} block_map;

static size_t map_slot(const block_map *m, const iv_prefix_entry *e)
{
    size_t h = (size_t)(uintptr_t)e;
    h ^= h >> 17;
    h *= (size_t)0x9E3779B97F4A7C15ULL;
    size_t i = (h >> 7) & m->mask;
    while (m->key[i] && m->key[i] != e) i = (i + 1) & m->mask;
    return i;
}

/* Per sequence: the last cached block of its chain (index in prefixes,
 * -1 or IV_FOLD_ALONE), the blocks the chain covers and its last block. */
typedef struct seq_cache {
    int *prefix, *blocks;
    iv_prefix_entry **last;
} seq_cache;

/* Looks up every sequence's chain of cached blocks (pinned once per batch,
 * deduplicated into prefixes[]). Returns the number of prefixes, -1 when
 * out of memory. */
static int find_cached(iv_prefix_cache *cache, const iv_seq_input *seqs, const iv_batch *b, seq_cache *sc,
                       iv_fold_prefix *prefixes, iv_fold_pins *pins, iv_arena *host)
{
    const int max_blocks = (int)(b->n_tokens / IV_PREFIX_BLOCK) + 1;
    block_map map = {0};
    size_t cap = 16;
    while (cap < 2 * (size_t)max_blocks) cap *= 2;
    map.key = iv_arena_alloc(host, cap * sizeof *map.key);
    map.val = iv_arena_alloc(host, cap * sizeof *map.val);
    iv_prefix_entry **chain = iv_arena_alloc(host, (size_t)max_blocks * sizeof *chain);
    iv_prefix_entry **dup = iv_arena_alloc(host, (size_t)max_blocks * sizeof *dup);
    if (!map.key || !map.val || !chain || !dup) return -1;
    memset(map.key, 0, cap * sizeof *map.key);
    map.mask = cap - 1;
    int n_prefixes = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        sc->prefix[s] = seqs[s].no_fold ? IV_FOLD_ALONE : -1;
        sc->blocks[s] = 0;
        sc->last[s] = NULL;
        if (!cache || seqs[s].no_fold) continue;
        const int k = iv_prefix_cache_lookup(cache, b->ids + b->cu_seqlens[s], iv_batch_seqlen(b, s), chain);
        int parent = -1, n_dup = 0;
        for (int j = 0; j < k; j++) {
            const size_t slot = map_slot(&map, chain[j]);
            if (map.key[slot]) {
                dup[n_dup++] = chain[j]; /* pinned once is enough */
            } else {
                map.key[slot] = chain[j];
                map.val[slot] = n_prefixes;
                pins->read[pins->n_read++] = chain[j];
                prefixes[n_prefixes] = iv_prefix_entry_states(chain[j]);
                prefixes[n_prefixes++].parent = parent;
            }
            parent = map.val[slot];
        }
        iv_prefix_cache_release(cache, dup, n_dup);
        sc->prefix[s] = parent;
        sc->blocks[s] = k;
        sc->last[s] = k ? chain[k - 1] : NULL;
    }
    return n_prefixes;
}

/* Whether some sequence has a full block beyond its cached chain. */
static int has_new_blocks(const iv_batch *b, const seq_cache *sc)
{
    for (int s = 0; s < b->n_seqs; s++)
        if (sc->prefix[s] != IV_FOLD_ALONE && iv_batch_seqlen(b, s) / IV_PREFIX_BLOCK > sc->blocks[s]) return 1;
    return 0;
}

/* Reserves the blocks each sequence has beyond its cached chain and lists
 * the computed rows the forward copies into them: a block's rows are
 * contiguous unless the trie branches inside it, so it may take several
 * pieces. Returns the number of pieces, -1 on error. */
static int plan_stores(const iv_model *m, iv_prefix_cache *cache, const iv_batch *b, const iv_fold_plan *plan,
                       const seq_cache *sc, iv_fold_pins *pins, iv_fold_kv *store, iv_view *store_final,
                       iv_arena *host, iv_err *err)
{
    int n_store = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        if (sc->prefix[s] == IV_FOLD_ALONE) continue;
        const int32_t start = b->cu_seqlens[s];
        iv_prefix_entry *parent = sc->last[s];
        for (int j = sc->blocks[s]; j < iv_batch_seqlen(b, s) / IV_PREFIX_BLOCK; j++) {
            const int32_t t0 = start + j * IV_PREFIX_BLOCK;
            int fresh;
            iv_fold_prefix st;
            iv_prefix_entry *e = iv_prefix_cache_reserve(cache, parent, b->ids + t0, pins, &fresh, &st);
            if (!e) break; /* no room, or another batch's: nothing further for this sequence */
            parent = e;
            if (!fresh) continue;
            pins->filled[pins->n_filled++] = e;
            for (int i0 = 0, i1; i0 < IV_PREFIX_BLOCK; i0 = i1) {
                const int32_t r0 = plan->out_row[t0 + i0];
                if (r0 < plan->n_cached)
                    return iv_errf(err, IV_E_INTERNAL, "sequence %d: block %d is cached and computed", s, j);
                for (i1 = i0 + 1; i1 < IV_PREFIX_BLOCK && plan->out_row[t0 + i1] == r0 + (i1 - i0); i1++) {}
                iv_fold_kv *p = &store[n_store];
                *p = (iv_fold_kv){.row0 = r0, .len = i1 - i0, .k = st.k, .v = st.v};
                store_final[n_store++] = iv_view_rows(st.final, i0, i1);
                if (i1 - i0 == IV_PREFIX_BLOCK) continue;
                /* Part of the block: views of its rows [i0, i1) at every layer. */
                iv_view *kv = iv_arena_alloc(host, 2 * (size_t)m->n_layers * sizeof *kv);
                if (!kv) return iv_errf(err, IV_E_NOMEM, "out of memory folding a batch");
                for (int l = 0; l < m->n_layers; l++) {
                    kv[l] = iv_view_rows(st.k[l], i0, i1);
                    kv[m->n_layers + l] = iv_view_rows(st.v[l], i0, i1);
                }
                p->k = kv;
                p->v = kv + m->n_layers;
            }
        }
    }
    return n_store;
}

int iv_fold_forward(const iv_model *m, iv_prefix_cache *cache, const iv_seq_input *seqs, const iv_batch *b,
                    const iv_fwd_mem *mem, iv_fold_pins *pins, iv_fold_stats *stats, iv_view *hidden, iv_err *err)
{
    memset(pins, 0, sizeof *pins);
    if (m->no_fold_reason || !m->ops->attention_rows || b->key_mask || b->n_seqs < 1 || iv_taps_active()) return 0;
    if (!cache && b->n_seqs < 2) return 0; /* nothing to share with */
    const int n = b->n_seqs;
    const size_t max_blocks = (size_t)(b->n_tokens / IV_PREFIX_BLOCK) + 1;
    seq_cache sc = {.prefix = iv_arena_alloc(mem->host, (size_t)n * sizeof(int)),
                    .blocks = iv_arena_alloc(mem->host, (size_t)n * sizeof(int)),
                    .last = iv_arena_alloc(mem->host, (size_t)n * sizeof(iv_prefix_entry *))};
    iv_fold_prefix *prefixes = iv_arena_alloc(mem->host, max_blocks * sizeof *prefixes);
    pins->read = iv_arena_alloc(mem->host, max_blocks * sizeof *pins->read);
    pins->filled = iv_arena_alloc(mem->host, max_blocks * sizeof *pins->filled);
    if (!sc.prefix || !sc.blocks || !sc.last || !prefixes || !pins->read || !pins->filled)
        return iv_errf(err, IV_E_NOMEM, "out of memory folding a batch");
    const int n_prefixes = find_cached(cache, seqs, b, &sc, prefixes, pins, mem->host);
    if (n_prefixes < 0) return iv_errf(err, IV_E_NOMEM, "out of memory folding a batch");
    iv_fold_plan plan;
    if (iv_fold_build(b, sc.prefix, prefixes, n_prefixes, mem->host, &plan, err)) return -1;
    const int fold = iv_fold_worthwhile(&plan, b) || (cache && has_new_blocks(b, &sc));
    if (cache) {
        /* What this batch reads from the cache (nothing when it runs unfolded). */
        int hits = 0, misses = 0;
        uint64_t reused = 0;
        for (int s = 0; s < n; s++) {
            if (sc.prefix[s] == IV_FOLD_ALONE) continue;
            const int hit = fold && sc.blocks[s] > 0;
            hits += hit;
            misses += !hit;
            if (hit) reused += (uint64_t)sc.blocks[s] * IV_PREFIX_BLOCK;
        }
        iv_prefix_cache_count(cache, hits, misses, reused);
    }
    if (!fold) return 0; /* the caller releases the pins */

    /* Every full block the cache lacks becomes a cache block. A piece per
     * block at most, but a block the trie branches inside takes more:
     * never more pieces than tokens. */
    const size_t max_store = (size_t)(b->n_tokens > 0 ? b->n_tokens : 1);
    iv_fold_kv *store = iv_arena_alloc(mem->host, max_store * sizeof *store);
    iv_view *store_final = iv_arena_alloc(mem->host, max_store * sizeof *store_final);
    if (!store || !store_final) return iv_errf(err, IV_E_NOMEM, "out of memory folding a batch");
    const int n_store = cache ? plan_stores(m, cache, b, &plan, &sc, pins, store, store_final, mem->host, err) : 0;
    if (n_store < 0) return -1;
    if (iv_model_forward_folded(m, b, &plan, prefixes, store, store_final, n_store, mem, hidden, err)) return -1;
    stats->batches++;
    stats->tokens_in += (uint64_t)b->n_tokens;
    stats->tokens_computed += (uint64_t)plan.batch.n_tokens;
    return 1;
}

void iv_fold_pins_release(iv_prefix_cache *cache, iv_fold_pins *pins, int ok)
{
    if (!cache) return;
    iv_prefix_cache_release(cache, pins->read, pins->n_read);
    /* Children before parents: a dropped block must have none left. */
    for (int i = pins->n_filled - 1; i >= 0; i--) iv_prefix_cache_finish(cache, pins->filled[i], ok);
    pins->n_read = pins->n_filled = 0;
}
