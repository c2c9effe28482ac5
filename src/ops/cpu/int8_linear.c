/* The int8 linear: y = act(x W^T + b) (+ residual) with W quantized at load
 * (int8_pack.c) and x quantized here, per row, on every call.
 *
 * The product is cut into tiles of up to TILE_M rows x TILE_N_MAX columns,
 * each handed whole to one thread: the thread runs the micro-kernel over
 * STRIP columns of the tile at a time (int32 results in its scratch), then
 * dequantizes them and applies bias, activation and residual in one pass
 * (iv_cpu_dequant_act_rows). The residual may be y itself: each element is
 * read before it is written. */
#include <assert.h>
#include <math.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/int8_kernels.h"
#include "ops/cpu/vmath.h"

/* Rows per tile (a multiple of IV_INT8_MR): 48 rows of activations stay in
 * L2 while the tile's weight panels go by. */
#define TILE_M 48
/* Widest tile: 256 output rows of weights (256 KiB at in = 1024). */
#define TILE_N_MAX 256
/* Columns per unit of the column tiling: every kernel's panel width divides it. */
#define COL_UNIT 32
/* Columns whose integer products are dequantized together (run_tile). */
#define STRIP 64
/* Below this many multiply-adds a call stays on one thread. */
#define PAR_MIN_MACS (1 << 18)

/* ---- kernel choice ---- */

static pthread_once_t kernel_once = PTHREAD_ONCE_INIT;
static iv_int8_kernel kernel_active = IV_INT8_KERNEL_SCALAR;

static void pick_best_kernel(void)
{
    for (int k = IV_INT8_KERNEL_COUNT - 1; k >= 0; k--)
        if (iv_int8_kernel_desc_of((iv_int8_kernel)k)->available()) {
            kernel_active = (iv_int8_kernel)k;
            return;
        }
}

int iv_int8_kernel_available(iv_int8_kernel k)
{
    return (unsigned)k < IV_INT8_KERNEL_COUNT && iv_int8_kernel_desc_of(k)->available();
}

iv_int8_kernel iv_int8_kernel_active(void)
{
    pthread_once(&kernel_once, pick_best_kernel);
    return kernel_active;
}

void iv_int8_kernel_select(iv_int8_kernel k)
{
    pthread_once(&kernel_once, pick_best_kernel);
    if (iv_int8_kernel_available(k)) kernel_active = k;
}

const char *iv_int8_kernel_name(iv_int8_kernel k) { return iv_int8_kernel_desc_of(k)->name; }

int iv_int8_kernel_qmax(iv_int8_kernel k) { return iv_int8_kernel_desc_of(k)->qmax; }

/* ---- activations ---- */

typedef uint16_t v8u16 __attribute__((vector_size(16)));
typedef uint8_t v8u8 __attribute__((vector_size(8)));

/* Stores 8 (or the first m < 8) quantized values as uint8 or uint16. */
static inline void store_q(void *q, int64_t i, vi v, int wide, int64_t m)
{
    if (wide) {
        v8u16 n = __builtin_convertvector(v, v8u16);
        memcpy((uint16_t *)q + i, &n, (size_t)m * sizeof(uint16_t));
    } else {
        v8u8 n = __builtin_convertvector(v, v8u8);
        memcpy((uint8_t *)q + i, &n, (size_t)m);
    }
}

static inline vi quantize8(vf x, vf inv, vi zero)
{
    /* Adding and removing 1.5 * 2^23 rounds to the nearest integer, ties to
     * even, for |t| < 2^22 (here |t| <= 255): the same as nearbyintf. Kept
     * as separate statements so no compiler contracts them into an FMA. */
    const vf magic = v_set1(12582912.0f);
    vf t = x * inv;
    t = t + magic;
    t = t - magic;
    vi q = __builtin_convertvector(t, vi) + zero;
    q &= ~(q < 0);
    const vi over = q > 255;
    return (q & ~over) | (over & 255);
}

#if defined(__AVX2__)
/* uint8 activations 32 at a time, the same values as quantize8: vcvtps2dq
 * rounds to nearest, ties to even (the default MXCSR mode), as the magic
 * constant does; |round(x / s)| <= 255, so neither the 16-bit pack nor the
 * 16-bit addition of the zero point saturates, and the unsigned pack then
 * clamps to 0..255. A quarter of quantize8's instructions per value (the
 * quantize pass was about a tenth of an int8 linear's time at K = 1536).
 * Returns how many values it wrote. */
