/* Shared helpers for the CPU op tests (test_ops_*.c): a seeded RNG, wide
 * buffers whose unused columns hold NaN (so an op reading outside its view
 * poisons its output, and one writing outside it is caught), and tolerance
 * checks against double-precision references. */
#ifndef IV_TESTS_OPS_TEST_UTIL_H
#define IV_TESTS_OPS_TEST_UTIL_H

#include <stdint.h>

#include "ops/ops.h"

typedef struct {
    uint64_t state;
} ops_rng;

/* splitmix64. */
uint64_t ops_rng_next(ops_rng *r);
/* Uniform in [lo, hi). */
float ops_rng_uniform(ops_rng *r, float lo, float hi);
/* n floats uniform in [lo, hi); free() it. */
float *ops_rand(ops_rng *r, int64_t n, float lo, float hi);

/* A rows x cols view at column col of a [rows, ld] buffer: the view holds
 * uniform [lo, hi) values, every other element NaN. free(*buf) afterwards. */
iv_view ops_wide_view(float **buf, ops_rng *r, int64_t rows, int64_t cols, int64_t col, int64_t ld, float lo,
                      float hi);
/* Number of elements outside v (in its [rows, ld] buffer starting at buf)
 * that are no longer NaN, i.e. were written by an op that should not. */
int64_t ops_gap_writes(const float *buf, iv_view v);
/* Copies a view into a contiguous double array [rows][cols] (malloc'd). */
double *ops_view_to_double(iv_view v);

/* Compares got (a view) with want [rows][cols]: |got - want| <= atol +
 * rtol * |want|. Reports up to three mismatches through the test framework
 * and returns the mismatch count. */
int64_t ops_check_close_at(const char *file, int line, const char *what, iv_view got, const double *want,
                           double atol, double rtol);
#define ops_check_close(what, got, want, atol, rtol) \
    ops_check_close_at(__FILE__, __LINE__, what, got, want, atol, rtol)

#endif
