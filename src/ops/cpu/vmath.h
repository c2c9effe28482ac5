/* Vector math for the CPU kernels. Written with GCC/Clang vector extensions
 * so one source becomes AVX2/AVX-512 code under -march=native and plain SSE
 * otherwise, with no per-ISA copies to keep in sync. Accuracy comes first:
 * exp, sigmoid, tanh and the GELUs stay within about 1e-6 relative error of
 * the exact value (see tests/unit/test_ops_act.c, which checks them against
 * double-precision references); only results that underflow float are
 * flushed to zero.
 *
 * Every function takes and returns IV_VL lanes (vf, vi): 8 by default, the
 * width the kernels' tiles are laid out for. A file of purely elementwise
 * loops (act.c) may define IV_VMATH_WIDE before including this header to
 * get 16 lanes on AVX-512 builds; each lane's result is the same bits at
 * either width. Loads and stores go through memcpy, so pointers need no
 * alignment. */
#ifndef IV_OPS_CPU_VMATH_H
#define IV_OPS_CPU_VMATH_H

#include <stdint.h>
#include <string.h>

#include "ops/ops.h"
#if defined(__FMA__)
#include <immintrin.h>
#endif

/* Without AVX, GCC warns that 32-byte vector arguments change the ABI. These
 * helpers are always inlined and never cross a library boundary, so the
 * warning does not apply (GCC still prints an informational note). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
/* Every function taking or returning a vector is forced inline, so no call
 * ever passes one by value (and -O1 builds stay fast enough for tests). */
#define IV_VINLINE static inline __attribute__((always_inline))

#if defined(IV_VMATH_WIDE) && defined(__AVX512F__)
#define IV_VL 16
#else
#define IV_VL 8
#endif
typedef float vf __attribute__((vector_size(IV_VL * 4)));
typedef int32_t vi __attribute__((vector_size(IV_VL * 4)));

IV_VINLINE vf v_load(const float *p)
{
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}
IV_VINLINE void v_store(float *p, vf v) { memcpy(p, &v, sizeof v); }
IV_VINLINE vf v_set1(float s)
{
#if IV_VL == 16
    return (vf){s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s};
#else
    return (vf){s, s, s, s, s, s, s, s};
#endif
}
IV_VINLINE vf v_zero(void) { return v_set1(0.0f); }

/* Loads n < 8 floats, zero-filling the other lanes; stores the first n. */
IV_VINLINE vf v_load_part(const float *p, int64_t n)
{
    float buf[IV_VL] = {0};
    memcpy(buf, p, (size_t)n * sizeof(float));
    return v_load(buf);
}
IV_VINLINE void v_store_part(float *p, vf v, int64_t n)
{
    float buf[IV_VL];
    v_store(buf, v);
    memcpy(p, buf, (size_t)n * sizeof(float));
}

/* Lane select: lanes of m that are all ones take a, zero lanes take b. */
IV_VINLINE vf v_sel(vi m, vf a, vf b) { return (vf)((m & (vi)a) | (~m & (vi)b)); }
IV_VINLINE vf v_abs(vf x) { return (vf)((vi)x & 0x7fffffff); }
/* a > b ? a : b and a < b ? a : b lane by lane (b where either is NaN):
 * exactly what maxps / minps compute, one instruction instead of the
 * compare and blend GCC makes of the select. */
#if IV_VL == 16
IV_VINLINE vf v_max(vf a, vf b) { return _mm512_max_ps(a, b); }
IV_VINLINE vf v_min(vf a, vf b) { return _mm512_min_ps(a, b); }
#elif defined(__FMA__)
IV_VINLINE vf v_max(vf a, vf b) { return _mm256_max_ps(a, b); }
IV_VINLINE vf v_min(vf a, vf b) { return _mm256_min_ps(a, b); }
#else
IV_VINLINE vf v_max(vf a, vf b) { return v_sel(a > b, a, b); }
IV_VINLINE vf v_min(vf a, vf b) { return v_sel(a < b, a, b); }
#endif

/* a * b + c, fused when the CPU has FMA (ISO C mode never contracts). */
IV_VINLINE vf v_fma(vf a, vf b, vf c)
{
#if IV_VL == 16
    return _mm512_fmadd_ps(a, b, c);
#elif defined(__FMA__)
    return _mm256_fmadd_ps(a, b, c);
#else
    return a * b + c;
#endif
}

/* The rounding error of hi = a * a, so that a * a == hi + lo exactly: one
 * FMA when available, else Dekker's split (exact because ISO C mode keeps
 * the products uncontracted). */
IV_VINLINE vf v_square_lo(vf a, vf hi)
{
#if IV_VL == 16
    return _mm512_fmsub_ps(a, a, hi);
#elif defined(__FMA__)
    return _mm256_fmsub_ps(a, a, hi);
#else
    vf big = a * 4097.0f; /* 2^12 + 1 splits 24 bits into 12 + 12 */
    vf ah = big - (big - a);
    vf al = a - ah;
    return ((ah * ah - hi) + 2.0f * ah * al) + al * al;
#endif
}

