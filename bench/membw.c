/* The machine's sustained memory read bandwidth, for bench/run_cpu.py: the
 * rate at which a forward pass can at best stream its weights from DRAM
 * (a one-token request reads every weight once and does little else).
 *
 *   OMP_NUM_THREADS=2 membw [MiB] [RUNS]
 *
 * Fills a buffer of MiB mebibytes (default 512; the harness passes several
 * times the L3 cache so that no run is served from cache) and times RUNS
 * reads of the whole of it (after one warm-up read) by every OpenMP thread,
 * each summing its static share with vector integer adds. The sum is printed,
 * so the reads cannot be optimised away. Prints
 * {"mib", "threads", "runs_gbs": [...], "median_gbs", "best_gbs", "check"},
 * GB being 1e9 bytes. The buffer is first touched by the thread that later
 * reads each part (same static schedule), so its pages are that thread's
 * NUMA node's. */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One read of the whole buffer by all threads. Integer adds vectorise at
 * -O3 without -ffast-math (a float sum would not be reassociated), and one
 * add per 8 bytes is far below what a core can issue, so memory is the limit. */
static uint64_t read_all(const uint64_t *buf, size_t n)
{
    uint64_t sum = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum)
    for (size_t i = 0; i < n; i++) sum += buf[i];
    return sum;
}

int main(int argc, char **argv)
{
    long mib = argc > 1 ? atol(argv[1]) : 512;
    int runs = argc > 2 ? atoi(argv[2]) : 7;
    if (mib <= 0 || mib > (1L << 20) || runs <= 0 || runs > 1000) {
        fprintf(stderr, "usage: membw [MiB in 1..1048576] [RUNS in 1..1000]\n");
        return 2;
    }
    size_t bytes = (size_t)mib << 20, n = bytes / sizeof(uint64_t);
    uint64_t *buf = aligned_alloc(64, bytes);
    double *gbs = malloc((size_t)runs * sizeof(double));
    if (!buf || !gbs) {
        fprintf(stderr, "membw: out of memory for %ld MiB\n", mib);
        return 1;
    }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) buf[i] = i * 0x9E3779B97F4A7C15ull;
    uint64_t check = read_all(buf, n);
    for (int r = 0; r < runs; r++) {
        double t0 = now_s();
        check += read_all(buf, n);
        gbs[r] = (double)bytes / (now_s() - t0) / 1e9;
    }
    printf("{\"mib\":%ld,\"threads\":%d,\"check\":%llu,\"runs_gbs\":[", mib, omp_get_max_threads(),
           (unsigned long long)check);
    for (int r = 0; r < runs; r++) printf("%s%.2f", r ? "," : "", gbs[r]);
    qsort(gbs, (size_t)runs, sizeof *gbs, cmp_double);
    printf("],\"median_gbs\":%.2f,\"best_gbs\":%.2f}\n", gbs[runs / 2], gbs[runs - 1]);
    free(buf);
    free(gbs);
    return 0;
}
