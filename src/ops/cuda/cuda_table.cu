/* The CUDA op table: opening an instance on one GPU, device memory, host
 * transfers, errors, and weight preparation (FP32 host tensors rounded to
 * the act dtype in device memory). The ops themselves are in
 * cuda_linear.cu, cuda_kernels.cu and cuda_attention.cu. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/cuda_internal.h"

/* cuBLASLt's workspace: NVIDIA recommends 32 MiB on Hopper (less is enough
 * elsewhere, and the difference is noise on a GPU's memory). */
#define WORKSPACE_BYTES ((size_t)32 << 20)
/* prepare_weight converts through a device staging buffer of this many elements. */
#define STAGE_ELEMS ((int64_t)4 << 20)

cuda_ctx *iv_cuda_ctx(const iv_ops *ops)
{
    cuda_ctx *c = (cuda_ctx *)ops->ctx;
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess || cur != c->device) {
        cudaError_t e = cudaSetDevice(c->device);
        if (e != cudaSuccess) iv_cuda_note_error(ops, e, "cudaSetDevice");
    }
    return c;
}

static void note(cuda_ctx *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(cuda_ctx *c, int code, const char *fmt, ...)
{
    if (c->err_code) return; /* the first error explains the rest */
    c->err_code = code;
    int n = snprintf(c->err_msg, sizeof c->err_msg, "cuda:%d: ", c->device);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err_msg + n, sizeof c->err_msg - (size_t)n, fmt, ap);
    va_end(ap);
}

void iv_cuda_note_error(const iv_ops *ops, cudaError_t e, const char *where)
{
    if (e == cudaSuccess) return;
    note((cuda_ctx *)ops->ctx, e == cudaErrorMemoryAllocation ? IV_E_NOMEM : IV_E_INTERNAL, "%s: %s (%s)", where,
         cudaGetErrorString(e), cudaGetErrorName(e));
}

void iv_cuda_note_cublas(const iv_ops *ops, cublasStatus_t s, const char *where)
{
    if (s == CUBLAS_STATUS_SUCCESS) return;
    note((cuda_ctx *)ops->ctx, s == CUBLAS_STATUS_ALLOC_FAILED ? IV_E_NOMEM : IV_E_INTERNAL, "%s: %s (%s)", where,
         cublasLtGetStatusString(s), cublasLtGetStatusName(s));
}

void iv_cuda_note_invalid(const iv_ops *ops, const char *fmt, ...)
{
    cuda_ctx *c = (cuda_ctx *)ops->ctx;
    if (c->err_code) return;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    note(c, IV_E_INTERNAL, "%s", msg);
}

float *iv_cuda_scratch(const iv_ops *ops, size_t bytes)
{
    cuda_ctx *c = (cuda_ctx *)ops->ctx;
    if (bytes <= c->scratch_bytes) return c->scratch;
    /* Queued kernels may still read the old buffer. */
    if (IV_CUDA_FAILED(ops, cudaStreamSynchronize(c->stream), "linear scratch (sync)")) return NULL;
    cudaFree(c->scratch);
    c->scratch = NULL;
    c->scratch_bytes = 0;
    size_t want = bytes + bytes / 4; /* headroom: the next batch is often a little longer */
    void *p = NULL;
    if (cudaMalloc(&p, want) != cudaSuccess) {
        (void)cudaGetLastError(); /* not a sticky error: clear it before retrying */
        want = bytes;
        cudaError_t e = cudaMalloc(&p, want);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            iv_cuda_note_error(ops, e, "linear scratch (cudaMalloc)");
            return NULL;
        }
    }
    c->scratch = (float *)p;
    c->scratch_bytes = want;
    return c->scratch;
}

/* ---- memory ---- */

static void *cuda_dev_alloc(const iv_ops *ops, size_t bytes)
{
    iv_cuda_ctx(ops);
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 256); /* cudaMalloc aligns to 256 bytes */
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* else the next launch check would report it again */
        char where[96];
        snprintf(where, sizeof where, "allocating %zu bytes of device memory", bytes);
        iv_cuda_note_error(ops, e, where);
        return NULL;
    }
    return p;
}