IV_VINLINE float v_hsum(vf v)
{
    float b[IV_VL];
    v_store(b, v);
    for (int w = IV_VL / 2; w >= 8; w /= 2) /* 16 lanes: fold to 8 first */
        for (int i = 0; i < w; i++) b[i] += b[i + w];
    return ((b[0] + b[4]) + (b[1] + b[5])) + ((b[2] + b[6]) + (b[3] + b[7]));
}
IV_VINLINE float v_hmax(vf v)
{
    float b[IV_VL];
    v_store(b, v);
    float m = b[0];
    for (int i = 1; i < IV_VL; i++) m = b[i] > m ? b[i] : m;
    return m;
}

/* Runs one step of a function over the n vectors it works on at once
 * (n <= IV_N_MAX, a constant after inlining, so the arrays live in
 * registers). */
#define IV_N_MAX 8
#define IV_EACH(i, n) _Pragma("GCC unroll 8") for (int i = 0; i < (n); i++)

/* e^x for x in [-86.6, 88.72], without range checks (the caller keeps x
 * there). Range reduction x = n ln2 + r (|r| <= ln2/2, Cody-Waite two-part
 * ln2 so r is exact), degree-7 Taylor polynomial for e^r (truncation
 * < 6e-9), then scaling by 2^n built in the exponent bits. The _n form
 * takes n vectors (a constant after inlining) and runs each step on all of
 * them before the next, so that their dependency chains interleave in the
 * instruction stream: a lone chain is ~60 cycles long, and the out-of-order
 * window, which holds about two of them, left it latency-bound. Every lane
 * sees the same operations in the same order, so the bits do not depend
 * on n. */
IV_VINLINE void v_exp_in_range_n(vf *y, const vf *x, const int n)
{
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    vf r[IV_N_MAX], p[IV_N_MAX];
    vi e[IV_N_MAX];
    IV_EACH(i, n)
    {
        const vf t = x[i] * 1.44269504f + magic;
        e[i] = (vi)t - (vi)v_set1(magic);
        const vf nf = t - magic;
        r[i] = x[i] - nf * 0.693359375f; /* ln2 high part: 9 bits, so nf * it is exact */
        r[i] = r[i] - nf * -2.12194440e-4f; /* ln2 - 0.693359375 */
    }
    static const float taylor[] = {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};
    IV_EACH(i, n) p[i] = v_set1(1.0f / 5040);
    _Pragma("GCC unroll 8") for (int k = 0; k < 7; k++) IV_EACH(i, n) p[i] = v_fma(p[i], r[i], v_set1(taylor[k]));
    /* e is in [-125, 128]: scale by 2 * 2^(e-1) so both ends stay normal. */
    IV_EACH(i, n) y[i] = (p[i] + p[i]) * (vf)((e[i] + 126) << 23);
}
IV_VINLINE vf v_exp_in_range(vf x)
{
    vf y;
    v_exp_in_range_n(&y, &x, 1);
    return y;
}

/* e^x anywhere: results below the smallest normal float (x < -86.6) are
 * flushed to 0, so exp(-inf) = 0; x beyond ln(FLT_MAX) gives +inf; NaN
 * propagates. */
IV_VINLINE vf v_exp(vf x)
{
    vi under = x < -86.6f, over = x > 88.7228394f;
    x = v_sel(under, v_set1(-86.6f), x);
    x = v_sel(over, v_set1(88.7228394f), x);
    vf y = v_exp_in_range(x);
    y = v_sel(under, v_zero(), y);
    return v_sel(over, v_set1(__builtin_inff()), y);
}

/* 1 / (1 + e^-x), from e^-|x| so the exponential never overflows and both
 * tails keep full relative precision. A NaN comes back as the very input
 * NaN: -|x| would flip its sign, and SiLU's x * sigmoid(x) then multiplied
 * two NaNs of opposite signs, whose product takes the sign of whichever
 * operand the compiler put first, so the same element came out +NaN or
 * -NaN depending on the loop that computed it (an -O1 AVX2 build failed
 * ops_act_groups_same_bits on it). With one NaN everywhere, SiLU and the
 * tanh GELU give that NaN whatever the operand order. */
IV_VINLINE vf v_sigmoid(vf x)
{
    vf e = v_exp(-v_abs(x));
    vf s = 1.0f / (1.0f + e);
    return v_sel(x != x, x, v_sel(x < 0.0f, e * s, s));
}

IV_VINLINE vf v_silu(vf x) { return x * v_sigmoid(x); }

/* tanh: an odd Taylor polynomial below |x| = 0.4 (where 1 - 2/(e^2x + 1)
 * would cancel; terms to x^13 leave < 4e-9), that formula above. */
IV_VINLINE vf v_tanh(vf x)
{
    vf a = v_abs(x);
    vf big = 1.0f - 2.0f / (v_exp(a + a) + 1.0f);
    vf a2 = a * a;
    vf p = v_set1(21844.0f / 6081075);
    p = v_fma(p, a2, v_set1(-1382.0f / 155925));
    p = v_fma(p, a2, v_set1(62.0f / 2835));
    p = v_fma(p, a2, v_set1(-17.0f / 315));
    p = v_fma(p, a2, v_set1(2.0f / 15));
    p = v_fma(p, a2, v_set1(-1.0f / 3));
    vf small = v_fma(a * a2, p, a);
    vf r = v_sel(a < 0.4f, small, big);
    return (vf)((vi)r | ((vi)x & INT32_MIN));
}

