/* GPU check of the CUDA table's memory-bound kernels: every op of
 * src/ops/cuda/cuda_kernels.cu that has 16-byte vector kernels (layer_norm,
 * rms_norm, head_rms_norm, act, glu, add, scale, embed, rope) and the linear
 * epilogue of cuda_linear.cu, each through its real launcher with the vector
 * kernels and with the scalar ones (iv_cuda_vec_kernels = 0), from the same
 * device buffers. Elementwise ops, rope, embed and the epilogue must agree
 * bit for bit on the whole output buffer; the norms (whose reduction order
 * differs) print how many outputs differ and by how much, and fail where a
 * pair is more than 4 units in the last place and more than 1e-4 apart. Then times both paths at the profiled shapes
 * (64 x 512 tokens, BERT-base and Qwen3-0.6B) and prints GB/s counting bytes
 * read and written once.
 *
 * With -DIV_OLD_KERNELS='"file.cu"' -DIV_OLD_EPILOGUE='"file.cuh"' (an
 * earlier cuda_kernels.cu and its epilogue section) the earlier kernels run
 * too and must agree with the scalar path (norms: bit for bit too).
 *
 * Build and run from the repository root (needs only the CUDA runtime):
 *   mkdir -p build/gpu_kernels
 *   python3 tests/gpu/emu/gen_kernels_emu.py --epilogue src/ops/cuda/cuda_linear.cu build/gpu_kernels/epilogue.cuh
 *   nvcc -std=c++17 -O3 -Isrc -Ibuild/gpu_kernels -gencode arch=compute_90,code=sm_90 -DIV_WITH_CUDA \
 *       tests/gpu/kernels_check.cu src/tensor/tensor.c -o build/gpu_kernels/kernels_check
 *   build/gpu_kernels/kernels_check          # checks, then timings
 * Exit status: the number of failed checks. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "ops/cuda/cuda_internal.h"

static cuda_ctx g_ctx;
static int g_err = 0;
static char g_msg[512];
cuda_ctx *iv_cuda_ctx(const iv_ops *ops) { return &g_ctx; }
void iv_cuda_note_error(const iv_ops *ops, cudaError_t e, const char *where)
{
    if (e == cudaSuccess || g_err) return;
    g_err = 1;
    snprintf(g_msg, sizeof g_msg, "%s: %s", where, cudaGetErrorString(e));
}
void iv_cuda_note_invalid(const iv_ops *ops, const char *fmt, ...)
{
    if (g_err) return;
    g_err = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
}

/* In namespaces, so that the earlier kernels' static helpers of the same names stay apart. */
namespace newk {
#include "ops/cuda/cuda_kernels.cu"
#include "epilogue.cuh"
} // namespace newk
using newk::iv_cuda_vec_kernels;

#ifdef IV_OLD_KERNELS
namespace oldk {
#include IV_OLD_KERNELS
#include IV_OLD_EPILOGUE
} // namespace oldk
#define HAVE_OLD 1
#else
#define HAVE_OLD 0
#endif

#define CK(call)                                                                                     \
    do {                                                                                             \
        cudaError_t e_ = (call);                                                                     \
        if (e_ != cudaSuccess) {                                                                     \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(100);                                                                               \
        }                                                                                            \
    } while (0)

static const iv_ops *OPS = &g_ctx.ops;
static int g_fail = 0;

/* ---- device buffers with hashed random contents ---- */

