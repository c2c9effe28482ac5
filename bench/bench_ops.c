/* Micro-benchmark of the CPU ops: GFLOP/s of raw cblas_sgemm, of the linear
 * op (sgemm + fused epilogue) at BERT-base shapes, and of attention over
 * packed batches of equal-length sequences. A harness for performance work,
 * not a test: `make bench-ops` (OMP_NUM_THREADS sets the thread count).
 *
 * Each figure is the best of several timed runs after one warm-up run, so
 * it reflects the kernels rather than page faults or frequency ramps. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/gemm_panel.h"
#include "ops/ops.h"

static float *rand_buf(int64_t n, float scale)
{
    float *p = malloc((size_t)n * sizeof(float));
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    uint64_t s = 0x12345678u + (uint64_t)n;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = scale * ((float)(s >> 40) / 16777216.0f - 0.5f);
    }
    return p;
}

/* Best seconds per call of fn over repeats lasting at least min_s in all. */
typedef void (*bench_fn)(void *ctx);
static double best_time(bench_fn fn, void *ctx, double min_s)
{
    fn(ctx); /* warm-up */
    double best = INFINITY, spent = 0;
    int runs = 0;
    while (spent < min_s || runs < 3) {
        double t0 = omp_get_wtime();
        fn(ctx);
        double dt = omp_get_wtime() - t0;
        if (dt < best) best = dt;
        spent += dt;
        runs++;
    }
    return best;
}

typedef struct {
    int64_t m, n, k;
    float *a, *b, *c;
} gemm_ctx;

static void run_sgemm(void *p)
{
    gemm_ctx *g = p;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)g->m, (blasint)g->n, (blasint)g->k, 1.0f, g->a,
                (blasint)g->k, g->b, (blasint)g->k, 0.0f, g->c, (blasint)g->n);
}

typedef struct {
    const iv_ops *ops;
    iv_view y, x;
    iv_tensor w, b;
    iv_act act;
    const float *residual;
} linear_ctx;

static void run_linear(void *p)
{
    linear_ctx *l = p;
    l->ops->linear(l->ops, l->y, l->x, &l->w, &l->b, l->act, l->residual);
}

static void bench_gemm_and_linear(const iv_ops *ops, int64_t t, int64_t in, int64_t out, iv_act act, int residual,
                                  const char *label)
{
    float *x = rand_buf(t * in, 2.0f), *w = rand_buf(out * in, 0.1f), *b = rand_buf(out, 0.1f);
    float *y = rand_buf(t * out, 1.0f), *r = residual ? rand_buf(t * out, 1.0f) : NULL;
    double flop = 2.0 * (double)t * (double)in * (double)out;

    gemm_ctx g = {t, out, in, x, w, y};
    double tg = best_time(run_sgemm, &g, 0.5);
    linear_ctx l = {ops, {y, t, out, out, IV_F32}, {x, t, in, in, IV_F32}, iv_tensor_2d(w, out, in), iv_tensor_1d(b, out), act, r};
    double tl = best_time(run_linear, &l, 0.5);
    /* The same op on the weight packed as the model loads it. */
    float *wp = iv_cpu_scratch(iv_cpu_panel_floats(out, in) * sizeof(float));
    iv_cpu_pack_panels(wp, w, out, in);
    l.w = iv_cpu_panel_tensor(wp, out, in);
    double tp = best_time(run_linear, &l, 0.5);
    printf("%-30s sgemm %6.1f  linear %6.1f (%6.2f ms)  packed %6.1f GFLOP/s (%6.2f ms, %.2fx linear)\n", label,
           flop / tg * 1e-9, flop / tl * 1e-9, tl * 1e3, flop / tp * 1e-9, tp * 1e3, tl / tp);
    free(wp);
    free(x);
    free(w);
    free(b);
    free(y);
    free(r);
}

typedef struct {
    const iv_ops *ops;
    iv_attn_args a;
} attn_ctx;

static void run_attention(void *p)
{
    attn_ctx *c = p;
    c->ops->attention(c->ops, &c->a);
}

