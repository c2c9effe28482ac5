#include "ops_test_util.h"

#include <math.h>
#include <stdlib.h>

#include "test.h"

uint64_t ops_rng_next(ops_rng *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

float ops_rng_uniform(ops_rng *r, float lo, float hi)
{
    double u = (double)(ops_rng_next(r) >> 11) / 9007199254740992.0; /* [0, 1) */
    return (float)(lo + (hi - lo) * u);
}

float *ops_rand(ops_rng *r, int64_t n, float lo, float hi)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!p) abort();
    for (int64_t i = 0; i < n; i++) p[i] = ops_rng_uniform(r, lo, hi);
    return p;
}

iv_view ops_wide_view(float **buf, ops_rng *r, int64_t rows, int64_t cols, int64_t col, int64_t ld, float lo,
                      float hi)
{
    float *b = malloc((size_t)(rows * ld > 0 ? rows * ld : 1) * sizeof(float));
    if (!b) abort();
    for (int64_t i = 0; i < rows * ld; i++) b[i] = NAN;
    for (int64_t t = 0; t < rows; t++)
        for (int64_t c = 0; c < cols; c++) b[t * ld + col + c] = ops_rng_uniform(r, lo, hi);
    *buf = b;
    return iv_view_make(b + col, IV_F32, rows, cols, ld);
}

int64_t ops_gap_writes(const float *buf, iv_view v)
{
    int64_t col = (const float *)v.data - buf, bad = 0;
    for (int64_t t = 0; t < v.rows; t++)
        for (int64_t c = 0; c < v.ld; c++)
            if ((c < col || c >= col + v.cols) && !isnan(buf[t * v.ld + c])) bad++;
    return bad;
}

double *ops_view_to_double(iv_view v)
{
    double *d = malloc((size_t)(v.rows * v.cols > 0 ? v.rows * v.cols : 1) * sizeof(double));
    if (!d) abort();
    for (int64_t t = 0; t < v.rows; t++)
        for (int64_t c = 0; c < v.cols; c++) d[t * v.cols + c] = ((const float *)v.data)[t * v.ld + c];
    return d;
}

int64_t ops_check_close_at(const char *file, int line, const char *what, iv_view got, const double *want,
                           double atol, double rtol)
{
    int64_t bad = 0;
    for (int64_t t = 0; t < got.rows; t++)
        for (int64_t c = 0; c < got.cols; c++) {
            double g = ((const float *)got.data)[t * got.ld + c], w = want[t * got.cols + c];
            double err = fabs(g - w);
            int ok = err <= atol + rtol * fabs(w) || (isinf(w) && g == w) || (isnan(w) && isnan(g));
            if (!ok) {
                if (bad < 3)
                    iv_test_fail(file, line, "%s[%lld][%lld]: got %.9g, want %.9g (err %.3g)", what, (long long)t,
                                 (long long)c, g, w, err);
                bad++;
            }
        }
    if (bad > 3) iv_test_fail(file, line, "%s: %lld mismatches in all", what, (long long)bad);
    return bad;
}
