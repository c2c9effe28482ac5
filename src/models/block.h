/* The one transformer block every family runs. A family describes its
 * quirks as data (iv_block_spec for the whole stack, iv_layer for each
 * layer's weights and per-layer switches); block.c turns that into op calls.
 *
 *   post-norm (BERT):   h = N1(x + O(attn(QKV(x))));  y = N2(h + D(act(U(h))))
 *   pre-norm (Llama):   h = x + O(attn(QKV(N1(x))));  y = h + D(act(U(N2(h))))
 *   sandwich (Gemma):   h = x + P1(O(attn(QKV(N1(x))))); y = h + P2(D(act(U(N2(h)))))
 *
 * The MLP is dense (plain or gated) or, per layer, a mixture of experts
 * (block_mlp.c).
 *
 * Optional per-layer extras: a norm over the full Q and K projections before
 * the head split (JinaCode), and for post-norm a second residual norm after
 * N1, h = N1b(x + N1(x + O(attn))) (JinaCode's layer_norm_1); for pre-norm
 * and sandwich layers a per-layer input sub-block after the MLP and a final
 * scale of the layer's output (EmbeddingGemma 2). A layer may have its own
 * head width and key/value head count.
 */
#ifndef IV_MODELS_BLOCK_H
#define IV_MODELS_BLOCK_H

#include "base/arena.h"
#include "models/batch.h"
#include "ops/ops.h"

/* Memory of one forward pass: host for small host-side tables (positions,
 * offsets), dev for activations and the device copies of per-batch arrays
 * (the op table's memory; on the CPU both may be one arena). */
typedef struct iv_fwd_mem {
    iv_arena *host, *dev;
} iv_fwd_mem;

typedef enum iv_norm_kind {
    IV_NORM_LAYER = 0, /* LayerNorm (bias optional) */
    IV_NORM_RMS,       /* RMSNorm x * w */
    IV_NORM_RMS_PLUS1, /* Gemma RMSNorm x * (1 + w) */
} iv_norm_kind;

typedef enum iv_norm_place { IV_NORM_POST = 0, IV_NORM_PRE, IV_NORM_SANDWICH } iv_norm_place;

typedef struct iv_norm {
    const iv_tensor *w, *b; /* NULL when absent: identity for the whole norm if both NULL and !present */
    int present;            /* 0: this norm is skipped (ModernBERT layer 0 attn_norm) */
} iv_norm;

typedef struct iv_block_spec {
    int hidden, n_heads, n_kv_heads, head_dim, intermediate;
    iv_norm_kind norm_kind;
    iv_norm_place norm_place;
    float norm_eps;
    int causal;
    float attn_scale;   /* 0: 1/sqrt(head_dim) */
    iv_act act;
    int gated;          /* MLP up projection is [2I, H] feeding a GLU */
    int act_on_first;   /* GLU: act(first half) * second (1) or first * act(second) (0) */
    int rope_interleaved;
    int rot_dim;        /* rotary dims per head; 0 = no rotary */
    /* Multi-axis rotary (iv_rope_args.freq_section): the axis of each of the
     * rot_dim / 2 frequencies (Qwen3-VL's interleaved mRoPE: time, height,
     * width; its vision tower: height, width), reading positions laid out
     * as iv_attn_extras.pos_axis_stride says; NULL: one axis. */
    const uint8_t *rope_freq_section;
    float qk_norm_eps;  /* per-head q/k RMSNorm eps (when q_norm/k_norm weights exist); the
                           norm follows norm_kind (Gemma: 1 + w) */
    /* Llama-4 / Ministral3 query scaling after RoPE: q *= 1 + beta * ln(1 + floor(pos / period)).
     * beta 0: off. */
    float q_pos_scale_beta;
    int q_pos_scale_period;
    /* GTE logn_attention_scale: q *= ln(L) / ln(logn_base) for a sequence of L
     * tokens, after rotary (0: off); logn_clip1 raises factors below 1 to 1. */
    int logn_base;
    int logn_clip1;
    /* Layers with a dynamic attention bias (iv_layer.dyn_bias) fill it for
     * groups of whole sequences of at most this many bias floats (or one
     * sequence, whatever its size); 0: 16M floats (64 MiB). */
    int64_t dyn_bias_group_floats;
    int v_norm;         /* per-head RMSNorm without weight on V, eps qk_norm_eps (EmbeddingGemma 2) */
    int ple_dim;        /* width P of each layer's per-layer input (iv_layer.ple_gate_w) */
} iv_block_spec;

