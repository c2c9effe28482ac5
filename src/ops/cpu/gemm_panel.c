/* The packed-panel linear kernel (see gemm_panel.h for the layout and the
 * summation-order guarantee).
 *
 * Blocking, for one call y[M, N] = x[M, K] W^T:
 *   - rows are cut into blocks of mc rows whose slice of x (mc x K floats)
 *     fits in half the L2 cache; each (row block, group of panels) is one
 *     unit of thread work, its owner going through its panels in order
 *     while threads with no unit left take panels from its other end;
 *   - within a unit, for each panel, k runs in equal pieces of at most the
 *     kernel's kc (96 KiB of the panel a pass), which every row tile of
 *     the block reads in order, 64-byte line after line, from L2 through
 *     L1's stream prefetcher;
 *   - a row tile is MR rows x 32 columns of accumulators in registers
 *     (AVX-512: 12 x 2 zmm; AVX2: 6 x 2 ymm per 16-column half), fed by one
 *     broadcast of x per row and step k's line of each half of the panel;
 *   - on the last piece the epilogue (bias, activation, residual, store)
 *     runs on the accumulators in registers (the kernel of the build's
 *     vector width; the AVX2 one leaves GELU to the strip: panel_kernel),
 *     or on the finished 32-column strip of the block, kept in a per-unit
 *     buffer (iv_cpu_act_rows), or, for GELU on blocks of few rows, on y
 *     in place after a group of panels (DEFER_MAX_ROWS); either way a
 *     residual that is y itself is read before each element is written.
 * x is read in place (row stride x.ld): no copy of the activations either.
 * The tiles ask for what comes next into cache ahead of use: the next piece
 * of W (next_piece_share), on a block's first panel the next tile's rows of
 * x (next_tile_rows), and the epilogue's lines of y (prefetch_epilogue). */
#include "ops/cpu/gemm_panel.h"

#include "ops/cpu/cpu_isa.h"

/* 16-lane vector math for the AVX-512 epilogue (vmath.h). */
#define IV_VMATH_WIDE
#include "ops/cpu/vmath.h"

#include <math.h>
#include <omp.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PANEL_X86 1
#endif

#define NR IV_PANEL_COLS
#define HALF IV_PANEL_HALF
#define MR512 12   /* rows per AVX-512 tile: 24 accumulators + 2 panel vectors + broadcast */
#define MR256 6    /* rows per AVX2 tile (per 16-column half): 12 + 2 + 1 of 16 ymm */
#define MC_STEP 12 /* the L2 budget of a block is rounded to whole tiles of both heights */
#define MC_MAX 384 /* rows per block at most: the strip buffer is MC_MAX x 32 floats */
/* Multiply-adds below which a call stays on one thread. */
#define PANEL_PAR_MIN (1 << 18)

size_t iv_cpu_panel_floats(int64_t out, int64_t in)
{
    return (size_t)((out + NR - 1) / NR) * NR * (size_t)in;
}

/* Panels in parallel; within a half, blocks of 16 k steps so that the 16
 * source rows are read and the half written a few cache lines at a time
 * (a column at a time wrote 16 strided floats per line). */
void iv_cpu_pack_panels(float *dst, const float *w, int64_t out, int64_t in)
{
    const int64_t n_panels = (out + NR - 1) / NR;
#pragma omp parallel for schedule(static) if (n_panels > 1 && out * in >= PANEL_PAR_MIN)
    for (int64_t p = 0; p < n_panels; p++)
        for (int h = 0; h < NR / HALF; h++) {
            float *half = dst + p * in * NR + h * in * HALF;
            for (int64_t k0 = 0; k0 < in; k0 += 16) {
                const int64_t k1 = k0 + 16 < in ? k0 + 16 : in;
                for (int j = 0; j < HALF; j++) {
                    const int64_t n = p * NR + h * HALF + j;
                    for (int64_t k = k0; k < k1; k++) half[k * HALF + j] = n < out ? w[n * in + k] : 0.0f;
                }
            }
        }
}

iv_tensor iv_cpu_panel_tensor(float *packed, int64_t out, int64_t in)
{
    iv_tensor t = {.dtype = IV_F32, .device = IV_CPU, .ndim = 2, .shape = {out, in}, .data = packed,
                   .layout = IV_LAYOUT_CPU_PANELS};
    return t;
}

float iv_cpu_panel_at(const float *packed, int64_t in, int64_t n, int64_t k)
{
    return packed[iv_cpu_panel_index(in, n, k)];
}

/* The epilogue of one strip: y = act(sum + bias) + res for columns
 * [0, ncols) of rows [0, rows), y and res rows ldy apart, both already at
 * the strip's first row and column (res may be y itself). */
typedef struct panel_epi {
    float *y;
    const float *bias, *res;
    int64_t ldy;
    iv_act act;
    int ncols;
} panel_epi;

/* A tile function computes rows [0, rows) of one panel strip over kn steps
 * of k: ct[r][0..31] = (first ? 0 : ct[r][..]) + sum_k a[r][k] * W[k][..],
 * one fmaf chain per element in k order, where bp is the piece's row k = 0
 * in the panel's first half and the second half's is hs floats after it
 * (hs = K * 16). next is the next piece's row 0 in its first half (the
 * rest of the panel, or the next panel): the tiles ask for it into L2
 * while they compute (next_piece_share). On the last k step the driver
 * passes the epilogue: a kernel that applies it from registers returns 1
 * (ct is then left stale), else 0 and the driver runs it from ct. x_cold
 * says these rows of x have not been read yet by this thread (the first
 * panel of its row block): see next_tile_rows. */
typedef int (*tiles_fn)(const float *a, int64_t lda, const float *bp, int64_t hs, int64_t kn, const float *next,
                        float *ct, int first, int rows, const panel_epi *e, int x_cold);

