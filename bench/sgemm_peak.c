/* The machine's practical FP32 matrix-multiply peak, measured with the same
 * OpenBLAS (OpenMP build) that infinity_v3 links, for bench/run_cpu.py.
 *
 *   OMP_NUM_THREADS=2 sgemm_peak [N] [RUNS]
 *
 * Times RUNS square N x N x N sgemm calls (after one warm-up) and prints
 * {"n", "threads", "core", "runs_gflops": [...], "median_gflops", "max_gflops"},
 * "core" being the kernel set OpenBLAS picked (OPENBLAS_CORETYPE, or its
 * own detection). The model FLOP/s of the engine is reported as a fraction
 * of the median. */
#include <cblas.h>
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

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2048;
    int runs = argc > 2 ? atoi(argv[2]) : 7;
    if (n <= 0 || runs <= 0 || runs > 1000) {
        fprintf(stderr, "usage: sgemm_peak [N > 0] [RUNS in 1..1000]\n");
        return 2;
    }
    size_t nn = (size_t)n * (size_t)n;
    float *a = malloc(nn * sizeof(float)), *b = malloc(nn * sizeof(float)), *c = malloc(nn * sizeof(float));
    double *gf = malloc((size_t)runs * sizeof(double));
    if (!a || !b || !c || !gf) {
        fprintf(stderr, "sgemm_peak: out of memory for N=%d\n", n);
        return 1;
    }
    srand(1);
    for (size_t i = 0; i < nn; i++) {
        a[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        b[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    for (int r = 0; r < runs; r++) {
        double t0 = now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        gf[r] = 2.0 * n * (double)n * n / (now_s() - t0) / 1e9;
    }
    printf("{\"n\":%d,\"threads\":%d,\"core\":\"%s\",\"check\":%g,\"runs_gflops\":[", n, openblas_get_num_threads(),
           openblas_get_corename(), (double)c[nn / 2]);
    for (int r = 0; r < runs; r++) printf("%s%.2f", r ? "," : "", gf[r]);
    qsort(gf, (size_t)runs, sizeof *gf, cmp_double);
    printf("],\"median_gflops\":%.2f,\"max_gflops\":%.2f}\n", gf[runs / 2], gf[runs - 1]);
    free(a);
    free(b);
    free(c);
    free(gf);
    return 0;
}