/* A routed MLP: softmax over the router logits in float32, the top_k
 * experts per token (weights renormalised to sum 1 when norm_topk_prob), each
 * expert a gated MLP with the block's act and GLU order (Qwen3-MoE) or, with
 * plain_experts, down(act(up(x))) (Nomic BERT v2-MoE); the token's output is
 * the weighted sum over its experts, added in ascending expert order as
 * transformers does, plus out_bias when present (Nomic's experts.bias, added
 * once per token whatever the routing). */
typedef struct iv_moe {
    int n_experts, top_k, intermediate;
    int norm_topk_prob;
    int plain_experts;           /* 1: experts are ungated, up_w [I, H] */
    const iv_tensor *router_w;   /* [E, H], no bias */
    const iv_tensor **up_w;      /* [E] of [2I, H]: fused gate/up, halves in the block's GLU order
                                    (plain_experts: [I, H]) */
    const iv_tensor **down_w;    /* [E] of [H, I] */
    const iv_tensor *out_bias;   /* [H] or NULL */
    /* Gemma4's router reads RMS(x) without a weight (its scale vector and
     * hidden^-0.5 folded into router_w at load) of the layer's residual
     * stream, not the experts' input (iv_layer.moe_beside). */
    int router_unit_rms;
    /* A shared expert beside the routed ones (Qwen3.5-MoE): every token adds
     * sigmoid(x g^T) * down(act(gate(x)) * up(x)), g [1, H], after the routed
     * sum and before the residual; shared_intermediate 0: none. */
    int shared_intermediate;
    const iv_tensor *shared_up_w;   /* [2 Is, H], gate rows first */
    const iv_tensor *shared_down_w; /* [H, Is] */
    const iv_tensor *shared_gate_w; /* [1, H] */
} iv_moe;

/* A per-layer attention bias computed from the layer's own queries and keys
 * (DeBERTa's disentangled content->position / position->content terms),
 * which therefore cannot be a table built once per forward. The block calls
 * the layer's hook after QKV (and any q/k norm, RoPE or query scaling), for
 * groups of whole sequences at a time, then runs attention over that group
 * with the bias added to the scaled scores (plus the static extras bias, if
 * any). Hooks compute through ops, on device memory. */
typedef struct iv_dyn_bias_args {
    const iv_batch *batch;
    int seq_begin, seq_end;     /* sequences to fill: [seq_begin, seq_end) of batch */
    /* The group's cu_seqlens rebased to its first token (host, dev). */
    const int32_t *cu_seqlens, *cu_seqlens_dev;
    iv_view q, k;               /* all tokens' queries and keys as the attention op sees them */
    int n_heads, head_dim;
    /* Out: sequence s's FP32 [n_heads, L, L] block (query rows, key columns) in
     * device memory at bias + offsets[s - seq_begin] (offsets host, offsets_dev
     * the same values on the device). */
    float *bias;
    const int64_t *offsets, *offsets_dev;
    const iv_tensor *const *w;  /* the layer's dyn_bias_w */
    /* A slot kept for one stack forward and shared by all its layers (NULL at
     * the first call): per-batch tables and scratch the hook reuses, from
     * arena (host) and dev (device memory). */
    void **state;
    iv_arena *arena, *dev;
} iv_dyn_bias_args;
/* Returns 0, or -1 when out of memory. */
typedef int (*iv_dyn_bias_fn)(const iv_ops *ops, const void *ctx, const iv_dyn_bias_args *a);

/* A Gated DeltaNet token mixer (Qwen3.5's linear_attention layers) in
 * place of attention: P = x W_in^T split as [q | k | v] (the convolved
 * channels), z, b, a; c = act(causal_conv1d([q | k | v])) per sequence;
 * core = delta_rule(c's q, k, v, a, b) (ops.h, iv_delta_rule_args); then
 * the gated RMSNorm per value head, norm_w * rms(core) * silu(z), and the
 * layer's o_w (out_proj). */
