/* Int8 micro-kernels: IV_INT8_MR activation rows times one or two packed
 * weight panels, accumulating exact int32 dot products (see int8_ops.h for
 * why these instruction sequences). Each x86 kernel is compiled for its own
 * target and chosen at run time from what the CPU reports, so one binary
 * uses VNNI where it exists and AVX2 elsewhere.
 *
 * A packed panel is, per group of 4 input columns, 32 bytes: 4 values of
 * each of its 8 output rows. */
#include "ops/cpu/int8_kernels.h"

#include "ops/cpu/cpu_isa.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define IV_INT8_X86 1
#endif

/* ---- portable fallback (and an independent check of the SIMD kernels) ---- */

static void scalar_tile(const void *a, size_t a_stride, int rows, const int8_t *w, int64_t kp, int32_t *c,
                        int64_t ldc, const int8_t *pf)
{
    (void)pf;
    for (int r = 0; r < rows; r++) {
        const uint8_t *ar = (const uint8_t *)a + (size_t)r * a_stride;
        for (int j = 0; j < IV_INT8_PANEL; j++) {
            int32_t acc = 0;
            for (int64_t k = 0; k < kp; k++) acc += (int32_t)ar[k] * w[(k / 4) * 32 + j * 4 + k % 4];
            c[(int64_t)r * ldc + j] = acc;
        }
    }
}

static int scalar_available(void) { return 1; }

#ifdef IV_INT8_X86

/* Calls tile(args..., R) with R = rows (1..IV_INT8_MR) as a constant. */
#define ROWS_SWITCH(tile, rows, ...)           \
    switch (rows) {                            \
    case 6: tile(__VA_ARGS__, 6); break;       \
    case 5: tile(__VA_ARGS__, 5); break;       \
    case 4: tile(__VA_ARGS__, 4); break;       \
    case 3: tile(__VA_ARGS__, 3); break;       \
    case 2: tile(__VA_ARGS__, 2); break;       \
    default: tile(__VA_ARGS__, 1); break;      \
    }

/* Step g of a tile that brings in the step bytes [g * step, (g + 1) *
 * step) of the panels at pf (nothing when pf is NULL): with step = 4 x the
 * kernel's columns, the tile's kp / 4 steps cover the cols * kp bytes of
 * the next panels, one or two cache lines per step, spread over the
 * tile's work instead of in one burst. Into L2 (prefetcht1): the tile's
 * activation rows and its own panels keep L1. The AVX2 kernels only: the
 * VNNI ones, twice as fast per panel, lost with it (all-MiniLM-L6-v2 int8
 * on Zen 4's AVX-512 VNNI, p50, alternating processes: 64 tokens 2.54 ->
 * 2.62 ms, 32 x 128 168 -> 175-179 ms), their panels coming in time by
 * the hardware prefetcher. */
static inline __attribute__((always_inline)) void prefetch_step(const int8_t *pf, int64_t g, int step)
{
    if (!pf) return;
    for (int64_t o = (g * step + 63) & ~(int64_t)63; o < (g + 1) * step; o += 64) __builtin_prefetch(pf + o, 0, 2);
}

/* ---- AVX2: 16-bit multiply-add ----
 * A 16-byte half of a panel group (4 rows x 4 values) is sign-extended to
 * 16 bits; the row's 4 activations (uint16) are broadcast to every 64-bit
 * lane; vpmaddwd then yields, per output row, two int32 partial sums (values
 * 0-1 and 2-3), which are folded once at the end. Pair sums reach at most
 * 2 * 255 * 127, so nothing saturates. 6 rows x 8 columns keep 12
 * accumulators, 2 weight vectors and 1 broadcast in the 16 ymm registers. */

#define AVX2_TARGET __attribute__((target("avx2")))

