/* Linear layer on cuBLASLt: y = act(x W^T + b) (+ residual), FP32
 * accumulation, one rounding to the act dtype.
 *
 * Row-major y[T, out] = x[T, in] W^T is, read column-major, y^T = W x^T:
 * A = W (column-major [in, out], ld in, transposed), B = x (column-major
 * [in, T], ld x.ld), D = y^T (column-major [out, T], ld y.ld). So the views'
 * row strides pass straight through, column windows included.
 *
 * Three paths. Without an activation, cuBLASLt does it all: bias epilogue,
 * the residual as C with beta = 1 (in place when it is y), D in the act
 * dtype, rounded once from FP32. With an activation and no residual (an MLP
 * up projection), cuBLASLt writes the product plus bias in the act dtype
 * and the activation runs in place on it: torch's rounding point, half the
 * traffic of the third path. Otherwise the product goes to the instance's
 * FP32 scratch (a block of rows at a time, so the scratch stays bounded
 * whatever the batch) and one epilogue kernel applies bias, activation and
 * residual in the CPU's order and rounds once. The residual has y's layout;
 * x must not overlap y.
 *
 * Algorithms. cuBLASLt's heuristic sometimes ranks a slow kernel first for
 * a shape (on an H200 its first choice for BERT-base's QKV projection ran
 * several times slower than for the MLP's); so for large shapes its first
 * TUNE_CANDIDATES choices are timed once on the real operands and the
 * fastest is kept for that shape with the token count rounded up to a power
 * of two, which batches of other sizes reuse after cublasLtMatmulAlgoCheck.
 * IV_CUDA_TUNE=0 takes the heuristic's first choice. */
#include <string.h>

#include "ops/cuda/cuda_internal.h"
#include "ops/cuda/cuda_vec.h"

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

/* Candidates the heuristic offers for a shape, and the smallest token
 * count worth timing them at: below it a GEMM takes microseconds and the
 * heuristic's first choice is as good as any. */
#define TUNE_CANDIDATES 8
#define TUNE_MIN_N 1024

/* The operands of one matmul, for timing candidates on the real buffers. */
typedef struct mm_call {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    const void *w, *x, *c;
    void *d;
    float beta;
} mm_call;

static uint64_t pow2_at_least(uint64_t n)
{
    uint64_t p = 1;
    while (p < n) p <<= 1;
    return p;
}

static cuda_algo_entry *lru_slot(cuda_algo_entry *table, int n, const cuda_algo_key *key, cuda_algo_entry **hit)
{
    cuda_algo_entry *slot = &table[0];
    *hit = NULL;
    for (int i = 0; i < n; i++) {
        cuda_algo_entry *e = &table[i];
        if (e->used && !memcmp(&e->key, key, sizeof *key)) {
            *hit = e;
            return e;
        }
        if (e->used < slot->used) slot = e; /* least recently used (or empty) */
    }
    return slot;
}

/* Times each candidate once on the real operands (twice for the first, which
 * also warms the buffers up) and returns the index of the fastest, or 0 when
 * timing fails. D is rewritten each time with the same values (C is never D
 * when timing is allowed), so the caller's result is unaffected. Synchronises the stream: it
 * runs once per shape bucket. */
