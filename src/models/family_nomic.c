/* Nomic BERT (nomic-embed-text-v1/v1.5, nomic-bert-2048): a post-norm encoder
 * with rotary positions and a gated MLP, in two layouts.
 *
 * Hub checkpoints (nomic-ai/contrastors code, GPT-2 style config keys n_embd,
 * n_head, n_layer, n_inner, activation_function, rotary_emb_*): weights
 * encoder.layers.N.{attn.Wqkv, attn.out_proj, norm1, mlp.fc11, mlp.fc12,
 * mlp.fc2, norm2} and emb_ln, backbone prefix "bert." in task models. The MLP
 * is fc2(fc11(x) * act(fc12(x))) for swiglu (silu), geglu (gelu) and glu
 * (sigmoid); other activations are an ungated fc2(gelu(fc1(x))) with exact
 * GELU, as contrastors passes F.gelu whatever the name. Rotary covers the
 * first rotary_emb_fraction * head_dim dims of each head, base
 * rotary_emb_base, NeoX pairing unless rotary_emb_interleaved.
 *
 * transformers 5 port (`nomic_bert`, BERT-style config keys, rotary over the
 * whole head from rope_parameters): save_pretrained writes the hub tensor
 * names back (under "nomic_bert." in task models); its internal names
 * layers.N.self_attn.{q,k,v,o}_proj, post_attention_layernorm,
 * mlp.{up_proj = fc11, gate_proj = fc12, down_proj}, post_mlp_layernorm and
 * embeddings.LayerNorm appear with save_original_format=False. Config style
 * and tensor names are detected independently.
 *
 * Dynamic NTK (hub rotary_scaling_factor with max_trained_positions, or
 * rope_type "dynamic"): a sequence longer than the trained length gets a
 * larger rotary base, decided per sequence (rope.h "dynamic").
 *
 * Mixture of experts (hub configs only, nomic-embed-text-v2-moe): layers l
 * with l % moe_every_n_layers == 1 replace the MLP by megablocks experts,
 * mlp.router.layer [E, H] (softmax over all experts, top moe_top_k, weights
 * NOT renormalised), mlp.experts.mlp.w1 / w2 stacked [E * n_inner, H]
 * (moe_stacked.h) with the config's ungated activation, plus the shared
 * mlp.experts.bias; the other layers keep the dense MLP. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "models/bias_rules.h"
#include "models/decoder_common.h"
#include "models/encoder_common.h"
#include "models/family.h"
#include "models/loader.h"
#include "models/moe_stacked.h"
#include "models/rope.h"

static const iv_encoder_names k_hub_gated = {
    .layer_fmt = "encoder.layers.%d.",
    .qkv = "attn.Wqkv", .o = "attn.out_proj", .attn_norm = "norm1",
    .up = "mlp.fc11", .up2 = "mlp.fc12", .down = "mlp.fc2", .mlp_norm = "norm2",
};
static const iv_encoder_names k_hub_plain = {
    .layer_fmt = "encoder.layers.%d.",
    .qkv = "attn.Wqkv", .o = "attn.out_proj", .attn_norm = "norm1",
    .up = "mlp.fc1", .down = "mlp.fc2", .mlp_norm = "norm2",
};
static const iv_encoder_names k_v5 = {
    .layer_fmt = "layers.%d.",
    .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj", .o = "self_attn.o_proj",
    .attn_norm = "post_attention_layernorm",
    .up = "mlp.up_proj", .up2 = "mlp.gate_proj", .down = "mlp.down_proj", .mlp_norm = "post_mlp_layernorm",
};

static const char *const k_archs[] = {"NomicBertModel", "NomicBertForSequenceClassification", NULL};

/* The hub code builds Wqkv and out_proj with qkv_proj_bias, fc1 (fc11,
 * fc12) with mlp_fc1_bias and fc2 with mlp_fc2_bias (each true by default);
 * transformers' port has no linear biases at all. LayerNorms and heads are
 * biased in both. */