typedef struct iv_deltanet {
    int n_k_heads, n_v_heads, k_head_dim, v_head_dim;
    const iv_tensor *in_w;            /* [2 Hk Dk + Hv Dv | Hv Dv | Hv | Hv, H]: qkv, z, b, a fused at load */
    const iv_tensor *conv_w, *conv_b; /* [2 Hk Dk + Hv Dv, K], bias or NULL */
    iv_act conv_act;
    const iv_tensor *a_log, *dt_bias; /* [Hv] */
    const iv_tensor *norm_w;          /* [Dv], x * w (not 1 + w) */
    float norm_eps;
} iv_deltanet;

typedef struct iv_layer {
    /* Attention: Q, K and V always fused at load into one [(Hq + 2Hkv) * D, H] projection. */
    const iv_tensor *qkv_w, *qkv_b;
    /* Or, qkv_w NULL, split in two (the last layer of models that compute
     * only the rows a head reads, iv_model_split_last_qkv): the queries
     * [Hq * D, H] and the rest of qkv_w's rows (keys, values, an output
     * gate), NULL on a kv_reuse layer. Biases alike, or NULL. */
    const iv_tensor *q_w, *q_b, *kv_w, *kv_b;
    const iv_tensor *o_w, *o_b;
    const iv_tensor *q_norm_w, *k_norm_w; /* per-head RMSNorm before RoPE, or NULL */
    iv_norm q_full_norm, k_full_norm; /* JinaCode: a norm over all of Q / K before the head split */
    iv_norm attn_norm;       /* N1 */
    iv_norm mlp_norm;        /* N2 */
    iv_norm post_attn_norm;  /* P1 (sandwich) */
    iv_norm post_mlp_norm;   /* P2 (sandwich) */
    iv_norm attn_outer_norm; /* post-norm only (JinaCode): h = norm(x + N1(x + O(attn))) */
    const iv_tensor *up_w, *up_b;     /* [I or 2I, H] */
    const iv_tensor *down_w, *down_b; /* [H, I] */
    int window_left, window_right;    /* -1: unlimited */
    const float *inv_freq;            /* rotary frequencies [rot_dim/2], or NULL */
    float rope_attn_factor;           /* scales cos/sin (YaRN); 0 means 1 */
    const iv_moe *moe;                /* routed MLP instead of up/down, or NULL */
    iv_dyn_bias_fn dyn_bias;          /* per-layer dynamic attention bias, or NULL */
    const void *dyn_bias_ctx;         /* its context (settings) */
    /* Weights the hook reads through ops (NULL when unused): row-major, kept
     * as they are on the CPU and prepared like the rest for a device. */
    const iv_tensor *dyn_bias_w[2];
    /* This layer's attention geometry where it differs from the spec's
     * (EmbeddingGemma 2's full layers: wider heads, fewer key/value heads);
     * 0: the spec's. */
    int head_dim, n_kv_heads, rot_dim;
    /* Per-layer input (EmbeddingGemma 2's PLE), a third residual sub-block
     * after the MLP: x += N(P(act(G(x)) * ple_l)) with ple_l this layer's
     * slice of iv_attn_extras.ple and the block's act; NULL: none. */
    const iv_tensor *ple_gate_w, *ple_proj_w; /* G [P, H], P [H, P] */
    iv_norm ple_norm;                         /* N */
    int ple_layer;                            /* which slice of the per-layer inputs is this layer's */
    /* Qwen3.5 / Qwen3-Next gated attention: qkv_w has a fourth block of
     * n_heads * head_dim rows (the per-head gate halves of q_proj), and the
     * attention output is multiplied by sigmoid(gate) before o_w. */
    int attn_out_gate;
    const iv_deltanet *deltanet;      /* a DeltaNet mixer instead of attention, or NULL */
    int scale_out;   /* x *= out_scale at the end of the layer (Gemma's layer_scalar) */
    float out_scale;
    /* This layer's MLP width where it differs from the spec's (Gemma4's
     * use_double_wide_mlp on KV-shared layers); 0: the spec's. */
    int intermediate;
    /* KV sharing (Gemma4's num_kv_shared_layers): a layer with kv_store = n
     * keeps its keys and values (after norms and RoPE) in slot n - 1 for the
     * rest of the stack; a layer with kv_reuse = n projects queries only
     * (qkv_w is [Hq * D, H]) and attends over slot n - 1's keys and values,
     * which must come from a layer of the same head geometry earlier in the
     * same iv_block_stack_forward call. 0: neither. */
    int kv_store, kv_reuse;
    /* Gemma4's mixture of experts beside the dense MLP (sandwich layers):
     * with r the residual stream after attention and h the dense MLP's
     * output, the MLP sub-block's output before post_mlp_norm is
     *   post_mlp_norm_1(h) + post_moe_norm(experts(pre_moe_norm(r)))
     * with experts routed on r (moe_beside->router_unit_rms). NULL: none. */
    const iv_moe *moe_beside;
    iv_norm post_mlp_norm_1, pre_moe_norm, post_moe_norm;
} iv_layer;