static int64_t quantize_u8_avx2(const float *x, int64_t n, float inv, int32_t z, uint8_t *q)
{
    const __m256 vinv = _mm256_set1_ps(inv);
    const __m256i vz = _mm256_set1_epi16((short)z);
    /* packs and packus interleave the 128-bit halves: dwords come out as
     * a0 b0 c0 d0 a1 b1 c1 d1 (each 4 values of input block a..d, half 0/1). */
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i), vinv));
        const __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8), vinv));
        const __m256i c = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 16), vinv));
        const __m256i d = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 24), vinv));
        const __m256i ab = _mm256_adds_epi16(_mm256_packs_epi32(a, b), vz);
        const __m256i cd = _mm256_adds_epi16(_mm256_packs_epi32(c, d), vz);
        const __m256i u = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(ab, cd), order);
        _mm256_storeu_si256((__m256i *)(q + i), u);
    }
    return i;
}
#endif

/* Quantizes x[0..n) into q (uint8, or uint16 when wide) and zero-fills q up to kp. */
static void quantize_row(const float *x, int64_t n, int64_t kp, void *q, int wide, float *scale, int32_t *zero)
{
    /* The range always holds 0, so the zero point is an integer in 0..255.
     * Four independent minima and maxima: one chain of them would wait on
     * each compare-and-select, and this pass reads x from memory for the
     * first time. Minimum and maximum do not depend on the order. */
    vf lo = v_zero(), hi = v_zero();
    vi bad = {0};
    int64_t i = 0;
    if (n >= 4 * IV_VL) {
        vf lo4[4] = {lo, lo, lo, lo}, hi4[4] = {hi, hi, hi, hi};
        for (; i + 4 * IV_VL <= n; i += 4 * IV_VL)
            for (int u = 0; u < 4; u++) {
                vf v = v_load(x + i + u * IV_VL), d = v - v; /* NaN for NaN and +-inf */
                lo4[u] = v_min(v, lo4[u]);
                hi4[u] = v_max(v, hi4[u]);
                bad |= d != d;
            }
        lo = v_min(v_min(lo4[0], lo4[1]), v_min(lo4[2], lo4[3]));
        hi = v_max(v_max(hi4[0], hi4[1]), v_max(hi4[2], hi4[3]));
    }
    for (; i + IV_VL <= n; i += IV_VL) {
        vf v = v_load(x + i), d = v - v;
        lo = v_min(v, lo);
        hi = v_max(v, hi);
        bad |= d != d;
    }
    if (i < n) {
        vf v = v_load_part(x + i, n - i), d = v - v;
        lo = v_min(v, lo);
        hi = v_max(v, hi);
        bad |= d != d;
    }
    int any_bad = 0;
    for (int l = 0; l < IV_VL; l++) any_bad |= bad[l] != 0;
    const float lo_s = -v_hmax(-lo), hi_s = v_hmax(hi);
    const float s = (hi_s - lo_s) / 255.0f;
    memset((char *)q + (wide ? 2 : 1) * n, 0, (size_t)(kp - n) * (wide ? 2 : 1));
    if (any_bad || !isfinite(s) || s == 0.0f) {
        /* Non-finite input: NaN outputs, as the FP32 path gives. All zeros: 0. */
        *scale = any_bad || !isfinite(s) ? NAN : 0.0f;
        *zero = 0;
        memset(q, 0, (size_t)n * (wide ? 2 : 1));
        return;
    }
    const float inv = 1.0f / s;
    float zf = nearbyintf(-lo_s * inv);
    zf = fminf(fmaxf(zf, 0.0f), 255.0f);
    const int32_t z = (int32_t)zf;
    const vf vinv = v_set1(inv);
    const vi vz = {z, z, z, z, z, z, z, z};
    i = 0;
#if defined(__AVX2__)
    if (!wide) i = quantize_u8_avx2(x, n, inv, z, q);
#endif
    for (; i + IV_VL <= n; i += IV_VL) store_q(q, i, quantize8(v_load(x + i), vinv, vz), wide, IV_VL);
    if (i < n) store_q(q, i, quantize8(v_load_part(x + i, n - i), vinv, vz), wide, n - i);
    *scale = s;
    *zero = z;
}

void iv_int8_quantize_row(const float *x, int64_t n, uint8_t *q, float *scale, int32_t *zero)
{
    quantize_row(x, n, n, q, 0, scale, zero);
}

/* ---- the product ---- */

typedef struct int8_call {
    const iv_int8_kernel_desc *kd;
    const uint8_t *aq;    /* quantized activations, rows of a_stride bytes */
    size_t a_stride;
    const float *a_scale; /* [rows] */
    const int32_t *a_zero;
    const int8_t *wq;     /* packed weights */
    const int32_t *w_sums;
    const float *w_scale;
    int64_t rows, out, kp;
    int64_t units, tiles_n; /* column tile t: 32-column units [t * units / tiles_n, (t + 1) * units / tiles_n) */
    iv_view y;
    const float *bias, *residual;
    iv_act act;
} int8_call;

