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
 * per sequence, clipped below at 1 with logn_attention_clip1. */
#include <string.h>

#include "base/json.h"
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

static const char *const k_archs[] = {
    "NewModel", "NewForSequenceClassification", "NewForTokenClassification", NULL,
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
    return iv_ld_layer_norm(m, "embeddings.LayerNorm", H, 0, &e->norm, err);
}

/* One rotary table for all layers: plain or the remote code's NTK scaling. */
static int load_rope(iv_model *m, iv_err *err)
{
    const cJSON *scaling = cJSON_GetObjectItemCaseSensitive(m->cfg.json, "rope_scaling");
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

static int gte_load(iv_model *m, iv_err *err)
{
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
    if (iv_encoder_block_spec(m, err)) return -1;
    iv_block_spec *s = &m->block;
    s->gated = 1;
    s->act_on_first = 0; /* up first, gate second: act(gate) * up */
    if (!strcmp(lnt, "rms_norm")) s->norm_kind = IV_NORM_RMS;
    if (iv_json_bool(c->json, "logn_attention_scale", 0)) {
        s->logn_base = c->max_position_embeddings;
        s->logn_clip1 = iv_json_bool(c->json, "logn_attention_clip1", 0);
        if (s->logn_base < 2) return iv_errf(err, IV_E_FORMAT, "logn_attention_scale needs max_position_embeddings > 1");
    }
    if (iv_load_encoder_layer_weights(m, iv_json_bool(c->json, "pack_qkv", 1) ? &k_packed : &k_unpacked, err))
        return -1;
    if (rope && load_rope(m, err)) return -1;

    if (iv_arch_has_suffix(c, "ForSequenceClassification")) {
        m->seq_head_pool = IV_SEQ_POOL_FIRST;
        return iv_load_two_step_head(m, &m->seq_head, "pooler.dense", 1, IV_ACT_TANH, "classifier", err);
    }
    if (iv_arch_has_suffix(c, "ForTokenClassification"))
        return iv_load_linear_head(m, &m->token_head, "classifier", c->hidden_size, err);
    return 0;
}

static const char *const k_types[] = {"new", NULL};
const iv_family iv_family_gte = {"gte", k_types, gte_load};
