/* add, scale, embed, softmax and l2_normalize against double references. */
#include <math.h>
#include <stdlib.h>

#include "ops/cpu/gemm_panel.h"
#include "ops/ops.h"
#include "ops_test_util.h"
#include "test.h"

TEST(ops_add_scale)
{
    const iv_ops *ops = iv_cpu_ops();
    ops_rng r = {30};
    const int64_t shapes[][2] = {{1, 1}, {3, 13}, {70, 600}};
    for (int s = 0; s < 3; s++) {
        int64_t rows = shapes[s][0], cols = shapes[s][1];
        float *ab, *bb, *yb;
        iv_view a = ops_wide_view(&ab, &r, rows, cols, 1, cols + 2, -3.0f, 3.0f);
        iv_view b = ops_wide_view(&bb, &r, rows, cols, 0, cols + 1, -3.0f, 3.0f);
        iv_view y = ops_wide_view(&yb, &r, rows, cols, 2, cols + 5, 0.0f, 1.0f);
        double *ad = ops_view_to_double(a), *bd = ops_view_to_double(b);
        double *want = malloc((size_t)(rows * cols) * sizeof(double));
        /* Float addition of float inputs is exact to half an ulp. */
        for (int64_t i = 0; i < rows * cols; i++) want[i] = ad[i] + bd[i];
        ops->add(ops, y, a, b);
        ops_check_close("add", y, want, 0, 0x1p-24);
        CHECK_EQ_INT(ops_gap_writes(yb, y), 0);
        ops->add(ops, a, a, b); /* y aliasing a */
        ops_check_close("add into a", a, want, 0, 0x1p-24);
        double *a2 = ops_view_to_double(a); /* now float(a + b) */
        for (int64_t i = 0; i < rows * cols; i++) want[i] = a2[i] + bd[i];
        ops->add(ops, b, a, b); /* y aliasing b */
        ops_check_close("add into b", b, want, 0, 0x1p-24);
        free(a2);
        for (int64_t i = 0; i < rows * cols; i++) want[i] = bd[i] * -0.37;
        iv_view b2 = {bb, rows, cols, cols + 1, IV_F32};
        for (int64_t t = 0; t < rows; t++)
            for (int64_t c = 0; c < cols; c++) ((float *)b2.data)[t * b2.ld + c] = (float)bd[t * cols + c];
        ops->scale(ops, y, b2, -0.37f);
        ops_check_close("scale", y, want, 0, 1.2e-7);
        ops->scale(ops, b2, b2, -0.37f);
        ops_check_close("scale in place", b2, want, 0, 1.2e-7);
        CHECK_EQ_INT(ops_gap_writes(bb, b2), 0);
        free(ab);
        free(bb);
        free(yb);
        free(ad);
        free(bd);
        free(want);
    }
}

TEST(ops_embed)
{
    const iv_ops *ops = iv_cpu_ops();
    ops_rng r = {31};
    const int64_t vocab = 70, hidden = 19, rows = 9;
    float *table = ops_rand(&r, vocab * hidden, -1.0f, 1.0f);
    iv_tensor tt = iv_tensor_2d(table, vocab, hidden);
    int32_t ids[9] = {0, 69, 31, 32, 17, 64, 63, 33, 1};
    float *yb;
    iv_view y = ops_wide_view(&yb, &r, rows, hidden, 4, hidden + 6, -1.0f, 1.0f);
    double *want = malloc((size_t)(rows * hidden) * sizeof(double));
    for (int64_t t = 0; t < rows; t++)
        for (int64_t c = 0; c < hidden; c++) want[t * hidden + c] = table[ids[t] * hidden + c];
    ops->embed(ops, y, &tt, ids, 0);
    ops_check_close("embed", y, want, 0, 0);
    for (int64_t i = 0; i < rows * hidden; i++) want[i] *= 2; /* x + x is exact */
    ops->embed(ops, y, &tt, ids, 1);
    ops_check_close("embed accumulate", y, want, 0, 0);
    CHECK_EQ_INT(ops_gap_writes(yb, y), 0);
    /* The same table packed in the linear kernel's panels (a tied MLM
     * decoder packed at load): the same rows, ids on both sides of panel
     * boundaries (32, 64) and in the last, partial panel. */
    float *packed = aligned_alloc(64, iv_cpu_panel_floats(vocab, hidden) * sizeof(float));
    REQUIRE(packed != NULL);
    iv_cpu_pack_panels(packed, table, vocab, hidden);
    iv_tensor tp = iv_cpu_panel_tensor(packed, vocab, hidden);
    for (int64_t i = 0; i < rows * hidden; i++) want[i] /= 2;
    ops->embed(ops, y, &tp, ids, 0);
    ops_check_close("embed from panels", y, want, 0, 0);
    for (int64_t i = 0; i < rows * hidden; i++) want[i] *= 2;
    ops->embed(ops, y, &tp, ids, 1);
    ops_check_close("embed from panels, accumulate", y, want, 0, 0);
    CHECK_EQ_INT(ops_gap_writes(yb, y), 0);
    free(packed);
    free(table);
    free(yb);
    free(want);
}