static __device__ uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* n 16-bit values in [-range, range] + offset, a few per 10000 special (0, -0, inf, -inf, NaN) when specials. */
static __global__ void fill16_kernel(uint16_t *p, size_t n, uint64_t seed, float range, float offset, int specials,
                                     int bf16)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint64_t h = mix(seed * 0x9e3779b97f4a7c15ull + i);
        float v = offset + range * (2.0f * (float)((h >> 40) * (1.0 / 16777216.0)) - 1.0f);
        if (specials && (h & 0xffff) < 7) {
            const float sp[5] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN};
            v = sp[(h >> 16) % 5];
        }
        p[i] = bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(v)) : __half_as_ushort(__float2half_rn(v));
    }
}
static __global__ void fill32_kernel(float *p, size_t n, uint64_t seed, float range)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint64_t h = mix(seed * 0x9e3779b97f4a7c15ull + i);
        p[i] = range * (2.0f * (float)((h >> 40) * (1.0 / 16777216.0)) - 1.0f);
    }
}
static __global__ void fill_ids_kernel(int32_t *p, size_t n, uint64_t seed, int mod)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (int32_t)(mix(seed * 0x9e3779b97f4a7c15ull + i) % (uint64_t)mod);
}

struct DBuf {
    void *p = nullptr;
    size_t bytes = 0;
};
static std::vector<void *> g_allocs;
static void *dalloc(size_t bytes)
{
    void *p = nullptr;
    CK(cudaMalloc(&p, bytes < 256 ? 256 : bytes));
    g_allocs.push_back(p);
    return p;
}
static void free_all()
{
    for (void *p : g_allocs) cudaFree(p);
    g_allocs.clear();
}
static uint64_t g_seed = 1;
static uint16_t *rand16(size_t n, float range, float offset = 0.0f, int specials = 1)
{
    uint16_t *p = (uint16_t *)dalloc(n * 2 + 16);
    fill16_kernel<<<1024, 256>>>(p, n + 8, g_seed++, range, offset, specials, g_ctx.bf16);
    CK(cudaGetLastError());
    return p;
}

static std::vector<uint16_t> get16(const void *p, size_t n)
{
    std::vector<uint16_t> h(n);
    CK(cudaStreamSynchronize(g_ctx.stream));
    CK(cudaMemcpy(h.data(), p, n * 2, cudaMemcpyDeviceToHost));
    return h;
}

static bool nan16(uint16_t v) { return g_ctx.bf16 ? (v & 0x7fff) > 0x7f80 : (v & 0x7fff) > 0x7c00; }
static int ulps(uint16_t a, uint16_t b)
{
    if (a == b || (nan16(a) && nan16(b))) return 0;
    if ((a ^ b) & 0x8000) return (a & 0x7fff) == 0 && (b & 0x7fff) == 0 ? 0 : 1 << 20;
    return abs((int)(a & 0x7fff) - (int)(b & 0x7fff));
}

static float f16v(uint16_t v)
{
    return g_ctx.bf16 ? __bfloat162float(__ushort_as_bfloat16(v)) : __half2float(__ushort_as_half(v));
}

/* Compares two runs' buffers: exact, or (norms, max_ulp > 0) each pair at
 * most max_ulp apart or within 1e-4: a different rounding of the FP32 mean
 * moves (z - mean) by about ulp(mean), which is many units of the 16-bit
 * output where the output is near 0. */
static void compare(const char *what, const char *pair, const std::vector<uint16_t> &a, const std::vector<uint16_t> &b,
                    int max_ulp)
{
    size_t diff = 0, first = (size_t)-1, bad = 0;
    int worst = 0;
    double worst_abs = 0;
    for (size_t i = 0; i < a.size(); i++)
        if (a[i] != b[i]) {
            const int u = ulps(a[i], b[i]);
            if (u == 0 && max_ulp == 0) {
                /* NaN payloads differ: the device makes canonical NaNs, so count it */
                diff++;
                bad++;
                if (first == (size_t)-1) first = i;
                continue;
            }
            if (u == 0) continue;
            diff++;
            const double ad = fabs((double)f16v(a[i]) - (double)f16v(b[i]));
            if (u > worst) worst = u;
            if (ad > worst_abs) worst_abs = ad;
            if (max_ulp == 0 || (u > max_ulp && !(ad <= 1e-4))) bad++;
            if (first == (size_t)-1) first = i;
        }
    const bool ok = bad == 0;
    if (!ok) g_fail++;
    if (diff == 0)
        printf("%s  %-58s %-16s identical (%zu values)\n", ok ? "ok  " : "FAIL", what, pair, a.size());
    else
        printf("%s  %-58s %-16s %zu of %zu differ, at most %d ulp, %.2g apart (first at %zu: %04x vs %04x)\n",
               ok ? "ok  " : "FAIL", what, pair, diff, a.size(), worst, worst_abs, first, a[first], b[first]);
}

