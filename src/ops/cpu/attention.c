/* Attention over packed sequences (iv_attn_args in ops/ops.h), FP32.
 *
 * For query i and key j of the same sequence (indices local to it):
 *   visible(i, j) = (!causal || j <= i) && (wl < 0 || i - j <= wl)
 *                   && (wr < 0 || j - i <= wr) && key_mask[j] != 0
 *   s(i, j) = softcap(scale * q_i . k_j) + bias[h, i, j] - slope_h * |i - j|
 *   (softcap_after_bias: softcap(scale * q_i . k_j + bias[h, i, j]) - ...)
 *   out_i   = sum_j softmax_j(s(i, j)) v_j  over the visible j
 * The softcap applies to the scaled dot product before any additive term,
 * as in Gemma 2 (tanh-capping, then the mask). A query that sees no key at
 * all (only possible through key_mask) gets a zero output row; torch would
 * produce NaN or, with a finite mask value, an average of excluded values.
 *
 * Work is split into blocks of BQ queries of one (sequence, head), handed
 * to OpenMP threads dynamically since causal and windowed blocks differ in
 * cost: a task is one (sequence, head) with all its blocks when there are
 * enough of those for every thread, else one block. A block works on the
 * keys any of its queries can see (the union of their windows, jlo..jhi)
 * and keeps the scores transposed, st[key][query], so that every step is a
 * broadcast-and-FMA loop over contiguous memory:
 *   1. Q^T for the block is packed in panels of 16 queries; scores for 6
 *      keys x 16 queries (x 2 panels on AVX-512) come from K rows read in
 *      place (no K copy);
 *   2. softmax sweeps the rows of st with vector lanes holding queries:
 *      scale, softcap, bias, ALiBi, window and key masks, max, then
 *      exp(s - max) and the sums (zero weight outside each query's window).
 *      In a plain block (every query sees the same keys, nothing added:
 *      encoders without masks) the score tiles store the scaled scores and
 *      keep the maxima, so only the exp sweep is left, same bits (32 x
 *      L=128, d=32, 2 threads: 7% less time in attention);
 *   3. P V accumulates 6 queries x 16 dims (x 2 panels on AVX-512) per step
 *      over V packed in tiles of KT keys x 16 dims, then each row is scaled
 *      by 1 / sum.
 * Rows of Q, K, V and the output are ld apart, a page or more, so no
 * hardware prefetcher follows them: the block prefetches the next score
 * tile's K rows and its V rows during step 1, and during step 3 the output
 * rows it will write and the next block's queries and first keys (pairs
 * are claimed one ahead to know it). 32 x L=128, 2 threads, bench_ops
 * attention on Zen 4 held to AVX2 with the AVX2 Q transpose below:
 * d=32 101 -> 113-132 GFLOP/s, d=64 136 -> 141; natively (AVX-512) d=32
 * 117 -> 121, d=64 150 -> 155.
 * The 6 x 16 micro-tiles keep 12 accumulators, two operand vectors and a
 * broadcast in the 16 AVX2 registers; 4 x 16 left the loads, not the FMAs,
 * as the bottleneck (~45 instead of ~65 GFLOP/s per core at L = 512). On
 * AVX-512 the 6 x 32 tiles (12 zmm accumulators) and 16-lane softmax took
 * bench_ops from 109 to 137 GFLOP/s at 32 x L=128 and from 130 to 196 at
 * 8 x L=512 (2 threads, Xeon).
 * Per-thread scratch is BQ x (longest sequence) scores plus the packed Q
 * block, one V tile and the output block: ~2.1 MiB at 8192 tokens and head
 * dim 128, whatever the batch size. */
#include <assert.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "ops/cpu/cpu_ops.h"
/* Softmax and the V packing sweep 16 queries / dims per vector on AVX-512
 * builds (elementwise, so the same bits as at 8). */
#define IV_VMATH_WIDE
#include "ops/cpu/vmath.h"

#define ATT_BQ 64  /* queries per task; the row stride of the score buffer (16
                    * and 32 measured slower, 128 no better) */
#define ATT_KT 128 /* keys per packed V tile (8 KiB per 16-dim panel) */
#define ATT_KR 6   /* keys per score micro-tile */
#define ATT_QR 6   /* queries per P V micro-tile */
/* Work (sum of len^2 x heads x head_dim) from which attention runs on every
 * thread. One 64-token MiniLM-L6 sequence is 1.6 M: under the 2.1 M this
 * was before, its attention ran on one thread while the other idled, about
 * 5% of the request; at this bound it is shared, and the request's p50
 * fell 3-9% (11.7 -> 10.6 ms in the first of four sets of 400 runs each
 * way, the two bounds alternating run by run; 2 threads, Ice Lake-SP). 16
 * and 32 tokens, MiniLM-L6 or BERT-base, did not move either way. A task is
 * still a whole (sequence, head) pair or query block, so the bits do not
 * depend on the thread count. */
#define ATT_PAR_MIN (4 * IV_CPU_PAR_MIN)

static int64_t round16(int64_t n) { return (n + 15) & ~(int64_t)15; }

