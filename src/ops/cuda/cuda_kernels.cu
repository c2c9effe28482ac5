/* The CUDA table's kernels other than linear and attention: norms,
 * activations, gated units, elementwise ops, embedding gather, rotary
 * embedding, softmax, L2 normalisation and pooling. Each mirrors its CPU
 * kernel (ops/cpu/norm.c, act.c, misc.c, rope.c, heads/pooling.c): inputs
 * converted to float, FP32 maths in the CPU's order, one rounding at the
 * store. Views are strided by their ld; y may alias x where the CPU allows
 * it, because every element is read and written by the same thread.
 *
 * Row kernels (norms, softmax, L2) give each row one block and reduce with
 * warp shuffles; elementwise kernels map columns to threads and rows to the
 * grid's y (iv_cuda_ew_grid).
 *
 * Views whose data is 16-byte aligned with ld and cols multiples of 8 (all
 * the model's activations) take vector kernels instead (cuda_vec.h): norms,
 * head norm, act, glu, add, scale, embed and rope move 8 elements per 16-byte
 * access, the norms hold a row in the registers of a few lanes, and the
 * elementwise ops run a pipelined grid-stride loop. Per element they do the
 * scalar kernels' operations in the same order (only the norms' sums are
 * added in another order), so they round to the same values;
 * tests/gpu/emu/kernels_emu_check.cpp and tests/gpu/kernels_check.cu compare
 * the two paths. The scalar kernels stay for the other views. */
#include <math.h>

#include "ops/cuda/cuda_internal.h"
#include "ops/cuda/cuda_vec.h"

/* ---- reductions ---- */

static __device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* The sum (max) of v over the block, in every thread, in a fixed order (so
 * every thread holds the same bits). blockDim.x is a multiple of 32; red
 * holds 32 floats of shared memory. */
static __device__ float block_sum(float v, float *red)
{
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads(); /* red may still be read by the previous reduction */
    if (lane == 0) red[wid] = v;
    __syncthreads();
    return warp_sum(lane < nw ? red[lane] : 0.0f);
}

static __device__ float block_max(float v, float *red)
{
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) red[wid] = v;
    __syncthreads();
    return warp_max(lane < nw ? red[lane] : -INFINITY);
}

/* Threads for a row of n: about 4 elements each, 32 to 1024. */
static int row_threads(int64_t n)
{
    int64_t t = ((n + 3) / 4 + 31) / 32 * 32;
    return t < 32 ? 32 : t > 1024 ? 1024 : (int)t;
}

/* One block per row, looping when rows exceed the grid. */
static unsigned row_grid(int64_t rows) { return (unsigned)(rows < (1 << 20) ? rows : (1 << 20)); }


/* ---- LayerNorm and RMSNorm ---- */

/* A row's z (float) is cached in shared memory when it fits, else re-read. */
#define NORM_CACHE_MAX_COLS 10240
/* Threads of a vector norm block (8 warps). */
#define NORM_VEC_THREADS 256

/* y = LN(z) or RMSNorm(z), z = x + r. layer: mean-centred two-pass
 * statistics (mean, then squared deviations); else mean(z^2). */
static __global__ void __launch_bounds__(1024)
    norm_kernel(void *y, int64_t ldy, const void *x, int64_t ldx, const void *r, const void *w, const void *b,
                float eps, float w_offset, int layer, int64_t rows, int64_t cols, int cache, int bf16)
{
    extern __shared__ float zs[];
    __shared__ float red[32];
    for (int64_t t = blockIdx.x; t < rows; t += gridDim.x) {
        const int64_t xo = t * ldx;
        float a1 = 0.0f;
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
            float z = iv_ld(x, xo + c, bf16);
            if (r) z += iv_ld(r, xo + c, bf16);
            if (cache) zs[c] = z;
            a1 += layer ? z : z * z;
        }
        const float s1 = block_sum(a1, red);
        float mean = 0.0f, var;
        if (layer) {
            mean = s1 / (float)cols;
            float q = 0.0f;
            for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
                float z;
                if (cache)
                    z = zs[c];
                else {
                    z = iv_ld(x, xo + c, bf16);
                    if (r) z += iv_ld(r, xo + c, bf16);
                }
                const float d = z - mean;
                q += d * d;
            }
            var = block_sum(q, red) / (float)cols;
        } else {
            var = s1 / (float)cols;
        }
        const float rstd = 1.0f / sqrtf(var + eps);
        /* Each thread rewrites only the elements it read, so y may be x or r. */
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
            float z;
            if (cache)
                z = zs[c];
            else {
                z = iv_ld(x, xo + c, bf16);
                if (r) z += iv_ld(r, xo + c, bf16);
            }
            float v;
            if (layer) {
                v = (z - mean) * rstd;
                if (w) v = v * iv_ld(w, c, bf16);
                if (b) v = v + iv_ld(b, c, bf16);
            } else {
                v = z * rstd;
                if (w) v = v * (iv_ld(w, c, bf16) + w_offset);
            }
            iv_st(y, t * ldy + c, v, bf16);
        }
    }
}

/* ---- vector norms (cuda_vec.h): a row in the registers of a few lanes ---- */

/* Unit u (a row, or for head_rms_norm head u % nh of row u / nh: n columns
 * from column (u % nh) n) is held in registers by G lanes (G < 32: part of
 * a warp) or W whole warps (G = 32), NV vectors a lane: lane g of the unit's
 * G W lanes holds vectors g, g + G W, ..., so their loads are contiguous.
 * Statistics in FP32 as norm_kernel's (LayerNorm two-pass: the mean, then
 * squared deviations from the registers), summed per lane, then over the
 * warp by a butterfly, then over the W warps in order through shared
 * memory, so every lane ends with the same bits; the output formula and its
 * operation order are norm_kernel's. y may be x or r: each lane stores only
 * the vectors it loaded. */
/* Loads unit u's x (and r) vectors into this lane's registers (nothing past the last unit). */
template <int LANES, int NV>
static __device__ __forceinline__ void norm_vec_load(uint4 (&xa)[NV], uint4 (&ra)[NV], const void *x, const void *r,
                                                     int64_t ldx, int64_t units, int nh, int64_t n, int64_t u, int g)
{
    if (u >= units) return;
    int64_t t, h;
    iv_divmod(u, nh, t, h);
    const int64_t xo = t * ldx + h * n, nv = n / IV_VEC;
#pragma unroll
    for (int j = 0; j < NV; j++) {
        const int64_t v = g + (int64_t)LANES * j;
        if (v < nv) {
            xa[j] = iv_ld16(iv_el(x, xo + v * IV_VEC));
            if (r) ra[j] = iv_ld16(iv_el(r, xo + v * IV_VEC));
        }
    }
}

