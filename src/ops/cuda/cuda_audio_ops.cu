/* The CUDA kernels of the ops Gemma4's audio tower adds (ops.h): clamp, the
 * tiled per-column scale and the 2-D convolution over packed images (the
 * mel spectrograms). Each mirrors its CPU op (ops/cpu/audio_ops.c): FP32
 * arithmetic on 16-bit storage, conv2d's terms added in the weight's order
 * (c_in, then kernel rows, then kernel columns), outputs rounded once. */
#include "ops/cuda/cuda_internal.h"

/* ---- clamp and mul_cols (elementwise; y may alias x) ---- */

static __global__ void clamp_kernel(void *y, int64_t ldy, const void *x, int64_t ldx, int64_t rows, int64_t cols,
                                    float lo, float hi, int bf16)
{
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    for (int64_t t = blockIdx.y; t < rows; t += gridDim.y) {
        float v = iv_ld(x, t * ldx + c, bf16);
        /* comparisons with NaN are false: NaN passes through, as in torch */
        v = v < lo ? lo : v;
        iv_st(y, t * ldy + c, v > hi ? hi : v, bf16);
    }
}

void iv_cuda_clamp(const iv_ops *ops, iv_view y, iv_view x, float lo, float hi)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    if (!iv_cuda_view_ok(c, x) || !iv_cuda_view_ok(c, y) || y.rows != x.rows || y.cols != x.cols) {
        iv_cuda_note_invalid(ops, "clamp: x [%lld, %lld] and y [%lld, %lld] differ", (long long)x.rows,
                             (long long)x.cols, (long long)y.rows, (long long)y.cols);
        return;
    }
    if (x.rows == 0 || x.cols == 0) return;
    clamp_kernel<<<iv_cuda_ew_grid(x.rows, x.cols), IV_CUDA_EW_THREADS, 0, c->stream>>>(
        y.data, y.ld, x.data, x.ld, x.rows, x.cols, lo, hi, c->bf16);
    IV_CUDA_CHECK_LAUNCH(ops, "clamp");
}

static __global__ void mul_cols_kernel(void *y, int64_t ldy, const void *x, int64_t ldx, const void *w, int64_t n,
                                       int64_t rows, int64_t cols, int bf16)
{
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    const float wc = iv_ld(w, c % n, bf16);
    for (int64_t t = blockIdx.y; t < rows; t += gridDim.y)
        iv_st(y, t * ldy + c, __fmul_rn(iv_ld(x, t * ldx + c, bf16), wc), bf16);
}

void iv_cuda_mul_cols(const iv_ops *ops, iv_view y, iv_view x, const iv_tensor *w)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    const int64_t n = w ? iv_tensor_numel(w) : 0;
    if (!iv_cuda_view_ok(c, x) || !iv_cuda_view_ok(c, y) || y.rows != x.rows || y.cols != x.cols || n <= 0 ||
        x.cols % n != 0 || !iv_cuda_weight_ok(c, w, n)) {
        iv_cuda_note_invalid(ops, "mul_cols: x [%lld, %lld], y [%lld, %lld], %lld scales", (long long)x.rows,
                             (long long)x.cols, (long long)y.rows, (long long)y.cols, (long long)n);
        return;
    }
    if (x.rows == 0 || x.cols == 0) return;
    mul_cols_kernel<<<iv_cuda_ew_grid(x.rows, x.cols), IV_CUDA_EW_THREADS, 0, c->stream>>>(
        y.data, y.ld, x.data, x.ld, w->data, n, x.rows, x.cols, c->bf16);
    IV_CUDA_CHECK_LAUNCH(ops, "mul_cols");
}

/* ---- conv2d: one thread per output element (row o, position q, channel co) ---- */

struct Conv2dParams {
    void *y;
    const void *x, *w;
    int64_t ldy, ldx;
    const int32_t *cu_in, *cu_out;
    int n_seqs, c_in, c_out, w_in, w_out, kernel, stride, pad, bf16;
};

