/* GPU check of the CUDA attention op (src/ops/cuda/cuda_attention.cu)
 * against a double-precision CPU reference, plus its throughput. Needs an
 * NVIDIA GPU (sm_80 or sm_90); not part of `make test`.
 *
 * Every case runs in BF16 and in FP16 through a table opened with
 * iv_cuda_ops_open, on packed batches of mixed lengths (0, 1, 7, 33, 64,
 * 130, 200, 517): q/k/v are column windows of a fused QKV buffer whose
 * other columns and surrounding rows hold NaN (a read outside a view
 * poisons the result), and the output window sits in a buffer whose other
 * elements must keep their sentinel (a write outside it is caught). The
 * reference uses the same 16-bit-rounded inputs. One line per case:
 *   attention <dtype> <case>: max abs err X, cosine Y: PASS|FAIL
 * (tolerance: max abs err <= 2e-2 for bf16 / 4e-3 for f16, cosine >=
 * 0.9995; rows that see no key must be exactly 0), then benchmark lines in
 * TFLOP/s (FLOPs = 4 * sum(L^2) * heads * head_dim, halved when causal).
 * Exit status 1 when any case fails. Options: --no-bench, --bench-only.
 *
 * Build (from the repository root, after the CUDA build of the library;
 * CUDA_OBJS are the objects of the .cu files of src/ops/cuda, if libiv.a of that build
 * does not already hold them):
 *   nvcc -std=c++17 -O3 -Isrc -gencode arch=compute_80,code=sm_80 \
 *     -gencode arch=compute_90,code=sm_90 -Xcompiler -fopenmp \
 *     tests/gpu/attention_check.cu $(CUDA_OBJS) build/cuda/libiv.a \
 *     -o build/cuda/attention_check -lcublasLt -lcudart \
 *     $(pkg-config --libs openblas libcjson libmicrohttpd libutf8proc libpcre2-8 libcurl) -lgomp -lpthread -lm
 * and run build/cuda/attention_check. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "ops/cuda/cuda_internal.h" /* iv_cuda_attention, iv_cuda_ctx (the stream) */

#define CUDA_OK(call)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

/* ---- host 16-bit helpers ---- */

static uint16_t to16(float x, iv_dtype dt)
{
    if (dt == IV_BF16) return __bfloat16_as_ushort(__float2bfloat16_rn(x));
    return __half_as_ushort(__float2half_rn(x));
}
static float from16(uint16_t x, iv_dtype dt)
{
    if (dt == IV_BF16) return __bfloat162float(__ushort_as_bfloat16(x));
    return __half2float(__ushort_as_half(x));
}
static uint16_t nan16(iv_dtype dt) { return dt == IV_BF16 ? 0x7fc0 : 0x7e00; }
static const uint16_t SENTINEL = 0x7fff; /* a NaN neither dtype's conversions produce */