typedef struct {
    float *qp;  /* [BQ/16][head_dim][16] packed queries */
    float *st;  /* [keys][BQ] scores, then unnormalised weights */
    float *vp;  /* [round16(head_dim)/16][KT][16] packed value tile */
    float *o;   /* [BQ][round16(head_dim)] output accumulators */
    float *inv; /* [BQ] 1 / softmax denominators (0: no visible key) */
    float *mx;  /* [BQ] score maxima the score tiles keep (plain blocks) */
    const float *vp_src; /* first V row packed in vp (NULL: none) and how */
    int64_t vp_rows;     /* many: V is read-only during the call, so the same
                          * rows need no second packing */
    const float *next_q; /* the next block this thread will run: its first */
    int64_t next_nq;     /* query row and count, and its first key rows, to */
    const float *next_k; /* prefetch (next_q NULL: none known) */
    int64_t next_nk;
} att_scratch;

/* The keys of a sequence of length len that query i may see: [lo, hi]. */
static int64_t key_lo(const iv_attn_args *a, int64_t i)
{
    int64_t lo = a->window_left >= 0 ? i - a->window_left : 0;
    return lo < 0 ? 0 : lo;
}
static int64_t key_hi(const iv_attn_args *a, int64_t i, int64_t len)
{
    int64_t hi = len - 1;
    if (a->causal && i < hi) hi = i;
    if (a->window_right >= 0 && i + a->window_right < hi) hi = i + a->window_right;
    return hi;
}

/* The micro-kernels work on panels of 16 lanes (16 queries of packed Q,
 * or 16 dims of packed V): one zmm on AVX-512 builds, a pair of 8-lane
 * vectors (two ymm) otherwise. AVX-512 has the registers for two panels
 * per tile (6 x 2 accumulators), so each broadcast feeds twice the FMAs;
 * AVX2 takes one. Every lane is the same FMA chain either way. The pair is
 * a struct of two register vectors, not a 64-byte GCC vector: on AVX2 the
 * compiler kept those on the stack, and attention ran 10x slower than on
 * AVX-512 instead of about 2x (32 x L=128, d=32, 2 threads: 57.6 ms). */
#if defined(__AVX512F__)
#define ATT_PANELS 2
typedef __m512 v16f;
IV_VINLINE v16f v16_load(const float *p) { return _mm512_loadu_ps(p); }
IV_VINLINE void v16_store(float *p, v16f v) { _mm512_storeu_ps(p, v); }
IV_VINLINE v16f v16_set1(float s) { return _mm512_set1_ps(s); }
IV_VINLINE v16f v16_zero(void) { return _mm512_setzero_ps(); }
IV_VINLINE v16f v16_mul(v16f a, v16f b) { return _mm512_mul_ps(a, b); }
IV_VINLINE v16f v16_fma(v16f a, v16f b, v16f c) { return _mm512_fmadd_ps(a, b, c); }
/* b where a <= b or either is NaN, as v_max: same bits as the softmax sweep. */
IV_VINLINE v16f v16_max(v16f a, v16f b) { return _mm512_max_ps(a, b); }
#else
#define ATT_PANELS 1
typedef struct {
    vf lo, hi;
} v16f;
IV_VINLINE v16f v16_load(const float *p) { return (v16f){v_load(p), v_load(p + 8)}; }
IV_VINLINE void v16_store(float *p, v16f v)
{
    v_store(p, v.lo);
    v_store(p + 8, v.hi);
}
IV_VINLINE v16f v16_set1(float s) { return (v16f){v_set1(s), v_set1(s)}; }
IV_VINLINE v16f v16_zero(void) { return (v16f){v_zero(), v_zero()}; }
IV_VINLINE v16f v16_mul(v16f a, v16f b) { return (v16f){a.lo * b.lo, a.hi * b.hi}; }
IV_VINLINE v16f v16_fma(v16f a, v16f b, v16f c) { return (v16f){v_fma(a.lo, b.lo, c.lo), v_fma(a.hi, b.hi, c.hi)}; }
IV_VINLINE v16f v16_max(v16f a, v16f b) { return (v16f){v_max(a.lo, b.lo), v_max(a.hi, b.hi)}; }
#endif

/* st[kr][p*16 .. p*16+15] = k_kr . (queries of panel p) for R key rows k[kr]
 * and P panels of packed Q (qp[p][c][16], panels d*16 apart). R and P are
 * constants after inlining, so the accumulators stay in registers. With mx
 * (plain blocks, see attend_block) the tile stores the scores times scale,
 * final as the softmax wants them, and folds them into the running
 * per-query maxima mx[p*16 ..]: the same products and the same maxima as
 * the softmax's own first sweep would make, one sweep over st fewer. */
