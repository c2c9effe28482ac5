/* linear: y = act(x W^T + b) (+ residual) against a double reference, over
 * edge shapes, strided views, every epilogue combination and a residual
 * that is y itself. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/gemm_panel.h"
#include "ops/ops.h"
#include "ops_test_util.h"
#include "test.h"

static double act_d(double v, iv_act act)
{
    switch (act) {
    case IV_ACT_GELU: return 0.5 * v * erfc(-v / sqrt(2.0));
    case IV_ACT_GELU_TANH: return v / (1.0 + exp(-2.0 * sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    case IV_ACT_SILU: return v / (1.0 + exp(-v));
    case IV_ACT_RELU: return v > 0 ? v : 0.0;
    case IV_ACT_TANH: return tanh(v);
    case IV_ACT_SIGMOID: return 1.0 / (1.0 + exp(-v));
    case IV_ACT_NONE: break;
    }
    return v;
}

typedef struct {
    int64_t rows, in, out;
    int bias, residual; /* residual: 0 none, 1 separate buffer, 2 y itself */
    iv_act act;
    int packed; /* W packed in panels (the layout of model weights), not row-major */
} lin_case;

/* Float GEMM error grows with the magnitude sum sum_k |x_k w_k|: the
 * tolerance is 2e-6 of it (K <= 384 here; OpenBLAS accumulates in blocks),
 * plus 2e-6 relative to the result for the epilogue. */
static void check_linear(ops_rng *r, lin_case c)
{
    const iv_ops *ops = iv_cpu_ops();
    float *xb, *yb;
    iv_view x = ops_wide_view(&xb, r, c.rows, c.in, 2, c.in + 7, -1.0f, 1.0f);
    iv_view y = ops_wide_view(&yb, r, c.rows, c.out, 3, c.out + 5, -1.0f, 1.0f);
    float *w = ops_rand(r, c.out * c.in, -0.5f, 0.5f);
    float *b = ops_rand(r, c.out, -0.5f, 0.5f);
    iv_tensor wt = iv_tensor_2d(w, c.out, c.in), bt = iv_tensor_1d(b, c.out);
    float *wp = NULL;
    if (c.packed) {
        wp = iv_cpu_scratch(iv_cpu_panel_floats(c.out, c.in) * sizeof(float));
        iv_cpu_pack_panels(wp, w, c.out, c.in);
        wt = iv_cpu_panel_tensor(wp, c.out, c.in);
    }

    /* Residual with y's layout: a separate buffer or y's own contents. */
    float *resb = NULL;
    const float *res = NULL;
    if (c.residual == 1) {
        iv_view rv = ops_wide_view(&resb, r, c.rows, c.out, 3, c.out + 5, -1.0f, 1.0f);
        res = rv.data;
    } else if (c.residual == 2) {
        res = y.data;
    }

    double *want = malloc((size_t)(c.rows * c.out) * sizeof(double));
    double *mag = malloc((size_t)(c.rows * c.out) * sizeof(double));
    for (int64_t t = 0; t < c.rows; t++)
        for (int64_t o = 0; o < c.out; o++) {
            double acc = c.bias ? b[o] : 0.0, m = c.bias ? fabs(b[o]) : 0.0;
            for (int64_t k = 0; k < c.in; k++) {
                double p = (double)((const float *)x.data)[t * x.ld + k] * w[o * c.in + k];
                acc += p;
                m += fabs(p);
            }
            double v = act_d(acc, c.act);
            if (res) v += res[t * y.ld + o];
            want[t * c.out + o] = v;
            mag[t * c.out + o] = m;
        }

    ops->linear(ops, y, x, &wt, c.bias ? &bt : NULL, c.act, res);

    int64_t bad = 0;
    for (int64_t t = 0; t < c.rows; t++)
        for (int64_t o = 0; o < c.out; o++) {
            double got = ((float *)y.data)[t * y.ld + o], wv = want[t * c.out + o];
            double tol = 2e-6 * mag[t * c.out + o] + 2e-6 * fabs(wv) + 1e-30;
            if (!(fabs(got - wv) <= tol) && bad++ < 3)
                iv_test_fail(__FILE__, __LINE__,
                             "linear rows %lld in %lld out %lld bias %d act %d residual %d packed %d: [%lld][%lld] got %.9g want %.9g",
                             (long long)c.rows, (long long)c.in, (long long)c.out, c.bias, (int)c.act, c.residual, c.packed,
                             (long long)t, (long long)o, got, wv);
        }
    CHECK_EQ_INT(ops_gap_writes(yb, y), 0);
    free(xb);
    free(yb);
    free(resb);
    free(w);
    free(wp);
    free(b);
    free(want);
    free(mag);
}

