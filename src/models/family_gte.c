/* GTE "new" (Alibaba-NLP/new-impl remote code, model_type `new`: gte-*-en-v1.5,
 * gte-multilingual-*): a post-norm encoder, BERT-like but with a fused biased
 * qkv_proj (or q/k/v_proj when pack_qkv is false), rotary positions over the
 * whole head (NeoX pairing) or learned absolute ones, a GLU MLP whose
 * up_gate_proj holds the up half first and the gated half second
 * (down(act(gate) * up)), LayerNorm or RMSNorm layers (the embedding norm is
 * always a LayerNorm), token types only when type_vocab_size > 0.
 *
 * Quirks: rope_scaling {type: ntk} scales every sequence (see rope.h);
 * logn_attention_scale multiplies q by ln(L) / ln(max_position_embeddings)
 * per sequence, clipped below at 1 with logn_attention_clip1.
 *
 * transformers 5's native port (model_type `gte`: GteModel,
 * GteForSequenceClassification, GteForTokenClassification, GteForMaskedLM)
 * is the same network with the new-impl defaults fixed: LayerNorm layers,
 * rotary only (rope_parameters, any transformers rope type, theta 160000
 * when absent), packed qkv. save_pretrained writes the new-impl tensor names
 * under "gte." (its conversion also reads them under "new."); with
 * save_original_format=False the internal names layers.N.self_attn.{q,k,v,o}_proj,
 * mlp.{up,gate,down}_proj, post_attention_layernorm, post_mlp_layernorm.
 * GteForMaskedLM: lm_head.dense -> gelu -> lm_head.norm (layer_norm) ->
 * decoder tied to the word embeddings + lm_head.decoder.bias. new-impl
 * switches the port ignores (logn_attention_scale, rms_norm layers, ntk
 * rope, absolute positions) are rejected rather than silently dropped. */
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "models/bias_rules.h"
#include "models/decoder_common.h"
#include "models/encoder_common.h"
#include "models/family.h"
#include "models/loader.h"
#include "models/rope.h"

static const iv_encoder_names k_packed = {
    .layer_fmt = "encoder.layer.%d.",
    .qkv = "attention.qkv_proj", .o = "attention.o_proj", .attn_norm = "attn_ln",
    .up = "mlp.up_gate_proj", .down = "mlp.down_proj", .mlp_norm = "mlp_ln",
};
static const iv_encoder_names k_unpacked = {
    .layer_fmt = "encoder.layer.%d.",
    .q = "attention.q_proj", .k = "attention.k_proj", .v = "attention.v_proj", .o = "attention.o_proj",
    .attn_norm = "attn_ln", .up = "mlp.up_gate_proj", .down = "mlp.down_proj", .mlp_norm = "mlp_ln",
};

/* transformers' gte port with save_original_format=False. */
static const iv_encoder_names k_native_split = {
    .layer_fmt = "layers.%d.",
    .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj", .o = "self_attn.o_proj",
    .attn_norm = "post_attention_layernorm", .up = "mlp.up_proj", .up2 = "mlp.gate_proj", .down = "mlp.down_proj",
    .mlp_norm = "post_mlp_layernorm",
};

static const char *const k_archs[] = {
    "NewModel", "NewForSequenceClassification", "NewForTokenClassification", NULL,
};
static const char *const k_native_archs[] = {
    "GteModel", "GteForSequenceClassification", "GteForTokenClassification", "GteForMaskedLM", NULL,
};

static int load_embeddings(iv_model *m, int rope, iv_err *err)
{
    const int64_t H = m->cfg.hidden_size;
    iv_embed_spec *e = &m->embed;
    if (iv_ld_table(m, "embeddings.word_embeddings.weight", H, 1, &e->word, err)) return -1;
    if (iv_json_int(m->cfg.json, "type_vocab_size", 1) > 0 &&
        iv_ld_table(m, "embeddings.token_type_embeddings.weight", H, 1, &e->token_type, err))
        return -1;
    if (!rope && iv_ld_table(m, "embeddings.position_embeddings.weight", H, 1, &e->position, err)) return -1;
    return iv_ld_biased_layer_norm(m, "embeddings.LayerNorm", H, &e->norm, err);
}

