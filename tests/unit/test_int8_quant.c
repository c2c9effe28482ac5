/* Int8 quantization rules (ops/cpu/int8_ops.h): weights per row symmetric,
 * activations per row asymmetric with 0 in range, checked value by value
 * against the stated formulas and against the half-step error bound. */
#include <math.h>
#include <stdlib.h>

#include "ops/cpu/int8_ops.h"
#include "ops_test_util.h"
#include "test.h"

static void check_activation_row(const float *x, int64_t n, const char *what)
{
    uint8_t *q = malloc((size_t)n);
    float s;
    int32_t z;
    iv_int8_quantize_row(x, n, q, &s, &z);
    float lo = 0.0f, hi = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        lo = fminf(lo, x[i]);
        hi = fmaxf(hi, x[i]);
    }
    CHECK_MSG(s == (hi - lo) / 255.0f, "%s: scale %.9g, want %.9g", what, s, (hi - lo) / 255.0f);
    if (s > 0.0f) {
        const float inv = 1.0f / s;
        CHECK_MSG(z == (int32_t)fminf(fmaxf(nearbyintf(-lo * inv), 0.0f), 255.0f), "%s: zero point %d", what, z);
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++) {
            float want = fminf(fmaxf(nearbyintf(x[i] * inv) + (float)z, 0.0f), 255.0f);
            /* Reconstruction within half a step (plus float rounding of s). */
            double err = fabs((double)x[i] - (double)s * (q[i] - z));
            if ((q[i] != (uint8_t)want || !(err <= 0.5 * s * (1 + 1e-5) + 1e-6 * fabs(x[i]))) && bad++ < 3)
                iv_test_fail(__FILE__, __LINE__, "%s: x[%lld] = %.9g -> q %d, want %d (error %.3g, scale %.3g)",
                             what, (long long)i, x[i], q[i], (int)want, err, s);
        }
    }
    free(q);
}

TEST(int8_activation_rows_follow_the_rule)
{
    ops_rng r = {81};
    /* Around every block width a quantizer may use (8, 16, 32 values). */
    const int64_t lens[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 384, 1000, 1536};
    for (int i = 0; i < (int)(sizeof lens / sizeof lens[0]); i++) {
        float *x = ops_rand(&r, lens[i], -3.0f, 2.0f);
        check_activation_row(x, lens[i], "mixed signs");
        for (int64_t k = 0; k < lens[i]; k++) x[k] = fabsf(x[k]) + 0.5f;
        check_activation_row(x, lens[i], "all positive");
        for (int64_t k = 0; k < lens[i]; k++) x[k] = -x[k];
        check_activation_row(x, lens[i], "all negative");
        free(x);
    }
}

TEST(int8_activation_range_ends_and_special_rows)
{
    /* Positive rows start at q = 0 (zero point 0), negative ones end at 255. */
    float pos[5] = {0.5f, 1.0f, 2.0f, 3.0f, 4.0f}, neg[3] = {-4.0f, -1.0f, -2.0f};
    uint8_t q[16];
    float s;
    int32_t z;
    iv_int8_quantize_row(pos, 5, q, &s, &z);
    CHECK_EQ_INT(z, 0);
    CHECK_EQ_INT(q[4], 255);
    iv_int8_quantize_row(neg, 3, q, &s, &z);
    CHECK_EQ_INT(z, 255);
    CHECK_EQ_INT(q[0], 0);
    /* A GELU-like row keeps 256 levels over [min, max], not over [-max, max]. */
    float gelu[4] = {-0.17f, 0.0f, 1.0f, 3.0f};
    iv_int8_quantize_row(gelu, 4, q, &s, &z);
    CHECK(fabsf(s - 3.17f / 255.0f) < 1e-9f);
    CHECK_EQ_INT(q[0], 0);
    CHECK_EQ_INT(q[3], 255);
    float zeros[9] = {0};
    iv_int8_quantize_row(zeros, 9, q, &s, &z);
    CHECK(s == 0.0f);
    CHECK_EQ_INT(z, 0);
    float with_nan[9] = {1, 2, 3, 4, 5, 6, 7, 8, NAN}, with_inf[3] = {1, INFINITY, 2};
    iv_int8_quantize_row(with_nan, 9, q, &s, &z);
    CHECK(isnan(s));
    iv_int8_quantize_row(with_inf, 3, q, &s, &z);
    CHECK(isnan(s));
}

TEST(int8_weights_per_row_symmetric)
{
    ops_rng r = {82};
    const int64_t shapes[][2] = {{1, 1}, {3, 5}, {17, 33}, {40, 384}};
    for (int cs = 0; cs < 8; cs++) {
        /* 8-bit, then the 7-bit range of the vpmaddubsw kernel. */
        const int sh = cs % 4, qm = cs < 4 ? IV_INT8_QMAX : IV_INT8_QMAX_7BIT;
        const int64_t out = shapes[sh][0], in = shapes[sh][1];
        float *w = ops_rand(&r, out * in, -0.3f, 0.2f);
        for (int64_t k = 0; k < in; k++) w[(out - 1) * in + k] = 0.0f; /* an all-zero row */
        if (out > 2) w[in + 1] = 5.0f;                                  /* an outlier row */
        void *blob = aligned_alloc(64, (iv_int8_packed_bytes(out, in) + 63) & ~(size_t)63);
        float *scales = malloc((size_t)out * sizeof(float));
        REQUIRE(iv_int8_pack_weights(blob, scales, w, out, in, qm) == 0);
        CHECK_EQ_INT(iv_int8_blob_qmax(blob, out, in), qm);
        iv_tensor t = iv_int8_weight_tensor(blob, scales, out, in);
        CHECK(t.dtype == IV_I8 && t.scales == scales && t.shape[0] == out && t.shape[1] == in);
        const int32_t *sums = (const int32_t *)((const char *)blob + iv_int8_sums_offset(out, in));
        int64_t bad = 0;
        for (int64_t n = 0; n < out; n++) {
            float amax = 0.0f;
            for (int64_t k = 0; k < in; k++) amax = fmaxf(amax, fabsf(w[n * in + k]));
            CHECK_MSG(scales[n] == amax / (float)qm, "row %lld scale %.9g, want %.9g", (long long)n, scales[n],
                      amax / (float)qm);
            int32_t sum = 0;
            for (int64_t k = 0; k < in; k++) {
                int q = iv_int8_weight_at(&t, n, k);
                int want = amax > 0 ? (int)nearbyintf(w[n * in + k] / scales[n]) : 0;
                double err = fabs((double)w[n * in + k] - (double)scales[n] * q);
                if ((q != want || q < -qm || q > qm || !(err <= 0.5 * scales[n] * (1 + 1e-5))) && bad++ < 3)
                    iv_test_fail(__FILE__, __LINE__, "[%lld][%lld] %.9g -> %d, want %d", (long long)n, (long long)k,
                                 w[n * in + k], q, want);
                sum += q;
            }
            CHECK_EQ_INT(sums[n], sum);
        }
        free(w);
        free(blob);
        free(scales);
    }
}

TEST(int8_weights_reject_non_finite)
{
    float w[6] = {1, 2, 3, 4, NAN, 6};
    void *blob = aligned_alloc(64, (iv_int8_packed_bytes(2, 3) + 63) & ~(size_t)63);
    float scales[2];
    CHECK(iv_int8_pack_weights(blob, scales, w, 2, 3, IV_INT8_QMAX) == -1);
    w[4] = -INFINITY;
    CHECK(iv_int8_pack_weights(blob, scales, w, 2, 3, IV_INT8_QMAX) == -1);
    free(blob);
}