static __global__ void conv2d_kernel(Conv2dParams p, int64_t rows)
{
    const int64_t col = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, cols = (int64_t)p.w_out * p.c_out;
    if (col >= cols) return;
    const int q = (int)(col / p.c_out), co = (int)(col - (int64_t)q * p.c_out);
    const int K = p.kernel, patch = p.c_in * K * K;
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const int s = iv_seq_of(p.cu_out, p.n_seqs, r);
        const int64_t o = r - p.cu_out[s], i0 = p.cu_in[s], in_len = p.cu_in[s + 1] - i0;
        float acc = 0.0f;
        for (int ci = 0; ci < p.c_in; ci++)
            for (int ki = 0; ki < K; ki++) {
                const int64_t t = o * p.stride - p.pad + ki;
                for (int kj = 0; kj < K; kj++) {
                    const int xc = q * p.stride - p.pad + kj;
                    /* outside the image: a zero term, added as the CPU adds it */
                    const float xv = t >= 0 && t < in_len && xc >= 0 && xc < p.w_in
                                         ? iv_ld(p.x, (i0 + t) * p.ldx + (int64_t)xc * p.c_in + ci, p.bf16)
                                         : 0.0f;
                    const float wv = iv_ld(p.w, (int64_t)co * patch + (ci * K + ki) * K + kj, p.bf16);
                    acc = __fadd_rn(acc, __fmul_rn(xv, wv));
                }
            }
        iv_st(p.y, r * p.ldy + col, acc, p.bf16);
    }
}

void iv_cuda_conv2d(const iv_ops *ops, const iv_conv2d_args *a)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    const int64_t patch = (int64_t)a->c_in * a->kernel * a->kernel;
    int ok = iv_cuda_view_ok(c, a->x) && iv_cuda_view_ok(c, a->y) && a->kernel >= 1 && a->stride >= 1 &&
             a->pad >= 0 && a->c_in >= 1 && a->c_out >= 1 && a->w_in >= 1 &&
             a->x.cols == (int64_t)a->w_in * a->c_in && a->y.cols == (int64_t)a->w_out * a->c_out &&
             a->w_out == (a->w_in + 2 * a->pad - a->kernel) / a->stride + 1 && a->w_out >= 1 && a->w &&
             iv_tensor_rows(a->w) == a->c_out && iv_cuda_weight_ok(c, a->w, a->c_out * patch) &&
             iv_cuda_cu_ok(a->cu_in, a->cu_in_dev, a->n_seqs, a->x.rows) &&
             iv_cuda_cu_ok(a->cu_out, a->cu_out_dev, a->n_seqs, a->y.rows);
    for (int s = 0; ok && s < a->n_seqs; s++) {
        const int in_len = a->cu_in[s + 1] - a->cu_in[s], out_len = a->cu_out[s + 1] - a->cu_out[s];
        ok = out_len == (in_len + 2 * a->pad >= a->kernel ? (in_len + 2 * a->pad - a->kernel) / a->stride + 1 : 0);
    }
    if (!ok) {
        iv_cuda_note_invalid(ops, "conv2d: x [%lld, %lld] -> y [%lld, %lld], %d -> %d channels, kernel %d stride %d "
                             "pad %d, %d images",
                             (long long)a->x.rows, (long long)a->x.cols, (long long)a->y.rows, (long long)a->y.cols,
                             a->c_in, a->c_out, a->kernel, a->stride, a->pad, a->n_seqs);
        return;
    }
    if (a->y.rows == 0) return;
    const Conv2dParams p = {a->y.data, a->x.data, a->w->data, a->y.ld, a->x.ld, a->cu_in_dev, a->cu_out_dev,
                            a->n_seqs, a->c_in, a->c_out, a->w_in, a->w_out, a->kernel, a->stride, a->pad, c->bf16};
    conv2d_kernel<<<iv_cuda_ew_grid(a->y.rows, a->y.cols), IV_CUDA_EW_THREADS, 0, c->stream>>>(p, a->y.rows);
    IV_CUDA_CHECK_LAUNCH(ops, "conv2d");
}
