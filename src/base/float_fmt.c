/* Shortest round-trip "%g" text of a float, in exact integer arithmetic.
 *
 * A normal float is f = m * 2^e (m < 2^24). With s chosen so that
 * I = floor(f * 10^s) has 9 digits, N = f * 10^s * 2^q is an integer
 * (q = -e for e < 0, else 0) below 2^121 for 1e-20 <= |f| < 1e9, so one
 * unsigned __int128 holds it exactly: I = N >> q, and the bits shifted out
 * are the exact fraction. For each p = 6..9:
 *   - round I to p digits, half to even on the exact value, as glibc's
 *     printf does: the dropped digits against 5 * 10^(k-1), then the
 *     fraction for a tie;
 *   - the candidate reads back as f (strtof rounds to nearest, ties to
 *     even) when it lies within half a gap to f's neighbours, the gap below
 *     halved at a power of two; on exactly half, only if f's m is even.
 *     In the same scale, times 4 so the half gaps are integers.
 * The shortest p that reads back gives the digits, laid out as %.{p}g
 * does (at most 3 tries, see the search below).
 * Values outside that range (never an embedding, rarely a score) take
 * snprintf and strtof, which define the result. */
#include "base/float_fmt.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int iv_format_float_reference(char out[32], float f)
{
    int n = 0;
    for (int prec = 6; prec <= 9; prec++) {
        n = snprintf(out, 32, "%.*g", prec, (double)f);
        if (strtof(out, NULL) == f) break;
    }
    return n;
}

#ifndef __SIZEOF_INT128__
/* No 128-bit integers (32-bit targets): the reference does it all. */
int iv_format_float(char out[32], float f) { return iv_format_float_reference(out, f); }
#else

typedef unsigned __int128 u128;

static const uint64_t pow10_u64[20] = {1ull,
                                       10ull,
                                       100ull,
                                       1000ull,
                                       10000ull,
                                       100000ull,
                                       1000000ull,
                                       10000000ull,
                                       100000000ull,
                                       1000000000ull,
                                       10000000000ull,
                                       100000000000ull,
                                       1000000000000ull,
                                       10000000000000ull,
                                       100000000000000ull,
                                       1000000000000000ull,
                                       10000000000000000ull,
                                       100000000000000000ull,
                                       1000000000000000000ull,
                                       10000000000000000000ull};

static u128 pow10_u128(int s) { return s < 20 ? pow10_u64[s] : (u128)pow10_u64[19] * pow10_u64[s - 19]; }

/* %.{p}g layout of the p digits dig (already rounded) times 10^x. */
static int layout_g(char *out, int neg, const char *dig, int p, int x)
{
    int n = p, o = 0;
    while (n > 1 && dig[n - 1] == '0') n--; /* %g drops trailing zeros */
    if (neg) out[o++] = '-';
    if (x < -4 || x >= p) {
        out[o++] = dig[0];
        if (n > 1) {
            out[o++] = '.';
            memcpy(out + o, dig + 1, (size_t)(n - 1));
            o += n - 1;
        }
        out[o++] = 'e';
        out[o++] = x < 0 ? '-' : '+';
        const int ax = x < 0 ? -x : x;
        if (ax >= 100) out[o++] = (char)('0' + ax / 100);
        out[o++] = (char)('0' + ax / 10 % 10);
        out[o++] = (char)('0' + ax % 10);
    } else if (x >= 0) {
        for (int i = 0; i <= x; i++) out[o++] = i < n ? dig[i] : '0';
        if (n > x + 1) {
            out[o++] = '.';
            memcpy(out + o, dig + x + 1, (size_t)(n - x - 1));
            o += n - x - 1;
        }
    } else {
        out[o++] = '0';
        out[o++] = '.';
        for (int i = 0; i < -x - 1; i++) out[o++] = '0';
        memcpy(out + o, dig, (size_t)n);
        o += n;
    }
    out[o] = 0;
    return o;
}

