/* Attention over packed sequences on an NVIDIA GPU (iv_attn_args in
 * ops/ops.h), FlashAttention-2 style, BF16 or FP16 storage, FP32 maths.
 *
 * Semantics are those of the CPU reference (ops/cpu/attention.c): for query
 * i and key j of one sequence (local indices)
 *   visible(i, j) = (!causal || j <= i) && (wl < 0 || i - j <= wl)
 *                   && (wr < 0 || j - i <= wr) && key_mask[j] != 0
 *   s(i, j) = softcap(scale * q_i . k_j) + bias[h, i, j] - slope_h * |i - j|
 *   out_i   = sum_j softmax_j(s(i, j)) v_j  over the visible j,
 * and a query that sees no key gets a zero row.
 *
 * Grid: one CTA per (query tile of BM = 128 rows, head, sequence); tiles
 * past a sequence's end exit at once, and the x index is reversed so the
 * heaviest causal tiles start first. Eight warps own 16 query rows each.
 * The CTA streams the keys its rows can see (the union of their causal and
 * window ranges, exact lengths: rows past the sequence end are zero-filled,
 * never read) through shared memory in tiles of BN keys:
 *   S = Q K^T     mma.sync m16n8k16 (bf16/f16 in, FP32 accumulate); Q
 *                 fragments from registers (padded head dim <= 64) or
 *                 re-read from shared memory per tile (larger);
 *   masks, extras, online softmax on the S fragments in registers (FP32,
 *                 base-2 exponent, running max and sum per row);
 *   O += P V      P repacked from the S accumulators into A fragments
 *                 (no shared-memory round trip), V via ldmatrix.trans.
 * K and V have one buffer each, filled by cp.async so that loads overlap
 * the maths: V(t) loads during S(t), K(t+1) during softmax and P V(t)
 * (FlashAttention-2's schedule; one buffer each keeps shared memory low
 * enough for two CTAs per SM at head dim <= 128).
 * A warp classifies each key tile against its own rows: not visible at all
 * (skipped: causal and window diagonals), fully visible (no per-element
 * mask) or partial (masked per element).
 *
 * Kernels are templated on the element type, the padded head dim DP
 * (32, 64, 96, 128, 192, 256; dims in between are zero-padded in shared
 * memory), VEC (16-byte cp.async loads: every view 16-byte aligned, ld and
 * head_dim multiples of 8; otherwise element-wise loads and stores, for
 * odd head dims and oddly strided views) and EXTRAS (key_mask, ALiBi, bias
 * or softcap present: per-element score transform and mask on every
 * tile). The fast paths are VEC without EXTRAS at head dim 32/64/128. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "ops/cuda/cuda_internal.h"

namespace {

constexpr int ATT_WARPS = 8;
constexpr int ATT_THREADS = ATT_WARPS * 32;
constexpr int ATT_BM = ATT_WARPS * 16; /* query rows per CTA */
constexpr int ATT_MAX_HEADS = 256;     /* ALiBi slopes travel by value */
constexpr int ATT_MAX_DIM = 256;
constexpr int ATT_MAX_GRID_Z = 65535;
constexpr float ATT_LOG2E = 1.4426950408889634f;

/* Per padded head dim: BN keys per tile, whether Q fragments stay in
 * registers for the whole loop, and the CTAs per SM __launch_bounds__ asks
 * for (2 caps registers at 128 per thread). Register use per thread is
 * about O (DP/2) + S (BN/2) + Q (DP/4 when kept) + ~30. */
template <int DP> struct AttnCfg;
template <> struct AttnCfg<32> {
    static constexpr int BN = 64;
    static constexpr bool Q_REGS = true;
    static constexpr int MIN_CTAS = 2;
};
template <> struct AttnCfg<64> {
    static constexpr int BN = 64;
    static constexpr bool Q_REGS = true;
    static constexpr int MIN_CTAS = 2;
};
template <> struct AttnCfg<96> {
    static constexpr int BN = 32;
    static constexpr bool Q_REGS = false;
    static constexpr int MIN_CTAS = 2;
};
template <> struct AttnCfg<128> {
    static constexpr int BN = 32;
    static constexpr bool Q_REGS = false;
    static constexpr int MIN_CTAS = 2;
};
template <> struct AttnCfg<192> {
    static constexpr int BN = 64;
    static constexpr bool Q_REGS = false;
    static constexpr int MIN_CTAS = 1;
};
template <> struct AttnCfg<256> {
    static constexpr int BN = 64;
    static constexpr bool Q_REGS = false;
    static constexpr int MIN_CTAS = 1;
};