static int check_biases(iv_model *m, int hub_config_keys, iv_err *err)
{
    const cJSON *j = m->cfg.json;
    const iv_bias_rule none = {0, ""}, has = {1, "the reference module"};
    iv_layer_bias_rules rules = {none, none, none, none, has};
    if (hub_config_keys) {
        const iv_bias_rule qkv = {iv_json_bool(j, "qkv_proj_bias", 1), "config.json's qkv_proj_bias"},
                           fc1 = {iv_json_bool(j, "mlp_fc1_bias", 1), "config.json's mlp_fc1_bias"},
                           fc2 = {iv_json_bool(j, "mlp_fc2_bias", 1), "config.json's mlp_fc2_bias"};
        rules = (iv_layer_bias_rules){qkv, qkv, fc1, fc2, has};
    }
    iv_bias_audit a = {"Nomic BERT", 0};
    if (iv_bias_check_layers(&a, m, &rules, err)) return -1;
    iv_bias_audit_report(&a);
    m->biases_required = 1;
    return 0;
}

/* Contrastors switches this family does not implement: each must be off. */
static int reject_hub_switches(const cJSON *j, iv_err *err)
{
    static const char *const flags[] = {"prenorm", "parallel_block", "use_rms_norm", "causal", "norm_mlp",
                                        "rotary_head_dim", NULL};
    for (const char *const *f = flags; *f; f++)
        if (iv_json_bool(j, *f, 0))
            return iv_errf(err, IV_E_UNSUPPORTED, "config.json: \"%s\": true is not supported", *f);
    const cJSON *sb = iv_json_get(j, "rotary_emb_scale_base");
    if (sb && !cJSON_IsNull(sb))
        return iv_errf(err, IV_E_UNSUPPORTED, "config.json: rotary_emb_scale_base (xPos) is not supported");
    return 0;
}

/* Hub config: GPT-2 key names, contrastors defaults; fills the rotary parameters. */
static int hub_config(iv_model *m, iv_rope_params *rope, iv_err *err)
{
    iv_hf_config *c = &m->cfg;
    const cJSON *j = c->json;
    if (reject_hub_switches(j, err)) return -1;
    c->hidden_size = (int)iv_json_int(j, "n_embd", 0);
    c->num_heads = (int)iv_json_int(j, "n_head", 0);
    c->num_layers = (int)iv_json_int(j, "n_layer", 0);
    c->max_position_embeddings = (int)iv_json_int(j, "n_positions", 2048);
    c->layer_norm_eps = iv_json_num(j, "layer_norm_epsilon", 1e-5);
    if (c->hidden_size <= 0 || c->num_heads <= 0 || c->num_layers <= 0 || c->hidden_size % c->num_heads)
        return iv_errf(err, IV_E_FORMAT,
                       "config.json: n_embd, n_head and n_layer must be positive, n_head dividing n_embd");
    c->num_kv_heads = c->num_heads;
    c->head_dim = c->hidden_size / c->num_heads;

    iv_block_spec *s = &m->block;
    const char *fn = iv_json_str(j, "activation_function", "gelu_new");
    s->gated = 1;
    if (!strcmp(fn, "swiglu")) s->act = IV_ACT_SILU;
    else if (!strcmp(fn, "geglu")) s->act = IV_ACT_GELU;
    else if (!strcmp(fn, "glu")) s->act = IV_ACT_SIGMOID;
    else if (!strcmp(fn, "gelu") || !strcmp(fn, "gelu_new") || !strcmp(fn, "gelu_fast") ||
             !strcmp(fn, "gelu_pytorch_tanh")) {
        s->gated = 0;
        s->act = IV_ACT_GELU;
    } else {
        return iv_errf(err, IV_E_UNSUPPORTED, "activation_function \"%s\" is not supported", fn);
    }

    const double fraction = iv_json_num(j, "rotary_emb_fraction", 0.0);
    if (fraction <= 0)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "config.json: rotary_emb_fraction <= 0 (learned absolute positions) is not supported");
    const double rot = c->head_dim * fraction;
    if (rot > c->head_dim || rot != floor(rot) || (int)rot % 2)
        return iv_errf(err, IV_E_FORMAT, "config.json: rotary_emb_fraction %g does not give an even rotary width",
                       fraction);
    s->rot_dim = (int)rot;
    s->rope_interleaved = iv_json_bool(j, "rotary_emb_interleaved", 0);
    /* contrastors' dynamic NTK is transformers' "dynamic" with max_trained_positions as the trained length. */
    const double factor = iv_json_num(j, "rotary_scaling_factor", 0.0);
    *rope = (iv_rope_params){.type = "default", .theta = iv_json_num(j, "rotary_emb_base", 10000.0),
                             .rot_dim = s->rot_dim, .factor = 1.0};
    if (factor > 0) {
        snprintf(rope->type, sizeof rope->type, "dynamic");
        rope->factor = factor;
        rope->has_factor = 1;
        rope->max_position_embeddings = (int)iv_json_int(j, "max_trained_positions", 2048);
        if (rope->max_position_embeddings <= 0 || s->rot_dim <= 2)
            return iv_errf(err, IV_E_FORMAT, "config.json: rotary_scaling_factor needs max_trained_positions > 0 "
                                             "and more than 2 rotary dims");
    }
    return 0;
}