static inline __attribute__((always_inline)) void score_tile(int R, int P, const float *const *k, int d,
                                                             const float *qp, float *st, float scale, float *mx)
{
    v16f acc[ATT_KR][ATT_PANELS];
    for (int r = 0; r < R; r++)
        for (int p = 0; p < P; p++) acc[r][p] = v16_zero();
    for (int c = 0; c < d; c++) {
        v16f q[ATT_PANELS];
        for (int p = 0; p < P; p++) q[p] = v16_load(qp + (int64_t)p * d * 16 + c * 16);
        for (int r = 0; r < R; r++) {
            const v16f kb = v16_set1(k[r][c]);
            for (int p = 0; p < P; p++) acc[r][p] = v16_fma(kb, q[p], acc[r][p]);
        }
    }
    if (mx) {
        const v16f sc = v16_set1(scale);
        for (int p = 0; p < P; p++) {
            v16f m = v16_load(mx + p * 16);
            for (int r = 0; r < R; r++) {
                const v16f v = v16_mul(acc[r][p], sc);
                v16_store(st + r * ATT_BQ + p * 16, v);
                m = v16_max(m, v);
            }
            v16_store(mx + p * 16, m);
        }
        return;
    }
    for (int r = 0; r < R; r++)
        for (int p = 0; p < P; p++) v16_store(st + r * ATT_BQ + p * 16, acc[r][p]);
}

/* Calls fn(R, P, ...) with R (1..6) a constant, so the tile's loops over
 * R unroll; P (panels, or the block's panel count) is passed through. */
#define ATT_SWITCH_R(fn, R, P, ...)          \
    switch (R) {                             \
    case 6: fn(6, P, __VA_ARGS__); break;    \
    case 5: fn(5, P, __VA_ARGS__); break;    \
    case 4: fn(4, P, __VA_ARGS__); break;    \
    case 3: fn(3, P, __VA_ARGS__); break;    \
    case 2: fn(2, P, __VA_ARGS__); break;    \
    default: fn(1, P, __VA_ARGS__); break;   \
    }

/* The score tiles of R key rows against all n16 panels of the block's
 * queries, in one call: with d = 32 a tile is only 32 steps, and a call
 * and switch per panel cost 2.5% of the attention time (32 x L=128, one
 * thread, held to AVX2: 10.47 -> 10.20 ms; natively 10.41 -> 10.17; d=64
 * 0.3-1%). */
static inline __attribute__((always_inline)) void score_panels(int R, int n16, const float *const *k, int d,
                                                               const float *qp, float *st, float scale, float *mx)
{
    int p = 0;
    for (; p + ATT_PANELS <= n16; p += ATT_PANELS)
        score_tile(R, ATT_PANELS, k, d, qp + (int64_t)p * d * 16, st + p * 16, scale, mx ? mx + p * 16 : NULL);
    if (p < n16) score_tile(R, 1, k, d, qp + (int64_t)p * d * 16, st + p * 16, scale, mx ? mx + p * 16 : NULL);
}

static void score_rows(int R, int n16, const float *const *k, int d, const float *qp, float *st, float scale,
                      float *mx)
{
    ATT_SWITCH_R(score_panels, R, n16, k, d, qp, st, scale, mx)
}

/* o[r][p*16 ..] (+)= sum_jj p[jj][r] vp[p][jj][0..15] for R queries and P
 * panels of packed V (KT*16 apart); p rows are ATT_BQ apart. */