TEST(ops_linear_epilogues)
{
    ops_rng r = {10};
    const int64_t shapes[][3] = {{1, 1, 1}, {1, 17, 5}, {5, 64, 33}, {37, 29, 70}, {3, 8, 16}};
    const iv_act acts[] = {IV_ACT_NONE, IV_ACT_GELU, IV_ACT_GELU_TANH, IV_ACT_SILU, IV_ACT_TANH, IV_ACT_RELU};
    for (int s = 0; s < 5; s++)
        for (int a = 0; a < 6; a++)
            for (int bias = 0; bias < 2; bias++)
                for (int res = 0; res < 3; res++)
                    check_linear(&r, (lin_case){shapes[s][0], shapes[s][1], shapes[s][2], bias, res, acts[a], 0});
}

/* Big enough for OpenBLAS to thread and for the parallel epilogue. */
TEST(ops_linear_large)
{
    ops_rng r = {11};
    check_linear(&r, (lin_case){300, 384, 200, 1, 1, IV_ACT_GELU, 0});
    check_linear(&r, (lin_case){257, 96, 500, 1, 2, IV_ACT_NONE, 0});
    check_linear(&r, (lin_case){129, 200, 300, 0, 2, IV_ACT_SILU, 0});
}

TEST(ops_linear_zero_rows)
{
    const iv_ops *ops = iv_cpu_ops();
    float w[6] = {1, 2, 3, 4, 5, 6}, dummy = 7.0f;
    iv_tensor wt = iv_tensor_2d(w, 2, 3);
    iv_view x = {&dummy, 0, 3, 3, IV_F32}, y = {&dummy, 0, 2, 2, IV_F32};
    ops->linear(ops, y, x, &wt, NULL, IV_ACT_GELU, NULL);
    CHECK(dummy == 7.0f);
}

/* The few-rows streaming kernel (rows <= IV_LINEAR_SMALL_MAX_ROWS = 16 on
 * AVX2/FMA CPUs, sgemm above; ops_linear_mid_rows goes past the switch):
 * input widths around its 8-wide steps (masked tail), output widths around
 * its 4-column tiles and 64-column chunks, and a size large enough for it to
 * fork. */
TEST(ops_linear_small_rows)
{
    ops_rng r = {12};
    const int64_t ins[] = {1, 7, 8, 9, 100, 384};
    const int64_t outs[] = {1, 3, 4, 5, 63, 64, 65, 130};
    for (int64_t rows = 1; rows <= 17; rows++)
        for (int i = 0; i < 6; i++)
            check_linear(&r, (lin_case){rows, ins[i], outs[(rows + i) % 8], (int)(rows & 1), (int)(rows % 3),
                                        rows % 2 ? IV_ACT_GELU : IV_ACT_NONE, 0});
    for (int o = 0; o < 8; o++) check_linear(&r, (lin_case){3, 33, outs[o], 1, 2, IV_ACT_SILU, 0});
    check_linear(&r, (lin_case){8, 384, 700, 1, 1, IV_ACT_GELU_TANH, 0});
    check_linear(&r, (lin_case){16, 256, 1000, 1, 2, IV_ACT_NONE, 0});
}

/* 13..70 rows: the streaming kernel up to IV_LINEAR_SMALL_MAX_ROWS (16) on
 * AVX2/FMA CPUs, with several 3-row groups per column tile, then sgemm. Odd
 * widths give ragged tiles and chunks; the views are strided; residual 2 is
 * y itself, with and without an activation. */