AVX2_TARGET static inline __attribute__((always_inline)) void
avx2_tile_rows(const uint8_t *a, size_t a_stride, const int8_t *w, int64_t kp, int32_t *c, int64_t ldc,
               const int8_t *pf, const int R)
{
    __m256i lo_acc[IV_INT8_MR], hi_acc[IV_INT8_MR];
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) lo_acc[r] = hi_acc[r] = _mm256_setzero_si256();
    for (int64_t g = 0; g < kp / 4; g++) {
        prefetch_step(pf, g, 4 * IV_INT8_PANEL);
        const __m256i lo = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + g * 32)));
        const __m256i hi = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + g * 32 + 16)));
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            int64_t quad;
            memcpy(&quad, a + (size_t)r * a_stride + (size_t)g * 8, sizeof quad);
            const __m256i av = _mm256_set1_epi64x(quad);
            lo_acc[r] = _mm256_add_epi32(lo_acc[r], _mm256_madd_epi16(av, lo));
            hi_acc[r] = _mm256_add_epi32(hi_acc[r], _mm256_madd_epi16(av, hi));
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
        /* [r0 r0 r1 r1 | r2 r2 r3 r3] and [r4 r4 r5 r5 | r6 r6 r7 r7] -> r0..r7 */
        __m256i sums = _mm256_hadd_epi32(lo_acc[r], hi_acc[r]);
        sums = _mm256_permute4x64_epi64(sums, 0xD8);
        _mm256_storeu_si256((__m256i *)(c + (int64_t)r * ldc), sums);
    }
}

AVX2_TARGET static void avx2_tile(const void *a, size_t a_stride, int rows, const int8_t *w, int64_t kp, int32_t *c,
                                  int64_t ldc, const int8_t *pf)
{
    const uint8_t *ab = a;
    ROWS_SWITCH(avx2_tile_rows, rows, ab, a_stride, w, kp, c, ldc, pf);
}

static int avx2_available(void)
{
    __builtin_cpu_init();
    return iv_cpu_isa_allows(IV_ISA_AVX2) && __builtin_cpu_supports("avx2");
}

/* ---- AVX2: vpmaddubsw on 7-bit weights ----
 * The packed layout and the broadcast are VNNI's (below): the row's 4 uint8
 * activations in every 32-bit lane against a panel group. vpmaddubsw
 * multiplies them with the signed weights and adds neighbouring products
 * in 16 bits, vpmaddwd against ones adds the two pairs of each lane into
 * int32: one vpdpbusd in three instructions, 32 multiply-adds per vpmaddubsw
 * against vpmaddwd's 16. The 16-bit pair sum saturates past 32767, so this
 * kernel is exact only for weights within +-IV_INT8_QMAX_7BIT
 * (2 * 255 * 63 = 32130), which is how weights are quantized where it is
 * the best kernel: oneDNN scales weights by 0.5 on CPUs without VNNI, and
 * onnxruntime's MLAS asks for reduce_range, for the same reason. Weights
 * quantized to +-127 never reach it (int8_linear.c). 6 rows x 16 columns:
 * 12 accumulators, 2 weight vectors, the broadcast and the product; the
 * ones are a memory operand. */

AVX2_TARGET static inline __attribute__((always_inline)) __m256i ubsw_dot4(__m256i acc, __m256i av, __m256i w,
                                                                          const __m256i *ones)
{
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(av, w), _mm256_loadu_si256(ones)));
}