static void cuda_dev_free(const iv_ops *ops, void *p)
{
    if (!p) return;
    cuda_ctx *c = iv_cuda_ctx(ops);
    /* Work queued on the stream may still use p. */
    iv_cuda_note_error(ops, cudaStreamSynchronize(c->stream), "dev_free (sync)");
    iv_cuda_note_error(ops, cudaFree(p), "cudaFree");
}

/* Pageable host memory: cudaMemcpyAsync returns once src is staged, so the
 * caller may reuse it at once; the copy stays ordered before later ops. */
static void cuda_upload(const iv_ops *ops, void *dst_dev, const void *src_host, size_t bytes)
{
    if (!bytes) return;
    cuda_ctx *c = iv_cuda_ctx(ops);
    IV_CUDA_FAILED(ops, cudaMemcpyAsync(dst_dev, src_host, bytes, cudaMemcpyHostToDevice, c->stream), "upload");
}

static void cuda_download(const iv_ops *ops, void *dst_host, const void *src_dev, size_t bytes)
{
    if (!bytes) return;
    cuda_ctx *c = iv_cuda_ctx(ops);
    if (IV_CUDA_FAILED(ops, cudaMemcpyAsync(dst_host, src_dev, bytes, cudaMemcpyDeviceToHost, c->stream), "download") ||
        IV_CUDA_FAILED(ops, cudaStreamSynchronize(c->stream), "download (sync)"))
        memset(dst_host, 0, bytes); /* defined contents; the error comes out at sync */
}

/* Takes the pending error (if any) into err; returns -1 when there was one. */
static int take_error(cuda_ctx *c, iv_err *err)
{
    if (!c->err_code) return 0;
    iv_errf(err, c->err_code, "%s", c->err_msg);
    c->err_code = 0;
    c->err_msg[0] = 0;
    return -1;
}

static int cuda_sync(const iv_ops *ops, iv_err *err)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    iv_cuda_note_error(ops, cudaStreamSynchronize(c->stream), "sync");
    return take_error(c, err);
}

static int cuda_mem_info(const iv_ops *ops, size_t *free_bytes, size_t *total_bytes)
{
    iv_cuda_ctx(ops);
    if (cudaMemGetInfo(free_bytes, total_bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return 0;
}

/* ---- weights ---- */

static int remember_weight(cuda_ctx *c, iv_tensor *t)
{
    if (c->n_weights == c->cap_weights) {
        size_t cap = c->cap_weights ? 2 * c->cap_weights : 64;
        iv_tensor **p = (iv_tensor **)realloc(c->weights, cap * sizeof *p);
        if (!p) return -1;
        c->weights = p;
        c->cap_weights = cap;
    }
    c->weights[c->n_weights++] = t;
    return 0;
}

/* Linear and other weights alike: the host tensor (FP32 as ops.h says;
 * FP16/BF16 taken too, as the emulated device does) uploaded a chunk at a
 * time into a device staging buffer and rounded there to dt, nearest even;
 * a tensor already in dt is copied as it is. */
static const iv_tensor *cuda_prepare_weight(const iv_ops *ops, const iv_tensor *w, int linear, iv_err *err)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    (void)linear;
    const iv_dtype sd = w->dtype;
    if ((sd != IV_F32 && sd != IV_F16 && sd != IV_BF16) || w->device != IV_CPU || w->layout != IV_LAYOUT_ROWS ||
        w->scales) {
        char shape[64];
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "cuda:%d: prepare_weight takes a host float row-major tensor, not %s %s on device %d%s",
                       c->device, iv_dtype_name(sd), iv_shape_str(w, shape, sizeof shape), (int)w->device,
                       w->layout != IV_LAYOUT_ROWS ? " in a packed layout" : ""),
               (const iv_tensor *)NULL;
    }
    /* Fail on an error left by earlier work rather than blame this weight. */
    if (take_error(c, err)) return NULL;

    const int64_t n = iv_tensor_numel(w);
    iv_tensor *t = (iv_tensor *)calloc(1, sizeof *t);
    if (!t) return iv_errf(err, IV_E_NOMEM, "cuda:%d: out of host memory", c->device), (const iv_tensor *)NULL;
    *t = *w;
    t->dtype = c->dt;
    t->device = IV_CUDA;
    t->layout = IV_LAYOUT_ROWS;
    t->scales = NULL;
    t->data = NULL;

    const size_t ses = iv_dtype_size(sd), des = iv_dtype_size(c->dt);
    if (n > 0) t->data = cuda_dev_alloc(ops, (size_t)n * des);
    if (t->data && sd == c->dt) {
        if (!IV_CUDA_FAILED(ops, cudaMemcpyAsync(t->data, w->data, (size_t)n * des, cudaMemcpyHostToDevice, c->stream),
                            "prepare_weight (upload)"))
            iv_cuda_note_error(ops, cudaStreamSynchronize(c->stream), "prepare_weight (sync)");
    } else if (t->data) {
        const int64_t chunk = n < STAGE_ELEMS ? n : STAGE_ELEMS;
        void *stage = cuda_dev_alloc(ops, (size_t)chunk * ses);
        for (int64_t i = 0; stage && i < n; i += chunk) {
            const int64_t m = n - i < chunk ? n - i : chunk;
            if (IV_CUDA_FAILED(ops,
                               cudaMemcpyAsync(stage, (const char *)w->data + (size_t)i * ses, (size_t)m * ses,
                                               cudaMemcpyHostToDevice, c->stream),
                               "prepare_weight (upload)"))
                break;
            iv_cuda_to_act(ops, (char *)t->data + (size_t)i * des, stage, sd, m);
        }
        /* The staging buffer is reused chunk after chunk in stream order;
         * freeing it waits for the last conversion. */
        iv_cuda_note_error(ops, cudaStreamSynchronize(c->stream), "prepare_weight (sync)");
        cudaFree(stage);
    }
    if (c->err_code || remember_weight(c, t)) {
        if (!c->err_code) note(c, IV_E_NOMEM, "out of host memory");
        cudaFree(t->data);
        free(t);
        take_error(c, err);
        return NULL;
    }
    return t;
}