/* new-impl and transformers' port alike: biased q/k/v/o (qkv_proj), a GLU
 * whose up and gate projections have no bias and whose down_proj has one,
 * LayerNorms with biases (RMSNorms without), biased heads. */
static int check_biases(iv_model *m, iv_err *err)
{
    const iv_bias_rule has = {1, "the reference module"}, none = {0, ""};
    const iv_layer_bias_rules rules = {.qkv = has, .o = has, .up = none, .down = has,
                                       .norms = m->block.norm_kind == IV_NORM_LAYER ? has : none};
    iv_bias_audit a = {"GTE", 0};
    if (iv_bias_check_layers(&a, m, &rules, err)) return -1;
    iv_bias_audit_report(&a);
    m->biases_required = 1;
    return 0;
}

/* One rotary table for all layers: plain or the remote code's NTK scaling. */
static int load_rope(iv_model *m, iv_err *err)
{
    const cJSON *scaling = iv_json_get(m->cfg.json, "rope_scaling");
    if (cJSON_IsObject(scaling)) {
        const char *t = iv_json_str(scaling, "type", iv_json_str(scaling, "rope_type", ""));
        if (strcmp(t, "ntk"))
            return iv_errf(err, IV_E_UNSUPPORTED, "rope_scaling type \"%s\" is not supported by new-impl (only ntk)", t);
    }
    iv_rope_params p;
    if (iv_rope_params_from_config(m->cfg.json, NULL, m->block.head_dim, 10000.0, m->cfg.max_position_embeddings, &p,
                                   err))
        return -1;
    return iv_decoder_rope(m, &p, NULL, err);
}

/* The layer spec both layouts share: BERT-like post-norm with a GLU MLP,
 * up half first, gated half second (down(act(gate) * up)). */
static int gated_block_spec(iv_model *m, iv_err *err)
{
    if (iv_encoder_block_spec(m, err)) return -1;
    m->block.gated = 1;
    m->block.act_on_first = 0;
    return 0;
}

static int load_task_heads(iv_model *m, iv_err *err)
{
    const iv_hf_config *c = &m->cfg;
    if (iv_arch_has_suffix(c, "ForSequenceClassification")) {
        m->seq_head_pool = IV_SEQ_POOL_FIRST;
        return iv_load_two_step_head(m, &m->seq_head, "pooler.dense", 1, IV_ACT_TANH, "classifier", err);
    }
    if (iv_arch_has_suffix(c, "ForTokenClassification"))
        return iv_load_linear_head(m, &m->token_head, "classifier", c->hidden_size, err);
    return 0;
}

/* new-impl config switches with no meaning in the native port. */
static int reject_new_impl_switches(const cJSON *j, iv_err *err)
{
    static const char *const flags[] = {"logn_attention_scale", "logn_attention_clip1", NULL};
    for (const char *const *f = flags; *f; f++)
        if (iv_json_bool(j, *f, 0))
            return iv_errf(err, IV_E_UNSUPPORTED,
                           "config.json: \"%s\": true is a new-impl switch that model_type gte ignores; use "
                           "model_type \"new\" for such checkpoints",
                           *f);
    const char *lnt = iv_json_str(j, "layer_norm_type", "layer_norm");
    const char *pet = iv_json_str(j, "position_embedding_type", "rope");
    if (strcmp(lnt, "layer_norm") || strcmp(pet, "rope"))
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "config.json: layer_norm_type \"%s\" / position_embedding_type \"%s\" are new-impl "
                       "switches model_type gte does not have (layer_norm and rope only)",
                       lnt, pet);
    if (!iv_json_bool(j, "pack_qkv", 1))
        return iv_errf(err, IV_E_UNSUPPORTED, "config.json: pack_qkv false is a new-impl switch model_type gte ignores");
    return 0;
}

/* transformers' native gte: rope_parameters of any transformers type. */
static int native_rope(iv_model *m, iv_err *err)
{
    const cJSON *params = iv_json_get(m->cfg.json, "rope_parameters");
    if (iv_json_num(params, "partial_rotary_factor", 1.0) != 1.0)
        return iv_errf(err, IV_E_UNSUPPORTED, "rope_parameters.partial_rotary_factor is not supported by gte");
    iv_rope_params p;
    if (iv_rope_params_from_config(m->cfg.json, NULL, m->block.head_dim, 160000.0, m->cfg.max_position_embeddings,
                                   &p, err))
        return -1;
    if (!strcmp(p.type, "ntk"))
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "rope type \"ntk\" is new-impl's; model_type gte has transformers' rope types only");
    return iv_decoder_rope(m, &p, NULL, err);
}

