/* The CUDA kernels of the gather ops (ops.h): the relative-position bias
 * (DeBERTa's c2p / p2c terms into FP32 bias blocks) and im2col over packed
 * sequences. Each mirrors its CPU op (ops/cpu/rel_bias.c, im2col.c): the
 * same indices, the same order of additions with explicit _rn intrinsics. */
#include "ops/cuda/cuda_internal.h"

/* One block per query row t (of any sequence), threads over its keys j. */
static __global__ void rel_bias_kernel(float *bias, const int64_t *offsets, const int32_t *cu, int n_seqs, int head,
                                       const void *c2p, int64_t ldc, const void *p2c, int64_t ldp,
                                       const int32_t *c2p_idx, const int32_t *p2c_idx, int idx_mid, float scale,
                                       int bf16)
{
    const int64_t r0 = cu[0], r1 = cu[n_seqs];
    for (int64_t t = r0 + blockIdx.x; t < r1; t += gridDim.x) {
        const int s = iv_seq_of(cu, n_seqs, t);
        const int64_t first = cu[s], i = t - first, L = cu[s + 1] - first;
        float *row = bias + offsets[s] + ((int64_t)head * L + i) * L;
        for (int64_t j = threadIdx.x; j < L; j += blockDim.x) {
            const int64_t d = idx_mid + i - j;
            float v = 0.0f;
            if (c2p) v = __fadd_rn(v, __fdiv_rn(iv_ld(c2p, t * ldc + c2p_idx[d], bf16), scale));
            if (p2c) v = __fadd_rn(v, __fdiv_rn(iv_ld(p2c, (first + j) * ldp + p2c_idx[d], bf16), scale));
            row[j] = v;
        }
    }
}

void iv_cuda_rel_bias(const iv_ops *ops, const iv_rel_bias_args *a)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    const int have_c2p = a->c2p.data != NULL, have_p2c = a->p2c.data != NULL;
    int ok = a->n_seqs >= 0 && a->head >= 0 && a->cu_seqlens && a->cu_seqlens_dev && a->offsets_dev &&
             (!have_c2p || (a->c2p.dtype == c->dt && a->c2p.ld >= a->c2p.cols && a->c2p_idx)) &&
             (!have_p2c || (a->p2c.dtype == c->dt && a->p2c.ld >= a->p2c.cols && a->p2c_idx));
    int64_t longest = 0;
    for (int s = 0; ok && s < a->n_seqs; s++) {
        const int64_t L = a->cu_seqlens[s + 1] - a->cu_seqlens[s];
        ok = L >= 0;
        longest = L > longest ? L : longest;
    }
    if (!ok || a->idx_mid < longest - 1) {
        iv_cuda_note_invalid(ops, "rel_bias: %d sequences (longest %lld), head %d, idx_mid %d, c2p %s, p2c %s",
                             a->n_seqs, (long long)longest, a->head, a->idx_mid, have_c2p ? "on" : "off",
                             have_p2c ? "on" : "off");
        return;
    }
    const int64_t rows = a->n_seqs > 0 ? a->cu_seqlens[a->n_seqs] - a->cu_seqlens[0] : 0;
    if (rows == 0) return;
    const int threads = longest >= 256 ? 256 : (int)((longest + 31) / 32 * 32);
    const unsigned blocks = (unsigned)(rows < (1 << 20) ? rows : (1 << 20));
    rel_bias_kernel<<<blocks, threads, 0, c->stream>>>(
        a->bias, a->offsets_dev, a->cu_seqlens_dev, a->n_seqs, a->head, have_c2p ? a->c2p.data : NULL, a->c2p.ld,
        have_p2c ? a->p2c.data : NULL, a->p2c.ld, a->c2p_idx, a->p2c_idx, a->idx_mid, a->scale, c->bf16);
    IV_CUDA_CHECK_LAUNCH(ops, "rel_bias");
}

/* y[t, k H + c] = x[t + k - pad, c] inside t's sequence, else 0. */
static __global__ void im2col_kernel(void *y, int64_t ldy, const void *x, int64_t ldx, const int32_t *cu, int n_seqs,
                                     int64_t rows, int64_t H, int kernel, int bf16)
{
    const int64_t col = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= (int64_t)kernel * H) return;
    const int64_t k = col / H, ch = col - k * H, pad = (kernel - 1) / 2;
    for (int64_t t = blockIdx.y; t < rows; t += gridDim.y) {
        const int s = iv_seq_of(cu, n_seqs, t);
        const int64_t src = t + k - pad;
        const float v = src >= cu[s] && src < cu[s + 1] ? iv_ld(x, src * ldx + ch, bf16) : 0.0f;
        iv_st(y, t * ldy + col, v, bf16);
    }
}

void iv_cuda_im2col(const iv_ops *ops, iv_view y, iv_view x, int kernel, const int32_t *cu_seqlens,
                    const int32_t *cu_seqlens_dev, int n_seqs)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    if (y.dtype != c->dt || x.dtype != c->dt || y.ld < y.cols || x.ld < x.cols || kernel < 1 || kernel % 2 == 0 ||
        y.rows != x.rows || y.cols != (int64_t)kernel * x.cols || n_seqs < 1 || !cu_seqlens || !cu_seqlens_dev ||
        cu_seqlens[0] != 0 || cu_seqlens[n_seqs] != x.rows) {
        iv_cuda_note_invalid(ops, "im2col: y [%lld, %lld] from x [%lld, %lld], kernel %d, %d sequences",
                             (long long)y.rows, (long long)y.cols, (long long)x.rows, (long long)x.cols, kernel,
                             n_seqs);
        return;
    }
    if (x.rows == 0 || x.cols == 0) return;
    im2col_kernel<<<iv_cuda_ew_grid(y.rows, y.cols), IV_CUDA_EW_THREADS, 0, c->stream>>>(
        y.data, y.ld, x.data, x.ld, cu_seqlens_dev, n_seqs, y.rows, x.cols, kernel, c->bf16);
    IV_CUDA_CHECK_LAUNCH(ops, "im2col");
}
