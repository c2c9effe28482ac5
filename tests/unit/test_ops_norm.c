/* LayerNorm, RMSNorm and per-head RMSNorm against double references, with
 * residual inputs, optional affine weights, strided views and in-place use. */
#include <math.h>
#include <stdlib.h>

#include "ops/ops.h"
#include "ops_test_util.h"
#include "test.h"

enum { NORM_LAYER, NORM_RMS };

typedef struct {
    int kind;
    int64_t rows, cols;
    int residual, weight, bias, in_place;
    float eps, w_offset, offset; /* offset: added to every input (stability) */
} norm_case;

static void check_norm(ops_rng *r, norm_case c)
{
    const iv_ops *ops = iv_cpu_ops();
    float *xb, *yb = NULL, *rb = NULL;
    iv_view x = ops_wide_view(&xb, r, c.rows, c.cols, 1, c.cols + 3, -2.0f, 2.0f);
    for (int64_t t = 0; t < c.rows; t++)
        for (int64_t k = 0; k < c.cols; k++) ((float *)x.data)[t * x.ld + k] += c.offset;
    const float *res = NULL;
    if (c.residual) res = ops_wide_view(&rb, r, c.rows, c.cols, 1, c.cols + 3, -1.0f, 1.0f).data;
    float *w = ops_rand(r, c.cols, 0.5f, 1.5f), *b = ops_rand(r, c.cols, -0.5f, 0.5f);
    iv_tensor wt = iv_tensor_1d(w, c.cols), bt = iv_tensor_1d(b, c.cols);

    double *want = malloc((size_t)(c.rows * c.cols) * sizeof(double));
    double *z = malloc((size_t)c.cols * sizeof(double));
    for (int64_t t = 0; t < c.rows; t++) {
        /* The residual sum is rounded to float, as the op (and torch) do. */
        for (int64_t k = 0; k < c.cols; k++)
            z[k] = res ? (double)(((float *)x.data)[t * x.ld + k] + res[t * x.ld + k]) : ((float *)x.data)[t * x.ld + k];
        double mean = 0, var = 0, ms = 0;
        for (int64_t k = 0; k < c.cols; k++) mean += z[k];
        mean /= (double)c.cols;
        for (int64_t k = 0; k < c.cols; k++) {
            var += (z[k] - mean) * (z[k] - mean);
            ms += z[k] * z[k];
        }
        var /= (double)c.cols;
        ms /= (double)c.cols;
        for (int64_t k = 0; k < c.cols; k++) {
            double v;
            if (c.kind == NORM_LAYER) {
                v = (z[k] - mean) / sqrt(var + c.eps);
                if (c.weight) v *= w[k];
                if (c.bias) v += b[k];
            } else {
                v = z[k] / sqrt(ms + c.eps);
                if (c.weight) v *= (double)w[k] + c.w_offset;
            }
            want[t * c.cols + k] = v;
        }
    }

    iv_view y = x;
    if (!c.in_place) y = ops_wide_view(&yb, r, c.rows, c.cols, 2, c.cols + 2, 0.0f, 1.0f);
    if (c.kind == NORM_LAYER)
        ops->layer_norm(ops, y, x, res, c.weight ? &wt : NULL, c.bias ? &bt : NULL, c.eps);
    else
        ops->rms_norm(ops, y, x, res, c.weight ? &wt : NULL, c.eps, c.w_offset);

    /* Outputs are O(1): 2e-6 absolute + 2e-6 relative (float rounding of
     * z, the statistics and the affine step). With a common offset the mean
     * itself is a float (as in torch), so x - mean may be off by one ulp of
     * the offset. */
    double atol = 2e-6 + 0x1p-23 * fabs(c.offset);
    char what[96];
    snprintf(what, sizeof what, "%s rows %lld cols %lld res %d w %d b %d in place %d",
             c.kind == NORM_LAYER ? "layer_norm" : "rms_norm", (long long)c.rows, (long long)c.cols, c.residual,
             c.weight, c.bias, c.in_place);
    ops_check_close(what, y, want, atol, 2e-6);
    CHECK_EQ_INT(ops_gap_writes(c.in_place ? xb : yb, y), 0);
    free(xb);
    free(yb);
    free(rb);
    free(w);
    free(b);
    free(want);
    free(z);
}

