/* Gemma4 unified's image path (transformers' Gemma4UnifiedVisionEmbedder
 * and the Gemma4UnifiedMultimodalEmbedder inside it): no vision tower.
 * Each image row is one model patch, (k p)^2 * 3 raw pixels in [0, 1]
 * (the unified processor's patches_merge: iv_gemma4_patchify with
 * cfg.merged), and becomes one soft token:
 *
 *   LayerNorm_1 -> Linear (bias) -> LayerNorm_2          (patch_ln1/dense/ln2)
 *   + pos_embedding[x, 0] + pos_embedding[y, 1]          (factorized table,
 *                                                         [mm_posemb_size, 2, E])
 *   -> LayerNorm                                         (pos_norm; "tower" output)
 *   -> weightless RMSNorm (vision rms_norm_eps)
 *   -> embedding_projection (no bias)                    (features, text width)
 *
 * The LayerNorms are torch's nn.LayerNorm with its default eps 1e-5 (the
 * config has no field for it). Everything after the embedder (image runs
 * <boi> image tokens <eoi>, the "vision" attention masks, placeholders as
 * pad) is Gemma4's: models/vision_gemma4.c.
 *
 * Tensors: (model.)vision_embedder.{patch_ln1,patch_dense,patch_ln2,
 * pos_norm}.{weight,bias}, (model.)vision_embedder.pos_embedding and
 * (model.)embed_vision.embedding_projection.weight, as save_pretrained
 * writes them (transformers maps them from embed_vision.* on load). */
#ifndef IV_MODELS_VISION_GEMMA4_UNIFIED_H
#define IV_MODELS_VISION_GEMMA4_UNIFIED_H

#include "models/vision_gemma4.h"

typedef struct iv_gemma4_unified_embedder {
    iv_norm ln1, ln2, pos_norm;
    const iv_tensor *dense_w, *dense_b; /* [E, patch_dim], [E] */
    const iv_tensor *pos_table;         /* [2 * mm_posemb_size, E]: row 2 x + axis */
} iv_gemma4_unified_embedder;

/* Reads vision_config (model_type gemma4_unified_vision) and the embedder's
 * tensors into v (v->merged set; hidden = mm_embed_dim, pos_size =
 * mm_posemb_size, patch / pool the config's patch_size and
 * pooling_kernel_size, patch_dim (k p)^2 * 3). Fields it does not know are
 * refused by name. */
int iv_gemma4_unified_vision_load(iv_model *m, const cJSON *vc, iv_gemma4_vision *v, iv_err *err);

/* iv_gemma4_vision_forward for the unified embedder over n checked images
 * of N rows in all: *states the pos_norm output [N, E], *features (when
 * not NULL) the projected soft tokens [N, text hidden]. */
int iv_gemma4_unified_embed(const iv_model *m, const iv_image_input *imgs, int n, int64_t N, const iv_fwd_mem *mem,
                            iv_view *states, iv_view *features, iv_err *err);

#endif
