/* Gemma4 text: transformers `gemma4_text` (Gemma4TextModel, Gemma4ForCausalLM
 * as a backbone) and the text model of `gemma4` (Gemma4Model,
 * Gemma4ForConditionalGeneration: config.json nests text_config, tensors
 * under model.language_model.), run on text. The stack and every switch
 * are the shared Gemma4 text stack's (models/gemma4_text.h): x * w RMSNorm,
 * q/k norms and v_norm with attention scale 1, layer_scalar, sliding / full
 * layers (full: global head width and key/value heads, proportional partial
 * RoPE), attention_k_eq_v, KV sharing, use_double_wide_mlp, the full PLE
 * (token table and projection), use_bidirectional_attention and the routed
 * experts beside the dense MLP.
 *
 * What this file adds: the names, the image tower when config.json has a
 * vision_config (models/vision_gemma4.h: tower, embedder, mixed forward,
 * the image token run hook), the audio tower it refuses (a checkpoint that
 * declares audio_config is rejected at load), and Gemma4Model's
 * placeholder ids embedded as the pad token. There are no
 * task heads: transformers registers none for Gemma4 besides the LM head,
 * which a causal reranker reads through lm_score_head.h
 * (final_logit_softcapping included). */
#include <string.h>

#include "base/json.h"
#include "models/family.h"
#include "models/gemma4_text.h"
#include "models/vision_gemma4.h"

static const char *const k_archs[] = {"Gemma4TextModel", "Gemma4ForCausalLM", "Gemma4Model",
                                      "Gemma4ForConditionalGeneration", NULL};
static const char *const k_prefixes[] = {"model.language_model.", "language_model.", "model.", "", NULL};

static int gemma4_load(iv_model *m, iv_err *err)
{
    const cJSON *audio = iv_json_get(m->cfg.root, "audio_config");
    if (audio && !cJSON_IsNull(audio))
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "config.json declares an audio tower (audio_config), which is not implemented for gemma4");
    const iv_gemma4_text_desc d = {
        .archs = k_archs, .prefixes = k_prefixes, .encoder = 0, .ple_prefix = "", .ple_block = "",
        .default_ple_dim = 256, .ple_token_table = 1, .full_rope_default = "proportional",
        .default_global_kv_heads = 0,
    };
    if (iv_gemma4_text_load(m, &d, err)) return -1;
    /* Gemma4TextModel / Gemma4ForCausalLM (gemma4_text) have no towers and
     * no placeholder ids. */
    if (strcmp(m->cfg.model_type, "gemma4")) return 0;
    if (iv_gemma4_placeholders_as_pad(m, err)) return -1;
    return iv_gemma4_vision_load(m, &m->gemma4_vision, err);
}

static const char *const k_types[] = {"gemma4_text", "gemma4", NULL};
const iv_family iv_family_gemma4 = {"gemma4", k_types, gemma4_load};
