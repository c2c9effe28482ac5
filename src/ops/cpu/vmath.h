/* Vector math for the CPU kernels. Written with GCC/Clang vector extensions
 * so one source becomes AVX2/AVX-512 code under -march=native and plain SSE
 * otherwise, with no per-ISA copies to keep in sync. Accuracy comes first:
 * exp, sigmoid, tanh and the GELUs stay within about 1e-6 relative error of
 * the exact value (see tests/unit/test_ops_act.c, which checks them against
 * double-precision references); only results that underflow float are
 * flushed to zero.
 *
 * Every function takes and returns 8 lanes (v8f). Loads and stores go through
 * memcpy, so pointers need no alignment. */
#ifndef IV_OPS_CPU_VMATH_H
#define IV_OPS_CPU_VMATH_H

#include <stdint.h>
#include <string.h>
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

#define IV_VL 8
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

IV_VINLINE v8f v_load(const float *p)
{
    v8f v;
    memcpy(&v, p, sizeof v);
    return v;
}
IV_VINLINE void v_store(float *p, v8f v) { memcpy(p, &v, sizeof v); }
IV_VINLINE v8f v_set1(float s) { return (v8f){s, s, s, s, s, s, s, s}; }
IV_VINLINE v8f v_zero(void) { return v_set1(0.0f); }

/* Loads n < 8 floats, zero-filling the other lanes; stores the first n. */
IV_VINLINE v8f v_load_part(const float *p, int64_t n)
{
    float buf[IV_VL] = {0};
    memcpy(buf, p, (size_t)n * sizeof(float));
    return v_load(buf);
}
IV_VINLINE void v_store_part(float *p, v8f v, int64_t n)
{
    float buf[IV_VL];
    v_store(buf, v);
    memcpy(p, buf, (size_t)n * sizeof(float));
}

/* Lane select: lanes of m that are all ones take a, zero lanes take b. */
IV_VINLINE v8f v_sel(v8i m, v8f a, v8f b) { return (v8f)((m & (v8i)a) | (~m & (v8i)b)); }
IV_VINLINE v8f v_abs(v8f x) { return (v8f)((v8i)x & 0x7fffffff); }
IV_VINLINE v8f v_max(v8f a, v8f b) { return v_sel(a > b, a, b); }
IV_VINLINE v8f v_min(v8f a, v8f b) { return v_sel(a < b, a, b); }

/* a * b + c, fused when the CPU has FMA (ISO C mode never contracts). */
IV_VINLINE v8f v_fma(v8f a, v8f b, v8f c)
{
#if defined(__FMA__)
    return _mm256_fmadd_ps(a, b, c);
#else
    return a * b + c;
#endif
}

/* The rounding error of hi = a * a, so that a * a == hi + lo exactly: one
 * FMA when available, else Dekker's split (exact because ISO C mode keeps
 * the products uncontracted). */
IV_VINLINE v8f v_square_lo(v8f a, v8f hi)
{
#if defined(__FMA__)
    return _mm256_fmsub_ps(a, a, hi);
#else
    v8f big = a * 4097.0f; /* 2^12 + 1 splits 24 bits into 12 + 12 */
    v8f ah = big - (big - a);
    v8f al = a - ah;
    return ((ah * ah - hi) + 2.0f * ah * al) + al * al;
#endif
}

IV_VINLINE float v_hsum(v8f v)
{
    float b[IV_VL];
    v_store(b, v);
    return ((b[0] + b[4]) + (b[1] + b[5])) + ((b[2] + b[6]) + (b[3] + b[7]));
}
IV_VINLINE float v_hmax(v8f v)
{
    float b[IV_VL];
    v_store(b, v);
    float m = b[0];
    for (int i = 1; i < IV_VL; i++) m = b[i] > m ? b[i] : m;
    return m;
}

/* e^x. Range reduction x = n ln2 + r (|r| <= ln2/2, Cody-Waite two-part ln2
 * so r is exact), degree-7 Taylor polynomial for e^r (truncation < 6e-9),
 * then scaling by 2^n built in the exponent bits. Results below the
 * smallest normal float (x < -86.6) are flushed to 0, so exp(-inf) = 0;
 * x beyond ln(FLT_MAX) gives +inf; NaN propagates. */