static void bench_attention(const iv_ops *ops, int64_t total, int64_t len, int heads, int head_dim, int causal)
{
    int n = (int)(total / len);
    int64_t t = (int64_t)n * len, width = (int64_t)heads * head_dim;
    /* q, k, v as windows of one fused QKV buffer, as the models use them. */
    float *qkv = rand_buf(t * 3 * width, 2.0f), *out = rand_buf(t * width, 1.0f);
    int32_t *cu = malloc((size_t)(n + 1) * sizeof(int32_t));
    for (int s = 0; s <= n; s++) cu[s] = (int32_t)(s * len);
    attn_ctx c;
    memset(&c, 0, sizeof c);
    c.ops = ops;
    c.a.q = (iv_view){qkv, t, width, 3 * width, IV_F32};
    c.a.k = (iv_view){qkv + width, t, width, 3 * width, IV_F32};
    c.a.v = (iv_view){qkv + 2 * width, t, width, 3 * width, IV_F32};
    c.a.out = (iv_view){out, t, width, width, IV_F32};
    c.a.cu_seqlens = cu;
    c.a.n_seqs = n;
    c.a.n_heads = c.a.n_kv_heads = heads;
    c.a.head_dim = head_dim;
    c.a.scale = 1.0f / sqrtf((float)head_dim);
    c.a.causal = causal;
    c.a.window_left = c.a.window_right = -1;
    /* QK^T and PV: 2 * 2 * L^2 * d per head; causal does about half. */
    double flop = 4.0 * (double)n * (double)len * (double)len * (double)width;
    double dt = best_time(run_attention, &c, 0.5);
    printf("attention %4d x L=%-5lld %2d heads d=%-3d %-13s %7.1f GFLOP/s  (%6.2f ms, %.0f tokens/ms)\n", n,
           (long long)len, heads, head_dim, causal ? "causal" : "bidirectional", flop / dt * 1e-9, dt * 1e3,
           (double)t / (dt * 1e3));
    free(qkv);
    free(out);
    free(cu);
}

int main(void)
{
    const iv_ops *ops = iv_cpu_ops();
    /* IV_PANEL_KERNEL=avx2 (or portable): time that kernel on a CPU that has
     * a better one; with OPENBLAS_CORETYPE=Haswell both sides are AVX2. */
    const char *kernel = getenv("IV_PANEL_KERNEL");
    if (kernel && iv_cpu_panel_use(kernel)) {
        fprintf(stderr, "bench_ops: this CPU cannot run the %s kernel\n", kernel);
        return 2;
    }
    printf("infinity_v3 op bench: %d OpenMP threads, %s, packed kernel %s\n", omp_get_max_threads(), OPENBLAS_VERSION,
           iv_cpu_panel_kernel_name());
    printf("linear at T=4096 (BERT-base); 'causal' attention counts full L^2 FLOPs\n");
    bench_gemm_and_linear(ops, 4096, 768, 768, IV_ACT_NONE, 0, "768 -> 768 + bias (qkv/out)");
    bench_gemm_and_linear(ops, 4096, 768, 3072, IV_ACT_GELU, 0, "768 -> 3072 + bias + GELU");
    bench_gemm_and_linear(ops, 4096, 3072, 768, IV_ACT_NONE, 1, "3072 -> 768 + bias + residual");
    bench_gemm_and_linear(ops, 4096, 384, 1152, IV_ACT_NONE, 0, "384 -> 1152 + bias (MiniLM qkv)");
    bench_gemm_and_linear(ops, 4096, 384, 1536, IV_ACT_GELU, 0, "384 -> 1536 + bias + GELU");
    bench_gemm_and_linear(ops, 4096, 1536, 384, IV_ACT_NONE, 1, "1536 -> 384 + bias + residual");
    /* Single short requests: a 16-64 token sequence is a 16-64 row product. */
    const int64_t few_rows[] = {8, 16, 32, 64};
    for (int i = 0; i < 4; i++) {
        char label[64];
        const int64_t t = few_rows[i];
        const int64_t shapes[][2] = {{768, 768}, {768, 3072}, {3072, 768}, {384, 384}, {384, 1536}, {1536, 384}};
        for (int s = 0; s < 6; s++) {
            snprintf(label, sizeof label, "T=%-3lld %4lld -> %-4lld", (long long)t, (long long)shapes[s][0],
                     (long long)shapes[s][1]);
            bench_gemm_and_linear(ops, t, shapes[s][0], shapes[s][1], shapes[s][1] > shapes[s][0] ? IV_ACT_GELU : IV_ACT_NONE,
                                  shapes[s][1] < shapes[s][0], label);
        }
    }
    bench_attention(ops, 4096, 128, 12, 32, 0); /* MiniLM-L6 */
    bench_attention(ops, 4096, 128, 12, 64, 0);
    bench_attention(ops, 4096, 512, 12, 64, 0);
    bench_attention(ops, 4096, 512, 12, 64, 1);
    bench_attention(ops, 8192, 8192, 4, 128, 1);
    return 0;
}
