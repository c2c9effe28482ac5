/* The CPU's routing and gather ops (moe_route, moe_gather, moe_scatter,
 * rel_bias, im2col) against direct references written as the host code
 * they replaced in models/ (block_mlp.c, deberta_attn.c, token_conv.c), bit
 * for bit: moving those mechanisms behind ops must not change an FP32
 * result. Sizes reach the ops' multi-threaded paths too. The other tables
 * are held to these ops in test_ops_devices.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"
#include "ops_test_util.h"
#include "test.h"

static int same_bits(const float *a, const float *b, int64_t n)
{
    return memcmp(a, b, (size_t)n * sizeof(float)) == 0;
}

/* ---- the old host routing (block_mlp.c's moe_route after ops->softmax) ---- */

static void route_ref(const float *logits, int64_t T, int E, int k, int renorm, int32_t *choice, float *weight,
                      int32_t *count, int32_t *slot)
{
    const iv_ops *ops = iv_cpu_ops();
    float *p_all = malloc((size_t)(T * E) * sizeof(float));
    memcpy(p_all, logits, (size_t)(T * E) * sizeof(float));
    ops->softmax(ops, iv_view_make(p_all, IV_F32, T, E, E));
    for (int64_t t = 0; t < T; t++) {
        const float *p = p_all + t * E;
        int32_t *ch = choice + t * k;
        float *w = weight + t * k;
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int i = 0; i < j; i++) taken |= ch[i] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e;
            }
            ch[j] = best;
            w[j] = p[best];
        }
        if (renorm) {
            float sum = 0;
            for (int j = 0; j < k; j++) sum += w[j];
            for (int j = 0; j < k; j++) w[j] /= sum;
        }
    }
    memset(count, 0, (size_t)(E + 1) * sizeof(int32_t));
    for (int64_t i = 0; i < T * k; i++) count[choice[i] + 1]++;
    for (int e = 0; e < E; e++) count[e + 1] += count[e];
    for (int64_t i = 0; i < T * k; i++) slot[count[choice[i]]++] = (int32_t)i;
    for (int e = E; e > 0; e--) count[e] = count[e - 1];
    count[0] = 0;
    free(p_all);
}