/* Prefix folding (models/fold.h) as the block sees it. The stack then runs
 * over the computed rows only (the batch's "sequences" are the trie's runs);
 * each layer's keys and values live in a buffer of n_cached + T rows: rows
 * [0, n_cached) come from cached prefixes, the rest are the computed rows
 * in order. Attention goes through ops->attention_rows: run r's queries
 * read the key rows kv_rows[kv_cu[r] .. kv_cu[r+1]). */
typedef struct iv_fold_kv {
    int64_t row0, len;            /* rows [row0, row0 + len) of the n_cached + T row space */
    const iv_view *k, *v;         /* [model layers] of [len, kv cols] device views */
} iv_fold_kv;

typedef struct iv_fold_attn {
    int64_t n_cached;
    const int32_t *kv_cu, *kv_cu_dev; /* host, dev [n_runs + 1] */
    const int32_t *kv_rows_dev;       /* dev */
    const int32_t *pos_dev;           /* dev [n_cached + T] absolute positions of every row */
    int max_keys;
    /* Cached prefixes whose keys and values are copied in (before attention),
     * and computed runs whose keys and values are copied out (to a new cache
     * entry), per layer, by the model's layer index. */
    int n_load, n_store;
    const iv_fold_kv *load, *store;
} iv_fold_attn;

/* Per-forward attention extras shared by all layers. */
typedef struct iv_attn_extras {
    int first_layer;              /* the model's index of layers[0] (taps name layers by it) */
    const float *alibi_slopes;    /* host */
    const float *bias;            /* dev FP32 bias blocks (iv_attn_args.bias) */
    const int64_t *bias_offsets;  /* host */
    const int64_t *bias_offsets_dev;
    const int32_t *positions;     /* host: rotary positions per token */
    const int32_t *positions_dev; /* the same on the device */
    /* With spec.rope_freq_section: axis a of token t is at positions[a *
     * pos_axis_stride + t] (0: every axis reads the token's one position). */
    int64_t pos_axis_stride;
    /* [n_seqs][rot_dim / 2] rotary frequencies chosen per sequence from its
     * length (dynamic NTK, LongRoPE), used instead of the layers' inv_freq;
     * NULL for most models. */
    const float *seq_inv_freq;
    /* [T, n_layers * ple_dim] per-layer inputs (layers with ple_gate_w read
     * their ple_dim columns at layer * ple_dim); data NULL when none. */
    iv_view ple;
    /* Prefix folding (NULL: the packed batch as it is). */
    const iv_fold_attn *fold;
    /* The rows the head reads (NULL: every row): host and dev [n_seqs], the
     * batch row of each sequence's one token that its head reads (CLS or
     * last-token pooling, a classifier reading one token). The last layer of
     * the call then computes keys and values for every row but queries'
     * attention, the output projection, residual, norms and MLP only for
     * these rows, and leaves their outputs in rows [0, n_seqs) of x. Only
     * for layers iv_block_head_rows_blocker accepts, and no fold. */
    const int32_t *head_rows, *head_rows_dev;
} iv_attn_extras;

/* Why layer L cannot compute only the head's rows (iv_attn_extras.head_rows),
 * or NULL when it can. */
const char *iv_block_head_rows_blocker(const iv_block_spec *spec, const iv_layer *L);

/* Runs layers [0, n_layers) over x [T, hidden] (dense rows) in place. The
 * batch's device arrays must be filled (iv_model_forward does). Scratch
 * comes from mem. */
int iv_block_stack_forward(const iv_ops *ops, const iv_block_spec *spec, const iv_layer *layers,
                           int n_layers, const iv_batch *batch, const iv_attn_extras *extras, iv_view x,
                           const iv_fwd_mem *mem);

/* Applies a norm of spec's kind: y = norm(x + r), r rows x.ld apart or NULL. */
void iv_block_norm(const iv_ops *ops, const iv_block_spec *spec, const iv_norm *n, iv_view y, iv_view x,
                   const void *r);

#endif