/* Portable: the same chains with fmaf, for CPUs without AVX2/FMA. */
static int tiles_portable(const float *a, int64_t lda, const float *bp, int64_t hs, int64_t kn,
                          const float *next, float *ct, int first, int rows, const panel_epi *e, int x_cold)
{
    (void)next;
    (void)x_cold;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < NR; j++) {
            const float *col = bp + (j / HALF) * hs + j % HALF;
            float acc = first ? 0.0f : ct[r * NR + j];
            for (int64_t k = 0; k < kn; k++) acc = fmaf(a[r * lda + k], col[k * HALF], acc);
            ct[r * NR + j] = acc;
        }
    return 0;
}

#ifdef PANEL_X86

#define T512 __attribute__((target("avx512f,fma")))
#define T256 __attribute__((target("avx2,fma")))
#define TILE_INLINE static inline __attribute__((always_inline))

/* The epilogue straight from the accumulators, when this file's vector
 * math is 16 lanes wide (AVX-512 builds): the same operations as
 * iv_cpu_act_rows, so the same bits. */
#if IV_VL == 16
#define TILE512_EPILOGUE 1
T512 TILE_INLINE void epilogue512(const panel_epi *e, __m512 c0, __m512 c1, int r, __mmask16 m0, __mmask16 m1,
                                  __m512 b0, __m512 b1)
{
    vf v0 = (vf)c0, v1 = (vf)c1;
    if (e->bias) {
        v0 = v0 + (vf)b0;
        v1 = v1 + (vf)b1;
    }
    v0 = v_act(v0, e->act);
    v1 = v_act(v1, e->act);
    float *y = e->y + r * e->ldy;
    if (e->res) {
        const float *res = e->res + r * e->ldy;
        v0 = v0 + (vf)_mm512_maskz_loadu_ps(m0, res);
        v1 = v1 + (vf)_mm512_maskz_loadu_ps(m1, res + 16);
    }
    _mm512_mask_storeu_ps(y, m0, (__m512)v0);
    _mm512_mask_storeu_ps(y + 16, m1, (__m512)v1);
}
#else
#define TILE512_EPILOGUE 0
#endif

/* While the tiles of a strip work through one piece of the panel, they
 * ask for the next piece (the rest of the panel, or the next panel) to be
 * brought into L2, each tile a share of its lines: on short inputs W comes
 * from memory once per call, and the hardware prefetcher alone leaves the
 * kernel well below the memory bandwidth (BERT-base, 8 tokens, 2 threads:
 * 20.3 ms without, 14.1 ms with; prefetching only 4 KiB ahead: 16.6 ms).
 * A tile asks for pf_lines 64-byte lines from pf, one every step or one
 * every other step, from its first step on (with the same lines of the
 * other half where it reads both): the requests then reach memory at a
 * steady rate while the tiles compute. The AVX2 kernel's two 16-column
 * passes over a strip each take shares of their half. Before, only the first
 * pass prefetched, one line a step for as many steps as its share, which
 * left memory idle through most of the piece when few rows share it.
 * BERT-base through the engine, p50, old -> new, alternating run by run in
 * one process (2 threads, Zen 4 held to AVX2): 8 tokens 12.4 -> 10.2 ms
 * (W streams near the machine's measured bandwidth), 16 tokens 15.8 ->
 * 14.9 ms, 32 and 64 tokens and MiniLM-L6 at 64 unchanged; the AVX-512
 * kernel at 8, 32, 48 and 64 tokens unchanged. Spreading a share over
 * all of a tile's steps instead (one line every kn / share steps, 10 at 64
 * rows) cost 1.5% at 32 and 64 tokens: those steps ran outside the
 * unrolled loop, and compute-bound tiles gain nothing from it. */

/* How a tile spreads its share (pf_lines <= kn consecutive lines of one
 * half) over its k steps: `events` times, it asks for the share's next
 * line and the line `second` floats after it (the other half's, for tiles
 * that read both halves; 0: the same line again, harmless), then runs
 * `every` (1 or 2) steps; the steps left over run without. */
typedef struct pf_plan {
    int64_t events, every, second;
} pf_plan;

static inline pf_plan plan_prefetch(int64_t kn, int64_t pf_lines, int64_t second)
{
    if (kn <= 0 || pf_lines <= 0) return (pf_plan){0, 1, 0};
    return (pf_plan){pf_lines, kn < 2 * pf_lines ? 1 : 2, second};
}

TILE_INLINE void prefetch_step(const float *p, int64_t second)
{
    _mm_prefetch((const char *)p, _MM_HINT_T1);
    _mm_prefetch((const char *)(p + second), _MM_HINT_T1);
}

/* Tile t of n_tiles' share of one half of the next piece: of its kn
 * lines from next (one 64-byte line per step). */
static inline void next_piece_share(const float *next, int64_t kn, int n_tiles, int t, const float **pf,
                                    int64_t *pf_lines)
{
    const int64_t share = (kn + n_tiles - 1) / n_tiles;
    *pf = next + t * share * HALF;
    *pf_lines = kn - t * share < share ? kn - t * share : share;
    if (*pf_lines < 0) *pf_lines = 0;
}

/* Asks for line k of each of xr rows of x, lda apart, into L2 (see
 * next_tile_rows). */
TILE_INLINE void prefetch_rows(const float *xn, int64_t lda, int xr, int64_t k)
{
    for (int r = 0; r < xr; r++) _mm_prefetch((const char *)(xn + r * lda + k), _MM_HINT_T1);
}

/* The k loop of a tile over kn steps, shared by the kernels: the last
 * argument is one step at k (the loop's counter) that also moves the row
 * pointers on. The first steps ask for the next piece (plan pl, from pf:
 * one or two lines per event), the next ones, on a block's first panel,
 * for the next tile's rows of x (xr rows lda apart from xn, NULL: none), a
 * line of each row every 16 steps; the rest run unrolled. */
