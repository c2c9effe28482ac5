/* The Qwen3-VL vision tower (transformers' Qwen3VLVisionModel) and the
 * mixed text + image forward of Qwen3VLModel.
 *
 * Tower, per packed batch of images (each a [t * h * w, C * tp * p * p]
 * block of pixel_values patches, in the 2x2 merge-block order the Qwen3-VL
 * image processor emits):
 *   patch embedding  Conv3d with kernel = stride = (tp, p, p): one linear
 *   + positions      the learned [side * side, Hv] grid resampled
 *                    bilinearly (align_corners) to the image's (h, w) grid,
 *                    a 4-tap weighted gather (ops.embed_bag)
 *   blocks           the shared pre-norm block: LayerNorm (eps 1e-6), fused
 *                    QKV with bias, 2-D rotary (head_dim / 4 frequencies on
 *                    the patch row, then the same on its column, NeoX
 *                    halves), bidirectional attention block-diagonal per
 *                    frame (cu_seqlens), MLP fc1 -> act -> fc2
 *   DeepStack        after the blocks listed in deepstack_visual_indexes, a
 *                    merger with its LayerNorm over the 4 * Hv merged rows
 *   merger           LayerNorm(Hv), 2x2 rows -> one 4 * Hv row, fc1, GELU
 *                    (erf), fc2 to the text width
 *
 * Mixed forward (Qwen3VLModel.forward): each image's merged rows replace
 * the embeddings of its image pad tokens; the text model runs with the
 * three-axis positions of get_rope_index (interleaved mRoPE), and DeepStack
 * feature k is added to the image token rows after decoder layer k.
 *
 * Qwen3.5 (Qwen3_5Model) uses the same tower without DeepStack, the same
 * get_rope_index for images, and runs its hybrid text model (Gated DeltaNet
 * layers take no positions) over the same injected rows: its family file
 * loads the tower through iv_qwen3vl_mm_load with deepstack 0, and the
 * mixed forward below is the same function. */
#ifndef IV_MODELS_VISION_QWEN3VL_H
#define IV_MODELS_VISION_QWEN3VL_H

#include "models/model.h"
#include "models/vision.h"

/* LayerNorm (eps 1e-6) -> fc1 -> GELU -> fc2 over 2x2-merged rows. */
typedef struct iv_vision_merger {
    iv_norm norm;
    int postshuffle;   /* 1: the norm runs over the merged 4 * Hv rows (DeepStack), 0: over Hv */
    const iv_tensor *fc1_w, *fc1_b, *fc2_w, *fc2_b;
} iv_vision_merger;

#define IV_QWEN3VL_MAX_DEEPSTACK 16

typedef struct iv_qwen3vl_vision {
    int depth, hidden, n_heads, head_dim, in_channels, patch, temporal_patch, merge, out_hidden;
    int side;                          /* the learned position grid is side x side */
    int64_t patch_dim;                 /* in_channels * temporal_patch * patch * patch */
    const iv_tensor *patch_w, *patch_b; /* [Hv, patch_dim], [Hv] */
    const iv_tensor *pos_embed;        /* [side * side, Hv] */
    iv_block_spec block;
    iv_layer *layers;                  /* [depth] */
    float *inv_freq;                   /* [head_dim / 2]: the head_dim / 4 axial frequencies, twice */
    uint8_t *freq_section;             /* [head_dim / 2]: 0 (row) for the first half, 1 (column) after */
    iv_vision_merger merger;
    int n_deepstack;
    int deepstack_layers[IV_QWEN3VL_MAX_DEEPSTACK]; /* deepstack_visual_indexes as listed */
    iv_vision_merger deepstack[IV_QWEN3VL_MAX_DEEPSTACK];
} iv_qwen3vl_vision;

/* Images come as iv_image_input (models/vision.h): pixel_values as the
 * Qwen3-VL processor returns them, with its image_grid_thw row; a run is
 * grid_t * grid_h * grid_w / merge^2 image pad tokens. */

/* Reads vision_config and the tower's tensors (prefix "model.visual.",
 * "visual." or "vlm.model.visual."); *out NULL when the checkpoint holds no
 * visual tensors (a text-only export). A tower that is present but
 * incomplete, or uses switches not implemented, is an error. deepstack 0:
 * the tower has no DeepStack mergers whatever vision_config says (Qwen3.5's
 * Qwen3_5VisionModel never reads deepstack_visual_indexes). */
int iv_qwen3vl_vision_load(iv_model *m, iv_qwen3vl_vision **out, int deepstack, iv_err *err);

/* The multimodal parts of a Qwen3-VL-style checkpoint, after its text
 * model's rotary table: the interleaved mRoPE of the text model
 * (recomposition_frequencies: frequency i < rot_dim / 2 turns with the
 * height position when i % 3 == 1 and i < 3 * s_h, with the width position
 * when i % 3 == 2 and i < 3 * s_w, else with time; mrope_section [s_t, s_h,
 * s_w] from rope_parameters / rope_scaling, else default_sections), the
 * image token id (config.json's image_token_id, else default_image_token)
 * and the vision tower (deepstack as in iv_qwen3vl_vision_load). Qwen3-VL:
 * sections [24, 20, 20], DeepStack; Qwen3.5: [11, 11, 10] over its partial
 * rotary dims, no DeepStack. */
int iv_qwen3vl_mm_load(iv_model *m, const int default_sections[3], int default_image_token, int deepstack,
                       iv_err *err);

/* Merged tokens of one image: grid_t * grid_h * grid_w / merge^2. */
int64_t iv_qwen3vl_image_tokens(const iv_qwen3vl_vision *v, const iv_image_input *img);

/* Qwen3VLProcessor's expansion (iv_model.image_token_run): the chat
 * template's single <|image_pad|> becomes grid_t * grid_h * grid_w / merge^2
 * of them (the <|vision_start|> / <|vision_end|> around it are the
 * template's); feature rows start at the run's first token. */
int64_t iv_qwen3vl_image_token_run(const iv_model *m, const iv_image_input *img, int32_t *out,
                                   int64_t *feature_start);

/* Runs the tower over n images packed into one batch (attention never
 * crosses images or frames). *merged receives [sum of image tokens,
 * out_hidden] rows, image after image; deepstack[k] (k < n_deepstack, the
 * order the layers come in) the same rows of DeepStack feature k. Device
 * memory from mem. */
int iv_qwen3vl_vision_forward(const iv_model *m, const iv_image_input *imgs, int n, const iv_fwd_mem *mem,
                              iv_view *merged, iv_view *deepstack, iv_err *err);

/* Qwen3VLModel.forward over a packed, uploaded batch (iv_model_upload_batch)
 * whose sequence s has images[s] (images NULL, or images[s].n 0: text only).
 * Every token with the config's image_token_id must lie in the span of one
 * of its sequence's images, and each span must hold exactly its image's
 * tokens. *hidden: [T, hidden] final states (after the final norm). */
int iv_qwen3vl_forward(const iv_model *m, const iv_batch *b, const iv_seq_images *images, const iv_fwd_mem *mem,
                       iv_view *hidden, iv_err *err);

/* get_rope_index for one sequence of len tokens: pos[a * stride + t] for
 * axes a = time, height, width. Image spans as in iv_qwen3vl_forward. */
void iv_qwen3vl_rope_index(const iv_qwen3vl_vision *v, int len, const iv_seq_images *images, int32_t *pos,
                           int64_t stride);

#endif