/* The 9 digits of f (i), f exactly (scaled = 4 f 10^s 2^q), the fraction
 * past i (rest of 2^q) and the half gaps to f's neighbours, all in the
 * same scale. */
typedef struct fmt_state {
    uint64_t i;
    int q, odd;
    u128 rest, half, scaled, gap_up, gap_down;
} fmt_state;

/* Rounds i to p digits (half to even on the exact value, as printf does)
 * into *d; 1 when that reads back as f. */
static inline __attribute__((always_inline)) int rounds_back(const fmt_state *st, int p, uint64_t *d)
{
    const uint64_t div = pow10_u64[9 - p], r = st->i % div;
    *d = st->i / div;
    int up;
    if (div == 1) up = st->rest > st->half || (st->rest == st->half && st->q && (*d & 1));
    else up = r > div / 2 || (r == div / 2 && (st->rest || (*d & 1)));
    *d += (uint64_t)up;
    const u128 cand = ((u128)(*d * div) << st->q) << 2;
    const u128 dist = cand >= st->scaled ? cand - st->scaled : st->scaled - cand;
    const u128 gap = cand >= st->scaled ? st->gap_up : st->gap_down;
    return dist < gap || (dist == gap && !st->odd);
}

int iv_format_float(char out[32], float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    const int neg = (int)(bits >> 31), bexp = (int)(bits >> 23) & 0xff;
    const uint32_t frac = bits & 0x7fffff;
    if (bexp == 0 && frac == 0) {
        strcpy(out, neg ? "-0" : "0");
        return neg + 1;
    }
    const float a = fabsf(f);
    if (!(a >= 1e-20f && a < 1e9f)) return iv_format_float_reference(out, f);

    const uint64_t m = (1u << 23) | frac;
    const int e = bexp - 150;
    const int q = e < 0 ? -e : 0;
    /* floor(log10 f) is floor(E log10 2) or one more, E = bexp - 127. */
    int x10 = ((bexp - 127) * 78913) >> 18, s; /* 78913 / 2^18 ~ log10 2; >> floors */
    u128 n;
    uint64_t i;
    for (;;) {
        s = 8 - x10;
        n = (u128)(m << (e > 0 ? e : 0)) * pow10_u128(s);
        i = (uint64_t)(n >> q);
        if (i >= 1000000000ull) x10++;
        else if (i < 100000000ull) x10--;
        else break;
    }
    fmt_state st = {.i = i,
                    .q = q,
                    .odd = (int)(m & 1),
                    .rest = n - ((u128)i << q),
                    .half = q ? (u128)1 << (q - 1) : 0,
                    .scaled = n << 2,
                    .gap_up = (pow10_u128(s) << (e > 0 ? e : 0)) << 1};
    st.gap_down = frac == 0 && bexp > 1 ? st.gap_up >> 1 : st.gap_up;
    uint64_t d = 0;
    int p;
    if (st.gap_down != st.gap_up) {
        /* A power of two: its neighbours are not equally far, so a longer
         * rounding can fall on the nearer side and fail where a shorter
         * one passed. Try every length in order. */
        for (p = 6; p <= 9 && !rounds_back(&st, p, &d); p++) continue;
    } else if (rounds_back(&st, 8, &d)) {
        /* Otherwise, if p digits read back, so do p + 1 (the nearest p + 1
         * digits are no farther than the nearest p): at most 3 tries, 8
         * then 7 and 6 below it, or 9. */
        uint64_t shorter;
        for (p = 8; p > 6 && rounds_back(&st, p - 1, &shorter); p--) d = shorter;
    } else {
        p = rounds_back(&st, 9, &d) ? 9 : 10;
    }
    if (p > 9) return iv_format_float_reference(out, f); /* not reached: 9 digits always read back */
    int x = x10;
    if (d == pow10_u64[p]) {
        d /= 10;
        x++;
    }
    char dig[10];
    for (int k = p - 1; k >= 0; k--, d /= 10) dig[k] = (char)('0' + d % 10);
    return layout_g(out, neg, dig, p, x);
}

#endif
