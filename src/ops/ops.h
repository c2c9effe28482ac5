/* The op interface. Model and head code call ops only through an iv_ops
 * table, so it never knows which device runs them. Each device fills one
 * table: ops/cpu (FP32 on host memory), ops/emu (the emulated device: BF16 or
 * FP16 storage in buffers the host cannot touch, FP32 maths, for tests on
 * machines without a GPU) and ops/cuda (FP16/BF16 on an NVIDIA GPU).
 *
 * Memory. Activations live in device memory that the table owns: views
 * (iv_view) point into it and carry its dtype (the table's act_dtype); only
 * the table reads or writes it. Host data crosses once per batch through
 * upload/download. Weights are prepared at load through prepare_weight (the
 * CPU packs panels, a GPU converts and copies), so ops only ever see weight
 * tensors in the device's own layout.
 *
 * Indices and small per-batch tables (token ids, positions, cu_seqlens, key
 * masks, bias offsets) are int32/uint8/int64 arrays in device memory, marked
 * `dev` below; arrays marked `host` are read by the host side of the table
 * (launch geometry, by-value kernel parameters).
 *
 * Activation tensors are 2-D [rows, cols] row-major with a row stride ld
 * (elements); a view may be a column window of a wider buffer (fused QKV).
 * Conventions: y may alias x for elementwise and norm ops; NULL means
 * "absent" for optional weights and arrays. Ops compute in FP32 whatever the
 * storage dtype, and round once when they store. */
#ifndef IV_OPS_OPS_H
#define IV_OPS_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/err.h"
#include "tensor/tensor.h"

typedef enum iv_act {
    IV_ACT_NONE = 0,
    IV_ACT_GELU,       /* exact erf GELU ("gelu") */
    IV_ACT_GELU_TANH,  /* tanh approximation ("gelu_new", "gelu_pytorch_tanh") */
    IV_ACT_SILU,
    IV_ACT_RELU,
    IV_ACT_TANH,
    IV_ACT_SIGMOID,
} iv_act;

/* Parses an HF hidden_act string; -1 when unknown. */
int iv_act_from_name(const char *name);

/* Sentence pooling rules (sentence-transformers' Pooling modes). */
typedef enum iv_pool_mode {
    IV_POOL_NONE = 0, /* no Pooling module: the model decides (e.g. classifiers) */
    IV_POOL_CLS,
    IV_POOL_MEAN,
    IV_POOL_MAX,
    IV_POOL_LAST,
    IV_POOL_MEAN_SQRT_LEN,
    IV_POOL_WEIGHTED_MEAN,
} iv_pool_mode;

/* A strided 2-D view of device memory: rows of `cols` elements of dtype,
 * consecutive rows `ld` elements apart. */
typedef struct iv_view {
    void *data;
    int64_t rows, cols, ld;
    iv_dtype dtype;
} iv_view;

static inline iv_view iv_view_make(void *data, iv_dtype dt, int64_t rows, int64_t cols, int64_t ld)
{
    iv_view v = {data, rows, cols, ld, dt};
    return v;
}
/* Rows [r0, r1) and columns [c0, c0 + ncols) of v. */
static inline iv_view iv_view_sub(iv_view v, int64_t r0, int64_t r1, int64_t c0, int64_t ncols)
{
    iv_view s = v;
    s.data = (char *)v.data + (size_t)(r0 * v.ld + c0) * iv_dtype_size(v.dtype);
    s.rows = r1 - r0;
    s.cols = ncols;
    return s;
}
static inline iv_view iv_view_rows(iv_view v, int64_t r0, int64_t r1) { return iv_view_sub(v, r0, r1, 0, v.cols); }
static inline iv_view iv_view_cols(iv_view v, int64_t c0, int64_t ncols)
{
    return iv_view_sub(v, 0, v.rows, c0, ncols);
}
/* A weight tensor as a view (its own dtype; row-major layouts only). */
static inline iv_view iv_view_of(const iv_tensor *t)
{
    return iv_view_make(t->data, t->dtype, iv_tensor_rows(t), iv_tensor_cols(t), iv_tensor_cols(t));
}

