/* Linear layer on cuBLASLt: y = act(x W^T + b) (+ residual), FP32
 * accumulation, one rounding to the act dtype.
 *
 * Row-major y[T, out] = x[T, in] W^T is, read column-major, y^T = W x^T:
 * A = W (column-major [in, out], ld in, transposed), B = x (column-major
 * [in, T], ld x.ld), D = y^T (column-major [out, T], ld y.ld). So the views'
 * row strides pass straight through, column windows included.
 *
 * Two paths. Without an activation, cuBLASLt does it all: bias epilogue,
 * the residual as C with beta = 1 (in place when it is y), D in the act
 * dtype, rounded once from FP32. With an activation, the product goes to
 * the instance's FP32 scratch (a block of rows at a time, so the scratch
 * stays bounded whatever the batch) and one epilogue kernel applies bias,
 * activation and residual in the CPU's order and rounds once. The residual
 * has y's layout; x must not overlap y. */
#include <string.h>

#include "ops/cuda/cuda_internal.h"

/* The FP32 scratch holds at most this many bytes of products, unless even
 * MIN_CHUNK_ROWS rows need more (a vocabulary-wide output). */
#define SCRATCH_MAX_BYTES ((size_t)128 << 20)
#define MIN_CHUNK_ROWS 256

/* The largest power of two (<= 256) that divides p: what cuBLASLt may assume. */
static uint32_t align_of(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && (a & (al - 1))) al >>= 1;
    return al;
}

/* Finds (or asks the heuristic for, then remembers) the algorithm for key. */
static const cuda_algo_entry *find_algo(cuda_ctx *c, const cuda_algo_key *key, cublasLtMatmulDesc_t op,
                                        cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc,
                                        cublasStatus_t *status)
{
    *status = CUBLAS_STATUS_SUCCESS;
    cuda_algo_entry *slot = &c->algos[0];
    for (int i = 0; i < IV_CUDA_ALGO_CACHE; i++) {
        cuda_algo_entry *e = &c->algos[i];
        if (e->used && !memcmp(&e->key, key, sizeof *key)) {
            e->used = ++c->algo_clock;
            return e;
        }
        if (e->used < slot->used) slot = e; /* least recently used (or empty) */
    }
    cublasLtMatmulPreference_t pref = NULL;
    cublasStatus_t s = cublasLtMatmulPreferenceCreate(&pref);
    if (s != CUBLAS_STATUS_SUCCESS) {
        *status = s;
        return NULL;
    }
    uint64_t ws = c->workspace_bytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &key->align_a,
                                         sizeof key->align_a);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &key->align_b,
                                         sizeof key->align_b);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &key->align_c,
                                         sizeof key->align_c);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &key->align_c,
                                         sizeof key->align_c);
    cublasLtMatmulHeuristicResult_t res;
    memset(&res, 0, sizeof res);
    int count = 0;
    s = cublasLtMatmulAlgoGetHeuristic(c->lt, op, la, lb, lc, lc, pref, 1, &res, &count);
    cublasLtMatmulPreferenceDestroy(pref);
    /* NOT_SUPPORTED: no algorithm for this case, which the caller handles. */
    if (s != CUBLAS_STATUS_SUCCESS && s != CUBLAS_STATUS_NOT_SUPPORTED) {
        *status = s;
        return NULL;
    }
    slot->key = *key;
    slot->found = s == CUBLAS_STATUS_SUCCESS && count > 0 && res.state == CUBLAS_STATUS_SUCCESS;
    if (slot->found) slot->algo = res.algo;
    slot->used = ++c->algo_clock;
    return slot;
}

/* D (column-major [m, n], ldd) = W x^T: w [m rows of k] row-major, x [n
 * rows of k] with row stride ldx, both act dtype. out_f32:
 * D is FP32 (the scratch), else act dtype. bias (act dtype, [m]) adds in the
 * epilogue; cres, when non-NULL, is C (D's layout) added with beta = 1.
 * Returns 0 when queued, 1 when cuBLASLt has no algorithm (nothing done),
 * -1 after noting an error. */
static int matmul(const iv_ops *ops, cuda_ctx *c, int64_t m, int64_t n, int64_t k, const void *w, const void *x,
                  int64_t ldx, void *d, int64_t ldd, int out_f32, const void *bias, const void *cres)
{
    const cudaDataType_t ab = c->bf16 ? CUDA_R_16BF : CUDA_R_16F;
    const cudaDataType_t dt = out_f32 ? CUDA_R_32F : ab;
    const void *cptr = cres ? cres : d; /* beta = 0: C is not read */
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    int ret = -1;
    cublasStatus_t s = cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (s == CUBLAS_STATUS_SUCCESS) {
        const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
        if (bias) {
            const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
            cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
            cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
        }
        s = cublasLtMatrixLayoutCreate(&la, ab, (uint64_t)k, (uint64_t)m, k);
    }
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&lb, ab, (uint64_t)k, (uint64_t)n, ldx);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&lc, dt, (uint64_t)m, (uint64_t)n, ldd);
    if (s == CUBLAS_STATUS_SUCCESS) {
        cuda_algo_key key;
        memset(&key, 0, sizeof key); /* padding too: keys compare with memcmp */
        key.m = (uint64_t)m;
        key.n = (uint64_t)n;
        key.k = (uint64_t)k;
        key.lda = k;
        key.ldb = ldx;
        key.ldc = ldd;
        key.align_a = align_of(w);
        key.align_b = align_of(x);
        const uint32_t al_c = align_of(cptr), al_d = align_of(d);
        key.align_c = al_c < al_d ? al_c : al_d;
        key.out_f32 = out_f32;
        key.bias = bias != NULL;
        key.align_bias = bias ? align_of(bias) : 0; /* the heuristic reads the bias pointer's alignment too */
        key.beta = cres != NULL;
        const cuda_algo_entry *e = find_algo(c, &key, op, la, lb, lc, &s);
        if (e && !e->found) {
            ret = 1;
        } else if (e) {
            const float alpha = 1.0f, beta = cres ? 1.0f : 0.0f;
            s = cublasLtMatmul(c->lt, op, &alpha, w, la, x, lb, &beta, cptr, lc, d, lc, &e->algo, c->workspace,
                               c->workspace_bytes, c->stream);
            if (s == CUBLAS_STATUS_SUCCESS) ret = 0;
        }
    }
    if (ret < 0) iv_cuda_note_cublas(ops, s, "linear (cuBLASLt)");
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
    return ret;
}

