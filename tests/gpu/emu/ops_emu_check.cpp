/* The CUDA table's Gated DeltaNet and Gemma4-audio kernels
 * (src/ops/cuda/cuda_deltanet.cu: gate_mul, causal_conv1d, delta_rule;
 * cuda_audio_ops.cu: clamp, mul_cols, conv2d) and the image towers' ops of
 * cuda_kernels.cu (rope over several position axes, embed_bag) run on the CPU under
 * emu_rt.h, each through its real launcher, against the CPU table's op on
 * the same 16-bit inputs widened to FP32 with the output rounded once to
 * 16 bits (what the emulated table computes). Random shapes, packed
 * sequences with empty ones, ld > cols, in-place calls, NaN and infinite
 * bounds for clamp, two column tiles of the delta rule's state. No GPU
 * needed: it checks the kernels' logic (indexing, sequence boundaries,
 * barriers under random warp schedules, grid-stride loops), not nvcc's code
 * generation or the timing.
 *
 * Pass: every output within 1 unit in the last place of its 16-bit value
 * (the kernels add in the CPU's order, so most are equal bit for bit; the
 * CPU's vectorised exp and the CUDA library's differ in the last bits of
 * the activations). Prints how many values were equal and how many were
 * one unit apart. Every buffer ends at a PROT_NONE page.
 *
 * Built and run by `make test-gpu-emu` (part of `make test` wherever nvcc
 * is installed: x86-64, CUDA headers only, the release library for the CPU
 * ops); by hand after that:
 *   build/gpu_emu/ops_emu_check            # 200 random cases per op and dtype
 *   build/gpu_emu/ops_emu_check 1000 7     # more cases, seed 7
 * Exit status 1 on a failure. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <vector>

#include "ops/cuda/cuda_internal.h"
#include "emu_rt.h"
#include "emu_kernels.h"
#include "emu_harness.h"


int emu_sms = 2;
int emu_max_blocks = 1 << 24;
int emu_occ = 8;
uint64_t emu_blocks_run = 0;
const void *emu_last_kernel = NULL;

/* The kernels under test, with their launchers (generated). */
#include "ops_emu.cpp"
#include "kernels_emu.cpp"