/* Attention over packed sequences: token rows of all sequences are
 * concatenated; sequence s owns rows [cu_seqlens[s], cu_seqlens[s+1]).
 * Scores only ever pair tokens of the same sequence. */
typedef struct iv_attn_args {
    iv_view q, k, v;          /* [T, n_heads*head_dim], [T, n_kv_heads*head_dim] x2 */
    iv_view out;              /* [T, n_heads*head_dim] */
    const int32_t *cu_seqlens;     /* host, n_seqs + 1 entries */
    const int32_t *cu_seqlens_dev; /* dev, the same values */
    int n_seqs;
    int max_seqlen;           /* longest sequence (launch geometry) */
    int n_heads, n_kv_heads, head_dim; /* GQA: head h reads kv head h / (n_heads / n_kv_heads) */
    float scale;              /* usually 1/sqrt(head_dim) */
    int causal;               /* key j visible to query i only when j <= i */
    int window_left;          /* -1: unlimited; else key j needs i - j <= window_left */
    int window_right;         /* -1: unlimited; else key j needs j - i <= window_right */
    const float *alibi_slopes; /* host [n_heads] or NULL: adds -slope * |i - j| */
    /* Optional additive FP32 bias, per sequence a [n_heads, L, L] block
     * starting at bias + bias_offsets[s] (MPNet/T5 relative buckets,
     * DeBERTa, ...): bias dev, bias_offsets host and bias_offsets_dev. */
    const float *bias;
    const int64_t *bias_offsets;
    const int64_t *bias_offsets_dev;
    /* Optional dev [T] flags: 0 = this token is never attended to as a key
     * (ColBERT query-expansion [MASK]s); its own query row is still computed. */
    const uint8_t *key_mask;
    float softcap;            /* 0: none; else scores = softcap * tanh(scores / softcap) */
    /* 0: the softcap caps scale * q.k before the bias is added (Gemma 2);
     * 1: it caps scale * q.k + bias (Gemma4's audio attention, whose
     * relative-position term sits inside the tanh). CPU and emulated
     * tables only: the models that set it need conv2d, which the CUDA
     * table leaves NULL, so they are refused there at load. */
    int softcap_after_bias;
} iv_attn_args;

/* Attention of folded prefixes (models/fold.h): the queries come in runs,
 * and run r's queries read an explicit list of key rows (the rows of the
 * runs above it in the prefix trie, then its own). Masks use absolute
 * positions, so a shared prefix computed once serves every sequence below
 * it: key j (a row of k, v) is visible to query i (a row of q) when
 *   kv_pos[j] <= q_pos[i] && (window_left < 0 || q_pos[i] - kv_pos[j] <= window_left)
 * and
 *   s(i, j) = softcap(scale * q_i . k_j),  out_i = sum_j softmax_j(s) v_j
 * over the visible keys of i's run (always causal; no bias, ALiBi or key
 * mask: models needing those do not fold). A query that sees no key gets a
 * zero row. Key lists run in increasing position. */
typedef struct iv_attn_rows_args {
    iv_view q, out;                   /* [Tq, n_heads*head_dim] */
    iv_view k, v;                     /* [Tk, n_kv_heads*head_dim] */
    int n_runs;
    const int32_t *q_cu, *q_cu_dev;   /* host, dev [n_runs + 1]: run r's queries are rows [q_cu[r], q_cu[r+1]) */
    const int32_t *kv_cu, *kv_cu_dev; /* host, dev [n_runs + 1]: run r's keys are kv_rows[kv_cu[r] .. kv_cu[r+1]) */
    const int32_t *kv_rows;           /* dev: rows of k and v, each < Tk */
    const int32_t *q_pos, *kv_pos;    /* dev [Tq], [Tk] absolute positions */
    int max_keys;                     /* longest key list (launch geometry, scratch) */
    int n_heads, n_kv_heads, head_dim;
    float scale;
    int window_left;
    float softcap;
} iv_attn_rows_args;

