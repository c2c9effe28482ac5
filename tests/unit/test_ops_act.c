/* Activations and gated units against double-precision references. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"
#include "ops_test_util.h"
#include "test.h"

static double ref_act(double x, iv_act act)
{
    switch (act) {
    case IV_ACT_GELU: return 0.5 * x * erfc(-x / sqrt(2.0));
    case IV_ACT_GELU_TANH: {
        double u = sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
        return x / (1.0 + exp(-2.0 * u)); /* = 0.5 x (1 + tanh(u)) */
    }
    case IV_ACT_SILU: return x / (1.0 + exp(-x));
    case IV_ACT_RELU: return x > 0 ? x : 0.0;
    case IV_ACT_TANH: return tanh(x);
    case IV_ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case IV_ACT_NONE: break;
    }
    return x;
}

/* An activation result is accepted when it is within 1e-6 relative of the
 * exact value, or as close as the exact value at an input perturbed by one
 * float ulp (2^-23 |x f'(x)|): in the far tails (tanh-GELU at x = -6, say)
 * the float rounding of intermediate terms alone moves the result by more
 * than 1e-6, as in torch. Results below 5e-36 may be flushed to 0. */
static int64_t check_act_at(const char *file, int line, const char *what, iv_view y, const double *x, iv_act act)
{
    int64_t bad = 0;
    for (int64_t t = 0; t < y.rows; t++)
        for (int64_t c = 0; c < y.cols; c++) {
            double xv = x[t * y.cols + c], want = ref_act(xv, act), got = ((float *)y.data)[t * y.ld + c];
            double h = 1e-6 * (fabs(xv) > 1 ? fabs(xv) : 1.0);
            double slope = (ref_act(xv + h, act) - ref_act(xv - h, act)) / (2 * h);
            double tol = 5e-36 + 1e-6 * fabs(want) + 0x1p-23 * fabs(xv * slope);
            if (!(fabs(got - want) <= tol)) {
                if (bad < 3)
                    iv_test_fail(file, line, "%s act %d at x=%.9g: got %.9g, want %.9g", what, (int)act, xv, got,
                                 want);
                bad++;
            }
        }
    if (bad > 3) iv_test_fail(file, line, "%s act %d: %lld mismatches", what, (int)act, (long long)bad);
    return bad;
}
#define check_act(what, y, x, act) check_act_at(__FILE__, __LINE__, what, y, x, act)

static const iv_act all_acts[] = {IV_ACT_NONE, IV_ACT_GELU, IV_ACT_GELU_TANH, IV_ACT_SILU,
                                  IV_ACT_RELU, IV_ACT_TANH, IV_ACT_SIGMOID};
#define N_ACTS (int)(sizeof all_acts / sizeof all_acts[0])

TEST(ops_act_names)
{
    CHECK_EQ_INT(iv_act_from_name("gelu"), IV_ACT_GELU);
    CHECK_EQ_INT(iv_act_from_name("gelu_python"), IV_ACT_GELU);
    CHECK_EQ_INT(iv_act_from_name("gelu_new"), IV_ACT_GELU_TANH);
    CHECK_EQ_INT(iv_act_from_name("gelu_pytorch_tanh"), IV_ACT_GELU_TANH);
    CHECK_EQ_INT(iv_act_from_name("gelu_fast"), IV_ACT_GELU_TANH);
    CHECK_EQ_INT(iv_act_from_name("gelu_accurate"), IV_ACT_GELU_TANH);
    CHECK_EQ_INT(iv_act_from_name("silu"), IV_ACT_SILU);
    CHECK_EQ_INT(iv_act_from_name("swish"), IV_ACT_SILU);
    CHECK_EQ_INT(iv_act_from_name("relu"), IV_ACT_RELU);
    CHECK_EQ_INT(iv_act_from_name("tanh"), IV_ACT_TANH);
    CHECK_EQ_INT(iv_act_from_name("sigmoid"), IV_ACT_SIGMOID);
    CHECK_EQ_INT(iv_act_from_name("linear"), IV_ACT_NONE);
    /* Different math: must be refused, not approximated. */
    CHECK_EQ_INT(iv_act_from_name("quick_gelu"), -1);
    CHECK_EQ_INT(iv_act_from_name("gelu_10"), -1);
    CHECK_EQ_INT(iv_act_from_name("relu6"), -1);
    CHECK_EQ_INT(iv_act_from_name("GELU"), -1);
    CHECK_EQ_INT(iv_act_from_name(""), -1);
    CHECK_EQ_INT(iv_act_from_name(NULL), -1);
}

/* Every activation over a dense grid of [-20, 20], a coarse one out to
 * +-100 and random points (tolerance: see check_act). */