IV_VINLINE v8f v_exp(v8f x)
{
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    v8i under = x < -86.6f, over = x > 88.7228394f;
    x = v_sel(under, v_set1(-86.6f), x);
    x = v_sel(over, v_set1(88.7228394f), x);
    v8f t = x * 1.44269504f + magic;
    v8i n = (v8i)t - (v8i)v_set1(magic);
    v8f nf = t - magic;
    v8f r = x - nf * 0.693359375f; /* ln2 high part: 9 bits, so nf * it is exact */
    r = r - nf * -2.12194440e-4f;  /* ln2 - 0.693359375 */
    v8f p = v_set1(1.0f / 5040);
    p = v_fma(p, r, v_set1(1.0f / 720));
    p = v_fma(p, r, v_set1(1.0f / 120));
    p = v_fma(p, r, v_set1(1.0f / 24));
    p = v_fma(p, r, v_set1(1.0f / 6));
    p = v_fma(p, r, v_set1(0.5f));
    p = v_fma(p, r, v_set1(1.0f));
    p = v_fma(p, r, v_set1(1.0f));
    /* n is in [-125, 128]: scale by 2 * 2^(n-1) so both ends stay normal. */
    v8f s = (v8f)((n + 126) << 23);
    v8f y = (p + p) * s;
    y = v_sel(under, v_zero(), y);
    return v_sel(over, v_set1(__builtin_inff()), y);
}

/* 1 / (1 + e^-x), from e^-|x| so the exponential never overflows and both
 * tails keep full relative precision. */
IV_VINLINE v8f v_sigmoid(v8f x)
{
    v8f e = v_exp(-v_abs(x));
    v8f s = 1.0f / (1.0f + e);
    return v_sel(x < 0.0f, e * s, s);
}

IV_VINLINE v8f v_silu(v8f x) { return x * v_sigmoid(x); }

/* tanh: an odd Taylor polynomial below |x| = 0.4 (where 1 - 2/(e^2x + 1)
 * would cancel; terms to x^13 leave < 4e-9), that formula above. */
IV_VINLINE v8f v_tanh(v8f x)
{
    v8f a = v_abs(x);
    v8f big = 1.0f - 2.0f / (v_exp(a + a) + 1.0f);
    v8f a2 = a * a;
    v8f p = v_set1(21844.0f / 6081075);
    p = v_fma(p, a2, v_set1(-1382.0f / 155925));
    p = v_fma(p, a2, v_set1(62.0f / 2835));
    p = v_fma(p, a2, v_set1(-17.0f / 315));
    p = v_fma(p, a2, v_set1(2.0f / 15));
    p = v_fma(p, a2, v_set1(-1.0f / 3));
    v8f small = v_fma(a * a2, p, a);
    v8f r = v_sel(a < 0.4f, small, big);
    return (v8f)((v8i)r | ((v8i)x & INT32_MIN));
}

/* Exact GELU x * Phi(x), Phi(x) = erfc(-x / sqrt2) / 2. erfc(z) for z >= 0
 * is t e^{-z^2} Q(t) with t = 1 / (1 + z/2) and Q a degree-9 polynomial
 * least-squares fitted (relative error) to erfc(z) e^{z^2} / t on z in
 * [0, 10] (fit error 2e-8). Negative x use erfc directly, so GELU keeps its
 * relative precision far into the left tail; e^{-x^2/2} is computed from the
 * exact split x^2 = hi + lo because the rounding of x^2 alone would cost
 * ~4e-6 relative at |x| = 10. Beyond |x| = 16 the tail is 0 in float. */
IV_VINLINE v8f v_gelu_erf(v8f x)
{
    v8f a = v_min(v_abs(x), v_set1(16.0f));
    v8f z = a * 0.707106781f;
    v8f t = 1.0f / (1.0f + 0.5f * z);
    v8f q = v_set1(1.353464928e-02f);
    q = v_fma(q, t, v_set1(-1.296140552e-01f));
    q = v_fma(q, t, v_set1(4.428111315e-01f));
    q = v_fma(q, t, v_set1(-6.870458126e-01f));
    q = v_fma(q, t, v_set1(4.341518879e-01f));
    q = v_fma(q, t, v_set1(-1.045284793e-01f));
    q = v_fma(q, t, v_set1(2.274455130e-01f));
    q = v_fma(q, t, v_set1(2.382882237e-01f));
    q = v_fma(q, t, v_set1(2.828940153e-01f));
    q = v_fma(q, t, v_set1(2.820628881e-01f));
    v8f hi = a * a;
    v8f lo = v_square_lo(a, hi);
    v8f e = v_exp(hi * -0.5f) * (1.0f - 0.5f * lo);
    v8f half_erfc = 0.5f * (t * q * e);
    v8f phi = v_sel(x < 0.0f, half_erfc, 1.0f - half_erfc);
    return x * phi;
}

/* tanh GELU 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), via the
 * identity 1 + tanh(u) = 2 sigmoid(2u), which avoids the cancellation of
 * 1 + tanh(u) for negative x. */
IV_VINLINE v8f v_gelu_tanh(v8f x)
{
    v8f u = 0.797884561f * (x + 0.044715f * (x * x * x));
    return x * v_sigmoid(u + u);
}

#endif