/* ---- running an op on each path ---- */

enum { P_VEC, P_SCALAR, P_OLD, NPATH };
static const char *pname[NPATH] = {"vector", "scalar", "old"};

struct Timing {
    std::string name;
    double us[NPATH];
    double bytes;
};
static std::vector<Timing> g_times;

/* Runs op(path) from the state in `restore` (pairs of dst, src device copies made first),
 * returns the output buffer `out` (n values) for each path. */
template <class F>
static void check_op(const char *what, F op, const void *out, size_t n, int max_ulp,
                     const std::vector<std::pair<void *, size_t>> &inout, bool time_it, double bytes)
{
    /* pristine copies of the buffers the op writes */
    std::vector<void *> saved;
    for (auto &b : inout) {
        void *s = dalloc(b.second);
        CK(cudaMemcpy(s, b.first, b.second, cudaMemcpyDeviceToDevice));
        saved.push_back(s);
    }
    auto reset = [&] {
        for (size_t i = 0; i < inout.size(); i++)
            CK(cudaMemcpyAsync(inout[i].first, saved[i], inout[i].second, cudaMemcpyDeviceToDevice, g_ctx.stream));
    };
    std::vector<uint16_t> res[NPATH];
    Timing tm = {std::string(what), {0, 0, 0}, bytes};
    for (int p = 0; p < NPATH; p++) {
        if (p == P_OLD && !HAVE_OLD) continue;
        reset();
        g_err = 0;
        op(p);
        CK(cudaStreamSynchronize(g_ctx.stream));
        CK(cudaGetLastError());
        if (g_err) {
            printf("FAIL  %-58s %s path noted: %s\n", what, pname[p], g_msg);
            g_fail++;
            return;
        }
        res[p] = get16(out, n);
        if (time_it) {
            cudaEvent_t e0, e1;
            CK(cudaEventCreate(&e0));
            CK(cudaEventCreate(&e1));
            for (int i = 0; i < 3; i++) op(p);
            const int reps = 20;
            CK(cudaEventRecord(e0, g_ctx.stream));
            for (int i = 0; i < reps; i++) op(p);
            CK(cudaEventRecord(e1, g_ctx.stream));
            CK(cudaEventSynchronize(e1));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            tm.us[p] = 1000.0 * ms / reps;
            cudaEventDestroy(e0);
            cudaEventDestroy(e1);
        }
    }
    reset();
    CK(cudaStreamSynchronize(g_ctx.stream));
    compare(what, "vector/scalar", res[P_VEC], res[P_SCALAR], max_ulp);
    if (HAVE_OLD) {
        compare(what, "scalar/old", res[P_SCALAR], res[P_OLD], 0);
        compare(what, "vector/old", res[P_VEC], res[P_OLD], max_ulp);
    }
    if (time_it) g_times.push_back(tm);
}

/* Sets the path: the vector kernels, the scalar ones, or (run by the op) the old file's. */
static void path(int p) { iv_cuda_vec_kernels = p == P_VEC; }

/* ---- the ops ---- */

static iv_tensor weight(void *data, int64_t n)
{
    iv_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = g_ctx.dt;
    t.device = IV_CUDA;
    t.ndim = 1;
    t.shape[0] = n;
    t.data = data;
    return t;
}