TEST(ops_act_accuracy)
{
    const iv_ops *ops = iv_cpu_ops();
    int64_t n = 0, cap = 400001 + 2001 + 10000;
    float *x = malloc((size_t)cap * sizeof(float));
    float *y = malloc((size_t)cap * sizeof(float));
    double *xd = malloc((size_t)cap * sizeof(double));
    REQUIRE(x && y && xd);
    for (int i = 0; i <= 400000; i++) x[n++] = -20.0f + (float)i * 1e-4f;
    for (int i = 0; i <= 2000; i++) x[n++] = -100.0f + (float)i * 0.1f;
    ops_rng r = {1};
    for (int i = 0; i < 10000; i++) x[n++] = ops_rng_uniform(&r, -8.0f, 8.0f);
    for (int64_t i = 0; i < n; i++) xd[i] = x[i];
    for (int a = 0; a < N_ACTS; a++) {
        iv_view xv = {x, 1, n, n, IV_F32}, yv = {y, 1, n, n, IV_F32};
        ops->act(ops, yv, xv, all_acts[a]);
        check_act("grid", yv, xd, all_acts[a]);
    }
    free(x);
    free(y);
    free(xd);
}

TEST(ops_act_special_values)
{
    const iv_ops *ops = iv_cpu_ops();
    float x[5] = {0.0f, -0.0f, INFINITY, NAN, 1e30f}, y[5];
    iv_view xv = {x, 1, 5, 5, IV_F32}, yv = {y, 1, 5, 5, IV_F32};
    for (int a = 0; a < N_ACTS; a++) {
        ops->act(ops, yv, xv, all_acts[a]);
        CHECK_MSG(y[0] == (float)ref_act(0.0, all_acts[a]) && y[1] == (float)ref_act(0.0, all_acts[a]),
                  "act %d at 0: %g %g", (int)all_acts[a], y[0], y[1]);
        CHECK_MSG(isnan(y[3]), "act %d of NaN = %g", (int)all_acts[a], y[3]);
        CHECK_MSG(y[4] == (float)ref_act(1e30, all_acts[a]), "act %d at 1e30: %g", (int)all_acts[a], y[4]);
    }
    ops->act(ops, yv, xv, IV_ACT_GELU);
    CHECK(y[2] == INFINITY);
    ops->act(ops, yv, xv, IV_ACT_SIGMOID);
    CHECK(y[2] == 1.0f);
    ops->act(ops, yv, xv, IV_ACT_TANH);
    CHECK(y[2] == 1.0f);
    x[0] = -INFINITY;
    ops->act(ops, yv, xv, IV_ACT_TANH);
    CHECK(y[0] == -1.0f);
    ops->act(ops, yv, xv, IV_ACT_SIGMOID);
    CHECK(y[0] == 0.0f);
}

/* The row loops take several vectors per step (GELU's chains side by side,
 * vmath.h v_gelu_erf_n: four in act_rows, two in the dequantizing
 * epilogue), then single vectors, then a partial one: every element must
 * come out the same bits whichever of those computed it. A row of 77
 * (groups, single vectors and a tail at 8 or 16 lanes) against
 * each element alone (the partial path), special values included; the same
 * for the int8 linear's dequantizing epilogue, with bias and residual. */
TEST(ops_act_groups_same_bits)
{
    enum { N = 77, ROWS = 3 };
    ops_rng r = {7};
    float *x = ops_rand(&r, ROWS * N, -14.0f, 14.0f), *b = ops_rand(&r, N, -1.0f, 1.0f);
    float *res = ops_rand(&r, ROWS * N, -1.0f, 1.0f), *wscale = ops_rand(&r, N, 0.001f, 0.01f);
    const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 12.8f, -12.8f, -13.0f, 1e-30f, -5.0f};
    for (int i = 0; i < (int)(sizeof special / sizeof *special); i++) x[N - 1 - 3 * i] = special[i];
    float whole[ROWS * N], alone[ROWS * N], scale[ROWS];
    int32_t acc[ROWS * N], sums[N], zero[ROWS];
    for (int i = 0; i < ROWS * N; i++) acc[i] = (int32_t)(ops_rng_next(&r) % 200001) - 100000;
    for (int i = 0; i < N; i++) sums[i] = (int32_t)(ops_rng_next(&r) % 3001) - 1500;
    for (int t = 0; t < ROWS; t++) {
        zero[t] = (int32_t)(ops_rng_next(&r) % 256);
        scale[t] = 0.001f * (float)(t + 1);
    }
    for (int a = 0; a < N_ACTS; a++) {
        const iv_act act = all_acts[a];
        iv_cpu_act_rows(whole, N, x, N, b, act, res, N, ROWS, N);
        for (int t = 0; t < ROWS; t++)
            for (int c = 0; c < N; c++)
                iv_cpu_act_rows(alone + t * N + c, N, x + t * N + c, N, b + c, act, res + t * N + c, N, 1, 1);
        CHECK_MSG(!memcmp(whole, alone, sizeof whole), "act %d: a row differs from its elements alone", (int)act);
        iv_cpu_dequant_act_rows(whole, N, acc, N, zero, scale, sums, wscale, b, act, res, N, ROWS, N);
        for (int t = 0; t < ROWS; t++)
            for (int c = 0; c < N; c++)
                iv_cpu_dequant_act_rows(alone + t * N + c, N, acc + t * N + c, N, zero + t, scale + t, sums + c,
                                        wscale + c, b + c, act, res + t * N + c, N, 1, 1);
        CHECK_MSG(!memcmp(whole, alone, sizeof whole), "act %d: a dequantized row differs from its elements alone",
                  (int)act);
    }
    free(x);
    free(b);
    free(res);
    free(wscale);
}