static int gte_native_load(iv_model *m, iv_err *err)
{
    iv_hf_config *c = &m->cfg;
    if (c->architecture[0] && iv_require_architecture(m, k_native_archs, err)) return -1;
    if (c->has_auto_map)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "config.json references custom code (auto_map) for model_type \"gte\"; only plain "
                       "transformers checkpoints are supported");
    c->max_position_embeddings = (int)iv_json_int(c->json, "max_position_embeddings", 8192);
    if (reject_new_impl_switches(c->json, err)) return -1;
    static const char *const prefixes[] = {"gte.", "new.", "", NULL};
    if (iv_detect_prefix(m, prefixes, "embeddings.word_embeddings.weight", err)) return -1;
    if (load_embeddings(m, 1, err) || gated_block_spec(m, err)) return -1;
    char probe[160];
    snprintf(probe, sizeof probe, "%sencoder.layer.0.attention.qkv_proj.weight", m->prefix);
    const iv_encoder_names *names = iv_weights_find(m->weights, probe) ? &k_packed : &k_native_split;
    if (iv_load_encoder_layer_weights(m, names, err) || check_biases(m, err) || native_rope(m, err)) return -1;
    if (iv_arch_has_suffix(c, "ForMaskedLM")) {
        /* lm_head.norm as saved in the original format, lm_head.layer_norm otherwise. */
        const char *norm = iv_weights_find(m->weights, "lm_head.norm.weight") ? "lm_head.norm" : "lm_head.layer_norm";
        return iv_load_mlm_head(m, "lm_head.dense", IV_ACT_GELU, norm, "lm_head.decoder", "lm_head.decoder.bias", err);
    }
    return load_task_heads(m, err);
}

static int gte_load(iv_model *m, iv_err *err)
{
    if (!strcmp(m->cfg.model_type, "gte")) return gte_native_load(m, err);
    iv_hf_config *c = &m->cfg;
    if (c->architecture[0] && iv_require_architecture(m, k_archs, err)) return -1;
    if (iv_config_auto_map_classes(c, "New", err)) return -1;
    c->max_position_embeddings = (int)iv_json_int(c->json, "max_position_embeddings", 2048);
    const char *pet = iv_json_str(c->json, "position_embedding_type", "rope");
    const int rope = !strcmp(pet, "rope");
    if (!rope && strcmp(pet, "absolute"))
        return iv_errf(err, IV_E_UNSUPPORTED, "position_embedding_type \"%s\" is not supported (rope, absolute)", pet);
    const char *lnt = iv_json_str(c->json, "layer_norm_type", "layer_norm");
    if (strcmp(lnt, "layer_norm") && strcmp(lnt, "rms_norm"))
        return iv_errf(err, IV_E_UNSUPPORTED, "layer_norm_type \"%s\" is not supported (layer_norm, rms_norm)", lnt);

    static const char *const prefixes[] = {"new.", "", NULL};
    if (iv_detect_prefix(m, prefixes, "embeddings.word_embeddings.weight", err)) return -1;
    if (load_embeddings(m, rope, err)) return -1;
    if (gated_block_spec(m, err)) return -1;
    iv_block_spec *s = &m->block;
    if (!strcmp(lnt, "rms_norm")) s->norm_kind = IV_NORM_RMS;
    if (iv_json_bool(c->json, "logn_attention_scale", 0)) {
        s->logn_base = c->max_position_embeddings;
        s->logn_clip1 = iv_json_bool(c->json, "logn_attention_clip1", 0);
        if (s->logn_base < 2) return iv_errf(err, IV_E_FORMAT, "logn_attention_scale needs max_position_embeddings > 1");
    }
    if (iv_load_encoder_layer_weights(m, iv_json_bool(c->json, "pack_qkv", 1) ? &k_packed : &k_unpacked, err) ||
        check_biases(m, err))
        return -1;
    if (rope && load_rope(m, err)) return -1;
    return load_task_heads(m, err);
}

static const char *const k_types[] = {"new", "gte", NULL};
const iv_family iv_family_gte = {"gte", k_types, gte_load};
