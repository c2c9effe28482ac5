/* The int8 linear (ops/cpu/int8_*.c): integer kernels exact in int32 (at the
 * saturation-prone extremes and near the overflow bound), the whole op equal
 * to a double reference of the dequantized math within float rounding, within
 * the analytic quantization error of the FP32 product, and the int8 table
 * dispatching on the weight dtype. Every test runs each kernel this CPU has. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/int8_kernels.h"
#include "ops/cpu/int8_ops.h"
#include "ops_test_util.h"
#include "test.h"

typedef struct {
    void *blob;
    float *scales;
    iv_tensor t;
} qweight;

/* Weights quantized to +-qmax; quantize_weight uses the active kernel's
 * range, as the model loader does by default. */
static qweight quantize_weight_q(const float *w, int64_t out, int64_t in, int qmax)
{
    qweight q;
    q.blob = aligned_alloc(64, (iv_int8_packed_bytes(out, in) + 63) & ~(size_t)63);
    q.scales = malloc((size_t)out * sizeof(float));
    if (!q.blob || !q.scales || iv_int8_pack_weights(q.blob, q.scales, w, out, in, qmax)) abort();
    q.t = iv_int8_weight_tensor(q.blob, q.scales, out, in);
    return q;
}

static qweight quantize_weight(const float *w, int64_t out, int64_t in)
{
    return quantize_weight_q(w, out, in, iv_int8_kernel_qmax(iv_int8_kernel_active()));
}

static void qweight_free(qweight *q)
{
    free(q->blob);
    free(q->scales);
}

/* Runs body once per kernel available here, then restores the default. */
#define FOR_EACH_KERNEL(kvar)                                                  \
    for (int kvar = 0, _best = iv_int8_kernel_active(); kvar <= IV_INT8_KERNEL_COUNT; kvar++) \
        if (kvar == IV_INT8_KERNEL_COUNT) iv_int8_kernel_select((iv_int8_kernel)_best); \
        else if (iv_int8_kernel_available((iv_int8_kernel)kvar) && (iv_int8_kernel_select((iv_int8_kernel)kvar), 1))

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

/* ---- kernels: exact int32 ---- */

/* Integer weights whose rows reach +-qmax (the kernel's range: 127, or 63
 * for vpmaddubsw, whose pair sums then sit just under the 16-bit bound)
 * quantize to themselves (scale 1). */
static void check_tile_exact(int kernel, int rows, int64_t in, int extreme, ops_rng *r)
{
    const iv_int8_kernel_desc *kd = iv_int8_kernel_desc_of((iv_int8_kernel)kernel);
    const int64_t out = kd->cols, kp = iv_int8_padded_in(in);
    const int qm = kd->qmax;
    float *w = malloc((size_t)(out * in) * sizeof(float));
    for (int64_t n = 0; n < out; n++)
        for (int64_t k = 0; k < in; k++) {
            int v = extreme ? ((n + k) % 2 ? qm : -qm) : (int)(ops_rng_next(r) % (2 * qm + 1)) - qm;
            if (extreme == 2) v = qm; /* largest positive sums: overflow margin */
            w[n * in + k] = (float)(k == 0 ? (v < 0 ? -qm : qm) : v);
        }
    qweight q = quantize_weight_q(w, out, in, qm);
    const size_t esz = kd->wide ? 2 : 1, stride = (size_t)kp * esz;
    uint8_t *a = calloc((size_t)rows * stride, 1);
    uint8_t *av = malloc((size_t)(rows * in));
    for (int i = 0; i < rows; i++)
        for (int64_t k = 0; k < in; k++) {
            uint8_t v = extreme ? 255 : (uint8_t)(ops_rng_next(r) & 255);
            av[i * in + k] = v;
            if (kd->wide) ((uint16_t *)(a + i * stride))[k] = v;
            else a[i * stride + k] = v;
        }
    int32_t *c = malloc((size_t)(rows * out) * sizeof(int32_t));
    /* Odd row counts also prefetch (here the same panels again): the
     * products must not change. */
    kd->tile(a, stride, rows, q.blob, kp, c, out, rows % 2 ? (const int8_t *)q.blob : NULL);
    int64_t bad = 0;
    for (int i = 0; i < rows; i++)
        for (int64_t n = 0; n < out; n++) {
            int64_t want = 0;
            for (int64_t k = 0; k < in; k++) want += (int64_t)av[i * in + k] * (int64_t)w[n * in + k];
            if (c[i * out + n] != want && bad++ < 3)
                iv_test_fail(__FILE__, __LINE__, "%s rows %d in %lld extreme %d: [%d][%lld] = %d, want %lld", kd->name,
                             rows, (long long)in, extreme, i, (long long)n, c[i * out + n], (long long)want);
        }
    free(w);
    free(a);
    free(av);
    free(c);
    qweight_free(&q);
}