TEST(ops_layer_norm)
{
    ops_rng r = {20};
    const int64_t shapes[][2] = {{1, 1}, {1, 7}, {5, 384}, {3, 1023}, {2, 16}};
    for (int s = 0; s < 5; s++)
        for (int mode = 0; mode < 16; mode++)
            check_norm(&r, (norm_case){NORM_LAYER, shapes[s][0], shapes[s][1], mode & 1, (mode >> 1) & 1,
                                       (mode >> 2) & 1, (mode >> 3) & 1, 1e-12f, 0.0f, 0.0f});
    /* eps matters when the variance is small. */
    check_norm(&r, (norm_case){NORM_LAYER, 4, 33, 0, 1, 1, 0, 1e-2f, 0.0f, 0.0f});
}

/* A large common offset must not cost precision (two-pass statistics). */
TEST(ops_layer_norm_offset)
{
    ops_rng r = {21};
    check_norm(&r, (norm_case){NORM_LAYER, 3, 768, 0, 1, 1, 0, 1e-5f, 0.0f, 1000.0f});
    check_norm(&r, (norm_case){NORM_LAYER, 3, 768, 1, 1, 1, 1, 1e-5f, 0.0f, 1000.0f});
}

TEST(ops_rms_norm)
{
    ops_rng r = {22};
    const int64_t shapes[][2] = {{1, 1}, {1, 7}, {5, 384}, {3, 1023}};
    const float offsets[] = {0.0f, 1.0f};
    for (int s = 0; s < 4; s++)
        for (int mode = 0; mode < 8; mode++)
            for (int o = 0; o < 2; o++)
                check_norm(&r, (norm_case){NORM_RMS, shapes[s][0], shapes[s][1], mode & 1, (mode >> 1) & 1, 0,
                                           (mode >> 2) & 1, 1e-6f, offsets[o], 0.0f});
    check_norm(&r, (norm_case){NORM_RMS, 4, 33, 1, 1, 0, 0, 0.5f, 1.0f, 0.0f});
}

/* Per-head RMSNorm on the q window of a fused QKV row: only that window
 * changes, each head normalised on its own. */
TEST(ops_head_rms_norm)
{
    const iv_ops *ops = iv_cpu_ops();
    ops_rng r = {23};
    const int shapes[][3] = {{1, 1, 1}, {5, 3, 12}, {4, 2, 64}, {3, 4, 7}};
    for (int s = 0; s < 4; s++)
        for (int o = 0; o < 3; o++) {
            int64_t rows = shapes[s][0];
            int nh = shapes[s][1], hd = shapes[s][2];
            float *xb;
            iv_view x = ops_wide_view(&xb, &r, rows, (int64_t)nh * hd, 5, (int64_t)nh * hd * 3 + 5, -3.0f, 3.0f);
            float *w = ops_rand(&r, hd, 0.5f, 1.5f);
            iv_tensor wt = iv_tensor_1d(w, hd);
            float w_offset = o == 2 ? 1.0f : 0.0f;
            const iv_tensor *wp = o == 0 ? NULL : &wt;
            double *want = ops_view_to_double(x);
            for (int64_t t = 0; t < rows; t++)
                for (int h = 0; h < nh; h++) {
                    double *v = want + t * nh * hd + h * hd, ms = 0;
                    for (int k = 0; k < hd; k++) ms += v[k] * v[k];
                    double inv = 1.0 / sqrt(ms / hd + 1e-6);
                    for (int k = 0; k < hd; k++) v[k] = v[k] * inv * (wp ? (double)w[k] + w_offset : 1.0);
                }
            ops->head_rms_norm(ops, x, nh, hd, wp, 1e-6f, w_offset);
            ops_check_close("head_rms_norm", x, want, 2e-6, 2e-6);
            CHECK_EQ_INT(ops_gap_writes(xb, x), 0);
            free(xb);
            free(w);
            free(want);
        }
}