/* Rotary embedding applied in place to the heads of x (q or k). Rotates the
 * first rot_dim dims of each head. pos (dev) [rows] gives each row's
 * position; inv_freq (host) [rot_dim/2] the frequencies (scaling variants
 * are computed by the caller, models/rope.c). interleaved=0: NeoX
 * rotate_half pairs (i, i+rot/2); interleaved=1: GPT-J pairs (2i, 2i+1).
 * attn_factor scales cos and sin (YaRN).
 *
 * Positions on several axes (Qwen3-VL's interleaved mRoPE over time, height
 * and width; its vision tower's 2-D rotary over height and width): with
 * freq_section set, frequency i turns by the position on axis
 * freq_section[i] (host [rot_dim/2], each < IV_ROPE_MAX_AXES), and row t's
 * position on axis a is pos[a * pos_axis_stride + t] (a stride of 0 gives
 * every axis the same position: plain RoPE). NULL: one axis, pos[t]. */
#define IV_ROPE_MAX_HALF 256
#define IV_ROPE_MAX_AXES 3
typedef struct iv_rope_args {
    iv_view x;
    int n_heads, head_dim, rot_dim;
    const int32_t *pos;
    const float *inv_freq;
    int interleaved;
    float attn_factor;
    const uint8_t *freq_section;
    int64_t pos_axis_stride;
} iv_rope_args;

/* Pooling of each sequence's rows into one row (sentence-transformers'
 * Pooling): out [n_seqs, H] from x [T, H]. skip (dev, or NULL) leading rows
 * of sequence s are left out (include_prompt=false; a skip that would leave
 * nothing counts as 0); CLS takes the first row kept, LAST the last row. */
typedef struct iv_pool_args {
    iv_view out, x;
    const int32_t *cu_seqlens;     /* host */
    const int32_t *cu_seqlens_dev; /* dev */
    const int32_t *skip;           /* dev [n_seqs] or NULL */
    int n_seqs;
    iv_pool_mode mode;
} iv_pool_args;

/* Mixture-of-experts routing (iv_ops.moe_route): per token, a softmax in
 * FP32 over its router logits, then its top_k experts, largest probability
 * first and the lower index on ties, their probabilities divided by their
 * sum when renormalize; then a stable counting sort of the (token, choice)
 * slots t * top_k + j by expert, so each expert's tokens form one run in
 * token order. The per-expert linears need each run's length on the host:
 * offsets is the one array the caller downloads. */
typedef struct iv_moe_route_args {
    iv_view logits;   /* [T, E] router logits (left unchanged) */
    int top_k;        /* 1 <= top_k <= E */
    int renormalize;
    int32_t *choice;  /* dev out [T * top_k]: token t's experts at t * top_k + j */
    float *weight;    /* dev out [T * top_k]: their weights */
    int32_t *offsets; /* dev out [E + 1]: expert e's run is slots[offsets[e] .. offsets[e + 1]) */
    int32_t *slots;   /* dev out [T * top_k]: slot indices grouped by expert */
} iv_moe_route_args;

/* One expert's outputs y [n, H] added back into their tokens' rows of out
 * (iv_ops.moe_scatter). Row r is slot s = slots[r] (the expert's run), token
 * t = s / top_k, weight w = weight[s]:
 *   out[t] = (expert is t's lowest choice ? 0 : out[t]) + y[r] * w
 * and where expert is t's highest choice, then + bias and then + residual[t].
 * Called for the experts in ascending order, every token's row becomes the
 * sum of its experts' weighted rows in ascending expert order (as
 * transformers adds them), plus bias and residual, with no pass to clear
 * out first. Within one call a token appears at most once. */
typedef struct iv_moe_scatter_args {
    iv_view out, y;
    const int32_t *slots;   /* dev [n]: the expert's run */
    const float *weight;    /* dev [T * top_k] (iv_moe_route_args.weight) */
    const int32_t *choice;  /* dev [T * top_k] (iv_moe_route_args.choice) */
    int top_k, expert;
    const iv_tensor *bias;  /* [H] or NULL */
    const void *residual;   /* out's layout, or NULL; may be the gathered input, not out */
} iv_moe_scatter_args;