template <typename T, int G, int W, int NV, int LAYER>
static __global__ void __launch_bounds__(NORM_VEC_THREADS)
    norm_vec_kernel(void *y, int64_t ldy, const void *x, int64_t ldx, const void *r, const void *w, const void *b,
                    float eps, float w_offset, int64_t units, int nh, int64_t n)
{
    constexpr int LANES = G * W;
    const int UPB = (int)(blockDim.x >> 5) / W * (32 / G); /* units per block */
    __shared__ float red[2][NORM_VEC_THREADS / 32];
    const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
    const int g = G == 32 ? (wib % W) * 32 + lane : lane % G; /* lane within the unit */
    const int slot = G == 32 ? wib / W : wib * (32 / G) + lane / G; /* unit within the block */
    const int64_t nv = n / IV_VEC, ustep = (int64_t)gridDim.x * UPB;
    /* LayerNorm loads the next unit's vectors while it reduces and stores
     * this one (other rows: y may be x or r all the same); RMSNorm, with
     * fewer registers to spare, loads each unit in turn. */
    constexpr bool PREFETCH = LAYER;
    uint4 xa[NV], ra[NV];
    if (PREFETCH) norm_vec_load<LANES, NV>(xa, ra, x, r, ldx, units, nh, n, (int64_t)blockIdx.x * UPB + slot, g);
    /* Block-uniform loop: every lane reaches the shuffles and barriers. */
    for (int64_t u0 = (int64_t)blockIdx.x * UPB; u0 < units; u0 += ustep) {
        const int64_t u = u0 + slot;
        const bool active = u < units;
        int64_t yo = 0;
        if (active) {
            int64_t t, h;
            iv_divmod(u, nh, t, h);
            yo = t * ldy + h * n;
        }
        if (!PREFETCH) norm_vec_load<LANES, NV>(xa, ra, x, r, ldx, units, nh, n, u, g);
        float z[NV][8];
#pragma unroll
        for (int j = 0; j < NV; j++) {
            const int64_t v = g + (int64_t)LANES * j;
            if (active && v < nv) {
                iv_unpack8<T>(xa[j], z[j]);
                if (r) {
                    float rf[8];
                    iv_unpack8<T>(ra[j], rf);
#pragma unroll
                    for (int k = 0; k < 8; k++) z[j][k] = __fadd_rn(z[j][k], rf[k]);
                }
            } else {
#pragma unroll
                for (int k = 0; k < 8; k++) z[j][k] = 0.0f; /* adds nothing to the sums */
            }
        }
        if (PREFETCH) norm_vec_load<LANES, NV>(xa, ra, x, r, ldx, units, nh, n, u + ustep, g);
        float s1 = 0.0f;
#pragma unroll
        for (int j = 0; j < NV; j++)
#pragma unroll
            for (int k = 0; k < 8; k++) s1 += LAYER ? z[j][k] : z[j][k] * z[j][k];
#pragma unroll
        for (int o = G / 2; o > 0; o >>= 1) s1 += __shfl_xor_sync(0xffffffffu, s1, o);
        if (W > 1) {
            if (lane == 0) red[0][wib] = s1;
            __syncthreads();
            s1 = red[0][wib / W * W];
#pragma unroll
            for (int i = 1; i < W; i++) s1 += red[0][wib / W * W + i];
        }
        float mean = 0.0f, var;
        if (LAYER) {
            mean = s1 / (float)n;
            float q = 0.0f;
#pragma unroll
            for (int j = 0; j < NV; j++) {
                if (active && g + (int64_t)LANES * j < nv) {
#pragma unroll
                    for (int k = 0; k < 8; k++) {
                        const float d = z[j][k] - mean;
                        q += d * d;
                    }
                }
            }
#pragma unroll
            for (int o = G / 2; o > 0; o >>= 1) q += __shfl_xor_sync(0xffffffffu, q, o);
            if (W > 1) {
                if (lane == 0) red[1][wib] = q;
                __syncthreads();
                q = red[1][wib / W * W];
#pragma unroll
                for (int i = 1; i < W; i++) q += red[1][wib / W * W + i];
            }
            var = q / (float)n;
        } else {
            var = s1 / (float)n;
        }
        if (W > 1) __syncthreads(); /* red is read before the next unit writes it */
        const float rstd = 1.0f / sqrtf(var + eps);
#pragma unroll
        for (int j = 0; j < NV; j++) {
            const int64_t v = g + (int64_t)LANES * j;
            if (!active || v >= nv) continue;
            float wf[8], bf[8], o[8];
            if (w) iv_unpack8<T>(iv_ld16(iv_el(w, v * IV_VEC)), wf);
            if (LAYER && b) iv_unpack8<T>(iv_ld16(iv_el(b, v * IV_VEC)), bf);
#pragma unroll
            for (int k = 0; k < 8; k++) {
                float e;
                if (LAYER) {
                    e = __fmul_rn(__fsub_rn(z[j][k], mean), rstd);
                    if (w) e = __fmul_rn(e, wf[k]);
                    if (b) e = __fadd_rn(e, bf[k]);
                } else {
                    e = __fmul_rn(z[j][k], rstd);
                    if (w) e = __fmul_rn(e, __fadd_rn(wf[k], w_offset));
                }
                o[k] = e;
            }
            iv_st16(iv_elw(y, yo + v * IV_VEC), iv_pack8<T>(o));
        }
    }
}

typedef void (*norm_vec_fn)(void *, int64_t, const void *, int64_t, const void *, const void *, const void *, float,
                            float, int64_t, int, int64_t);

/* The instantiation for units of nv vectors and its lanes per unit (G, W),
 * or NULL when a unit is too wide (over 8192 columns). At most 4 vectors a
 * lane, so that a block keeps its rows in registers without spilling. */
template <typename T, int LAYER> static norm_vec_fn norm_vec_pick(int64_t nv, int *g, int *w, int **occ)
{
    static int occ_cache[13]; /* resident blocks of NORM_VEC_THREADS per multiprocessor, per choice */
    norm_vec_fn f = NULL;
    int G = 32, W = 1, i = 0;
    if (nv <= 4) f = norm_vec_kernel<T, 4, 1, 1, LAYER>, G = 4, i = 0;
    else if (nv <= 8) f = norm_vec_kernel<T, 8, 1, 1, LAYER>, G = 8, i = 1;
    else if (nv <= 16) f = norm_vec_kernel<T, 16, 1, 1, LAYER>, G = 16, i = 2;
    else if (nv <= 32) f = norm_vec_kernel<T, 32, 1, 1, LAYER>, i = 3;
    else if (nv <= 64) f = norm_vec_kernel<T, 32, 1, 2, LAYER>, i = 4;
    else if (nv <= 96) f = norm_vec_kernel<T, 32, 1, 3, LAYER>, i = 5;
    else if (nv <= 128) f = norm_vec_kernel<T, 32, 1, 4, LAYER>, i = 6;
    else if (nv <= 192) f = norm_vec_kernel<T, 32, 2, 3, LAYER>, W = 2, i = 7;
    else if (nv <= 256) f = norm_vec_kernel<T, 32, 2, 4, LAYER>, W = 2, i = 8;
    else if (nv <= 384) f = norm_vec_kernel<T, 32, 4, 3, LAYER>, W = 4, i = 9;
    else if (nv <= 512) f = norm_vec_kernel<T, 32, 4, 4, LAYER>, W = 4, i = 10;
    else if (nv <= 768) f = norm_vec_kernel<T, 32, 8, 3, LAYER>, W = 8, i = 11;
    else if (nv <= 1024) f = norm_vec_kernel<T, 32, 8, 4, LAYER>, W = 8, i = 12;
    *g = G;
    *w = W;
    *occ = &occ_cache[i];
    return f;
}

/* Queues the vector norm over `units` units of n columns when the views
 * allow it (cuda_vec.h); 0 when they don't (nothing queued). */
