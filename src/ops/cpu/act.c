/* Elementwise activations and gated units (GLU, SwiGLU, GeGLU). */
#include <assert.h>

#include "ops/cpu/cpu_ops.h"
/* Elementwise only: 16 lanes where the build has AVX-512 (GELU costs about
 * as much as a matmul epilogue's memory traffic at 8). */
#define IV_VMATH_WIDE
#include "ops/cpu/vmath.h"

/* Vectors per step of the row loops: GELU's dependency chains are long, and
 * four of them side by side keep the FP pipes busy (vmath.h, v_gelu_erf_n). */
#define ACT_GROUP 4
/* The int8 linear's dequantizing epilogue takes two where the vectors are
 * AVX2's (AVX-512 builds, with 32 registers, keep four). With four, its
 * GELU's values outgrow the 16 AVX2 registers and go through the stack,
 * and in some phases of this VM the reloads stalled: MiniLM-L6's
 * 384 -> 1536 + GELU int8 op took 26.3 ms with four, 17.9 with two and
 * 18.4 with one, on 2 threads (15.4 / 14.9 ms with four / two in a
 * quiet phase). all-MiniLM-L6-v2 int8 through the engine, alternating run
 * by run in one process, Zen 4 held to AVX2, p50: 32 x 128 297 -> 291 ms
 * and, in a run that met a slow phase, 392 -> 350; 8 tokens 0.623 ->
 * 0.614 and 0.632 -> 0.623 ms. The FP32 strip (act_rows) keeps four:
 * two there cost 4% of MiniLM-L6's 32 x 128 (494 -> 514 ms). */
#if IV_VL == 16
#define DEQUANT_GROUP 4
#else
#define DEQUANT_GROUP 2
#endif

/* Every iv_act, for switches that instantiate a loop per activation. */
#define EACH_ACT(X) \
    X(IV_ACT_NONE) X(IV_ACT_GELU) X(IV_ACT_GELU_TANH) X(IV_ACT_SILU) X(IV_ACT_RELU) X(IV_ACT_TANH) X(IV_ACT_SIGMOID)

/* nv vectors of one row from column i on: bias, activation, residual. */
IV_VINLINE void act_step(float *y, const float *x, const float *b, const iv_act act, const float *r, int64_t i,
                         const int nv)
{
    vf v[IV_N_MAX];
    IV_EACH(k, nv) v[k] = b ? v_load(x + i + k * IV_VL) + v_load(b + i + k * IV_VL) : v_load(x + i + k * IV_VL);
    v_act_n(v, nv, act);
    IV_EACH(k, nv) v_store(y + i + k * IV_VL, r ? v[k] + v_load(r + i + k * IV_VL) : v[k]);
}

/* One instance per activation (act is a constant after inlining), so the
 * loop holds no jump table: callers with many short rows (the linear
 * kernels' 32-column strips) pass them all in one call. Rows of whole
 * groups (such strips: n = 32 on AVX2) run as one flat loop over (row,
 * group) steps: with a loop per row, GCC set up GELU's constants again at
 * every row's start (a broadcast and a stack store each, ~24 cycles a
 * row). One thread, in L1, GELU at n = 32: 27.7 -> 21.5 cycles per 8
 * floats; linear 4096 x 384 -> 1536 + GELU, 2 threads, held to AVX2:
 * 25.0 -> 24.3 ms; MiniLM-L6 32 x 128 through the engine, in-process A/B,
 * p50 475.2 -> 471.9 ms. */
IV_VINLINE void act_rows(float *y, int64_t ldy, const float *x, int64_t ldx, const float *b, const iv_act act,
                         const float *r, int64_t ldr, int64_t rows, int64_t n)
{
    const int64_t gw = ACT_GROUP * IV_VL;
    if (n % gw == 0) {
        for (int64_t s = 0, i = 0; s < rows * (n / gw); s++) {
            act_step(y, x, b, act, r, i, ACT_GROUP);
            if ((i += gw) == n) {
                i = 0;
                y += ldy;
                x += ldx;
                r = r ? r + ldr : NULL;
            }
        }
        return;
    }
    for (int64_t t = 0; t < rows; t++, y += ldy, x += ldx, r = r ? r + ldr : NULL) {
        int64_t i = 0;
        for (; i + gw <= n; i += gw) act_step(y, x, b, act, r, i, ACT_GROUP);
        for (; i + IV_VL <= n; i += IV_VL) act_step(y, x, b, act, r, i, 1);
        if (i < n) {
            int64_t m = n - i;
            vf v = v_load_part(x + i, m);
            if (b) v = v + v_load_part(b + i, m);
            v = v_act(v, act);
            if (r) v = v + v_load_part(r + i, m);
            v_store_part(y + i, v, m);
        }
    }
}