/* Runs tile t, STRIP columns at a time: the integer products of the strip
 * into acc [TILE_M, STRIP], then its epilogue. Strip by strip, acc (12 KiB)
 * stays in L1 and the epilogue's stores to y spread over the tile's work
 * instead of coming all at the end. Held to AVX2, 2 threads, 4096 rows,
 * one process alternating with one epilogue over the whole tile (acc
 * 48 KiB) and strips of 32, 64 and 128 columns, ms:
 *   384 -> 1152: 9.45 / 9.13 / 9.12 / -, in a slow phase of this VM 11.8 /
 *   9.81 / 9.84 / 10.2; 1536 -> 384 13.7 / 13.0 / 13.2; 384 -> 384 3.73 /
 *   3.63 / 3.64; 384 -> 1536 + GELU 14.9 / 15.6 / 15.1 / 15.0, slow phase
 *   18.2 / 16.5 / 16.5 / 17.0; 64 rows + GELU 0.278 / 0.263 / 0.260;
 *   8 rows unchanged.
 * Each element is dequantized the same way either way: same bits. */
static void run_tile(const int8_call *c, int64_t t, int32_t *acc)
{
    const int64_t r0 = (t / c->tiles_n) * TILE_M, ct = t % c->tiles_n;
    const int64_t r1 = r0 + TILE_M < c->rows ? r0 + TILE_M : c->rows;
    const int64_t c0 = ct * c->units / c->tiles_n * COL_UNIT, c1 = (ct + 1) * c->units / c->tiles_n * COL_UNIT;
    const int cols = c->kd->cols;
    const float *res_apart = c->residual != c->y.data ? c->residual : NULL; /* prefetched besides y */
    /* The rows go to as few micro-tiles as IV_INT8_MR allows, shared out
     * evenly: 8 rows are 4 + 4, not 6 + 2, whose 2-row tile reads every
     * panel again for a third of the work (the integer sums are exact, so
     * the split leaves the bits alone). Held to AVX2, 2 threads, op time
     * against 6-row tiles first: 20 rows 384 -> 1152 0.064 -> 0.061 ms,
     * 64 rows 0.168 -> 0.165, 8 rows 1536 -> 384 0.034 -> 0.033. */
    const int64_t n_mt = (r1 - r0 + IV_INT8_MR - 1) / IV_INT8_MR;
    for (int64_t s = c0; s < c1 && s < c->out; s += STRIP) {
        const int64_t s1 = s + STRIP < c1 ? s + STRIP : c1;
        for (int64_t j = s; j < s1; j += cols) {
            const int8_t *panel = c->wq + j * c->kp;
            for (int64_t mt = 0; mt < n_mt; mt++) {
                const int64_t r = r0 + mt * (r1 - r0) / n_mt;
                const int rows = (int)(r0 + (mt + 1) * (r1 - r0) / n_mt - r);
                /* The first row tile over these panels fetches the next
                 * ones (the others find both in cache): weights come from
                 * memory on short requests, and the hardware prefetcher
                 * alone started each group cold. all-MiniLM-L6-v2 int8,
                 * held to AVX2, one process alternating without, into L1
                 * and into L2, p50: 64 tokens 4.76 / 4.51 / 4.41 ms and
                 * 5.95 / 5.67 / 5.60, 8 tokens 0.626 / 0.608 / 0.604 and
                 * 0.651 / 0.616 / 0.610, 32 x 128 290.9 / 290.0 / 289.8. */
                const int8_t *pf = mt == 0 && j + cols < c1 ? panel + cols * c->kp : NULL;
                c->kd->tile(c->aq + (size_t)r * c->a_stride, c->a_stride, rows, panel, c->kp,
                            acc + (r - r0) * STRIP + (j - s), STRIP, pf);
                /* The lines of y (and of a residual apart from y) that the
                 * epilogue will read and write for these rows and columns,
                 * into L2, while the integer work goes on: without this the
                 * epilogue stalled on its stores to cold lines. Into L1 they
                 * would evict the tile's own data. all-MiniLM-L6-v2 32 x 128
                 * int8, Zen 4 held to AVX2: epilogue 15% -> 9.5% of the
                 * time, p50 306 -> 299 and 309 -> 303 ms; 8 and 64 tokens
                 * unchanged. */
                for (int64_t i = r; i < r + rows; i++)
                    for (int64_t k = j; k < j + cols && k < c->out; k += 16) {
                        __builtin_prefetch(((const float *)c->y.data) + i * c->y.ld + k, 0, 2);
                        if (res_apart) __builtin_prefetch(res_apart + i * c->y.ld + k, 0, 2);
                    }
            }
        }
        const int64_t n = (s1 < c->out ? s1 : c->out) - s;
        iv_cpu_dequant_act_rows(((float *)c->y.data) + r0 * c->y.ld + s, c->y.ld, acc, STRIP, c->a_zero + r0,
                                c->a_scale + r0, c->w_sums + s, c->w_scale + s, c->bias ? c->bias + s : NULL, c->act,
                                c->residual ? c->residual + r0 * c->y.ld + s : NULL, c->y.ld, r1 - r0, n);
    }
}

