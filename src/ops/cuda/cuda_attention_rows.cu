/* Attention of folded prefixes on an NVIDIA GPU (iv_attn_rows_args in
 * ops/ops.h), BF16 or FP16 storage, FP32 maths.
 *
 * Semantics are those of the CPU reference (ops/cpu/attention_rows.c): run
 * r's queries (rows q_cu[r] .. q_cu[r+1] of q) read the key rows
 * kv_rows[kv_cu[r] .. kv_cu[r+1]) of k and v, in increasing position; key j
 * is visible to query i when
 *   kv_pos[j] <= q_pos[i] && (wl < 0 || q_pos[i] - kv_pos[j] <= wl),
 *   s(i, j) = softcap(scale * q_i . k_j),  out_i = sum_j softmax_j(s) v_j,
 * and a query that sees no key gets a zero row.
 *
 * Grid, as the packed kernel (cuda_attention.cu): one CTA per (tile of
 * ROWS_WARPS queries, head, run); tiles past a run's end exit at once.
 * A run's queries are consecutive positions, so the keys a tile can see
 * are one range of its key list (binary searches on the key positions);
 * the CTA streams that range through shared memory in tiles of ROWS_BN
 * gathered key and value rows (the gather is what this op adds to the
 * packed kernel: a tile's rows come from anywhere in k and v), shared by
 * its warps. Each warp owns one query: a lane scores one key of the tile
 * (the query broadcast from shared memory, rows padded so the lanes' reads
 * fall in distinct banks), the tile's softmax is online (running max and
 * sum, FP32, expf), and for the value sum a lane owns head dims lane,
 * lane + 32, ... with the weights passed by shuffles.
 *
 * This is plain FP32 arithmetic on CUDA cores, not the tensor-core tiling
 * of the packed kernel: folded batches spend most of their time in the
 * projections and MLP (the part folding saves); mma tiles over the gathered
 * keys are the next step when a profile says so. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "ops/cuda/cuda_internal.h"

namespace {

constexpr int ROWS_WARPS = 8; /* queries per CTA, one per warp */
constexpr int ROWS_THREADS = ROWS_WARPS * 32;
constexpr int ROWS_BN = 32;   /* keys per shared-memory tile: one per lane */
constexpr int ROWS_MAX_DIM = IV_CUDA_ROWS_MAX_DIM;
constexpr int ROWS_MAX_GRID_Z = 65535;

struct RowsParams {
    const uint16_t *q, *k, *v;
    uint16_t *o;
    int64_t q_ld, k_ld, v_ld, o_ld;
    const int32_t *q_cu, *kv_cu, *kv_rows; /* dev */
    const int32_t *q_pos, *kv_pos;         /* dev */
    int run0;                              /* first run of this launch (grid z chunks) */
    int group;                             /* n_heads / n_kv_heads */
    int d;                                 /* head_dim */
    int wl;
    float scale, softcap, inv_softcap;
};

