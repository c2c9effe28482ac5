/* Linear layer for a few rows of a large row-major weight (short requests:
 * one 8-token sentence is an 8-row product). sgemm is built for large M: OpenBLAS
 * packs W into panels (a full extra copy of the 2-9 MB matrix per call),
 * forks its own threads and then computes an M of 8 with kernels shaped for
 * more. At this size the product is bound by reading W from memory once, so
 * this kernel streams W exactly once, straight from its row-major layout:
 * each output column is the dot product of a row of W with each row of x,
 * vectorised along the input dimension. The columns are split across
 * threads, so each thread streams its own contiguous slice of W, and the
 * bias/activation/residual epilogue runs on each finished tile while it is
 * still in registers.
 *
 * The kernel needs AVX2 and FMA, checked at run time (the binary may be
 * built for a baseline target); without them the caller falls back to sgemm.
 * Summation order differs from sgemm's, so results differ from it by FP32
 * rounding, and a row's result depends on the batch's row count. That is
 * why model weights do not come here: they are packed at load for
 * gemm_panel.c, whose order never depends on the batch; so are the heads'
 * and the sentence-transformers Dense layers'. What is left here is large
 * row-major weights of models run without the engine's load-time packing. */
#include "ops/cpu/linear_small.h"

#include "ops/cpu/cpu_isa.h"

#include <stdint.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define IV_LINEAR_SMALL_X86 1
#endif

#ifdef IV_LINEAR_SMALL_X86

#define SMALL_TARGET __attribute__((target("avx2,fma")))
#define TILE_ROWS 3 /* rows x columns accumulators: 12, plus 3 x vectors, fit 16 ymm */
#define TILE_COLS 4

SMALL_TARGET static inline __attribute__((always_inline)) float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* out[r * ldo + c] = sum_k x_r[k] * w_c[k] for r < R, c < C; R and C are
 * constants after inlining so the accumulators live in registers. The last
 * in % 8 elements go through masked loads (zeros beyond the end), which never
 * touch memory past a row.
 *
 * pf, when not NULL, is the next tile's W (C rows of `in`): the kernel is
 * bound by memory latency, and W's rows are short streams (3-12 KB) that the
 * hardware prefetcher keeps restarting on, so each step asks for the line
 * the next tile will need at the same offset. */
SMALL_TARGET static inline __attribute__((always_inline)) void
tile(const float *x, int64_t ldx, const float *w, int64_t in, __m256i tail_mask, const float *pf, float *out,
     int64_t ldo, const int R, const int C)
{
    __m256 acc[TILE_ROWS][TILE_COLS];
#pragma GCC unroll 3
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= in; k += 8) {
        __m256 xv[TILE_ROWS];
#pragma GCC unroll 3
        for (int r = 0; r < R; r++) xv[r] = _mm256_loadu_ps(x + r * ldx + k);
        if (pf)
#pragma GCC unroll 4
            for (int c = 0; c < C; c++) _mm_prefetch((const char *)(pf + c * in + k), _MM_HINT_T0);
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            const __m256 wv = _mm256_loadu_ps(w + c * in + k);
#pragma GCC unroll 3
            for (int r = 0; r < R; r++) acc[r][c] = _mm256_fmadd_ps(xv[r], wv, acc[r][c]);
        }
    }
    if (k < in) {
        __m256 xv[TILE_ROWS];
#pragma GCC unroll 3
        for (int r = 0; r < R; r++) xv[r] = _mm256_maskload_ps(x + r * ldx + k, tail_mask);
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            const __m256 wv = _mm256_maskload_ps(w + c * in + k, tail_mask);
#pragma GCC unroll 3
            for (int r = 0; r < R; r++) acc[r][c] = _mm256_fmadd_ps(xv[r], wv, acc[r][c]);
        }
    }
#pragma GCC unroll 3
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) out[r * ldo + c] = hsum(acc[r][c]);
}

/* The tile shapes instantiated: full tiles are the hot case, partial ones
 * only at the edges (one column at a time). */
