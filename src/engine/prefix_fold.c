/* Folding a batch in the engine (engine/prefix_fold.h). */
#include "engine/prefix_fold.h"

#include <string.h>

#include "models/fold.h"
#include "models/taps.h"

/* The cached prefix each sequence starts with (pinned, deduplicated into
 * prefixes[]), or -1 / IV_FOLD_ALONE. */
static int find_cached(iv_prefix_cache *cache, const iv_seq_input *seqs, const iv_batch *b, int *seq_prefix,
                       iv_fold_prefix *prefixes, iv_fold_pins *pins)
{
    int n_prefixes = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        seq_prefix[s] = seqs[s].no_fold ? IV_FOLD_ALONE : -1;
        if (!cache || seqs[s].no_fold) continue;
        iv_prefix_entry *e = iv_prefix_cache_lookup(cache, b->ids + b->cu_seqlens[s], iv_batch_seqlen(b, s));
        if (!e) continue;
        int i = 0;
        while (i < pins->n_read && pins->read[i] != e) i++;
        if (i < pins->n_read) {
            iv_prefix_cache_release(cache, e); /* pinned once is enough */
        } else {
            pins->read[pins->n_read++] = e;
            prefixes[n_prefixes++] = *iv_prefix_entry_states(e);
        }
        seq_prefix[s] = i;
    }
    return n_prefixes;
}

int iv_fold_forward(const iv_model *m, iv_prefix_cache *cache, const iv_seq_input *seqs, const iv_batch *b,
                    const iv_fwd_mem *mem, iv_fold_pins *pins, iv_fold_stats *stats, iv_view *hidden, iv_err *err)
{
    memset(pins, 0, sizeof *pins);
    if (m->no_fold_reason || !m->ops->attention_rows || b->key_mask || b->n_seqs < 1 || iv_taps_active()) return 0;
    if (!cache && b->n_seqs < 2) return 0; /* nothing to share with */
    const int n = b->n_seqs;
    int *seq_prefix = iv_arena_alloc(mem->host, (size_t)n * sizeof(int));
    iv_fold_prefix *prefixes = iv_arena_alloc(mem->host, (size_t)n * sizeof *prefixes);
    pins->read = iv_arena_alloc(mem->host, (size_t)n * sizeof *pins->read);
    pins->filled = iv_arena_alloc(mem->host, (size_t)n * sizeof *pins->filled);
    if (!seq_prefix || !prefixes || !pins->read || !pins->filled)
        return iv_errf(err, IV_E_NOMEM, "out of memory folding a batch");
    const int n_prefixes = find_cached(cache, seqs, b, seq_prefix, prefixes, pins);
    iv_fold_plan plan;
    if (iv_fold_build(b, seq_prefix, prefixes, n_prefixes, mem->host, &plan, err)) return -1;
    const int worthwhile = iv_fold_worthwhile(&plan, b);
    if (cache) {
        /* What this batch reads from the cache (nothing when it runs unfolded). */
        int hits = 0, misses = 0;
        uint64_t reused = 0;
        for (int s = 0; s < n; s++) {
            if (seq_prefix[s] == IV_FOLD_ALONE) continue;
            const int hit = worthwhile && seq_prefix[s] >= 0;
            hits += hit;
            misses += !hit;
            if (hit) reused += (uint64_t)prefixes[seq_prefix[s]].len;
        }
        iv_prefix_cache_count(cache, hits, misses, reused);
    }
    if (!worthwhile) return 0; /* the caller releases the pins */

    /* Shared runs from position 0 become cache entries. */
    iv_fold_kv *store = iv_arena_alloc(mem->host, (size_t)(plan.n_shared > 0 ? plan.n_shared : 1) * sizeof *store);
    iv_view *store_final = iv_arena_alloc(mem->host, (size_t)(plan.n_shared > 0 ? plan.n_shared : 1) * sizeof *store_final);
    if (!store || !store_final) return iv_errf(err, IV_E_NOMEM, "out of memory folding a batch");
    int n_store = 0;
    for (int i = 0; cache && i < plan.n_shared; i++) {
        const iv_fold_shared *sh = &plan.shared[i];
        if (sh->len < IV_PREFIX_CACHE_MIN_TOKENS) continue;
        iv_prefix_entry *e = iv_prefix_cache_reserve(cache, b->ids + b->cu_seqlens[sh->seq], (int)sh->len,
                                                     &store[n_store], &store_final[n_store]);
        if (!e) continue;
        store[n_store++].row0 = sh->row0;
        pins->filled[pins->n_filled++] = e;
    }
    if (iv_model_forward_folded(m, b, &plan, prefixes, store, store_final, n_store, mem, hidden, err)) return -1;
    stats->batches++;
    stats->tokens_in += (uint64_t)b->n_tokens;
    stats->tokens_computed += (uint64_t)plan.batch.n_tokens;
    return 1;
}

void iv_fold_pins_release(iv_prefix_cache *cache, iv_fold_pins *pins, int ok)
{
    if (!cache) return;
    for (int i = 0; i < pins->n_read; i++) iv_prefix_cache_release(cache, pins->read[i]);
    for (int i = 0; i < pins->n_filled; i++) iv_prefix_cache_finish(cache, pins->filled[i], ok);
    pins->n_read = pins->n_filled = 0;
}