template <typename T> struct RowsElem;
template <> struct RowsElem<__nv_bfloat16> {
    static __device__ __forceinline__ float load(uint16_t x) { return __bfloat162float(__ushort_as_bfloat16(x)); }
    static __device__ __forceinline__ uint16_t store(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
};
template <> struct RowsElem<__half> {
    static __device__ __forceinline__ float load(uint16_t x) { return __half2float(__ushort_as_half(x)); }
    static __device__ __forceinline__ uint16_t store(float x) { return __half_as_ushort(__float2half_rn(x)); }
};

/* First index in the key list [0, n) whose position is >= p (n when none). */
__device__ int keys_at_least(const RowsParams &p, const int32_t *rows, int n, int64_t pos)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (p.kv_pos[rows[mid]] < pos) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Shared memory: K and V tiles [ROWS_BN][d + 2] (16-bit, the +2 keeps the
 * lanes' row reads in distinct banks), key positions [ROWS_BN], queries
 * [ROWS_WARPS][d] (FP32). */
__host__ __device__ constexpr int rows_ld(int d) { return d + 2; }
size_t rows_smem_bytes(int d)
{
    return 2 * (size_t)ROWS_BN * rows_ld(d) * sizeof(uint16_t) + ROWS_BN * sizeof(int32_t) +
           (size_t)ROWS_WARPS * d * sizeof(float);
}

/* DC: head dims per lane in the value sum (ceil(d / 32)). */
template <typename T, int DC>
__global__ void __launch_bounds__(ROWS_THREADS) attn_rows_fwd(const __grid_constant__ RowsParams p)
{
    extern __shared__ __align__(16) unsigned char smem[];
    const int ld = rows_ld(p.d);
    uint16_t *ks = (uint16_t *)smem;
    uint16_t *vs = ks + ROWS_BN * ld;
    int32_t *kp = (int32_t *)(vs + ROWS_BN * ld);
    float *qs = (float *)(kp + ROWS_BN);
    __shared__ int range[2];

    const int run = p.run0 + (int)blockIdx.z, h = (int)blockIdx.y, kvh = h / p.group;
    const int q0 = p.q_cu[run], nq = p.q_cu[run + 1] - q0;
    const int i0 = (int)blockIdx.x * ROWS_WARPS;
    if (i0 >= nq) return;
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const int i = i0 + warp; /* this warp's query within the run */
    const bool active = i < nq;
    const int32_t *rows = p.kv_rows + p.kv_cu[run];
    const int nk = p.kv_cu[run + 1] - p.kv_cu[run];

    /* The keys any query of the tile can see: positions rise with the row. */
    if (threadIdx.x == 0) {
        const int last = min(i0 + ROWS_WARPS, nq) - 1;
        const int64_t pmin = p.q_pos[q0 + i0], pmax = p.q_pos[q0 + last];
        range[0] = p.wl >= 0 ? keys_at_least(p, rows, nk, pmin - p.wl) : 0;
        range[1] = keys_at_least(p, rows, nk, pmax + 1);
    }
    float *q = qs + warp * p.d;
    const int64_t qrow = (int64_t)(q0 + (active ? i : 0));
    for (int c = lane; c < p.d; c += 32) q[c] = RowsElem<T>::load(p.q[qrow * p.q_ld + (int64_t)h * p.d + c]);
    const int64_t my_pos = p.q_pos[qrow];
    __syncthreads();
    const int jlo = range[0], jhi = range[1];

    float o[DC];
#pragma unroll
    for (int c = 0; c < DC; c++) o[c] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int t0 = jlo; t0 < jhi; t0 += ROWS_BN) {
        const int nt = min(ROWS_BN, jhi - t0);
        /* Gather the tile's key and value rows (the CTA's threads together). */
        for (int x = (int)threadIdx.x; x < nt * p.d; x += ROWS_THREADS) {
            const int j = x / p.d, c = x % p.d;
            const int64_t row = rows[t0 + j];
            ks[j * ld + c] = p.k[row * p.k_ld + (int64_t)kvh * p.d + c];
            vs[j * ld + c] = p.v[row * p.v_ld + (int64_t)kvh * p.d + c];
        }
        if ((int)threadIdx.x < nt) kp[threadIdx.x] = p.kv_pos[rows[t0 + threadIdx.x]];
        __syncthreads();
        if (active) {
            /* Lane j scores key j of the tile. */
            float s = -INFINITY;
            if (lane < nt) {
                const int64_t kpos = kp[lane];
                if (kpos <= my_pos && (p.wl < 0 || my_pos - kpos <= p.wl)) {
                    const uint16_t *kr = ks + lane * ld;
                    float dot = 0.0f;
                    for (int c = 0; c < p.d; c++) dot = fmaf(q[c], RowsElem<T>::load(kr[c]), dot);
                    s = dot * p.scale;
                    if (p.softcap > 0.0f) s = p.softcap * tanhf(s * p.inv_softcap);
                }
            }
            float tmax = s;
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, off));
            if (tmax > -INFINITY) { /* some key of the tile is visible */
                const float m_new = fmaxf(m, tmax);
                const float alpha = m > -INFINITY ? expf(m - m_new) : 0.0f;
                const float pj = s > -INFINITY ? expf(s - m_new) : 0.0f;
                float psum = pj;
#pragma unroll
                for (int off = 16; off > 0; off >>= 1) psum += __shfl_xor_sync(0xffffffffu, psum, off);
                l = l * alpha + psum;
                m = m_new;
#pragma unroll
                for (int c = 0; c < DC; c++) o[c] *= alpha;
                for (int j = 0; j < nt; j++) {
                    const float w = __shfl_sync(0xffffffffu, pj, j);
                    if (w == 0.0f) continue;
                    const uint16_t *vr = vs + j * ld;
#pragma unroll
                    for (int c = 0; c < DC; c++) {
                        const int dcol = lane + 32 * c;
                        if (dcol < p.d) o[c] = fmaf(w, RowsElem<T>::load(vr[dcol]), o[c]);
                    }
                }
            }
        }
        __syncthreads(); /* the tile is read before the next one overwrites it */
    }
    if (!active) return;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    uint16_t *dst = p.o + (int64_t)(q0 + i) * p.o_ld + (int64_t)h * p.d;
#pragma unroll
    for (int c = 0; c < DC; c++) {
        const int dcol = lane + 32 * c;
        if (dcol < p.d) dst[dcol] = RowsElem<T>::store(o[c] * inv);
    }
}