/* Strided windows, odd sizes, in place and out of place; nothing outside
 * the output window may change. */
TEST(ops_act_views)
{
    const iv_ops *ops = iv_cpu_ops();
    ops_rng r = {2};
    const int64_t shapes[][4] = {{1, 1, 0, 1}, {3, 13, 5, 29}, {7, 40, 3, 45}, {2, 9, 0, 9}};
    for (int s = 0; s < 4; s++) {
        int64_t rows = shapes[s][0], cols = shapes[s][1], col = shapes[s][2], ld = shapes[s][3];
        for (int a = 0; a < N_ACTS; a++) {
            float *xb, *yb;
            iv_view x = ops_wide_view(&xb, &r, rows, cols, col, ld, -6.0f, 6.0f);
            iv_view y = ops_wide_view(&yb, &r, rows, cols, (col + 1) % 3, cols + 4, 0.0f, 1.0f);
            double *xd = ops_view_to_double(x);
            ops->act(ops, y, x, all_acts[a]);
            check_act("out of place", y, xd, all_acts[a]);
            CHECK_EQ_INT(ops_gap_writes(yb, y), 0);
            ops->act(ops, x, x, all_acts[a]);
            check_act("in place", x, xd, all_acts[a]);
            CHECK_EQ_INT(ops_gap_writes(xb, x), 0);
            free(xb);
            free(yb);
            free(xd);
        }
    }
}

static void check_glu(ops_rng *r, int64_t rows, int64_t inter, iv_act act, int act_on_first, int in_place)
{
    const iv_ops *ops = iv_cpu_ops();
    float *xb, *yb = NULL;
    iv_view x = ops_wide_view(&xb, r, rows, 2 * inter, 3, 2 * inter + 5, -5.0f, 5.0f);
    double *xd = ops_view_to_double(x);
    double *want = malloc((size_t)(rows * inter) * sizeof(double));
    for (int64_t t = 0; t < rows; t++)
        for (int64_t c = 0; c < inter; c++) {
            double a = xd[t * 2 * inter + c], b = xd[t * 2 * inter + inter + c];
            want[t * inter + c] = act_on_first ? ref_act(a, act) * b : a * ref_act(b, act);
        }
    iv_view y;
    if (in_place) /* the output overwrites the first half of each x row */
        y = (iv_view){x.data, rows, inter, x.ld, IV_F32};
    else
        y = ops_wide_view(&yb, r, rows, inter, 1, inter + 2, 0.0f, 1.0f);
    ops->glu(ops, y, x, act, act_on_first);
    char what[64];
    snprintf(what, sizeof what, "glu act %d first %d in place %d", (int)act, act_on_first, in_place);
    ops_check_close(what, y, want, 1e-30, 3e-6);
    if (yb) CHECK_EQ_INT(ops_gap_writes(yb, y), 0);
    free(xb);
    free(yb);
    free(xd);
    free(want);
}

TEST(ops_glu)
{
    ops_rng r = {3};
    const iv_act acts[] = {IV_ACT_SILU, IV_ACT_GELU, IV_ACT_GELU_TANH, IV_ACT_NONE};
    const int64_t sizes[][2] = {{1, 1}, {3, 11}, {5, 64}, {2, 37}};
    for (int a = 0; a < 4; a++)
        for (int s = 0; s < 4; s++)
            for (int first = 0; first < 2; first++)
                for (int in_place = 0; in_place < 2; in_place++)
                    check_glu(&r, sizes[s][0], sizes[s][1], acts[a], first, in_place);
}