static void norm_case(int layer, int64_t T, int64_t H, int64_t ld, bool with_r, bool time_it, float offset = 0.0f)
{
    uint16_t *x = rand16((size_t)(T * ld), 3.0f, offset), *r = with_r ? rand16((size_t)(T * ld), 3.0f) : nullptr;
    uint16_t *y = rand16((size_t)(T * H), 1.0f);
    iv_tensor w = weight(rand16((size_t)H, 1.5f, 0.0f, 0), H), b = weight(rand16((size_t)H, 1.0f, 0.0f, 0), H);
    const iv_view xv = iv_view_make(x, g_ctx.dt, T, H, ld), yv = iv_view_make(y, g_ctx.dt, T, H, H);
    char what[128];
    snprintf(what, sizeof what, "%s [%lld, %lld] ld %lld%s", layer ? "layer_norm" : "rms_norm", (long long)T,
             (long long)H, (long long)ld, with_r ? " + r" : "");
    auto op = [&](int p) {
        path(p);
        if (p == P_OLD) {
#if HAVE_OLD
            if (layer) oldk::iv_cuda_layer_norm(OPS, yv, xv, r, &w, &b, 1e-12f);
            else oldk::iv_cuda_rms_norm(OPS, yv, xv, r, &w, 1e-6f, 0.0f);
#endif
        } else if (layer) newk::iv_cuda_layer_norm(OPS, yv, xv, r, &w, &b, 1e-12f);
        else newk::iv_cuda_rms_norm(OPS, yv, xv, r, &w, 1e-6f, 0.0f);
    };
    check_op(what, op, y, (size_t)(T * H), 4, {{y, (size_t)(T * H) * 2}}, time_it,
             (double)T * H * 2 * (with_r ? 3 : 2));
}

static void head_norm_case(int64_t T, int nh, int hd, int64_t ld, bool time_it)
{
    uint16_t *x = rand16((size_t)(T * ld), 3.0f);
    iv_tensor w = weight(rand16((size_t)hd, 1.5f, 0.0f, 0), hd);
    const iv_view xv = iv_view_make(x, g_ctx.dt, T, (int64_t)nh * hd, ld);
    char what[128];
    snprintf(what, sizeof what, "head_rms_norm [%lld, %d x %d] ld %lld", (long long)T, nh, hd, (long long)ld);
    auto op = [&](int p) {
        path(p);
        if (p == P_OLD) {
#if HAVE_OLD
            oldk::iv_cuda_head_rms_norm(OPS, xv, nh, hd, &w, 1e-6f, 0.0f);
#endif
        } else newk::iv_cuda_head_rms_norm(OPS, xv, nh, hd, &w, 1e-6f, 0.0f);
    };
    check_op(what, op, x, (size_t)(T * ld), 4, {{x, (size_t)(T * ld) * 2}}, time_it, (double)T * nh * hd * 2 * 2);
}

static void glu_case(int64_t T, int64_t I, int act, int first, bool time_it)
{
    uint16_t *x = rand16((size_t)(T * 2 * I), 6.0f), *y = rand16((size_t)(T * I), 1.0f);
    const iv_view xv = iv_view_make(x, g_ctx.dt, T, 2 * I, 2 * I), yv = iv_view_make(y, g_ctx.dt, T, I, I);
    char what[128];
    snprintf(what, sizeof what, "glu act %d first %d [%lld, %lld]", act, first, (long long)T, (long long)(2 * I));
    auto op = [&](int p) {
        path(p);
        if (p == P_OLD) {
#if HAVE_OLD
            oldk::iv_cuda_glu(OPS, yv, xv, (iv_act)act, first);
#endif
        } else newk::iv_cuda_glu(OPS, yv, xv, (iv_act)act, first);
    };
    check_op(what, op, y, (size_t)(T * I), 0, {{y, (size_t)(T * I) * 2}}, time_it, (double)T * I * 2 * 3);
}