TEST(ops_softmax)
{
    const iv_ops *ops = iv_cpu_ops();
    ops_rng r = {32};
    const int64_t shapes[][2] = {{1, 1}, {1, 5}, {4, 13}, {3, 1000}, {200, 300}};
    const float ranges[] = {1.0f, 30.0f, 200.0f};
    for (int s = 0; s < 5; s++)
        for (int g = 0; g < 3; g++) {
            int64_t rows = shapes[s][0], cols = shapes[s][1];
            float *xb;
            iv_view x = ops_wide_view(&xb, &r, rows, cols, 3, cols + 4, -ranges[g], ranges[g]);
            if (g == 2) ((float *)x.data)[0] = 1e30f; /* max subtraction keeps this finite */
            double *want = ops_view_to_double(x);
            for (int64_t t = 0; t < rows; t++) {
                double *v = want + t * cols, mx = -INFINITY, sum = 0;
                for (int64_t c = 0; c < cols; c++) mx = v[c] > mx ? v[c] : mx;
                for (int64_t c = 0; c < cols; c++) sum += (v[c] = exp(v[c] - mx));
                for (int64_t c = 0; c < cols; c++) v[c] /= sum;
            }
            ops->softmax(ops, x);
            /* exp of an argument |a| <= 400 carries 400 * 2^-24 relative
             * error from the float subtraction alone. */
            ops_check_close("softmax", x, want, 1e-37, 2e-6 + ranges[g] * 2 * 0x1p-24);
            CHECK_EQ_INT(ops_gap_writes(xb, x), 0);
            free(xb);
            free(want);
        }
}

TEST(ops_l2_normalize)
{
    const iv_ops *ops = iv_cpu_ops();
    ops_rng r = {33};
    float *xb;
    iv_view x = ops_wide_view(&xb, &r, 5, 37, 2, 41, -2.0f, 2.0f);
    for (int c = 0; c < 37; c++) {
        ((float *)x.data)[1 * x.ld + c] = 0.0f;                       /* zero row stays zero */
        ((float *)x.data)[2 * x.ld + c] = c == 3 ? 1e-14f : 0.0f;     /* below eps: divided by 1e-12 */
        ((float *)x.data)[3 * x.ld + c] = (float)(c % 5) * 1e15f;     /* large but no overflow */
    }
    double *want = ops_view_to_double(x);
    for (int t = 0; t < 5; t++) {
        double *v = want + t * 37, ss = 0;
        for (int c = 0; c < 37; c++) ss += v[c] * v[c];
        double d = sqrt(ss) > 1e-12 ? sqrt(ss) : 1e-12;
        for (int c = 0; c < 37; c++) v[c] /= d;
    }
    ops->l2_normalize(ops, x);
    ops_check_close("l2_normalize", x, want, 1e-30, 1e-6);
    CHECK(((float *)x.data)[2 * x.ld + 3] > 0.0099f && ((float *)x.data)[2 * x.ld + 3] < 0.0101f);
    CHECK_EQ_INT(ops_gap_writes(xb, x), 0);
    free(xb);
    free(want);
}
