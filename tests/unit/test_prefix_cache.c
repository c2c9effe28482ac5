/* Prefix folding through the engine and the prefix cache
 * (engine/prefix_fold.h, engine/prefix_cache.h): a cache hit gives the
 * same bits as the miss that filled it, folded results equal unfolded
 * ones, entries are evicted by recency within the bound, and sequences
 * marked no_fold (typed decisions) share nothing. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/prefix_cache.h"
#include "test.h"

#define FOLD_MAX_ABS 1e-5

static iv_engine *load_engine(const char *name, int no_fold, size_t cache_bytes)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/models/%s", iv_test_fixtures_dir(), name);
    iv_engine_opts o = {.no_prefix_fold = no_fold, .prefix_cache_bytes = cache_bytes};
    iv_engine *e = NULL;
    iv_err err = {0};
    if (iv_engine_load(&e, dir, &o, &err)) iv_test_fail(__FILE__, __LINE__, "%s: %s", name, err.msg);
    return e;
}

/* n sequences: the same `shared` tokens from `base`, then distinct tails. */
typedef struct seq_set {
    int n;
    int32_t ids[8][96];
    iv_seq_input in[8];
} seq_set;

static void make_set(seq_set *s, int n, int32_t base, int shared, int tail)
{
    s->n = n;
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < shared + tail; k++)
            s->ids[i][k] = k < shared ? 1 + (base + 7 * k) % 90 : 1 + (base + 13 * i + 5 * k + 3) % 90;
        s->in[i] = (iv_seq_input){.ids = s->ids[i], .len = shared + tail};
    }
}

static int run(iv_engine *e, iv_task task, const seq_set *s, iv_outputs *o)
{
    iv_err err = {0};
    if (iv_engine_run(e, task, s->in, s->n, o, &err)) return iv_test_fail(__FILE__, __LINE__, "run: %s", err.msg);
    return 1;
}

static double outputs_diff(const iv_outputs *a, const iv_outputs *b)
{
    if (a->cols != b->cols || a->offsets[a->n_seqs] != b->offsets[b->n_seqs]) return 1e30;
    return iv_test_max_abs_diff(a->data, b->data, a->offsets[a->n_seqs]);
}

static int same_bits(const iv_outputs *a, const iv_outputs *b)
{
    return a->offsets[a->n_seqs] == b->offsets[b->n_seqs] &&
           !memcmp(a->data, b->data, (size_t)a->offsets[a->n_seqs] * sizeof(float));
}

static void stats_of(iv_engine *e, iv_prefix_stats *c, uint64_t *batches)
{
    uint64_t in, computed;
    iv_engine_prefix_stats(e, c, batches, &in, &computed);
}

/* Per-token states (EMBED_ALL) on qwen3 and rerank scores on a causal
 * reranker: unfolded, folded (miss, fills the cache), folded again (hit).
 * Six sequences of 40 shared tokens and a tail: with a tail of 9 (49
 * tokens) the hit recomputes each sequence's last token; with a tail of 8
 * (48 tokens, three whole blocks) the hit computes nothing and every row,
 * the final ones included, comes from the cache. */