static inline __attribute__((always_inline)) void pv_tile(int R, int P, const float *pr, int64_t kn,
                                                          const float *vp, float *o, int64_t o_ld, int first)
{
    v16f acc[ATT_QR][ATT_PANELS];
    for (int r = 0; r < R; r++)
        for (int p = 0; p < P; p++) acc[r][p] = first ? v16_zero() : v16_load(o + r * o_ld + p * 16);
    for (int64_t jj = 0; jj < kn; jj++) {
        v16f v[ATT_PANELS];
        for (int p = 0; p < P; p++) v[p] = v16_load(vp + (int64_t)p * ATT_KT * 16 + jj * 16);
        for (int r = 0; r < R; r++) {
            const v16f pb = v16_set1(pr[jj * ATT_BQ + r]);
            for (int p = 0; p < P; p++) acc[r][p] = v16_fma(pb, v[p], acc[r][p]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int p = 0; p < P; p++) v16_store(o + r * o_ld + p * 16, acc[r][p]);
}

static void pv_rows(int R, int P, const float *pr, int64_t kn, const float *vp, float *o, int64_t o_ld, int first)
{
    if (P == 2 && ATT_PANELS == 2) {
        ATT_SWITCH_R(pv_tile, R, 2, pr, kn, vp, o, o_ld, first)
    } else {
        ATT_SWITCH_R(pv_tile, R, 1, pr, kn, vp, o, o_ld, first)
    }
}

/* exp(s - max) for the n vectors of one row of st from group g on (n a
 * constant after inlining), adding them into the sums. s - max <= 0 and
 * finite here, so one clamp replaces v_exp's range checks (7% less
 * attention time at d = 32). Below -86.6 the weight is e^-86.6 ~ 2e-38
 * instead of 0: no sum or output moves. The clamp's operand order lets a
 * NaN score through, as v_exp does. The n exponentials run side by side
 * (v_exp_in_range_n): one alone is a ~60-cycle chain. Each lane sees the
 * same operations either way, so the bits do not depend on n (the output
 * hashed the same). 32 x L=128, one thread, best of 240 runs: held to AVX2
 * d=32 12.8 -> 12.1-12.3 ms, d=64 (2 threads) 11.6 -> 11.3; natively (n
 * = 4 is the whole row of 64 queries) d=32 11.25 -> 11.1. On AVX2 eight
 * at a time (the whole row) rather than four: the out-of-order window
 * then overlaps more chains (same hash; one thread, best of 120 runs,
 * d=32 10.91 -> 10.54 ms at 4096 tokens, 1.318 -> 1.273 at 512; 2
 * threads 5.67 -> 5.50, d=64 10.88 -> 10.74; MiniLM-L6 32 x 128 through
 * the engine, p50 462.3 -> 461.2 ms). */
#define ATT_EXP_GROUP 8
IV_VINLINE void plain_exp_step(float *x, const vf *mx, vf *sum, int g, const int n)
{
    vf e[ATT_EXP_GROUP];
    IV_EACH(i, n) e[i] = v_max(v_set1(-86.6f), v_load(x + (g + i) * IV_VL) - mx[g + i]);
    v_exp_in_range_n(e, e, n);
    IV_EACH(i, n)
    {
        v_store(x + (g + i) * IV_VL, e[i]);
        sum[g + i] = sum[g + i] + e[i];
    }
}

/* Step 2: turns the score columns of the block's queries into
 * exp(s - max), zero where a query may not look, and fills w->inv with
 * 1 / sum (0 when a query sees no key). Rows of st are swept in order with
 * the 8 lanes of group g holding queries g*8 .. g*8+7 (lanes past nq are
 * padding with an empty window). In a plain block the scores are already
 * scaled and their maxima are in w->mx, so only the exp sweep is left. */
static void softmax_block(const iv_attn_args *a, att_scratch *w, int64_t nq, int64_t i0, int64_t jlo, int64_t nk,
                          int64_t len, int64_t base, int h, const float *bias_seq, int plain)
{
    const int ng = (int)(round16(nq) / IV_VL);
    if (plain) {
        vf mx[ATT_BQ / IV_VL], sum[ATT_BQ / IV_VL];
        for (int g = 0; g < ng; g++) {
            mx[g] = v_load(w->mx + g * IV_VL);
            sum[g] = v_zero();
        }
        for (int64_t jj = 0; jj < nk; jj++) {
            float *x = w->st + jj * ATT_BQ;
            int g = 0;
            for (; g + ATT_EXP_GROUP <= ng; g += ATT_EXP_GROUP) plain_exp_step(x, mx, sum, g, ATT_EXP_GROUP);
            /* Half groups: the 4-vector rows of AVX-512 builds, and the rest
             * of a partial block's row on AVX2. */
            const int half = ATT_EXP_GROUP / 2;
            for (; g + half <= ng; g += half) plain_exp_step(x, mx, sum, g, half);
            for (; g < ng; g++) plain_exp_step(x, mx, sum, g, 1);
        }
        for (int g = 0; g < ng; g++) v_store(w->inv + g * IV_VL, 1.0f / sum[g]);
        return;
    }
    vi lo[ATT_BQ / IV_VL], hi[ATT_BQ / IV_VL], qi[ATT_BQ / IV_VL];
    vf mx[ATT_BQ / IV_VL], sum[ATT_BQ / IV_VL];
    for (int g = 0; g < ng; g++) {
        int32_t l32[IV_VL], h32[IV_VL], q32[IV_VL];
        for (int l = 0; l < IV_VL; l++) {
            int64_t r = (int64_t)g * IV_VL + l, i = i0 + r;
            q32[l] = (int32_t)i;
            l32[l] = r < nq ? (int32_t)key_lo(a, i) : 1;
            h32[l] = r < nq ? (int32_t)key_hi(a, i, len) : 0;
        }
        memcpy(&lo[g], l32, sizeof lo[g]);
        memcpy(&hi[g], h32, sizeof hi[g]);
        memcpy(&qi[g], q32, sizeof qi[g]);
        mx[g] = v_set1(-INFINITY);
        sum[g] = v_zero();
    }
    const vf scale = v_set1(a->scale), cap = v_set1(a->softcap);
    const int softcap = a->softcap != 0.0f;
    const float slope = a->alibi_slopes ? a->alibi_slopes[h] : 0.0f;

    /* scale * q.k and the softcap come before any additive term, so a bias
     * needs its own pass in between; with softcap_after_bias the cap comes
     * after it (a third pass). */
    if (bias_seq) {
        const int cap_first = softcap && !a->softcap_after_bias;
        for (int64_t jj = 0; jj < nk; jj++)
            for (int g = 0; g < ng; g++) {
                float *x = w->st + jj * ATT_BQ + g * IV_VL;
                vf v = v_load(x) * scale;
                if (cap_first) v = cap * v_tanh(v / cap);
                v_store(x, v);
            }
        for (int64_t r = 0; r < nq; r++) {
            const float *brow = bias_seq + ((int64_t)h * len + i0 + r) * len + jlo;
            for (int64_t jj = 0; jj < nk; jj++) w->st[jj * ATT_BQ + r] += brow[jj];
        }
        if (softcap && !cap_first)
            for (int64_t jj = 0; jj < nk; jj++)
                for (int g = 0; g < ng; g++) {
                    float *x = w->st + jj * ATT_BQ + g * IV_VL;
                    v_store(x, cap * v_tanh(v_load(x) / cap));
                }
    }
    for (int64_t jj = 0; jj < nk; jj++) {
        int32_t j = (int32_t)(jlo + jj);
        int masked = a->key_mask && !a->key_mask[base + j];
        for (int g = 0; g < ng; g++) {
            float *x = w->st + jj * ATT_BQ + g * IV_VL;
            vf v = v_load(x);
            if (!bias_seq) {
                v = v * scale;
                if (softcap) v = cap * v_tanh(v / cap);
            }
            if (a->alibi_slopes) {
                vi dist = qi[g] - j, sign = dist >> 31;
                dist = (dist ^ sign) - sign; /* |i - j| */
                v = v + -(slope * __builtin_convertvector(dist, vf));
            }
            vi visible = (lo[g] <= j) & (hi[g] >= j) & (masked ? 0 : -1);
            v = v_sel(visible, v, v_set1(-INFINITY));
            v_store(x, v);
            mx[g] = v_max(mx[g], v);
        }
    }
    vi empty[ATT_BQ / IV_VL];
    for (int g = 0; g < ng; g++) {
        empty[g] = mx[g] == -INFINITY;
        mx[g] = v_sel(empty[g], v_zero(), mx[g]); /* exp(-inf - 0) = 0 */
    }
    for (int64_t jj = 0; jj < nk; jj++)
        for (int g = 0; g < ng; g++) {
            float *x = w->st + jj * ATT_BQ + g * IV_VL;
            vf e = v_exp(v_load(x) - mx[g]);
            v_store(x, e);
            sum[g] = sum[g] + e;
        }
    for (int g = 0; g < ng; g++) v_store(w->inv + g * IV_VL, v_sel(empty[g], v_zero(), 1.0f / sum[g]));
}

#if defined(__AVX512F__)
/* dst[c][r] = src[r * ld + c] for a 16 x 16 block: 16 loads, four rounds
 * of in-register shuffles, 16 stores (half the time of 16 gathers). After
 * round 2, x[4i + c] holds, in 128-bit lane L, column 4L + c of rows
 * 4i..4i+3; rounds 3 and 4 collect the lanes of each column in order. */
static void transpose16(float *dst, const float *src, int64_t ld)
{
    __m512 x[16], t[16];
    for (int r = 0; r < 16; r++) x[r] = _mm512_loadu_ps(src + r * ld);
    for (int r = 0; r < 16; r += 2) {
        t[r] = _mm512_unpacklo_ps(x[r], x[r + 1]);
        t[r + 1] = _mm512_unpackhi_ps(x[r], x[r + 1]);
    }
    for (int r = 0; r < 16; r += 4) {
        x[r] = _mm512_shuffle_ps(t[r], t[r + 2], 0x44);
        x[r + 1] = _mm512_shuffle_ps(t[r], t[r + 2], 0xEE);
        x[r + 2] = _mm512_shuffle_ps(t[r + 1], t[r + 3], 0x44);
        x[r + 3] = _mm512_shuffle_ps(t[r + 1], t[r + 3], 0xEE);
    }
    for (int r = 0; r < 16; r += 8)
        for (int j = 0; j < 4; j++) {
            t[r + j] = _mm512_shuffle_f32x4(x[r + j], x[r + j + 4], 0x88);
            t[r + j + 4] = _mm512_shuffle_f32x4(x[r + j], x[r + j + 4], 0xDD);
        }
    for (int j = 0; j < 8; j++) {
        _mm512_storeu_ps(dst + j * 16, _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88));
        _mm512_storeu_ps(dst + (j + 8) * 16, _mm512_shuffle_f32x4(t[j], t[j + 8], 0xDD));
    }
}
#elif defined(__AVX2__)
/* dst[c * 16 + r] = src[r * ld + c] for an 8 x 8 block (dst rows 16 apart,
 * as in a panel): 8 loads, three rounds of shuffles, 8 stores, instead of
 * 64 scalar moves. */
static void transpose8(float *dst, const float *src, int64_t ld)
{
    __m256 x[8], t[8];
    for (int r = 0; r < 8; r++) x[r] = _mm256_loadu_ps(src + r * ld);
    for (int r = 0; r < 8; r += 2) {
        t[r] = _mm256_unpacklo_ps(x[r], x[r + 1]);
        t[r + 1] = _mm256_unpackhi_ps(x[r], x[r + 1]);
    }
    for (int r = 0; r < 8; r += 4) {
        x[r] = _mm256_shuffle_ps(t[r], t[r + 2], 0x44);
        x[r + 1] = _mm256_shuffle_ps(t[r], t[r + 2], 0xEE);
        x[r + 2] = _mm256_shuffle_ps(t[r + 1], t[r + 3], 0x44);
        x[r + 3] = _mm256_shuffle_ps(t[r + 1], t[r + 3], 0xEE);
    }
    for (int j = 0; j < 4; j++) {
        _mm256_storeu_ps(dst + j * 16, _mm256_permute2f128_ps(x[j], x[j + 4], 0x20));
        _mm256_storeu_ps(dst + (j + 4) * 16, _mm256_permute2f128_ps(x[j], x[j + 4], 0x31));
    }
}
#endif

/* Q^T of nq queries (rows ld apart, d dims each) into panels of 16 queries,
 * qp[p][c][16], zeros past nq. AVX-512 transposes whole 16 x 16 blocks in
 * registers (32 x L=128: 3% less attention time at d = 32, 6% at d = 64,
 * than a gather per column), AVX2 pairs of 8 x 8 blocks (3-5% at d = 32
 * and 64, Zen 4 held to AVX2, one thread); the rest goes element by
 * element. */
static void pack_queries(float *qp, const float *q, int64_t ld, int64_t nq, int d)
{
    const int64_t nq16 = round16(nq);
    for (int64_t p = 0; p < nq16 / 16; p++) {
        float *panel = qp + p * d * 16;
        const float *rows = q + p * 16 * ld;
        const int64_t n = nq - p * 16 < 16 ? nq - p * 16 : 16;
        int c = 0;
#if defined(__AVX512F__)
        if (n == 16)
            for (; c + 16 <= d; c += 16) transpose16(panel + c * 16, rows + c, ld);
#elif defined(__AVX2__)
        if (n == 16)
            for (; c + 8 <= d; c += 8) {
                transpose8(panel + c * 16, rows + c, ld);
                transpose8(panel + c * 16 + 8, rows + 8 * ld + c, ld);
            }
#endif
        for (; c < d; c++)
            for (int64_t r = 0; r < 16; r++) panel[c * 16 + r] = r < n ? rows[r * ld + c] : 0.0f;
    }
}

/* Prefetches rows [r0, min(r1, n)) of d floats, ld apart, from p. */
static void prefetch_rows(const float *p, int64_t ld, int64_t r0, int64_t r1, int64_t n, int d)
{
    for (int64_t r = r0; r < r1 && r < n; r++)
        for (int c = 0; c < d; c += 16) __builtin_prefetch(p + r * ld + c);
}

/* Records block [i0, ...) of sequence s, head h as the next one w runs
 * (s < 0: none known). */
static void set_next_block(const iv_attn_args *a, att_scratch *w, int s, int h, int64_t i0)
{
    w->next_q = NULL;
    if (s < 0) return;
    const int d = a->head_dim;
    const int64_t base = a->cu_seqlens[s], len = a->cu_seqlens[s + 1] - base;
    if (i0 >= len) return;
    const int kvh = h / (a->n_heads / a->n_kv_heads);
    const int64_t jlo = key_lo(a, i0), nk = key_hi(a, i0, len) - jlo + 1;
    w->next_q = ((const float *)a->q.data) + (base + i0) * a->q.ld + (int64_t)h * d;
    w->next_nq = len - i0 < ATT_BQ ? len - i0 : ATT_BQ;
    w->next_k = ((const float *)a->k.data) + (base + jlo) * a->k.ld + (int64_t)kvh * d;
    w->next_nk = nk < 2 * ATT_KR ? nk : 2 * ATT_KR;
}

/* One task: queries [i0, i1) of sequence s, head h. */
static void attend_block(const iv_attn_args *a, int s, int h, int64_t i0, int64_t i1, att_scratch *w)
{
    const int d = a->head_dim;
    const int64_t base = a->cu_seqlens[s], len = a->cu_seqlens[s + 1] - base;
    const int kvh = h / (a->n_heads / a->n_kv_heads);
    const int64_t nq = i1 - i0, nq16 = round16(nq), dpad = round16(d);
    const int64_t jlo = key_lo(a, i0), jhi = key_hi(a, i1 - 1, len), nk = jhi - jlo + 1;
    const float *kbase = ((float *)a->k.data) + (base + jlo) * a->k.ld + (int64_t)kvh * d;
    const float *vbase = ((float *)a->v.data) + (base + jlo) * a->v.ld + (int64_t)kvh * d;

    /* Plain block: every query sees every key in jlo..jhi and nothing is
     * added to or done with the scaled scores (the encoders' usual case). */
    const int plain = !a->key_mask && !a->alibi_slopes && !a->bias && a->softcap == 0.0f &&
                      key_lo(a, i1 - 1) == jlo && key_hi(a, i0, len) == jhi;
    if (plain)
        for (int64_t r = 0; r < nq16; r++) w->mx[r] = -INFINITY;

    /* 1. Pack Q^T in panels of 16 queries (zeros past nq), then scores. */
    pack_queries(w->qp, ((float *)a->q.data) + (base + i0) * a->q.ld + (int64_t)h * d, a->q.ld, nq, d);
    /* Key tiles outside, query panels inside: a tile's K rows are read
     * from L2 once and then serve every panel from L1. Panels outside
     * re-read all the block's K rows per panel, and with the score buffer
     * (64 queries x L floats) those no longer stayed in L1. Each query's
     * scores and maxima come in the same key order either way, so the bits
     * are the same (the output hashed the same). 32 x L=128, one thread,
     * best of 240 runs: held to AVX2 d=32 12.2 -> 11.3 ms, d=64 21.3 ->
     * 20.9; natively d=32 11.0 -> 10.6, d=64 and L=512 unchanged. */
    for (int64_t jj = 0; jj < nk; jj += ATT_KR) {
        int R = nk - jj < ATT_KR ? (int)(nk - jj) : ATT_KR;
        const float *k[ATT_KR];
        for (int r = 0; r < R; r++) k[r] = kbase + (jj + r) * a->k.ld;
        /* K rows are ld apart, one page or more: no hardware prefetcher
         * follows them, so fetch the next tile's rows while this one
         * computes (32 x L=128, d=32 or 64: 3% less time). */
        prefetch_rows(kbase, a->k.ld, jj + ATT_KR, jj + 2 * ATT_KR, nk, d);
        /* V rows too, for step 3's packing (unless this pair's previous
         * block packed them): 32 x L=128, d=32, one thread, 8% less
         * attention time. */
        if (w->vp_src != vbase) prefetch_rows(vbase, a->v.ld, jj, jj + R, nk, d);
        score_rows(R, (int)(nq16 / 16), k, d, w->qp, w->st + jj * ATT_BQ, a->scale, plain ? w->mx : NULL);
    }

    /* 2. Softmax down the key columns, 8 queries at a time. */
    const float *bias_seq = a->bias ? a->bias + a->bias_offsets[s] : NULL;
    softmax_block(a, w, nq, i0, jlo, nk, len, base, h, bias_seq, plain);

    /* 3. P V over packed value tiles. */
    for (int64_t kt0 = 0; kt0 < nk; kt0 += ATT_KT) {
        int64_t kn = nk - kt0 < ATT_KT ? nk - kt0 : ATT_KT;
        const int reuse = w->vp_src == vbase + kt0 * a->v.ld && w->vp_rows == kn;
        w->vp_src = vbase + kt0 * a->v.ld;
        w->vp_rows = kn;
        for (int64_t jj = 0; jj < kn && !reuse; jj++) {
            const float *vrow = vbase + (kt0 + jj) * a->v.ld;
            for (int64_t c0 = 0; c0 < dpad; c0 += IV_VL) {
                int64_t m = d - c0 < IV_VL ? d - c0 : IV_VL;
                vf v = m == IV_VL ? v_load(vrow + c0) : m > 0 ? v_load_part(vrow + c0, m) : v_zero();
                v_store(w->vp + (c0 / 16) * ATT_KT * 16 + jj * 16 + c0 % 16, v);
            }
        }
        for (int64_t p = 0; p < dpad / 16; p += ATT_PANELS) {
            const int P = dpad / 16 - p < ATT_PANELS ? (int)(dpad / 16 - p) : ATT_PANELS;
            for (int64_t r0 = 0; r0 < nq; r0 += ATT_QR) {
                int R = nq - r0 < ATT_QR ? (int)(nq - r0) : ATT_QR;
                if (p == 0 && kt0 == 0) {
                    /* During the first pass: the output rows these queries
                     * will write (for writing), then the next block's query
                     * rows a tile's share at a time, and with the last tile
                     * the rest of them and its first key rows. */
                    for (int64_t r = r0; r < r0 + R; r++)
                        for (int c = 0; c < d; c += 16)
                            __builtin_prefetch(((float *)a->out.data) + (base + i0 + r) * a->out.ld + (int64_t)h * d + c, 1);
                    if (w->next_q) {
                        const int last = r0 + R >= nq;
                        prefetch_rows(w->next_q, a->q.ld, r0, last ? w->next_nq : r0 + R, w->next_nq, d);
                        if (last) prefetch_rows(w->next_k, a->k.ld, 0, w->next_nk, w->next_nk, d);
                    }
                }
                pv_rows(R, P, w->st + kt0 * ATT_BQ + r0, kn, w->vp + p * ATT_KT * 16, w->o + r0 * dpad + p * 16,
                        dpad, kt0 == 0);
            }
        }
    }

    for (int64_t r = 0; r < nq; r++) {
        float *dst = ((float *)a->out.data) + (base + i0 + r) * a->out.ld + (int64_t)h * d;
        const float *src = w->o + r * dpad;
        const vf inv = v_set1(w->inv[r]);
        int c = 0;
        for (; c + IV_VL <= d; c += IV_VL) v_store(dst + c, v_load(src + c) * inv);
        if (c < d) v_store_part(dst + c, v_load_part(src + c, d - c) * inv, d - c);
    }
}

/* Every (sequence, head) pair, one task each: pairs are handed out
 * dynamically, each thread claiming its next one as it starts the current
 * one, so that the current pair's last block knows which queries and keys
 * to prefetch (32 x L=128, d=32, 2 threads: 2-3% less attention time). */
static void run_pairs(const iv_attn_args *a, int64_t npairs, int64_t *claimed, att_scratch *w)
{
    const int nh = a->n_heads;
    int64_t t = __atomic_fetch_add(claimed, 1, __ATOMIC_RELAXED);
    while (t < npairs) {
        const int64_t t_next = __atomic_fetch_add(claimed, 1, __ATOMIC_RELAXED);
        const int s = (int)(t / nh), h = (int)(t % nh);
        const int64_t len = a->cu_seqlens[s + 1] - a->cu_seqlens[s];
        for (int64_t i0 = 0; i0 < len; i0 += ATT_BQ) {
            if (i0 + ATT_BQ < len) set_next_block(a, w, s, h, i0 + ATT_BQ);
            else if (t_next < npairs) set_next_block(a, w, (int)(t_next / nh), (int)(t_next % nh), 0);
            else set_next_block(a, w, -1, 0, 0);
            attend_block(a, s, h, i0, i0 + ATT_BQ < len ? i0 + ATT_BQ : len, w);
        }
        t = t_next;
    }
}

/* Task t of one query block each: the sequence s with first[s] <= t <
 * first[s + 1], then t - first[s] = h * blocks + block. */
static void run_block_task(const iv_attn_args *a, const int64_t *first, int64_t t, att_scratch *w)
{
    int lo = 0, hi = a->n_seqs - 1; /* last s with first[s] <= t: skips empty sequences */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (first[mid] <= t) lo = mid;
        else hi = mid - 1;
    }
    const int s = lo;
    const int64_t len = a->cu_seqlens[s + 1] - a->cu_seqlens[s];
    const int64_t blocks = (len + ATT_BQ - 1) / ATT_BQ, rem = t - first[s];
    const int h = (int)(rem / blocks);
    const int64_t i0 = (rem % blocks) * ATT_BQ, i1 = i0 + ATT_BQ < len ? i0 + ATT_BQ : len;
    attend_block(a, s, h, i0, i1, w);
}