/* Hub MoE switches: fills the expert template and routed[l] for every layer
 * (all 0 for a dense model). The experts are as wide as n_inner. */
static int hub_moe(const iv_model *m, int64_t inner, iv_moe *tmpl, unsigned char *routed, iv_err *err)
{
    const cJSON *j = m->cfg.json;
    const int every_n = (int)iv_json_int(j, "moe_every_n_layers", 0);
    const int n_experts = (int)iv_json_int(j, "num_experts", 0), top_k = (int)iv_json_int(j, "moe_top_k", 1);
    if (every_n <= 0) return 0; /* contrastors builds dense blocks only */
    if (n_experts <= 0 || top_k <= 0 || top_k > n_experts)
        return iv_errf(err, IV_E_FORMAT,
                       "config.json: moe_every_n_layers %d routes layers through experts, which needs "
                       "num_experts > 0 and 0 < moe_top_k <= num_experts (got %d and %d)",
                       every_n, n_experts, top_k);
    if (m->block.gated)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "config.json: Nomic MoE with gated activation_function \"%s\" (megablocks GLU experts) is "
                       "not supported; only ungated experts (gelu, as nomic-embed-text-v2-moe) are",
                       iv_json_str(j, "activation_function", ""));
    const char *impl = iv_json_str(j, "moe_impl", "megablocks");
    if (strcmp(impl, "megablocks"))
        return iv_errf(err, IV_E_UNSUPPORTED, "config.json: moe_impl \"%s\" is not supported (megablocks)", impl);
    if (iv_json_int(j, "num_shared_experts", 0) != 0)
        return iv_errf(err, IV_E_UNSUPPORTED, "config.json: num_shared_experts > 0 is not supported");
    if (iv_json_num(j, "ffn_div", 1) != 1)
        return iv_errf(err, IV_E_UNSUPPORTED, "config.json: ffn_div other than 1 (fine-grained experts) is not supported");
    if (iv_json_bool(j, "expert_choice_router", 0))
        return iv_errf(err, IV_E_UNSUPPORTED, "config.json: \"expert_choice_router\": true is not supported");
    /* megablocks takes a norm order (a number) or a bool; nomic-embed-text-v2-moe sets false. */
    const cJSON *norm = iv_json_get(j, "moe_normalize_expert_weights");
    if (cJSON_IsTrue(norm) || (cJSON_IsNumber(norm) && norm->valuedouble != 0))
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "config.json: moe_normalize_expert_weights is not supported (the routed weights are used as "
                       "the softmax gives them)");
    *tmpl = (iv_moe){.n_experts = n_experts, .top_k = top_k, .intermediate = (int)inner};
    for (int l = 0; l < m->cfg.num_layers; l++) routed[l] = l % every_n == 1;
    return 0;
}