static int launch_norm_vec(cuda_ctx *c, void *y, int64_t ldy, const void *x, int64_t ldx, const void *r,
                           const void *w, const void *b, float eps, float w_offset, int layer, int64_t units, int nh,
                           int64_t n)
{
    if (!iv_vec_rows_ok(y, ldy, n) || !iv_vec_rows_ok(x, ldx, n) || (r && !iv_vec_ptr_ok(r)) ||
        (w && !iv_vec_ptr_ok(w)) || (b && !iv_vec_ptr_ok(b)))
        return 0;
    int G = 32, W = 1, *occ = NULL;
    const int64_t nv = n / IV_VEC;
    const norm_vec_fn f = c->bf16 ? (layer ? norm_vec_pick<__nv_bfloat16, 1>(nv, &G, &W, &occ)
                                           : norm_vec_pick<__nv_bfloat16, 0>(nv, &G, &W, &occ))
                                  : (layer ? norm_vec_pick<__half, 1>(nv, &G, &W, &occ)
                                           : norm_vec_pick<__half, 0>(nv, &G, &W, &occ));
    if (!f) return 0;
    /* 8 warps a block, fewer when that leaves multiprocessors idle (few rows) */
    int threads = NORM_VEC_THREADS;
    const int sms = iv_cuda_sm_count(c->device);
    while (threads > 32 * W && (units + threads / 32 / W * (32 / G) - 1) / (threads / 32 / W * (32 / G)) < 2 * sms)
        threads /= 2;
    const int upb = threads / 32 / W * (32 / G);
    /* LayerNorm: at most one wave, each warp looping over units (loading the
     * next while it reduces this one); RMSNorm: a block for every upb units. */
    int64_t cap = IV_VEC_MAX_BLOCKS;
    if (layer) {
        const int64_t wave =
            (int64_t)sms * iv_cuda_occupancy((const void *)f, NORM_VEC_THREADS, occ) * (NORM_VEC_THREADS / threads);
        if (wave < cap) cap = wave;
    }
    int64_t blocks = (units + upb - 1) / upb;
    if (blocks > cap) blocks = cap;
    f<<<(unsigned)blocks, threads, 0, c->stream>>>(y, ldy, x, ldx, r, w, b, eps, w_offset, units, nh, n);
    return 1;
}

static void launch_norm(const iv_ops *ops, const char *name, iv_view y, iv_view x, const void *r, const iv_tensor *w,
                        const iv_tensor *b, float eps, float w_offset, int layer)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    if (!iv_cuda_view_ok(c, x) || !iv_cuda_view_ok(c, y) || y.rows != x.rows || y.cols != x.cols || !iv_cuda_weight_ok(c, w, x.cols) ||
        !iv_cuda_weight_ok(c, b, x.cols)) {
        iv_cuda_note_invalid(ops, "%s: x [%lld, %lld], y [%lld, %lld], weight %lld, bias %lld do not match", name,
                             (long long)x.rows, (long long)x.cols, (long long)y.rows, (long long)y.cols,
                             w ? (long long)iv_tensor_numel(w) : -1LL, b ? (long long)iv_tensor_numel(b) : -1LL);
        return;
    }
    if (x.rows == 0 || x.cols == 0) return;
    if (launch_norm_vec(c, y.data, y.ld, x.data, x.ld, r, w ? w->data : NULL, b ? b->data : NULL, eps, w_offset,
                        layer, x.rows, 1, x.cols)) {
        IV_CUDA_CHECK_LAUNCH(ops, name);
        return;
    }
    const int cache = x.cols <= NORM_CACHE_MAX_COLS;
    const size_t smem = cache ? (size_t)x.cols * sizeof(float) : 0;
    norm_kernel<<<row_grid(x.rows), row_threads(x.cols), smem, c->stream>>>(
        y.data, y.ld, x.data, x.ld, r, w ? w->data : NULL, b ? b->data : NULL, eps, w_offset, layer, x.rows, x.cols,
        cache, c->bf16);
    IV_CUDA_CHECK_LAUNCH(ops, name);
}

void iv_cuda_layer_norm(const iv_ops *ops, iv_view y, iv_view x, const void *r, const iv_tensor *w, const iv_tensor *b,
                        float eps)
{
    launch_norm(ops, "layer_norm", y, x, r, w, b, eps, 0.0f, 1);
}

void iv_cuda_rms_norm(const iv_ops *ops, iv_view y, iv_view x, const void *r, const iv_tensor *w, float eps,
                      float w_offset)
{
    launch_norm(ops, "rms_norm", y, x, r, w, NULL, eps, w_offset, 0);
}

/* One warp per (row, head), in place. */
static __global__ void head_rms_norm_kernel(void *x, int64_t ldx, int64_t rows, int n_heads, int head_dim,
                                            const void *w, float eps, float w_offset, int bf16)
{
    const int lane = threadIdx.x & 31;
    const int64_t units = rows * n_heads, nwarps = (int64_t)gridDim.x * (blockDim.x >> 5);
    for (int64_t u = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); u < units; u += nwarps) {
        const int64_t t = u / n_heads;
        const int64_t base = t * ldx + (u - t * n_heads) * head_dim;
        float q = 0.0f;
        for (int i = lane; i < head_dim; i += 32) {
            const float v = iv_ld(x, base + i, bf16);
            q += v * v;
        }
        const float rstd = 1.0f / sqrtf(warp_sum(q) / (float)head_dim + eps);
        for (int i = lane; i < head_dim; i += 32) {
            float v = iv_ld(x, base + i, bf16) * rstd;
            if (w) v = v * (iv_ld(w, i, bf16) + w_offset);
            iv_st(x, base + i, v, bf16);
        }
    }
}

void iv_cuda_head_rms_norm(const iv_ops *ops, iv_view x, int n_heads, int head_dim, const iv_tensor *w, float eps,
                           float w_offset)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    if (!iv_cuda_view_ok(c, x) || n_heads < 0 || head_dim < 0 || x.cols < (int64_t)n_heads * head_dim ||
        !iv_cuda_weight_ok(c, w, head_dim)) {
        iv_cuda_note_invalid(ops, "head_rms_norm: x [%lld, %lld] has no %d heads of %d, or weight %lld != %d",
                             (long long)x.rows, (long long)x.cols, n_heads, head_dim,
                             w ? (long long)iv_tensor_numel(w) : -1LL, head_dim);
        return;
    }
    const int64_t units = x.rows * n_heads;
    if (units == 0 || head_dim == 0) return;
    if (launch_norm_vec(c, x.data, x.ld, x.data, x.ld, NULL, w ? w->data : NULL, NULL, eps, w_offset, 0, units,
                        n_heads, head_dim)) {
        IV_CUDA_CHECK_LAUNCH(ops, "head_rms_norm");
        return;
    }
    const int warps = 8;
    int64_t blocks = (units + warps - 1) / warps;
    if (blocks > (1 << 20)) blocks = 1 << 20;
    head_rms_norm_kernel<<<(unsigned)blocks, warps * 32, 0, c->stream>>>(x.data, x.ld, x.rows, n_heads, head_dim,
                                                                         w ? w->data : NULL, eps, w_offset, c->bf16);
    IV_CUDA_CHECK_LAUNCH(ops, "head_rms_norm");
}

/* ---- elementwise ---- */

#define EW_COL()                                                      \
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; \
    if (c >= cols) return