AVX2_TARGET static inline __attribute__((always_inline)) void
ubsw_tile_rows(const uint8_t *a, size_t a_stride, const int8_t *w, int64_t kp, int32_t *c, int64_t ldc,
               const int8_t *pf, const int R)
{
    static const int16_t ones16[16] __attribute__((aligned(32))) = {1, 1, 1, 1, 1, 1, 1, 1,
                                                                    1, 1, 1, 1, 1, 1, 1, 1};
    const __m256i *ones = (const __m256i *)ones16;
    const int8_t *w0 = w, *w1 = w + IV_INT8_PANEL * kp;
    __m256i acc0[IV_INT8_MR], acc1[IV_INT8_MR];
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) acc0[r] = acc1[r] = _mm256_setzero_si256();
    for (int64_t g = 0; g < kp / 4; g++) {
        prefetch_step(pf, g, 8 * IV_INT8_PANEL);
        const __m256i p0 = _mm256_loadu_si256((const __m256i *)(w0 + g * 32));
        const __m256i p1 = _mm256_loadu_si256((const __m256i *)(w1 + g * 32));
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            int32_t quad;
            memcpy(&quad, a + (size_t)r * a_stride + (size_t)g * 4, sizeof quad);
            const __m256i av = _mm256_set1_epi32(quad);
            acc0[r] = ubsw_dot4(acc0[r], av, p0, ones);
            acc1[r] = ubsw_dot4(acc1[r], av, p1, ones);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
        _mm256_storeu_si256((__m256i *)(c + (int64_t)r * ldc), acc0[r]);
        _mm256_storeu_si256((__m256i *)(c + (int64_t)r * ldc + IV_INT8_PANEL), acc1[r]);
    }
}

AVX2_TARGET static void ubsw_tile(const void *a, size_t a_stride, int rows, const int8_t *w, int64_t kp, int32_t *c,
                                  int64_t ldc, const int8_t *pf)
{
    const uint8_t *ab = a;
    ROWS_SWITCH(ubsw_tile_rows, rows, ab, a_stride, w, kp, c, ldc, pf);
}

/* ---- VNNI: vpdpbusd on 256-bit vectors ----
 * The row's 4 activations (uint8) are broadcast to every 32-bit lane and
 * multiplied with a whole panel group (8 rows x 4 signed values), the four
 * products summed into each row's int32 lane in one instruction without
 * intermediate saturation. 6 rows x 16 columns (two panels). */

#define VNNI_TARGET __attribute__((target("avx2,avx512f,avx512vl,avx512vnni")))

VNNI_TARGET static inline __attribute__((always_inline)) void
vnni_tile_rows(const uint8_t *a, size_t a_stride, const int8_t *w, int64_t kp, int32_t *c, int64_t ldc, const int R)
{
    const int8_t *w0 = w, *w1 = w + IV_INT8_PANEL * kp;
    __m256i acc0[IV_INT8_MR], acc1[IV_INT8_MR];
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) acc0[r] = acc1[r] = _mm256_setzero_si256();
    for (int64_t g = 0; g < kp / 4; g++) {
        const __m256i p0 = _mm256_loadu_si256((const __m256i *)(w0 + g * 32));
        const __m256i p1 = _mm256_loadu_si256((const __m256i *)(w1 + g * 32));
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            int32_t quad;
            memcpy(&quad, a + (size_t)r * a_stride + (size_t)g * 4, sizeof quad);
            const __m256i av = _mm256_set1_epi32(quad);
            acc0[r] = _mm256_dpbusd_epi32(acc0[r], av, p0);
            acc1[r] = _mm256_dpbusd_epi32(acc1[r], av, p1);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
        _mm256_storeu_si256((__m256i *)(c + (int64_t)r * ldc), acc0[r]);
        _mm256_storeu_si256((__m256i *)(c + (int64_t)r * ldc + IV_INT8_PANEL), acc1[r]);
    }
}

VNNI_TARGET static void vnni_tile(const void *a, size_t a_stride, int rows, const int8_t *w, int64_t kp, int32_t *c,
                                  int64_t ldc, const int8_t *pf)
{
    const uint8_t *ab = a;
    (void)pf;
    ROWS_SWITCH(vnni_tile_rows, rows, ab, a_stride, w, kp, c, ldc);
}

