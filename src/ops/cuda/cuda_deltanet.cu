/* The CUDA kernels of Gated DeltaNet (Qwen3.5's linear-attention layers,
 * ops.h: iv_causal_conv_args, iv_delta_rule_args) and of gate_mul, which
 * its gated norm and the gated attention outputs use. Each mirrors its CPU
 * op (ops/cpu/act.c, deltanet.c, deltanet_math.h): inputs read from 16-bit
 * storage, everything computed in FP32 in the CPU's order of additions,
 * outputs rounded once to storage, as the emulated table does.
 *
 * The delta rule runs token by token (the recurrence, as delta_rule on the
 * CPU; the table has no delta_chunk). One block per (sequence, value head,
 * tile of DN_COLS state columns) and one thread per column j of the
 * [Dk, Dv] state, which keeps column j in registers: every thread's loop over the Dk rows is the CPU's loop in
 * the same order, so out[t, j] adds its terms exactly as the CPU does. */
#include "ops/cuda/cuda_internal.h"

/* ---- gate_mul: y = x * act(g), g as wide as x or one column ---- */

static __global__ void gate_mul_kernel(void *y, int64_t ldy, const void *x, int64_t ldx, const void *g, int64_t ldg,
                                       int g_col, int64_t rows, int64_t cols, int act, int bf16)
{
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    for (int64_t t = blockIdx.y; t < rows; t += gridDim.y) {
        const float f = iv_act_f(iv_ld(g, t * ldg + (g_col ? 0 : c), bf16), act);
        iv_st(y, t * ldy + c, f * iv_ld(x, t * ldx + c, bf16), bf16);
    }
}

void iv_cuda_gate_mul(const iv_ops *ops, iv_view y, iv_view x, iv_view g, iv_act act)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    if (!iv_cuda_view_ok(c, x) || !iv_cuda_view_ok(c, y) || !iv_cuda_view_ok(c, g) || y.rows != x.rows ||
        y.cols != x.cols || g.rows != x.rows || (g.cols != x.cols && g.cols != 1)) {
        iv_cuda_note_invalid(ops, "gate_mul: y [%lld, %lld], x [%lld, %lld], g [%lld, %lld]", (long long)y.rows,
                             (long long)y.cols, (long long)x.rows, (long long)x.cols, (long long)g.rows,
                             (long long)g.cols);
        return;
    }
    if (x.rows == 0 || x.cols == 0) return;
    gate_mul_kernel<<<iv_cuda_ew_grid(x.rows, x.cols), IV_CUDA_EW_THREADS, 0, c->stream>>>(
        y.data, y.ld, x.data, x.ld, g.data, g.ld, g.cols == 1 && x.cols != 1, x.rows, x.cols, (int)act, c->bf16);
    IV_CUDA_CHECK_LAUNCH(ops, "gate_mul");
}

/* ---- the causal depthwise convolution ---- */

/* y[t, c] = act(sum_k w[c, k] x[t - (K - 1) + k, c] + b[c]), rows before
 * t's sequence read as zero (skipped, as the CPU skips them). */
static __global__ void causal_conv1d_kernel(void *y, int64_t ldy, const void *x, int64_t ldx, const void *w,
                                            const void *b, const int32_t *cu, int n_seqs, int64_t rows, int64_t C,
                                            int K, int act, int bf16)
{
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    for (int64_t t = blockIdx.y; t < rows; t += gridDim.y) {
        const int64_t r0 = cu[iv_seq_of(cu, n_seqs, t)];
        float acc = 0.0f;
        for (int k = 0; k < K; k++) {
            const int64_t src = t - (K - 1) + k;
            if (src < r0) continue;
            acc = __fadd_rn(acc, __fmul_rn(iv_ld(w, c * K + k, bf16), iv_ld(x, src * ldx + c, bf16)));
        }
        if (b) acc = __fadd_rn(acc, iv_ld(b, c, bf16));
        iv_st(y, t * ldy + c, iv_act_f(acc, act), bf16);
    }
}

