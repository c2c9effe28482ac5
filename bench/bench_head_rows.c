/* The last layer computing only the rows the head reads (docs/head-rows.md)
 * against the full last layer, in one process:
 *
 *   bench_head_rows --model-id DIR [--task classify|embed] [--seqs 32] [--len 128] [--runs 9]
 *
 * Loads the checkpoint twice (default engine, and no_head_rows), builds
 * `seqs` sequences of `len` tokens (fixed pseudo-random ids with [CLS]/[SEP]-
 * like ends; token types of a pair for classify), and runs them as one
 * batch, alternating the two engines run by run after a warm-up of each.
 * Prints the median batch time and sequences per second of each, their
 * ratio and the largest output difference. Threads: OMP_NUM_THREADS. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static iv_engine *load(const char *dir, int no_head_rows)
{
    const iv_engine_opts o = {.no_head_rows = no_head_rows};
    iv_engine *e;
    iv_err err = {0};
    if (iv_engine_load(&e, dir, &o, &err)) {
        fprintf(stderr, "bench_head_rows: %s: %s\n", dir, err.msg);
        exit(1);
    }
    iv_engine_bind_thread(e);
    return e;
}

static double run(iv_engine *e, iv_task task, const iv_seq_input *seqs, int n, iv_outputs *keep)
{
    iv_outputs o;
    iv_err err = {0};
    const double t0 = now_s();
    if (iv_engine_run(e, task, seqs, n, &o, &err)) {
        fprintf(stderr, "bench_head_rows: run failed: %s\n", err.msg);
        exit(1);
    }
    const double t = now_s() - t0;
    if (keep && !keep->data) *keep = o;
    else iv_outputs_free(&o);
    return t;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *task_name = "classify";
    int n = 32, len = 128, runs = 9;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model-id")) dir = argv[i + 1];
        else if (!strcmp(argv[i], "--task")) task_name = argv[i + 1];
        else if (!strcmp(argv[i], "--seqs")) n = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--len")) len = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--runs")) runs = atoi(argv[i + 1]);
    }
    const int classify = !strcmp(task_name, "classify");
    if (!dir || n < 1 || len < 3 || runs < 1 || runs > 99 || (!classify && strcmp(task_name, "embed"))) {
        fprintf(stderr, "usage: bench_head_rows --model-id DIR [--task classify|embed] [--seqs N] [--len N] "
                        "[--runs N]\n");
        return 2;
    }
    const iv_task task = classify ? IV_TASK_CLASSIFY : IV_TASK_EMBED;
    iv_engine *on = load(dir, 0), *off = load(dir, 1);
    const int vocab = iv_engine_vocab_size(on);
    int32_t *ids = malloc((size_t)n * len * sizeof *ids), *types = malloc((size_t)n * len * sizeof *types);
    iv_seq_input *seqs = calloc((size_t)n, sizeof *seqs);
    if (!ids || !types || !seqs) return 1;
    unsigned x = 12345;
    for (int s = 0; s < n; s++) {
        int32_t *si = ids + (size_t)s * len, *st = types + (size_t)s * len;
        for (int t = 0; t < len; t++) {
            x = x * 1664525u + 1013904223u;
            si[t] = 1000 + (int32_t)((x >> 8) % (unsigned)(vocab - 1000));
            st[t] = classify && t >= len / 2;
        }
        si[0] = 101 < vocab ? 101 : 1;
        si[len - 1] = 102 < vocab ? 102 : 2;
        seqs[s] = (iv_seq_input){.ids = si, .type_ids = classify ? st : NULL, .len = len};
    }
    iv_outputs a = {0}, b = {0};
    run(on, task, seqs, n, &a);
    run(off, task, seqs, n, &b);
    double max_diff = 0;
    for (int64_t i = 0; i < a.offsets[a.n_seqs]; i++) {
        const double d = a.data[i] > b.data[i] ? a.data[i] - b.data[i] : b.data[i] - a.data[i];
        if (d > max_diff) max_diff = d;
    }
    double *t_on = malloc((size_t)runs * sizeof(double)), *t_off = malloc((size_t)runs * sizeof(double));
    for (int r = 0; r < runs; r++) {
        /* Alternate which goes first, so drift in the machine's state hits both alike. */
        if (r % 2) {
            t_off[r] = run(off, task, seqs, n, NULL);
            t_on[r] = run(on, task, seqs, n, NULL);
        } else {
            t_on[r] = run(on, task, seqs, n, NULL);
            t_off[r] = run(off, task, seqs, n, NULL);
        }
    }
    qsort(t_on, (size_t)runs, sizeof(double), cmp_double);
    qsort(t_off, (size_t)runs, sizeof(double), cmp_double);
    const double m_on = t_on[runs / 2], m_off = t_off[runs / 2];
    printf("{\"model\": \"%s\", \"task\": \"%s\", \"seqs\": %d, \"len\": %d, \"threads\": %d, \"runs\": %d, "
           "\"head_rows_s\": %.4f, \"all_rows_s\": %.4f, \"head_rows_seqs_per_s\": %.1f, "
           "\"all_rows_seqs_per_s\": %.1f, \"speedup\": %.4f, \"head_rows_batches\": %llu, \"max_abs_diff\": %.3e}\n",
           dir, task_name, n, len, omp_get_max_threads(), runs, m_on, m_off, n / m_on, n / m_off, m_off / m_on,
           (unsigned long long)iv_engine_head_rows_batches(on), max_diff);
    iv_outputs_free(&a);
    iv_outputs_free(&b);
    free(t_on);
    free(t_off);
    free(ids);
    free(types);
    free(seqs);
    iv_engine_free(on);
    iv_engine_free(off);
    return 0;
}