TEST(int8_kernels_exact_int32)
{
    ops_rng r = {91};
    const int64_t ins[] = {1, 3, 4, 5, 31, 32, 33, 100, 387};
    FOR_EACH_KERNEL(k)
    {
        for (int rows = 1; rows <= IV_INT8_MR; rows++)
            for (int i = 0; i < 9; i++) {
                check_tile_exact(k, rows, ins[i], 0, &r);
                check_tile_exact(k, rows, ins[i], 1, &r);
            }
        /* 255 x 127 everywhere, just under the int32 bound of IV_INT8_MAX_IN. */
        check_tile_exact(k, IV_INT8_MR, IV_INT8_MAX_IN - 4, 2, &r);
    }
}

/* ---- the op: exact integers end to end ---- */

/* Rows holding 0 and 255 quantize with scale 1 and zero point 0, weights
 * reaching +-qmax (the active kernel's) with scale 1: y is then the exact
 * integer dot product (below 2^24, so exact in float). */
static void check_linear_integers(int64_t rows, int64_t in, int64_t out, int pattern, ops_rng *r)
{
    const int qm = iv_int8_kernel_qmax(iv_int8_kernel_active());
    const iv_ops *ops = iv_cpu_int8_ops();
    float *x = malloc((size_t)(rows * in) * sizeof(float)), *w = malloc((size_t)(out * in) * sizeof(float));
    for (int64_t t = 0; t < rows; t++)
        for (int64_t k = 0; k < in; k++)
            x[t * in + k] = pattern ? 255.0f : (k == 0 ? 255.0f : k == 1 ? 0.0f : (float)(ops_rng_next(r) & 255));
    for (int64_t n = 0; n < out; n++)
        for (int64_t k = 0; k < in; k++)
            w[n * in + k] = pattern ? (float)((k + n) % 2 ? qm : -qm)
                                    : (k == 0 ? (float)qm : (float)((int)(ops_rng_next(r) % (2 * qm + 1)) - qm));
    qweight q = quantize_weight(w, out, in);
    float *y = malloc((size_t)(rows * out) * sizeof(float));
    ops->linear(ops, (iv_view){y, rows, out, out, IV_F32}, (iv_view){x, rows, in, in, IV_F32}, &q.t, NULL, IV_ACT_NONE, NULL);
    int64_t bad = 0;
    for (int64_t t = 0; t < rows; t++)
        for (int64_t n = 0; n < out; n++) {
            int64_t want = 0;
            for (int64_t k = 0; k < in; k++) want += (int64_t)x[t * in + k] * (int64_t)w[n * in + k];
            if (y[t * out + n] != (float)want && bad++ < 3)
                iv_test_fail(__FILE__, __LINE__, "%s %lldx%lldx%lld pattern %d: [%lld][%lld] = %.9g, want %lld",
                             iv_int8_kernel_name(iv_int8_kernel_active()), (long long)rows, (long long)in,
                             (long long)out, pattern, (long long)t, (long long)n, y[t * out + n], (long long)want);
        }
    free(x);
    free(w);
    free(y);
    qweight_free(&q);
}

TEST(int8_linear_exact_on_integers)
{
    ops_rng r = {92};
    const int64_t shapes[][3] = {{1, 1, 1}, {1, 33, 17}, {6, 32, 16}, {7, 35, 9},
                                 {13, 100, 40}, {50, 61, 70}, {100, 129, 300}, {3, 500, 5}};
    FOR_EACH_KERNEL(k)
    {
        for (int s = 0; s < 8; s++)
            for (int pattern = 0; pattern < 2; pattern++)
                check_linear_integers(shapes[s][0], shapes[s][1], shapes[s][2], pattern, &r);
    }
}

/* ---- the op against the dequantized math ---- */