void iv_cpu_act_rows(float *y, int64_t ldy, const float *x, int64_t ldx, const float *b, iv_act act,
                     const float *r, int64_t ldr, int64_t rows, int64_t n)
{
#define ACT_CASE(A) \
    case A: act_rows(y, ldy, x, ldx, b, A, r, ldr, rows, n); break;
    switch (act) { EACH_ACT(ACT_CASE) }
#undef ACT_CASE
}

/* The int8 linear's epilogue: dequantization folded into the same pass;
 * dequant_step does nv vectors of one row from column i on. */
IV_VINLINE void dequant_step(float *y, const int32_t *acc, int32_t z, float s, const int32_t *sums,
                             const float *wscale, const float *b, const iv_act act, const float *r, int64_t i,
                             const int nv)
{
    vf v[IV_N_MAX];
    IV_EACH(k, nv)
    {
        vi a, sm;
        memcpy(&a, acc + i + k * IV_VL, sizeof a);
        memcpy(&sm, sums + i + k * IV_VL, sizeof sm);
        v[k] = __builtin_convertvector(a - z * sm, vf) * (s * v_load(wscale + i + k * IV_VL));
        if (b) v[k] = v[k] + v_load(b + i + k * IV_VL);
    }
    v_act_n(v, nv, act);
    IV_EACH(k, nv) v_store(y + i + k * IV_VL, r ? v[k] + v_load(r + i + k * IV_VL) : v[k]);
}

IV_VINLINE void dequant_act_rows(float *y, int64_t ldy, const int32_t *acc, int64_t ldacc, const int32_t *zero,
                                 const float *scale, const int32_t *sums, const float *wscale, const float *b,
                                 const iv_act act, const float *r, int64_t ldr, int64_t rows, int64_t n)
{
    /* Rows of whole groups as one flat loop, as act_rows and for the same
     * reason. int8 384 -> 1536 + GELU, 4096 rows, 2 threads: held to AVX2
     * 14.85 -> 14.64 ms, natively (VNNI, 16 lanes) 10.26 -> 9.13 ms;
     * all-MiniLM-L6-v2 int8 p50, in-process A/B: 32 x 128 277.2 -> 275.7
     * ms held to AVX2, natively 205.4 -> 199.7; natively 64 tokens 3.90 ->
     * 3.79, 8 tokens 0.659 -> 0.647. */
    const int64_t gw = DEQUANT_GROUP * IV_VL;
    if (rows > 0 && n % gw == 0) {
        int32_t z = zero[0];
        float s = scale[0];
        for (int64_t st = 0, t = 0, i = 0; st < rows * (n / gw); st++) {
            dequant_step(y, acc, z, s, sums, wscale, b, act, r, i, DEQUANT_GROUP);
            if ((i += gw) == n) {
                i = 0;
                y += ldy;
                acc += ldacc;
                r = r ? r + ldr : NULL;
                if (++t < rows) {
                    z = zero[t];
                    s = scale[t];
                }
            }
        }
        return;
    }
    for (int64_t t = 0; t < rows; t++, y += ldy, acc += ldacc, r = r ? r + ldr : NULL) {
        const int32_t z = zero[t];
        const float s = scale[t];
        int64_t i = 0;
        for (; i + gw <= n; i += gw)
            dequant_step(y, acc, z, s, sums, wscale, b, act, r, i, DEQUANT_GROUP);
        for (; i + IV_VL <= n; i += IV_VL) dequant_step(y, acc, z, s, sums, wscale, b, act, r, i, 1);
        for (; i < n; i++) {
            float deq = (float)(acc[i] - z * sums[i]) * (s * wscale[i]);
            iv_cpu_act_row(y + i, &deq, b ? b + i : NULL, act, r ? r + i : NULL, 1);
        }
    }
}

