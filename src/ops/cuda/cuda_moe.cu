/* The CUDA kernels of the mixture-of-experts ops (ops.h): routing, the
 * gather of one expert's rows and their weighted scatter back. Each mirrors
 * ops/cpu/moe.c: the same choices and tie rule, the same order of additions
 * (explicit _rn intrinsics, so nvcc fuses no multiply-add the CPU does not),
 * one rounding where a value is stored.
 *
 * Routing is two kernels and no atomics, so its output is deterministic:
 * one warp per token computes the softmax into shared memory and lane 0
 * picks the top k exactly as the CPU loop does; then one block per expert
 * counts the slots of lower experts (its offset) and its own, and compacts
 * its slots in index order with warp ballots (the CPU's stable counting
 * sort). */
#include <math.h>

#include "ops/cuda/cuda_internal.h"

#define ROUTE_MAX_EXPERTS 1024
#define ROUTE_MAX_TOP_K 32
#define ROUTE_WARPS 4    /* tokens per block of the top-k kernel */
#define SORT_THREADS 256 /* a multiple of 32 */

static __device__ __forceinline__ float warp_sum_f(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ float warp_max_f(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Softmax of each token's logits in FP32, then its top k: largest first,
 * the lower index on ties, a NaN handled as the CPU's comparison does. */
static __global__ void __launch_bounds__(ROUTE_WARPS * 32)
    route_top_k_kernel(const void *logits, int64_t ld, int64_t T, int E, int k, int renormalize, int32_t *choice,
                       float *weight, int bf16)
{
    __shared__ float probs[ROUTE_WARPS][ROUTE_MAX_EXPERTS];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    float *p = probs[wid];
    for (int64_t t = (int64_t)blockIdx.x * ROUTE_WARPS + wid; t < T; t += (int64_t)gridDim.x * ROUTE_WARPS) {
        float m = -INFINITY;
        for (int e = lane; e < E; e += 32) {
            p[e] = iv_ld(logits, t * ld + e, bf16);
            m = fmaxf(m, p[e]);
        }
        m = warp_max_f(m);
        float s = 0.0f;
        for (int e = lane; e < E; e += 32) {
            p[e] = expf(p[e] - m);
            s += p[e];
        }
        const float inv = 1.0f / warp_sum_f(s);
        for (int e = lane; e < E; e += 32) p[e] *= inv;
        __syncwarp();
        if (lane == 0) {
            int sel[ROUTE_MAX_TOP_K];
            float w[ROUTE_MAX_TOP_K];
            for (int j = 0; j < k; j++) {
                int best = -1;
                for (int e = 0; e < E; e++) {
                    int taken = 0;
                    for (int i = 0; i < j; i++) taken |= sel[i] == e;
                    if (!taken && (best < 0 || p[e] > p[best])) best = e;
                }
                sel[j] = best;
                w[j] = p[best];
            }
            float sum = 0.0f;
            if (renormalize)
                for (int j = 0; j < k; j++) sum = __fadd_rn(sum, w[j]);
            for (int j = 0; j < k; j++) {
                choice[t * k + j] = sel[j];
                weight[t * k + j] = renormalize ? __fdiv_rn(w[j], sum) : w[j];
            }
        }
        __syncwarp(); /* p is rewritten for the warp's next token */
    }
}

static __device__ int block_sum_i(int v, int *red)
{
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if (lane == 0) red[wid] = v;
    __syncthreads();
    int r = 0;
    for (int w = 0; w < nw; w++) r += red[w];
    return r;
}

/* Block e: offsets[e] = slots of lower experts, then expert e's slots in
 * index order from there (offsets[E] from the last block). */
static __global__ void __launch_bounds__(SORT_THREADS)
    route_sort_kernel(const int32_t *choice, int64_t n_slots, int E, int32_t *offsets, int32_t *slots)
{
    __shared__ int red[32];
    __shared__ int warp_count[SORT_THREADS / 32];
    const int e = blockIdx.x, lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    int lower = 0, mine = 0;
    for (int64_t i = threadIdx.x; i < n_slots; i += blockDim.x) {
        const int32_t ch = choice[i];
        lower += ch < e;
        mine += ch == e;
    }
    int base = block_sum_i(lower, red);
    mine = block_sum_i(mine, red);
    if (threadIdx.x == 0) {
        offsets[e] = base;
        if (e == E - 1) offsets[E] = base + mine;
    }
    for (int64_t i0 = 0; i0 < n_slots; i0 += blockDim.x) {
        const int64_t i = i0 + threadIdx.x;
        const int flag = i < n_slots && choice[i] == e;
        const unsigned ballot = __ballot_sync(0xffffffffu, flag);
        if (lane == 0) warp_count[wid] = __popc(ballot);
        __syncthreads();
        int before = __popc(ballot & ((1u << lane) - 1u)), total = 0;
        for (int w = 0; w < (int)(blockDim.x >> 5); w++) {
            if (w < wid) before += warp_count[w];
            total += warp_count[w];
        }
        if (flag) slots[base + before] = (int32_t)i;
        base += total;
        __syncthreads(); /* warp_count is rewritten for the next chunk */
    }
}

void iv_cuda_moe_route(const iv_ops *ops, const iv_moe_route_args *a)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    const iv_view x = a->logits;
    const int64_t T = x.rows, E = x.cols;
    if (x.dtype != c->dt || x.ld < x.cols || E < 1 || E > ROUTE_MAX_EXPERTS || a->top_k < 1 || a->top_k > E ||
        a->top_k > ROUTE_MAX_TOP_K || T * a->top_k > INT32_MAX) {
        iv_cuda_note_invalid(ops, "moe_route: %lld tokens, %lld experts (at most %d), top_k %d (at most %d)",
                             (long long)T, (long long)E, ROUTE_MAX_EXPERTS, a->top_k, ROUTE_MAX_TOP_K);
        return;
    }
    if (T > 0) {
        int64_t blocks = (T + ROUTE_WARPS - 1) / ROUTE_WARPS;
        if (blocks > (1 << 20)) blocks = 1 << 20;
        route_top_k_kernel<<<(unsigned)blocks, ROUTE_WARPS * 32, 0, c->stream>>>(
            x.data, x.ld, T, (int)E, a->top_k, a->renormalize, a->choice, a->weight, c->bf16);
        IV_CUDA_CHECK_LAUNCH(ops, "moe_route (top k)");
    }
    route_sort_kernel<<<(unsigned)E, SORT_THREADS, 0, c->stream>>>(a->choice, T * a->top_k, (int)E, a->offsets,
                                                                   a->slots);
    IV_CUDA_CHECK_LAUNCH(ops, "moe_route (sort)");
}

static __global__ void moe_gather_kernel(void *y, int64_t ldy, const void *x, int64_t ldx, const int32_t *slots,
                                         int top_k, int64_t rows, int64_t cols, int bf16)
{
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y)
        iv_st(y, r * ldy + c, iv_ld(x, (int64_t)(slots[r] / top_k) * ldx + c, bf16), bf16);
}