/* Vector elementwise ops (cuda_vec.h's iv_ew_kernel): per element the
 * scalar kernel's operations in its order, the activation a template
 * argument (iv_act_f's code for it). */
template <typename T, int ACT> struct ew_act_op {
    void *y;
    int64_t ldy;
    const void *x;
    int64_t ldx;
    struct In {
        uint4 a;
        char *yp;
    };
    __device__ __forceinline__ void load(In &in, int64_t t, int64_t c) const
    {
        in.a = iv_ld16(iv_el(x, t * ldx + c));
        in.yp = iv_elw(y, t * ldy + c);
    }
    __device__ __forceinline__ void store(const In &in) const
    {
        float f[8];
        iv_unpack8<T>(in.a, f);
#pragma unroll
        for (int e = 0; e < 8; e++) f[e] = iv_act_f(f[e], ACT);
        iv_st16(in.yp, iv_pack8<T>(f));
    }
};

/* y = act(g) * u; go, uo: the columns of g's and u's halves in x's row. */
template <typename T, int ACT> struct ew_glu_op {
    void *y;
    int64_t ldy;
    const void *x;
    int64_t ldx, go, uo;
    struct In {
        uint4 g, u;
        char *yp;
    };
    __device__ __forceinline__ void load(In &in, int64_t t, int64_t c) const
    {
        in.g = iv_ld16(iv_el(x, t * ldx + go + c));
        in.u = iv_ld16(iv_el(x, t * ldx + uo + c));
        in.yp = iv_elw(y, t * ldy + c);
    }
    __device__ __forceinline__ void store(const In &in) const
    {
        float g[8], u[8];
        iv_unpack8<T>(in.g, g);
        iv_unpack8<T>(in.u, u);
#pragma unroll
        for (int e = 0; e < 8; e++) g[e] = __fmul_rn(iv_act_f(g[e], ACT), u[e]);
        iv_st16(in.yp, iv_pack8<T>(g));
    }
};

template <typename T> struct ew_add_op {
    void *y;
    int64_t ldy;
    const void *a;
    int64_t lda;
    const void *b;
    int64_t ldb;
    struct In {
        uint4 a, b;
        char *yp;
    };
    __device__ __forceinline__ void load(In &in, int64_t t, int64_t c) const
    {
        in.a = iv_ld16(iv_el(a, t * lda + c));
        in.b = iv_ld16(iv_el(b, t * ldb + c));
        in.yp = iv_elw(y, t * ldy + c);
    }
    __device__ __forceinline__ void store(const In &in) const
    {
        float fa[8], fb[8];
        iv_unpack8<T>(in.a, fa);
        iv_unpack8<T>(in.b, fb);
#pragma unroll
        for (int e = 0; e < 8; e++) fa[e] = __fadd_rn(fa[e], fb[e]);
        iv_st16(in.yp, iv_pack8<T>(fa));
    }
};

template <typename T> struct ew_scale_op {
    void *y;
    int64_t ldy;
    const void *x;
    int64_t ldx;
    float s;
    struct In {
        uint4 a;
        char *yp;
    };
    __device__ __forceinline__ void load(In &in, int64_t t, int64_t c) const
    {
        in.a = iv_ld16(iv_el(x, t * ldx + c));
        in.yp = iv_elw(y, t * ldy + c);
    }
    __device__ __forceinline__ void store(const In &in) const
    {
        float f[8];
        iv_unpack8<T>(in.a, f);
#pragma unroll
        for (int e = 0; e < 8; e++) f[e] = __fmul_rn(f[e], s);
        iv_st16(in.yp, iv_pack8<T>(f));
    }
};

/* y[t] (+)= table[ids[t]], the table's rows cols apart. */
template <typename T> struct ew_embed_op {
    void *y;
    int64_t ldy;
    const void *table;
    const int32_t *ids;
    int64_t cols;
    int accumulate;
    struct In {
        uint4 tv, yv;
        char *yp;
    };
    __device__ __forceinline__ void load(In &in, int64_t t, int64_t c) const
    {
        in.yp = iv_elw(y, t * ldy + c);
        in.tv = iv_ld16(iv_el(table, (int64_t)ids[t] * cols + c));
        if (accumulate) in.yv = iv_ld16(in.yp);
    }
    __device__ __forceinline__ void store(const In &in) const
    {
        float f[8];
        iv_unpack8<T>(in.tv, f);
        if (accumulate) {
            float fy[8];
            iv_unpack8<T>(in.yv, fy);
#pragma unroll
            for (int e = 0; e < 8; e++) f[e] = __fadd_rn(fy[e], f[e]);
        }
        iv_st16(in.yp, iv_pack8<T>(f));
    }
};

static __global__ void act_kernel(void *y, int64_t ldy, const void *x, int64_t ldx, int64_t rows, int64_t cols, int act,
                                  int bf16)
{
    EW_COL();
    for (int64_t t = blockIdx.y; t < rows; t += gridDim.y)
        iv_st(y, t * ldy + c, iv_act_f(iv_ld(x, t * ldx + c, bf16), act), bf16);
}

void iv_cuda_act(const iv_ops *ops, iv_view y, iv_view x, iv_act act)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    if (!iv_cuda_view_ok(c, x) || !iv_cuda_view_ok(c, y) || y.rows != x.rows || y.cols != x.cols) {
        iv_cuda_note_invalid(ops, "act: x [%lld, %lld] and y [%lld, %lld] differ", (long long)x.rows, (long long)x.cols,
                             (long long)y.rows, (long long)y.cols);
        return;
    }
    if (x.rows == 0 || x.cols == 0) return;
    if (iv_vec_view_ok(x) && iv_vec_view_ok(y)) {
        const int64_t nv = x.cols / IV_VEC, total = x.rows * nv;
        if (c->bf16)
            iv_ew_launch_act<__nv_bfloat16, ew_act_op>(c->device, c->stream, (int)act, nv, total, y.data, y.ld,
                                                       (const void *)x.data, x.ld);
        else
            iv_ew_launch_act<__half, ew_act_op>(c->device, c->stream, (int)act, nv, total, y.data, y.ld,
                                                (const void *)x.data, x.ld);
        IV_CUDA_CHECK_LAUNCH(ops, "act");
        return;
    }
    act_kernel<<<iv_cuda_ew_grid(x.rows, x.cols), IV_CUDA_EW_THREADS, 0, c->stream>>>(
        y.data, y.ld, x.data, x.ld, x.rows, x.cols, (int)act, c->bf16);
    IV_CUDA_CHECK_LAUNCH(ops, "act");
}

/* y = act(g) * u, g and u the two halves of x's row (y may be x's first
 * half with x's ld: each thread reads both before it writes). */
static __global__ void glu_kernel(void *y, int64_t ldy, const void *x, int64_t ldx, int64_t rows, int64_t cols, int act,
                                  int act_on_first, int bf16)
{
    EW_COL();
    const int64_t go = act_on_first ? c : c + cols, uo = act_on_first ? c + cols : c;
    for (int64_t t = blockIdx.y; t < rows; t += gridDim.y) {
        const float g = iv_ld(x, t * ldx + go, bf16), u = iv_ld(x, t * ldx + uo, bf16);
        iv_st(y, t * ldy + c, iv_act_f(g, act) * u, bf16);
    }
}