static int fastest(cuda_ctx *c, const mm_call *mm, const cublasLtMatmulHeuristicResult_t *res, int count)
{
    cudaEvent_t ev[TUNE_CANDIDATES + 1];
    int made = 0, best = 0;
    for (; made <= count; made++)
        if (cudaEventCreate(&ev[made]) != cudaSuccess) break;
    if (made <= count) {
        for (int i = 0; i < made; i++) cudaEventDestroy(ev[i]);
        (void)cudaGetLastError();
        return 0;
    }
    const float alpha = 1.0f;
    int ok = cublasLtMatmul(c->lt, mm->op, &alpha, mm->w, mm->la, mm->x, mm->lb, &mm->beta, mm->c, mm->lc, mm->d,
                            mm->lc, &res[0].algo, c->workspace, c->workspace_bytes, c->stream) == CUBLAS_STATUS_SUCCESS;
    cudaEventRecord(ev[0], c->stream);
    for (int i = 0; i < count && ok; i++) {
        ok = cublasLtMatmul(c->lt, mm->op, &alpha, mm->w, mm->la, mm->x, mm->lb, &mm->beta, mm->c, mm->lc, mm->d,
                            mm->lc, &res[i].algo, c->workspace, c->workspace_bytes, c->stream) == CUBLAS_STATUS_SUCCESS;
        cudaEventRecord(ev[i + 1], c->stream);
    }
    if (ok && cudaEventSynchronize(ev[count]) == cudaSuccess) {
        float best_ms = 0;
        for (int i = 0; i < count; i++) {
            float ms = 0;
            if (cudaEventElapsedTime(&ms, ev[i], ev[i + 1]) != cudaSuccess) continue;
            if (i == 0 || ms < best_ms) {
                best_ms = ms;
                best = i;
            }
        }
    }
    for (int i = 0; i < made; i++) cudaEventDestroy(ev[i]);
    (void)cudaGetLastError();
    return best;
}

/* The algorithm for key: remembered, a timed choice for its shape bucket
 * (checked to fit this exact shape), or the heuristic's candidates timed on
 * the real operands (large shapes; IV_CUDA_TUNE=0 takes its first choice). */
