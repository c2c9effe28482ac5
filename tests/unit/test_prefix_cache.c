/* Prefix folding through the engine and the prefix cache
 * (engine/prefix_fold.h, engine/prefix_cache.h): a cache hit gives the
 * same bits as the miss that filled it, folded results equal unfolded
 * ones, entries are evicted by recency within the bound, and sequences
 * marked no_fold (typed decisions) share nothing. */
#include <stdlib.h>

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
 * reranker: unfolded, folded (miss, fills the cache), folded again (hit). */
TEST(prefix_cache_hits_match_misses)
{
    static const struct {
        const char *name;
        iv_task task;
    } cases[] = {{"qwen3", IV_TASK_EMBED_ALL}, {"qwen3", IV_TASK_EMBED}, {"qwen3_causal_rerank_seqcls", IV_TASK_CLASSIFY},
                 {"gemma3", IV_TASK_EMBED_ALL}, {"mistral", IV_TASK_EMBED_ALL}};
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        iv_engine *plain = load_engine(cases[ci].name, 1, 0), *cached = load_engine(cases[ci].name, 0, 64 << 20);
        if (!plain || !cached) {
            iv_engine_free(plain);
            iv_engine_free(cached);
            continue;
        }
        seq_set s;
        make_set(&s, 6, 11, 40, 9);
        iv_outputs want, miss, hit;
        if (run(plain, cases[ci].task, &s, &want) && run(cached, cases[ci].task, &s, &miss) &&
            run(cached, cases[ci].task, &s, &hit)) {
            const double d = outputs_diff(&want, &miss);
            CHECK_MSG(d <= FOLD_MAX_ABS, "%s task %d: folded vs unfolded max abs %.3g", cases[ci].name,
                      (int)cases[ci].task, d);
            CHECK_MSG(same_bits(&miss, &hit), "%s task %d: cache hit differs from the miss (max abs %.3g)",
                      cases[ci].name, (int)cases[ci].task, outputs_diff(&miss, &hit));
            iv_prefix_stats c;
            uint64_t batches;
            stats_of(cached, &c, &batches);
            CHECK_EQ_INT(c.inserts, 1);
            CHECK_EQ_INT(c.hits, 6);
            CHECK_EQ_INT(c.misses, 6);
            CHECK_EQ_INT(c.tokens_reused, 6 * 40);
            CHECK_EQ_INT(batches, 2);
            CHECK(c.bytes > 0 && c.entries == 1);
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

/* A bound that holds one entry: a second prefix evicts the first, the
 * first is then a miss again; results stay equal to unfolded throughout. */
TEST(prefix_cache_evicts_lru)
{
    iv_engine *plain = load_engine("qwen3", 1, 0), *probe = load_engine("qwen3", 0, 64 << 20);
    REQUIRE(plain && probe);
    seq_set a, b;
    make_set(&a, 4, 5, 40, 4);
    make_set(&b, 4, 9, 40, 4);
    iv_outputs o;
    if (run(probe, IV_TASK_EMBED_ALL, &a, &o)) iv_outputs_free(&o);
    iv_prefix_stats c;
    uint64_t batches;
    stats_of(probe, &c, &batches);
    REQUIRE(c.entries == 1);
    const size_t one = c.bytes;
    iv_engine_free(probe);

    iv_engine *small = load_engine("qwen3", 0, one + one / 2);
    REQUIRE(small);
    const seq_set *order[] = {&a, &b, &a};
    for (int i = 0; i < 3; i++) {
        iv_outputs want, got;
        if (run(plain, IV_TASK_EMBED_ALL, order[i], &want) && run(small, IV_TASK_EMBED_ALL, order[i], &got)) {
            CHECK_MSG(outputs_diff(&want, &got) <= FOLD_MAX_ABS, "batch %d: max abs %.3g", i, outputs_diff(&want, &got));
            iv_outputs_free(&want);
            iv_outputs_free(&got);
        }
    }
    stats_of(small, &c, &batches);
    CHECK_EQ_INT(c.evictions, 2);
    CHECK_EQ_INT(c.inserts, 3);
    CHECK_EQ_INT(c.hits, 0);
    CHECK_EQ_INT(c.entries, 1);
    CHECK(c.bytes <= c.capacity);
    iv_engine_free(plain);
    iv_engine_free(small);
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
