/* The machine's FP32 instruction ceiling, for bench/run_cpu.py: what the
 * cores reach on fused multiply-adds alone, with no memory traffic at all.
 *
 *   OMP_NUM_THREADS=2 fma_peak [avx512|avx2] [RUNS]
 *
 * Every OpenMP thread runs independent FMA chains in registers (24 on
 * 512-bit vectors, 12 on 256-bit ones: more than latency x ports on any
 * x86 core, so the chains never wait on each other) for RUNS timed runs
 * after a warm-up. Prints {"isa", "threads", "runs_gflops": [...],
 * "best_gflops"}; {"error"} with exit 1 when the CPU lacks the ISA.
 *
 * Why beside the sgemm peak: OpenBLAS's kernel set is not tuned for every
 * core. On a 2-core Ice Lake-SP its 2048^3 sgemm ran at 194 GFLOP/s while
 * this loop measured 344 (two 512-bit FMA units at the AVX-512 clock) and
 * the packed-panel kernel 270-290 at 64 rows: there "% of sgemm peak" went
 * past 100% and said nothing about the headroom left, which "% FMA" does. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define STEPS 4000000L

/* Each returns a sum of its chains so that they cannot be optimised away. */
__attribute__((target("avx512f"))) static float chains512(float seed)
{
    __m512 acc[24];
    const __m512 mul = _mm512_set1_ps(0.999999f), add = _mm512_set1_ps(seed);
    for (int i = 0; i < 24; i++) acc[i] = _mm512_set1_ps((float)i);
    for (long k = 0; k < STEPS; k++) {
#pragma GCC unroll 24
        for (int i = 0; i < 24; i++) acc[i] = _mm512_fmadd_ps(acc[i], mul, add);
    }
    float s = 0;
    for (int i = 0; i < 24; i++) s += _mm512_reduce_add_ps(acc[i]);
    return s;
}

__attribute__((target("avx2,fma"))) static float chains256(float seed)
{
    __m256 acc[12];
    const __m256 mul = _mm256_set1_ps(0.999999f), add = _mm256_set1_ps(seed);
    for (int i = 0; i < 12; i++) acc[i] = _mm256_set1_ps((float)i);
    for (long k = 0; k < STEPS; k++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) acc[i] = _mm256_fmadd_ps(acc[i], mul, add);
    }
    float lanes[8], s = 0;
    for (int i = 0; i < 12; i++) {
        _mm256_storeu_ps(lanes, acc[i]);
        for (int j = 0; j < 8; j++) s += lanes[j];
    }
    return s;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    const char *isa = argc > 1 ? argv[1] : "avx512";
    const int runs = argc > 2 ? atoi(argv[2]) : 5;
    const int wide = !strcmp(isa, "avx512");
    __builtin_cpu_init();
    if ((wide && !__builtin_cpu_supports("avx512f")) ||
        (!wide && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) ||
        (!wide && strcmp(isa, "avx2")) || runs < 1 || runs > 100) {
        printf("{\"error\": \"this CPU cannot run %s FMAs (or RUNS is not 1..100)\"}\n", isa);
        return 1;
    }
    /* FLOPs per thread per call: steps x chains x lanes x 2. */
    const double flops = (double)STEPS * (wide ? 24 * 16 : 12 * 8) * 2;
    const int threads = omp_get_max_threads();
    double best = 0, *gf = calloc((size_t)runs, sizeof *gf);
    float sink = 0;
    for (int r = -1; r < runs; r++) {
        const double t0 = now_s();
#pragma omp parallel reduction(+ : sink)
        sink += wide ? chains512((float)r) : chains256((float)r);
        const double g = flops * threads / (now_s() - t0) / 1e9;
        if (r < 0) continue; /* warm-up: clocks ramp, the AVX-512 licence settles */
        gf[r] = g;
        if (g > best) best = g;
    }
    printf("{\"isa\": \"%s\", \"threads\": %d, \"runs_gflops\": [", isa, threads);
    for (int r = 0; r < runs; r++) printf("%s%.2f", r ? ", " : "", gf[r]);
    printf("], \"best_gflops\": %.2f, \"check\": %g}\n", best, (double)sink);
    free(gf);
    return 0;
}

#else

int main(void)
{
    printf("{\"error\": \"fma_peak measures x86 FMA units only\"}\n");
    return 1;
}

#endif