void iv_cuda_glu(const iv_ops *ops, iv_view y, iv_view x, iv_act act, int act_on_first)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    if (!iv_cuda_view_ok(c, x) || !iv_cuda_view_ok(c, y) || y.rows != x.rows || x.cols != 2 * y.cols) {
        iv_cuda_note_invalid(ops, "glu: x [%lld, %lld] is not y [%lld, %lld] with twice the columns", (long long)x.rows,
                             (long long)x.cols, (long long)y.rows, (long long)y.cols);
        return;
    }
    if (y.rows == 0 || y.cols == 0) return;
    if (iv_vec_view_ok(x) && iv_vec_view_ok(y)) { /* x.cols = 2 y.cols: both halves start aligned */
        const int64_t nv = y.cols / IV_VEC, total = y.rows * nv;
        const int64_t go = act_on_first ? 0 : y.cols, uo = act_on_first ? y.cols : 0;
        if (c->bf16)
            iv_ew_launch_act<__nv_bfloat16, ew_glu_op>(c->device, c->stream, (int)act, nv, total, y.data, y.ld,
                                                       (const void *)x.data, x.ld, go, uo);
        else
            iv_ew_launch_act<__half, ew_glu_op>(c->device, c->stream, (int)act, nv, total, y.data, y.ld,
                                                (const void *)x.data, x.ld, go, uo);
        IV_CUDA_CHECK_LAUNCH(ops, "glu");
        return;
    }
    glu_kernel<<<iv_cuda_ew_grid(y.rows, y.cols), IV_CUDA_EW_THREADS, 0, c->stream>>>(
        y.data, y.ld, x.data, x.ld, y.rows, y.cols, (int)act, act_on_first, c->bf16);
    IV_CUDA_CHECK_LAUNCH(ops, "glu");
}

/* f32: all three views FP32 (attention bias blocks), else the act dtype. */
static __global__ void add_kernel(void *y, int64_t ldy, const void *a, int64_t lda, const void *b, int64_t ldb,
                                  int64_t rows, int64_t cols, int bf16, int f32)
{
    EW_COL();
    for (int64_t t = blockIdx.y; t < rows; t += gridDim.y) {
        if (f32)
            ((float *)y)[t * ldy + c] = ((const float *)a)[t * lda + c] + ((const float *)b)[t * ldb + c];
        else
            iv_st(y, t * ldy + c, iv_ld(a, t * lda + c, bf16) + iv_ld(b, t * ldb + c, bf16), bf16);
    }
}

void iv_cuda_add(const iv_ops *ops, iv_view y, iv_view a, iv_view b)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    const int f32 = y.dtype == IV_F32 && a.dtype == IV_F32 && b.dtype == IV_F32;
    iv_view vs[3] = {y, a, b};
    int ok = 1;
    for (int i = 0; i < 3; i++)
        ok &= f32 ? vs[i].ld >= vs[i].cols && vs[i].rows >= 0 && vs[i].cols >= 0 : iv_cuda_view_ok(c, vs[i]);
    if (!ok || a.rows != y.rows || a.cols != y.cols || b.rows != y.rows || b.cols != y.cols) {
        iv_cuda_note_invalid(ops, "add: y [%lld, %lld], a [%lld, %lld], b [%lld, %lld] differ", (long long)y.rows,
                             (long long)y.cols, (long long)a.rows, (long long)a.cols, (long long)b.rows,
                             (long long)b.cols);
        return;
    }
    if (y.rows == 0 || y.cols == 0) return;
    if (!f32 && iv_vec_view_ok(y) && iv_vec_view_ok(a) && iv_vec_view_ok(b)) {
        const int64_t nv = y.cols / IV_VEC, total = y.rows * nv;
        if (c->bf16)
            iv_ew_launch(c->device, c->stream, ew_add_op<__nv_bfloat16>{y.data, y.ld, a.data, a.ld, b.data, b.ld}, nv,
                         total);
        else
            iv_ew_launch(c->device, c->stream, ew_add_op<__half>{y.data, y.ld, a.data, a.ld, b.data, b.ld}, nv, total);
        IV_CUDA_CHECK_LAUNCH(ops, "add");
        return;
    }
    add_kernel<<<iv_cuda_ew_grid(y.rows, y.cols), IV_CUDA_EW_THREADS, 0, c->stream>>>(
        y.data, y.ld, a.data, a.ld, b.data, b.ld, y.rows, y.cols, c->bf16, f32);
    IV_CUDA_CHECK_LAUNCH(ops, "add");
}

static __global__ void scale_kernel(void *y, int64_t ldy, const void *x, int64_t ldx, int64_t rows, int64_t cols,
                                    float s, int bf16)
{
    EW_COL();
    for (int64_t t = blockIdx.y; t < rows; t += gridDim.y) iv_st(y, t * ldy + c, iv_ld(x, t * ldx + c, bf16) * s, bf16);
}

void iv_cuda_scale(const iv_ops *ops, iv_view y, iv_view x, float s)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    if (!iv_cuda_view_ok(c, x) || !iv_cuda_view_ok(c, y) || y.rows != x.rows || y.cols != x.cols) {
        iv_cuda_note_invalid(ops, "scale: x [%lld, %lld] and y [%lld, %lld] differ", (long long)x.rows,
                             (long long)x.cols, (long long)y.rows, (long long)y.cols);
        return;
    }
    if (y.rows == 0 || y.cols == 0) return;
    if (iv_vec_view_ok(x) && iv_vec_view_ok(y)) {
        const int64_t nv = y.cols / IV_VEC, total = y.rows * nv;
        if (c->bf16)
            iv_ew_launch(c->device, c->stream, ew_scale_op<__nv_bfloat16>{y.data, y.ld, x.data, x.ld, s}, nv, total);
        else
            iv_ew_launch(c->device, c->stream, ew_scale_op<__half>{y.data, y.ld, x.data, x.ld, s}, nv, total);
        IV_CUDA_CHECK_LAUNCH(ops, "scale");
        return;
    }
    scale_kernel<<<iv_cuda_ew_grid(y.rows, y.cols), IV_CUDA_EW_THREADS, 0, c->stream>>>(y.data, y.ld, x.data, x.ld,
                                                                                        y.rows, y.cols, s, c->bf16);
    IV_CUDA_CHECK_LAUNCH(ops, "scale");
}

/* y[t] (+)= table[ids[t]]; the sum is formed in float and rounded once. */
static __global__ void embed_kernel(void *y, int64_t ldy, const void *table, const int32_t *ids, int64_t rows,
                                    int64_t cols, int accumulate, int bf16)
{
    EW_COL();
    for (int64_t t = blockIdx.y; t < rows; t += gridDim.y) {
        float v = iv_ld(table, (int64_t)ids[t] * cols + c, bf16);
        if (accumulate) v = iv_ld(y, t * ldy + c, bf16) + v;
        iv_st(y, t * ldy + c, v, bf16);
    }
}

/* Weighted gather (Qwen3-VL's bilinear resampling of its learned position
 * grid): per element the CPU's operations in its order, products and sum in
 * float, taps in j order, rounded once on the store. */