/* A [rows, ld] activation: 16-bit "device" storage and its FP32 widening. */
struct Act {
    int64_t rows, cols, ld;
    uint16_t *d;
    float *h;
    iv_view dev() const { return iv_view_make(d, g_dt, rows, cols, ld); }
    iv_view host() const { return iv_view_make(h, IV_F32, rows, cols, ld); }
};
static Act act_new(int64_t rows, int64_t cols, int64_t pad, float lo, float hi)
{
    Act a{rows, cols, cols + pad, nullptr, nullptr};
    const int64_t n = rows * a.ld;
    a.d = (uint16_t *)guarded((size_t)n * 2);
    a.h = (float *)guarded((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) {
        a.d[i] = to16(runi(lo, hi));
        a.h[i] = from16(a.d[i]);
    }
    return a;
}

/* A weight: the device copy (16-bit, as prepare_weight leaves it) and the
 * host FP32 tensor of the same values. */
struct Weight {
    iv_tensor dev, host;
};
static Weight weight_new(int64_t rows, int64_t cols, float lo, float hi)
{
    const int64_t n = rows > 0 ? rows * cols : cols;
    uint16_t *d = (uint16_t *)guarded((size_t)n * 2);
    float *h = (float *)guarded((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) {
        d[i] = to16(runi(lo, hi));
        h[i] = from16(d[i]);
    }
    Weight w;
    w.host = rows > 0 ? iv_tensor_2d(h, rows, cols) : iv_tensor_1d(h, cols);
    w.dev = w.host;
    w.dev.data = d;
    w.dev.dtype = g_dt;
    w.dev.device = IV_CUDA;
    return w;
}

static int32_t *seqs_new(int n_seqs, int max_len, int *total)
{
    int32_t *cu = (int32_t *)guarded((size_t)(n_seqs + 1) * 4);
    cu[0] = 0;
    for (int s = 0; s < n_seqs; s++) cu[s + 1] = cu[s] + rint_(max_len + 1);
    if (cu[n_seqs] == 0) cu[n_seqs] = 1; /* at least one row */
    *total = cu[n_seqs];
    return cu;
}

/* ---- comparison ---- */

static long g_equal, g_one_ulp, g_fail;
static int ulp_index(uint16_t x) { return (x & 0x8000) ? -(int)(x & 0x7fff) : (int)(x & 0x7fff); }

/* The kernel's y against the CPU's FP32 y rounded to 16 bits, inside the view. */
static void compare(const char *what, const Act &y)
{
    if (g_err) {
        printf("FAIL %s: the launcher refused: %s\n", what, g_msg);
        g_fail++;
        g_err = 0;
        return;
    }
    long bad = 0;
    for (int64_t t = 0; t < y.rows; t++)
        for (int64_t c = 0; c < y.cols; c++) {
            const uint16_t got = y.d[t * y.ld + c], want = to16(y.h[t * y.ld + c]);
            const float gf = from16(got), wf = from16(want);
            if (got == want || (isnan(gf) && isnan(wf))) {
                g_equal++;
                continue;
            }
            if (abs(ulp_index(got) - ulp_index(want)) == 1) {
                g_one_ulp++;
                continue;
            }
            if (bad++ < 3)
                printf("FAIL %s: [%lld, %lld] got %.8g, want %.8g\n", what, (long long)t, (long long)c, gf, wf);
        }
    g_fail += bad != 0;
}

static const iv_act ACTS[] = {IV_ACT_NONE, IV_ACT_SILU, IV_ACT_SIGMOID, IV_ACT_GELU};

/* ---- the ops ---- */

static void case_gate_mul()
{
    const int64_t rows = 1 + rint_(9), cols = 1 + rint_(70);
    const int one_col = rint_(3) == 0, in_place = rint_(2);
    const iv_act act = ACTS[rint_(4)];
    Act x = act_new(rows, cols, rint_(5), -3, 3), g = act_new(rows, one_col ? 1 : cols, rint_(3), -4, 4);
    Act y = in_place ? x : act_new(rows, cols, rint_(4), -1, 1);
    iv_cpu_ops()->gate_mul(iv_cpu_ops(), y.host(), x.host(), g.host(), act);
    iv_cuda_gate_mul(&g_ctx.ops, y.dev(), x.dev(), g.dev(), act);
    compare("gate_mul", y);
}

static void case_causal_conv1d()
{
    const int n_seqs = 1 + rint_(4), K = 1 + rint_(4);
    int T;
    int32_t *cu = seqs_new(n_seqs, 12, &T);
    const int64_t C = 1 + rint_(40);
    Act x = act_new(T, C, rint_(4), -2, 2), y = act_new(T, C, rint_(3), -1, 1);
    Weight w = weight_new(C, K, -1, 1), b = weight_new(0, C, -0.5f, 0.5f);
    const int bias = rint_(2);
    iv_causal_conv_args a = {.y = y.host(), .x = x.host(), .w = &w.host, .b = bias ? &b.host : NULL,
                             .act = ACTS[rint_(2)], .cu_seqlens = cu, .cu_seqlens_dev = cu, .n_seqs = n_seqs};
    iv_cpu_ops()->causal_conv1d(iv_cpu_ops(), &a);
    a.y = y.dev(), a.x = x.dev(), a.w = &w.dev, a.b = bias ? &b.dev : NULL;
    iv_cuda_causal_conv1d(&g_ctx.ops, &a);
    compare("causal_conv1d", y);
}

static void case_delta_rule()
{
    static const int DKS[] = {3, 8, 16, 40, 128}, DVS[] = {5, 8, 33, 130};
    const int n_seqs = 1 + rint_(3), Hk = 1 + rint_(2), Hv = Hk * (1 + rint_(2));
    const int Dk = DKS[rint_(5)], Dv = DVS[rint_(4)];
    int T;
    int32_t *cu = seqs_new(n_seqs, Dk * Dv > 4000 ? 4 : 14, &T);
    Act q = act_new(T, Hk * Dk, rint_(3), -1, 1), k = act_new(T, Hk * Dk, rint_(3), -1, 1);
    Act v = act_new(T, Hv * Dv, rint_(3), -2, 2), a = act_new(T, Hv, rint_(2), -3, 1);
    Act b = act_new(T, Hv, rint_(2), -2, 2), out = act_new(T, Hv * Dv, rint_(3), -1, 1);
    Weight a_log = weight_new(0, Hv, -0.5f, 0.5f), dt = weight_new(0, Hv, -0.5f, 0.5f);
    iv_delta_rule_args h = {.out = out.host(), .q = q.host(), .k = k.host(), .v = v.host(), .a = a.host(),
                            .b = b.host(), .a_log = &a_log.host, .dt_bias = &dt.host, .n_k_heads = Hk,
                            .n_v_heads = Hv, .k_head_dim = Dk, .v_head_dim = Dv, .cu_seqlens = cu,
                            .cu_seqlens_dev = cu, .n_seqs = n_seqs, .chunk = 0};
    iv_cpu_ops()->delta_rule(iv_cpu_ops(), &h);
    h.out = out.dev(), h.q = q.dev(), h.k = k.dev(), h.v = v.dev(), h.a = a.dev(), h.b = b.dev();
    h.a_log = &a_log.dev, h.dt_bias = &dt.dev;
    iv_cuda_delta_rule(&g_ctx.ops, &h);
    compare("delta_rule", out);
}

static void case_clamp_mul_cols()
{
    const int64_t rows = 1 + rint_(7), cols = 1 + rint_(50);
    const int in_place = rint_(2);
    Act x = act_new(rows, cols, rint_(4), -3, 3);
    if (rint_(2)) { /* NaN passes through both */
        const int i = rint_((int)cols);
        x.d[i] = to16(NAN);
        x.h[i] = NAN;
    }
    Act y = in_place ? x : act_new(rows, cols, rint_(3), -1, 1);
    if (rint_(2)) {
        static const float LO[] = {-1.25f, -INFINITY, 0.0f}, HI[] = {0.5f, INFINITY, 2.0f};
        const float lo = LO[rint_(3)], hi = HI[rint_(3)];
        iv_cpu_ops()->clamp(iv_cpu_ops(), y.host(), x.host(), lo, hi);
        iv_cuda_clamp(&g_ctx.ops, y.dev(), x.dev(), lo, hi);
        compare("clamp", y);
    } else {
        int64_t n = 1 + rint_((int)cols);
        while (cols % n) n--;
        Weight w = weight_new(0, n, -2, 2);
        iv_cpu_ops()->mul_cols(iv_cpu_ops(), y.host(), x.host(), &w.host);
        iv_cuda_mul_cols(&g_ctx.ops, y.dev(), x.dev(), &w.dev);
        compare("mul_cols", y);
    }
}

static void case_conv2d()
{
    const int c_in = 1 + rint_(3), c_out = 1 + rint_(5), K = 1 + rint_(3), S = 1 + rint_(2), P = rint_(2);
    const int w_in = K + rint_(8), w_out = (w_in + 2 * P - K) / S + 1, n_seqs = 1 + rint_(3);
    int32_t *cu_in = (int32_t *)guarded((size_t)(n_seqs + 1) * 4), *cu_out = (int32_t *)guarded((size_t)(n_seqs + 1) * 4);
    cu_in[0] = cu_out[0] = 0;
    for (int s = 0; s < n_seqs; s++) {
        const int len = rint_(9);
        cu_in[s + 1] = cu_in[s] + len;
        cu_out[s + 1] = cu_out[s] + (len + 2 * P >= K ? (len + 2 * P - K) / S + 1 : 0);
    }
    if (cu_out[n_seqs] == 0) return; /* nothing to compute */
    Act x = act_new(cu_in[n_seqs], (int64_t)w_in * c_in, rint_(3), -2, 2);
    Act y = act_new(cu_out[n_seqs], (int64_t)w_out * c_out, rint_(3), -1, 1);
    Weight w = weight_new(c_out, (int64_t)c_in * K * K, -0.5f, 0.5f);
    iv_conv2d_args a = {.y = y.host(), .x = x.host(), .w = &w.host, .c_in = c_in, .c_out = c_out, .w_in = w_in,
                        .w_out = w_out, .kernel = K, .stride = S, .pad = P, .cu_in = cu_in, .cu_out = cu_out,
                        .cu_in_dev = cu_in, .cu_out_dev = cu_out, .n_seqs = n_seqs};
    iv_cpu_ops()->conv2d(iv_cpu_ops(), &a);
    a.y = y.dev(), a.x = x.dev(), a.w = &w.dev;
    iv_cuda_conv2d(&g_ctx.ops, &a);
    compare("conv2d", y);
}

/* Rope with position axes (Qwen3-VL's interleaved mRoPE, the towers' 2-D
 * rotary): each frequency turns by the position on its section's axis. */
static void case_rope_axes()
{
    const int n_heads = 1 + rint_(3), head_dim = 2 * (2 + rint_(12)), rot_dim = head_dim - 2 * rint_(2);
    const int64_t T = 1 + rint_(9), half = rot_dim / 2;
    Act x = act_new(T, (int64_t)n_heads * head_dim, rint_(3), -2, 2);
    int32_t *pos = (int32_t *)guarded((size_t)(3 * T) * 4);
    for (int64_t i = 0; i < 3 * T; i++) pos[i] = rint_(300);
    float *inv = (float *)guarded((size_t)half * 4);
    uint8_t *section = (uint8_t *)guarded((size_t)half);
    for (int64_t i = 0; i < half; i++) {
        inv[i] = powf(10000.0f, -2.0f * (float)i / (float)rot_dim);
        section[i] = (uint8_t)rint_(3);
    }
    const int plain = rint_(4) == 0; /* stride 0: every axis the same position */
    iv_rope_args r = {x.host(), n_heads, head_dim, rot_dim, pos, inv, rint_(2), rint_(2) ? 1.0f : 0.75f,
                      section, plain ? 0 : T};
    iv_cpu_ops()->rope(iv_cpu_ops(), &r);
    r.x = x.dev();
    iv_cuda_rope(&g_ctx.ops, &r);
    compare("rope axes", x);
}

/* embed_bag: weighted sums of table rows (bilinear position grids). */
static void case_embed_bag()
{
    const int64_t rows = 1 + rint_(9), cols = 1 + rint_(40), vocab = 1 + rint_(20);
    const int taps = 1 + rint_(4);
    Weight table = weight_new(vocab, cols, -2, 2);
    Act y = act_new(rows, cols, rint_(3), -1, 1);
    int32_t *ids = (int32_t *)guarded((size_t)(rows * taps) * 4);
    float *w = (float *)guarded((size_t)(rows * taps) * 4);
    for (int64_t i = 0; i < rows * taps; i++) ids[i] = rint_((int)vocab), w[i] = runi(0, 1);
    iv_cpu_ops()->embed_bag(iv_cpu_ops(), y.host(), &table.host, ids, w, taps);
    iv_cuda_embed_bag(&g_ctx.ops, y.dev(), &table.dev, ids, w, taps);
    compare("embed_bag", y);
}

/* A shape the delta-rule kernel does not take is refused, not run. */
static void check_refusal()
{
    int T;
    int32_t *cu = seqs_new(1, 3, &T);
    Act q = act_new(T, 300, 0, -1, 1), v = act_new(T, 4, 0, -1, 1), ab = act_new(T, 1, 0, -1, 1);
    Act out = act_new(T, 4, 0, -1, 1);
    Weight w = weight_new(0, 1, 0, 1);
    iv_delta_rule_args h = {.out = out.dev(), .q = q.dev(), .k = q.dev(), .v = v.dev(), .a = ab.dev(), .b = ab.dev(),
                            .a_log = &w.dev, .dt_bias = &w.dev, .n_k_heads = 1, .n_v_heads = 1, .k_head_dim = 300,
                            .v_head_dim = 4, .cu_seqlens = cu, .cu_seqlens_dev = cu, .n_seqs = 1, .chunk = 0};
    iv_cuda_delta_rule(&g_ctx.ops, &h);
    if (!g_err || !strstr(g_msg, "delta_rule")) {
        printf("FAIL delta_rule with key heads of 300 was not refused\n");
        g_fail++;
    }
    g_err = 0;
}

int main(int argc, char **argv)
{
    const int cases = argc > 1 ? atoi(argv[1]) : 200;
    rs = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
    static void (*const OPS[])() = {case_gate_mul, case_causal_conv1d, case_delta_rule, case_clamp_mul_cols,
                                    case_conv2d, case_rope_axes, case_embed_bag};
    static const char *const NAMES[] = {"gate_mul", "causal_conv1d", "delta_rule", "clamp/mul_cols", "conv2d",
                                        "rope axes", "embed_bag"};
    enum { N_OPS = sizeof OPS / sizeof OPS[0] };
    for (int d = 0; d < 2; d++) {
        g_dt = d ? IV_F16 : IV_BF16;
        g_ctx.dt = g_dt;
        g_ctx.bf16 = g_dt == IV_BF16;
        g_ctx.ops.ctx = &g_ctx;
        for (int o = 0; o < N_OPS; o++) {
            const long e0 = g_equal, u0 = g_one_ulp, f0 = g_fail;
            for (int i = 0; i < cases; i++) {
                OPS[o]();
                free_all();
            }
            printf("%-8s %-14s %d cases: %ld values equal, %ld one unit apart, %ld failed cases\n",
                   d ? "float16" : "bfloat16", NAMES[o], cases, g_equal - e0, g_one_ulp - u0, g_fail - f0);
        }
    }
    check_refusal();
    free_all();
    printf("%s: %ld equal, %ld one unit apart, %ld failed\n", g_fail ? "FAILED" : "OK", g_equal, g_one_ulp, g_fail);
    return g_fail ? 1 : 0;
}