#define TILE_K_LOOP(kn, pl, pf, xn, xr, lda, ...)                              \
    do {                                                                       \
        int64_t k = 0;                                                         \
        const float *p = (pf);                                                 \
        for (int64_t ev = 0; ev < (pl).events; ev++, p += HALF) {              \
            prefetch_step(p, (pl).second);                                     \
            __VA_ARGS__;                                                       \
            k++;                                                               \
            if ((pl).every == 2) {                                             \
                __VA_ARGS__;                                                   \
                k++;                                                           \
            }                                                                  \
        }                                                                      \
        for (int64_t kx = 0; (xn) && kx < (kn); kx += 16) {                    \
            prefetch_rows((xn), (lda), (xr), kx);                              \
            const int64_t end = kx + 16 < (kn) ? kx + 16 : (kn);               \
            _Pragma("GCC unroll 4") for (; k < end; k++) { __VA_ARGS__; }      \
        }                                                                      \
        _Pragma("GCC unroll 4") for (; k < (kn); k++) { __VA_ARGS__; }         \
    } while (0)

/* The epilogue's lines of y, and of a residual apart from y, for rows
 * [0, R) and columns [col, col + cols): asked for into L1 (y for writing)
 * when a tile of the last piece starts, thousands of cycles before the
 * epilogue uses them. Rows of y lie a whole layer width apart, the lines
 * are cold, and the epilogue's stores, or its loads of the residual,
 * otherwise stalled the tile. In-process A/B, 4096 rows, 2 threads, Zen 4
 * held to AVX2, p10: 384 -> 384 + residual 6.62 -> 5.97 ms, 1536 -> 384 +
 * residual 23.4 -> 22.5, 384 -> 1152 17.7 -> 17.1; MiniLM-L6 32 x 128
 * through the engine 503 -> 495 and 509 -> 501 ms (natively 478 -> 468 and
 * 479 -> 471); BERT-base 32 x 128 and 8 or 64 tokens unchanged. GELU's
 * strip epilogue (panel_kernel) comes after all the strip's tiles: there
 * the same lines asked for into L2 gained nothing. */
TILE_INLINE void prefetch_epilogue(const panel_epi *e, int R, int col, int cols)
{
    const float *res = e->res != e->y ? e->res : NULL;
    for (int r = 0; r < R; r++)
        for (int c = col; c < col + cols && c < e->ncols; c += 16) {
            __builtin_prefetch(e->y + r * e->ldy + c, 1, 3);
            if (res) __builtin_prefetch(res + r * e->ldy + c, 0, 3);
        }
}

/* One k step of a 12-row tile: rows 3i + j are read at base[i] + j * lda,
 * so that four pointers and one stride address all twelve rows (twelve
 * pointers do not fit the general registers, and the compiler reloaded
 * them from the stack on every step). */
T512 TILE_INLINE void step512(const float *const base[4], int64_t lda, const float *bk, int64_t hs, __m512 *c0,
                              __m512 *c1, const int R)
{
    const __m512 b0 = _mm512_load_ps(bk), b1 = _mm512_load_ps(bk + hs);
#pragma GCC unroll 12
    for (int r = 0; r < R; r++) {
        const __m512 av = _mm512_set1_ps(base[r / 3][(r % 3) * lda]);
        c0[r] = _mm512_fmadd_ps(av, b0, c0[r]);
        c1[r] = _mm512_fmadd_ps(av, b1, c1[r]);
    }
}

T512 TILE_INLINE int tile512(const float *a, int64_t lda, const float *bp, int64_t hs, int64_t kn, float *ct,
                             int first, const panel_epi *e, const float *pf, int64_t pf_lines, const float *xn,
                             int xr, const int R)
{
    __m512 c0[MR512], c1[MR512];
#pragma GCC unroll 12
    for (int r = 0; r < R; r++) {
        c0[r] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(ct + r * NR);
        c1[r] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(ct + r * NR + 16);
    }
    const float *base[4] = {a, R > 3 ? a + 3 * lda : a, R > 6 ? a + 6 * lda : a, R > 9 ? a + 9 * lda : a};
    if (e) prefetch_epilogue(e, R, 0, NR);
    const pf_plan pl = plan_prefetch(kn, pf_lines, hs);
    TILE_K_LOOP(kn, pl, pf, xn, xr, lda, step512(base, lda, bp + k * HALF, hs, c0, c1, R);
                for (int i = 0; i < 4; i++) base[i]++);
#if TILE512_EPILOGUE
    if (e) {
        const uint32_t cols = e->ncols >= 32 ? 0xffffffffu : (1u << e->ncols) - 1;
        const __mmask16 m0 = (__mmask16)cols, m1 = (__mmask16)(cols >> 16);
        const __m512 b0 = e->bias ? _mm512_maskz_loadu_ps(m0, e->bias) : _mm512_setzero_ps();
        const __m512 b1 = e->bias ? _mm512_maskz_loadu_ps(m1, e->bias + 16) : _mm512_setzero_ps();
#pragma GCC unroll 12
        for (int r = 0; r < R; r++) epilogue512(e, c0[r], c1[r], r, m0, m1, b0, b1);
        return 1;
    }
#endif
#pragma GCC unroll 12
    for (int r = 0; r < R; r++) {
        _mm512_storeu_ps(ct + r * NR, c0[r]);
        _mm512_storeu_ps(ct + r * NR + 16, c1[r]);
    }
    return 0;
}

/* First row of tile t when a strip's rows are cut into n_tiles tiles of
 * at most MR rows: the rows are shared out evenly (8 rows on AVX2: 4 + 4,
 * not 6 + 2), because a tile of fewer rows than the FMA latency times the
 * FMA ports has too few independent accumulators and waits on its chains.
 * Each element's sum is unchanged, so are the bits. Linear 768 -> 3072 +
 * GELU, W warm, 2 threads, Ice Lake-SP, GFLOP/s before -> after: AVX-512
 * 13 rows (12 + 1 -> 7 + 6) 199.6 -> 222.7; AVX2 8 rows 123 -> 127, 13 rows
 * 142 -> 148, 20 rows 163 -> 169. */
