/* 16-byte vector access for the CUDA table's memory-bound kernels
 * (cuda_kernels.cu, the linear epilogue in cuda_linear.cu).
 *
 * A vector is 8 consecutive 16-bit elements (BF16 or FP16) moved with one
 * 16-byte load or store. A view takes the vector kernels when its data
 * pointer is 16-byte aligned and its ld and cols are multiples of 8: every
 * row then starts aligned and splits into whole vectors. Other views take
 * the scalar kernels, which stay as they were. Both compute each element
 * with the same FP32 operations (written with __fadd_rn / __fmul_rn /
 * __fmaf_rn where the compiler could otherwise contract them differently)
 * and round once at the store, so they give the same bits. */
#ifndef IV_OPS_CUDA_CUDA_VEC_H
#define IV_OPS_CUDA_CUDA_VEC_H

#include "ops/cuda/cuda_internal.h"

#define IV_VEC 8 /* elements per 16-byte vector */
/* Most blocks a vector kernel is launched with; grid-stride loops do the rest. */
#define IV_VEC_MAX_BLOCKS ((int64_t)1 << 24)

/* 0: every op takes its scalar kernels. Only tests that include the .cu
 * files set it, to compare the two paths (tests/gpu/kernels_check.cu,
 * tests/gpu/emu/kernels_emu_check.cpp). */
static int iv_cuda_vec_kernels = 1;

static inline int iv_vec_ptr_ok(const void *p) { return ((uintptr_t)p & 15u) == 0; }
/* A 16-bit view (or a pointer with a row stride and width) the vector kernels can take. */
static inline int iv_vec_rows_ok(const void *p, int64_t ld, int64_t cols)
{
    return iv_cuda_vec_kernels && iv_vec_ptr_ok(p) && ld % IV_VEC == 0 && cols % IV_VEC == 0 &&
           cols / IV_VEC <= 0xffffffffLL;
}
static inline int iv_vec_view_ok(iv_view v) { return iv_vec_rows_ok(v.data, v.ld, v.cols); }

/* Multiprocessors of a device, asked once per device. */
static inline int iv_cuda_sm_count(int device)
{
    static int cache[64];
    int n = device >= 0 && device < 64 ? __atomic_load_n(&cache[device], __ATOMIC_RELAXED) : 0;
    if (n > 0) return n;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || n <= 0) n = 1;
    if (device >= 0 && device < 64) __atomic_store_n(&cache[device], n, __ATOMIC_RELAXED);
    return n;
}

/* Blocks for a grid-stride loop over `items` work items, `per_block` per
 * block and step: enough for every item in one step when that is few, at
 * least two blocks per multiprocessor while items last, and at most `cap`. */
static inline unsigned iv_vec_blocks(int64_t items, int64_t per_block, int64_t min_per_block, int sms, int64_t cap)
{
    int64_t b = (items + per_block - 1) / per_block;
    const int64_t fill = 2 * (int64_t)sms;
    if (b < fill) {
        /* Small jobs: fewer items per block so that more multiprocessors share them. */
        int64_t b2 = (items + min_per_block - 1) / min_per_block;
        b = b2 < fill ? b2 : fill;
    }
    if (b > cap) b = cap;
    return (unsigned)(b < 1 ? 1 : b);
}

/* ---- device side ---- */

static __device__ __forceinline__ uint4 iv_ld16(const void *p) { return *(const uint4 *)p; }
static __device__ __forceinline__ void iv_st16(void *p, uint4 v) { *(uint4 *)p = v; }

/* Address of element i of a 16-bit array. */
static __device__ __forceinline__ const char *iv_el(const void *p, int64_t i) { return (const char *)p + 2 * i; }
static __device__ __forceinline__ char *iv_elw(void *p, int64_t i) { return (char *)p + 2 * i; }

/* 16-bit storage <-> float, exactly as iv_ld / iv_st. */
template <typename T> static __device__ __forceinline__ float iv_h2f(uint32_t h);
template <> __device__ __forceinline__ float iv_h2f<__nv_bfloat16>(uint32_t h)
{
    return __bfloat162float(__ushort_as_bfloat16((unsigned short)h));
}
template <> __device__ __forceinline__ float iv_h2f<__half>(uint32_t h)
{
    return __half2float(__ushort_as_half((unsigned short)h));
}
template <typename T> static __device__ __forceinline__ uint32_t iv_f2h(float v);
template <> __device__ __forceinline__ uint32_t iv_f2h<__nv_bfloat16>(float v)
{
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}
template <> __device__ __forceinline__ uint32_t iv_f2h<__half>(float v) { return __half_as_ushort(__float2half_rn(v)); }

/* The 8 elements of a vector as floats, element 0 first (the low half of .x). */
template <typename T> static __device__ __forceinline__ void iv_unpack8(uint4 u, float (&f)[8])
{
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int k = 0; k < 4; k++) {
        f[2 * k] = iv_h2f<T>(w[k] & 0xffffu);
        f[2 * k + 1] = iv_h2f<T>(w[k] >> 16);
    }
}
/* 8 floats rounded to nearest even into a vector. */
template <typename T> static __device__ __forceinline__ uint4 iv_pack8(const float (&f)[8])
{
    uint4 u;
    u.x = iv_f2h<T>(f[0]) | iv_f2h<T>(f[1]) << 16;
    u.y = iv_f2h<T>(f[2]) | iv_f2h<T>(f[3]) << 16;
    u.z = iv_f2h<T>(f[4]) | iv_f2h<T>(f[5]) << 16;
    u.w = iv_f2h<T>(f[6]) | iv_f2h<T>(f[7]) << 16;
    return u;
}