typedef struct {
    int64_t rows, in, out;
    int bias, residual; /* residual: 0 none, 1 separate buffer, 2 y itself */
    iv_act act;
} i8_case;

/* The reference takes the quantized values (the rules are tested in
 * test_int8_quant.c), sums them exactly and dequantizes in double; the op
 * rounds the int32 sum to float once and applies two scales, so they agree
 * to a few float roundings (2e-6 relative, as the FP32 linear's epilogue).
 * It also stays within the analytic quantization error of the FP32 product:
 * |x w - x^ w^| <= sum_k (s_x/2 |w_k| + (|x_k| + s_x/2) s_w/2). */
static void check_linear_int8(ops_rng *r, i8_case c)
{
    const iv_ops *ops = iv_cpu_int8_ops();
    float *xb, *yb, *resb = NULL;
    iv_view x = ops_wide_view(&xb, r, c.rows, c.in, 2, c.in + 7, -2.0f, 1.5f);
    iv_view y = ops_wide_view(&yb, r, c.rows, c.out, 3, c.out + 5, -1.0f, 1.0f);
    float *w = ops_rand(r, c.out * c.in, -0.5f, 0.4f), *b = ops_rand(r, c.out, -0.5f, 0.5f);
    qweight q = quantize_weight(w, c.out, c.in);
    iv_tensor bt = iv_tensor_1d(b, c.out);
    const float *res = NULL;
    if (c.residual == 1) res = ops_wide_view(&resb, r, c.rows, c.out, 3, c.out + 5, -1.0f, 1.0f).data;
    else if (c.residual == 2) res = y.data;

    double *want = malloc((size_t)(c.rows * c.out) * sizeof(double));
    double *pre = malloc((size_t)(c.rows * c.out) * sizeof(double));
    double *exact = malloc((size_t)(c.rows * c.out) * sizeof(double));
    double *bound = malloc((size_t)(c.rows * c.out) * sizeof(double));
    uint8_t *qx = malloc((size_t)c.in);
    for (int64_t t = 0; t < c.rows; t++) {
        float sx;
        int32_t zx;
        const float *xr = ((float *)x.data) + t * x.ld;
        iv_int8_quantize_row(xr, c.in, qx, &sx, &zx);
        for (int64_t o = 0; o < c.out; o++) {
            int64_t isum = 0;
            double ex = 0, bd = 0;
            for (int64_t k = 0; k < c.in; k++) {
                isum += (int64_t)(qx[k] - zx) * iv_int8_weight_at(&q.t, o, k);
                ex += (double)xr[k] * w[o * c.in + k];
                bd += 0.5 * sx * fabs(w[o * c.in + k]) + (fabs(xr[k]) + 0.5 * sx) * 0.5 * q.scales[o];
            }
            double p = (double)isum * sx * q.scales[o];
            double v = act_d(p + (c.bias ? b[o] : 0.0), c.act);
            if (res) v += res[t * y.ld + o];
            want[t * c.out + o] = v;
            pre[t * c.out + o] = fabs(p) + (c.bias ? fabs(b[o]) : 0.0);
            exact[t * c.out + o] = ex;
            bound[t * c.out + o] = bd;
        }
    }

    ops->linear(ops, y, x, &q.t, c.bias ? &bt : NULL, c.act, res);

    int64_t bad = 0;
    for (int64_t t = 0; t < c.rows; t++)
        for (int64_t o = 0; o < c.out; o++) {
            const int64_t i = t * c.out + o;
            double got = ((float *)y.data)[t * y.ld + o], tol = 2e-6 * pre[i] + 2e-6 * fabs(want[i]) + 1e-30;
            if (!(fabs(got - want[i]) <= tol) && bad++ < 3)
                iv_test_fail(__FILE__, __LINE__,
                             "%s rows %lld in %lld out %lld bias %d act %d residual %d: [%lld][%lld] got %.9g want %.9g",
                             iv_int8_kernel_name(iv_int8_kernel_active()), (long long)c.rows, (long long)c.in,
                             (long long)c.out, c.bias, (int)c.act, c.residual, (long long)t, (long long)o, got, want[i]);
        }
    /* Quantization bound, checked where nothing follows the product. */
    if (c.act == IV_ACT_NONE && !c.bias && !c.residual)
        for (int64_t t = 0; t < c.rows; t++)
            for (int64_t o = 0; o < c.out; o++) {
                const int64_t i = t * c.out + o;
                double err = fabs(((float *)y.data)[t * y.ld + o] - exact[i]);
                if (!(err <= bound[i] * (1 + 1e-5) + 1e-6 * fabs(exact[i])) && bad++ < 3)
                    iv_test_fail(__FILE__, __LINE__, "[%lld][%lld]: error %.3g over the quantization bound %.3g",
                                 (long long)t, (long long)o, err, bound[i]);
            }
    CHECK_EQ_INT(ops_gap_writes(yb, y), 0);
    free(xb);
    free(yb);
    free(resb);
    free(w);
    free(b);
    free(want);
    free(pre);
    free(exact);
    free(bound);
    free(qx);
    qweight_free(&q);
}