void iv_cuda_causal_conv1d(const iv_ops *ops, const iv_causal_conv_args *a)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    const int64_t C = a->x.cols, K = a->w ? iv_tensor_cols(a->w) : 0;
    if (!iv_cuda_view_ok(c, a->x) || !iv_cuda_view_ok(c, a->y) || a->y.rows != a->x.rows || a->y.cols != C || !a->w ||
        !iv_cuda_weight_ok(c, a->w, C * K) || iv_tensor_rows(a->w) != C || K < 1 || !iv_cuda_weight_ok(c, a->b, C) ||
        (a->x.rows > 0 && !iv_cuda_cu_ok(a->cu_seqlens, a->cu_seqlens_dev, a->n_seqs, a->x.rows))) {
        iv_cuda_note_invalid(ops, "causal_conv1d: y [%lld, %lld] from x [%lld, %lld], kernel %lld, %d sequences",
                             (long long)a->y.rows, (long long)a->y.cols, (long long)a->x.rows, (long long)C,
                             (long long)K, a->n_seqs);
        return;
    }
    if (a->x.rows == 0 || C == 0) return;
    causal_conv1d_kernel<<<iv_cuda_ew_grid(a->x.rows, C), IV_CUDA_EW_THREADS, 0, c->stream>>>(
        a->y.data, a->y.ld, a->x.data, a->x.ld, a->w->data, a->b ? a->b->data : NULL, a->cu_seqlens_dev, a->n_seqs,
        a->x.rows, C, (int)K, (int)a->act, c->bf16);
    IV_CUDA_CHECK_LAUNCH(ops, "causal_conv1d");
}

/* ---- the gated delta rule, token by token ---- */

struct DeltaParams {
    void *out;
    const void *q, *k, *v, *a, *b;
    int64_t ld_out, ld_q, ld_k, ld_v, ld_a, ld_b;
    const void *a_log, *dt_bias;
    const int32_t *cu;
    int n_v_heads, rep, dk, dv;
    float q_scale;
    int bf16;
};

/* torch.nn.functional.softplus (beta 1, threshold 20), as iv_dn_softplus. */
static __device__ __forceinline__ float dn_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* 1 / sqrt(sum x^2 + 1e-6) over n values of shared memory, in index order
 * (iv_dn_l2norm_scaled's sum): every thread computes the same value. */
static __device__ __forceinline__ float dn_inv_norm(const float *x, int n)
{
    float ss = 0.0f;
    for (int i = 0; i < n; i++) ss = __fadd_rn(ss, __fmul_rn(x[i], x[i]));
    return __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(ss, 1e-6f)));
}

/* Columns of the state per block: at most 128 threads, so a thread may keep
 * up to 255 registers (a column of 128 or 256 rows) without spilling. */
#define DN_COLS 128

/* Block (sequence s, value head h) = (blockIdx.x / n_v_heads, % n_v_heads),
 * columns from blockIdx.y * DN_COLS; thread j < dv owns column j of the
 * state in S[0 .. dk). DK is dk rounded up to a compiled size, so S stays
 * in registers. Shared memory: the raw q and k rows of the current token. */
template <int DK>
static __global__ void __launch_bounds__(DN_COLS) delta_rule_kernel(DeltaParams p)
{
    extern __shared__ float dn_smem[];
    float *qs = dn_smem, *ks = dn_smem + p.dk;
    const int s = blockIdx.x / p.n_v_heads, h = blockIdx.x - s * p.n_v_heads, hk = h / p.rep;
    const int j = blockIdx.y * DN_COLS + threadIdx.x;
    const float A = -expf(iv_ld(p.a_log, h, p.bf16)), dt_bias = iv_ld(p.dt_bias, h, p.bf16);
    float S[DK];
#pragma unroll
    for (int i = 0; i < DK; i++) S[i] = 0.0f;
    for (int64_t t = p.cu[s]; t < p.cu[s + 1]; t++) {
        __syncthreads(); /* the last token's q and k are read by every thread */
        for (int i = threadIdx.x; i < p.dk; i += blockDim.x) {
            qs[i] = iv_ld(p.q, t * p.ld_q + (int64_t)hk * p.dk + i, p.bf16);
            ks[i] = iv_ld(p.k, t * p.ld_k + (int64_t)hk * p.dk + i, p.bf16);
        }
        __syncthreads();
        if (j >= p.dv) continue;
        const float inv_q = dn_inv_norm(qs, p.dk), inv_k = dn_inv_norm(ks, p.dk);
        const float g = __fmul_rn(A, dn_softplus(__fadd_rn(iv_ld(p.a, t * p.ld_a + h, p.bf16), dt_bias)));
        const float decay = expf(g);
        const float beta = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-iv_ld(p.b, t * p.ld_b + h, p.bf16))));
        /* S *= exp(g); delta = beta (v - S^T k) */
        float dl = 0.0f;