/* A relative-position attention bias gathered from per-token products
 * (iv_ops.rel_bias; DeBERTa's disentangled c2p / p2c terms). Sequence s owns
 * rows [cu_seqlens[s], cu_seqlens[s+1]) of c2p and p2c; for its query i, key
 * j (L tokens, both counted from its start) and d = idx_mid + i - j, head
 * `head`'s rows of its FP32 [n_heads, L, L] block get
 *   bias[offsets[s] + (head * L + i) * L + j] =
 *       0 + c2p[cu_seqlens[s] + i, c2p_idx[d]] / scale + p2c[cu_seqlens[s] + j, p2c_idx[d]] / scale
 * summed in that order, a term left out when its view's data is NULL. */
typedef struct iv_rel_bias_args {
    float *bias;                   /* dev FP32 blocks */
    const int64_t *offsets;        /* host [n_seqs] */
    const int64_t *offsets_dev;    /* dev, the same values */
    const int32_t *cu_seqlens;     /* host [n_seqs + 1] */
    const int32_t *cu_seqlens_dev; /* dev, the same values */
    int n_seqs, head;
    iv_view c2p, p2c;              /* [T, cols] */
    const int32_t *c2p_idx, *p2c_idx; /* dev [2 idx_mid + 1] columns of c2p / p2c */
    int idx_mid;                   /* index of distance 0; at least the longest sequence - 1 */
    float scale;
} iv_rel_bias_args;

/* Causal depthwise 1-D convolution over packed sequences (Gated DeltaNet's
 * short convolution, kernel K): for channel c of row t,
 *   y[t, c] = act(b[c] + sum_{k < K} w[c, k] * x[t - (K - 1) + k, c])
 * where rows before the start of t's own sequence read 0: every sequence
 * starts from a zero convolution state. w [C, K] (PyTorch's [C, 1, K]
 * depthwise weight), b [C] or NULL; y must not overlap x. */
typedef struct iv_causal_conv_args {
    iv_view y, x;                  /* [T, C] */
    const iv_tensor *w, *b;
    iv_act act;
    const int32_t *cu_seqlens;     /* host, n_seqs + 1 entries covering all T rows */
    const int32_t *cu_seqlens_dev; /* dev, the same values */
    int n_seqs;
} iv_causal_conv_args;

/* The gated delta rule (Gated DeltaNet's linear attention) over packed
 * sequences, each starting from a zero state. Per sequence and value head h
 * (key head h / (n_v_heads / n_k_heads)), with q_t, k_t L2-normalised
 * (x * rsqrt(sum x^2 + 1e-6)), q_t scaled by 1 / sqrt(k_head_dim),
 * beta_t = sigmoid(b[t, h]) and g_t = -exp(a_log[h]) * softplus(a[t, h] + dt_bias[h]):
 *   S = S * exp(g_t)                          S [k_head_dim, v_head_dim]
 *   S = S + k_t (beta_t (v_t - S^T k_t))^T
 *   out_t = S^T q_t
 * all in FP32. delta_rule runs exactly that, token by token (the reference);
 * delta_chunk computes the same outputs in the chunked (WY / UT transform)
 * form of flash-linear-attention's chunk_gated_delta_rule, `chunk` tokens at
 * a time (the last chunk of each sequence shorter), which turns the
 * per-token state reads and writes into a few small matrix products per
 * chunk and agrees with delta_rule to rounding. Each (sequence, value head)
 * is computed alone, so a sequence's outputs are the same bits in any batch. */
typedef struct iv_delta_rule_args {
    iv_view out;                   /* [T, n_v_heads * v_head_dim] */
    iv_view q, k;                  /* [T, n_k_heads * k_head_dim] */
    iv_view v;                     /* [T, n_v_heads * v_head_dim] */
    iv_view a, b;                  /* [T, n_v_heads] */
    const iv_tensor *a_log, *dt_bias; /* [n_v_heads] */
    int n_k_heads, n_v_heads, k_head_dim, v_head_dim;
    const int32_t *cu_seqlens;     /* host, n_seqs + 1 entries covering all T rows */
    const int32_t *cu_seqlens_dev; /* dev, the same values */
    int n_seqs;
    int chunk;                     /* delta_chunk: tokens per chunk, 1..IV_DELTA_CHUNK_MAX; delta_rule ignores it */
} iv_delta_rule_args;
#define IV_DELTA_CHUNK_MAX 256

