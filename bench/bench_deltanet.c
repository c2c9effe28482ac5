/* The gated delta rule on the CPU at Qwen3.5-0.8B's DeltaNet shape (16 key
 * and 16 value heads of 128): nanoseconds per token of the chunked op
 * (delta_chunk, chunk 64) and of the token-by-token recurrence (delta_rule)
 * for one sequence of L tokens, L from 1 to 4096. Flat ns/token over L is
 * the linear cost; the ratio says where the chunked form pays.
 *
 *   make bench-deltanet            (OMP_NUM_THREADS sets the thread count)
 *   build/release/bench_deltanet [--heads Hk Hv] [--dims Dk Dv] [--max L]
 *
 * Prints one line per length and a JSON line per length (prefix "json ")
 * for bench/bench_qwen35.py. Each figure is the best of at least three
 * runs lasting 0.3 s in all, after a warm-up, in CPU time of the process
 * (run it with OMP_NUM_THREADS=1 for per-core figures). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/ops.h"

/* CPU seconds of the process: on a machine shared with other jobs this
 * counts only the time the op ran, where wall time counts theirs too; with
 * one thread it is the wall time an idle machine would show. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static float *rand_buf(int64_t n, float lo, float hi, uint64_t seed)
{
    float *p = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = lo + (hi - lo) * ((float)(s >> 40) / 16777216.0f);
    }
    return p;
}

static double best_time(const iv_ops *ops, const iv_delta_rule_args *a, int chunked)
{
    void (*op)(const iv_ops *, const iv_delta_rule_args *) = chunked ? ops->delta_chunk : ops->delta_rule;
    op(ops, a);
    double best = INFINITY, spent = 0;
    for (int runs = 0; spent < 0.3 || runs < 3; runs++) {
        const double t0 = now_s();
        op(ops, a);
        const double dt = now_s() - t0;
        spent += dt;
        if (dt < best) best = dt;
    }
    return best;
}

int main(int argc, char **argv)
{
    int Hk = 16, Hv = 16, Dk = 128, Dv = 128, max_len = 4096;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--heads") && i + 2 < argc) {
            Hk = atoi(argv[++i]);
            Hv = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--dims") && i + 2 < argc) {
            Dk = atoi(argv[++i]);
            Dv = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--max") && i + 1 < argc) {
            max_len = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: %s [--heads Hk Hv] [--dims Dk Dv] [--max L]\n", argv[0]);
            return 2;
        }
    }
    if (Hk <= 0 || Hv <= 0 || Hv % Hk || Dk <= 0 || Dv <= 0 || max_len <= 0) {
        fprintf(stderr, "bad shape\n");
        return 2;
    }
    const iv_ops *ops = iv_cpu_ops();
    const int64_t T = max_len;
    float *q = rand_buf(T * Hk * Dk, -1, 1, 1), *k = rand_buf(T * Hk * Dk, -1, 1, 2);
    float *v = rand_buf(T * Hv * Dv, -1, 1, 3), *a = rand_buf(T * Hv, -4, 1, 4), *b = rand_buf(T * Hv, -2, 2, 5);
    float *a_log = rand_buf(Hv, -0.5f, 0.5f, 6), *dt = rand_buf(Hv, -0.5f, 0.5f, 7);
    float *out = malloc((size_t)(T * Hv * Dv) * sizeof(float));
    iv_tensor alt = iv_tensor_1d(a_log, Hv), dtt = iv_tensor_1d(dt, Hv);
    printf("delta rule, one sequence, %d key / %d value heads of %d / %d, %d threads\n", Hk, Hv, Dk, Dv,
           omp_get_max_threads());
    printf("%6s %14s %14s %8s\n", "L", "chunk ns/tok", "recur ns/tok", "speedup");
    static const int lens[] = {1, 4, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0] && lens[i] <= max_len; i++) {
        const int L = lens[i];
        const int32_t cu[2] = {0, L};
        const iv_delta_rule_args da = {
            .out = iv_view_make(out, IV_F32, L, Hv * Dv, Hv * Dv),
            .q = iv_view_make(q, IV_F32, L, Hk * Dk, Hk * Dk), .k = iv_view_make(k, IV_F32, L, Hk * Dk, Hk * Dk),
            .v = iv_view_make(v, IV_F32, L, Hv * Dv, Hv * Dv),
            .a = iv_view_make(a, IV_F32, L, Hv, Hv), .b = iv_view_make(b, IV_F32, L, Hv, Hv),
            .a_log = &alt, .dt_bias = &dtt, .n_k_heads = Hk, .n_v_heads = Hv, .k_head_dim = Dk, .v_head_dim = Dv,
            .cu_seqlens = cu, .cu_seqlens_dev = cu, .n_seqs = 1, .chunk = 64,
        };
        const double tc = best_time(ops, &da, 1) / L * 1e9, tr = best_time(ops, &da, 0) / L * 1e9;
        printf("%6d %14.0f %14.0f %7.2fx\n", L, tc, tr, tr / tc);
        printf("json {\"len\": %d, \"chunk_ns_per_token\": %.1f, \"recurrence_ns_per_token\": %.1f}\n", L, tc, tr);
    }
    free(q), free(k), free(v), free(a), free(b), free(a_log), free(dt), free(out);
    return 0;
}