void iv_cuda_moe_gather(const iv_ops *ops, iv_view y, iv_view x, const int32_t *slots, int top_k)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    if (y.dtype != c->dt || x.dtype != c->dt || y.ld < y.cols || x.ld < x.cols || y.cols != x.cols || top_k < 1) {
        iv_cuda_note_invalid(ops, "moe_gather: y [%lld, %lld] from x [%lld, %lld], top_k %d", (long long)y.rows,
                             (long long)y.cols, (long long)x.rows, (long long)x.cols, top_k);
        return;
    }
    if (y.rows == 0 || y.cols == 0) return;
    moe_gather_kernel<<<iv_cuda_ew_grid(y.rows, y.cols), IV_CUDA_EW_THREADS, 0, c->stream>>>(
        y.data, y.ld, x.data, x.ld, slots, top_k, y.rows, y.cols, c->bf16);
    IV_CUDA_CHECK_LAUNCH(ops, "moe_gather");
}

/* out[t] = (first ? 0 : out[t]) + y[r] * w, then + bias, + residual after
 * the token's last expert: iv_moe_scatter_args, in the CPU's order. */
static __global__ void moe_scatter_kernel(void *out, int64_t ldo, const void *y, int64_t ldy, const int32_t *slots,
                                          const float *weight, const int32_t *choice, int top_k, int expert,
                                          const void *bias, const void *residual, int64_t rows, int64_t cols, int bf16)
{
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const int32_t s = slots[r];
        const int64_t t = s / top_k;
        const int32_t *ch = choice + t * top_k;
        int32_t lo = ch[0], hi = ch[0];
        for (int j = 1; j < top_k; j++) {
            lo = min(lo, ch[j]);
            hi = max(hi, ch[j]);
        }
        const float prod = __fmul_rn(iv_ld(y, r * ldy + c, bf16), weight[s]);
        const int64_t o = t * ldo + c;
        float v = __fadd_rn(expert == lo ? 0.0f : iv_ld(out, o, bf16), prod);
        if (expert == hi) {
            if (bias) v = __fadd_rn(v, iv_ld(bias, c, bf16));
            if (residual) v = __fadd_rn(v, iv_ld(residual, o, bf16));
        }
        iv_st(out, o, v, bf16);
    }
}

void iv_cuda_moe_scatter(const iv_ops *ops, const iv_moe_scatter_args *a)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    const iv_view out = a->out, y = a->y;
    const iv_tensor *b = a->bias;
    if (out.dtype != c->dt || y.dtype != c->dt || out.ld < out.cols || y.ld < y.cols || y.cols != out.cols ||
        a->top_k < 1 || (b && (b->device != IV_CUDA || b->dtype != c->dt || iv_tensor_numel(b) != out.cols))) {
        iv_cuda_note_invalid(ops, "moe_scatter: y [%lld, %lld] into out [%lld, %lld], top_k %d, bias %lld",
                             (long long)y.rows, (long long)y.cols, (long long)out.rows, (long long)out.cols, a->top_k,
                             b ? (long long)iv_tensor_numel(b) : -1LL);
        return;
    }
    if (y.rows == 0 || y.cols == 0) return;
    moe_scatter_kernel<<<iv_cuda_ew_grid(y.rows, y.cols), IV_CUDA_EW_THREADS, 0, c->stream>>>(
        out.data, out.ld, y.data, y.ld, a->slots, a->weight, a->choice, a->top_k, a->expert, b ? b->data : NULL,
        a->residual, y.rows, y.cols, c->bf16);
    IV_CUDA_CHECK_LAUNCH(ops, "moe_scatter");
}