TEST(prefix_cache_hits_match_misses)
{
    static const struct {
        const char *name;
        iv_task task;
    } cases[] = {{"qwen3", IV_TASK_EMBED_ALL}, {"qwen3", IV_TASK_EMBED}, {"qwen3_causal_rerank_seqcls", IV_TASK_CLASSIFY},
                 {"gemma3", IV_TASK_EMBED_ALL}, {"mistral", IV_TASK_EMBED_ALL}};
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++)
        for (int tail = 8; tail <= 9; tail++) {
            iv_engine *plain = load_engine(cases[ci].name, 1, 0), *cached = load_engine(cases[ci].name, 0, 64 << 20);
            if (!plain || !cached) {
                iv_engine_free(plain);
                iv_engine_free(cached);
                continue;
            }
            seq_set s;
            make_set(&s, 6, 11, 40, tail);
            iv_outputs want, miss, hit;
            if (run(plain, cases[ci].task, &s, &want) && run(cached, cases[ci].task, &s, &miss) &&
                run(cached, cases[ci].task, &s, &hit)) {
                const double d = outputs_diff(&want, &miss);
                CHECK_MSG(d <= FOLD_MAX_ABS, "%s task %d tail %d: folded vs unfolded max abs %.3g", cases[ci].name,
                          (int)cases[ci].task, tail, d);
                CHECK_MSG(same_bits(&miss, &hit), "%s task %d tail %d: cache hit differs from the miss (max abs %.3g)",
                          cases[ci].name, (int)cases[ci].task, tail, outputs_diff(&miss, &hit));
                iv_prefix_stats c;
                uint64_t batches, in, computed;
                iv_engine_prefix_stats(cached, &c, &batches, &in, &computed);
                /* Blocks 0 and 1 (tokens 0-31) are shared; block 2 (32-47) ends in each tail. */
                CHECK_EQ_INT(c.inserts, 2 + 6);
                CHECK_EQ_INT(c.entries, 2 + 6);
                CHECK_EQ_INT(c.hits, 6);
                CHECK_EQ_INT(c.misses, 6);
                CHECK_EQ_INT(c.tokens_reused, 6 * 48);
                CHECK_EQ_INT(c.evictions, 0);
                CHECK_EQ_INT(batches, 2);
                /* The miss computes the 40 shared tokens once and every tail;
                 * the hit only what follows the last whole block. */
                CHECK_EQ_INT(computed, (40 + 6 * tail) + 6 * (tail - 8));
                CHECK(c.bytes > 0 && c.bytes <= c.capacity);
                /* The plain engine never folded. */
                stats_of(plain, &c, &batches);
                CHECK_EQ_INT(batches, 0);
                iv_outputs_free(&want);
                iv_outputs_free(&miss);
                iv_outputs_free(&hit);
            }
            iv_engine_free(plain);
            iv_engine_free(cached);
        }
}

/* A single sequence alone in its batch is cached too (every sequence's
 * blocks, as vLLM keeps them), and a later request that shares only part
 * of a block reads the whole blocks before it and recomputes the rest:
 * the same bits as the same request on a cold cache. */
TEST(prefix_cache_partial_block_hits)
{
    iv_engine *plain = load_engine("qwen3", 1, 0), *cold = load_engine("qwen3", 0, 64 << 20),
              *warm = load_engine("qwen3", 0, 64 << 20);
    REQUIRE(plain && cold && warm);
    seq_set first, later;
    make_set(&first, 1, 4, 70, 0);
    make_set(&later, 3, 4, 70, 0);
    /* Later sequences follow `first` for 40, 20 and 5 tokens (2.5, 1.25
     * and 0.3 blocks), then differ; lengths 70, 53 and 33. */
    const int keep[3] = {40, 20, 5}, lens[3] = {70, 53, 33};
    for (int i = 0; i < 3; i++) {
        for (int k = keep[i]; k < 70; k++) later.ids[i][k] = 1 + (later.ids[i][k] + 31 + 7 * i) % 90;
        later.in[i].len = lens[i];
    }
    iv_outputs o, want, miss, hit;
    if (run(warm, IV_TASK_EMBED_ALL, &first, &o)) iv_outputs_free(&o);
    iv_prefix_stats c;
    uint64_t batches;
    stats_of(warm, &c, &batches);
    CHECK_EQ_INT(batches, 1);
    CHECK_EQ_INT(c.inserts, 4); /* 70 tokens: four whole blocks */
    if (run(plain, IV_TASK_EMBED_ALL, &later, &want) && run(cold, IV_TASK_EMBED_ALL, &later, &miss) &&
        run(warm, IV_TASK_EMBED_ALL, &later, &hit)) {
        CHECK_MSG(outputs_diff(&want, &hit) <= FOLD_MAX_ABS, "partial hits vs unfolded: max abs %.3g",
                  outputs_diff(&want, &hit));
        CHECK_MSG(same_bits(&miss, &hit), "partial-block hits differ from a cold cache (max abs %.3g)",
                  outputs_diff(&miss, &hit));
        stats_of(warm, &c, &batches);
        CHECK_EQ_INT(c.hits, 2);                     /* 40 and 20 shared tokens cover whole blocks; 5 does not */
        CHECK_EQ_INT(c.misses, 1 + 1);               /* `first`, then the 5-token one */
        CHECK_EQ_INT(c.tokens_reused, 2 * 16 + 16);  /* blocks 0-1, then block 0 */
        iv_outputs_free(&want);
        iv_outputs_free(&miss);
        iv_outputs_free(&hit);
    }
    iv_engine_free(plain);
    iv_engine_free(cold);
    iv_engine_free(warm);
}

