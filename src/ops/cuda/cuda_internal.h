/* Shared by the CUDA table's .cu files: the instance, error recording, the
 * 16-bit load/store and activation helpers every kernel uses, and the op
 * functions cuda_table.cu puts in the table.
 *
 * Errors. CUDA work is asynchronous and ops return nothing, so every failing
 * CUDA or cuBLASLt call (and every argument check) is recorded in the
 * instance; the first one since the last sync wins, and sync reports it.
 *
 * Threads. An instance has one stream, one FP32 scratch and one matmul
 * cache: one thread at a time uses it (each worker opens its own). */
#ifndef IV_OPS_CUDA_CUDA_INTERNAL_H
#define IV_OPS_CUDA_CUDA_INTERNAL_H

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

/* The project's headers are C: their functions have C linkage. */
extern "C" {
#include "base/err.h"
#include "ops/ops.h"
#include "tensor/tensor.h"
}
#include "ops/cuda/cuda_ops.h"

/* One cuBLASLt algorithm choice, remembered per matmul shape (all layers of
 * a batch share a handful of shapes, and the heuristic costs tens of us). */
typedef struct cuda_algo_key {
    uint64_t m, n, k;
    int64_t lda, ldb, ldc;
    uint32_t align_a, align_b, align_c, align_bias;
    int out_f32; /* D (and C) FP32 scratch, else act dtype */
    int bias;    /* bias epilogue */
    int beta;    /* C read (residual) */
} cuda_algo_key;

typedef struct cuda_algo_entry {
    cuda_algo_key key;
    cublasLtMatmulAlgo_t algo;
    int found;     /* 0: the heuristic had nothing for this shape */
    uint64_t used; /* stamp for replacement */
    /* The call's descriptors, kept with the shape (algos only, NULL in the
     * tuned table): creating four per call cost more host time than a small
     * GEMM takes on the GPU. The bias pointer is set per call. */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
} cuda_algo_entry;
/* Frees the descriptors an algos entry holds (NULL-safe). */
void iv_cuda_algo_entry_clear(cuda_algo_entry *e);

#define IV_CUDA_ALGO_CACHE 64
/* Timed choices, one per shape with the token count n rounded up to a power
 * of two (key.n holds the bucket): batches of every size reuse them. */
#define IV_CUDA_TUNED_CACHE 64

/* Per-op GPU timing (IV_CUDA_PROFILE=1, cuda_profile.cu). */
typedef struct cuda_profile cuda_profile;

typedef struct cuda_ctx {
    iv_ops ops; /* the table handed out; ops.ctx points back here */
    int device;
    iv_dtype dt;
    int bf16; /* dt == IV_BF16, as the kernels take it */
    cudaStream_t stream;
    cublasLtHandle_t lt;
    void *workspace;
    size_t workspace_bytes;
    /* FP32 GEMM results awaiting the linear epilogue; grown on demand. */
    float *scratch;
    size_t scratch_bytes;
    /* Everything prepare_weight made (header and device data), freed at close. */
    iv_tensor **weights;
    size_t n_weights, cap_weights;
    cuda_algo_entry algos[IV_CUDA_ALGO_CACHE];
    cuda_algo_entry tuned[IV_CUDA_TUNED_CACHE];
    uint64_t algo_clock;
    int tune; /* 0: take the heuristic's first choice (IV_CUDA_TUNE=0) */
    int linear_fused; /* 0: every linear goes through the FP32 scratch (IV_CUDA_LINEAR_FUSED=0) */
    cuda_profile *profile; /* IV_CUDA_PROFILE=1, else NULL */
    /* The first error since the last sync: an iv_err code (0 = none) and message. */
    int err_code;
    char err_msg[512];
} cuda_ctx;

/* IV_CUDA_PROFILE: wraps the table's ops with timing; the report goes to
 * stderr when the table closes. */
void iv_cuda_profile_install(cuda_ctx *c, int sync);
void iv_cuda_profile_finish(cuda_ctx *c);

/* The instance behind ops, with its GPU made the calling thread's current
 * device (a stream only accepts work from its own device's context). */
cuda_ctx *iv_cuda_ctx(const iv_ops *ops);
/* Records e (nothing when cudaSuccess) as the instance's error, unless one
 * is already pending; `where` names the op or call. */
