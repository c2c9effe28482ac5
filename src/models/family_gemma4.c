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
 * Gemma4 unified (gemma4_unified_text: Gemma4UnifiedTextModel,
 * Gemma4UnifiedForCausalLM; gemma4_unified: Gemma4UnifiedModel,
 * Gemma4UnifiedForConditionalGeneration) is the same stack without per-layer
 * inputs or experts (transformers builds its Gemma2-style layers from
 * Gemma4's attention and MLP, layer_scalar included) and, instead of the
 * tower, the encoder-free vision embedder of vision_gemma4_unified.h, and
 * a raw-waveform audio embedder (audio_gemma4.h, raw_frame).
 *
 * What this file adds: the names, the image tower when config.json has a
 * vision_config (models/vision_gemma4.h: tower, embedder, mixed forward,
 * the image token run hook), Gemma4's audio tower it refuses (a gemma4
 * checkpoint that declares audio_config is rejected at load), and Gemma4Model's
 * placeholder ids embedded as the pad token. There are no
 * task heads: transformers registers none for Gemma4 besides the LM head,
 * which a causal reranker reads through lm_score_head.h
 * (final_logit_softcapping included). */
#include <string.h>

#include "base/json.h"
#include "models/family.h"
#include "models/audio_gemma4.h"
#include "models/gemma4_text.h"
#include "models/vision_gemma4.h"

static const char *const k_archs[] = {"Gemma4TextModel", "Gemma4ForCausalLM", "Gemma4Model",
                                      "Gemma4ForConditionalGeneration", "Gemma4UnifiedTextModel",
                                      "Gemma4UnifiedForCausalLM", "Gemma4UnifiedModel",
                                      "Gemma4UnifiedForConditionalGeneration", NULL};
static const char *const k_prefixes[] = {"model.language_model.", "language_model.", "model.", "", NULL};

/* Gemma4 unified's text config drops the per-layer inputs and the experts
 * (Gemma4UnifiedTextConfig makes them AttributeError): a config that still
 * sets them is not a checkpoint transformers would run as written. */
static int refuse_unified_extras(const iv_model *m, iv_err *err)
{
    static const char *const keys[] = {"hidden_size_per_layer_input", "vocab_size_per_layer_input",
                                       "enable_moe_block", "num_experts", NULL};
    for (int i = 0; keys[i]; i++) {
        const cJSON *v = iv_json_get(m->cfg.json, keys[i]);
        if (v && !cJSON_IsNull(v) && !cJSON_IsFalse(v) && !(cJSON_IsNumber(v) && v->valuedouble == 0))
            return iv_errf(err, IV_E_UNSUPPORTED, "config.json: %s is set, but %s has no per-layer inputs or "
                                                  "experts", keys[i], m->cfg.model_type);
    }
    return 0;
}

static int gemma4_load(iv_model *m, iv_err *err)
{
    const int unified = !strncmp(m->cfg.model_type, "gemma4_unified", 14);
    const cJSON *audio = iv_json_get(m->cfg.root, "audio_config");
    /* Gemma4's conformer tower is EmbeddingGemma 2's alone; the unified
     * model's raw-frame embedder is read below. */
    if (audio && !cJSON_IsNull(audio) && !unified)
        return iv_errf(err, IV_E_UNSUPPORTED, "config.json declares an audio tower (audio_config), which is not "
                                              "implemented for %s",
                       m->cfg.model_type);
    if (unified && refuse_unified_extras(m, err)) return -1;
    const iv_gemma4_text_desc d = {
        .archs = k_archs, .prefixes = k_prefixes, .encoder = 0, .ple_prefix = "", .ple_block = "",
        .default_ple_dim = unified ? 0 : 256, .ple_token_table = !unified, .full_rope_default = "proportional",
        .default_global_kv_heads = 0,
    };
    if (iv_gemma4_text_load(m, &d, err)) return -1;
    /* The text model types (gemma4_text, gemma4_unified_text) have no
     * towers and no placeholder ids. */
    if (strcmp(m->cfg.model_type, "gemma4") && strcmp(m->cfg.model_type, "gemma4_unified")) return 0;
    if (iv_gemma4_placeholders_as_pad(m, err) || iv_gemma4_vision_load(m, &m->gemma4_vision, err)) return -1;
    return unified ? iv_gemma4_audio_load(m, &m->audio, err) : 0;
}

static const char *const k_types[] = {"gemma4_text", "gemma4", "gemma4_unified_text", "gemma4_unified", NULL};
const iv_family iv_family_gemma4 = {"gemma4", k_types, gemma4_load};