TEST(ops_linear_mid_rows)
{
    ops_rng r = {13};
    const int64_t ins[] = {7, 129, 384, 771};
    const int64_t outs[] = {1, 17, 63, 333, 1031};
    for (int64_t rows = 13; rows <= 70; rows++) {
        const int i = (int)(rows % 4), o = (int)(rows % 5);
        const iv_act act = rows % 3 == 0 ? IV_ACT_GELU : rows % 3 == 1 ? IV_ACT_NONE : IV_ACT_SILU;
        check_linear(&r, (lin_case){rows, ins[i], outs[o], (int)(rows & 1), (int)((rows / 2) % 3), act, 0});
    }
    check_linear(&r, (lin_case){64, 768, 771, 1, 2, IV_ACT_GELU, 0});
    check_linear(&r, (lin_case){64, 768, 771, 1, 2, IV_ACT_NONE, 0});
    check_linear(&r, (lin_case){40, 1536, 385, 0, 1, IV_ACT_NONE, 0});
    check_linear(&r, (lin_case){65, 384, 1000, 1, 2, IV_ACT_GELU, 0});
}

/* Weights packed in panels (gemm_panel.c), with each kernel this CPU can
 * run: widths around the 32-column panels, row counts around the 12- and
 * 6-row tiles, inputs past the kernels' k pieces (768 steps on AVX-512,
 * 1536 on AVX2), every epilogue. */
TEST(ops_linear_panels)
{
    const char *kernels[] = {"avx512", "avx2", "portable"};
    int ran = 0;
    for (int kk = 0; kk < 3; kk++) {
        if (iv_cpu_panel_use(kernels[kk])) continue;
        ran++;
        ops_rng r = {14};
        const int64_t shapes[][3] = {{1, 1, 1},   {1, 17, 5},   {5, 64, 33},  {37, 29, 70},
                                     {3, 8, 16},  {12, 257, 32}, {13, 512, 31}, {7, 300, 65}};
        const iv_act acts[] = {IV_ACT_NONE, IV_ACT_GELU, IV_ACT_SILU};
        for (int s = 0; s < 8; s++)
            for (int a = 0; a < 3; a++)
                for (int res = 0; res < 3; res++)
                    check_linear(&r, (lin_case){shapes[s][0], shapes[s][1], shapes[s][2], (s + a) & 1, res, acts[a],
                                                1});
        /* Larger: several row blocks and panel groups, threaded. */
        check_linear(&r, (lin_case){300, 384, 200, 1, 1, IV_ACT_GELU, 1});
        check_linear(&r, (lin_case){1000, 96, 130, 1, 2, IV_ACT_NONE, 1});
        check_linear(&r, (lin_case){64, 768, 771, 1, 2, IV_ACT_GELU, 1});
        check_linear(&r, (lin_case){40, 1536, 385, 0, 1, IV_ACT_NONE, 1});
        /* Two and three k pieces on every kernel. */
        check_linear(&r, (lin_case){9, 2000, 97, 1, 2, IV_ACT_GELU, 1});
        check_linear(&r, (lin_case){40, 3100, 33, 1, 1, IV_ACT_NONE, 1});
    }
    CHECK(ran >= 1);
    CHECK_EQ_INT(iv_cpu_panel_use("auto"), 0);
}

/* Panels taken by other threads' stealing (iv_cpu_panel_leave_half_to_thieves
 * makes every call leave half of each unit to it): the result is right and
 * the same bits as when each owner computes its whole unit. Short inputs
 * (one row block, GELU run on y after the tiles) and long ones (several
 * row blocks), with each kernel this CPU runs. */