/* A 2-D convolution without bias over packed images (iv_ops.conv2d;
 * Gemma4's audio subsampler, whose "image" is the mel spectrogram): image s
 * owns input rows [cu_in[s], cu_in[s+1]) and output rows [cu_out[s],
 * cu_out[s+1]), with out_len = (in_len + 2 pad - kernel) / stride + 1 (0
 * when in_len + 2 pad < kernel).
 * A row is one position of the first (time) axis holding the second axis'
 * positions, channels fastest: x [T, w_in * c_in], y [T', w_out * c_out],
 * w_out = (w_in + 2 pad - kernel) / stride + 1. Square kernel and stride,
 * zero padding `pad` on every side of every image (rows of other images
 * are never read):
 *   y[o, q, co] = sum_{ci, ki, kj} w[co, ci, ki, kj] x[o stride - pad + ki, q stride - pad + kj, ci]
 * w is PyTorch's [c_out, c_in, kernel, kernel] Conv2d weight viewed
 * [c_out, c_in * kernel * kernel]. y must not overlap x. */
typedef struct iv_conv2d_args {
    iv_view y, x;
    const iv_tensor *w;
    int c_in, c_out, w_in, w_out, kernel, stride, pad;
    const int32_t *cu_in, *cu_out;         /* host, n_seqs + 1 entries covering all rows */
    const int32_t *cu_in_dev, *cu_out_dev; /* dev, the same values */
    int n_seqs;
} iv_conv2d_args;

typedef struct iv_ops iv_ops;
struct iv_ops {
    const char *name;
    iv_device device;
    iv_dtype act_dtype;   /* storage of every activation view */
    /* 1: device memory is host memory (the CPU): results may be read in
     * place (iv_ops_read_f32) and weights need no device copies. */
    int host_visible;
    void *ctx;            /* the instance's state (stream, handles, buffers) */

    /* ---- device memory ---- */
    /* Returns bytes of device memory (256-byte aligned), or NULL. */
    void *(*dev_alloc)(const iv_ops *ops, size_t bytes);
    void (*dev_free)(const iv_ops *ops, void *p);
    void (*upload)(const iv_ops *ops, void *dst_dev, const void *src_host, size_t bytes);
    void (*download)(const iv_ops *ops, void *dst_host, const void *src_dev, size_t bytes);
    /* Waits for queued work; 0, or -1 with err set when the device reported
     * an error (out of memory, a fault) since the last sync. */
    int (*sync)(const iv_ops *ops, iv_err *err);
    /* Free and total bytes of the device's memory (0), or -1 when the table
     * cannot tell. NULL on tables whose memory is the host's (the CPU, the
     * emulated device): the server then sizes nothing from it. */
    int (*mem_info)(const iv_ops *ops, size_t *free_bytes, size_t *total_bytes);
    /* Load time: the device's copy of weight w (host, FP32 row-major;
     * `linear` 1 when it will be a linear op's weight), in its own dtype and
     * layout; NULL with err set on failure. The table owns the copy (header
     * and data) until iv_ops_close. The CPU tables keep host weights and
     * pack linear ones in models/pack_weights.c, so theirs is NULL. */
    const iv_tensor *(*prepare_weight)(const iv_ops *ops, const iv_tensor *w, int linear, iv_err *err);

    /* ---- ops ---- */
    /* y = act(x W^T + b) (+ residual when non-NULL, added after act; rows
     * y.ld apart, y's dtype). x [T, in], w [out, in] (PyTorch Linear
     * layout, as prepared), b [out] or NULL. */
    void (*linear)(const iv_ops *ops, iv_view y, iv_view x, const iv_tensor *w, const iv_tensor *b,
                   iv_act act, const void *residual_or_null);

    /* y = LayerNorm(x + r) over cols; r (rows x.ld apart), w, b may be NULL (no affine). */
    void (*layer_norm)(const iv_ops *ops, iv_view y, iv_view x, const void *r, const iv_tensor *w,
                       const iv_tensor *b, float eps);
    /* y = x_hat * (w + w_offset) with x_hat = (x + r) / rms; w_offset is 1
     * for Gemma's zero-centred weights; w may be NULL (no scale). */
    void (*rms_norm)(const iv_ops *ops, iv_view y, iv_view x, const void *r, const iv_tensor *w,
                     float eps, float w_offset);
    /* Per-head RMSNorm (Qwen3/Gemma q_norm, k_norm): x viewed [T*n_heads, head_dim]. */
    void (*head_rms_norm)(const iv_ops *ops, iv_view x, int n_heads, int head_dim, const iv_tensor *w,
                          float eps, float w_offset);

