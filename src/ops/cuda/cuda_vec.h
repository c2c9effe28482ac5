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

#endif