template <int DP> constexpr size_t attn_smem_bytes()
{
    return (size_t)(ATT_BM + 2 * AttnCfg<DP>::BN) * (DP + 8) * sizeof(uint16_t);
}

struct AttnParams {
    const uint16_t *q, *k, *v;
    uint16_t *o;
    int64_t q_ld, k_ld, v_ld, o_ld;
    const int32_t *cu_seqlens; /* dev */
    const uint8_t *key_mask;   /* dev or NULL */
    const float *bias;         /* dev or NULL */
    const int64_t *bias_off;   /* dev, with bias */
    int seq0;                  /* first sequence of this launch (grid z chunks) */
    int group;                 /* n_heads / n_kv_heads */
    int d;                     /* head_dim */
    int causal, wl, wr;        /* windows clamped to the longest sequence */
    float scale, scale_log2, softcap, inv_softcap; /* scale_log2 > 0 in the plain kernels */
    int softcap_after_bias;    /* the cap takes scale q.k + bias (Gemma4's audio attention) */
    int has_alibi;
    float slopes[ATT_MAX_HEADS];
};

/* ---- PTX wrappers ---- */

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* 16 bytes global -> shared, asynchronously; zero-filled when !valid (no
 * global read then; src must still be a mapped address). */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, bool valid)
{
    const int n = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

template <typename T> struct Elem;
template <> struct Elem<__nv_bfloat16> {
    static __device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
    {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
            "{%8, %9}, {%0, %1, %2, %3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
    /* lo in the low half: element order of the mma fragments. */
    static __device__ __forceinline__ uint32_t pack(float lo, float hi)
    {
        const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
        return (uint32_t)__bfloat16_as_ushort(v.x) | ((uint32_t)__bfloat16_as_ushort(v.y) << 16);
    }
    static __device__ __forceinline__ uint16_t from_float(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
};
template <> struct Elem<__half> {
    static __device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
    {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
            "{%8, %9}, {%0, %1, %2, %3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
    static __device__ __forceinline__ uint32_t pack(float lo, float hi)
    {
        const __half2 v = __floats2half2_rn(lo, hi);
        return (uint32_t)__half_as_ushort(v.x) | ((uint32_t)__half_as_ushort(v.y) << 16);
    }
    static __device__ __forceinline__ uint16_t from_float(float x) { return __half_as_ushort(__float2half_rn(x)); }
};

/* 2^x; 2^-inf = 0, which is how masked scores drop out. */
__device__ __forceinline__ float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* ROWS x DP tile of shared memory (rows DP + 8 apart: the 16-byte skew
 * makes every ldmatrix phase conflict-free) from `rows_valid` global rows
 * ld apart starting at g, columns [0, d); zeros elsewhere. `safe` is a
 * mapped address for the zero-filling copies. A thread always copies the
 * same column chunk of rows r0, r0 + RSTEP, ...: its loop-invariant state
 * is one offset and one stride, not an address per chunk (the compiler
 * hoists those out of the key loop, into registers the maths needs). */
template <int DP, int ROWS, bool VEC>
__device__ __forceinline__ void load_tile(uint16_t *s, const uint16_t *g, int64_t ld, int rows_valid, int d,
                                          const uint16_t *safe)
{
    constexpr int SROW = DP + 8, CPR = DP / 8, RSTEP = ATT_THREADS / CPR, ITERS = (ROWS + RSTEP - 1) / RSTEP;
    const int r0 = threadIdx.x / CPR, col = (threadIdx.x % CPR) * 8;
    if (r0 >= RSTEP) return; /* the leftover threads when CPR does not divide ATT_THREADS */
    const uint16_t *src = g + (int64_t)r0 * ld + col;
    uint16_t *dst = s + r0 * SROW + col;
    const int rows_left = rows_valid - r0;
    const bool col_ok = col < d;
#pragma unroll
    for (int it = 0; it < ITERS; it++) {
        if (ROWS % RSTEP != 0 && r0 + it * RSTEP >= ROWS) break;
        const bool row_ok = it * RSTEP < rows_left;
        if (VEC) {
            const bool valid = row_ok && col_ok;
            cp_async16(smem_u32(dst + it * RSTEP * SROW), valid ? src + it * RSTEP * ld : safe, valid);
        } else {
            uint16_t x[8];
#pragma unroll
            for (int e = 0; e < 8; e++) x[e] = row_ok && col + e < d ? src[it * RSTEP * ld + e] : 0;
            *(uint4 *)(dst + it * RSTEP * SROW) =
                make_uint4(x[0] | (uint32_t)x[1] << 16, x[2] | (uint32_t)x[3] << 16, x[4] | (uint32_t)x[5] << 16,
                           x[6] | (uint32_t)x[7] << 16);
        }
    }
}

/* How the key tile [j0, j0 + bn) meets query rows [a, b] (b < len) by
 * geometry: 0 nothing visible, 1 partly, 2 every pair visible. */
__device__ __forceinline__ int tile_class(const AttnParams &p, int a, int b, int j0, int bn, int len)
{
    const int je = min(j0 + bn, len) - 1;
    if ((p.causal && j0 > b) || (p.wl >= 0 && a - je > p.wl) || (p.wr >= 0 && j0 - b > p.wr)) return 0;
    const int jf = j0 + bn - 1;
    const bool full = jf < len && (!p.causal || jf <= a) && (p.wl < 0 || b - j0 <= p.wl) &&
                      (p.wr < 0 || jf - a <= p.wr);
    return full ? 2 : 1;
}

template <typename T, int DP, bool VEC, bool EXTRAS>
__global__ void __launch_bounds__(ATT_THREADS, AttnCfg<DP>::MIN_CTAS) attn_fwd(const __grid_constant__ AttnParams p)
{
    constexpr int BN = AttnCfg<DP>::BN;
    constexpr bool Q_REGS = AttnCfg<DP>::Q_REGS;
    constexpr int SROW = DP + 8;
    constexpr int NS = BN / 8;  /* n8 tiles of S per warp */
    constexpr int NO = DP / 8;  /* n8 tiles of O per warp */
    constexpr int KQ = DP / 16; /* k16 steps of Q K^T */
    constexpr int KP = BN / 16; /* k16 steps of P V */
    static_assert(DP % 32 == 0 && BN % 16 == 0, "tile shapes");

    extern __shared__ __align__(16) unsigned char attn_smem[];
    uint16_t *sQ = (uint16_t *)attn_smem;
    uint16_t *sK = sQ + ATT_BM * SROW;
    uint16_t *sV = sK + BN * SROW;

    const int s = p.seq0 + (int)blockIdx.z, h = (int)blockIdx.y;
    const int seq_base = p.cu_seqlens[s], len = p.cu_seqlens[s + 1] - seq_base;
    const int i0 = (int)(gridDim.x - 1 - blockIdx.x) * ATT_BM;
    if (i0 >= len) return;
    const int i_last = min(i0 + ATT_BM, len) - 1;

    /* Keys any row of the CTA may see; never empty by geometry (i sees i),
     * but a query row can still end up with no key through key_mask. */
    int jlo = 0, jhi = len - 1;
    if (p.wl >= 0) jlo = max(0, i0 - p.wl);
    if (p.causal) jhi = min(jhi, i_last);
    if (p.wr >= 0) jhi = min(jhi, i_last + p.wr);
    const int n_tiles = jhi >= jlo ? (jhi - jlo) / BN + 1 : 0;

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t4 = lane & 3; /* mma fragment row and column pair */
    const int wi0 = i0 + warp * 16;         /* this warp's first query row */
    const int wi1 = min(wi0 + 15, len - 1); /* its last real row; < wi0 when none */
    const int kvh = h / p.group;
    const uint16_t *qg = p.q + (int64_t)(seq_base + i0) * p.q_ld + (int64_t)h * p.d;
    const uint16_t *kg = p.k + (int64_t)seq_base * p.k_ld + (int64_t)kvh * p.d;
    const uint16_t *vg = p.v + (int64_t)seq_base * p.v_ld + (int64_t)kvh * p.d;

    /* ldmatrix lane addresses (byte offsets in shared memory). A (Q) x4:
     * rows lane&15, column half lane>>4. B (K) x4: keys (lane&7) +
     * 8*(lane>>4), dim half (lane>>3)&1 -> b0,b1 of two n8 key tiles. V
     * x4.trans: keys (lane&7) + 8*((lane>>3)&1), dim half lane>>4 -> b0,b1
     * of two n8 dim tiles. */
    const uint32_t q_lane = smem_u32(sQ + (warp * 16 + (lane & 15)) * SROW + (lane >> 4) * 8);
    const uint32_t k_lane = smem_u32(sK + ((lane & 7) + (lane >> 4) * 8) * SROW + ((lane >> 3) & 1) * 8);
    const uint32_t v_lane = smem_u32(sV + ((lane & 7) + ((lane >> 3) & 1) * 8) * SROW + (lane >> 4) * 8);

    float slope = 0.0f;
    const float *brow[2] = {nullptr, nullptr};
    if (EXTRAS) {
        if (p.has_alibi) slope = p.slopes[h];
        if (p.bias) {
            const float *bseq = p.bias + p.bias_off[s] + (int64_t)h * len * len;
            brow[0] = bseq + (int64_t)(wi0 + g) * len;
            brow[1] = bseq + (int64_t)(wi0 + g + 8) * len;
        }
    }

    float o[NO][4];
#pragma unroll
    for (int n = 0; n < NO; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f}; /* row_sum: this thread's share */
    uint32_t qf[Q_REGS ? KQ : 1][4];

    if (n_tiles > 0) {
        load_tile<DP, ATT_BM, VEC>(sQ, qg, p.q_ld, len - i0, p.d, p.q);
        load_tile<DP, BN, VEC>(sK, kg + (int64_t)jlo * p.k_ld, p.k_ld, len - jlo, p.d, p.k);
        cp_async_commit();
    }

    for (int t = 0; t < n_tiles; t++) {
        const int j0 = jlo + t * BN;
        cp_async_wait_all();
        __syncthreads(); /* K(t) (and Q) landed; every warp is done with V(t-1) */
        if (Q_REGS && t == 0 && wi0 <= wi1) {
#pragma unroll
            for (int kk = 0; kk < KQ; kk++) ldsm_x4(q_lane + kk * 32, qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3]);
        }
        load_tile<DP, BN, VEC>(sV, vg + (int64_t)j0 * p.v_ld, p.v_ld, len - j0, p.d, p.v);
        cp_async_commit();

        const int cls = wi0 <= wi1 ? tile_class(p, wi0, wi1, j0, BN, len) : 0; /* warp-uniform */
        float sc[NS][4];
        if (cls) {
#pragma unroll
            for (int n = 0; n < NS; n++) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < KQ; kk++) {
                uint32_t a[4];
                if (Q_REGS) {
                    a[0] = qf[Q_REGS ? kk : 0][0];
                    a[1] = qf[Q_REGS ? kk : 0][1];
                    a[2] = qf[Q_REGS ? kk : 0][2];
                    a[3] = qf[Q_REGS ? kk : 0][3];
                } else {
                    ldsm_x4(q_lane + kk * 32, a[0], a[1], a[2], a[3]);
                }
#pragma unroll
                for (int np = 0; np < NS / 2; np++) {
                    uint32_t b0, b1, b2, b3;
                    ldsm_x4(k_lane + (np * 16 * SROW + kk * 16) * 2, b0, b1, b2, b3);
                    Elem<T>::mma(sc[2 * np], a, b0, b1);
                    Elem<T>::mma(sc[2 * np + 1], a, b2, b3);
                }
            }
        }

        cp_async_wait_all();
        __syncthreads(); /* V(t) landed; every warp is done with K(t) */
        if (t + 1 < n_tiles) {
            load_tile<DP, BN, VEC>(sK, kg + (int64_t)(j0 + BN) * p.k_ld, p.k_ld, len - j0 - BN, p.d, p.k);
            cp_async_commit();
        }
        if (!cls) continue;

        /* Masked scores, -inf where not visible: in base-2 units with
         * EXTRAS, else raw dot products (scale > 0 there, so the max
         * commutes with scaling and the scale folds into the exp2's FMA,
         * as in FlashAttention-2). Element e of n8
         * tile n sits at row i = wi0 + g + 8*(e >> 1) and key
         * j = j0 + 2*t4 + c with c = 8n + (e & 1) a constant: so the masks
         * compare c against per-row bounds made once per tile, and nothing
         * per element is loop-invariant for the compiler to hoist into
         * registers. */
        if (EXTRAS || cls == 1) {
            const int jt = j0 + 2 * t4;
            int c_lo[2], c_hi[2]; /* visible: c_lo <= c <= c_hi */
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int i = wi0 + g + 8 * r, di = i - jt; /* i - j = di - c */
                c_lo[r] = p.wl >= 0 ? di - p.wl : INT_MIN;
                int hi = len - 1 - jt;
                if (p.causal) hi = min(hi, di);
                if (p.wr >= 0) hi = min(hi, di + p.wr);
                c_hi[r] = i < len ? hi : INT_MIN;
            }
            const uint8_t *km = EXTRAS && p.key_mask ? p.key_mask + seq_base + jt : nullptr;
#pragma unroll
            for (int n = 0; n < NS; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int r = e >> 1, c = 8 * n + (e & 1);
                    bool vis = c >= c_lo[r] && c <= c_hi[r];
                    float x = sc[n][e];
                    if (EXTRAS) {
                        if (km && vis) vis = __ldg(km + c) != 0;
                        /* As the CPU: softcap on the scaled dot product,
                         * then the bias (or the bias, then the cap:
                         * softcap_after_bias), then ALiBi. */
                        x *= p.scale;
                        if (p.softcap != 0.0f && !p.softcap_after_bias) x = p.softcap * tanhf(x * p.inv_softcap);
                        if (brow[0] && vis) x += __ldg(brow[r] + jt + c);
                        if (p.softcap != 0.0f && p.softcap_after_bias) x = p.softcap * tanhf(x * p.inv_softcap);
                        if (p.has_alibi) x -= slope * fabsf((float)(wi0 + g + 8 * r - jt - c));
                        x *= ATT_LOG2E;
                    }
                    sc[n][e] = vis ? x : -INFINITY;
                }
        }

        /* Online softmax: rows g (elements 0, 1) and g + 8 (2, 3); the four
         * threads of a quad share a row. row_max is in base-2 units. A row
         * whose running max is still -inf subtracts 0 instead, so
         * exp2(-inf) = 0 and no NaN appears. */
        const float mul = EXTRAS ? 1.0f : p.scale_log2;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float mx = -INFINITY;
#pragma unroll
            for (int n = 0; n < NS; n++) mx = fmaxf(mx, fmaxf(sc[n][2 * r], sc[n][2 * r + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            mx = fmaxf(row_max[r], mx * mul);
            const float ref = mx == -INFINITY ? 0.0f : mx;
            const float alpha = ex2(row_max[r] - ref);
            row_max[r] = mx;
            float sum = 0.0f;
#pragma unroll
            for (int n = 0; n < NS; n++) {
                sc[n][2 * r] = ex2(fmaf(sc[n][2 * r], mul, -ref));
                sc[n][2 * r + 1] = ex2(fmaf(sc[n][2 * r + 1], mul, -ref));
                sum += sc[n][2 * r] + sc[n][2 * r + 1];
            }
            row_sum[r] = row_sum[r] * alpha + sum;
#pragma unroll
            for (int n = 0; n < NO; n++) {
                o[n][2 * r] *= alpha;
                o[n][2 * r + 1] *= alpha;
            }
        }

        /* O += P V: the S accumulators of key tiles 2kk, 2kk+1 are exactly
         * the A fragment of k16 step kk. */
#pragma unroll
        for (int kk = 0; kk < KP; kk++) {
            uint32_t a[4];
            a[0] = Elem<T>::pack(sc[2 * kk][0], sc[2 * kk][1]);
            a[1] = Elem<T>::pack(sc[2 * kk][2], sc[2 * kk][3]);
            a[2] = Elem<T>::pack(sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
            a[3] = Elem<T>::pack(sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
#pragma unroll
            for (int dp = 0; dp < NO / 2; dp++) {
                uint32_t b0, b1, b2, b3;
                ldsm_x4_trans(v_lane + (kk * 16 * SROW + dp * 16) * 2, b0, b1, b2, b3);
                Elem<T>::mma(o[2 * dp], a, b0, b1);
                Elem<T>::mma(o[2 * dp + 1], a, b2, b3);
            }
        }
    }

    /* out = O / sum, rounded once; 0 for a row that saw no key. */
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float sum = row_sum[r];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        const int i = wi0 + g + 8 * r;
        if (i >= len) continue;
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        uint16_t *dst = p.o + (int64_t)(seq_base + i) * p.o_ld + (int64_t)h * p.d;
#pragma unroll
        for (int n = 0; n < NO; n++) {
            const int c = 8 * n + 2 * t4;
            if (VEC) {
                if (c < p.d) *(uint32_t *)(dst + c) = Elem<T>::pack(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);
            } else {
                if (c < p.d) dst[c] = Elem<T>::from_float(o[n][2 * r] * inv);
                if (c + 1 < p.d) dst[c + 1] = Elem<T>::from_float(o[n][2 * r + 1] * inv);
            }
        }
    }
}

template <typename T, int DP, bool VEC, bool EXTRAS>
cudaError_t launch(AttnParams &p, int n_seqs, int max_len, int n_heads, cudaStream_t stream)
{
    constexpr size_t smem = attn_smem_bytes<DP>();
    auto kernel = attn_fwd<T, DP, VEC, EXTRAS>;
    if (smem > 48 * 1024) {
        /* Per device and cheap: set on every launch rather than tracking
         * which devices have seen it. */
        const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return e;
    }
    const unsigned m_blocks = (unsigned)((max_len + ATT_BM - 1) / ATT_BM);
    for (int s0 = 0; s0 < n_seqs; s0 += ATT_MAX_GRID_Z) {
        p.seq0 = s0;
        const dim3 grid(m_blocks, (unsigned)n_heads, (unsigned)min(n_seqs - s0, ATT_MAX_GRID_Z));
        kernel<<<grid, ATT_THREADS, smem, stream>>>(p);
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

template <typename T, int DP>
cudaError_t launch_dp(AttnParams &p, bool vec, bool extras, int n_seqs, int max_len, int n_heads, cudaStream_t st)
{
    if (!vec) return launch<T, DP, false, true>(p, n_seqs, max_len, n_heads, st);
    if (extras) return launch<T, DP, true, true>(p, n_seqs, max_len, n_heads, st);
    return launch<T, DP, true, false>(p, n_seqs, max_len, n_heads, st);
}

template <typename T>
cudaError_t launch_type(AttnParams &p, bool vec, bool extras, int n_seqs, int max_len, int n_heads, cudaStream_t st)
{
    const int d = p.d;
    if (d <= 32) return launch_dp<T, 32>(p, vec, extras, n_seqs, max_len, n_heads, st);
    if (d <= 64) return launch_dp<T, 64>(p, vec, extras, n_seqs, max_len, n_heads, st);
    if (d <= 96) return launch_dp<T, 96>(p, vec, extras, n_seqs, max_len, n_heads, st);
    if (d <= 128) return launch_dp<T, 128>(p, vec, extras, n_seqs, max_len, n_heads, st);
    if (d <= 192) return launch_dp<T, 192>(p, vec, extras, n_seqs, max_len, n_heads, st);
    return launch_dp<T, 256>(p, vec, extras, n_seqs, max_len, n_heads, st);
}

bool aligned16(const void *ptr) { return ((uintptr_t)ptr & 15) == 0; }

} // namespace

/* C++ linkage, as declared in cuda_internal.h (cuda_table.cu fills the
 * table with it). */
void iv_cuda_attention(const iv_ops *ops, const iv_attn_args *a)
{
    const iv_dtype dt = a->q.dtype;
    const int d = a->head_dim;
    if (a->n_seqs <= 0) return;
    /* Contract violations are recorded in the instance (ops->sync reports
     * them), as a launch failure would be. */
    if ((dt != IV_BF16 && dt != IV_F16) || a->k.dtype != dt || a->v.dtype != dt || a->out.dtype != dt) {
        iv_cuda_note_invalid(ops, "attention: views must all be bfloat16 or all float16");
        return;
    }
    if (a->n_heads <= 0 || a->n_kv_heads <= 0 || a->n_heads % a->n_kv_heads != 0 || a->n_heads > 65535) {
        iv_cuda_note_invalid(ops, "attention: %d heads over %d kv heads", a->n_heads, a->n_kv_heads);
        return;
    }
    if (d <= 0 || d > ATT_MAX_DIM) {
        iv_cuda_note_invalid(ops, "attention: head_dim %d (the CUDA kernel takes 1 to %d)", d, ATT_MAX_DIM);
        return;
    }
    if (a->alibi_slopes && a->n_heads > ATT_MAX_HEADS) {
        iv_cuda_note_invalid(ops, "attention: ALiBi with %d heads (at most %d)", a->n_heads, ATT_MAX_HEADS);
        return;
    }
    if (!a->cu_seqlens || !a->cu_seqlens_dev || (a->bias && !a->bias_offsets_dev)) {
        iv_cuda_note_invalid(ops, "attention: cu_seqlens (host and device) and device bias offsets are required");
        return;
    }
    /* Geometry from the host lengths: max_seqlen is only trusted as a floor. */
    int max_len = a->max_seqlen > 0 ? a->max_seqlen : 0;
    for (int s = 0; s < a->n_seqs; s++) max_len = max(max_len, a->cu_seqlens[s + 1] - a->cu_seqlens[s]);
    if (max_len <= 0) return;

    AttnParams p;
    p.q = (const uint16_t *)a->q.data;
    p.k = (const uint16_t *)a->k.data;
    p.v = (const uint16_t *)a->v.data;
    p.o = (uint16_t *)a->out.data;
    p.q_ld = a->q.ld;
    p.k_ld = a->k.ld;
    p.v_ld = a->v.ld;
    p.o_ld = a->out.ld;
    p.cu_seqlens = a->cu_seqlens_dev;
    p.key_mask = a->key_mask;
    p.bias = a->bias;
    p.bias_off = a->bias ? a->bias_offsets_dev : nullptr;
    p.seq0 = 0;
    p.group = a->n_heads / a->n_kv_heads;
    p.d = d;
    p.causal = a->causal != 0;
    /* A window at least as long as any sequence limits nothing; clamping
     * keeps i + w within int. */
    p.wl = a->window_left < 0 ? -1 : min(a->window_left, max_len);
    p.wr = a->window_right < 0 ? -1 : min(a->window_right, max_len);
    p.scale = a->scale;
    p.scale_log2 = a->scale * ATT_LOG2E;
    p.softcap = a->softcap;
    p.inv_softcap = a->softcap != 0.0f ? 1.0f / a->softcap : 0.0f;
    p.softcap_after_bias = a->softcap_after_bias != 0;
    p.has_alibi = a->alibi_slopes != nullptr;
    for (int h = 0; h < ATT_MAX_HEADS; h++) p.slopes[h] = p.has_alibi && h < a->n_heads ? a->alibi_slopes[h] : 0.0f;

    const bool vec = d % 8 == 0 && a->q.ld % 8 == 0 && a->k.ld % 8 == 0 && a->v.ld % 8 == 0 &&
                     a->out.ld % 8 == 0 && aligned16(a->q.data) && aligned16(a->k.data) && aligned16(a->v.data) &&
                     aligned16(a->out.data);
    /* The plain kernels fold a positive scale into exp2; any other scale
     * takes the per-element path. */
    const bool extras = a->key_mask || a->alibi_slopes || a->bias || a->softcap != 0.0f || !(a->scale > 0.0f);

    const cudaStream_t stream = iv_cuda_ctx(ops)->stream;
    const cudaError_t e = dt == IV_BF16
                              ? launch_type<__nv_bfloat16>(p, vec, extras, a->n_seqs, max_len, a->n_heads, stream)
                              : launch_type<__half>(p, vec, extras, a->n_seqs, max_len, a->n_heads, stream);
    if (e != cudaSuccess) iv_cuda_note_error(ops, e, "attention");
}