    void (*act)(const iv_ops *ops, iv_view y, iv_view x, iv_act act);
    /* Gated unit: x [T, 2I] -> y [T, I]. act_on_first=1: y = act(x[:, :I]) * x[:, I:];
     * 0: y = x[:, :I] * act(x[:, I:]). */
    void (*glu)(const iv_ops *ops, iv_view y, iv_view x, iv_act act, int act_on_first);
    /* y = a + b elementwise; all three in the act dtype, or all FP32 (attention bias blocks). */
    void (*add)(const iv_ops *ops, iv_view y, iv_view a, iv_view b);
    /* y = x * s elementwise (s = 1: a strided copy). */
    void (*scale)(const iv_ops *ops, iv_view y, iv_view x, float s);

    /* y[t] (+)= table[ids[t]] (ids dev); accumulate=1 adds to y. ids must be
     * in range (checked by the caller against the vocabulary). */
    void (*embed)(const iv_ops *ops, iv_view y, const iv_tensor *table, const int32_t *ids,
                  int accumulate);
    /* Weighted gather (an embedding bag): y[t] = sum over j < taps of
     * weights[t * taps + j] * table[ids[t * taps + j]], products summed in j
     * order (ids, weights dev [y.rows * taps]; ids in range). Bilinear
     * resampling of a learned position grid (Qwen3-VL's vision tower). */
    void (*embed_bag)(const iv_ops *ops, iv_view y, const iv_tensor *table, const int32_t *ids,
                      const float *weights, int taps);

    void (*rope)(const iv_ops *ops, const iv_rope_args *a);
    void (*attention)(const iv_ops *ops, const iv_attn_args *a);
    /* Attention of folded prefixes (iv_attn_rows_args); NULL on tables
     * without it, whose models then never fold. */
    void (*attention_rows)(const iv_ops *ops, const iv_attn_rows_args *a);
    /* The widest head attention_rows takes (0: any); models whose layers
     * are wider keep every row where they would need it (the last layer's
     * head rows, models/model.h). */
    int attention_rows_max_head_dim;
    /* Row-wise softmax in place. */
    void (*softmax)(const iv_ops *ops, iv_view x);
    /* Row-wise L2 normalisation in place (eps guards zero rows, as torch's F.normalize 1e-12). */
    void (*l2_normalize)(const iv_ops *ops, iv_view x);
    void (*pool)(const iv_ops *ops, const iv_pool_args *a);

    /* Mixture of experts: routing, then per expert a gather of its tokens'
     * rows, its MLP (linear ops) and a weighted scatter back. */
    void (*moe_route)(const iv_ops *ops, const iv_moe_route_args *a);
    /* y [n, H] = rows slots[r] / top_k of x, r < n (slots dev: an expert's run). */
    void (*moe_gather)(const iv_ops *ops, iv_view y, iv_view x, const int32_t *slots, int top_k);
    void (*moe_scatter)(const iv_ops *ops, const iv_moe_scatter_args *a);
    void (*rel_bias)(const iv_ops *ops, const iv_rel_bias_args *a);
    /* Im2col of a 1-D convolution over packed sequences (as attention's):
     * y [T, kernel * H] with y[t, k * H + c] = x[t + k - (kernel - 1) / 2, c]
     * where that row is in t's own sequence, else 0 (zero padding at both
     * ends of each sequence). x [T, H]; kernel odd; cu_seqlens cover all T rows. */
    void (*im2col)(const iv_ops *ops, iv_view y, iv_view x, int kernel, const int32_t *cu_seqlens,
                   const int32_t *cu_seqlens_dev, int n_seqs);