/* ---- the table ---- */

static void destroy(cuda_ctx *c)
{
    for (int i = 0; i < IV_CUDA_ALGO_CACHE; i++) iv_cuda_algo_entry_clear(&c->algos[i]);
    for (size_t i = 0; i < c->n_weights; i++) {
        cudaFree(c->weights[i]->data);
        free(c->weights[i]);
    }
    free(c->weights);
    cudaFree(c->scratch);
    cudaFree(c->workspace);
    if (c->lt) cublasLtDestroy(c->lt);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c);
}

const iv_ops *iv_cuda_ops_open(int device_index, iv_dtype dt, iv_err *err)
{
    if (dt != IV_BF16 && dt != IV_F16)
        return iv_errf(err, IV_E_UNSUPPORTED, "cuda:%d: dtype %s is not supported (use bfloat16 or float16)",
                       device_index, iv_dtype_name(dt)),
               (const iv_ops *)NULL;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return iv_errf(err, IV_E_UNSUPPORTED, "no CUDA device %d: %s", device_index, cudaGetErrorString(e)),
               (const iv_ops *)NULL;
    }
    if (device_index < 0 || device_index >= count)
        return iv_errf(err, IV_E_UNSUPPORTED, "no CUDA device %d: this machine has %d CUDA device%s", device_index,
                       count, count == 1 ? "" : "s"),
               (const iv_ops *)NULL;
    e = cudaSetDevice(device_index);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return iv_errf(err, IV_E_UNSUPPORTED, "no CUDA device %d: %s", device_index, cudaGetErrorString(e)),
               (const iv_ops *)NULL;
    }
    cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, device_index);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return iv_errf(err, IV_E_UNSUPPORTED, "no CUDA device %d: %s", device_index, cudaGetErrorString(e)),
               (const iv_ops *)NULL;
    }
    /* The build carries sm_80 and sm_90 code (and PTX for newer GPUs). */
    if (prop.major < 8)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "cuda:%d (%s, compute capability %d.%d): this build needs compute capability 8.0 or newer",
                       device_index, prop.name, prop.major, prop.minor),
               (const iv_ops *)NULL;

    cuda_ctx *c = (cuda_ctx *)calloc(1, sizeof *c);
    if (!c) return iv_errf(err, IV_E_NOMEM, "cuda:%d: out of host memory", device_index), (const iv_ops *)NULL;
    c->device = device_index;
    c->dt = dt;
    c->bf16 = dt == IV_BF16;
    const char *fused = getenv("IV_CUDA_LINEAR_FUSED");
    c->linear_fused = !(fused && !strcmp(fused, "0"));
    const char *tune = getenv("IV_CUDA_TUNE");
    c->tune = !(tune && !strcmp(tune, "0"));

    const char *what = NULL;
    cublasStatus_t cs = CUBLAS_STATUS_SUCCESS;
    if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess)
        what = "creating a stream";
    else if ((cs = cublasLtCreate(&c->lt)) != CUBLAS_STATUS_SUCCESS)
        what = "creating a cuBLASLt handle";
    else if ((e = cudaMalloc(&c->workspace, WORKSPACE_BYTES)) != cudaSuccess)
        what = "allocating the cuBLASLt workspace";
    if (what) {
        (void)cudaGetLastError();
        const int oom = e == cudaErrorMemoryAllocation || cs == CUBLAS_STATUS_ALLOC_FAILED;
        iv_errf(err, oom ? IV_E_NOMEM : IV_E_INTERNAL, "cuda:%d: %s: %s", device_index, what,
                cs != CUBLAS_STATUS_SUCCESS ? cublasLtGetStatusString(cs) : cudaGetErrorString(e));
        if (cs != CUBLAS_STATUS_SUCCESS) c->lt = NULL;
        destroy(c);
        return NULL;
    }
    c->workspace_bytes = WORKSPACE_BYTES;

    iv_ops *o = &c->ops;
    o->name = "cuda";
    o->device = IV_CUDA;
    o->act_dtype = dt;
    o->host_visible = 0;
    o->ctx = c;
    o->dev_alloc = cuda_dev_alloc;
    o->dev_free = cuda_dev_free;
    o->upload = cuda_upload;
    o->download = cuda_download;
    o->sync = cuda_sync;
    o->mem_info = cuda_mem_info;
    o->prepare_weight = cuda_prepare_weight;
    o->linear = iv_cuda_linear;
    o->layer_norm = iv_cuda_layer_norm;
    o->rms_norm = iv_cuda_rms_norm;
    o->head_rms_norm = iv_cuda_head_rms_norm;
    o->act = iv_cuda_act;
    o->glu = iv_cuda_glu;
    o->add = iv_cuda_add;
    o->scale = iv_cuda_scale;
    o->embed = iv_cuda_embed;
    o->embed_bag = iv_cuda_embed_bag;
    o->rope = iv_cuda_rope;
    o->attention = iv_cuda_attention;
    o->softmax = iv_cuda_softmax;
    o->l2_normalize = iv_cuda_l2_normalize;
    o->pool = iv_cuda_pool;
    o->moe_route = iv_cuda_moe_route;
    o->moe_gather = iv_cuda_moe_gather;
    o->moe_scatter = iv_cuda_moe_scatter;
    o->rel_bias = iv_cuda_rel_bias;
    o->im2col = iv_cuda_im2col;
    /* Gated DeltaNet and gated attention outputs (cuda_deltanet.cu): the
     * delta rule token by token; delta_chunk stays NULL, so the block runs
     * delta_rule here. Gemma4's audio tower (cuda_audio_ops.cu; attention
     * honours softcap_after_bias). */
    o->gate_mul = iv_cuda_gate_mul;
    o->causal_conv1d = iv_cuda_causal_conv1d;
    o->delta_rule = iv_cuda_delta_rule;
    o->clamp = iv_cuda_clamp;
    o->mul_cols = iv_cuda_mul_cols;
    o->conv2d = iv_cuda_conv2d;
    /* Folded-prefix attention (cuda_attention_rows.cu): GPU replicas fold
     * shared prefixes and keep a prefix cache (docs/prefix-folding.md). */
    o->attention_rows = iv_cuda_attention_rows;
    o->attention_rows_max_head_dim = IV_CUDA_ROWS_MAX_DIM;
    o->act_stride = NULL;
    const char *prof = getenv("IV_CUDA_PROFILE");
    if (prof && *prof && strcmp(prof, "0")) iv_cuda_profile_install(c, !strcmp(prof, "sync"));
    return o;
}

void iv_cuda_ops_close(const iv_ops *ops)
{
    if (!ops) return;
    cuda_ctx *c = iv_cuda_ctx(ops);
    cudaStreamSynchronize(c->stream); /* nothing queued may outlive its buffers */
    iv_cuda_profile_finish(c);
    destroy(c);
}