/* The experts of every routed layer, by their hub names. */
static int load_experts(iv_model *m, const iv_moe *tmpl, const unsigned char *routed, iv_err *err)
{
    for (int l = 0; l < m->n_layers; l++) {
        if (!routed[l]) continue;
        char router[96], w1[96], w2[96], bias[96];
        snprintf(router, sizeof router, "encoder.layers.%d.mlp.router.layer.weight", l);
        snprintf(w1, sizeof w1, "encoder.layers.%d.mlp.experts.mlp.w1", l);
        snprintf(w2, sizeof w2, "encoder.layers.%d.mlp.experts.mlp.w2", l);
        snprintf(bias, sizeof bias, "encoder.layers.%d.mlp.experts.bias", l);
        const iv_moe_stacked_names names = {router, w1, w2, bias};
        iv_moe *moe;
        if (iv_moe_load_stacked(m, &names, tmpl, &moe, err)) return -1;
        m->layers[l].moe = moe;
    }
    return 0;
}

/* transformers 5 config: BERT key names, rope_parameters over the whole head. */
static int v5_config(iv_model *m, iv_rope_params *p, iv_err *err)
{
    iv_hf_config *c = &m->cfg;
    iv_block_spec *s = &m->block;
    const char *act_name = iv_json_str(c->json, "hidden_act", "silu");
    const int act = iv_act_from_name(act_name);
    if (act < 0) return iv_errf(err, IV_E_UNSUPPORTED, "unsupported hidden_act \"%s\"", act_name);
    s->act = (iv_act)act;
    s->gated = 1;
    if (!iv_json_get(c->json, "max_position_embeddings")) c->max_position_embeddings = 2048;
    s->rot_dim = c->head_dim;
    if (iv_rope_params_from_config(c->json, NULL, s->rot_dim, 1000.0, c->max_position_embeddings, p, err)) return -1;
    const cJSON *params = iv_json_get(c->json, "rope_parameters");
    if (iv_json_num(params, "partial_rotary_factor", 1.0) != 1.0)
        return iv_errf(err, IV_E_UNSUPPORTED, "rope_parameters.partial_rotary_factor is not supported by nomic_bert");
    if (strcmp(p->type, "default") && strcmp(p->type, "dynamic"))
        return iv_errf(err, IV_E_UNSUPPORTED, "rope type \"%s\" is not supported by nomic_bert (default, dynamic)",
                       p->type);
    if (iv_json_int(c->json, "moe_every_n_layers", 0) > 0)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "config.json: moe_every_n_layers with transformers-style keys is not supported (transformers' "
                       "nomic_bert has no experts; Nomic MoE checkpoints use the hub keys n_embd, n_inner, ...)");
    return 0;
}