template <typename T, int DC>
cudaError_t launch_rows(RowsParams &p, int n_runs, int max_q, int n_heads, cudaStream_t stream)
{
    const size_t smem = rows_smem_bytes(p.d);
    auto kernel = attn_rows_fwd<T, DC>;
    if (smem > 48 * 1024) {
        const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return e;
    }
    const unsigned q_blocks = (unsigned)((max_q + ROWS_WARPS - 1) / ROWS_WARPS);
    for (int r0 = 0; r0 < n_runs; r0 += ROWS_MAX_GRID_Z) {
        p.run0 = r0;
        const dim3 grid(q_blocks, (unsigned)n_heads, (unsigned)min(n_runs - r0, ROWS_MAX_GRID_Z));
        kernel<<<grid, ROWS_THREADS, smem, stream>>>(p);
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

template <typename T>
cudaError_t launch_rows_type(RowsParams &p, int n_runs, int max_q, int n_heads, cudaStream_t st)
{
    switch ((p.d + 31) / 32) {
    case 1: return launch_rows<T, 1>(p, n_runs, max_q, n_heads, st);
    case 2: return launch_rows<T, 2>(p, n_runs, max_q, n_heads, st);
    case 3: return launch_rows<T, 3>(p, n_runs, max_q, n_heads, st);
    case 4: return launch_rows<T, 4>(p, n_runs, max_q, n_heads, st);
    case 5: return launch_rows<T, 5>(p, n_runs, max_q, n_heads, st);
    case 6: return launch_rows<T, 6>(p, n_runs, max_q, n_heads, st);
    case 7: return launch_rows<T, 7>(p, n_runs, max_q, n_heads, st);
    default: return launch_rows<T, 8>(p, n_runs, max_q, n_heads, st);
    }
}

} // namespace

/* C++ linkage, as declared in cuda_internal.h (cuda_table.cu fills the
 * table with it). */
void iv_cuda_attention_rows(const iv_ops *ops, const iv_attn_rows_args *a)
{
    const iv_dtype dt = a->q.dtype;
    const int d = a->head_dim;
    if (a->n_runs <= 0) return;
    /* Contract violations are recorded in the instance (ops->sync reports
     * them), as a launch failure would be. */
    if ((dt != IV_BF16 && dt != IV_F16) || a->k.dtype != dt || a->v.dtype != dt || a->out.dtype != dt) {
        iv_cuda_note_invalid(ops, "attention_rows: views must all be bfloat16 or all float16");
        return;
    }
    if (a->n_heads <= 0 || a->n_kv_heads <= 0 || a->n_heads % a->n_kv_heads != 0 || a->n_heads > 65535) {
        iv_cuda_note_invalid(ops, "attention_rows: %d heads over %d kv heads", a->n_heads, a->n_kv_heads);
        return;
    }
    if (d <= 0 || d > ROWS_MAX_DIM) {
        iv_cuda_note_invalid(ops, "attention_rows: head_dim %d (the CUDA kernel takes 1 to %d)", d, ROWS_MAX_DIM);
        return;
    }
    if (!a->q_cu || !a->q_cu_dev || !a->kv_cu_dev || !a->kv_rows || !a->q_pos || !a->kv_pos) {
        iv_cuda_note_invalid(ops, "attention_rows: q_cu (host and device), kv_cu, kv_rows and positions are required");
        return;
    }
    /* Geometry from the host query offsets. */
    int max_q = 0;
    for (int r = 0; r < a->n_runs; r++) max_q = max(max_q, a->q_cu[r + 1] - a->q_cu[r]);
    if (max_q <= 0) return;

    RowsParams p;
    p.q = (const uint16_t *)a->q.data;
    p.k = (const uint16_t *)a->k.data;
    p.v = (const uint16_t *)a->v.data;
    p.o = (uint16_t *)a->out.data;
    p.q_ld = a->q.ld;
    p.k_ld = a->k.ld;
    p.v_ld = a->v.ld;
    p.o_ld = a->out.ld;
    p.q_cu = a->q_cu_dev;
    p.kv_cu = a->kv_cu_dev;
    p.kv_rows = a->kv_rows;
    p.q_pos = a->q_pos;
    p.kv_pos = a->kv_pos;
    p.run0 = 0;
    p.group = a->n_heads / a->n_kv_heads;
    p.d = d;
    p.wl = a->window_left < 0 ? -1 : a->window_left;
    p.scale = a->scale;
    p.softcap = a->softcap > 0.0f ? a->softcap : 0.0f;
    p.inv_softcap = a->softcap > 0.0f ? 1.0f / a->softcap : 0.0f;

    const cudaStream_t stream = iv_cuda_ctx(ops)->stream;
    const cudaError_t e = dt == IV_BF16 ? launch_rows_type<__nv_bfloat16>(p, a->n_runs, max_q, a->n_heads, stream)
                                        : launch_rows_type<__half>(p, a->n_runs, max_q, a->n_heads, stream);
    if (e != cudaSuccess) iv_cuda_note_error(ops, e, "attention_rows");
}