static inline int tile_start(int t, int n_tiles, int rows) { return t * rows / n_tiles; }

/* The rows of x a block's first panel reads come from L3 or memory (the
 * previous op wrote them, most of them out of this core's L2), one line
 * of each of a tile's rows every 16 steps, and the hardware prefetchers
 * started too late on these short row streams: at 4096 rows a linear ran
 * 3-5% slower on x just out of cache than on x in L2. So during that
 * panel each tile of the first 16-column pass asks for the next tile's
 * rows of the piece, a line of each row every 16 steps, into L2: *xn and
 * *xr (NULL and 0: none). Later panels find the block's x in L2 (asking
 * again there cost 1%). In-process A/B, 2 threads, Zen 4, best of 12 on x
 * out of cache, 4096 rows, held to AVX2: 384 -> 1152 17.5 -> 16.9 ms,
 * 384 -> 384 5.97 -> 5.57, 1536 -> 384 22.4 -> 22.1, 384 -> 1536 + GELU
 * 25.4 -> 24.8, 768 -> 3072 + GELU 93.9 -> 93.4 (natively: 0-1.6% less);
 * MiniLM-L6 32 x 128 through the engine, p50: 472 -> 466 and 473 -> 465
 * ms (natively 464 -> 463); BERT-base 32 x 128 3468 -> 3457 ms; 8 and 64
 * tokens unchanged. */
static inline void next_tile_rows(const float *a, int64_t lda, int t, int n_tiles, int rows, int x_cold,
                                  const float **xn, int *xr)
{
    *xn = NULL;
    *xr = 0;
    if (!x_cold || t + 1 >= n_tiles) return;
    const int r1 = tile_start(t + 1, n_tiles, rows);
    *xn = a + r1 * lda;
    *xr = tile_start(t + 2, n_tiles, rows) - r1;
}

/* The epilogue of the rows from r0 on. */
static inline panel_epi epi_from(const panel_epi *e, int r0)
{
    panel_epi s = *e;
    s.y += r0 * e->ldy;
    if (s.res) s.res += r0 * e->ldy;
    return s;
}

T512 static int tiles_avx512(const float *a, int64_t lda, const float *bp, int64_t hs, int64_t kn,
                             const float *next, float *ct, int first, int rows, const panel_epi *e, int x_cold)
{
    const int n_tiles = (rows + MR512 - 1) / MR512;
    int done = 0;
    for (int t = 0; t < n_tiles; t++) {
        const int r0 = tile_start(t, n_tiles, rows), n = tile_start(t + 1, n_tiles, rows) - r0;
        const float *ar = a + r0 * lda, *pf;
        float *cr = ct + r0 * NR;
        panel_epi es;
        const panel_epi *er = e ? (es = epi_from(e, r0), &es) : NULL;
        int64_t pf_lines;
        next_piece_share(next, kn, n_tiles, t, &pf, &pf_lines);
        const float *xn;
        int xr;
        next_tile_rows(a, lda, t, n_tiles, rows, x_cold, &xn, &xr);
#define TILE512_CASE(R) \
    case R: done = tile512(ar, lda, bp, hs, kn, cr, first, er, pf, pf_lines, xn, xr, R); break;
        switch (n) {
            TILE512_CASE(12) TILE512_CASE(11) TILE512_CASE(10) TILE512_CASE(9) TILE512_CASE(8) TILE512_CASE(7)
            TILE512_CASE(6) TILE512_CASE(5) TILE512_CASE(4) TILE512_CASE(3) TILE512_CASE(2) TILE512_CASE(1)
        default: break;
        }
#undef TILE512_CASE
    }
    return done;
}

/* The AVX2 epilogue from registers, when this file's vector math is 8 lanes
 * of AVX2 (AVX2 builds; on AVX-512 builds the AVX2 kernel is only a test
 * subject and takes the strip path). */
#if IV_VL == 8 && defined(__AVX2__)
#define TILE256_EPILOGUE 1
/* Columns [col, col + 8) of row r; only the first e->ncols - col exist. */
T256 TILE_INLINE void epilogue256(const panel_epi *e, __m256 c, int r, int col)
{
    const int n = e->ncols - col < 8 ? e->ncols - col : 8;
    if (n <= 0) return;
    float *y = e->y + r * e->ldy + col;
    const float *res = e->res ? e->res + r * e->ldy + col : NULL;
    vf v = (vf)c;
    if (n == 8) {
        if (e->bias) v = v + v_load(e->bias + col);
        v = v_act(v, e->act);
        if (res) v = v + v_load(res);
        v_store(y, v);
    } else {
        if (e->bias) v = v + v_load_part(e->bias + col, n);
        v = v_act(v, e->act);
        if (res) v = v + v_load_part(res, n);
        v_store_part(y, v, n);
    }
}

/* The usual epilogue, no activation and all 16 columns there, of R rows:
 * bias and residual, the same additions as epilogue256, so the same bits.
 * epilogue256 went through v_act's switch once per vector and kept the
 * accumulators on the stack meanwhile: ~110 cycles of a 2300-cycle tile
 * at K = 384 (288 x 384 -> 1152, one thread, held to AVX2: 110.5 -> 113
 * GFLOP/s). A form of epilogue256 taking the activation as a constant
 * instead left the accumulators of the whole k loop on the stack. */
T256 TILE_INLINE void epilogue256_plain(const panel_epi *e, const __m256 *c0, const __m256 *c1, int col0,
                                        const int R)
{
    const __m256 b0 = e->bias ? _mm256_loadu_ps(e->bias + col0) : _mm256_setzero_ps();
    const __m256 b1 = e->bias ? _mm256_loadu_ps(e->bias + col0 + 8) : _mm256_setzero_ps();
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
        __m256 v0 = c0[r], v1 = c1[r];
        if (e->bias) {
            v0 = _mm256_add_ps(v0, b0);
            v1 = _mm256_add_ps(v1, b1);
        }
        float *y = e->y + r * e->ldy + col0;
        if (e->res) {
            const float *res = e->res + r * e->ldy + col0;
            v0 = _mm256_add_ps(v0, _mm256_loadu_ps(res));
            v1 = _mm256_add_ps(v1, _mm256_loadu_ps(res + 8));
        }
        _mm256_storeu_ps(y, v0);
        _mm256_storeu_ps(y + 8, v1);
    }
}
#else
#define TILE256_EPILOGUE 0
#endif