static int nomic_load(iv_model *m, iv_err *err)
{
    iv_hf_config *c = &m->cfg;
    if (c->architecture[0] && iv_require_architecture(m, k_archs, err)) return -1;
    if (iv_config_auto_map_classes(c, "NomicBert", err)) return -1;
    static const char *const hub_prefixes[] = {"bert.", "nomic_bert.", "", NULL};
    static const char *const v5_prefixes[] = {"nomic_bert.", "", NULL};
    const int hub_weights = !iv_detect_prefix(m, hub_prefixes, "encoder.layers.0.attn.Wqkv.weight", err);
    if (!hub_weights && iv_detect_prefix(m, v5_prefixes, "layers.0.self_attn.q_proj.weight", err))
        return iv_errf(err, IV_E_NOTFOUND,
                       "checkpoint has neither encoder.layers.0.attn.Wqkv (nomic-ai hub layout) nor "
                       "layers.0.self_attn.q_proj (transformers layout)");

    iv_rope_params rope;
    const int hub_config_keys = iv_json_get(c->json, "n_embd") != NULL;
    if (hub_config_keys ? hub_config(m, &rope, err) : v5_config(m, &rope, err)) return -1;
    iv_block_spec *s = &m->block;
    const int64_t H = c->hidden_size;
    if (c->head_dim * c->num_heads != H)
        return iv_errf(err, IV_E_FORMAT, "config.json: heads do not divide the hidden size");
    int64_t inner = c->intermediate_size;
    if (hub_config_keys) {
        /* contrastors: n_inner (default 8H/3 gated, 4H ungated); the gated MLP rounds it up to a multiple of 256. */
        inner = iv_json_int(c->json, "n_inner", s->gated ? (int64_t)(8 * H / 3) : 4 * H);
        if (s->gated) inner = (inner + 255) / 256 * 256;
    }
    if (inner <= 0) return iv_errf(err, IV_E_FORMAT, "config.json: the MLP width must be positive");
    *s = (iv_block_spec){
        .hidden = (int)H, .n_heads = c->num_heads, .n_kv_heads = c->num_heads, .head_dim = c->head_dim,
        .intermediate = (int)inner, .norm_kind = IV_NORM_LAYER, .norm_place = IV_NORM_POST,
        .norm_eps = (float)c->layer_norm_eps, .act = s->act, .gated = s->gated, .act_on_first = 0,
        .rope_interleaved = s->rope_interleaved, .rot_dim = s->rot_dim,
    };

    iv_embed_spec *e = &m->embed;
    if (iv_ld_table(m, "embeddings.word_embeddings.weight", H, 1, &e->word, err) ||
        iv_ld_table(m, "embeddings.token_type_embeddings.weight", H, 0, &e->token_type, err) ||
        iv_ld_biased_layer_norm(m, hub_weights ? "emb_ln" : "embeddings.LayerNorm", H, &e->norm, err))
        return -1;
    const iv_encoder_names *names = !hub_weights ? &k_v5 : s->gated ? &k_hub_gated : &k_hub_plain;
    if (!hub_weights && !s->gated)
        return iv_errf(err, IV_E_UNSUPPORTED, "transformers-layout nomic_bert checkpoints have a gated MLP");
    iv_moe experts = {0};
    unsigned char *routed = calloc((size_t)c->num_layers, 1);
    if (!routed) return iv_errf(err, IV_E_NOMEM, "out of memory");
    int rc = hub_config_keys ? hub_moe(m, inner, &experts, routed, err) : 0;
    if (!rc && experts.n_experts && !hub_weights)
        rc = iv_errf(err, IV_E_UNSUPPORTED, "Nomic MoE needs the hub tensor names (encoder.layers.N.mlp.experts...)");
    if (!rc) rc = iv_load_encoder_layer_weights_routed(m, names, routed, err);
    if (!rc && experts.n_experts) rc = load_experts(m, &experts, routed, err);
    if (!rc) rc = check_biases(m, hub_config_keys, err);
    free(routed);
    if (rc || iv_decoder_rope(m, &rope, NULL, err)) return -1;
    /* Hub checkpoints accept n_positions tokens whatever the dynamic NTK trained length. */
    if (hub_config_keys) m->max_len = c->max_position_embeddings;

    if (iv_arch_has_suffix(c, "ForSequenceClassification")) {
        m->seq_head_pool = IV_SEQ_POOL_FIRST;
        return iv_load_two_step_head(m, &m->seq_head, "pooler.dense", 1, IV_ACT_TANH, "classifier", err);
    }
    return 0;
}

static const char *const k_types[] = {"nomic_bert", NULL};
const iv_family iv_family_nomic_bert = {"nomic_bert", k_types, nomic_load};