SMALL_TARGET static void tile_any(const float *x, int64_t ldx, const float *w, int64_t in, __m256i tail_mask,
                                  const float *pf, float *out, int64_t ldo, int rows, int cols)
{
    if (cols == TILE_COLS) {
        switch (rows) {
        case 3: tile(x, ldx, w, in, tail_mask, pf, out, ldo, 3, TILE_COLS); return;
        case 2: tile(x, ldx, w, in, tail_mask, pf, out, ldo, 2, TILE_COLS); return;
        default: tile(x, ldx, w, in, tail_mask, pf, out, ldo, 1, TILE_COLS); return;
        }
    }
    for (int c = 0; c < cols; c++) {
        switch (rows) {
        case 3: tile(x, ldx, w + c * in, in, tail_mask, NULL, out + c, ldo, 3, 1); break;
        case 2: tile(x, ldx, w + c * in, in, tail_mask, NULL, out + c, ldo, 2, 1); break;
        default: tile(x, ldx, w + c * in, in, tail_mask, NULL, out + c, ldo, 1, 1); break;
        }
    }
}

/* Columns per unit of thread work: the epilogue then runs on rows of this
 * length (a vectorised pass, not 4-wide scraps). */
#define CHUNK_COLS 64

SMALL_TARGET static void linear_small_avx2(iv_view y, iv_view x, const float *w, const float *bias, iv_act act,
                                           const float *residual)
{
    const int64_t rows = x.rows, in = x.cols, out = y.cols;
    const __m256i tail_mask =
        _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(in % 8)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const int64_t n_chunks = (out + CHUNK_COLS - 1) / CHUNK_COLS;

    /* Below this many multiply-adds a fork costs more than it saves. */
#pragma omp parallel for schedule(static) if (rows * in * out >= IV_LINEAR_SMALL_PAR_MIN)
    for (int64_t chunk = 0; chunk < n_chunks; chunk++) {
        const int64_t j0 = chunk * CHUNK_COLS;
        const int64_t n = out - j0 < CHUNK_COLS ? out - j0 : CHUNK_COLS;
        float sums[IV_LINEAR_SMALL_MAX_ROWS][CHUNK_COLS];
        for (int64_t j = j0; j < j0 + n; j += TILE_COLS) {
            const int cols = (int)(j0 + n - j < TILE_COLS ? j0 + n - j : TILE_COLS);
            const float *pf = j + 2 * TILE_COLS <= out ? w + (j + TILE_COLS) * in : NULL;
            /* Every row group re-reads this block of W, from cache: W leaves
             * memory once, and only the first pass prefetches. */
            for (int64_t t = 0; t < rows; t += TILE_ROWS) {
                const int r_n = (int)(rows - t < TILE_ROWS ? rows - t : TILE_ROWS);
                tile_any(((float *)x.data) + t * x.ld, x.ld, w + j * in, in, tail_mask, t == 0 ? pf : NULL, &sums[t][j - j0],
                         CHUNK_COLS, r_n, cols);
            }
        }
        /* The residual may be y itself: act_row reads each element of it
         * before writing that element. */
        for (int64_t t = 0; t < rows; t++)
            iv_cpu_act_row(((float *)y.data) + t * y.ld + j0, sums[t], bias ? bias + j0 : NULL, act,
                           residual ? residual + t * y.ld + j0 : NULL, n);
    }
}

static int avx2_fma_available(void)
{
    __builtin_cpu_init();
    return iv_cpu_isa_allows(IV_ISA_AVX2) && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

#endif

int iv_cpu_linear_small(iv_view y, iv_view x, const float *w, const float *bias, iv_act act, const float *residual)
{
#ifdef IV_LINEAR_SMALL_X86
    /* Threads may race to fill this in; they all store the same answer. */
    static int have = -1;
    int h = __atomic_load_n(&have, __ATOMIC_RELAXED);
    if (h < 0) {
        h = avx2_fma_available();
        __atomic_store_n(&have, h, __ATOMIC_RELAXED);
    }
    if (h && x.rows <= IV_LINEAR_SMALL_MAX_ROWS) {
        linear_small_avx2(y, x, w, bias, act, residual);
        return 1;
    }
#endif
    return 0;
}