void iv_cuda_note_error(const iv_ops *ops, cudaError_t e, const char *where);
/* The same for a cuBLASLt status. */
void iv_cuda_note_cublas(const iv_ops *ops, cublasStatus_t s, const char *where);
/* Records a bad argument (a caller bug: shapes that do not match). */
void iv_cuda_note_invalid(const iv_ops *ops, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* After a kernel launch: a launch failure (bad geometry, no kernel image
 * for this GPU, an earlier fault) becomes the pending error. */
#define IV_CUDA_CHECK_LAUNCH(ops, where) iv_cuda_note_error((ops), cudaGetLastError(), (where))
/* Evaluates a CUDA runtime call and records its failure; yields 1 when it failed. */
#define IV_CUDA_FAILED(ops, call, where) iv_cuda_failed_((ops), (call), (where))
static inline int iv_cuda_failed_(const iv_ops *ops, cudaError_t e, const char *where)
{
    if (e == cudaSuccess) return 0;
    iv_cuda_note_error(ops, e, where);
    return 1;
}

/* Grows the instance's FP32 scratch to at least `bytes`; NULL (error noted) on failure. */
float *iv_cuda_scratch(const iv_ops *ops, size_t bytes);

/* ---- device helpers ---- */

/* Element i of a BF16 (is_bf16) or FP16 array, as float. */
static __device__ __forceinline__ float iv_ld(const void *p, int64_t i, int is_bf16)
{
    return is_bf16 ? __bfloat162float(((const __nv_bfloat16 *)p)[i]) : __half2float(((const __half *)p)[i]);
}
/* Stores v rounded to nearest even into element i. */
static __device__ __forceinline__ void iv_st(void *p, int64_t i, float v, int is_bf16)
{
    if (is_bf16)
        ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
    else
        ((__half *)p)[i] = __float2half_rn(v);
}

/* 1 / (1 + e^-x) from e^-|x|, as the CPU's v_sigmoid: no overflow, full
 * relative precision in both tails. */
static __device__ __forceinline__ float iv_sigmoid_f(float x)
{
    float e = expf(-fabsf(x));
    float s = 1.0f / (1.0f + e);
    return x < 0.0f ? e * s : s;
}

/* The activations in FP32, in the forms of ops/cpu/vmath.h (v_act). */
static __device__ __forceinline__ float iv_act_f(float v, int act)
{
    switch (act) {
    case IV_ACT_GELU:
        /* x Phi(x) with Phi from erfc, which keeps the left tail's relative
         * precision (1 + erf cancels there); 0 below -12.8 as the CPU. */
        return v < -12.8f ? 0.0f : v * (0.5f * erfcf(v * -0.707106781f));
    case IV_ACT_GELU_TANH: {
        /* 0.5 x (1 + tanh(u)) = x sigmoid(2u) */
        float u = 0.797884561f * (v + 0.044715f * (v * v * v));
        return v * iv_sigmoid_f(u + u);
    }
    case IV_ACT_SILU: return v * iv_sigmoid_f(v);
    case IV_ACT_RELU: return v < 0.0f ? 0.0f : v; /* NaN stays NaN */
    case IV_ACT_TANH: return tanhf(v);
    case IV_ACT_SIGMOID: return iv_sigmoid_f(v);
    default: return v;
    }
}

/* Launch geometry for row-by-column elementwise kernels: x over columns,
 * y over rows (kernels loop when rows exceed the grid's y limit). */
#define IV_CUDA_EW_THREADS 256
static inline dim3 iv_cuda_ew_grid(int64_t rows, int64_t cols)
{
    int64_t gx = (cols + IV_CUDA_EW_THREADS - 1) / IV_CUDA_EW_THREADS;
    int64_t gy = rows < 65535 ? rows : 65535;
    return dim3((unsigned)(gx > 0x7fffffff ? 0x7fffffff : gx), (unsigned)gy, 1);
}

/* Argument checks shared by the kernels' launchers: an activation view in
 * the table's dtype, and an optional weight of n elements prepared here. */
static inline int iv_cuda_view_ok(const cuda_ctx *c, iv_view v)
{
    return v.dtype == c->dt && v.ld >= v.cols && v.rows >= 0 && v.cols >= 0;
}
static inline int iv_cuda_weight_ok(const cuda_ctx *c, const iv_tensor *t, int64_t n)
{
    return !t || (t->device == IV_CUDA && t->dtype == c->dt && iv_tensor_numel(t) == n);
}

/* The sequence holding row t of a packed batch: the last s with cu[s] <= t. */
static __device__ __forceinline__ int iv_seq_of(const int32_t *cu, int n_seqs, int64_t t)
{
    int lo = 0, hi = n_seqs - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (cu[mid] <= t) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* Host-side check of cu_seqlens (host and device copies given) covering
 * exactly `rows` rows in n_seqs >= 1 non-decreasing runs. */
static inline int iv_cuda_cu_ok(const int32_t *cu, const int32_t *cu_dev, int n_seqs, int64_t rows)
{
    if (!cu || !cu_dev || n_seqs < 1 || cu[0] != 0 || cu[n_seqs] != rows) return 0;
    for (int s = 0; s < n_seqs; s++)
        if (cu[s + 1] < cu[s]) return 0;
    return 1;
}

/* ---- the ops (cuda_linear.cu, cuda_kernels.cu, cuda_attention.cu) ---- */
void iv_cuda_linear(const iv_ops *ops, iv_view y, iv_view x, const iv_tensor *w, const iv_tensor *b, iv_act act,
                    const void *residual_or_null);
void iv_cuda_layer_norm(const iv_ops *ops, iv_view y, iv_view x, const void *r, const iv_tensor *w, const iv_tensor *b,
                        float eps);
void iv_cuda_rms_norm(const iv_ops *ops, iv_view y, iv_view x, const void *r, const iv_tensor *w, float eps,
                      float w_offset);
void iv_cuda_head_rms_norm(const iv_ops *ops, iv_view x, int n_heads, int head_dim, const iv_tensor *w, float eps,
                           float w_offset);
void iv_cuda_act(const iv_ops *ops, iv_view y, iv_view x, iv_act act);
void iv_cuda_glu(const iv_ops *ops, iv_view y, iv_view x, iv_act act, int act_on_first);
void iv_cuda_add(const iv_ops *ops, iv_view y, iv_view a, iv_view b);
void iv_cuda_scale(const iv_ops *ops, iv_view y, iv_view x, float s);
void iv_cuda_embed(const iv_ops *ops, iv_view y, const iv_tensor *table, const int32_t *ids, int accumulate);
void iv_cuda_embed_bag(const iv_ops *ops, iv_view y, const iv_tensor *table, const int32_t *ids, const float *weights,
                       int taps);
void iv_cuda_rope(const iv_ops *ops, const iv_rope_args *a);
void iv_cuda_attention(const iv_ops *ops, const iv_attn_args *a);
/* attention_rows takes heads of 1 to IV_CUDA_ROWS_MAX_DIM dims. */
#define IV_CUDA_ROWS_MAX_DIM 256
void iv_cuda_attention_rows(const iv_ops *ops, const iv_attn_rows_args *a);
void iv_cuda_softmax(const iv_ops *ops, iv_view x);
void iv_cuda_l2_normalize(const iv_ops *ops, iv_view x);
void iv_cuda_pool(const iv_ops *ops, const iv_pool_args *a);
/* cuda_moe.cu, cuda_gather.cu; put in the table by cuda_table_ext.cu. */
void iv_cuda_moe_route(const iv_ops *ops, const iv_moe_route_args *a);
void iv_cuda_moe_gather(const iv_ops *ops, iv_view y, iv_view x, const int32_t *slots, int top_k);
void iv_cuda_moe_scatter(const iv_ops *ops, const iv_moe_scatter_args *a);
void iv_cuda_rel_bias(const iv_ops *ops, const iv_rel_bias_args *a);
void iv_cuda_im2col(const iv_ops *ops, iv_view y, iv_view x, int kernel, const int32_t *cu_seqlens,
                    const int32_t *cu_seqlens_dev, int n_seqs);
/* cuda_deltanet.cu: Gated DeltaNet (and gated attention outputs). */
void iv_cuda_gate_mul(const iv_ops *ops, iv_view y, iv_view x, iv_view g, iv_act act);
void iv_cuda_causal_conv1d(const iv_ops *ops, const iv_causal_conv_args *a);
void iv_cuda_delta_rule(const iv_ops *ops, const iv_delta_rule_args *a);
/* cuda_audio_ops.cu: Gemma4's audio tower. */
void iv_cuda_clamp(const iv_ops *ops, iv_view y, iv_view x, float lo, float hi);
void iv_cuda_mul_cols(const iv_ops *ops, iv_view y, iv_view x, const iv_tensor *w);
void iv_cuda_conv2d(const iv_ops *ops, const iv_conv2d_args *a);

/* dst (act dtype) = n elements of src (device memory, F32, F16 or BF16)
 * rounded to nearest even, on the stream (prepare_weight). */
void iv_cuda_to_act(const iv_ops *ops, void *dst, const void *src, iv_dtype src_dt, int64_t n);

#endif