TEST(ops_linear_panels_stolen)
{
    const char *kernels[] = {"auto", "avx2", "portable"};
    const int64_t shapes[][3] = {{8, 384, 1000}, {64, 768, 771}, {300, 384, 450}, {1, 64, 33}};
    for (int kk = 0; kk < 3; kk++) {
        if (iv_cpu_panel_use(kernels[kk])) continue;
        ops_rng r = {16};
        for (int s = 0; s < 4; s++) {
            const int64_t rows = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
            float *x = ops_rand(&r, rows * in, -1.0f, 1.0f), *w = ops_rand(&r, out * in, -0.5f, 0.5f);
            float *b = ops_rand(&r, out, -0.5f, 0.5f), *res = ops_rand(&r, rows * out, -1.0f, 1.0f);
            float *wp = iv_cpu_scratch(iv_cpu_panel_floats(out, in) * sizeof(float));
            iv_cpu_pack_panels(wp, w, out, in);
            const iv_ops *ops = iv_cpu_ops();
            const iv_tensor wt = iv_cpu_panel_tensor(wp, out, in), bt = iv_tensor_1d(b, out);
            float *want = malloc((size_t)(rows * out) * sizeof(float)), *got = malloc((size_t)(rows * out) * sizeof(float));
            const iv_view xv = {x, rows, in, in, IV_F32};
            for (int a = 0; a < 2; a++) {
                const iv_act act = a ? IV_ACT_GELU : IV_ACT_NONE;
                ops->linear(ops, (iv_view){want, rows, out, out, IV_F32}, xv, &wt, &bt, act, res);
                iv_cpu_panel_leave_half_to_thieves(1);
                ops->linear(ops, (iv_view){got, rows, out, out, IV_F32}, xv, &wt, &bt, act, res);
                iv_cpu_panel_leave_half_to_thieves(0);
                int64_t diff = 0;
                for (int64_t e = 0; e < rows * out; e++) diff += memcmp(&got[e], &want[e], sizeof(float)) != 0;
                if (diff)
                    iv_test_fail(__FILE__, __LINE__, "kernel %s %lld x %lld -> %lld act %d: %lld elements differ when stolen",
                                 kernels[kk], (long long)rows, (long long)in, (long long)out, (int)act, (long long)diff);
            }
            free(x);
            free(w);
            free(b);
            free(res);
            free(wp);
            free(want);
            free(got);
        }
        /* Against the double reference, every epilogue and a residual that is y. */
        iv_cpu_panel_leave_half_to_thieves(1);
        check_linear(&r, (lin_case){64, 768, 771, 1, 1, IV_ACT_GELU, 1});
        check_linear(&r, (lin_case){64, 768, 771, 1, 2, IV_ACT_GELU, 1});
        check_linear(&r, (lin_case){300, 384, 200, 1, 2, IV_ACT_NONE, 1});
        check_linear(&r, (lin_case){7, 300, 65, 0, 0, IV_ACT_SILU, 1});
        iv_cpu_panel_leave_half_to_thieves(0);
    }
    CHECK_EQ_INT(iv_cpu_panel_use("auto"), 0);
}

/* A row's result is the same bits whatever else is in the batch (alone, in
 * a short batch on the few-rows split, in a long one across row blocks and
 * threads) and whichever kernel computes it. */
TEST(ops_linear_panels_batch_invariant)
{
    ops_rng r = {15};
    const int64_t rows = 700, in = 389, out = 450;
    float *x = ops_rand(&r, rows * in, -1.0f, 1.0f);
    float *w = ops_rand(&r, out * in, -0.5f, 0.5f);
    float *b = ops_rand(&r, out, -0.5f, 0.5f);
    float *wp = iv_cpu_scratch(iv_cpu_panel_floats(out, in) * sizeof(float));
    iv_cpu_pack_panels(wp, w, out, in);
    iv_tensor wt = iv_cpu_panel_tensor(wp, out, in), bt = iv_tensor_1d(b, out);
    const iv_ops *ops = iv_cpu_ops();
    float *full = malloc((size_t)(rows * out) * sizeof(float));
    float *part = malloc((size_t)(rows * out) * sizeof(float));
    ops->linear(ops, (iv_view){full, rows, out, out, IV_F32}, (iv_view){x, rows, in, in, IV_F32}, &wt, &bt, IV_ACT_GELU, NULL);
    const int64_t ranges[][2] = {{0, 1}, {5, 6}, {699, 700}, {3, 11}, {10, 23}, {100, 164}, {37, 437}};
    const char *kernels[] = {"auto", "avx2", "portable"};
    for (int kk = 0; kk < 3; kk++) {
        if (iv_cpu_panel_use(kernels[kk])) continue;
        for (int i = 0; i < 7; i++) {
            const int64_t r0 = ranges[i][0], n = ranges[i][1] - r0;
            ops->linear(ops, (iv_view){part, n, out, out, IV_F32}, (iv_view){x + r0 * in, n, in, in, IV_F32}, &wt, &bt, IV_ACT_GELU,
                        NULL);
            int64_t diff = 0;
            for (int64_t e = 0; e < n * out; e++) diff += memcmp(&part[e], &full[r0 * out + e], sizeof(float)) != 0;
            if (diff) iv_test_fail(__FILE__, __LINE__, "kernel %s rows [%lld, %lld): %lld elements differ from the full batch",
                                   kernels[kk], (long long)r0, (long long)(r0 + n), (long long)diff);
        }
    }
    CHECK_EQ_INT(iv_cpu_panel_use("auto"), 0);
    free(x);
    free(w);
    free(b);
    free(wp);
    free(full);
    free(part);
}