void iv_cpu_dequant_act_rows(float *y, int64_t ldy, const int32_t *acc, int64_t ldacc, const int32_t *zero,
                             const float *scale, const int32_t *sums, const float *wscale, const float *b,
                             iv_act act, const float *r, int64_t ldr, int64_t rows, int64_t n)
{
#define ACT_CASE(A) \
    case A: dequant_act_rows(y, ldy, acc, ldacc, zero, scale, sums, wscale, b, A, r, ldr, rows, n); break;
    switch (act) { EACH_ACT(ACT_CASE) }
#undef ACT_CASE
}

void iv_cpu_act_row(float *y, const float *x, const float *b, iv_act act, const float *r, int64_t n)
{
    iv_cpu_act_rows(y, 0, x, 0, b, act, r, 0, 1, n);
}

void iv_cpu_act(const iv_ops *ops, iv_view y, iv_view x, iv_act act)
{
    assert(y.rows == x.rows && y.cols == x.cols);
#pragma omp parallel for schedule(static) if (x.rows * x.cols >= IV_CPU_PAR_MIN)
    for (int64_t t = 0; t < x.rows; t++)
        iv_cpu_act_row(((float *)y.data) + t * y.ld, ((float *)x.data) + t * x.ld, NULL, act, NULL, x.cols);
}

/* One row of a gated unit: y = act(g) * u with g, u the two halves. Each
 * chunk reads both halves before writing, so y may overlap x's first half. */
static void glu_row(float *y, const float *g, const float *u, int64_t n, iv_act act)
{
    int64_t i = 0;
    for (; i + IV_VL <= n; i += IV_VL) {
        vf gv = v_load(g + i), uv = v_load(u + i);
        v_store(y + i, v_act(gv, act) * uv);
    }
    if (i < n) {
        int64_t m = n - i;
        vf gv = v_load_part(g + i, m), uv = v_load_part(u + i, m);
        v_store_part(y + i, v_act(gv, act) * uv, m);
    }
}

void iv_cpu_glu(const iv_ops *ops, iv_view y, iv_view x, iv_act act, int act_on_first)
{
    int64_t inter = y.cols;
    assert(x.cols == 2 * inter && y.rows == x.rows);
#pragma omp parallel for schedule(static) if (x.rows * x.cols >= IV_CPU_PAR_MIN)
    for (int64_t t = 0; t < x.rows; t++) {
        const float *first = ((float *)x.data) + t * x.ld, *second = first + inter;
        if (act_on_first)
            glu_row(((float *)y.data) + t * y.ld, first, second, inter, act);
        else
            glu_row(((float *)y.data) + t * y.ld, second, first, inter, act);
    }
}

void iv_cpu_gate_mul(const iv_ops *ops, iv_view y, iv_view x, iv_view g, iv_act act)
{
    assert(y.rows == x.rows && y.cols == x.cols && g.rows == x.rows && (g.cols == x.cols || g.cols == 1));
    if (g.cols == 1 && x.cols != 1) {
#pragma omp parallel for schedule(static) if (x.rows * x.cols >= IV_CPU_PAR_MIN)
        for (int64_t t = 0; t < x.rows; t++) {
            float f;
            iv_cpu_act_row(&f, (const float *)g.data + t * g.ld, NULL, act, NULL, 1);
            const float *xr = (const float *)x.data + t * x.ld;
            float *yr = (float *)y.data + t * y.ld;
            for (int64_t c = 0; c < x.cols; c++) yr[c] = f * xr[c];
        }
        return;
    }
#pragma omp parallel for schedule(static) if (x.rows * x.cols >= IV_CPU_PAR_MIN)
    for (int64_t t = 0; t < x.rows; t++)
        glu_row(((float *)y.data) + t * y.ld, ((const float *)g.data) + t * g.ld, ((const float *)x.data) + t * x.ld,
                x.cols, act);
}