/* Column tiling: at most TILE_N_MAX wide, and narrow enough that a few row
 * tiles (a short request) still give every thread work. With one row tile
 * the column tiles are as many as a multiple of the thread count and
 * differ by at most one 32-column unit, so every thread gets the same
 * work: MiniLM-L6's 1152 columns were 5 tiles of 256 on 2 threads, one
 * thread computing 3 while the other waited. all-MiniLM-L6-v2 int8
 * through the engine, p50 with 5 balanced tiles -> 6, alternating run by
 * run in one process (2 threads, Zen 4 held to AVX2): 8 tokens 0.631 ->
 * 0.614 ms, 32 tokens 2.28 -> 2.20, 48 tokens 3.50 -> 3.39. */
static void plan_columns(int8_call *c, int threads)
{
    const int64_t units = iv_int8_padded_out(c->out) / COL_UNIT, tiles_m = (c->rows + TILE_M - 1) / TILE_M;
    int64_t want = (units * COL_UNIT + TILE_N_MAX - 1) / TILE_N_MAX;
    if (tiles_m * want < 2 * (int64_t)threads) {
        int64_t need = (2 * (int64_t)threads + tiles_m - 1) / tiles_m;
        if (need > want) want = need;
    }
    if (tiles_m == 1) want = (want + threads - 1) / threads * threads;
    if (want > units) want = units;
    c->units = units;
    c->tiles_n = want;
}

void iv_cpu_linear_int8(const iv_ops *ops, iv_view y, iv_view x, const iv_tensor *w, const iv_tensor *b,
                        iv_act act, const void *residual_or_null)
{
    const float *residual = residual_or_null;
    const int64_t rows = x.rows, in = x.cols, out = y.cols;
    assert(w->dtype == IV_I8 && w->scales && w->shape[0] == out && w->shape[1] == in);
    assert(in < IV_INT8_MAX_IN);
    assert(!b || (b->dtype == IV_F32 && iv_tensor_numel(b) == out));
    assert(y.rows == rows);
    if (rows == 0 || out == 0) return;

    /* 8-bit weights on a CPU whose best kernel needs 7-bit ones (they were
     * quantized with IV_INT8_WEIGHT_BITS=8, or the kernel was switched after
     * loading): the exact AVX2 kernel, which that CPU has. */
    const iv_int8_kernel_desc *kd = iv_int8_kernel_desc_of(iv_int8_kernel_active());
    if (iv_int8_blob_qmax(w->data, out, in) > kd->qmax) kd = iv_int8_kernel_desc_of(IV_INT8_KERNEL_AVX2);
    int8_call c = {
        .kd = kd,
        .wq = w->data,
        .w_sums = (const int32_t *)((const char *)w->data + iv_int8_sums_offset(out, in)),
        .w_scale = w->scales,
        .rows = rows, .out = out, .kp = iv_int8_padded_in(in),
        .y = y, .bias = b ? iv_f32(b) : NULL, .residual = residual, .act = act,
    };
    const int wide = c.kd->wide;
    c.a_stride = (size_t)c.kp * (wide ? 2 : 1);
    uint8_t *aq = iv_cpu_scratch((size_t)rows * c.a_stride);
    float *a_scale = iv_cpu_scratch((size_t)rows * sizeof(float));
    int32_t *a_zero = iv_cpu_scratch((size_t)rows * sizeof(int32_t));
    c.aq = aq;
    c.a_scale = a_scale;
    c.a_zero = a_zero;

#pragma omp parallel for schedule(static) if (rows * in >= IV_CPU_PAR_MIN)
    for (int64_t t = 0; t < rows; t++)
        quantize_row(((float *)x.data) + t * x.ld, in, c.kp, aq + (size_t)t * c.a_stride, wide, &a_scale[t], &a_zero[t]);

    const int par = (double)rows * (double)out * (double)in >= PAR_MIN_MACS;
    plan_columns(&c, par ? omp_get_max_threads() : 1);
    const int64_t tiles = ((rows + TILE_M - 1) / TILE_M) * c.tiles_n;
#pragma omp parallel if (par)
    {
        int32_t *acc = iv_cpu_scratch((size_t)(TILE_M * STRIP) * sizeof(int32_t));
        /* Dynamic: on a shared machine a descheduled thread must not hold
         * back the others; a tile is tens of microseconds of work. */
#pragma omp for schedule(dynamic)
        for (int64_t t = 0; t < tiles; t++) run_tile(&c, t, acc);
        free(acc);
    }
    free(aq);
    free(a_scale);
    free(a_zero);
}
