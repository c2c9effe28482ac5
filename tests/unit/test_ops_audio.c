/* The CPU ops Gemma4's audio tower added (clamp, mul_cols, conv2d, and the
 * attention's softcap_after_bias) against straightforward double-precision
 * references. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"
#include "ops_test_util.h"
#include "test.h"

TEST(ops_audio_clamp_mul_cols)
{
    const iv_ops *ops = iv_cpu_ops();
    ops_rng r = {4100};
    float *xb, *yb;
    iv_view x = ops_wide_view(&xb, &r, 5, 12, 1, 15, -3.0f, 3.0f);
    iv_view y = ops_wide_view(&yb, &r, 5, 12, 2, 16, 0.0f, 1.0f);
    ((float *)x.data)[3] = NAN;
    double *xd = ops_view_to_double(x), want[60];
    for (int i = 0; i < 60; i++) want[i] = isnan(xd[i]) ? NAN : fmin(fmax(xd[i], -1.5), 0.25);
    ops->clamp(ops, y, x, -1.5f, 0.25f);
    CHECK(isnan(((float *)y.data)[3])); /* torch.clamp keeps NaN */
    ((float *)y.data)[3] = 0.0f, want[3] = 0.0;
    ops_check_close("clamp", y, want, 0, 0);
    CHECK_EQ_INT(ops_gap_writes(yb, y), 0);
    ((float *)x.data)[3] = 1.0f, xd[3] = 1.0;
    ops->clamp(ops, y, x, -INFINITY, INFINITY); /* infinite bounds: a copy */
    ops_check_close("clamp inf", y, xd, 0, 0);

    float wv[4] = {0.5f, -2.0f, 3.25f, 1e-3f};
    iv_tensor w = iv_tensor_1d(wv, 4);
    for (int t = 0; t < 5; t++)
        for (int c = 0; c < 12; c++) want[t * 12 + c] = (double)(float)(xd[t * 12 + c] * wv[c % 4]);
    ops->mul_cols(ops, y, x, &w);
    ops_check_close("mul_cols", y, want, 0, 0);
    ops->mul_cols(ops, x, x, &w); /* in place */
    ops_check_close("mul_cols in place", x, want, 0, 0);
    CHECK_EQ_INT(ops_gap_writes(xb, x), 0);
    free(xb);
    free(yb);
    free(xd);
}

/* Naive conv2d of one image in double: x [len, w_in, c_in]. */
static void conv_ref(double *y, const double *x, const float *w, int len, int w_in, int c_in, int c_out, int k,
                     int s, int p, int out_len, int w_out)
{
    for (int o = 0; o < out_len; o++)
        for (int q = 0; q < w_out; q++)
            for (int co = 0; co < c_out; co++) {
                double acc = 0;
                for (int ci = 0; ci < c_in; ci++)
                    for (int ki = 0; ki < k; ki++)
                        for (int kj = 0; kj < k; kj++) {
                            int t = o * s - p + ki, col = q * s - p + kj;
                            if (t < 0 || t >= len || col < 0 || col >= w_in) continue;
                            acc += (double)w[((co * c_in + ci) * k + ki) * k + kj] * x[((int64_t)t * w_in + col) * c_in + ci];
                        }
                y[((int64_t)o * w_out + q) * c_out + co] = acc;
            }
}

TEST(ops_audio_conv2d)
{
    const iv_ops *ops = iv_cpu_ops();
    static const struct {
        int c_in, c_out, w_in, k, s, p;
    } cases[] = {{1, 5, 16, 3, 2, 1}, {5, 3, 9, 3, 2, 1}, {2, 4, 6, 3, 1, 0}, {3, 2, 7, 1, 1, 0}};
    static const int lens[] = {9, 1, 0, 6, 2};
    enum { N = 5 };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        ops_rng r = {4200 + ci};
        const int c_in = cases[ci].c_in, c_out = cases[ci].c_out, w_in = cases[ci].w_in, k = cases[ci].k;
        const int s = cases[ci].s, p = cases[ci].p, w_out = (w_in + 2 * p - k) / s + 1;
        int32_t cu_in[N + 1] = {0}, cu_out[N + 1] = {0};
        for (int i = 0; i < N; i++) {
            cu_in[i + 1] = cu_in[i] + lens[i];
            cu_out[i + 1] = cu_out[i] + (lens[i] + 2 * p >= k ? (lens[i] + 2 * p - k) / s + 1 : 0);
        }
        const int64_t xc = (int64_t)w_in * c_in, yc = (int64_t)w_out * c_out;
        float *xb, *yb;
        iv_view x = ops_wide_view(&xb, &r, cu_in[N], xc, 1, xc + 3, -2.0f, 2.0f);
        iv_view y = ops_wide_view(&yb, &r, cu_out[N], yc, 2, yc + 2, 0.0f, 1.0f);
        float *wv = ops_rand(&r, (int64_t)c_out * c_in * k * k, -0.5f, 0.5f);
        iv_tensor w = iv_tensor_2d(wv, c_out, (int64_t)c_in * k * k);
        double *xd = ops_view_to_double(x), *want = calloc((size_t)(cu_out[N] * yc) + 1, sizeof(double));
        for (int i = 0; i < N; i++)
            if (cu_out[i + 1] > cu_out[i])
                conv_ref(want + cu_out[i] * yc, xd + cu_in[i] * xc, wv, lens[i], w_in, c_in, c_out, k, s, p,
                         cu_out[i + 1] - cu_out[i], w_out);
        iv_conv2d_args a = {.y = y, .x = x, .w = &w, .c_in = c_in, .c_out = c_out, .w_in = w_in, .w_out = w_out,
                            .kernel = k, .stride = s, .pad = p, .cu_in = cu_in, .cu_out = cu_out, .cu_in_dev = cu_in,
                            .cu_out_dev = cu_out, .n_seqs = N};
        ops->conv2d(ops, &a);
        ops_check_close("conv2d", y, want, 1e-5, 1e-5);
        CHECK_EQ_INT(ops_gap_writes(yb, y), 0);
        free(xb);
        free(yb);
        free(wv);
        free(xd);
        free(want);
    }
}

