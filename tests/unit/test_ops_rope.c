/* Rotary embeddings (NeoX and GPT-J pairing, partial rotation, attention
 * factor) on a strided window, against a reference that forms the angle in
 * float as transformers does and does the rest in double. */
#include <math.h>
#include <stdlib.h>

#include "ops/ops.h"
#include "ops_test_util.h"
#include "test.h"

typedef struct {
    int64_t rows;
    int n_heads, head_dim, rot_dim, interleaved;
    float attn_factor;
} rope_case;

static void check_rope(ops_rng *r, rope_case c)
{
    const iv_ops *ops = iv_cpu_ops();
    int64_t width = (int64_t)c.n_heads * c.head_dim;
    float *xb;
    /* The k window of a fused [q | k | v] row. */
    iv_view x = ops_wide_view(&xb, r, c.rows, width, width + 1, 3 * width + 2, -2.0f, 2.0f);
    int32_t *pos = malloc((size_t)c.rows * sizeof(int32_t));
    for (int64_t t = 0; t < c.rows; t++) pos[t] = t == 0 ? 8191 : (int32_t)(ops_rng_next(r) % 8192);
    int half = c.rot_dim / 2;
    float *inv_freq = malloc((size_t)(half > 0 ? half : 1) * sizeof(float));
    for (int i = 0; i < half; i++) inv_freq[i] = (float)(1.0 / pow(10000.0, 2.0 * i / c.rot_dim));

    double *want = ops_view_to_double(x);
    double factor = c.attn_factor == 0.0f ? 1.0 : c.attn_factor;
    for (int64_t t = 0; t < c.rows; t++)
        for (int h = 0; h < c.n_heads; h++) {
            double *v = want + t * width + (int64_t)h * c.head_dim;
            for (int i = 0; i < half; i++) {
                float angle = (float)pos[t] * inv_freq[i]; /* float, as transformers */
                double cs = cos((double)angle) * factor, sn = sin((double)angle) * factor;
                int a = c.interleaved ? 2 * i : i, b = c.interleaved ? 2 * i + 1 : i + half;
                double x1 = v[a], x2 = v[b];
                v[a] = x1 * cs - x2 * sn;
                v[b] = x2 * cs + x1 * sn;
            }
        }
    iv_rope_args args = {x, c.n_heads, c.head_dim, c.rot_dim, pos, inv_freq, c.interleaved, c.attn_factor, NULL, 0};
    ops->rope(ops, &args);
    /* cos/sin rounded to float and two float products: ~4 ulps of |x| <= 2.
     * An angle formed in double instead would be off by up to 5e-4 rad at
     * position 8191 (pos[0]) and fail this by far. */
    char what[80];
    snprintf(what, sizeof what, "rope heads %d dim %d rot %d interleaved %d factor %g", c.n_heads, c.head_dim,
             c.rot_dim, c.interleaved, c.attn_factor);
    ops_check_close(what, x, want, 2.0 * factor * 4 * 0x1p-24, 0);
    /* Dimensions past rot_dim are untouched, bit for bit. */
    int64_t changed = 0;
    for (int64_t t = 0; t < c.rows; t++)
        for (int h = 0; h < c.n_heads; h++)
            for (int k = c.rot_dim; k < c.head_dim; k++) {
                int64_t i = t * width + (int64_t)h * c.head_dim + k;
                if (((float *)x.data)[t * x.ld + (int64_t)h * c.head_dim + k] != (float)want[i]) changed++;
            }
    CHECK_EQ_INT(changed, 0);
    CHECK_EQ_INT(ops_gap_writes(xb, x), 0);
    free(xb);
    free(pos);
    free(inv_freq);
    free(want);
}

TEST(ops_rope)
{
    ops_rng r = {40};
    const rope_case cases[] = {
        {1, 1, 2, 2, 0, 1.0f},      {7, 3, 16, 16, 0, 1.0f},   {7, 3, 16, 16, 1, 1.0f},
        {5, 2, 10, 6, 0, 0.0f},     {5, 2, 10, 6, 1, 0.0f},    {9, 4, 64, 16, 0, 1.0f},
        {4, 2, 32, 32, 0, 1.3f},    {300, 5, 64, 64, 0, 1.0f}, {3, 2, 8, 0, 0, 1.0f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_rope(&r, cases[i]);
}