/* A later batch that shares only the cached prefix (other tails, one
 * sequence equal to the prefix itself) reads it and matches unfolded. */
TEST(prefix_cache_new_tails)
{
    iv_engine *plain = load_engine("llama", 1, 0), *cached = load_engine("llama", 0, 64 << 20);
    REQUIRE(plain && cached);
    seq_set a, b;
    make_set(&a, 4, 3, 48, 6);
    make_set(&b, 5, 3, 48, 11);
    for (int i = 0; i < 5; i++)
        for (int k = 48; k < 59; k++) b.ids[i][k] = 1 + (b.ids[i][k] + 17) % 90;
    b.in[4].len = 48; /* exactly the cached prefix */
    iv_outputs o, want, got;
    if (run(cached, IV_TASK_EMBED_ALL, &a, &o)) iv_outputs_free(&o);
    if (run(plain, IV_TASK_EMBED_ALL, &b, &want) && run(cached, IV_TASK_EMBED_ALL, &b, &got)) {
        const double d = outputs_diff(&want, &got);
        CHECK_MSG(d <= FOLD_MAX_ABS, "new tails after a cached prefix: max abs %.3g", d);
        iv_prefix_stats c;
        uint64_t batches;
        stats_of(cached, &c, &batches);
        CHECK_EQ_INT(c.hits, 5);
        iv_outputs_free(&want);
        iv_outputs_free(&got);
    }
    /* A batch the cache covers entirely: nothing left to compute. */
    seq_set only = b;
    only.n = 1;
    only.in[0] = b.in[4];
    if (run(plain, IV_TASK_EMBED_ALL, &only, &want) && run(cached, IV_TASK_EMBED_ALL, &only, &got)) {
        CHECK_MSG(outputs_diff(&want, &got) <= FOLD_MAX_ABS, "all cached: max abs %.3g", outputs_diff(&want, &got));
        uint64_t batches, in, computed;
        iv_prefix_stats c;
        iv_engine_prefix_stats(cached, &c, &batches, &in, &computed);
        CHECK_EQ_INT(c.hits, 6);
        /* batch 1: three copies of the shared 48; batch 2: five cached; batch 3: all 48 cached */
        CHECK_EQ_INT(in - computed, 3 * 48 + 5 * 48 + 48);
        iv_outputs_free(&want);
        iv_outputs_free(&got);
    }
    iv_engine_free(plain);
    iv_engine_free(cached);
}

/* A bound of four blocks: 48-token sequences (three blocks each) evict
 * the least recently used leaves, never a block a running batch holds or
 * one another block continues; results stay equal to unfolded throughout,
 * and the block that survives gives a hit with the miss's bits. */