static int vnni_available(void)
{
    __builtin_cpu_init();
    return iv_cpu_isa_allows(IV_ISA_AVX512) && __builtin_cpu_supports("avx2") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

/* ---- VNNI on 512-bit vectors: four panels (32 columns) per tile ----
 * Two neighbouring panels' 32-byte groups make one zmm (the packed layout
 * is the 256-bit kernel's), so each broadcast of 4 activations feeds two
 * vpdpbusd of 16 columns: 6 rows x 32 columns in 12 zmm accumulators. */

#define VNNI512_TARGET __attribute__((target("avx2,avx512f,avx512bw,avx512vl,avx512vnni")))

VNNI512_TARGET static inline __attribute__((always_inline)) __m512i pair_group(const int8_t *p, int64_t kp,
                                                                               int64_t g)
{
    const __m256i lo = _mm256_loadu_si256((const __m256i *)(p + g * 32));
    const __m256i hi = _mm256_loadu_si256((const __m256i *)(p + IV_INT8_PANEL * kp + g * 32));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

VNNI512_TARGET static inline __attribute__((always_inline)) void
vnni512_tile_rows(const uint8_t *a, size_t a_stride, const int8_t *w, int64_t kp, int32_t *c, int64_t ldc,
                  const int R)
{
    const int8_t *w01 = w, *w23 = w + 2 * IV_INT8_PANEL * kp;
    __m512i acc0[IV_INT8_MR], acc1[IV_INT8_MR];
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) acc0[r] = acc1[r] = _mm512_setzero_si512();
    for (int64_t g = 0; g < kp / 4; g++) {
        const __m512i p01 = pair_group(w01, kp, g), p23 = pair_group(w23, kp, g);
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            int32_t quad;
            memcpy(&quad, a + (size_t)r * a_stride + (size_t)g * 4, sizeof quad);
            const __m512i av = _mm512_set1_epi32(quad);
            acc0[r] = _mm512_dpbusd_epi32(acc0[r], av, p01);
            acc1[r] = _mm512_dpbusd_epi32(acc1[r], av, p23);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
        _mm512_storeu_si512((void *)(c + (int64_t)r * ldc), acc0[r]);
        _mm512_storeu_si512((void *)(c + (int64_t)r * ldc + 2 * IV_INT8_PANEL), acc1[r]);
    }
}

VNNI512_TARGET static void vnni512_tile(const void *a, size_t a_stride, int rows, const int8_t *w, int64_t kp,
                                        int32_t *c, int64_t ldc, const int8_t *pf)
{
    const uint8_t *ab = a;
    (void)pf;
    ROWS_SWITCH(vnni512_tile_rows, rows, ab, a_stride, w, kp, c, ldc);
}

static int vnni512_available(void)
{
    __builtin_cpu_init();
    return vnni_available() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
}

#else

static int avx2_available(void) { return 0; }
static int vnni_available(void) { return 0; }
#define ubsw_tile scalar_tile
static int vnni512_available(void) { return 0; }
#define avx2_tile scalar_tile
#define vnni_tile scalar_tile
#define vnni512_tile scalar_tile

#endif

static const iv_int8_kernel_desc kernels[IV_INT8_KERNEL_COUNT] = {
    [IV_INT8_KERNEL_SCALAR] = {"scalar", IV_INT8_PANEL, 0, IV_INT8_QMAX, scalar_available, scalar_tile},
    [IV_INT8_KERNEL_AVX2] = {"avx2-vpmaddwd", IV_INT8_PANEL, 1, IV_INT8_QMAX, avx2_available, avx2_tile},
    [IV_INT8_KERNEL_AVX2_UBSW] = {"avx2-vpmaddubsw", 2 * IV_INT8_PANEL, 0, IV_INT8_QMAX_7BIT, avx2_available,
                                  ubsw_tile},
    [IV_INT8_KERNEL_VNNI] = {"avx512vnni-vpdpbusd", 2 * IV_INT8_PANEL, 0, IV_INT8_QMAX, vnni_available, vnni_tile},
    [IV_INT8_KERNEL_VNNI512] = {"avx512vnni-zmm", 4 * IV_INT8_PANEL, 0, IV_INT8_QMAX, vnni512_available,
                                vnni512_tile},
};

const iv_int8_kernel_desc *iv_int8_kernel_desc_of(iv_int8_kernel k)
{
    return (unsigned)k < IV_INT8_KERNEL_COUNT ? &kernels[k] : &kernels[IV_INT8_KERNEL_SCALAR];
}