static void act_case(int64_t T, int64_t H, int act, bool time_it)
{
    uint16_t *x = rand16((size_t)(T * H), 6.0f), *y = rand16((size_t)(T * H), 1.0f);
    const iv_view xv = iv_view_make(x, g_ctx.dt, T, H, H), yv = iv_view_make(y, g_ctx.dt, T, H, H);
    char what[128];
    snprintf(what, sizeof what, "act %d [%lld, %lld]", act, (long long)T, (long long)H);
    auto op = [&](int p) {
        path(p);
        if (p == P_OLD) {
#if HAVE_OLD
            oldk::iv_cuda_act(OPS, yv, xv, (iv_act)act);
#endif
        } else newk::iv_cuda_act(OPS, yv, xv, (iv_act)act);
    };
    check_op(what, op, y, (size_t)(T * H), 0, {{y, (size_t)(T * H) * 2}}, time_it, (double)T * H * 2 * 2);
}

static void add_case(int64_t T, int64_t H, bool time_it)
{
    uint16_t *a = rand16((size_t)(T * H), 8.0f), *b = rand16((size_t)(T * H), 8.0f), *y = rand16((size_t)(T * H), 1.0f);
    const iv_view av = iv_view_make(a, g_ctx.dt, T, H, H), bv = iv_view_make(b, g_ctx.dt, T, H, H),
                  yv = iv_view_make(y, g_ctx.dt, T, H, H);
    char what[128];
    snprintf(what, sizeof what, "add [%lld, %lld]", (long long)T, (long long)H);
    auto op = [&](int p) {
        path(p);
        if (p == P_OLD) {
#if HAVE_OLD
            oldk::iv_cuda_add(OPS, yv, av, bv);
#endif
        } else newk::iv_cuda_add(OPS, yv, av, bv);
    };
    check_op(what, op, y, (size_t)(T * H), 0, {{y, (size_t)(T * H) * 2}}, time_it, (double)T * H * 2 * 3);
}

static void scale_case(int64_t T, int64_t H, int64_t ldx, float s, bool time_it)
{
    uint16_t *x = rand16((size_t)(T * ldx), 8.0f), *y = rand16((size_t)(T * H), 1.0f);
    const iv_view xv = iv_view_make(x, g_ctx.dt, T, H, ldx), yv = iv_view_make(y, g_ctx.dt, T, H, H);
    char what[128];
    snprintf(what, sizeof what, "scale %g [%lld, %lld] x ld %lld", s, (long long)T, (long long)H, (long long)ldx);
    auto op = [&](int p) {
        path(p);
        if (p == P_OLD) {
#if HAVE_OLD
            oldk::iv_cuda_scale(OPS, yv, xv, s);
#endif
        } else newk::iv_cuda_scale(OPS, yv, xv, s);
    };
    check_op(what, op, y, (size_t)(T * H), 0, {{y, (size_t)(T * H) * 2}}, time_it, (double)T * H * 2 * 2);
}

static void embed_case(int64_t T, int64_t H, int V, int acc, bool time_it)
{
    uint16_t *tab = rand16((size_t)V * H, 2.0f), *y = rand16((size_t)(T * H), 1.0f);
    int32_t *ids = (int32_t *)dalloc(sizeof(int32_t) * (size_t)T);
    fill_ids_kernel<<<256, 256>>>(ids, (size_t)T, g_seed++, V);
    iv_tensor table;
    memset(&table, 0, sizeof table);
    table.dtype = g_ctx.dt;
    table.device = IV_CUDA;
    table.ndim = 2;
    table.shape[0] = V;
    table.shape[1] = H;
    table.data = tab;
    const iv_view yv = iv_view_make(y, g_ctx.dt, T, H, H);
    char what[128];
    snprintf(what, sizeof what, "embed acc %d [%lld, %lld] V %d", acc, (long long)T, (long long)H, V);
    auto op = [&](int p) {
        path(p);
        if (p == P_OLD) {
#if HAVE_OLD
            oldk::iv_cuda_embed(OPS, yv, &table, ids, acc);
#endif
        } else newk::iv_cuda_embed(OPS, yv, &table, ids, acc);
    };
    check_op(what, op, y, (size_t)(T * H), 0, {{y, (size_t)(T * H) * 2}}, time_it,
             (double)T * H * 2 * (acc ? 3 : 2));
}