/* One 16-column half of the strip: bp and ct already point at the half,
 * col0 (0 or 16) says which. Prefetching as tile512. */
/* One k step of a 6-row tile, rows addressed as in step512. */
T256 TILE_INLINE void step256(const float *const base[2], int64_t lda, const float *bk, __m256 *c0, __m256 *c1,
                              const int R)
{
    const __m256 b0 = _mm256_load_ps(bk), b1 = _mm256_load_ps(bk + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
        const __m256 av = _mm256_broadcast_ss(base[r / 3] + (r % 3) * lda);
        c0[r] = _mm256_fmadd_ps(av, b0, c0[r]);
        c1[r] = _mm256_fmadd_ps(av, b1, c1[r]);
    }
}

T256 TILE_INLINE int tile256(const float *a, int64_t lda, const float *bp, int64_t kn, float *ct, int first,
                             const panel_epi *e, int col0, const float *pf, int64_t pf_lines, const float *xn,
                             int xr, const int R)
{
    __m256 c0[MR256], c1[MR256];
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
        c0[r] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(ct + r * NR);
        c1[r] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(ct + r * NR + 8);
    }
    const float *base[2] = {a, R > 3 ? a + 3 * lda : a};
    if (e) prefetch_epilogue(e, R, col0, 16);
    const pf_plan pl = plan_prefetch(kn, pf_lines, 0);
    TILE_K_LOOP(kn, pl, pf, xn, xr, lda, step256(base, lda, bp + k * HALF, c0, c1, R); base[0]++, base[1]++);
#if TILE256_EPILOGUE
    if (e && e->act == IV_ACT_NONE && e->ncols >= col0 + 16) {
        epilogue256_plain(e, c0, c1, col0, R);
        return 1;
    }
    if (e) {
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            epilogue256(e, c0[r], r, col0);
            epilogue256(e, c1[r], r, col0 + 8);
        }
        return 1;
    }
#endif
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
        _mm256_storeu_ps(ct + r * NR, c0[r]);
        _mm256_storeu_ps(ct + r * NR + 8, c1[r]);
    }
    return 0;
}

T256 static int tiles_avx2(const float *a, int64_t lda, const float *bp, int64_t hs, int64_t kn,
                           const float *next, float *ct, int first, int rows, const panel_epi *e, int x_cold)
{
    /* Each half's tiles bring in shares of that half of the next piece, so
     * that requests go out through the whole piece (the first half's tiles
     * alone left memory idle in the second: see plan_prefetch). */
    const int n_tiles = (rows + MR256 - 1) / MR256;
    int done = 0;
    for (int h = 0; h < 2; h++) {
        const float *bh = bp + h * hs;
        float *ch = ct + h * 16;
        for (int t = 0; t < n_tiles; t++) {
            const int r0 = tile_start(t, n_tiles, rows), n = tile_start(t + 1, n_tiles, rows) - r0;
            const float *ar = a + r0 * lda, *pf;
            float *cr = ch + r0 * NR;
            panel_epi es;
            const panel_epi *er = e ? (es = epi_from(e, r0), &es) : NULL;
            int64_t pf_lines;
            next_piece_share(next + h * hs, kn, n_tiles, t, &pf, &pf_lines);
            const float *xn;
            int xr;
            next_tile_rows(a, lda, t, n_tiles, rows, x_cold && h == 0, &xn, &xr);
#define TILE256_CASE(R) \
    case R: done = tile256(ar, lda, bh, kn, cr, first, er, h * 16, pf, pf_lines, xn, xr, R); break;
            switch (n) {
                TILE256_CASE(6) TILE256_CASE(5) TILE256_CASE(4) TILE256_CASE(3) TILE256_CASE(2) TILE256_CASE(1)
            default: break;
            }
#undef TILE256_CASE
        }
    }
    return done;
}

#endif

/* A kernel and the k of its pieces of a panel: 96 KiB a pass, the AVX-512
 * tiles reading a line of both halves of the panel a step, each of the
 * AVX2 kernel's two 16-column passes one half. Pieces once had to stay in
 * L1 (32 KiB: k = 256 and 384), when a panel was stored as [in][32]: one
 * half's lines were then 128 bytes apart and fell in only the even sets of
 * L1, 12 lines to each 8-way set at k = 384, and were read from L2 again
 * by every tile. Stored in halves (gemm_panel.h) a pass reads consecutive
 * lines, which L1's stream prefetcher brings from L2 ahead of the tile, so
 * longer pieces lose nothing and save their accumulator reloads and tile
 * calls. Held to AVX2, 2 threads, 4096 rows, GFLOP/s, k 384 -> 1536:
 * 768 -> 3072 216.3 -> 220.0 and 215.4 -> 219.2, 3072 -> 768 218.9 ->
 * 220.2 and 217.6 -> 225.5, 1536 -> 384 219.5 -> 223.3 and 222.0 -> 225.4;
 * 8 and 64 rows 1-2% more; BERT-base 32 x 128 through the engine, p10,
 * alternating processes: 3610 -> 3484 and 3663 -> 3316 ms. AVX-512, k 256
 * -> 768: 768 -> 3072 218.8 -> 221.9, 3072 -> 768 195.2 -> 198.0, 384 ->
 * 1152 216.4 -> 221.6, 64 x 3072 -> 768 210.5 -> 213.8. The halves alone
 * at the old k, one thread, held to AVX2: 288 x 1536 -> 384 113.1 ->
 * 114.0, 4096 x 384 -> 1536 109.7 -> 111.5. */
