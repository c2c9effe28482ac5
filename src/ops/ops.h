/* The op interface. Model and head code call ops only through an iv_ops
 * table, so it never knows which device runs them. Each device (ops/cpu,
 * later ops/cuda) fills one table. Activation tensors are 2-D [rows, cols]
 * row-major; a tensor may be a column window of a wider buffer (see
 * iv_view), which lets fused QKV outputs feed attention without copies.
 *
 * Conventions: y may alias x for elementwise and norm ops; NULL means
 * "absent" for optional weights. All CPU ops are FP32. */
#ifndef IV_OPS_OPS_H
#define IV_OPS_OPS_H

#include <stdint.h>
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

/* A strided 2-D view: rows of `cols` floats, consecutive rows `ld` apart.
 * Used for column windows of fused projections. */
typedef struct iv_view {
    float *data;
    int64_t rows, cols, ld;
} iv_view;

static inline iv_view iv_view_of(const iv_tensor *t)
{
    iv_view v = {(float *)t->data, iv_tensor_rows(t), iv_tensor_cols(t), iv_tensor_cols(t)};
    return v;
}
/* Columns [col, col + ncols) of t. */
static inline iv_view iv_view_cols(const iv_tensor *t, int64_t col, int64_t ncols)
{
    iv_view v = {(float *)t->data + col, iv_tensor_rows(t), ncols, iv_tensor_cols(t)};
    return v;
}

/* Attention over packed sequences: token rows of all sequences are
 * concatenated; sequence s owns rows [cu_seqlens[s], cu_seqlens[s+1]).
 * Scores only ever pair tokens of the same sequence. */
typedef struct iv_attn_args {
    iv_view q, k, v;          /* [T, n_heads*head_dim], [T, n_kv_heads*head_dim] x2 */
    iv_view out;              /* [T, n_heads*head_dim] */
    const int32_t *cu_seqlens; /* host array, n_seqs + 1 entries */
    int n_seqs;
    int n_heads, n_kv_heads, head_dim; /* GQA: head h reads kv head h / (n_heads / n_kv_heads) */
    float scale;              /* usually 1/sqrt(head_dim) */
    int causal;               /* key j visible to query i only when j <= i */
    int window_left;          /* -1: unlimited; else key j needs i - j <= window_left */
    int window_right;         /* -1: unlimited; else key j needs j - i <= window_right */
    const float *alibi_slopes; /* [n_heads] or NULL: adds -slope * |i - j| */
    /* Optional additive bias, per sequence a [n_heads, L, L] block starting at
     * bias + bias_offsets[s] (MPNet/T5 relative buckets, DeBERTa, ...). */
    const float *bias;
    const int64_t *bias_offsets;
    /* Optional [T] flags: 0 = this token is never attended to as a key
     * (ColBERT query-expansion [MASK]s); its own query row is still computed. */
    const uint8_t *key_mask;
    float softcap;            /* 0: none; else scores = softcap * tanh(scores / softcap) */
} iv_attn_args;

/* Rotary embedding applied in place to the heads of x (q or k). Rotates the
 * first rot_dim dims of each head. pos[t] is token t's position;
 * inv_freq[rot_dim/2] the frequencies (scaling variants are computed by the
 * caller, models/rope.c). interleaved=0: NeoX rotate_half pairs (i, i+rot/2);
 * interleaved=1: GPT-J pairs (2i, 2i+1). attn_factor scales cos and sin (YaRN). */
typedef struct iv_rope_args {
    iv_view x;
    int n_heads, head_dim, rot_dim;
    const int32_t *pos;
    const float *inv_freq;
    int interleaved;
    float attn_factor;
} iv_rope_args;

typedef struct iv_ops iv_ops;
struct iv_ops {
    const char *name;
    iv_device device;

    /* y = act(x W^T + b) (+ residual when non-NULL, added after act).
     * x [T, in], w [out, in] (PyTorch Linear layout), b [out] or NULL. */
    void (*linear)(const iv_ops *ops, iv_view y, iv_view x, const iv_tensor *w, const iv_tensor *b,
                   iv_act act, const float *residual_or_null);

    /* y = LayerNorm(x + r) over cols; r, w, b may be NULL (no affine). */
    void (*layer_norm)(const iv_ops *ops, iv_view y, iv_view x, const float *r, const iv_tensor *w,
                       const iv_tensor *b, float eps);
    /* y = x_hat * (w + w_offset) with x_hat = (x + r) / rms; w_offset is 1
     * for Gemma's zero-centred weights; w may be NULL (no scale). */
    void (*rms_norm)(const iv_ops *ops, iv_view y, iv_view x, const float *r, const iv_tensor *w,
                     float eps, float w_offset);
    /* Per-head RMSNorm (Qwen3/Gemma q_norm, k_norm): x viewed [T*n_heads, head_dim]. */
    void (*head_rms_norm)(const iv_ops *ops, iv_view x, int n_heads, int head_dim, const iv_tensor *w,
                          float eps, float w_offset);

    void (*act)(const iv_ops *ops, iv_view y, iv_view x, iv_act act);
    /* Gated unit: x [T, 2I] -> y [T, I]. act_on_first=1: y = act(x[:, :I]) * x[:, I:];
     * 0: y = x[:, :I] * act(x[:, I:]). */
    void (*glu)(const iv_ops *ops, iv_view y, iv_view x, iv_act act, int act_on_first);
    /* y = a + b elementwise. */
    void (*add)(const iv_ops *ops, iv_view y, iv_view a, iv_view b);
    /* y = x * s elementwise. */
    void (*scale)(const iv_ops *ops, iv_view y, iv_view x, float s);

    /* y[t] (+)= table[ids[t]]; accumulate=1 adds to y. ids must be in range
     * (checked by the caller against the vocabulary). */
    void (*embed)(const iv_ops *ops, iv_view y, const iv_tensor *table, const int32_t *ids,
                  int accumulate);

    void (*rope)(const iv_ops *ops, const iv_rope_args *a);
    void (*attention)(const iv_ops *ops, const iv_attn_args *a);
    /* Row-wise softmax in place. */
    void (*softmax)(const iv_ops *ops, iv_view x);
    /* Row-wise L2 normalisation in place (eps guards zero rows, as torch's F.normalize 1e-12). */
    void (*l2_normalize)(const iv_ops *ops, iv_view x);

    /* Row stride, in floats, for a scratch activation of `cols` columns
     * that a linear op will read (>= cols); NULL: cols. */
    int64_t (*act_stride)(int64_t cols);
};

/* ops->act_stride(cols), or cols when the table leaves it out. */
static inline int64_t iv_ops_act_stride(const iv_ops *ops, int64_t cols)
{
    return ops->act_stride ? ops->act_stride(cols) : cols;
}

/* The CPU table (ops/cpu). */
const iv_ops *iv_cpu_ops(void);

#endif
