/* Mixture-of-experts routing, gather and weighted scatter (ops.h). The
 * arithmetic is the routed MLP's as it was written on the host before it
 * moved behind ops, so FP32 results are unchanged bit for bit: the router's
 * softmax is iv_cpu_softmax's, and a token's row is 0 + each expert's
 * weighted row in ascending expert order, then + bias, then + residual. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/cpu_ops.h"

/* Token t's top k of probabilities p [E]: largest first, the lower index on
 * ties (a NaN never wins over an earlier expert, nor loses to a later one). */
static void top_k(const float *p, int E, int k, int renormalize, int32_t *ch, float *w)
{
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
    if (renormalize) {
        float sum = 0;
        for (int j = 0; j < k; j++) sum += w[j];
        for (int j = 0; j < k; j++) w[j] /= sum;
    }
}

void iv_cpu_moe_route(const iv_ops *ops, const iv_moe_route_args *a)
{
    const iv_view x = a->logits;
    const int64_t T = x.rows;
    const int E = (int)x.cols, k = a->top_k;
    assert(k >= 1 && k <= E);
#pragma omp parallel if (T * E >= IV_CPU_PAR_MIN)
    {
        float *p = iv_cpu_scratch((size_t)E * sizeof(float)); /* the logits stay as they are */
#pragma omp for schedule(static)
        for (int64_t t = 0; t < T; t++) {
            memcpy(p, (const float *)x.data + t * x.ld, (size_t)E * sizeof(float));
            iv_cpu_softmax_row(p, E);
            top_k(p, E, k, a->renormalize, a->choice + t * k, a->weight + t * k);
        }
        free(p);
    }
    /* Counting sort of the T * k slots by expert; tokens stay ascending per expert. */
    int32_t *count = a->offsets;
    memset(count, 0, (size_t)(E + 1) * sizeof(int32_t));
    for (int64_t i = 0; i < T * k; i++) count[a->choice[i] + 1]++;
    for (int e = 0; e < E; e++) count[e + 1] += count[e];
    /* count[e] is now expert e's first slot; advance a cursor per expert, then shift back. */
    for (int64_t i = 0; i < T * k; i++) a->slots[count[a->choice[i]]++] = (int32_t)i;
    for (int e = E; e > 0; e--) count[e] = count[e - 1];
    count[0] = 0;
}

void iv_cpu_moe_gather(const iv_ops *ops, iv_view y, iv_view x, const int32_t *slots, int top_k)
{
    assert(y.cols == x.cols && top_k >= 1);
#pragma omp parallel for schedule(static) if (y.rows * y.cols >= IV_CPU_PAR_MIN)
    for (int64_t r = 0; r < y.rows; r++)
        memcpy((float *)y.data + r * y.ld, (const float *)x.data + (int64_t)(slots[r] / top_k) * x.ld,
               (size_t)y.cols * sizeof(float));
}

void iv_cpu_moe_scatter(const iv_ops *ops, const iv_moe_scatter_args *a)
{
    const iv_view out = a->out, y = a->y;
    const int k = a->top_k;
    const int64_t H = out.cols;
    assert(y.cols == H && k >= 1);
    const float *bias = a->bias ? iv_f32(a->bias) : NULL;
    /* Rows are distinct tokens, so threads never share an output row. */
#pragma omp parallel for schedule(static) if (y.rows * H >= IV_CPU_PAR_MIN)
    for (int64_t r = 0; r < y.rows; r++) {
        const int32_t s = a->slots[r];
        const int64_t t = s / k;
        const float w = a->weight[s];
        const int32_t *ch = a->choice + t * k;
        int32_t lo = ch[0], hi = ch[0];
        for (int j = 1; j < k; j++) {
            lo = ch[j] < lo ? ch[j] : lo;
            hi = ch[j] > hi ? ch[j] : hi;
        }
        const float *yr = (const float *)y.data + r * y.ld;
        float *o = (float *)out.data + t * out.ld;
        if (a->expert == lo)
            for (int64_t c = 0; c < H; c++) o[c] = 0.0f + yr[c] * w;
        else
            for (int64_t c = 0; c < H; c++) o[c] += yr[c] * w;
        if (a->expert != hi) continue;
        if (bias)
            for (int64_t c = 0; c < H; c++) o[c] += bias[c];
        if (a->residual) {
            const float *res = (const float *)a->residual + t * out.ld;
            for (int64_t c = 0; c < H; c++) o[c] += res[c];
        }
    }
}