    /* y = x * act(g) elementwise (gated attention outputs, gated norms),
     * or with g one column wide, each row of x times act of its row's g
     * (Qwen3.5-MoE's shared-expert gate); y may alias x. NULL on tables
     * without it. */
    void (*gate_mul)(const iv_ops *ops, iv_view y, iv_view x, iv_view g, iv_act act);
    /* Gated DeltaNet: the causal short convolution and the gated delta rule
     * (iv_causal_conv_args, iv_delta_rule_args); NULL on tables without them,
     * which then refuse models with such layers at load. */
    void (*causal_conv1d)(const iv_ops *ops, const iv_causal_conv_args *a);
    void (*delta_rule)(const iv_ops *ops, const iv_delta_rule_args *a);
    /* The same rule in chunks (iv_delta_rule_args.chunk); NULL on tables
     * without it, where the model runs delta_rule. */
    void (*delta_chunk)(const iv_ops *ops, const iv_delta_rule_args *a);

    /* Gemma4's audio tower: y = min(max(x, lo), hi) elementwise (torch.clamp,
     * NaN stays NaN; infinite bounds are no-ops); y[t, c] = x[t, c] *
     * w[c % n] with n = numel(w) dividing x.cols (a per-column scale tiled
     * over heads); the 2-D convolution (iv_conv2d_args). y may alias x in
     * clamp and mul_cols. NULL on tables without them, which then refuse the
     * audio tower at load. */
    void (*clamp)(const iv_ops *ops, iv_view y, iv_view x, float lo, float hi);
    void (*mul_cols)(const iv_ops *ops, iv_view y, iv_view x, const iv_tensor *w);
    void (*conv2d)(const iv_ops *ops, const iv_conv2d_args *a);

    /* Row stride, in elements, for a scratch activation of `cols` columns
     * that a linear op will read (>= cols); NULL: cols. */
    int64_t (*act_stride)(int64_t cols);
};

/* ops->act_stride(cols), or cols when the table leaves it out. */
static inline int64_t iv_ops_act_stride(const iv_ops *ops, int64_t cols)
{
    return ops->act_stride ? ops->act_stride(cols) : cols;
}

/* An activation of rows x cols (rows ld elements apart) from a device arena
 * (iv_ops_arena_init); data NULL when out of memory. */
iv_view iv_act_alloc(const iv_ops *ops, iv_arena *dev, int64_t rows, int64_t cols, int64_t ld);
/* Raw device bytes from a device arena, NULL when out of memory. */
void *iv_dev_arena_alloc(iv_arena *dev, size_t bytes);
/* A copy of `bytes` of host memory in new memory of a device arena; NULL on OOM. */
void *iv_dev_upload_new(const iv_ops *ops, iv_arena *dev, const void *host, size_t bytes);
/* Copies view v into host as dense FP32 rows [v.rows, v.cols] (converting
 * 16-bit storage). Synchronous: host is ready on return. */
void iv_ops_download_f32(const iv_ops *ops, iv_view v, float *host);
/* Copies dense host FP32 rows [y.rows, y.cols] into view y in the table's
 * activation dtype (BF16 / FP16 storage rounded), staging through host
 * memory from arena. -1 when arena is out of memory or the dtype is not an
 * activation dtype. */
int iv_ops_upload_f32(const iv_ops *ops, iv_view y, const float *host, iv_arena *arena);
/* v's rows as host FP32: v's own memory on host-visible FP32 tables (no
 * copy; *ld = v.ld), else a dense copy into scratch [v.rows * v.cols]
 * (*ld = v.cols). */
const float *iv_ops_read_f32(const iv_ops *ops, iv_view v, float *scratch, int64_t *ld);
/* An arena whose blocks are ops' device memory. */
void iv_ops_arena_init(iv_arena *a, const iv_ops *ops);

/* The CPU table (ops/cpu). */
const iv_ops *iv_cpu_ops(void);

/* Opens a table for a device name ("cpu", "emulated", "cuda", "cuda:N") and
 * dtype ("float32", "int8", "bfloat16", "float16"; NULL: the device's
 * default). The CPU tables are shared statics; others are instances freed
 * by iv_ops_close. NULL with err set when the device or dtype is not
 * available here. */
const iv_ops *iv_ops_open(const char *device, const char *dtype, iv_err *err);
void iv_ops_close(const iv_ops *ops);

#endif