TEST(ops_moe_route_gather_scatter_match_host_code)
{
    const iv_ops *ops = iv_cpu_ops();
    static const struct { int64_t T; int E, k, renorm, H, bias, residual; } cases[] = {
        {7, 4, 2, 1, 16, 0, 1}, {40, 8, 1, 0, 24, 1, 0}, {300, 128, 8, 1, 40, 1, 1}, /* parallel route */
        {90, 6, 3, 0, 512, 1, 1},                                                   /* parallel scatter */
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int64_t T = cases[ci].T, H = cases[ci].H, n = T * cases[ci].k;
        const int E = cases[ci].E, k = cases[ci].k;
        ops_rng r = {40 + ci};
        float *logits = ops_rand(&r, T * E, -3.0f, 3.0f);
        for (int e = 0; e < E; e++) logits[E + e] = logits[E + e % 2]; /* ties in row 1 */
        int32_t *ch = malloc((size_t)n * 4), *ch_ref = malloc((size_t)n * 4);
        int32_t *sl = malloc((size_t)n * 4), *sl_ref = malloc((size_t)n * 4);
        int32_t *off = malloc((size_t)(E + 1) * 4), *off_ref = malloc((size_t)(E + 1) * 4);
        float *w = malloc((size_t)n * 4), *w_ref = malloc((size_t)n * 4);
        /* Logits in a padded view: the op reads rows ld apart and leaves them as they are. */
        float *padded = malloc((size_t)(T * (E + 3)) * sizeof(float));
        for (int64_t t = 0; t < T; t++) memcpy(padded + t * (E + 3) + 1, logits + t * E, (size_t)E * sizeof(float));
        const iv_view lv = iv_view_make(padded + 1, IV_F32, T, E, E + 3);
        const iv_moe_route_args a = {lv, k, cases[ci].renorm, ch, w, off, sl};
        ops->moe_route(ops, &a);
        route_ref(logits, T, E, k, cases[ci].renorm, ch_ref, w_ref, off_ref, sl_ref);
        CHECK(!memcmp(ch, ch_ref, (size_t)n * 4) && !memcmp(sl, sl_ref, (size_t)n * 4));
        CHECK(!memcmp(off, off_ref, (size_t)(E + 1) * 4) && same_bits(w, w_ref, n));
        for (int64_t t = 0; t < T; t++) CHECK(!memcmp(padded + t * (E + 3) + 1, logits + t * E, (size_t)E * 4));

        /* The old combine: zeros, each expert's weighted rows in ascending
         * expert order, then bias, then residual. */
        float *x = ops_rand(&r, T * H, -2.0f, 2.0f), *y = ops_rand(&r, n * H, -2.0f, 2.0f);
        float *bias = cases[ci].bias ? ops_rand(&r, H, -0.5f, 0.5f) : NULL;
        float *res = cases[ci].residual ? ops_rand(&r, T * (H + 1), -1.0f, 1.0f) : NULL;
        float *want = calloc((size_t)(T * (H + 1)), sizeof(float));
        float *got = malloc((size_t)(T * (H + 1)) * sizeof(float)), *xe = malloc((size_t)(n * H) * sizeof(float));
        for (int64_t i = 0; i < T * (H + 1); i++) got[i] = NAN; /* each token's first expert must not read it */
        for (int e = 0; e < E; e++)
            for (int32_t q = off_ref[e]; q < off_ref[e + 1]; q++) {
                const int32_t s = sl_ref[q];
                float *o = want + (int64_t)(s / k) * (H + 1);
                for (int64_t c = 0; c < H; c++) o[c] += y[q * H + c] * w_ref[s];
            }
        for (int64_t t = 0; t < T; t++) {
            float *o = want + t * (H + 1);
            if (bias)
                for (int64_t c = 0; c < H; c++) o[c] += bias[c];
            if (res)
                for (int64_t c = 0; c < H; c++) o[c] += res[t * (H + 1) + c];
        }
        iv_tensor bt = iv_tensor_1d(bias, H);
        int gathered_ok = 1;
        for (int e = 0; e < E; e++) {
            const int32_t r0 = off[e], rows = off[e + 1] - r0;
            if (rows == 0) continue;
            ops->moe_gather(ops, iv_view_make(xe + (int64_t)r0 * H, IV_F32, rows, H, H),
                            iv_view_make(x, IV_F32, T, H, H), sl + r0, k);
            for (int32_t q = r0; q < r0 + rows; q++)
                gathered_ok &= !memcmp(xe + (int64_t)q * H, x + (int64_t)(sl[q] / k) * H, (size_t)H * 4);
            const iv_moe_scatter_args sa = {iv_view_make(got, IV_F32, T, H, H + 1),
                                            iv_view_make(y + (int64_t)r0 * H, IV_F32, rows, H, H),
                                            sl + r0, w, ch, k, e, bias ? &bt : NULL, res};
            ops->moe_scatter(ops, &sa);
        }
        CHECK(gathered_ok);
        int64_t bad = 0;
        for (int64_t t = 0; t < T; t++) bad += !same_bits(got + t * (H + 1), want + t * (H + 1), H);
        CHECK_MSG(bad == 0, "case %zu: %lld rows differ from the host combine", ci, (long long)bad);
        for (int64_t t = 0; t < T; t++) CHECK(isnan(got[t * (H + 1) + H])); /* the gap column */
        free(logits);
        free(ch);
        free(ch_ref);
        free(sl);
        free(sl_ref);
        free(off);
        free(off_ref);
        free(w);
        free(w_ref);
        free(padded);
        free(x);
        free(y);
        free(bias);
        free(res);
        free(want);
        free(got);
        free(xe);
    }
}

/* ---- the old DeBERTa gather (deberta_attn.c) ---- */

