/* Images into a model: the inputs every vision tower takes once its
 * processor has run (src/image/), and the one entry point the engine calls
 * for a batch with images, whichever tower the checkpoint has (Qwen3-VL:
 * models/vision_qwen3vl.h; Pixtral / Mistral3: models/vision_pixtral.h). */
#ifndef IV_MODELS_VISION_H
#define IV_MODELS_VISION_H

#include "models/model.h"

/* One image (or a clip of grid_t frames) as its processor prepared it.
 * pixel_values: host [grid_t * grid_h * grid_w, patch_dim] patches, rows in
 * the merge-block order of the tower (each merge^2 consecutive rows one
 * merged token); grid in patches. */
typedef struct iv_image_input {
    const float *pixel_values;
    int grid_t, grid_h, grid_w;
    /* Mixed forward only: where, within its sequence, the image's run of
     * tokens starts (the tower's docs say what the run holds). */
    int token_offset;
} iv_image_input;

/* The images of one sequence, in token order. */
typedef struct iv_seq_images {
    int n;
    const iv_image_input *images;
} iv_seq_images;

/* The text model over a packed, uploaded batch whose sequence s has
 * images[s] (images NULL or images[s].n 0: text only), through the
 * checkpoint's tower; IV_E_UNSUPPORTED when it has none and some sequence
 * brings images. *hidden: [T, hidden] final states. */
int iv_model_forward_images(const iv_model *m, const iv_batch *b, const iv_seq_images *images,
                            const iv_fwd_mem *mem, iv_view *hidden, iv_err *err);

/* A batch whose sequences may bring images and audio clips (audios: of
 * struct iv_seq_audios, models/audio_gemma4.h; either NULL): the images' or
 * the audio's forward when only one kind is present, both towers and one
 * row injection when both are (EmbeddingGemma2). */
struct iv_seq_audios;
int iv_model_forward_media(const iv_model *m, const iv_batch *b, const iv_seq_images *images,
                           const struct iv_seq_audios *audios, const iv_fwd_mem *mem, iv_view *hidden, iv_err *err);

/* A positive integer key of vision_config (or of config.json, for keys the
 * towers read there) in [1, max], def when absent; the error names
 * vision_config.<key> (patch_size may be a list in the config classes'
 * typing; real checkpoints write integers, anything else is refused). */
int iv_vision_config_int(const cJSON *vc, const char *key, int64_t def, int64_t max, int *out, iv_err *err);

/* The 2-D axial rotary tables of a vision tower (compute_axial_rope_parameters
 * in float32): inv_freq and freq_section, head_dim / 2 entries each, the
 * first half turning with axis 0 (freq_section 0), the second with axis 1.
 * The frequencies are 1 / theta^(2i / rot_dim) over rot_dim = head_dim / 2,
 * the head_dim / 4 of them used for both axes (Qwen3-VL, Gemma4), or, with
 * `even_odd`, over rot_dim = head_dim with the even ones for axis 0 and the
 * odd ones for axis 1 (Pixtral). theta is vision_config.rope_parameters'
 * rope_theta, else default_theta; rope_type must be "axial". */
int iv_vision_axial_rope(iv_model *m, const cJSON *vc, int head_dim, double default_theta, int even_odd,
                         float **inv_freq, uint8_t **freq_section, iv_err *err);

#endif
