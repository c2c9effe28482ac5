/* The Gemma4 vision tower (transformers' Gemma4VisionModel), its
 * multimodal embedder (Gemma4MultimodalEmbedder) and the mixed text + image
 * forward of Gemma4Model.
 *
 * Tower, per packed batch of images (each iv_image_input.pixel_values the
 * processor's patch rows [grid_h * grid_w, 3 * p * p], raster order, each
 * row (row, column, channel) in [0, 1]: iv_gemma4_patchify's layout):
 *   patch_embedder  input_proj(2 (x - 0.5)), no bias, plus the learned
 *                   position tables: table[0][column] + table[1][row]
 *   encoder layers  the shared sandwich block: RMSNorm x * w around
 *                   attention and MLP, q_norm / k_norm (x * w) and a
 *                   weightless v_norm per head, attention scale 1,
 *                   bidirectional within each image (cu_seqlens), GQA,
 *                   gated MLP down(act(gate) * up) (hidden_activation)
 *   2-D rotary      apply_multidimensional_rope: the head's first half
 *                   turns with the patch column, the second with its row,
 *                   each half in NeoX halves with the head_dim / 4
 *                   frequencies 1 / theta^(4i / head_dim). Loading permutes
 *                   the q / k rows (and q_norm / k_norm) so that this is
 *                   the rope op's whole-head NeoX over per-frequency axes
 *                   (Qwen3-VL's vision layout); q . k is unchanged
 *   pooler          each k x k block of patches (k = pooling_kernel_size)
 *                   averaged into one soft token, blocks in raster order,
 *                   times sqrt(hidden). The patches go through the tower in
 *                   block order (attention within an image sees every
 *                   patch, so only summation order changes) and the pool op
 *                   averages k^2 consecutive rows
 * Embedder: weightless RMSNorm (vision rms_norm_eps), embedding_projection
 * to the text width, no bias.
 *
 * Mixed forward (Gemma4Model.forward): each image is the run <boi>, one
 * image token (image_token_id) per soft token, <eoi>, as Gemma4Processor
 * writes it; the image's token_offset is its first image token. Its soft
 * tokens replace those tokens' embeddings (before the per-layer inputs are
 * computed: the PLE projection reads the merged rows, the PLE token table
 * the image tokens embedded as the pad token, as transformers does).
 * Positions stay 1-D. With text_config.use_bidirectional_attention
 * "vision", sliding layers let image tokens see their whole run of image
 * tokens (create_masks_for_vision_model; full layers stay causal).
 *
 * Not implemented, refused naming the field: use_clipped_linears,
 * standardize, attention_bias, a rope type other than axial. */
#ifndef IV_MODELS_VISION_GEMMA4_H
#define IV_MODELS_VISION_GEMMA4_H

#include "models/model.h"
#include "models/vision.h"

typedef struct iv_gemma4_vision {
    int depth, hidden, n_heads, n_kv_heads, head_dim, patch, pool, pos_size, out_hidden;
    int64_t patch_dim;          /* 3 * patch * patch */
    const iv_tensor *patch_w;   /* [Hv, patch_dim] */
    const iv_tensor *pos_table; /* [2 * pos_size, Hv]: column rows, then row rows */
    iv_block_spec block;
    iv_layer *layers;           /* [depth] */
    float *inv_freq;            /* [head_dim / 2]: the quarter frequencies twice */
    uint8_t *freq_section;      /* [head_dim / 2]: 0 (column) then 1 (row) */
    float root_hidden;          /* sqrt(Hv) as the pooler scales, float32 */
    float embed_eps;            /* the embedder's weightless RMSNorm */
    const iv_tensor *proj_w;    /* [text hidden, Hv] */
    int boi_id, eoi_id;         /* config.json boi_token_id / eoi_token_id */
    int bidirectional_vision;   /* text_config.use_bidirectional_attention == "vision" */
    /* Gemma4 unified (vision_gemma4_unified.h): no tower; image rows are
     * whole model patches (pool x pool patches merged by the processor),
     * one soft token each, and pos_size is mm_posemb_size. */
    int merged;
    struct iv_gemma4_unified_embedder *unified;
} iv_gemma4_vision;

/* Reads vision_config (model_type gemma4_vision) and the tower's and
 * embedder's tensors (model.vision_tower., model.embed_vision.); *out NULL
 * when config.json has no vision_config. A tower present but incomplete, or
 * with switches not implemented, is an error naming the field. Sets the
 * model's image hook (iv_gemma4_model_token_run), image_token_id and
 * image_placeholder_id (the image token: Gemma4's chat template writes one
 * per image). */
int iv_gemma4_vision_load(iv_model *m, iv_gemma4_vision **out, iv_err *err);

/* vision_config.key as an integer in [1, max] (def when absent), else an
 * IV_E_FORMAT error naming it. */
int iv_gemma4_vision_int(const cJSON *vc, const char *key, int64_t def, int64_t max, int *out, iv_err *err);

/* Soft tokens of one image: grid_h * grid_w / k^2 (unified: grid_h * grid_w). */
int64_t iv_gemma4_image_tokens(const iv_gemma4_vision *v, const iv_image_input *img);

/* iv_model.image_token_run for Gemma4: <boi>, the image tokens, <eoi>;
 * *feature_start 1. */
int64_t iv_gemma4_model_token_run(const iv_model *m, const iv_image_input *img, int32_t *out,
                                  int64_t *feature_start);

/* The tower alone over n images packed in one batch: *states [sum of soft
 * tokens, Hv] (the pooled, scaled tower output, image after image); with
 * features non-NULL also the embedder's output [sum of soft tokens, text
 * hidden]. */
int iv_gemma4_vision_forward(const iv_model *m, const iv_image_input *imgs, int n, const iv_fwd_mem *mem,
                             iv_view *states, iv_view *features, iv_err *err);

/* The image part of a Gemma4 multimodal forward: checks each sequence's
 * image runs, runs the tower and embedder over every image of the batch
 * and fills *vi (spans, soft tokens, and the "vision" masks when the
 * checkpoint has them); vi->n_spans 0 when the batch has no images.
 * iv_model_forward_media merges it with the audio clips' rows. */
int iv_gemma4_image_inject(const iv_model *m, const iv_batch *b, const iv_seq_images *images, const iv_fwd_mem *mem,
                           iv_visual_inject *vi, iv_err *err);

/* Gemma4Model.forward over a packed, uploaded batch whose sequence s has
 * images[s]: each image's soft tokens fill the image tokens from its
 * token_offset on; every image token of a sequence must belong to one of
 * its images, runs in order. *hidden: [T, hidden] final states. */
int iv_gemma4_forward(const iv_model *m, const iv_batch *b, const iv_seq_images *images, const iv_fwd_mem *mem,
                      iv_view *hidden, iv_err *err);

#endif
