/* The Gemma4 audio tower (transformers' Gemma4AudioModel) and
 * EmbeddingGemma2's audio embedder (EmbeddingGemma2MultimodalEmbedder):
 * log-mel features of one clip (src/audio/gemma4_features.c) in, one row
 * of text-width soft tokens per 4 mel frames out. docs/audio.md has the
 * maths; in short, per clip (its valid frames only, so no masks):
 *   subsampler   twice: Conv2d 3x3 stride 2 pad 1 (ops.conv2d, the mel
 *                spectrogram as a 1-channel image), LayerNorm over
 *                channels (no bias), ReLU; then (time, mel, channel) rows
 *                -> input_proj_linear
 *   layers       feed_forward1, attention block, lconv1d, feed_forward2,
 *                clamp, norm_out; attention is causal over itself and
 *                context_left - 2 frames back, logits cap * tanh((q.k +
 *                q.R[t - s]) / cap) with R the relative_k_proj of sinusoids
 *                (computed at load), q scaled per dim (ops.mul_cols)
 *   output_proj  with bias, to output_proj_dims
 *   embed_audio  RMSNorm without weight, embedding_projection (no bias)
 * Every ClippableLinear clamps its input and output to the checkpoint's
 * bounds (skipped where they are infinite). */
#ifndef IV_MODELS_AUDIO_GEMMA4_H
#define IV_MODELS_AUDIO_GEMMA4_H

#include "models/model.h"

/* One clip as the feature extractor left it: features host [n_frames,
 * n_mels], only the valid frames (a prefix of the extractor's output). */
typedef struct iv_audio_input {
    const float *features;
    int n_frames, n_mels;
    /* Mixed forward only: where, within its sequence, the clip's run of
     * soft tokens starts. */
    int token_offset;
} iv_audio_input;

typedef struct iv_clip_linear {
    const iv_tensor *w;
    float in_lo, in_hi, out_lo, out_hi; /* +-inf when not clipped */
} iv_clip_linear;

typedef struct iv_g4a_ffw {
    const iv_tensor *pre_norm, *post_norm;
    iv_clip_linear up, down;
} iv_g4a_ffw;

typedef struct iv_g4a_layer {
    iv_g4a_ffw ffw1, ffw2;
    const iv_tensor *norm_pre_attn, *norm_post_attn, *norm_out;
    iv_clip_linear q, k, v, post;
    const iv_tensor *q_scale;  /* [head_dim]: head_dim^-0.5 / ln 2 * softplus(per_dim_scale) */
    const iv_tensor **rel_k;   /* [n_heads] of [n_pos, head_dim]: relative_k_proj(sinusoid(d)), d < n_pos */
    const iv_tensor *lconv_pre_norm, *conv_norm, *conv_w; /* conv_w [hidden, kernel] */
    iv_clip_linear lin_start, lin_end;
} iv_g4a_layer;

typedef struct iv_gemma4_audio {
    int hidden, n_heads, head_dim, n_layers, n_mels, ch0, ch1, w1, w2, conv_kernel;
    int n_pos;        /* relative distances with a table row: 0 .. n_pos - 1 */
    int window_left;  /* keys t - window_left .. t */
    float eps, grad_clip, residual_weight, softcap, k_scale;
    const iv_tensor *conv0_w, *norm0_w, *conv1_w, *norm1_w, *proj_w;
    iv_g4a_layer *layers;
    int out_dims;
    const iv_tensor *out_w, *out_b;
    int text_hidden;
    int audio_token_id; /* config.json's audio_token_id: the placeholder soft tokens replace */
    float embed_eps;
    const iv_tensor *embed_w; /* [text_hidden, out_dims] */
    /* Gemma4 unified (audio_gemma4_unified.c): no tower; each soft token is
     * one frame of raw_frame samples (the features' width, n_mels and
     * out_dims alike) through embed_audio alone. 0: the tower above. */
    int raw_frame;
} iv_gemma4_audio;