TEST(ops_rel_bias_matches_host_code)
{
    const iv_ops *ops = iv_cpu_ops();
    static const int lens[] = {5, 1, 200, 0, 9}; /* 200: the parallel path */
    enum { N = 5, HEADS = 2, COLS = 11 };
    ops_rng r = {50};
    int32_t cu[N + 1] = {0};
    int64_t offs[N + 1] = {0};
    int max_len = 0;
    for (int s = 0; s < N; s++) {
        cu[s + 1] = cu[s] + lens[s];
        offs[s + 1] = offs[s] + (int64_t)HEADS * lens[s] * lens[s];
        max_len = lens[s] > max_len ? lens[s] : max_len;
    }
    const int64_t T = cu[N], total = offs[N];
    const int mid = max_len - 1, n_idx = 2 * max_len - 1;
    float *c2p = ops_rand(&r, T * (COLS + 1), -3.0f, 3.0f), *p2c = ops_rand(&r, T * COLS, -3.0f, 3.0f);
    int32_t *ic = malloc((size_t)n_idx * 4), *ip = malloc((size_t)n_idx * 4);
    for (int i = 0; i < n_idx; i++) {
        ic[i] = (int32_t)(ops_rng_next(&r) % COLS);
        ip[i] = (int32_t)(ops_rng_next(&r) % COLS);
    }
    const float scale = sqrtf(3.0f * 16.0f);
    for (int terms = 1; terms <= 3; terms++) {
        float *got = malloc((size_t)total * 4), *want = malloc((size_t)total * 4);
        for (int64_t i = 0; i < total; i++) got[i] = want[i] = NAN;
        for (int h = 0; h < HEADS; h++) {
            const iv_rel_bias_args a = {
                .bias = got, .offsets = offs, .offsets_dev = offs, .cu_seqlens = cu, .cu_seqlens_dev = cu, .n_seqs = N,
                .head = h, .c2p = terms & 1 ? iv_view_make(c2p, IV_F32, T, COLS, COLS + 1) : (iv_view){0},
                .p2c = terms & 2 ? iv_view_make(p2c, IV_F32, T, COLS, COLS) : (iv_view){0},
                .c2p_idx = ic, .p2c_idx = ip, .idx_mid = mid, .scale = scale,
            };
            ops->rel_bias(ops, &a);
            for (int s = 0; s < N; s++)
                for (int64_t i = 0; i < lens[s]; i++) {
                    const int64_t t = cu[s] + i, L = lens[s];
                    float *row = want + offs[s] + ((int64_t)h * L + i) * L;
                    for (int64_t j = 0; j < L; j++) {
                        float v = 0.0f;
                        if (terms & 1) v += c2p[t * (COLS + 1) + ic[mid + i - j]] / scale;
                        if (terms & 2) v += p2c[(cu[s] + j) * COLS + ip[mid + i - j]] / scale;
                        row[j] = v;
                    }
                }
        }
        CHECK_MSG(same_bits(got, want, total), "terms %d: the bias differs from the host gather", terms);
        free(got);
        free(want);
    }
    free(c2p);
    free(p2c);
    free(ic);
    free(ip);
}

/* ---- the old ConvLayer im2col (token_conv.c) ---- */

TEST(ops_im2col_matches_host_code)
{
    const iv_ops *ops = iv_cpu_ops();
    static const int lens[] = {3, 1, 300, 6}; /* 300: the parallel path */
    enum { N = 4, H = 40 };
    ops_rng r = {60};
    int32_t cu[N + 1] = {0};
    for (int s = 0; s < N; s++) cu[s + 1] = cu[s] + lens[s];
    const int64_t T = cu[N];
    float *x = ops_rand(&r, T * (H + 2), -2.0f, 2.0f);
    for (int K = 1; K <= 7; K += 2) {
        const int64_t W = (int64_t)K * H, pad = (K - 1) / 2;
        float *got = malloc((size_t)(T * (W + 1)) * 4), *want = malloc((size_t)(T * W) * 4);
        for (int64_t i = 0; i < T * (W + 1); i++) got[i] = NAN;
        const iv_view yv = iv_view_make(got, IV_F32, T, W, W + 1), xv = iv_view_make(x + 1, IV_F32, T, H, H + 2);
        ops->im2col(ops, yv, xv, K, cu, cu, N);
        for (int s = 0; s < N; s++)
            for (int64_t i = 0; i < lens[s]; i++)
                for (int64_t k = 0; k < K; k++) {
                    float *dst = want + ((cu[s] + i) * K + k) * H;
                    const int64_t src = i + k - pad;
                    if (src < 0 || src >= lens[s]) memset(dst, 0, (size_t)H * 4);
                    else memcpy(dst, x + 1 + (cu[s] + src) * (H + 2), (size_t)H * 4);
                }
        int64_t bad = 0;
        for (int64_t t = 0; t < T; t++)
            bad += !same_bits(got + t * (W + 1), want + t * W, W) || !isnan(got[t * (W + 1) + W]);
        CHECK_MSG(bad == 0, "kernel %d: %lld rows differ from the host im2col", K, (long long)bad);
        free(got);
        free(want);
    }
    free(x);
}