/* Causal windowed attention with an additive bias inside the softcap:
 * s = cap tanh((scale q.k + bias) / cap), against a double reference. */
TEST(ops_audio_attention_softcap_after_bias)
{
    const iv_ops *ops = iv_cpu_ops();
    enum { NH = 3, D = 8, N = 3, WL = 4 };
    static const int lens[N] = {7, 1, 20};
    const float cap = 3.0f, scale = 0.7f;
    ops_rng r = {4300};
    int32_t cu[N + 1] = {0};
    int64_t offs[N];
    int64_t total = 0;
    for (int s = 0; s < N; s++) {
        cu[s + 1] = cu[s] + lens[s];
        offs[s] = total;
        total += (int64_t)NH * lens[s] * lens[s];
    }
    const int64_t T = cu[N];
    float *q = ops_rand(&r, T * NH * D, -2.0f, 2.0f), *k = ops_rand(&r, T * NH * D, -2.0f, 2.0f);
    float *v = ops_rand(&r, T * NH * D, -1.0f, 1.0f), *bias = ops_rand(&r, total, -4.0f, 4.0f);
    float *out = calloc((size_t)(T * NH * D), sizeof(float));
    double *want = calloc((size_t)(T * NH * D), sizeof(double));
    for (int s = 0; s < N; s++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < lens[s]; i++) {
                double sc[32], mx = -INFINITY, sum = 0;
                for (int j = 0; j < lens[s]; j++) {
                    sc[j] = -INFINITY;
                    if (j > i || i - j > WL) continue;
                    double dot = 0;
                    for (int e = 0; e < D; e++)
                        dot += (double)q[((cu[s] + i) * NH + h) * D + e] * k[((cu[s] + j) * NH + h) * D + e];
                    double x = (double)scale * dot + bias[offs[s] + ((int64_t)h * lens[s] + i) * lens[s] + j];
                    sc[j] = cap * tanh(x / cap);
                    mx = fmax(mx, sc[j]);
                }
                for (int j = 0; j < lens[s]; j++) sum += sc[j] == -INFINITY ? 0 : exp(sc[j] - mx);
                for (int e = 0; e < D; e++) {
                    double acc = 0;
                    for (int j = 0; j < lens[s]; j++)
                        if (sc[j] != -INFINITY) acc += exp(sc[j] - mx) / sum * v[((cu[s] + j) * NH + h) * D + e];
                    want[((cu[s] + i) * NH + h) * D + e] = acc;
                }
            }
    iv_attn_args a = {
        .q = iv_view_make(q, IV_F32, T, NH * D, NH * D), .k = iv_view_make(k, IV_F32, T, NH * D, NH * D),
        .v = iv_view_make(v, IV_F32, T, NH * D, NH * D), .out = iv_view_make(out, IV_F32, T, NH * D, NH * D),
        .cu_seqlens = cu, .cu_seqlens_dev = cu, .n_seqs = N, .max_seqlen = 20, .n_heads = NH, .n_kv_heads = NH,
        .head_dim = D, .scale = scale, .causal = 1, .window_left = WL, .window_right = -1, .bias = bias,
        .bias_offsets = offs, .bias_offsets_dev = offs, .softcap = cap, .softcap_after_bias = 1,
    };
    ops->attention(ops, &a);
    ops_check_close("softcap after bias", a.out, want, 2e-6, 2e-6);
    /* and the default order differs on these inputs (the switch matters) */
    a.softcap_after_bias = 0;
    ops->attention(ops, &a);
    double worst = 0;
    for (int64_t i = 0; i < T * NH * D; i++) worst = fmax(worst, fabs(out[i] - want[i]));
    CHECK(worst > 1e-3);
    free(q);
    free(k);
    free(v);
    free(bias);
    free(out);
    free(want);
}