/* Reads audio_config and the tower's tensors ("audio_tower." and
 * "embed_audio.", optionally under "model."); *out NULL when config.json has
 * no audio_config or the checkpoint no audio_tower tensors (a text-only
 * export). Switches not implemented are IV_E_UNSUPPORTED naming the
 * field. */
int iv_gemma4_audio_load(iv_model *m, iv_gemma4_audio **out, iv_err *err);

/* Gemma4 unified's audio_config (model_type gemma4_unified_audio) and its
 * embed_audio.embedding_projection; *out NULL when the checkpoint has no
 * such tensor (a text-only export). Called by iv_gemma4_audio_load. */
int iv_gemma4_unified_audio_load(iv_model *m, const cJSON *ac, iv_gemma4_audio **out, iv_err *err);
/* Its forward: RMSNorm without weight, embedding_projection, per frame. */
int iv_gemma4_unified_audio_forward(const iv_model *m, const iv_gemma4_audio *a, const iv_audio_input *clips, int n,
                                    const iv_fwd_mem *mem, iv_view *tokens, iv_err *err);

/* Soft tokens of a clip of n_frames feature rows: the tower's subsampled
 * count (iv_gemma4_audio_num_tokens), or one per frame (raw_frame). */
int iv_gemma4_audio_tokens(const iv_gemma4_audio *a, int n_frames);

/* Whether a table has every op the tower runs (CUDA has not yet). */
int iv_gemma4_audio_table_ok(const iv_ops *ops);
/* Replaces the tower's weights by ops' prepared copies (iv_model_to_device);
 * a no-op on host-visible tables and on tables without the tower's ops,
 * whose forward then refuses audio by name. */
int iv_gemma4_audio_to_device(iv_gemma4_audio *a, const iv_ops *ops, iv_err *err);

/* Optional per-stage observer: "subsample", "layer<i>", "tower",
 * "soft_tokens", each [N, width] rows of all clips in order. */
typedef void (*iv_audio_tap_fn)(void *ctx, const char *stage, iv_view v);

/* Runs the tower and embedder over n clips (each at least one valid frame);
 * *tokens [sum N_i, text_hidden] in mem->dev, clip i's
 * iv_gemma4_audio_num_tokens(n_frames) rows in order. */
int iv_gemma4_audio_forward(const iv_model *m, const iv_gemma4_audio *a, const iv_audio_input *clips, int n,
                            const iv_fwd_mem *mem, iv_view *tokens, iv_audio_tap_fn tap, void *tap_ctx,
                            iv_err *err);

/* The clips of one sequence, in token order. */
typedef struct iv_seq_audios {
    int n;
    const iv_audio_input *clips;
} iv_seq_audios;

/* The audio part of that forward: checks each sequence's clips against
 * its audio tokens, runs the tower over every clip and fills *vi (spans
 * and soft tokens); vi->n_spans 0 when no sequence has audio.
 * iv_model_forward_media merges it with the images' rows. */
int iv_gemma4_audio_inject(const iv_model *m, const iv_batch *b, const iv_seq_audios *audios, const iv_fwd_mem *mem,
                           iv_visual_inject *vi, iv_err *err);

/* EmbeddingGemma2Model.forward with audio: the text model over a packed,
 * uploaded batch whose sequence s has audios[s] (NULL or n 0: text only).
 * Each clip's iv_gemma4_audio_num_tokens(n_frames) soft tokens replace the
 * embeddings of its run of audio_token_id tokens starting at token_offset
 * (which must hold exactly that many; no other audio tokens in the
 * sequence); the per-layer inputs are computed from the merged embeddings,
 * as transformers does. IV_E_UNSUPPORTED when the model has no audio tower. */
int iv_model_forward_audio(const iv_model *m, const iv_batch *b, const iv_seq_audios *audios,
                           const iv_fwd_mem *mem, iv_view *hidden, iv_err *err);

#endif