typedef struct panel_kernel {
    tiles_fn tiles;
    const char *name;
    int64_t kc;
    /* 0: GELU is left to the finished strip (iv_cpu_act_rows), not run in
     * the tile's epilogue. One GELU's dependency chain is ~75 cycles long;
     * act_rows runs four side by side (v_gelu_erf_n), and the AVX2 tile,
     * one vector at a time, took ~35 cycles per 8 floats against ~15-20
     * there. Linear + GELU, 4096 rows, W warm, 2 threads, Zen 4 held to
     * AVX2, GFLOP/s: 384 -> 1536 180 -> 191-193, 384 -> 1152 178-181 ->
     * 188-192; 64 x 768 -> 3072 204-205 -> 212. Four at a time inside the
     * tile instead pushed its accumulators onto the stack in the k loop.
     * The AVX-512 tile's epilogue, two 16-lane vectors per row, already ran
     * ~15-23 cycles per 8 floats and stays (the strip path: 24-30). */
    int gelu_in_tile;
} panel_kernel;

static const panel_kernel kernel_portable = {tiles_portable, "portable", 256, 0};
#ifdef PANEL_X86
static const panel_kernel kernel_avx2 = {tiles_avx2, "avx2", 1536, 0};
static const panel_kernel kernel_avx512 = {tiles_avx512, "avx512", 768, 1};
#endif