/* q = a / b, r = a - q b for a >= 0, b > 0 (32-bit division while a fits). */
static __device__ __forceinline__ void iv_divmod(int64_t a, int64_t b, int64_t &q, int64_t &r)
{
    if (((uint64_t)a >> 32) == 0 && ((uint64_t)b >> 32) == 0) {
        const uint32_t q32 = (uint32_t)a / (uint32_t)b;
        q = q32;
        r = a - (int64_t)q32 * b;
    } else {
        q = a / b;
        r = a - q * b;
    }
}


/* ---- elementwise vector kernels ---- */

/* Resident blocks of `threads` per multiprocessor for kernel; *cache keeps
 * the answer (one per instantiation: every device of a process is assumed
 * to be of one kind). */
static inline int iv_cuda_occupancy(const void *kernel, int threads, int *cache)
{
    int n = __atomic_load_n(cache, __ATOMIC_RELAXED);
    if (n > 0) return n;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, 0) != cudaSuccess || n <= 0) n = 1;
    __atomic_store_n(cache, n, __ATOMIC_RELAXED);
    return n;
}

/* Work item i is vector i % nv of row i / nv (nv = cols / 8). Each thread
 * takes IV_EW_VPT items a grid apart per step of a grid-stride loop (the
 * grid is at most one wave), and loads the next step's items before it
 * computes and stores this step's, so loads stay in flight while it
 * computes. Op has a struct In (an item's loaded inputs and where its
 * output goes) and load(In &, t, c), store(const In &). y may be x: a
 * thread stores only elements it has read, and no other thread touches
 * them. */
#define IV_EW_THREADS 256
#define IV_EW_VPT 2

template <class Op>
static __device__ __forceinline__ void iv_ew_load(const Op &op, typename Op::In (&in)[IV_EW_VPT], int64_t i0,
                                                  int64_t step, int64_t nv, int64_t total)
{
#pragma unroll
    for (int k = 0; k < IV_EW_VPT; k++) {
        const int64_t i = i0 + k * step;
        if (i < total) {
            int64_t t, c;
            iv_divmod(i, nv, t, c);
            op.load(in[k], t, c * IV_VEC);
        }
    }
}

template <class Op> static __global__ void __launch_bounds__(IV_EW_THREADS) iv_ew_kernel(Op op, int64_t nv, int64_t total)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    int64_t i0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    typename Op::In cur[IV_EW_VPT], nxt[IV_EW_VPT];
    iv_ew_load(op, cur, i0, step, nv, total);
    for (; i0 < total; i0 += step * IV_EW_VPT) {
        iv_ew_load(op, nxt, i0 + step * IV_EW_VPT, step, nv, total);
#pragma unroll
        for (int k = 0; k < IV_EW_VPT; k++)
            if (i0 + k * step < total) op.store(cur[k]);
#pragma unroll
        for (int k = 0; k < IV_EW_VPT; k++) cur[k] = nxt[k];
    }
}

/* Queues iv_ew_kernel<Op> over `total` items of rows of nv vectors. */
template <class Op> static void iv_ew_launch(int device, cudaStream_t stream, const Op &op, int64_t nv, int64_t total)
{
    static int occ;
    const int sms = iv_cuda_sm_count(device);
    int64_t wave = (int64_t)sms * iv_cuda_occupancy((const void *)iv_ew_kernel<Op>, IV_EW_THREADS, &occ);
    if (wave > IV_VEC_MAX_BLOCKS) wave = IV_VEC_MAX_BLOCKS;
    const unsigned blocks = iv_vec_blocks(total, (int64_t)IV_EW_THREADS * IV_EW_VPT, IV_EW_THREADS, sms, wave);
    iv_ew_kernel<Op><<<blocks, IV_EW_THREADS, 0, stream>>>(op, nv, total);
}

/* The same with the activation as a template argument of Op (OpT<T, act>),
 * Op's members from args in order. */
template <typename T, template <typename, int> class OpT, typename... A>
static void iv_ew_launch_act(int device, cudaStream_t stream, int act, int64_t nv, int64_t total, A... args)
{
    switch (act) {
    case IV_ACT_GELU: iv_ew_launch(device, stream, OpT<T, IV_ACT_GELU>{args...}, nv, total); break;
    case IV_ACT_GELU_TANH: iv_ew_launch(device, stream, OpT<T, IV_ACT_GELU_TANH>{args...}, nv, total); break;
    case IV_ACT_SILU: iv_ew_launch(device, stream, OpT<T, IV_ACT_SILU>{args...}, nv, total); break;
    case IV_ACT_RELU: iv_ew_launch(device, stream, OpT<T, IV_ACT_RELU>{args...}, nv, total); break;
    case IV_ACT_TANH: iv_ew_launch(device, stream, OpT<T, IV_ACT_TANH>{args...}, nv, total); break;
    case IV_ACT_SIGMOID: iv_ew_launch(device, stream, OpT<T, IV_ACT_SIGMOID>{args...}, nv, total); break;
    default: iv_ew_launch(device, stream, OpT<T, IV_ACT_NONE>{args...}, nv, total); break; /* iv_act_f's default */
    }
}

#endif