TEST(int8_linear_epilogues_and_edge_shapes)
{
    ops_rng r = {93};
    /* K not a multiple of 4 or 32, one row, outputs not a multiple of 16. */
    const int64_t shapes[][3] = {{1, 1, 1}, {1, 17, 5}, {5, 64, 33}, {37, 29, 70}, {3, 8, 16}, {1, 383, 24}};
    const iv_act acts[] = {IV_ACT_NONE, IV_ACT_GELU, IV_ACT_GELU_TANH, IV_ACT_SILU, IV_ACT_TANH, IV_ACT_RELU};
    FOR_EACH_KERNEL(k)
    {
        for (int s = 0; s < 6; s++)
            for (int a = 0; a < 6; a++)
                for (int bias = 0; bias < 2; bias++)
                    for (int res = 0; res < 3; res++)
                        check_linear_int8(&r, (i8_case){shapes[s][0], shapes[s][1], shapes[s][2], bias, res, acts[a]});
    }
}

/* Several row tiles and column tiles, threaded, with the default kernel
 * (int8_linear_exact_on_integers runs the threaded path on every kernel). */
TEST(int8_linear_large)
{
    ops_rng r = {94};
    check_linear_int8(&r, (i8_case){300, 384, 200, 0, 0, IV_ACT_NONE});
    check_linear_int8(&r, (i8_case){300, 384, 200, 1, 1, IV_ACT_GELU});
    check_linear_int8(&r, (i8_case){257, 96, 500, 1, 2, IV_ACT_NONE});
    check_linear_int8(&r, (i8_case){8, 384, 1536, 1, 0, IV_ACT_GELU});
    check_linear_int8(&r, (i8_case){8, 1536, 384, 1, 2, IV_ACT_NONE});
}

TEST(int8_linear_nan_row_stays_nan)
{
    ops_rng r = {95};
    const iv_ops *ops = iv_cpu_int8_ops();
    float *x = ops_rand(&r, 3 * 40, -1.0f, 1.0f), *w = ops_rand(&r, 20 * 40, -1.0f, 1.0f);
    x[40 + 7] = NAN;
    qweight q = quantize_weight(w, 20, 40);
    float y[60];
    ops->linear(ops, (iv_view){y, 3, 20, 20, IV_F32}, (iv_view){x, 3, 40, 40, IV_F32}, &q.t, NULL, IV_ACT_NONE, NULL);
    for (int o = 0; o < 20; o++) {
        CHECK(isfinite(y[o]) && isfinite(y[40 + o]));
        CHECK(isnan(y[20 + o]));
    }
    free(x);
    free(w);
    qweight_free(&q);
}

TEST(int8_linear_zero_rows)
{
    const iv_ops *ops = iv_cpu_int8_ops();
    float w[6] = {1, 2, 3, 4, 5, 6}, dummy = 7.0f;
    qweight q = quantize_weight(w, 2, 3);
    iv_view x = {&dummy, 0, 3, 3, IV_F32}, y = {&dummy, 0, 2, 2, IV_F32};
    ops->linear(ops, y, x, &q.t, NULL, IV_ACT_GELU, NULL);
    CHECK(dummy == 7.0f);
    qweight_free(&q);
}

/* F32 weights through the int8 table take the FP32 path bit for bit; every
 * other op is the FP32 table's own. */