/* Exact GELU x * Phi(x), Phi(x) = erfc(-x / sqrt2) / 2. erfc(z) for z >= 0
 * is t e^{-z^2} Q(t) with t = 1 / (1 + z/2) and Q a degree-9 polynomial
 * least-squares fitted (relative error) to erfc(z) e^{z^2} / t on z in
 * [0, 10] (fit error 2e-8). Negative x use erfc directly, so GELU keeps its
 * relative precision far into the left tail; e^{-x^2/2} is computed from the
 * exact split x^2 = hi + lo because the rounding of x^2 alone would cost
 * ~4e-6 relative at |x| = 10. |x| is capped at 12.8, where e^{-x^2/2} and
 * every product after it are still normal floats, so the exponential needs
 * no range checks (a tenth of the GELU's instructions, and GELU is up to
 * 15% of an encoder MLP's time); past it Phi is 1 in float on the right
 * and GELU is below 1e-36 on the left, flushed to 0. The _n form runs n
 * vectors step by step together, as v_exp_in_range_n and for the same
 * reason: one GELU's chain is ~75 cycles long and alone ran at ~30 cycles
 * per vector; four together take ~21 (Zen 4, AVX2, in L1), same bits. */
IV_VINLINE void v_gelu_erf_n(vf *y, const vf *x, const int n)
{
    static const float qc[] = {-1.296140552e-01f, 4.428111315e-01f, -6.870458126e-01f,
                               4.341518879e-01f,  -1.045284793e-01f, 2.274455130e-01f,
                               2.382882237e-01f,  2.828940153e-01f,  2.820628881e-01f};
    /* x's own copy: y may be x, and writes through y would otherwise keep
     * the compiler from holding x in registers. */
    vf xv[IV_N_MAX], a[IV_N_MAX], t[IV_N_MAX], q[IV_N_MAX], lo[IV_N_MAX], e[IV_N_MAX];
    IV_EACH(i, n) xv[i] = x[i];
    IV_EACH(i, n)
    {
        a[i] = v_min(v_abs(xv[i]), v_set1(12.8f));
        const vf z = a[i] * 0.707106781f;
        t[i] = 1.0f / (1.0f + 0.5f * z);
    }
    IV_EACH(i, n)
    {
        const vf hi = a[i] * a[i];
        lo[i] = v_square_lo(a[i], hi);
        e[i] = hi * -0.5f;
    }
    v_exp_in_range_n(e, e, n);
    IV_EACH(i, n) q[i] = v_set1(1.353464928e-02f);
    _Pragma("GCC unroll 9") for (int k = 0; k < 9; k++) IV_EACH(i, n) q[i] = v_fma(q[i], t[i], v_set1(qc[k]));
    IV_EACH(i, n)
    {
        const vf half_erfc = 0.5f * (t[i] * q[i] * (e[i] * (1.0f - 0.5f * lo[i])));
        const vf phi = v_sel(xv[i] < 0.0f, half_erfc, 1.0f - half_erfc);
        y[i] = v_sel(xv[i] < -12.8f, v_zero(), xv[i] * phi);
    }
}
IV_VINLINE vf v_gelu_erf(vf x)
{
    vf y;
    v_gelu_erf_n(&y, &x, 1);
    return y;
}

/* tanh GELU 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), via the
 * identity 1 + tanh(u) = 2 sigmoid(2u), which avoids the cancellation of
 * 1 + tanh(u) for negative x. */
IV_VINLINE vf v_gelu_tanh(vf x)
{
    vf u = 0.797884561f * (x + 0.044715f * (x * x * x));
    return x * v_sigmoid(u + u);
}

/* The activation of an iv_act kind, lane by lane. */
IV_VINLINE vf v_act(vf v, iv_act act)
{
    switch (act) {
    case IV_ACT_GELU: return v_gelu_erf(v);
    case IV_ACT_GELU_TANH: return v_gelu_tanh(v);
    case IV_ACT_SILU: return v_silu(v);
    case IV_ACT_RELU: return v_sel(v < 0.0f, v_zero(), v); /* NaN stays NaN, as torch */
    case IV_ACT_TANH: return v_tanh(v);
    case IV_ACT_SIGMOID: return v_sigmoid(v);
    case IV_ACT_NONE: break;
    }
    return v;
}

/* v_act on n vectors at once, the same bits: GELU's chains interleave
 * (v_gelu_erf_n), the cheaper activations go one vector after another. */
IV_VINLINE void v_act_n(vf *v, const int n, iv_act act)
{
    if (act == IV_ACT_GELU) {
        v_gelu_erf_n(v, v, n);
        return;
    }
    IV_EACH(i, n) v[i] = v_act(v[i], act);
}

#endif