#pragma unroll
        for (int i = 0; i < DK; i++)
            if (i < p.dk) {
                S[i] = __fmul_rn(S[i], decay);
                dl = __fadd_rn(dl, __fmul_rn(S[i], __fmul_rn(ks[i], inv_k)));
            }
        dl = __fmul_rn(__fsub_rn(iv_ld(p.v, t * p.ld_v + (int64_t)h * p.dv + j, p.bf16), dl), beta);
        /* S += k delta^T; out = S^T q */
        float o = 0.0f;
#pragma unroll
        for (int i = 0; i < DK; i++)
            if (i < p.dk) {
                S[i] = __fadd_rn(S[i], __fmul_rn(__fmul_rn(ks[i], inv_k), dl));
                o = __fadd_rn(o, __fmul_rn(S[i], __fmul_rn(__fmul_rn(qs[i], inv_q), p.q_scale)));
            }
        iv_st(p.out, t * p.ld_out + (int64_t)h * p.dv + j, o, p.bf16);
    }
}

template <int DK>
static cudaError_t launch_delta(const DeltaParams &p, int n_seqs, cudaStream_t stream)
{
    const int threads = p.dv < DN_COLS ? (p.dv + 31) / 32 * 32 : DN_COLS;
    const size_t smem = 2 * (size_t)p.dk * sizeof(float);
    const dim3 grid((unsigned)n_seqs * p.n_v_heads, (unsigned)((p.dv + DN_COLS - 1) / DN_COLS));
    delta_rule_kernel<DK><<<grid, threads, smem, stream>>>(p);
    return cudaGetLastError();
}

void iv_cuda_delta_rule(const iv_ops *ops, const iv_delta_rule_args *a)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    const int Hk = a->n_k_heads, Hv = a->n_v_heads, Dk = a->k_head_dim, Dv = a->v_head_dim;
    const int64_t T = a->out.rows;
    const iv_view *in[] = {&a->q, &a->k, &a->v, &a->a, &a->b};
    int ok = iv_cuda_view_ok(c, a->out) && Hk > 0 && Hv > 0 && Hv % Hk == 0 && Dk >= 1 && Dk <= 256 && Dv >= 1 &&
             Dv <= 65535 * DN_COLS && a->q.cols == (int64_t)Hk * Dk && a->k.cols == a->q.cols &&
             a->v.cols == (int64_t)Hv * Dv && a->out.cols == a->v.cols && a->a.cols == Hv && a->b.cols == Hv &&
             a->a_log && a->dt_bias && iv_cuda_weight_ok(c, a->a_log, Hv) && iv_cuda_weight_ok(c, a->dt_bias, Hv) &&
             (T == 0 || iv_cuda_cu_ok(a->cu_seqlens, a->cu_seqlens_dev, a->n_seqs, T));
    for (int i = 0; ok && i < 5; i++) ok = iv_cuda_view_ok(c, *in[i]) && in[i]->rows == T;
    if (!ok) {
        iv_cuda_note_invalid(ops,
                             "delta_rule: %lld rows, %d key heads of %d, %d value heads of %d (the CUDA kernel takes "
                             "key heads of 1 to 256 dimensions)",
                             (long long)T, Hk, Dk, Hv, Dv);
        return;
    }
    if (T == 0) return;
    const DeltaParams p = {a->out.data, a->q.data, a->k.data, a->v.data, a->a.data, a->b.data,
                           a->out.ld, a->q.ld, a->k.ld, a->v.ld, a->a.ld, a->b.ld,
                           a->a_log->data, a->dt_bias->data, a->cu_seqlens_dev,
                           Hv, Hv / Hk, Dk, Dv, 1.0f / sqrtf((float)Dk), c->bf16};
    const cudaError_t e = Dk <= 32    ? launch_delta<32>(p, a->n_seqs, c->stream)
                          : Dk <= 64  ? launch_delta<64>(p, a->n_seqs, c->stream)
                          : Dk <= 128 ? launch_delta<128>(p, a->n_seqs, c->stream)
                                      : launch_delta<256>(p, a->n_seqs, c->stream);
    iv_cuda_note_error(ops, e, "delta_rule");
}