static void rope_case(int64_t T, int nh, int hd, int rot, int inter, int64_t ld, bool big_pos, bool time_it)
{
    uint16_t *x = rand16((size_t)(T * ld), 4.0f);
    int32_t *pos = (int32_t *)dalloc(sizeof(int32_t) * (size_t)T);
    fill_ids_kernel<<<256, 256>>>(pos, (size_t)T, g_seed++, big_pos ? 400000 : 512);
    std::vector<float> inv(rot / 2);
    for (int i = 0; i < rot / 2; i++) inv[i] = powf(1000000.0f, -2.0f * i / (float)rot);
    iv_rope_args a;
    memset(&a, 0, sizeof a);
    a.x = iv_view_make(x, g_ctx.dt, T, (int64_t)nh * hd, ld);
    a.n_heads = nh;
    a.head_dim = hd;
    a.rot_dim = rot;
    a.pos = pos;
    a.inv_freq = inv.data();
    a.interleaved = inter;
    a.attn_factor = 0.0f;
    char what[128];
    snprintf(what, sizeof what, "rope [%lld, %d x %d] rot %d inter %d ld %lld%s", (long long)T, nh, hd, rot, inter,
             (long long)ld, big_pos ? " big pos" : "");
    auto op = [&](int p) {
        path(p);
        if (p == P_OLD) {
#if HAVE_OLD
            oldk::iv_cuda_rope(OPS, &a);
#endif
        } else newk::iv_cuda_rope(OPS, &a);
    };
    check_op(what, op, x, (size_t)(T * ld), 0, {{x, (size_t)(T * ld) * 2}}, time_it,
             (double)T * nh * rot * 2 * 2);
}

static void epilogue_case(int64_t T, int64_t N, int act, bool bias, bool res, bool time_it)
{
    float *acc = (float *)dalloc(sizeof(float) * (size_t)(T * N));
    fill32_kernel<<<1024, 256>>>(acc, (size_t)(T * N), g_seed++, 6.0f);
    uint16_t *y = rand16((size_t)(T * N), 1.0f), *r = res ? rand16((size_t)(T * N), 4.0f) : nullptr;
    uint16_t *b = bias ? rand16((size_t)N, 1.0f, 0.0f, 0) : nullptr;
    char what[128];
    snprintf(what, sizeof what, "linear epilogue act %d [%lld, %lld]%s%s", act, (long long)T, (long long)N,
             bias ? " + b" : "", res ? " + res" : "");
    auto op = [&](int p) {
        path(p);
        if (p == P_OLD) {
#if HAVE_OLD
            oldk::linear_epilogue_kernel<<<iv_cuda_ew_grid(T, N), IV_CUDA_EW_THREADS, 0, g_ctx.stream>>>(
                y, N, acc, N, b, r, act, T, N, g_ctx.bf16);
#endif
        } else newk::launch_epilogue(&g_ctx, y, N, acc, N, b, r, act, T, N);
    };
    check_op(what, op, y, (size_t)(T * N), 0, {{y, (size_t)(T * N) * 2}}, time_it,
             (double)T * N * (4 + 2 + (res ? 2 : 0)));
}

static void set_dtype(iv_dtype dt, cudaStream_t s)
{
    memset(&g_ctx, 0, sizeof g_ctx);
    g_ctx.ops.ctx = &g_ctx;
    g_ctx.dt = dt;
    g_ctx.bf16 = dt == IV_BF16;
    g_ctx.device = 0;
    g_ctx.stream = s;
}

