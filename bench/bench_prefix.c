/* Prefix folding and the prefix cache, timed in one run (docs/prefix-folding.md).
 *
 *   bench_prefix --model-id DIR [--docs 32] [--doc-tokens 100] [--shared-tokens 400]
 *                [--runs 3] [--cache-mb 512] [--out FILE.json]
 *
 * The workload is a rerank request: one shared instruction + query of
 * --shared-tokens tokens before each of --docs documents of --doc-tokens
 * tokens, all in one batch (IV_TASK_EMBED: the random bench checkpoints
 * have no score head; a head reads one row per sequence and costs nothing
 * next to the backbone). Three engines from the same checkpoint run it,
 * run by run in turn so the machine's load affects them alike:
 *   unfolded  --prefix-fold false
 *   folded    the default: the shared prefix computed once per batch
 *   cached    folded with a prefix cache: the first run fills it, the
 *             following runs (the same request repeated) read it
 * and the same for an unshared batch (distinct sequences of the same total
 * length), where folding must decline and cost nothing. Tokens/s count the
 * batch's tokens (shared ones as many times as they appear) over the median
 * wall time. Outputs are compared: folded vs unfolded (max abs), cached vs
 * folded (bits). Prints one JSON object (and writes it to --out). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "engine/engine.h"
#include "engine/prefix_cache.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU seconds of the whole process (every thread): on a machine shared with
 * other jobs, wall time measures them too; CPU time (with
 * OMP_WAIT_POLICY=passive, so idle threads do not spin) measures the work. */