static __global__ void embed_bag_kernel(void *y, int64_t ldy, const void *table, const int32_t *ids,
                                        const float *weights, int64_t rows, int64_t cols, int taps, int bf16)
{
    EW_COL();
    for (int64_t t = blockIdx.y; t < rows; t += gridDim.y) {
        float v = 0.0f;
        for (int j = 0; j < taps; j++) {
            const float p = __fmul_rn(iv_ld(table, (int64_t)ids[t * taps + j] * cols + c, bf16), weights[t * taps + j]);
            v = j == 0 ? p : __fadd_rn(v, p);
        }
        iv_st(y, t * ldy + c, v, bf16);
    }
}

void iv_cuda_embed_bag(const iv_ops *ops, iv_view y, const iv_tensor *table, const int32_t *ids, const float *weights,
                       int taps)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    if (!iv_cuda_view_ok(c, y) || table->device != IV_CUDA || table->dtype != c->dt || iv_tensor_cols(table) != y.cols ||
        taps < 1) {
        iv_cuda_note_invalid(ops, "embed_bag: table [%lld, %lld] %s does not fit y [%lld, %lld] (%d taps)",
                             (long long)iv_tensor_rows(table), (long long)iv_tensor_cols(table),
                             iv_dtype_name(table->dtype), (long long)y.rows, (long long)y.cols, taps);
        return;
    }
    if (y.rows == 0 || y.cols == 0) return;
    embed_bag_kernel<<<iv_cuda_ew_grid(y.rows, y.cols), IV_CUDA_EW_THREADS, 0, c->stream>>>(
        y.data, y.ld, table->data, ids, weights, y.rows, y.cols, taps, c->bf16);
    IV_CUDA_CHECK_LAUNCH(ops, "embed_bag");
}

void iv_cuda_embed(const iv_ops *ops, iv_view y, const iv_tensor *table, const int32_t *ids, int accumulate)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    if (!iv_cuda_view_ok(c, y) || table->device != IV_CUDA || table->dtype != c->dt || iv_tensor_cols(table) != y.cols) {
        iv_cuda_note_invalid(ops, "embed: table [%lld, %lld] %s does not fit y [%lld, %lld]",
                             (long long)iv_tensor_rows(table), (long long)iv_tensor_cols(table),
                             iv_dtype_name(table->dtype), (long long)y.rows, (long long)y.cols);
        return;
    }
    if (y.rows == 0 || y.cols == 0) return;
    if (iv_vec_view_ok(y) && iv_vec_rows_ok(table->data, y.cols, y.cols)) {
        const int64_t nv = y.cols / IV_VEC, total = y.rows * nv;
        if (c->bf16)
            iv_ew_launch(c->device, c->stream,
                         ew_embed_op<__nv_bfloat16>{y.data, y.ld, table->data, ids, y.cols, accumulate}, nv, total);
        else
            iv_ew_launch(c->device, c->stream, ew_embed_op<__half>{y.data, y.ld, table->data, ids, y.cols, accumulate},
                         nv, total);
        IV_CUDA_CHECK_LAUNCH(ops, "embed");
        return;
    }
    embed_kernel<<<iv_cuda_ew_grid(y.rows, y.cols), IV_CUDA_EW_THREADS, 0, c->stream>>>(
        y.data, y.ld, table->data, ids, y.rows, y.cols, accumulate, c->bf16);
    IV_CUDA_CHECK_LAUNCH(ops, "embed");
}

/* ---- rotary embedding ---- */

/* inv_freq travels by value, in the kernel's parameters, with each
 * frequency's position axis (all 0 for plain RoPE; Qwen3-VL's mRoPE and
 * vision 2-D rotary: the op's freq_section) and the stride between axes'
 * positions (0: one axis). */
typedef struct cuda_rope_freqs {
    float f[IV_ROPE_MAX_HALF];
    unsigned char axis[IV_ROPE_MAX_HALF];
    int64_t axis_stride;
} cuda_rope_freqs;

/* Pair i's position in row t, as a float (the CPU's float(pos)). */
static __device__ __forceinline__ float rope_pos(const int32_t *pos, const cuda_rope_freqs &inv, int i, int64_t t)
{
    return (float)pos[(int64_t)inv.axis[i] * inv.axis_stride + t];
}

/* One block per row: the row's cos/sin (shared by its heads) into shared
 * memory, then every (head, pair) rotated in place. Angles as the CPU and
 * transformers: float(pos) * inv_freq in float, cos/sin of that. */
static __global__ void rope_kernel(void *x, int64_t ldx, int64_t rows, int n_heads, int head_dim, int npairs,
                                   const int32_t *pos, cuda_rope_freqs inv, int interleaved, float factor, int bf16)
{
    __shared__ float cs[IV_ROPE_MAX_HALF], sn[IV_ROPE_MAX_HALF];
    const int work = n_heads * npairs;
    for (int64_t t = blockIdx.x; t < rows; t += gridDim.x) {
        for (int i = threadIdx.x; i < npairs; i += blockDim.x) {
            const float angle = __fmul_rn(rope_pos(pos, inv, i, t), inv.f[i]);
            cs[i] = __fmul_rn(cosf(angle), factor);
            sn[i] = __fmul_rn(sinf(angle), factor);
        }
        __syncthreads();
        for (int j = threadIdx.x; j < work; j += blockDim.x) {
            const int h = j / npairs, i = j - h * npairs;
            const int64_t base = t * ldx + (int64_t)h * head_dim;
            const int64_t i1 = base + (interleaved ? 2 * i : i), i2 = base + (interleaved ? 2 * i + 1 : i + npairs);
            const float x1 = iv_ld(x, i1, bf16), x2 = iv_ld(x, i2, bf16);
            /* The contractions nvcc chose for x1 cs - x2 sn and x2 cs + x1 sn, spelled out. */
            iv_st(x, i1, __fmaf_rn(x1, cs[i], -__fmul_rn(x2, sn[i])), bf16);
            iv_st(x, i2, __fmaf_rn(x2, cs[i], __fmul_rn(x1, sn[i])), bf16);
        }
        __syncthreads(); /* the next row's cos/sin overwrite these */
    }
}

/* Vector RoPE (cuda_vec.h). Work item (row t, head group k, chunk c): the
 * chunk's pairs (NeoX: 8 pairs 8c.., their x1 and x2 one vector each; GPT-J:
 * 4 pairs 4c.., one vector) get their cos/sin once, as rope_kernel computes
 * them, then heads k, k + hg, ... (at most ROPE_HPT) are loaded and rotated
 * with rope_kernel's operations. */