static cuda_algo_entry *find_algo(cuda_ctx *c, const cuda_algo_key *key, const mm_call *mm,
                                        cublasStatus_t *status)
{
    *status = CUBLAS_STATUS_SUCCESS;
    cuda_algo_entry *hit;
    cuda_algo_entry *slot = lru_slot(c->algos, IV_CUDA_ALGO_CACHE, key, &hit);
    if (hit) {
        hit->used = ++c->algo_clock;
        return hit;
    }
    /* Not when D is also the residual C: each timing run would add it again. */
    const int in_place = mm->beta != 0.0f && mm->c == mm->d;
    const int tunable = c->tune && key->n >= TUNE_MIN_N && !in_place;
    cuda_algo_key bkey = *key; /* the bucket: every field but n rounded up */
    bkey.n = pow2_at_least(key->n);
    if (tunable) {
        cuda_algo_entry *th;
        lru_slot(c->tuned, IV_CUDA_TUNED_CACHE, &bkey, &th);
        cublasLtMatmulHeuristicResult_t chk;
        memset(&chk, 0, sizeof chk);
        if (th && th->found &&
            cublasLtMatmulAlgoCheck(c->lt, mm->op, mm->la, mm->lb, mm->lc, mm->lc, &th->algo, &chk) ==
                CUBLAS_STATUS_SUCCESS &&
            chk.workspaceSize <= c->workspace_bytes) {
            th->used = ++c->algo_clock;
            slot->key = *key;
            slot->algo = th->algo;
            slot->found = 1;
            slot->used = ++c->algo_clock;
            return slot;
        }
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
    cublasLtMatmulHeuristicResult_t res[TUNE_CANDIDATES];
    memset(res, 0, sizeof res);
    int count = 0;
    s = cublasLtMatmulAlgoGetHeuristic(c->lt, mm->op, mm->la, mm->lb, mm->lc, mm->lc, pref,
                                       tunable ? TUNE_CANDIDATES : 1, res, &count);
    cublasLtMatmulPreferenceDestroy(pref);
    /* NOT_SUPPORTED: no algorithm for this case, which the caller handles. */
    if (s != CUBLAS_STATUS_SUCCESS && s != CUBLAS_STATUS_NOT_SUPPORTED) {
        *status = s;
        return NULL;
    }
    int usable = 0; /* the candidates the heuristic vouched for, in its order */
    for (int i = 0; s == CUBLAS_STATUS_SUCCESS && i < count; i++)
        if (res[i].state == CUBLAS_STATUS_SUCCESS) res[usable++] = res[i];
    const int pick = usable > 1 ? fastest(c, mm, res, usable) : 0;
    slot->key = *key;
    slot->found = usable > 0;
    if (slot->found) slot->algo = res[pick].algo;
    slot->used = ++c->algo_clock;
    if (tunable && slot->found) {
        cuda_algo_entry *th;
        cuda_algo_entry *ts = lru_slot(c->tuned, IV_CUDA_TUNED_CACHE, &bkey, &th);
        if (!th) th = ts;
        th->key = bkey;
        th->algo = slot->algo;
        th->found = 1;
        th->used = ++c->algo_clock;
    }
    return slot;
}

/* D (column-major [m, n], ldd) = W x^T: w [m rows of k] row-major, x [n
 * rows of k] with row stride ldx, both act dtype. out_f32:
 * D is FP32 (the scratch), else act dtype. bias (act dtype, [m]) adds in the
 * epilogue; cres, when non-NULL, is C (D's layout) added with beta = 1.
 * Returns 0 when queued, 1 when cuBLASLt has no algorithm (nothing done),
 * -1 after noting an error. */
void iv_cuda_algo_entry_clear(cuda_algo_entry *e)
{
    if (e->lc) cublasLtMatrixLayoutDestroy(e->lc);
    if (e->lb) cublasLtMatrixLayoutDestroy(e->lb);
    if (e->la) cublasLtMatrixLayoutDestroy(e->la);
    if (e->op) cublasLtMatmulDescDestroy(e->op);
    e->op = NULL;
    e->la = e->lb = e->lc = NULL;
}

/* Queues D = W x^T with an entry's descriptors and algorithm: 0, or -1 after noting the error. */
static int run_entry(const iv_ops *ops, cuda_ctx *c, const cuda_algo_entry *e, const void *w, const void *x, void *d,
                     const void *cptr, const void *bias, int has_c)
{
    if (bias) cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    const float alpha = 1.0f, beta = has_c ? 1.0f : 0.0f;
    const cublasStatus_t s = cublasLtMatmul(c->lt, e->op, &alpha, w, e->la, x, e->lb, &beta, cptr, e->lc, d, e->lc,
                                            &e->algo, c->workspace, c->workspace_bytes, c->stream);
    if (s == CUBLAS_STATUS_SUCCESS) return 0;
    iv_cuda_note_cublas(ops, s, "linear (cuBLASLt)");
    return -1;
}

static cuda_algo_key make_key(int64_t m, int64_t n, int64_t k, const void *w, const void *x, int64_t ldx,
                              const void *d, int64_t ldd, int out_f32, const void *bias, const void *cres)
{
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
    const void *cptr = cres ? cres : d;
    const uint32_t al_c = align_of(cptr), al_d = align_of(d);
    key.align_c = al_c < al_d ? al_c : al_d;
    key.out_f32 = out_f32;
    key.bias = bias != NULL;
    key.align_bias = bias ? align_of(bias) : 0; /* the heuristic reads the bias pointer's alignment too */
    key.beta = cres != NULL;
    return key;
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
    const void *cptr = cres ? cres : d; /* beta = 0: C is not read */
    const cuda_algo_key key = make_key(m, n, k, w, x, ldx, d, ldd, out_f32, bias, cres);
    cuda_algo_entry *hit;
    lru_slot(c->algos, IV_CUDA_ALGO_CACHE, &key, &hit);
    if (hit && hit->op) {
        hit->used = ++c->algo_clock;
        return hit->found ? run_entry(ops, c, hit, w, x, d, cptr, bias, cres != NULL) : 1;
    }
    const cudaDataType_t ab = c->bf16 ? CUDA_R_16BF : CUDA_R_16F;
    const cudaDataType_t dt = out_f32 ? CUDA_R_32F : ab;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
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
        const mm_call mm = {op, la, lb, lc, w, x, cptr, d, cres ? 1.0f : 0.0f};
        cuda_algo_entry *e = find_algo(c, &key, &mm, &s);
        if (e) {
            /* The entry (maybe one it replaced) keeps these descriptors now. */
            iv_cuda_algo_entry_clear(e);
            e->op = op;
            e->la = la;
            e->lb = lb;
            e->lc = lc;
            op = NULL;
            la = lb = lc = NULL;
            return e->found ? run_entry(ops, c, e, w, x, d, cptr, bias, cres != NULL) : 1;
        }
    }
    iv_cuda_note_cublas(ops, s, "linear (cuBLASLt)");
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
    return -1;
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

/* The same with 16-byte vectors (cuda_vec.h's iv_ew_kernel): an item is 8
 * columns of a row, acc read as two float4, the activation a template
 * argument (iv_act_f's code for it). */
template <typename T, int ACT> struct epilogue_op {
    void *y;
    int64_t ldy;
    const float *acc;
    int64_t ldacc;
    const void *bias, *res;
    struct In {
        float4 a0, a1;
        uint4 b, r;
        char *yp;
    };
    __device__ __forceinline__ void load(In &in, int64_t t, int64_t c) const
    {
        const float4 *ap = (const float4 *)(acc + t * ldacc + c);
        in.a0 = ap[0];
        in.a1 = ap[1];
        if (bias) in.b = iv_ld16(iv_el(bias, c));
        if (res) in.r = iv_ld16(iv_el(res, t * ldy + c));
        in.yp = iv_elw(y, t * ldy + c);
    }
    __device__ __forceinline__ void store(const In &in) const
    {
        float v[8] = {in.a0.x, in.a0.y, in.a0.z, in.a0.w, in.a1.x, in.a1.y, in.a1.z, in.a1.w};
        float bf[8], rf[8];
        if (bias) iv_unpack8<T>(in.b, bf);
        if (res) iv_unpack8<T>(in.r, rf);
#pragma unroll
        for (int e = 0; e < 8; e++) {
            if (bias) v[e] = __fadd_rn(v[e], bf[e]);
            v[e] = iv_act_f(v[e], ACT);
            if (res) v[e] = __fadd_rn(v[e], rf[e]);
        }
        iv_st16(in.yp, iv_pack8<T>(v));
    }
};

/* Queues the epilogue for n rows of cols: the vector kernel when y (and res,
 * in y's layout), acc and bias allow it, else linear_epilogue_kernel. */
static void launch_epilogue(const cuda_ctx *c, void *y, int64_t ldy, const float *acc, int64_t ldacc, const void *bias,
                            const void *res, int act, int64_t n, int64_t cols)
{
    if (iv_vec_rows_ok(y, ldy, cols) && iv_vec_ptr_ok(acc) && ldacc % IV_VEC == 0 && (!res || iv_vec_ptr_ok(res)) &&
        (!bias || iv_vec_ptr_ok(bias))) {
        const int64_t nv = cols / IV_VEC, total = n * nv;
        if (c->bf16)
            iv_ew_launch_act<__nv_bfloat16, epilogue_op>(c->device, c->stream, act, nv, total, y, ldy, acc, ldacc, bias,
                                                         res);
        else
            iv_ew_launch_act<__half, epilogue_op>(c->device, c->stream, act, nv, total, y, ldy, acc, ldacc, bias, res);
        return;
    }
    linear_epilogue_kernel<<<iv_cuda_ew_grid(n, cols), IV_CUDA_EW_THREADS, 0, c->stream>>>(y, ldy, acc, ldacc, bias,
                                                                                          res, act, n, cols, c->bf16);
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
    } else if (!residual_or_null && in > 0 && c->linear_fused) {
        /* An activation cuBLASLt has no exact epilogue for (erf GELU): the
         * product and bias in the act dtype straight into y, then the
         * activation in place. Half the traffic of an FP32 scratch (write 4,
         * read 4 bytes per value), and the rounding point torch has: its
         * linear returns the 16-bit pre-activation its GELU then reads. */
        const int r = matmul(ops, c, out, rows, in, w->data, x.data, x.ld, y.data, y.ld, 0, bias, NULL);
        if (r < 0) return;
        if (r == 0) {
            iv_cuda_act(ops, y, y, act);
            return;
        }
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
        launch_epilogue(c, (char *)y.data + (size_t)(r0 * y.ld) * es, y.ld, acc, out, bias, res, (int)act, n, out);
        IV_CUDA_CHECK_LAUNCH(ops, "linear (epilogue)");
    }
}
