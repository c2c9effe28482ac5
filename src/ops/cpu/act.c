/* Elementwise activations and gated units (GLU, SwiGLU, GeGLU). */
#include <assert.h>

#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/vmath.h"

IV_VINLINE v8f apply_act(v8f v, iv_act act)
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

/* The switch inside the loop is unswitched by the compiler at -O3. */
void iv_cpu_act_row(float *y, const float *x, const float *b, iv_act act, const float *r, int64_t n)
{
    int64_t i = 0;
    for (; i + IV_VL <= n; i += IV_VL) {
        v8f v = v_load(x + i);
        if (b) v = v + v_load(b + i);
        v = apply_act(v, act);
        if (r) v = v + v_load(r + i);
        v_store(y + i, v);
    }
    if (i < n) {
        int64_t m = n - i;
        v8f v = v_load_part(x + i, m);
        if (b) v = v + v_load_part(b + i, m);
        v = apply_act(v, act);
        if (r) v = v + v_load_part(r + i, m);
        v_store_part(y + i, v, m);
    }
}

void iv_cpu_act(const iv_ops *ops, iv_view y, iv_view x, iv_act act)
{
    assert(y.rows == x.rows && y.cols == x.cols);
#pragma omp parallel for schedule(static) if (x.rows * x.cols >= IV_CPU_PAR_MIN)
    for (int64_t t = 0; t < x.rows; t++)
        iv_cpu_act_row(y.data + t * y.ld, x.data + t * x.ld, NULL, act, NULL, x.cols);
}

/* One row of a gated unit: y = act(g) * u with g, u the two halves. Each
 * chunk reads both halves before writing, so y may overlap x's first half. */
static void glu_row(float *y, const float *g, const float *u, int64_t n, iv_act act)
{
    int64_t i = 0;
    for (; i + IV_VL <= n; i += IV_VL) {
        v8f gv = v_load(g + i), uv = v_load(u + i);
        v_store(y + i, apply_act(gv, act) * uv);
    }
    if (i < n) {
        int64_t m = n - i;
        v8f gv = v_load_part(g + i, m), uv = v_load_part(u + i, m);
        v_store_part(y + i, apply_act(gv, act) * uv, m);
    }
}

void iv_cpu_glu(const iv_ops *ops, iv_view y, iv_view x, iv_act act, int act_on_first)
{
    int64_t inter = y.cols;
    assert(x.cols == 2 * inter && y.rows == x.rows);
#pragma omp parallel for schedule(static) if (x.rows * x.cols >= IV_CPU_PAR_MIN)
    for (int64_t t = 0; t < x.rows; t++) {
        const float *first = x.data + t * x.ld, *second = first + inter;
        if (act_on_first)
            glu_row(y.data + t * y.ld, first, second, inter, act);
        else
            glu_row(y.data + t * y.ld, second, first, inter, act);
    }
}