static const panel_kernel *pick_kernel(void)
{
#ifdef PANEL_X86
    __builtin_cpu_init();
    if (iv_cpu_isa_allows(IV_ISA_AVX512) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma"))
        return &kernel_avx512;
    if (iv_cpu_isa_allows(IV_ISA_AVX2) && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return &kernel_avx2;
#endif
    return &kernel_portable;
}

/* The kernel in use: picked at first call; tests may switch it
 * (iv_cpu_panel_use). Threads may race to fill it in; they all store the
 * same answer. */
static const panel_kernel *active;

static const panel_kernel *active_kernel(void)
{
    const panel_kernel *k = __atomic_load_n(&active, __ATOMIC_ACQUIRE);
    if (!k) {
        k = pick_kernel();
        __atomic_store_n(&active, k, __ATOMIC_RELEASE);
    }
    return k;
}

int iv_cpu_panel_use(const char *name)
{
    const panel_kernel *k = NULL;
    if (!strcmp(name, "portable")) k = &kernel_portable;
#ifdef PANEL_X86
    __builtin_cpu_init();
    const int fma = __builtin_cpu_supports("fma");
    if (!strcmp(name, "avx2") && fma && iv_cpu_isa_allows(IV_ISA_AVX2) && __builtin_cpu_supports("avx2"))
        k = &kernel_avx2;
    if (!strcmp(name, "avx512") && fma && iv_cpu_isa_allows(IV_ISA_AVX512) && __builtin_cpu_supports("avx512f"))
        k = &kernel_avx512;
#endif
    if (!strcmp(name, "auto")) k = pick_kernel();
    if (!k) return -1;
    __atomic_store_n(&active, k, __ATOMIC_RELEASE);
    return 0;
}

const char *iv_cpu_panel_kernel_name(void) { return active_kernel()->name; }

/* Bytes of x one row block may take: half the L2 cache (256 KiB when the
 * system does not say). */
static int64_t block_bytes(void)
{
    static int64_t cached;
    int64_t b = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (!b) {
        long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
        b = l2 > 0 ? l2 / 2 : 256 << 10;
        __atomic_store_n(&cached, b, __ATOMIC_RELAXED);
    }
    return b;
}

/* Row blocks: as many rows as fit the L2 budget, then the count rounded up
 * to a multiple of the thread count and the rows shared out evenly (block b
 * is rows [b M / n, (b + 1) M / n)), so that every thread gets the same
 * number of rows. Blocks cut at multiples of the tile height instead left
 * one short block (M = 1024 at K = 768: 336 + 336 + 336 + 16 rows, 672
 * against 352 on two threads). A block whose rows are not a multiple of
 * the tile height ends on one shorter tile. */
static int64_t row_blocks(int64_t M, int64_t K, int threads)
{
    int64_t mc = block_bytes() / (K * (int64_t)sizeof(float));
    mc = mc / MC_STEP * MC_STEP;
    if (mc < MC_STEP) mc = MC_STEP;
    if (mc > MC_MAX) mc = MC_MAX;
    int64_t n_mb = (M + mc - 1) / mc;
    if (n_mb > 1 && n_mb % threads) n_mb += threads - n_mb % threads;
    return n_mb < M ? n_mb : M;
}

/* The tiles read 12 rows of x in place, one float of each per step. Rows a
 * multiple of 512 floats apart (K = 1024, 1536, 2048, 3072 ...) start at
 * addresses equal modulo 2 KiB, so all 12 fall in one or two of the 64 L1
 * sets and, with the panel piece's lines there, evict each other. Scratch
 * activations that a linear reads are therefore laid out 16 floats wider,
 * which spreads their rows over all the sets. In-process A/B, x rows
 * K + 16 against K apart, 64 rows with W streamed from memory: K = 1024
 * 2.4% and K = 3072 3.0% less time (K = 768, which does not alias, 1.0%:
 * the noise); at 4096 rows, 0-1%. Copying the rows inside the kernel
 * instead gained at most 2% and lost 3% at 64 rows. */
static int pad_every_width;

int64_t iv_cpu_act_stride(int64_t cols)
{
    return cols % 512 == 0 || __atomic_load_n(&pad_every_width, __ATOMIC_RELAXED) ? cols + 16 : cols;
}

void iv_cpu_act_stride_pad_all(int on) { __atomic_store_n(&pad_every_width, on, __ATOMIC_RELAXED); }

/* GELU left to the strip (panel_kernel) on blocks of few rows: the tiles
 * store y + bias from registers, as every other epilogue, and GELU then
 * runs in place on y, once per group of panels whose block of y is about
 * DEFER_BYTES. The strip path (GELU from the 32-column buffer into y, one
 * call per panel) took 34 core cycles per 8 floats per call on short
 * inputs against ~20 for GELU alone in L1, and in this VM's slow phases
 * ~9 us per call instead of ~2.3 (BERT-base 64 tokens, rdtsc), which the
 * profile put on the call's first loads and stores, not on its
 * arithmetic. Same operations on each element, so the
 * same bits. In-process A/B, 2 threads, Zen 4 held to AVX2, 384 -> 1536 /
 * 768 -> 3072 + GELU op time per request: MiniLM-L6 64 tokens 3.41-3.54 ->
 * 2.59-2.81 ms (request 8.95-9.25 -> 7.99-8.56 ms); BERT-base 64 tokens
 * 17.8-18.5 -> 17.9-18.5 ms in quiet phases and 21.7-22.2 -> 18.7-19.3 ms
 * in the slow ones; BERT-base 8 tokens 3.31-3.42 -> 3.14-3.33 ms. Blocks
 * of 157 rows (BERT-base, 32 x 128) and 292 (MiniLM-L6) lost 0.5-2.5%
 * that way: the strip from L1 is cheaper than re-reading y there, so
 * they keep the strip. */
#define DEFER_MAX_ROWS 128
#define DEFER_BYTES (64 << 10)

/* One call's shared state. A unit is a row block and a run of panels,
 * [front, back) packed in one word so that its owner, taking panels from
 * the front, and any other thread, taking them from the back once every
 * unit has an owner, claim each panel exactly once with one CAS. */
typedef struct panel_call {
    iv_view y, x;
    const float *packed, *bias, *residual;
    iv_act act;
    const panel_kernel *kern;
    int64_t K, N, kc, n_mb, n_pg, units;
    int epi_in_tile, defer;
    int test_half;        /* iv_cpu_panel_leave_half_to_thieves */
    uint64_t *range;      /* [units]: front << 32 | back */
    int64_t next_unit;    /* units not yet owned: next_unit .. units - 1 */
} panel_call;

static int64_t unit_m0(const panel_call *c, int64_t u) { return (u / c->n_pg) * c->x.rows / c->n_mb; }
static int unit_rows(const panel_call *c, int64_t u)
{
    const int64_t mb = u / c->n_pg;
    return (int)((mb + 1) * c->x.rows / c->n_mb - mb * c->x.rows / c->n_mb);
}

/* Claims the front (owner) or back (anyone) panel of unit u into *p. */
static int claim_panel(panel_call *c, int64_t u, int back, int64_t *p)
{
    uint64_t r = __atomic_load_n(&c->range[u], __ATOMIC_RELAXED);
    for (;;) {
        const uint64_t f = r >> 32, b = r & 0xffffffffu;
        if (f >= b) return 0;
        const uint64_t want = back ? (f << 32 | (b - 1)) : ((f + 1) << 32 | b);
        if (__atomic_compare_exchange_n(&c->range[u], &r, want, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            *p = back ? (int64_t)b - 1 : (int64_t)f;
            return 1;
        }
    }
}

/* Panel p of unit u: its tiles over every k piece, then the epilogue from
 * the strip unless the kernel ran it from registers. x_cold: the first
 * panel this thread runs on the unit's rows (tiles_fn). */
static void run_panel(const panel_call *c, int64_t u, int64_t p, float *strip, int x_cold)
{
    const int64_t m0 = unit_m0(c, u), K = c->K, N = c->N;
    const int rows = unit_rows(c, u);
    const float *a = ((const float *)c->x.data) + m0 * c->x.ld, *panel = c->packed + p * K * NR;
    const int64_t n0 = p * NR, off = m0 * c->y.ld + n0;
    const float *res = c->defer ? NULL : c->residual;
    const panel_epi e = {((float *)c->y.data) + off, c->bias ? c->bias + n0 : NULL, res ? res + off : NULL, c->y.ld,
                         c->defer ? IV_ACT_NONE : c->act, (int)(N - n0 < NR ? N - n0 : NR)};
    const int in_tile = c->epi_in_tile || c->defer;
    int done = 0;
    if (K == 0) memset(strip, 0, (size_t)rows * NR * sizeof(float));
    for (int64_t k0 = 0; k0 < K; k0 += c->kc) {
        const int64_t kn = K - k0 < c->kc ? K - k0 : c->kc;
        /* The next piece: the rest of this panel, or the next panel's first. */
        const float *next = k0 + kn < K ? panel + (k0 + kn) * HALF : panel + K * NR;
        done = c->kern->tiles(a + k0, c->x.ld, panel + k0 * HALF, K * HALF, kn, next, strip, k0 == 0, rows,
                              k0 + kn == K && in_tile ? &e : NULL, x_cold);
    }
    if (!done) iv_cpu_act_rows(e.y, e.ldy, strip, NR, e.bias, e.act, e.res, e.ldy, rows, e.ncols);
}

/* The deferred GELU (and residual) on panels [pa, pb) of unit u's rows. */
static void act_panels(const panel_call *c, int64_t u, int64_t pa, int64_t pb)
{
    const int64_t m0 = unit_m0(c, u), c0 = pa * NR, c1 = pb * NR < c->N ? pb * NR : c->N;
    float *ya = ((float *)c->y.data) + m0 * c->y.ld + c0;
    iv_cpu_act_rows(ya, c->y.ld, ya, c->y.ld, NULL, c->act, c->residual ? c->residual + m0 * c->y.ld + c0 : NULL,
                    c->y.ld, unit_rows(c, u), c1 - c0);
}

static int half_to_thieves; /* iv_cpu_panel_leave_half_to_thieves */

void iv_cpu_panel_leave_half_to_thieves(int on) { __atomic_store_n(&half_to_thieves, on, __ATOMIC_RELAXED); }

/* The owner's run through unit u, front to back: consecutive panels, so
 * each tile's next-piece prefetch serves the next panel it computes. */
static void own_unit(panel_call *c, int64_t u, float *strip)
{
    const int64_t group = DEFER_BYTES / ((int64_t)unit_rows(c, u) * NR * (int64_t)sizeof(float));
    const uint64_t r0 = __atomic_load_n(&c->range[u], __ATOMIC_RELAXED);
    int64_t quota = c->test_half ? ((int64_t)(r0 & 0xffffffffu) - (int64_t)(r0 >> 32) + 1) / 2 : INT64_MAX;
    int64_t p, pa = -1, last = -1; /* GELU still to run on panels [pa, last] */
    for (int x_cold = 1; quota-- > 0 && claim_panel(c, u, 0, &p); x_cold = 0) {
        run_panel(c, u, p, strip, x_cold);
        if (!c->defer) continue;
        if (pa < 0) pa = p;
        last = p;
        if (last + 1 - pa >= group) {
            act_panels(c, u, pa, last + 1);
            pa = -1;
        }
    }
    if (c->defer && pa >= 0) act_panels(c, u, pa, last + 1);
}

/* Once every unit has an owner: takes the last panel of the unit with the
 * most left, while one has at least two. The owner has asked for its next
 * panel's first piece already (the tiles' next-piece prefetch), so that
 * one is left to it. */
static void steal_panels(panel_call *c, float *strip)
{
    for (int64_t last = -1;;) {
        int64_t best = -1, most = 0;
        for (int64_t u = 0; u < c->units; u++) {
            const uint64_t r = __atomic_load_n(&c->range[u], __ATOMIC_RELAXED);
            const int64_t left = (int64_t)(r & 0xffffffffu) - (int64_t)(r >> 32);
            if (left > most) most = left, best = u;
        }
        int64_t p;
        if (most < (c->test_half ? 1 : 2)) return;
        if (!claim_panel(c, best, 1, &p)) continue;
        run_panel(c, best, p, strip, best != last); /* its rows are cold here */
        last = best;
        if (c->defer) act_panels(c, best, p, p + 1);
    }
}

/* The ends of a linear call are uneven: a thread woken late, or slowed by
 * the machine, keeps the others waiting at the barrier (per request, the
 * faster of 2 threads waited 14.3 of 510 ms at the ends of MiniLM-L6's
 * 32 x 128 linears, 1.97 of 56 ms at BERT-base's 64 tokens; Zen 4 held to
 * AVX2). Idle threads take panels from the back of the units still
 * running. With and without, alternating run by run in one process, p50:
 * BERT-base 32 x 128 3515 -> 3503, 3451 -> 3448, 3587 -> 3559 ms; MiniLM-L6
 * 32 x 128 within 0.5% either way; 8 and 64 tokens unchanged, their ends
 * differing by less than the two panels a steal needs. On a loaded
 * machine, where a thread can lose its core for milliseconds, the others
 * finish its unit. */
void iv_cpu_linear_panels(iv_view y, iv_view x, const float *packed, const float *bias, iv_act act,
                          const float *residual)
{
    const int64_t M = x.rows, K = x.cols, N = y.cols;
    if (M == 0 || N == 0) return;
    const panel_kernel *kern = active_kernel();
    const int64_t n_panels = (N + NR - 1) / NR;
    const int threads = omp_get_max_threads();
    const int64_t n_mb = row_blocks(M, K, threads);
    /* Few row blocks (short inputs): split the panels too, so every thread
     * streams its own share of W. With one row block that is one run of
     * panels per thread: the next-piece prefetch then carries on from panel
     * to panel to the end of the thread's share, where two shorter runs
     * each began on an unfetched piece. Alternating run by run in one
     * process (2 threads, Ice Lake-SP), p50 against two runs per thread:
     * MiniLM-L6 8 tokens -1% / -3%, 32 -1%, 64 -1% / -0.4%; BERT-base
     * 8 tokens -0.1% / -1.8%, 64 -1% / -2%. */
    int64_t n_pg = 1;
    if (n_mb < 2 * threads) {
        n_pg = n_mb == 1 ? threads : (2 * threads + n_mb - 1) / n_mb;
        if (n_pg > n_panels) n_pg = n_panels;
    }
    /* Pieces of at most the kernel's kc, all about the same size (2000 =
     * 1000 + 1000 on AVX2, not 1536 + 464). */
    const int64_t n_kc = (K + kern->kc - 1) / kern->kc;
    panel_call c = {
        .y = y, .x = x, .packed = packed, .bias = bias, .residual = residual, .act = act, .kern = kern,
        .K = K, .N = N, .kc = n_kc > 1 ? ((K + n_kc - 1) / n_kc + 7) / 8 * 8 : kern->kc,
        .n_mb = n_mb, .n_pg = n_pg, .units = n_mb * n_pg,
        .epi_in_tile = act != IV_ACT_GELU || kern->gelu_in_tile,
        .test_half = __atomic_load_n(&half_to_thieves, __ATOMIC_RELAXED),
    };
    /* A residual that is y itself would be overwritten by y + bias. */
    c.defer = !c.epi_in_tile && (M + n_mb - 1) / n_mb <= DEFER_MAX_ROWS && residual != y.data;
    uint64_t few[256]; /* 4096 rows at K = 3072 are 98 units */
    c.range = c.units <= 256 ? few : iv_cpu_scratch((size_t)c.units * sizeof(uint64_t));
    for (int64_t u = 0; u < c.units; u++) {
        const int64_t pg = u % n_pg;
        c.range[u] = (uint64_t)(pg * n_panels / n_pg) << 32 | (uint64_t)((pg + 1) * n_panels / n_pg);
    }

#pragma omp parallel if (c.units > 1 && M * N * K >= PANEL_PAR_MIN)
    {
        float strip[MC_MAX * NR] __attribute__((aligned(64)));
        int64_t u;
        while ((u = __atomic_fetch_add(&c.next_unit, 1, __ATOMIC_RELAXED)) < c.units) own_unit(&c, u, strip);
        steal_panels(&c, strip);
    }
    if (c.range != few) free(c.range);
}