TEST(prefix_cache_evicts_lru)
{
    iv_engine *plain = load_engine("qwen3", 1, 0), *probe = load_engine("qwen3", 0, 64 << 20);
    REQUIRE(plain && probe);
    seq_set a, b, one;
    make_set(&a, 1, 5, 48, 0);
    make_set(&b, 1, 9, 48, 0);
    make_set(&one, 1, 5, 16, 0);
    iv_outputs o;
    if (run(probe, IV_TASK_EMBED_ALL, &one, &o)) iv_outputs_free(&o);
    iv_prefix_stats c;
    uint64_t batches;
    stats_of(probe, &c, &batches);
    REQUIRE(c.entries == 1);
    const size_t block = c.bytes;
    iv_engine_free(probe);

    iv_engine *small = load_engine("qwen3", 0, 4 * block + block / 2);
    REQUIRE(small);
    const seq_set *order[] = {&a, &b, &a};
    iv_outputs first_a = {0};
    for (int i = 0; i < 3; i++) {
        iv_outputs want, got;
        if (run(plain, IV_TASK_EMBED_ALL, order[i], &want) && run(small, IV_TASK_EMBED_ALL, order[i], &got)) {
            CHECK_MSG(outputs_diff(&want, &got) <= FOLD_MAX_ABS, "batch %d: max abs %.3g", i, outputs_diff(&want, &got));
            if (i == 0) first_a = got;
            else if (i == 2) CHECK_MSG(same_bits(&first_a, &got), "a after eviction differs from its miss");
            iv_outputs_free(&want);
            if (i == 1) iv_outputs_free(&got);
            if (i == 2) iv_outputs_free(&got);
        }
        stats_of(small, &c, &batches);
        CHECK(c.bytes <= c.capacity && c.entries <= 4);
    }
    iv_outputs_free(&first_a);
    /* a: 3 blocks. b: b0 fits, b1 evicts a2, b2 evicts a1 (a0 is left: b
     * does not use it but it is a leaf used before b's). a again: a0 hits,
     * a1 evicts b2 (b0, b1 are continued), a2 evicts b1. */
    CHECK_EQ_INT(c.inserts, 3 + 3 + 2);
    CHECK_EQ_INT(c.evictions, 2 + 2);
    CHECK_EQ_INT(c.hits, 1);
    CHECK_EQ_INT(c.tokens_reused, 16);
    CHECK_EQ_INT(c.entries, 4);
    iv_engine_free(plain);
    iv_engine_free(small);
}

/* The cache on its own: a pinned chain is never evicted, even when a new
 * block cannot fit without it; a block being filled is invisible to
 * lookups and a second owner cannot take it; a dropped block leaves no
 * trace; unpinned, the chain goes leaf first. */