static double cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_stime.tv_sec + 1e-6 * (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

static uint64_t rng = 88172645463325252ULL;
static int vocab_top = 100000; /* ids drawn from [1, vocab_top] */
static int32_t next_id(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return 1 + (int32_t)(rng % (uint64_t)vocab_top);
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One timed run; *keep (when non-NULL and empty) receives the outputs;
 * the run's CPU seconds go to *cpu when non-NULL. */
static double last_cpu;
static double timed(iv_engine *e, const iv_seq_input *in, int n, iv_outputs *keep)
{
    const double c0 = cpu_s();
    iv_outputs o;
    iv_err err = {0};
    const double t0 = now_s();
    if (iv_engine_run(e, IV_TASK_EMBED, in, n, &o, &err)) {
        fprintf(stderr, "bench_prefix: %s\n", err.msg);
        exit(1);
    }
    const double t = now_s() - t0;
    last_cpu = cpu_s() - c0;
    if (keep && !keep->data) *keep = o;
    else iv_outputs_free(&o);
    return t;
}

static double max_abs(const iv_outputs *a, const iv_outputs *b)
{
    double m = 0;
    for (int64_t i = 0; i < a->offsets[a->n_seqs]; i++) {
        const double d = a->data[i] > b->data[i] ? a->data[i] - b->data[i] : b->data[i] - a->data[i];
        if (d > m) m = d;
    }
    return m;
}

static iv_engine *load(const char *dir, int no_fold, size_t cache_bytes)
{
    iv_engine_opts o = {.no_prefix_fold = no_fold, .prefix_cache_bytes = cache_bytes};
    iv_engine *e;
    iv_err err = {0};
    if (iv_engine_load(&e, dir, &o, &err)) {
        fprintf(stderr, "bench_prefix: %s: %s\n", dir, err.msg);
        exit(1);
    }
    iv_engine_bind_thread(e);
    return e;
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *out_path = NULL;
    int docs = 32, doc_tokens = 100, shared = 400, runs = 3, cache_mb = 512;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model-id")) dir = argv[i + 1];
        else if (!strcmp(argv[i], "--docs")) docs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--doc-tokens")) doc_tokens = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--shared-tokens")) shared = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--runs")) runs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--cache-mb")) cache_mb = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--out")) out_path = argv[i + 1];
    }
    if (!dir || docs < 2 || doc_tokens < 1 || shared < 1 || runs < 1 || runs > 64) {
        fprintf(stderr, "usage: bench_prefix --model-id DIR [--docs N] [--doc-tokens N] [--shared-tokens N] "
                        "[--runs N] [--cache-mb N] [--out FILE]\n");
        return 2;
    }
    {
        /* Ids the vocabulary holds (below 100,000 for the real shapes). */
        iv_engine *probe = load(dir, 1, 0);
        const int v = iv_engine_vocab_size(probe);
        if (v - 1 < vocab_top) vocab_top = v - 1;
        iv_engine_free(probe);
    }
    const int len = shared + doc_tokens;
    const long long tokens = (long long)docs * len;
    int32_t *ids = malloc((size_t)tokens * sizeof(int32_t)), *flat = malloc((size_t)tokens * sizeof(int32_t));
    iv_seq_input *rerank = calloc((size_t)docs, sizeof *rerank), *unshared = calloc((size_t)docs, sizeof *unshared);
    if (!ids || !flat || !rerank || !unshared) return 1;
    for (int k = 0; k < shared; k++) ids[k] = next_id();
    for (int d = 0; d < docs; d++) {
        int32_t *s = ids + (int64_t)d * len;
        if (d) memcpy(s, ids, (size_t)shared * sizeof(int32_t));
        for (int k = shared; k < len; k++) s[k] = next_id();
        rerank[d] = (iv_seq_input){.ids = s, .len = len};
    }
    for (long long t = 0; t < tokens; t++) flat[t] = next_id();
    for (int d = 0; d < docs; d++) unshared[d] = (iv_seq_input){.ids = flat + (int64_t)d * len, .len = len};

    double t0 = now_s();
    iv_engine *plain = load(dir, 1, 0), *folded = load(dir, 0, 0), *cached = load(dir, 0, (size_t)cache_mb << 20);
    const double load_s = now_s() - t0;

    iv_outputs o_plain = {0}, o_fold = {0}, o_fill = {0}, o_hit = {0};
    /* Warm-up (pages, OpenMP pools) on the unfolded engine only; the cache
     * engine's first run is the miss that fills the cache, timed apart. */
    timed(plain, rerank, docs, NULL);
    timed(folded, rerank, docs, NULL);
    const double fill_s = timed(cached, rerank, docs, &o_fill);
    double tp[64], tf[64], tc[64], up[64], uf[64], cp[64], cf[64], cc[64], cup[64], cuf[64];
    for (int r = 0; r < runs; r++) {
        tp[r] = timed(plain, rerank, docs, &o_plain), cp[r] = last_cpu;
        tf[r] = timed(folded, rerank, docs, &o_fold), cf[r] = last_cpu;
        tc[r] = timed(cached, rerank, docs, &o_hit), cc[r] = last_cpu;
        up[r] = timed(plain, unshared, docs, NULL), cup[r] = last_cpu;
        uf[r] = timed(folded, unshared, docs, NULL), cuf[r] = last_cpu;
    }
    const double kp = median(cp, runs), kf = median(cf, runs), kc = median(cc, runs);
    const double kup = median(cup, runs), kuf = median(cuf, runs);
    const double mp = median(tp, runs), mf = median(tf, runs), mc = median(tc, runs);
    const double ump = median(up, runs), umf = median(uf, runs);
    iv_prefix_stats cs;
    uint64_t fb, fin, fcomp;
    iv_engine_prefix_stats(cached, &cs, &fb, &fin, &fcomp);
    uint64_t ub, uin, ucomp;
    iv_prefix_stats none;
    iv_engine_prefix_stats(folded, &none, &ub, &uin, &ucomp);

    char buf[8192];
    snprintf(buf, sizeof buf,
             "{\"model\": \"%s\", \"docs\": %d, \"doc_tokens\": %d, \"shared_tokens\": %d, \"batch_tokens\": %lld, "
             "\"runs\": %d, \"load_s\": %.2f,\n"
             " \"unfolded\": {\"median_s\": %.4f, \"tokens_per_s\": %.1f},\n"
             " \"folded\": {\"median_s\": %.4f, \"tokens_per_s\": %.1f, \"speedup\": %.2f},\n"
             " \"cached\": {\"fill_s\": %.4f, \"median_s\": %.4f, \"tokens_per_s\": %.1f, \"speedup\": %.2f, "
             "\"hits\": %llu, \"misses\": %llu, \"entries\": %d, \"bytes\": %zu},\n"
             " \"unshared\": {\"unfolded_median_s\": %.4f, \"fold_on_median_s\": %.4f, \"ratio\": %.3f, "
             "\"folded_batches\": %llu},\n"
             " \"cpu_seconds\": {\"unfolded\": %.3f, \"folded\": %.3f, \"cached\": %.3f, \"folded_speedup\": %.2f, "
             "\"cached_speedup\": %.2f, \"unshared_unfolded\": %.3f, \"unshared_fold_on\": %.3f, \"unshared_ratio\": %.3f},\n"
             " \"folded_vs_unfolded_max_abs\": %.3g, \"cache_hit_same_bits_as_miss\": %s}\n",
             dir, docs, doc_tokens, shared, tokens, runs, load_s, mp, tokens / mp, mf, tokens / mf, mp / mf, fill_s, mc,
             tokens / mc, mp / mc, (unsigned long long)cs.hits, (unsigned long long)cs.misses, cs.entries, cs.bytes,
             ump, umf, umf / ump, (unsigned long long)(ub - (uint64_t)(runs + 1)), kp, kf, kc, kp / kf, kp / kc, kup, kuf, kuf / kup, max_abs(&o_plain, &o_fold),
             !memcmp(o_fill.data, o_hit.data, (size_t)o_fill.offsets[o_fill.n_seqs] * sizeof(float)) ? "true"
                                                                                                     : "false");
    fputs(buf, stdout);
    if (out_path) {
        FILE *f = fopen(out_path, "w");
        if (f) {
            fputs(buf, f);
            fclose(f);
        }
    }
    iv_outputs_free(&o_plain);
    iv_outputs_free(&o_fold);
    iv_outputs_free(&o_fill);
    iv_outputs_free(&o_hit);
    iv_engine_free(plain);
    iv_engine_free(folded);
    iv_engine_free(cached);
    free(ids);
    free(flat);
    free(rerank);
    free(unshared);
    return 0;
}