typedef struct {
    uint64_t s;
} rng_t;
static uint64_t rng_next(rng_t *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float rng_uniform(rng_t *r, float lo, float hi)
{
    return lo + (hi - lo) * (float)((rng_next(r) >> 40) * (1.0 / 16777216.0));
}

/* ---- cases ---- */

typedef struct {
    const char *name;
    int n_heads, n_kv_heads, head_dim;
    int causal, window_left, window_right;
    int alibi, bias, key_mask;
    float softcap;
    float q_range; /* q uniform in [-q_range, q_range]; k, v in [-1, 1] */
    int odd_layout; /* row strides not multiples of 8, views 2 bytes off alignment */
} att_case;

static const att_case cases[] = {
    {"d32 bidirectional", 4, 4, 32, 0, -1, -1, 0, 0, 0, 0.0f, 1.0f, 0},
    {"d64 bidirectional", 8, 8, 64, 0, -1, -1, 0, 0, 0, 0.0f, 1.0f, 0},
    {"d64 causal gqa 8/2", 8, 2, 64, 1, -1, -1, 0, 0, 0, 0.0f, 1.0f, 0},
    {"d80 causal", 8, 8, 80, 1, -1, -1, 0, 0, 0, 0.0f, 1.0f, 0},
    {"d128 bidirectional gqa 8/2", 8, 2, 128, 0, -1, -1, 0, 0, 0, 0.0f, 1.0f, 0},
    {"d128 causal", 8, 8, 128, 1, -1, -1, 0, 0, 0, 0.0f, 1.0f, 0},
    {"d256 causal gqa 8/2", 8, 2, 256, 1, -1, -1, 0, 0, 0, 0.0f, 1.0f, 0},
    {"d256 bidirectional", 4, 4, 256, 0, -1, -1, 0, 0, 0, 0.0f, 1.0f, 0},
    {"d192 causal window 64", 4, 4, 192, 1, 64, -1, 0, 0, 0, 0.0f, 1.0f, 0},
    {"d40 bidirectional", 4, 4, 40, 0, -1, -1, 0, 0, 0, 0.0f, 1.0f, 0},
    {"d8 bidirectional", 2, 2, 8, 0, -1, -1, 0, 0, 0, 0.0f, 1.0f, 0},
    {"d64 sliding window 37/11", 8, 8, 64, 0, 37, 11, 0, 0, 0, 0.0f, 1.0f, 0},
    {"d64 window right 5 only", 4, 4, 64, 0, -1, 5, 0, 0, 0, 0.0f, 1.0f, 0},
    {"d128 causal window 100 gqa", 8, 2, 128, 1, 100, -1, 0, 0, 0, 0.0f, 1.0f, 0},
    {"d64 alibi", 8, 8, 64, 0, -1, -1, 1, 0, 0, 0.0f, 1.0f, 0},
    {"d64 bias", 8, 8, 64, 0, -1, -1, 0, 1, 0, 0.0f, 1.0f, 0},
    {"d64 key mask", 8, 8, 64, 0, -1, -1, 0, 0, 1, 0.0f, 1.0f, 0},
    {"d128 causal key mask gqa", 8, 2, 128, 1, -1, -1, 0, 0, 1, 0.0f, 1.0f, 0},
    {"d64 softcap", 8, 8, 64, 0, -1, -1, 0, 0, 0, 2.0f, 4.0f, 0},
    {"d80 everything causal", 8, 2, 80, 1, 40, -1, 1, 1, 1, 8.0f, 3.0f, 0},
    {"d96 everything windows", 6, 3, 96, 0, 50, 20, 1, 1, 1, 8.0f, 3.0f, 0},
    {"d256 everything windows", 4, 2, 256, 0, 100, 100, 1, 1, 1, 8.0f, 3.0f, 0},
    {"d64 causal odd layout", 8, 2, 64, 1, -1, -1, 0, 0, 0, 0.0f, 1.0f, 1},
    {"d128 odd layout", 4, 4, 128, 0, -1, -1, 0, 0, 0, 0.0f, 1.0f, 1},
    {"d17 everything odd layout", 4, 2, 17, 1, 30, -1, 1, 1, 1, 8.0f, 3.0f, 1},
};
#define N_CASES (int)(sizeof cases / sizeof cases[0])

/* A packed problem on host and device. */
typedef struct {
    iv_dtype dt;
    int n_seqs;
    std::vector<int32_t> cu;
    int64_t T, qw, kw, ld, o_ld, pad_rows, col0;
    std::vector<uint16_t> qkv, out; /* host copies, whole buffers */
    std::vector<float> slopes, bias;
    std::vector<int64_t> bias_off;
    std::vector<uint8_t> key_mask;
    void *d_qkv, *d_out, *d_bias, *d_bias_off, *d_cu, *d_km;
    iv_attn_args args;
} problem;

static void build(problem *p, const att_case *c, iv_dtype dt, const std::vector<int> &lens, rng_t *r, int fill_nan)
{
    p->dt = dt;
    p->n_seqs = (int)lens.size();
    p->cu.assign(lens.size() + 1, 0);
    int max_len = 0;
    for (size_t s = 0; s < lens.size(); s++) {
        p->cu[s + 1] = p->cu[s] + lens[s];
        if (lens[s] > max_len) max_len = lens[s];
    }
    p->T = p->cu[lens.size()];
    const int64_t d = c->head_dim;
    p->qw = c->n_heads * d;
    p->kw = c->n_kv_heads * d;
    p->col0 = c->odd_layout ? 1 : 0;
    p->ld = p->qw + 2 * p->kw + (c->odd_layout ? 3 : 8);
    p->o_ld = p->qw + (c->odd_layout ? 3 : 8);
    p->pad_rows = fill_nan ? 2 : 0;
    const int64_t rows = p->T + 2 * p->pad_rows;
    p->qkv.assign((size_t)(rows * p->ld), nan16(dt));
    for (int64_t t = 0; t < p->T; t++) {
        uint16_t *row = p->qkv.data() + (p->pad_rows + t) * p->ld + p->col0;
        for (int64_t k = 0; k < p->qw; k++) row[k] = to16(rng_uniform(r, -c->q_range, c->q_range), dt);
        for (int64_t k = p->qw; k < p->qw + 2 * p->kw; k++) row[k] = to16(rng_uniform(r, -1.0f, 1.0f), dt);
    }
    p->out.assign((size_t)(rows * p->o_ld), SENTINEL);

    memset(&p->args, 0, sizeof p->args);
    const size_t esz = 2;
    CUDA_OK(cudaMalloc(&p->d_qkv, p->qkv.size() * esz));
    CUDA_OK(cudaMemcpy(p->d_qkv, p->qkv.data(), p->qkv.size() * esz, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMalloc(&p->d_out, p->out.size() * esz));
    CUDA_OK(cudaMemcpy(p->d_out, p->out.data(), p->out.size() * esz, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMalloc(&p->d_cu, p->cu.size() * sizeof(int32_t)));
    CUDA_OK(cudaMemcpy(p->d_cu, p->cu.data(), p->cu.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    uint16_t *base = (uint16_t *)p->d_qkv + p->pad_rows * p->ld + p->col0;
    p->args.q = iv_view_make(base, dt, p->T, p->qw, p->ld);
    p->args.k = iv_view_make(base + p->qw, dt, p->T, p->kw, p->ld);
    p->args.v = iv_view_make(base + p->qw + p->kw, dt, p->T, p->kw, p->ld);
    p->args.out = iv_view_make((uint16_t *)p->d_out + p->pad_rows * p->o_ld + p->col0, dt, p->T, p->qw, p->o_ld);
    p->args.cu_seqlens = p->cu.data();
    p->args.cu_seqlens_dev = (const int32_t *)p->d_cu;
    p->args.n_seqs = p->n_seqs;
    p->args.max_seqlen = max_len;
    p->args.n_heads = c->n_heads;
    p->args.n_kv_heads = c->n_kv_heads;
    p->args.head_dim = c->head_dim;
    p->args.scale = 1.0f / sqrtf((float)c->head_dim);
    p->args.causal = c->causal;
    p->args.window_left = c->window_left;
    p->args.window_right = c->window_right;
    p->args.softcap = c->softcap;
    p->d_bias = p->d_bias_off = p->d_km = NULL;
    if (c->alibi) {
        p->slopes.resize(c->n_heads);
        for (int h = 0; h < c->n_heads; h++) p->slopes[h] = powf(2.0f, -8.0f * (float)(h + 1) / (float)c->n_heads);
        p->args.alibi_slopes = p->slopes.data();
    }
    if (c->bias) {
        p->bias_off.resize(lens.size());
        int64_t total = 0;
        for (size_t s = 0; s < lens.size(); s++) {
            p->bias_off[s] = total;
            total += (int64_t)c->n_heads * lens[s] * lens[s];
        }
        p->bias.resize((size_t)(total > 0 ? total : 1));
        for (auto &b : p->bias) b = rng_uniform(r, -2.0f, 2.0f);
        CUDA_OK(cudaMalloc(&p->d_bias, p->bias.size() * sizeof(float)));
        CUDA_OK(cudaMemcpy(p->d_bias, p->bias.data(), p->bias.size() * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_OK(cudaMalloc(&p->d_bias_off, p->bias_off.size() * sizeof(int64_t)));
        CUDA_OK(cudaMemcpy(p->d_bias_off, p->bias_off.data(), p->bias_off.size() * sizeof(int64_t),
                           cudaMemcpyHostToDevice));
        p->args.bias = (const float *)p->d_bias;
        p->args.bias_offsets = p->bias_off.data();
        p->args.bias_offsets_dev = (const int64_t *)p->d_bias_off;
    }
    if (c->key_mask) {
        /* First token of every sequence masked (so a causal first query and
         * a 1-token sequence see no key at all), others 1 in 5. */
        p->key_mask.resize((size_t)(p->T > 0 ? p->T : 1));
        for (size_t s = 0; s < lens.size(); s++)
            for (int32_t t = p->cu[s]; t < p->cu[s + 1]; t++)
                p->key_mask[t] = t == p->cu[s] ? 0 : (rng_next(r) % 5 != 0);
        CUDA_OK(cudaMalloc(&p->d_km, p->key_mask.size()));
        CUDA_OK(cudaMemcpy(p->d_km, p->key_mask.data(), p->key_mask.size(), cudaMemcpyHostToDevice));
        p->args.key_mask = (const uint8_t *)p->d_km;
    }
}

static void release(problem *p)
{
    cudaFree(p->d_qkv);
    cudaFree(p->d_out);
    cudaFree(p->d_cu);
    cudaFree(p->d_bias);
    cudaFree(p->d_bias_off);
    cudaFree(p->d_km);
}

/* out[t][h*d + c] in double from the rounded inputs; empty[t*H + h] = 1
 * where query t of head h sees no key. */
static void reference(const problem *p, std::vector<double> &out, std::vector<char> &empty)
{
    const iv_attn_args *a = &p->args;
    const int H = a->n_heads, d = a->head_dim, group = a->n_heads / a->n_kv_heads;
    out.assign((size_t)(p->T * p->qw), 0.0);
    empty.assign((size_t)(p->T * H), 0);
    /* Work items (sequence, head, query) for the threads. */
    std::vector<int64_t> item_s;
    for (int s = 0; s < p->n_seqs; s++)
        if (p->cu[s + 1] > p->cu[s]) item_s.push_back(s);
    const int64_t n_items = (int64_t)item_s.size() * H;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t it = 0; it < n_items; it++) {
        const int s = (int)item_s[it / H], h = (int)(it % H), kvh = h / group;
        const int64_t base = p->cu[s], len = p->cu[s + 1] - base;
        std::vector<double> sc((size_t)len), qd(d);
        std::vector<char> vis((size_t)len);
        for (int64_t i = 0; i < len; i++) {
            const uint16_t *qrow = p->qkv.data() + (p->pad_rows + base + i) * p->ld + p->col0 + (int64_t)h * d;
            for (int c = 0; c < d; c++) qd[c] = from16(qrow[c], p->dt);
            double mx = -INFINITY;
            for (int64_t j = 0; j < len; j++) {
                vis[j] = (!a->causal || j <= i) && (a->window_left < 0 || i - j <= a->window_left) &&
                         (a->window_right < 0 || j - i <= a->window_right) &&
                         (!a->key_mask || p->key_mask[base + j]);
                if (!vis[j]) continue;
                const uint16_t *krow =
                    p->qkv.data() + (p->pad_rows + base + j) * p->ld + p->col0 + p->qw + (int64_t)kvh * d;
                double dot = 0;
                for (int c = 0; c < d; c++) dot += qd[c] * from16(krow[c], p->dt);
                double v = dot * a->scale;
                if (a->softcap != 0) v = a->softcap * tanh(v / a->softcap);
                if (a->bias) v += p->bias[p->bias_off[s] + (h * len + i) * len + j];
                if (a->alibi_slopes) v -= a->alibi_slopes[h] * fabs((double)(i - j));
                sc[j] = v;
                if (v > mx) mx = v;
            }
            double sum = 0;
            for (int64_t j = 0; j < len; j++)
                if (vis[j]) sum += (sc[j] = exp(sc[j] - mx));
            double *o = out.data() + (base + i) * p->qw + (int64_t)h * d;
            if (sum == 0) {
                empty[(base + i) * H + h] = 1;
                continue;
            }
            for (int64_t j = 0; j < len; j++) {
                if (!vis[j]) continue;
                const uint16_t *vrow =
                    p->qkv.data() + (p->pad_rows + base + j) * p->ld + p->col0 + p->qw + p->kw + (int64_t)kvh * d;
                const double w = sc[j] / sum;
                for (int c = 0; c < d; c++) o[c] += w * from16(vrow[c], p->dt);
            }
        }
    }
}

static int run_case(const iv_ops *ops, const char *dt_name, const char *name, const att_case *c, iv_dtype dt,
                    const std::vector<int> &lens, uint64_t seed)
{
    rng_t r = {seed};
    problem p;
    build(&p, c, dt, lens, &r, 1);
    iv_cuda_attention(ops, &p.args);
    iv_err err;
    err.code = 0;
    err.msg[0] = 0;
    if (ops->sync(ops, &err) != 0) {
        printf("attention %s %s: error: %s: FAIL\n", dt_name, name, err.msg);
        release(&p);
        return 0;
    }
    CUDA_OK(cudaMemcpy(p.out.data(), p.d_out, p.out.size() * 2, cudaMemcpyDeviceToHost));

    std::vector<double> want;
    std::vector<char> empty;
    reference(&p, want, empty);

    double max_err = 0, dot = 0, n_got = 0, n_want = 0;
    int64_t bad_zero = 0, outside = 0, nan_count = 0;
    const int H = c->n_heads, d = c->head_dim;
    for (int64_t t = 0; t < p.T; t++)
        for (int64_t k = 0; k < p.qw; k++) {
            const uint16_t raw = p.out[(p.pad_rows + t) * p.o_ld + p.col0 + k];
            const double g = from16(raw, dt), w = want[t * p.qw + k];
            if (g != g) {
                nan_count++;
                continue;
            }
            if (empty[t * H + k / d] && raw != 0) bad_zero++; /* +0 exactly */
            const double e = fabs(g - w);
            if (e > max_err) max_err = e;
            dot += g * w;
            n_got += g * g;
            n_want += w * w;
        }
    /* Everything outside the output window keeps the sentinel. */
    const int64_t rows = p.T + 2 * p.pad_rows;
    for (int64_t t = 0; t < rows; t++)
        for (int64_t k = 0; k < p.o_ld; k++) {
            const int inside = t >= p.pad_rows && t < p.pad_rows + p.T && k >= p.col0 && k < p.col0 + p.qw;
            if (!inside && p.out[t * p.o_ld + k] != SENTINEL) outside++;
        }
    const double cosine = n_got > 0 && n_want > 0 ? dot / sqrt(n_got * n_want) : (n_got == n_want ? 1.0 : 0.0);
    const double tol = dt == IV_BF16 ? 2e-2 : 4e-3;
    const int pass = nan_count == 0 && bad_zero == 0 && outside == 0 && max_err <= tol && cosine >= 0.9995;
    printf("attention %s %s: max abs err %.3g, cosine %.6f", dt_name, name, max_err, cosine);
    if (nan_count) printf(", %lld NaN", (long long)nan_count);
    if (bad_zero) printf(", %lld non-zero elements in rows without keys", (long long)bad_zero);
    if (outside) printf(", %lld writes outside the output view", (long long)outside);
    printf(": %s\n", pass ? "PASS" : "FAIL");
    fflush(stdout);
    release(&p);
    return pass;
}

/* TFLOP/s over n_seqs x len tokens, q/k/v a fused QKV buffer as in the models. */
static void bench(const iv_ops *ops, const char *dt_name, iv_dtype dt, int n_seqs, int len, int heads, int d,
                  int causal)
{
    att_case c = {"bench", heads, heads, d, causal, -1, -1, 0, 0, 0, 0.0f, 1.0f, 0};
    std::vector<int> lens((size_t)n_seqs, len);
    rng_t r = {1234};
    problem p;
    build(&p, &c, dt, lens, &r, 0);
    cudaStream_t st = iv_cuda_ctx(ops)->stream;
    cudaEvent_t e0, e1;
    CUDA_OK(cudaEventCreate(&e0));
    CUDA_OK(cudaEventCreate(&e1));
    for (int i = 0; i < 3; i++) iv_cuda_attention(ops, &p.args);
    const int reps = 20;
    CUDA_OK(cudaEventRecord(e0, st));
    for (int i = 0; i < reps; i++) iv_cuda_attention(ops, &p.args);
    CUDA_OK(cudaEventRecord(e1, st));
    iv_err err;
    err.code = 0;
    err.msg[0] = 0;
    if (ops->sync(ops, &err) != 0) {
        printf("bench %s: error: %s\n", dt_name, err.msg);
        release(&p);
        return;
    }
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
    const double flops = 4.0 * n_seqs * (double)len * len * heads * d * (causal ? 0.5 : 1.0);
    printf("bench attention %s %d x %d tokens, %d heads, head dim %d, %s: %.3f ms, %.1f TFLOP/s\n", dt_name, n_seqs,
           len, heads, d, causal ? "causal" : "bidirectional", ms / reps, flops * reps / (ms * 1e-3) / 1e12);
    fflush(stdout);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    release(&p);
}

int main(int argc, char **argv)
{
    int do_check = 1, do_bench = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-bench")) do_bench = 0;
        else if (!strcmp(argv[i], "--bench-only")) do_check = 0;
        else {
            fprintf(stderr, "usage: %s [--no-bench | --bench-only]\n", argv[0]);
            return 2;
        }
    }
    const iv_dtype dts[2] = {IV_BF16, IV_F16};
    const char *dt_names[2] = {"bf16", "f16"};
    const std::vector<int> lens = {1, 517, 64, 130, 0, 7, 200, 33};
    int failed = 0, total = 0;
    for (int k = 0; k < 2; k++) {
        iv_err err;
        err.code = 0;
        err.msg[0] = 0;
        const iv_ops *ops = iv_cuda_ops_open(0, dts[k], &err);
        if (!ops) {
            fprintf(stderr, "iv_cuda_ops_open(0, %s): %s\n", dt_names[k], err.msg);
            return 2;
        }
        if (do_check) {
            for (int ci = 0; ci < N_CASES; ci++, total++)
                failed += !run_case(ops, dt_names[k], cases[ci].name, &cases[ci], dts[k], lens, 100 + (uint64_t)ci);
            /* More sequences than one launch's grid z holds (65535). */
            std::vector<int> many(70000);
            for (size_t s = 0; s < many.size(); s++) many[s] = (int)(s % 3) + 1;
            const att_case c = {"70000 short sequences", 2, 1, 32, 1, -1, -1, 0, 0, 0, 0.0f, 1.0f, 0};
            failed += !run_case(ops, dt_names[k], c.name, &c, dts[k], many, 999);
            total++;
        }
        if (do_bench) {
            for (int d = 64; d <= 128; d *= 2)
                for (int causal = 0; causal < 2; causal++) bench(ops, dt_names[k], dts[k], 64, 512, 16, d, causal);
            if (k == 0) {
                /* Context for other lengths (not part of the target). */
                bench(ops, dt_names[k], dts[k], 256, 128, 16, 64, 0);
                bench(ops, dt_names[k], dts[k], 8, 4096, 16, 128, 1);
                bench(ops, dt_names[k], dts[k], 64, 512, 16, 32, 0);
                bench(ops, dt_names[k], dts[k], 64, 512, 8, 256, 0);
            }
        }
        iv_cuda_ops_close(ops);
    }
    if (do_check) printf("attention: %d of %d cases passed\n", total - failed, total);
    return failed ? 1 : 0;
}