#define ROPE_HPT 4
#define ROPE_VEC_THREADS 256
template <typename T, int INTERLEAVED>
static __global__ void __launch_bounds__(ROPE_VEC_THREADS)
    rope_vec_kernel(void *x, int64_t ldx, int64_t rows, int n_heads, int head_dim, int npairs, const int32_t *pos,
                    cuda_rope_freqs inv, float factor, int nchunks, int hg)
{
    constexpr int NP = INTERLEAVED ? 4 : 8; /* pairs per chunk */
    const int64_t per_row = (int64_t)nchunks * hg, total = rows * per_row;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        int64_t t, rem;
        iv_divmod(i, per_row, t, rem);
        const int k = (int)rem / nchunks, ch = (int)rem - k * nchunks;
        int64_t base[ROPE_HPT];
        uint4 a1[ROPE_HPT], a2[ROPE_HPT];
#pragma unroll
        for (int m = 0; m < ROPE_HPT; m++) {
            const int h = k + m * hg;
            if (h < n_heads) {
                base[m] = t * ldx + (int64_t)h * head_dim + (int64_t)ch * IV_VEC;
                a1[m] = iv_ld16(iv_el(x, base[m]));
                if (!INTERLEAVED) a2[m] = iv_ld16(iv_el(x, base[m] + npairs));
            }
        }
        float cs[NP], sn[NP];
#pragma unroll
        for (int q = 0; q < NP; q++) {
            const float angle = __fmul_rn(rope_pos(pos, inv, ch * NP + q, t), inv.f[ch * NP + q]);
            cs[q] = __fmul_rn(cosf(angle), factor);
            sn[q] = __fmul_rn(sinf(angle), factor);
        }
#pragma unroll
        for (int m = 0; m < ROPE_HPT; m++) {
            if (k + m * hg >= n_heads) continue;
            float f1[8], f2[8];
            iv_unpack8<T>(a1[m], f1);
            if (!INTERLEAVED) {
                iv_unpack8<T>(a2[m], f2);
#pragma unroll
                for (int q = 0; q < 8; q++) {
                    const float x1 = f1[q], x2 = f2[q];
                    f1[q] = __fmaf_rn(x1, cs[q], -__fmul_rn(x2, sn[q]));
                    f2[q] = __fmaf_rn(x2, cs[q], __fmul_rn(x1, sn[q]));
                }
                iv_st16(iv_elw(x, base[m]), iv_pack8<T>(f1));
                iv_st16(iv_elw(x, base[m] + npairs), iv_pack8<T>(f2));
            } else {
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    const float x1 = f1[2 * q], x2 = f1[2 * q + 1];
                    f1[2 * q] = __fmaf_rn(x1, cs[q], -__fmul_rn(x2, sn[q]));
                    f1[2 * q + 1] = __fmaf_rn(x2, cs[q], __fmul_rn(x1, sn[q]));
                }
                iv_st16(iv_elw(x, base[m]), iv_pack8<T>(f1));
            }
        }
    }
}

void iv_cuda_rope(const iv_ops *ops, const iv_rope_args *a)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    const iv_view x = a->x;
    const int npairs = a->rot_dim / 2;
    if (!iv_cuda_view_ok(c, x) || a->rot_dim < 0 || a->rot_dim % 2 || a->rot_dim > a->head_dim || npairs > IV_ROPE_MAX_HALF ||
        a->n_heads < 0 || x.cols < (int64_t)a->n_heads * a->head_dim) {
        iv_cuda_note_invalid(ops, "rope: rot_dim %d of head_dim %d (at most %d pairs), %d heads, x [%lld, %lld]",
                             a->rot_dim, a->head_dim, IV_ROPE_MAX_HALF, a->n_heads, (long long)x.rows,
                             (long long)x.cols);
        return;
    }
    if (npairs == 0 || x.rows == 0 || a->n_heads == 0) return;
    cuda_rope_freqs inv;
    for (int i = 0; i < IV_ROPE_MAX_HALF; i++) {
        inv.f[i] = i < npairs ? a->inv_freq[i] : 0.0f;
        inv.axis[i] = i < npairs && a->freq_section ? a->freq_section[i] : 0;
        if (inv.axis[i] >= IV_ROPE_MAX_AXES) {
            iv_cuda_note_invalid(ops, "rope: frequency %d reads axis %d (at most %d axes)", i, inv.axis[i],
                                 IV_ROPE_MAX_AXES);
            return;
        }
    }
    inv.axis_stride = a->freq_section ? a->pos_axis_stride : 0;
    const float factor = a->attn_factor == 0.0f ? 1.0f : a->attn_factor;
    if (iv_vec_rows_ok(x.data, x.ld, a->head_dim) && (a->interleaved ? a->rot_dim : npairs) % IV_VEC == 0) {
        const int nchunks = (a->interleaved ? a->rot_dim : npairs) / IV_VEC;
        const int hg = (a->n_heads + ROPE_HPT - 1) / ROPE_HPT;
        const int64_t total = x.rows * nchunks * hg;
        const unsigned blocks = iv_vec_blocks(total, ROPE_VEC_THREADS, ROPE_VEC_THREADS, iv_cuda_sm_count(c->device),
                                              IV_VEC_MAX_BLOCKS);
        if (c->bf16 && a->interleaved)
            rope_vec_kernel<__nv_bfloat16, 1><<<blocks, ROPE_VEC_THREADS, 0, c->stream>>>(
                x.data, x.ld, x.rows, a->n_heads, a->head_dim, npairs, a->pos, inv, factor, nchunks, hg);
        else if (c->bf16)
            rope_vec_kernel<__nv_bfloat16, 0><<<blocks, ROPE_VEC_THREADS, 0, c->stream>>>(
                x.data, x.ld, x.rows, a->n_heads, a->head_dim, npairs, a->pos, inv, factor, nchunks, hg);
        else if (a->interleaved)
            rope_vec_kernel<__half, 1><<<blocks, ROPE_VEC_THREADS, 0, c->stream>>>(
                x.data, x.ld, x.rows, a->n_heads, a->head_dim, npairs, a->pos, inv, factor, nchunks, hg);
        else
            rope_vec_kernel<__half, 0><<<blocks, ROPE_VEC_THREADS, 0, c->stream>>>(
                x.data, x.ld, x.rows, a->n_heads, a->head_dim, npairs, a->pos, inv, factor, nchunks, hg);
        IV_CUDA_CHECK_LAUNCH(ops, "rope");
        return;
    }
    const int work = a->n_heads * npairs;
    const int threads = work >= 256 ? 256 : (work + 31) / 32 * 32;
    rope_kernel<<<row_grid(x.rows), threads, 0, c->stream>>>(x.data, x.ld, x.rows, a->n_heads, a->head_dim, npairs,
                                                             a->pos, inv, a->interleaved, factor, c->bf16);
    IV_CUDA_CHECK_LAUNCH(ops, "rope");
}

/* ---- softmax and L2 normalisation ---- */

/* exp(x - max) / sum, multiplying by 1/sum as the CPU does. A row of -inf
 * (or with a NaN) becomes NaN, as in torch. */
static __global__ void __launch_bounds__(1024)
    softmax_kernel(void *x, int64_t ldx, int64_t rows, int64_t cols, int bf16)
{
    __shared__ float red[32];
    for (int64_t t = blockIdx.x; t < rows; t += gridDim.x) {
        const int64_t xo = t * ldx;
        float m = -INFINITY;
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, iv_ld(x, xo + c, bf16));
        m = block_max(m, red);
        float s = 0.0f;
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += expf(iv_ld(x, xo + c, bf16) - m);
        const float inv = 1.0f / block_sum(s, red);
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
            iv_st(x, xo + c, expf(iv_ld(x, xo + c, bf16) - m) * inv, bf16);
    }
}

void iv_cuda_softmax(const iv_ops *ops, iv_view x)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    if (!iv_cuda_view_ok(c, x)) {
        iv_cuda_note_invalid(ops, "softmax: bad view [%lld, %lld] ld %lld", (long long)x.rows, (long long)x.cols,
                             (long long)x.ld);
        return;
    }
    if (x.rows == 0 || x.cols == 0) return;
    softmax_kernel<<<row_grid(x.rows), row_threads(x.cols), 0, c->stream>>>(x.data, x.ld, x.rows, x.cols, c->bf16);
    IV_CUDA_CHECK_LAUNCH(ops, "softmax");
}