TEST(prefix_cache_pins_and_leaves)
{
    const iv_ops *ops = iv_cpu_ops();
    const int layers = 2, kv = 8, out = 4;
    /* Room for exactly two blocks (each rounded as the cache rounds). */
    const size_t kvb = ((size_t)IV_PREFIX_BLOCK * kv * 4 + 255) & ~(size_t)255;
    const size_t block = 2 * layers * kvb + (size_t)IV_PREFIX_BLOCK * out * 4;
    iv_prefix_cache *c = iv_prefix_cache_new(ops, 2 * block, layers, kv, out);
    REQUIRE(c);
    int32_t ids[4 * IV_PREFIX_BLOCK];
    for (int i = 0; i < 4 * IV_PREFIX_BLOCK; i++) ids[i] = 100 + i;
    int owner_a, owner_b, fresh;
    iv_fold_prefix st;
    iv_prefix_entry *chain[4];
    iv_prefix_entry *b0 = iv_prefix_cache_reserve(c, NULL, ids, &owner_a, &fresh, &st);
    REQUIRE(b0 && fresh && st.pos0 == 0 && st.len == IV_PREFIX_BLOCK);
    CHECK_EQ_INT(iv_prefix_cache_lookup(c, ids, 64, chain), 0); /* being filled: invisible */
    CHECK(!iv_prefix_cache_reserve(c, NULL, ids, &owner_b, &fresh, &st)); /* another owner's */
    CHECK(iv_prefix_cache_reserve(c, NULL, ids, &owner_a, &fresh, &st) == b0 && !fresh);
    iv_prefix_entry *b1 = iv_prefix_cache_reserve(c, b0, ids + IV_PREFIX_BLOCK, &owner_a, &fresh, &st);
    REQUIRE(b1 && fresh && st.pos0 == IV_PREFIX_BLOCK);
    iv_prefix_cache_finish(c, b1, 1);
    iv_prefix_cache_finish(c, b0, 1);
    /* Both committed and unpinned. A reader pins the chain. */
    CHECK_EQ_INT(iv_prefix_cache_lookup(c, ids, 40, chain), 2);
    CHECK(chain[0] == b0 && chain[1] == b1);
    /* A third block needs room, but the whole chain is pinned. */
    int32_t other[IV_PREFIX_BLOCK];
    for (int i = 0; i < IV_PREFIX_BLOCK; i++) other[i] = 7 + i;
    CHECK(!iv_prefix_cache_reserve(c, NULL, other, &owner_b, &fresh, &st));
    iv_prefix_stats s;
    iv_prefix_cache_stats(c, &s);
    CHECK_EQ_INT(s.evictions, 0);
    CHECK_EQ_INT(s.entries, 2);
    /* Only block 0 still pinned: the leaf b1 goes, never b0. */
    iv_prefix_cache_release(c, &chain[1], 1);
    iv_prefix_entry *o0 = iv_prefix_cache_reserve(c, NULL, other, &owner_b, &fresh, &st);
    REQUIRE(o0 && fresh);
    iv_prefix_cache_stats(c, &s);
    CHECK_EQ_INT(s.evictions, 1);
    CHECK_EQ_INT(iv_prefix_cache_lookup(c, ids, 40, chain + 2), 1); /* b0 is still there */
    iv_prefix_cache_release(c, chain + 2, 1);
    /* A failed fill drops its block. */
    iv_prefix_cache_finish(c, o0, 0);
    iv_prefix_cache_stats(c, &s);
    CHECK_EQ_INT(s.entries, 1);
    CHECK_EQ_INT(s.inserts, 2);
    CHECK_EQ_INT(iv_prefix_cache_lookup(c, other, IV_PREFIX_BLOCK, chain + 2), 0);
    iv_prefix_cache_release(c, chain, 1);
    iv_prefix_cache_stats(c, &s);
    CHECK(s.bytes == block && s.bytes <= s.capacity);
    iv_prefix_cache_free(c);
}

/* Several threads run batches through one engine whose cache holds a few
 * blocks, so batches read blocks others filled and evict others' blocks
 * while the cache's statistics are read: every result has the bits of the
 * same batch on a cold cache. */
typedef struct conc_job {
    iv_engine *e;
    const seq_set *sets;
    const iv_outputs *want;
    int n_sets, thread, mismatches, failures;
} conc_job;

static void *conc_run(void *arg)
{
    conc_job *j = arg;
    for (int r = 0; r < 6; r++) {
        const int k = (j->thread * 5 + r * 3) % j->n_sets;
        iv_outputs o;
        iv_err err = {0};
        if (iv_engine_run(j->e, IV_TASK_EMBED_ALL, j->sets[k].in, j->sets[k].n, &o, &err)) {
            j->failures++;
            continue;
        }
        j->mismatches += !same_bits(&o, &j->want[k]);
        iv_outputs_free(&o);
        iv_prefix_stats s;
        uint64_t batches, in, computed;
        iv_engine_prefix_stats(j->e, &s, &batches, &in, &computed);
        if (s.bytes > s.capacity) j->failures++;
    }
    return NULL;
}