int main(int argc, char **argv)
{
    CK(cudaSetDevice(0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("gpu  %s, %d SMs%s\n", prop.name, prop.multiProcessorCount, HAVE_OLD ? ", with the old kernels" : "");
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    const int64_t T = 64 * 512;
    const iv_dtype dts[2] = {IV_BF16, IV_F16};
    for (int d = 0; d < 2; d++) {
        set_dtype(dts[d], s);
        const bool tm = d == 0; /* time the BF16 runs */
        printf("---- %s\n", d == 0 ? "bfloat16" : "float16");
        /* the profiled shapes */
        glu_case(T, 3072, IV_ACT_SILU, 1, tm);
        norm_case(0, T, 1024, 1024, false, tm);
        norm_case(0, T, 1024, 1024, true, tm);
        norm_case(1, T, 768, 768, true, tm, 5.0f);
        norm_case(1, T, 768, 768, false, tm);
        scale_case(T, 1024, 1024, 1.0f, tm);
        scale_case(T, 1024, 4096, 1.0f, tm);
        head_norm_case(T, 16, 128, 4096, tm);
        head_norm_case(T, 8, 128, 4096, tm);
        rope_case(T, 16, 128, 128, 0, 4096, false, tm);
        rope_case(T, 8, 128, 128, 0, 4096, false, tm);
        act_case(T, 3072, IV_ACT_GELU, tm);
        add_case(T, 768, tm);
        embed_case(T, 768, 30522, 0, tm);
        embed_case(T, 768, 512, 1, tm);
        epilogue_case(10922, 3072, IV_ACT_GELU, true, false, tm);
        epilogue_case(10922, 768, IV_ACT_NONE, true, true, tm);
        free_all();
        /* every activation and path variant, smaller */
        for (int act = 0; act <= IV_ACT_SIGMOID; act++) {
            glu_case(997, 1032, act, act & 1, false);
            act_case(997, 1032, act, false);
            epilogue_case(997, 1032, act, act & 1, act != 2, false);
            epilogue_case(997, 1032, act, true, true, false);
        }
        const int ns[] = {8, 32, 64, 128, 136, 256, 512, 768, 1024, 1536, 2048, 2560, 3072, 4096, 5120, 8192, 8200, 100};
        for (int n : ns)
            for (int layer = 0; layer < 2; layer++) {
                norm_case(layer, 2000, n, n + 8 * (n % 16 == 0), layer, false, layer ? 40.0f : 0.0f);
            }
        const int hds[] = {64, 80, 128, 256};
        for (int hd : hds) head_norm_case(1500, 12, hd, 12 * hd + 64, false);
        rope_case(1500, 16, 128, 128, 0, 2048, true, false);
        rope_case(1500, 8, 64, 64, 1, 512, true, false);
        rope_case(1500, 12, 64, 32, 0, 768, false, false);
        rope_case(1500, 6, 80, 80, 0, 480, false, false);
        scale_case(1500, 776, 784, 0.37f, false);
        add_case(1500, 1000, false);
        embed_case(1500, 1032, 700, 1, false);
        free_all();
    }
    {
        /* the ceiling: a device-to-device copy of 256 MiB */
        const size_t bytes = (size_t)256 << 20;
        void *a = dalloc(bytes), *b = dalloc(bytes);
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        for (int i = 0; i < 3; i++) CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
        CK(cudaEventRecord(e0, s));
        for (int i = 0; i < 20; i++) CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        printf("copy device to device, 256 MiB: %.1f us, %.0f GB/s read + written\n", 1000.0 * ms / 20,
               2.0 * bytes / (1e6 * ms / 20));
        free_all();
    }
    printf("---- timings (bfloat16, mean of 20 after 3 warm-ups; GB/s from bytes read + written once)\n");
    for (auto &t : g_times) {
        printf("time %-58s vector %8.1f us %7.0f GB/s | scalar %8.1f us %7.0f GB/s", t.name.c_str(), t.us[P_VEC],
               t.bytes / t.us[P_VEC] / 1e3, t.us[P_SCALAR], t.bytes / t.us[P_SCALAR] / 1e3);
        if (HAVE_OLD) printf(" | old %8.1f us", t.us[P_OLD]);
        printf(" | x%.2f\n", t.us[P_SCALAR] / t.us[P_VEC]);
    }
    printf("%d failed checks\n", g_fail);
    return g_fail;
}