/* x / max(||x||, 1e-12), dividing as torch's F.normalize. */
static __global__ void __launch_bounds__(1024)
    l2_normalize_kernel(void *x, int64_t ldx, int64_t rows, int64_t cols, int bf16)
{
    __shared__ float red[32];
    for (int64_t t = blockIdx.x; t < rows; t += gridDim.x) {
        const int64_t xo = t * ldx;
        float ss = 0.0f;
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
            const float v = iv_ld(x, xo + c, bf16);
            ss += v * v;
        }
        const float norm = sqrtf(block_sum(ss, red));
        const float denom = norm > 1e-12f ? norm : 1e-12f;
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) iv_st(x, xo + c, iv_ld(x, xo + c, bf16) / denom, bf16);
    }
}

void iv_cuda_l2_normalize(const iv_ops *ops, iv_view x)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    if (!iv_cuda_view_ok(c, x)) {
        iv_cuda_note_invalid(ops, "l2_normalize: bad view [%lld, %lld] ld %lld", (long long)x.rows, (long long)x.cols,
                             (long long)x.ld);
        return;
    }
    if (x.rows == 0 || x.cols == 0) return;
    l2_normalize_kernel<<<row_grid(x.rows), row_threads(x.cols), 0, c->stream>>>(x.data, x.ld, x.rows, x.cols, c->bf16);
    IV_CUDA_CHECK_LAUNCH(ops, "l2_normalize");
}

/* ---- pooling ---- */

/* A block pools POOL_COLS columns of one sequence: POOL_LANES lanes of
 * threads take every POOL_LANES-th kept row, then lane 0 combines them. */
#define POOL_COLS 32
#define POOL_LANES 8

/* heads/pooling.c's rules: skip[s] leading rows left out (a skip that
 * would leave nothing counts as 0); CLS the first row kept, LAST the last
 * row; MEAN sums in float then divides by n (sqrt(n)); WEIGHTED_MEAN
 * weighs row i of the sequence by i + 1; NONE gives zeros. An empty
 * sequence pools to NaN. */
static __global__ void pool_kernel(void *out, int64_t ldo, const void *x, int64_t ldx, int64_t H, const int32_t *cu,
                                   const int32_t *skip, int mode, int bf16)
{
    __shared__ float part[POOL_LANES][POOL_COLS + 1];
    const int s = blockIdx.x, tx = threadIdx.x, ty = threadIdx.y;
    const int64_t c = (int64_t)blockIdx.y * POOL_COLS + tx;
    const int active = c < H;
    const int start = cu[s], len = cu[s + 1] - start;
    int sk = skip ? skip[s] : 0;
    if (sk >= len || sk < 0) sk = 0;
    const int n = len - sk;
    const int64_t first = (int64_t)start + sk;
    const int64_t o = (int64_t)s * ldo + c;
    /* Block-uniform exits: no thread is left waiting at the barrier below. */
    if (mode == IV_POOL_NONE) { /* as the CPU: no pooling rule pools to zeros */
        if (ty == 0 && active) iv_st(out, o, 0.0f, bf16);
        return;
    }
    if (n <= 0) {
        if (ty == 0 && active) iv_st(out, o, NAN, bf16);
        return;
    }
    if (mode == IV_POOL_CLS || mode == IV_POOL_LAST) {
        const int64_t row = mode == IV_POOL_CLS ? first : (int64_t)start + len - 1;
        if (ty == 0 && active) iv_st(out, o, iv_ld(x, row * ldx + c, bf16), bf16);
        return;
    }
    float acc = 0.0f;
    if (active) {
        for (int i = ty; i < n; i += POOL_LANES) {
            const float v = iv_ld(x, (first + i) * ldx + c, bf16);
            if (mode == IV_POOL_MAX)
                acc = i == ty || v > acc ? v : acc; /* starts from the lane's first row */
            else if (mode == IV_POOL_WEIGHTED_MEAN)
                acc += (float)(i + sk + 1) * v;
            else
                acc += v;
        }
    }
    part[ty][tx] = acc;
    __syncthreads();
    if (ty != 0 || !active) return;
    float r = part[0][tx];
    for (int k = 1; k < POOL_LANES && k < n; k++) {
        const float v = part[k][tx];
        if (mode == IV_POOL_MAX)
            r = v > r ? v : r;
        else
            r += v;
    }
    if (mode == IV_POOL_MEAN)
        r = r / (float)n;
    else if (mode == IV_POOL_MEAN_SQRT_LEN)
        r = r / sqrtf((float)n);
    else if (mode == IV_POOL_WEIGHTED_MEAN) {
        /* Sum of the weights sk+1 .. sk+n: exact (the CPU's float sum is too while below 2^24). */
        const double wsum = (double)n * sk + (double)n * (n + 1) / 2.0;
        r = r / (float)wsum;
    }
    iv_st(out, o, r, bf16);
}

void iv_cuda_pool(const iv_ops *ops, const iv_pool_args *a)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    const int64_t H = a->x.cols;
    const int mode_ok = a->mode == IV_POOL_NONE || a->mode == IV_POOL_CLS || a->mode == IV_POOL_MEAN ||
                        a->mode == IV_POOL_MAX || a->mode == IV_POOL_LAST || a->mode == IV_POOL_MEAN_SQRT_LEN ||
                        a->mode == IV_POOL_WEIGHTED_MEAN;
    if (!iv_cuda_view_ok(c, a->x) || !iv_cuda_view_ok(c, a->out) || a->out.cols != H || a->out.rows != a->n_seqs || a->n_seqs < 0 ||
        !mode_ok || (H + POOL_COLS - 1) / POOL_COLS > 65535) {
        iv_cuda_note_invalid(ops, "pool: mode %d, x [%lld, %lld] into out [%lld, %lld] for %d sequences", (int)a->mode,
                             (long long)a->x.rows, (long long)H, (long long)a->out.rows, (long long)a->out.cols,
                             a->n_seqs);
        return;
    }
    if (a->n_seqs == 0 || H == 0) return;
    const dim3 grid((unsigned)a->n_seqs, (unsigned)((H + POOL_COLS - 1) / POOL_COLS)), block(POOL_COLS, POOL_LANES);
    pool_kernel<<<grid, block, 0, c->stream>>>(a->out.data, a->out.ld, a->x.data, a->x.ld, H, a->cu_seqlens_dev,
                                               a->skip, (int)a->mode, c->bf16);
    IV_CUDA_CHECK_LAUNCH(ops, "pool");
}

/* ---- weight conversion ---- */

static __global__ void to_act_kernel(void *dst, const void *src, int src_dt, int64_t n, int bf16)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float v = src_dt == IV_F32 ? ((const float *)src)[i] : iv_ld(src, i, src_dt == IV_BF16);
        iv_st(dst, i, v, bf16);
    }
}

void iv_cuda_to_act(const iv_ops *ops, void *dst, const void *src, iv_dtype src_dt, int64_t n)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    if (n <= 0) return;
    int64_t blocks = (n + 255) / 256;
    if (blocks > 4096) blocks = 4096;
    to_act_kernel<<<(unsigned)blocks, 256, 0, c->stream>>>(dst, src, (int)src_dt, n, c->bf16);
    IV_CUDA_CHECK_LAUNCH(ops, "prepare_weight (convert)");
}
