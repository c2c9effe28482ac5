/* The Gemma4-style text stack, shared by Gemma4 text (family_gemma4.c:
 * gemma4_text and the text backbone of gemma4) and EmbeddingGemma 2
 * (family_embedding_gemma2.c), which transformers builds from the same
 * pieces. What they share:
 *   - embeddings x sqrt(hidden); RMSNorm x * w (weights around 1, not
 *     Gemma3's 1 + w), sandwich norms around attention and MLP; GeGLU with
 *     hidden_activation;
 *   - per-head q_norm / k_norm and a weightless v_norm on V; attention
 *     scale 1 (the norms carry it);
 *   - layer_types sliding / full (the last layer always full); full layers
 *     with their own head width and key/value head count (per_layer_config,
 *     or global_head_dim / num_global_key_value_heads), each kind its own
 *     rotary table from rope_parameters[kind] over its whole head
 *     ("proportional": only the first partial_rotary_factor turns);
 *   - per-layer inputs (PLE): ple = RMSNorm_P(reshape(e W^T hidden^-0.5,
 *     [T, layers, P])), for Gemma4 then (ple + table[id] sqrt(P)) 2^-0.5;
 *     layer l ends with x += N(proj(act(gate(x)) * ple_l)), x *= layer_scalar.
 * Gemma4 alone (the "quirks as data" of iv_gemma4_text_desc.encoder == 0):
 * causal unless use_bidirectional_attention is "all" (then sliding layers
 * see |i - j| <= sliding_window / 2 + 1, inclusive), attention_k_eq_v on full layers,
 * KV sharing over the last num_kv_shared_layers layers, use_double_wide_mlp,
 * and the routed experts beside the dense MLP (enable_moe_block).
 * EmbeddingGemma 2 is bidirectional with sliding radius |i - j| <=
 * sliding_window. */
#ifndef IV_MODELS_GEMMA4_TEXT_H
#define IV_MODELS_GEMMA4_TEXT_H

#include "models/model.h"

typedef struct iv_gemma4_text_desc {
    const char *const *archs;    /* accepted architectures, NULL-terminated */
    const char *const *prefixes; /* backbone prefixes to try, NULL-terminated */
    int encoder;                 /* 1: EmbeddingGemma 2 (see above); 0: Gemma4 */
    const char *ple_prefix;      /* the PLE projection's module: "ple." (EmbeddingGemma 2) or "" */
    const char *ple_block;       /* each layer's PLE sub-block: "ple_block." or "" */
    int64_t default_ple_dim;     /* hidden_size_per_layer_input when absent (512 / 256) */
    int ple_token_table;         /* Gemma4's embed_tokens_per_layer and 2^-0.5 mix */
    /* Full layers' rotary type when config.json has no rope_parameters. */
    const char *full_rope_default;
    /* num_global_key_value_heads when neither it nor per_layer_config is given (0: the
     * config's num_key_value_heads). */
    int default_global_kv_heads;
} iv_gemma4_text_desc;

/* Fills m->embed, m->block, m->layers, m->final_norm and the PLE tables;
 * rejects switches it does not implement with IV_E_UNSUPPORTED naming them. */
int iv_gemma4_text_load(iv_model *m, const iv_gemma4_text_desc *d, iv_err *err);

/* Gemma4Model.forward (and EmbeddingGemma2Model's) embeds its image / video
 * / audio placeholder ids (config.json image_token_id, video_token_id,
 * audio_token_id) as text_config.pad_token_id, in the embeddings and the
 * per-layer token table, before any media is scattered in: on text such ids
 * look like padding. Sets m->embed.as_pad for the ids inside the
 * vocabulary. The multimodal model types only (gemma4, embedding_gemma2). */
int iv_gemma4_placeholders_as_pad(iv_model *m, iv_err *err);

#endif