/* y[t, c] = act(acc[t, c] + b[c]) + res[t, c], in the CPU's order (no +0
 * where an operand is absent: -0 stays -0). */
static __global__ void linear_epilogue_kernel(void *y, int64_t ldy, const float *acc, int64_t ldacc, const void *bias,
                                              const void *res, int act, int64_t rows, int64_t cols, int bf16)
{
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    const float bv = bias ? iv_ld(bias, c, bf16) : 0.0f;
    for (int64_t t = blockIdx.y; t < rows; t += gridDim.y) {
        float v = acc[t * ldacc + c];
        if (bias) v += bv;
        v = iv_act_f(v, act);
        if (res) v += iv_ld(res, t * ldy + c, bf16);
        iv_st(y, t * ldy + c, v, bf16);
    }
}

void iv_cuda_linear(const iv_ops *ops, iv_view y, iv_view x, const iv_tensor *w, const iv_tensor *b, iv_act act,
                    const void *residual_or_null)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    const int64_t rows = x.rows, in = x.cols, out = y.cols;
    if (w->device != IV_CUDA || w->dtype != c->dt || iv_tensor_rows(w) != out || iv_tensor_cols(w) != in ||
        (b && (b->device != IV_CUDA || b->dtype != c->dt || iv_tensor_numel(b) != out)) || y.rows != rows ||
        x.dtype != c->dt || y.dtype != c->dt || x.ld < in || y.ld < out) {
        iv_cuda_note_invalid(
            ops,
            "linear: x [%lld, %lld] ld %lld, y [%lld, %lld] ld %lld, weight [%lld, %lld] %s, bias %lld: "
            "shapes or dtypes do not match (weights must come from prepare_weight)",
            (long long)x.rows, (long long)x.cols, (long long)x.ld, (long long)y.rows, (long long)y.cols,
            (long long)y.ld, (long long)iv_tensor_rows(w), (long long)iv_tensor_cols(w), iv_dtype_name(w->dtype),
            b ? (long long)iv_tensor_numel(b) : -1LL);
        return;
    }
    if (rows == 0 || out == 0) return;
    const void *bias = b ? b->data : NULL;
    const size_t es = iv_dtype_size(c->dt);

    if (act == IV_ACT_NONE && in > 0 && c->linear_fused) {
        const int r = matmul(ops, c, out, rows, in, w->data, x.data, x.ld, y.data, y.ld, 0, bias, residual_or_null);
        if (r <= 0) return; /* done, or the error is noted */
        /* No fused algorithm for this case: the scratch path below. */
    }

    int64_t chunk = (int64_t)(SCRATCH_MAX_BYTES / ((size_t)out * sizeof(float)));
    if (chunk < MIN_CHUNK_ROWS) chunk = MIN_CHUNK_ROWS;
    if (chunk > rows) chunk = rows;
    float *acc = iv_cuda_scratch(ops, (size_t)chunk * (size_t)out * sizeof(float));
    if (!acc) return;
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t n = rows - r0 < chunk ? rows - r0 : chunk;
        if (in == 0) {
            /* An empty product: y = act(b) + residual. */
            if (IV_CUDA_FAILED(ops, cudaMemsetAsync(acc, 0, (size_t)n * (size_t)out * sizeof(float), c->stream),
                               "linear (memset)"))
                return;
        } else {
            const void *xr = (const char *)x.data + (size_t)(r0 * x.ld) * es;
            const int r = matmul(ops, c, out, n, in, w->data, xr, x.ld, acc, out, 1, NULL, NULL);
            if (r == 1)
                iv_cuda_note_invalid(ops, "linear: cuBLASLt has no algorithm for [%lld, %lld] x [%lld, %lld]^T",
                                     (long long)n, (long long)in, (long long)out, (long long)in);
            if (r) return;
        }
        const char *res = residual_or_null ? (const char *)residual_or_null + (size_t)(r0 * y.ld) * es : NULL;
        linear_epilogue_kernel<<<iv_cuda_ew_grid(n, out), IV_CUDA_EW_THREADS, 0, c->stream>>>(
            (char *)y.data + (size_t)(r0 * y.ld) * es, y.ld, acc, out, bias, res, (int)act, n, out, c->bf16);
        IV_CUDA_CHECK_LAUNCH(ops, "linear (epilogue)");
    }
}