TEST(prefix_cache_concurrent_batches)
{
    enum { N_SETS = 5, N_THREADS = 4 };
    static seq_set sets[N_SETS];
    iv_outputs want[N_SETS];
    /* Overlapping prefixes: sets 0-2 share 40 tokens, 3-4 another 33. */
    for (int i = 0; i < N_SETS; i++) make_set(&sets[i], 3 + i % 2, i < 3 ? 2 : 6, i < 3 ? 40 : 33, 7 + 5 * i);
    for (int i = 0; i < N_SETS; i++) {
        iv_engine *cold = load_engine("qwen3", 0, 64 << 20);
        REQUIRE(cold);
        int ok = run(cold, IV_TASK_EMBED_ALL, &sets[i], &want[i]);
        iv_engine_free(cold);
        REQUIRE(ok);
    }
    iv_engine *probe = load_engine("qwen3", 0, 64 << 20);
    REQUIRE(probe);
    iv_outputs o;
    seq_set one;
    make_set(&one, 1, 5, 16, 0);
    if (run(probe, IV_TASK_EMBED_ALL, &one, &o)) iv_outputs_free(&o);
    iv_prefix_stats c;
    uint64_t batches;
    stats_of(probe, &c, &batches);
    const size_t block = c.bytes;
    iv_engine_free(probe);

    iv_engine *e = load_engine("qwen3", 0, 9 * block);
    REQUIRE(e);
    pthread_t th[N_THREADS];
    conc_job jobs[N_THREADS];
    for (int t = 0; t < N_THREADS; t++) {
        jobs[t] = (conc_job){.e = e, .sets = sets, .want = want, .n_sets = N_SETS, .thread = t};
        REQUIRE(pthread_create(&th[t], NULL, conc_run, &jobs[t]) == 0);
    }
    for (int t = 0; t < N_THREADS; t++) {
        pthread_join(th[t], NULL);
        CHECK_MSG(jobs[t].failures == 0, "thread %d: %d failures", t, jobs[t].failures);
        CHECK_MSG(jobs[t].mismatches == 0, "thread %d: %d results differ from a cold cache", t, jobs[t].mismatches);
    }
    stats_of(e, &c, &batches);
    CHECK(c.hits > 0 && c.evictions > 0);
    CHECK(c.bytes <= c.capacity && c.entries <= 9);
    CHECK_EQ_INT(batches, N_THREADS * 6);
    for (int i = 0; i < N_SETS; i++) iv_outputs_free(&want[i]);
    iv_engine_free(e);
}

/* no_fold sequences (typed decisions) share nothing: with every sequence
 * marked, nothing folds and nothing is cached. */
TEST(prefix_fold_no_fold_sequences)
{
    iv_engine *e = load_engine("qwen3", 0, 64 << 20);
    REQUIRE(e);
    seq_set s;
    make_set(&s, 6, 11, 40, 9);
    for (int i = 0; i < s.n; i++) s.in[i].no_fold = 1;
    iv_outputs o;
    if (run(e, IV_TASK_EMBED_ALL, &s, &o)) iv_outputs_free(&o);
    iv_prefix_stats c;
    uint64_t batches;
    stats_of(e, &c, &batches);
    CHECK_EQ_INT(batches, 0);
    CHECK_EQ_INT(c.inserts, 0);
    CHECK_EQ_INT(c.hits + c.misses, 0);
    iv_engine_free(e);
}

/* Bidirectional models get no cache and never fold, whatever the options. */
TEST(prefix_fold_off_for_bidirectional)
{
    iv_engine *e = load_engine("llama_bidirec", 0, 64 << 20);
    REQUIRE(e);
    CHECK(iv_engine_no_fold_reason(e) != NULL);
    seq_set s;
    make_set(&s, 4, 2, 40, 3);
    iv_outputs o;
    if (run(e, IV_TASK_EMBED_ALL, &s, &o)) iv_outputs_free(&o);
    iv_prefix_stats c;
    uint64_t batches;
    CHECK_EQ_INT(iv_engine_prefix_stats(e, &c, &batches, &(uint64_t){0}, &(uint64_t){0}), 0);
    CHECK_EQ_INT(batches, 0);
    iv_engine_free(e);
}