TEST(int8_table_dispatches_on_weight_dtype)
{
    const iv_ops *i8 = iv_cpu_int8_ops(), *f32 = iv_cpu_ops();
    CHECK_STR(i8->name, "cpu-int8");
    CHECK(i8->device == IV_CPU);
    CHECK(i8->layer_norm == f32->layer_norm && i8->attention == f32->attention && i8->embed == f32->embed &&
          i8->l2_normalize == f32->l2_normalize && i8->glu == f32->glu);
    ops_rng r = {96};
    float *x = ops_rand(&r, 9 * 50, -1.0f, 1.0f), *w = ops_rand(&r, 30 * 50, -1.0f, 1.0f);
    float *b = ops_rand(&r, 30, -1.0f, 1.0f);
    float y1[270], y2[270], y3[270];
    iv_tensor wt = iv_tensor_2d(w, 30, 50), bt = iv_tensor_1d(b, 30);
    iv_view x_v = {x, 9, 50, 50, IV_F32};
    f32->linear(f32, (iv_view){y1, 9, 30, 30, IV_F32}, x_v, &wt, &bt, IV_ACT_GELU, NULL);
    i8->linear(i8, (iv_view){y2, 9, 30, 30, IV_F32}, x_v, &wt, &bt, IV_ACT_GELU, NULL);
    CHECK(!memcmp(y1, y2, sizeof y1));
    qweight q = quantize_weight(w, 30, 50);
    i8->linear(i8, (iv_view){y3, 9, 30, 30, IV_F32}, x_v, &q.t, &bt, IV_ACT_GELU, NULL);
    CHECK(memcmp(y1, y3, sizeof y1) != 0);              /* really quantized */
    CHECK(iv_test_cosine(y1, y3, 270) > 0.999);         /* and still close */
    free(x);
    free(w);
    free(b);
    qweight_free(&q);
}

/* All kernels give the same bits (same integers, same epilogue), on 8-bit
 * weights (which the vpmaddubsw kernel hands to the exact vpmaddwd one) and
 * on 7-bit weights (which every kernel runs). */
TEST(int8_kernels_agree_bitwise)
{
    ops_rng r = {97};
    const iv_ops *ops = iv_cpu_int8_ops();
    const int64_t rows = 61, in = 203, out = 90;
    float *x = ops_rand(&r, rows * in, -3.0f, 2.0f), *w = ops_rand(&r, out * in, -0.2f, 0.2f);
    float *ref = malloc((size_t)(rows * out) * sizeof(float)), *y = malloc((size_t)(rows * out) * sizeof(float));
    const int ranges[] = {IV_INT8_QMAX, IV_INT8_QMAX_7BIT};
    for (int q7 = 0; q7 < 2; q7++) {
        qweight q = quantize_weight_q(w, out, in, ranges[q7]);
        int have_ref = 0;
        FOR_EACH_KERNEL(k)
        {
            ops->linear(ops, (iv_view){have_ref ? y : ref, rows, out, out, IV_F32}, (iv_view){x, rows, in, in, IV_F32},
                        &q.t, NULL, IV_ACT_NONE, NULL);
            if (have_ref)
                CHECK_MSG(!memcmp(ref, y, (size_t)(rows * out) * sizeof(float)), "qmax %d: kernel %d differs",
                          ranges[q7], k);
            have_ref = 1;
        }
        qweight_free(&q);
    }
    free(x);
    free(w);
    free(ref);
    free(y);
}

/* Why 8-bit weights must not reach vpmaddubsw: its 16-bit pair sums
 * saturate (255 * 127 * 2 > 32767), so the tile itself is wrong on them. */
TEST(int8_vpmaddubsw_saturates_on_8bit_weights)
{
    if (!iv_int8_kernel_available(IV_INT8_KERNEL_AVX2_UBSW)) {
        iv_test_skip("no AVX2 here");
        return;
    }
    const iv_int8_kernel_desc *kd = iv_int8_kernel_desc_of(IV_INT8_KERNEL_AVX2_UBSW);
    const int64_t out = kd->cols, in = 8, kp = iv_int8_padded_in(in);
    float w[16 * 8];
    for (int64_t i = 0; i < out * in; i++) w[i] = 127.0f;
    qweight q = quantize_weight_q(w, out, in, IV_INT8_QMAX);
    uint8_t a[8];
    memset(a, 255, sizeof a);
    int32_t c[16];
    kd->tile(a, (size_t)kp, 1, q.blob, kp, c, out, NULL);
    CHECK(c[0] != 255 * 127 * 8);
    CHECK(c[0] == 32767 * 4);
    qweight_free(&q);
}
