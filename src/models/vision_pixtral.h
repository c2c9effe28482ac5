/* The Pixtral vision tower (transformers' PixtralVisionModel), Mistral3's
 * multimodal projector, and the mixed text + image forward of Mistral3Model.
 *
 * Tower, per packed batch of images (each a [h * w, C * p * p] block of
 * patches in merge-block order, iv_pixtral_patchify's layout):
 *   patch_conv   Conv2d, kernel = stride = p, no bias: one linear
 *   ln_pre       RMSNorm (eps 1e-5)
 *   layers       the shared pre-norm block: RMSNorm (eps 1e-5), q/k/v/o
 *                without bias, bidirectional attention block-diagonal per
 *                image (cu_seqlens), gated MLP down(act(gate) * up)
 *   2-D rotary   head_dim / 2 frequencies f_k = 1 / theta^(2k / head_dim);
 *                the even ones turn with the patch's row, the odd ones
 *                with its column, laid out [row: f_0, f_2, ...; column:
 *                f_1, f_3, ...] and rotated in NeoX halves over the whole
 *                head (compute_axial_rope_parameters,
 *                recomposition_frequencies)
 * Projector (Mistral3MultiModalProjector), on the last layer's states
 * (vision_feature_layer -1):
 *   norm         RMSNorm(Hv) with the text model's rms_norm_eps
 *   patch merger each s x s block of patches (s = spatial_merge_size) is
 *                one row of s^2 * Hv (unfold: channel-major, (c, ki, kj));
 *                merging_layer Linear(s^2 Hv -> Hv), no bias. The block's
 *                rows are consecutive in merge-block order, so the unfold
 *                is a view once merging_layer's columns are permuted at
 *                load to (ki, kj, c)
 *   linear_1 -> act (projector_hidden_act) -> linear_2, biases per
 *                multimodal_projector_bias
 * Attention within an image sees every patch, so the patch order inside
 * an image (merge-block rather than raster) changes nothing but summation
 * order.
 *
 * Mixed forward (Mistral3Model.forward): the text holds, per image, rows =
 * grid_h / s lines of cols = grid_w / s [IMG] tokens (image_token_index),
 * each line followed by one other token ([IMG_BREAK], the last [IMG_END]);
 * image feature r * cols + c replaces the embedding of the [IMG] token at
 * line r, column c (masked_scatter in order). Positions stay 1-D. */
#ifndef IV_MODELS_VISION_PIXTRAL_H
#define IV_MODELS_VISION_PIXTRAL_H

#include "models/model.h"
#include "models/vision.h"

typedef struct iv_pixtral_vision {
    int depth, hidden, n_heads, head_dim, in_channels, patch, merge, out_hidden;
    int64_t patch_dim;              /* in_channels * patch * patch */
    const iv_tensor *patch_w;       /* [Hv, patch_dim] */
    iv_norm ln_pre;
    iv_block_spec block;            /* the tower's layers (RMSNorm eps 1e-5) */
    iv_layer *layers;               /* [depth] */
    float *inv_freq;                /* [head_dim / 2]: even frequencies, then odd */
    uint8_t *freq_section;          /* [head_dim / 2]: 0 (row) for the first half, 1 (column) after */
    iv_block_spec proj_spec;        /* RMSNorm with the text model's eps, for the projector norm */
    iv_norm proj_norm;
    const iv_tensor *merge_w;       /* [Hv, s^2 Hv], columns (ki, kj, c) */
    const iv_tensor *l1_w, *l1_b, *l2_w, *l2_b; /* [T, Hv] (+[T]), [T, T] (+[T]); biases NULL when off */
    iv_act proj_act;
} iv_pixtral_vision;

/* Reads vision_config (model_type pixtral) and the tower's and projector's
 * tensors (prefix "model." or none: vision_tower., multi_modal_projector.);
 * *out NULL when the checkpoint holds no vision tensors (a text-only
 * export). A tower present but incomplete, or with switches not
 * implemented (vision_feature_layer other than -1, a rope type other than
 * axial, an activation we lack), is an error naming the field. */
int iv_pixtral_vision_load(iv_model *m, iv_pixtral_vision **out, iv_err *err);

/* iv_model.image_token_run for Mistral3: the image's rows of [IMG]
 * (image_token_id), each ended by [IMG_BREAK] but the last, ended by
 * [IMG_END] (m->image_break_id / image_end_id, which the caller must have
 * set); the tower's rows fill the [IMG] tokens in order from the run's
 * start. */
int64_t iv_pixtral_model_token_run(const iv_model *m, const iv_image_input *img, int32_t *out,
                                   int64_t *feature_start);

/* [IMG] tokens of one image: (grid_h / s) * (grid_w / s). */
int64_t iv_pixtral_image_tokens(const iv_pixtral_vision *v, const iv_image_input *img);
/* The length of the image's run in the text: rows * (cols + 1). */
int64_t iv_pixtral_image_run(const iv_pixtral_vision *v, const iv_image_input *img);

/* The tower alone over n images packed in one batch: *states [sum of
 * patches, Hv] (the last layer's output, merge-block order within each
 * image); with features non-NULL also the projector's output, *features
 * [sum of image tokens, text hidden], image after image. */
int iv_pixtral_vision_forward(const iv_model *m, const iv_image_input *imgs, int n, const iv_fwd_mem *mem,
                              iv_view *states, iv_view *features, iv_err *err);

/* Mistral3Model.forward over a packed, uploaded batch whose sequence s has
 * images[s]. Each image's token_offset is where its run starts; every
 * [IMG] of a sequence must lie in one of its runs, where the layout above
 * puts it, runs in order. *hidden: [T, hidden] final states. */
int iv_mistral3_forward(const iv_model *m, const iv_batch *b, const iv_seq_images *images, const iv_fwd_mem *mem,
                        iv_view *hidden, iv_err *err);

#endif
