/* EmbeddingGemma 2 text (transformers `embedding_gemma2_text`, and the text
 * backbone of the multimodal `embedding_gemma2` checkpoint, whose
 * text_config iv_hf_config reads and whose tensors sit under
 * `language_model.`). The multimodal checkpoint's image tower is Gemma4's
 * (`gemma4_vision` with the same embedder and image token run,
 * models/vision_gemma4.h), loaded when config.json has a vision_config;
 * its placeholder ids are embedded as pad as EmbeddingGemma2Model does;
 * its audio tower, when audio_config declares one, is loaded by
 * models/audio_gemma4.c. A
 * bidirectional Gemma4-style encoder (the shared stack: models/gemma4_text.h):
 *   - embeddings x sqrt(hidden); RMSNorm x * w (weights around 1, not
 *     Gemma3's 1 + w), sandwich norms around attention and MLP;
 *   - per-head q_norm / k_norm, and v_norm (no weight) on V; attention
 *     scale 1 (the norms carry it); GeGLU with hidden_activation;
 *   - sliding layers see |i - j| <= sliding_window; full layers have their
 *     own head width and key/value head count (per_layer_config) and each
 *     kind its own rotary base over its whole head;
 *   - projection-only per-layer inputs (PLE): from the scaled embeddings e,
 *     ple = RMSNorm_P(reshape(e W^T * hidden^-0.5, [T, layers, P])); layer
 *     l ends with x += N(per_layer_projection(act(per_layer_input_gate(x))
 *     * ple_l)), then x *= layer_scalar;
 *   - final norm, then embedding_projection (hidden -> embedding_dim, no
 *     bias) on every token: the states the sentence-transformers pipeline
 *     pools are embedding_dim wide. */
#include <string.h>

#include "base/json.h"
#include "models/audio_gemma4.h"
#include "models/family.h"
#include "models/gemma4_text.h"
#include "models/loader.h"
#include "models/vision_gemma4.h"

static const char *const k_archs[] = {"EmbeddingGemma2TextModel", "EmbeddingGemma2Model", NULL};
static const char *const k_prefixes[] = {"language_model.", "model.language_model.", "model.", "", NULL};

static int embedding_gemma2_load(iv_model *m, iv_err *err)
{
    const iv_gemma4_text_desc d = {
        .archs = k_archs, .prefixes = k_prefixes, .encoder = 1, .ple_prefix = "ple.", .ple_block = "ple_block.",
        .default_ple_dim = 512, .full_rope_default = "default", .default_global_kv_heads = 1,
    };
    if (iv_gemma4_text_load(m, &d, err)) return -1;
    const int64_t E = iv_json_int(m->cfg.json, "embedding_dim", 768);
    if (E <= 0 || E > (1 << 20)) return iv_errf(err, IV_E_FORMAT, "config.json: embedding_dim out of range");
    if (iv_ld(m, "embedding_projection.weight", E, m->cfg.hidden_size, &m->out_proj, err)) return -1;
    if (strcmp(m->cfg.model_type, "embedding_gemma2")) return 0; /* the text-only type has no towers */
    if (iv_gemma4_placeholders_as_pad(m, err)) return -1;
    if (iv_gemma4_vision_load(m, &m->gemma4_vision, err)) return -1;
    return iv_gemma4_audio_load(m, &m->audio, err);
}

static const char *const k_types[] = {"embedding_gemma2_text", "embedding_gemma2", NULL};
const iv_family iv_family_embedding_gemma2 = {"embedding_gemma2", k_types, embedding_gemma2_load};