void iv_cpu_attention(const iv_ops *ops, const iv_attn_args *a)
{
    assert(a->n_heads > 0 && a->n_kv_heads > 0 && a->n_heads % a->n_kv_heads == 0 && a->head_dim > 0);
    assert(!a->bias || a->bias_offsets);
    const int nh = a->n_heads;
    const int64_t dpad = round16(a->head_dim);

    /* Query-block tasks: those of sequence s are first[s] .. first[s+1]-1. */
    int64_t *first = iv_cpu_scratch((size_t)(a->n_seqs + 1) * sizeof(int64_t));
    int64_t max_len = 0, work = 0;
    first[0] = 0;
    for (int s = 0; s < a->n_seqs; s++) {
        int64_t len = a->cu_seqlens[s + 1] - a->cu_seqlens[s];
        first[s + 1] = first[s] + nh * ((len + ATT_BQ - 1) / ATT_BQ);
        if (len > max_len) max_len = len;
        work += len * len;
    }
    work *= (int64_t)nh * a->head_dim;
    /* With enough (sequence, head) pairs to keep every thread busy, a task
     * is one pair, all its query blocks in a row: the blocks then share the
     * packed V tile (one copy instead of one per block) and find K in this
     * core's cache (32 x L=128: 5-7% less attention time). A few long
     * sequences instead get a task per query block, so all threads work. */
    const int64_t pairs = (int64_t)a->n_seqs * nh;
    const int by_pair = pairs >= 4 * (int64_t)omp_get_max_threads();
    const int64_t ntasks = by_pair ? pairs : first[a->n_seqs];
    int64_t claimed = 0;

#pragma omp parallel if (ntasks > 1 && work >= ATT_PAR_MIN)
    {
        att_scratch w;
        w.qp = iv_cpu_scratch((size_t)(ATT_BQ * a->head_dim) * sizeof(float));
        w.st = iv_cpu_scratch((size_t)(ATT_BQ * (max_len > 0 ? max_len : 1)) * sizeof(float));
        w.vp = iv_cpu_scratch((size_t)(ATT_KT * dpad) * sizeof(float));
        w.o = iv_cpu_scratch((size_t)(ATT_BQ * dpad) * sizeof(float));
        w.inv = iv_cpu_scratch(ATT_BQ * sizeof(float));
        w.mx = iv_cpu_scratch(ATT_BQ * sizeof(float));
        w.vp_src = NULL;
        w.vp_rows = 0;
        w.next_q = NULL;
        if (by_pair) {
            run_pairs(a, ntasks, &claimed, &w);
        } else {
#pragma omp for schedule(dynamic, 1)
            for (int64_t t = 0; t < ntasks; t++) run_block_task(a, first, t, &w);
        }
        free(w.qp);
        free(w.st);
        free(w.vp);
        free(w.o);
        free(w.inv);
        free(w.mx);
    }
    free(first);
}
