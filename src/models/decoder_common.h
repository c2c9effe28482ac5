/* What the pre-norm decoder families (Llama, Mistral/Ministral3, Qwen2/3,
 * Qwen3-MoE, Gemma3) share: config keys, the Llama tensor names
 * (embed_tokens, layers.N.self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj,
 * input_layernorm, ..., norm), Q/K/V and gate/up fused at load, rotary
 * tables, sliding windows and the generic `score` heads. Family files pass
 * their quirks as data and adjust the result. */
#ifndef IV_MODELS_DECODER_COMMON_H
#define IV_MODELS_DECODER_COMMON_H

#include "models/model.h"
#include "models/rope.h"

typedef struct iv_decoder_desc {
    const char *const *archs;   /* accepted architectures, NULL-terminated */
    iv_norm_kind norm_kind;     /* IV_NORM_RMS, or IV_NORM_RMS_PLUS1 (Gemma) */
    int sandwich;               /* Gemma: post_attention_layernorm on the attention output,
                                   pre_/post_feedforward_layernorm around the MLP */
    int qkv_bias;               /* q/k/v biased whatever attention_bias says (Qwen2) */
    int qk_norm;                /* self_attn.q_norm / k_norm per head (Qwen3, Gemma3) */
    const char *act_key;        /* config key of the MLP activation (NULL: "hidden_act") */
    int default_head_dim;       /* head_dim when config.json has no such key (the config class's
                                   default: Qwen3, Ministral3 128, Gemma3 256); 0: hidden / heads */
    /* Routed MLPs (Qwen3-MoE): moe_layers[l] != 0 marks layer l; the other fields
     * are copied into every routed layer. NULL: all layers dense. */
    const unsigned char *moe_layers;
    iv_moe moe;
    /* Per-layer head width and key/value head count (NULL: the config's for
     * every layer); layers that differ from the config get their own
     * iv_layer.head_dim / n_kv_heads. */
    const int *layer_head_dim, *layer_kv_heads;
    /* Backbone prefixes to try, NULL-terminated (NULL: "model.", then none). */
    const char *const *prefixes;
    int own_heads;              /* the family loads its task heads itself (no `score` heads) */
    int partial_rotary;         /* partial_rotary_factor is the family's to apply (its rope call) */
    /* Gated attention (Qwen3.5, Qwen3-Next): q_proj is [heads * 2 * head_dim, H],
     * each head's rows [q | gate]; the gates become iv_layer.attn_out_gate. */
    int attn_out_gate;
    /* Layers whose token mixer the family loads itself (nonzero entries: no
     * self_attn.* tensors are read); NULL: every layer has attention. */
    const unsigned char *own_mixer;
    /* Gemma4 (NULL: none): layers whose attention has no k/v projections of
     * its own (KV sharing: q_proj, q_norm and o_proj only; the family sets
     * iv_layer.kv_reuse), layers whose values are the k_proj output
     * (attention_k_eq_v: no v_proj; qkv_w repeats k_proj's rows), and
     * per-layer MLP widths (use_double_wide_mlp). */
    const unsigned char *kv_reuse_layers, *k_eq_v_layers;
    const int *layer_intermediate;
} iv_decoder_desc;

/* Fills m->embed, m->block, m->layers, m->final_norm and, unless
 * d->own_heads, the heads of the architecture (sequence classification:
 * `score` without bias on the last token; token classification: `score`
 * with bias). Causal unless config.json
 * says "is_causal": false (transformers' bidirectional switch). Rotary tables
 * and windows are left to iv_decoder_rope / iv_decoder_windows. */
int iv_decoder_load(iv_model *m, const iv_decoder_desc *d, iv_err *err);

/* Per-layer attention kind from config "layer_types" (full_attention |
 * sliding_attention): sliding[l] = 1 for sliding layers. Returns 0 with
 * *found = 0 when the config has no layer_types. */
int iv_decoder_layer_types(const iv_model *m, unsigned char *sliding, int *found, iv_err *err);

/* How a sliding window of size W limits key j for query i. */
typedef enum iv_window_rule {
    IV_WINDOW_CAUSAL = 0,  /* transformers' sliding causal mask: i - W < j <= i */
    IV_WINDOW_SYMMETRIC,   /* is_causal false: |i - j| <= W */
    IV_WINDOW_HALF,        /* Gemma3 use_bidirectional_attention: |i - j| <= W / 2 */
} iv_window_rule;

/* Applies window W with rule to the layers flagged in sliding (NULL: all). */
void iv_decoder_windows(iv_model *m, const unsigned char *sliding, int window, iv_window_rule rule);

/* Rotary tables for the layers flagged in which (NULL: all) from p. A rope
 * whose frequencies depend on the sequence length must cover every layer; it
 * becomes m->seq_rope, and dynamic NTK raises the length limit to
 * max_position_embeddings * factor. */
int iv_decoder_rope(iv_model *m, const iv_rope_params *p, const unsigned char *which, iv_err *err);

/* Rotary tables for the layers flagged in which from transformers 5's
 * per-layer-type form, rope_parameters[kind] (kind "full_attention",
 * "sliding_attention"), rotating rot_dim dims, default_theta when the entry
 * names none. A config without rope_parameters gets default_theta and any
 * top-level rope keys; one whose rope_parameters lacks kind is an error. */
int iv_decoder_kind_rope(iv_model *m, const char *kind, const unsigned char *which, int rot_dim, double default_theta,
                         iv_err *err);

/* Scales a head's last linear by 1 / temperature (a model-owned copy). */
int iv_decoder_head_temperature(iv_model *m, iv_head *h, double temperature, iv_err *err);

#endif
