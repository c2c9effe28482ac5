/* Checkpoints of the ModernBERT, GTE ("new" and gte), Nomic BERT and Jina BERT families
 * with switches the families do not implement must be rejected naming the
 * switch, and remote-code routing must follow the code repository named in
 * config.json. Built in temp dirs from the encoder fixtures. */
#include <stdio.h>
#include <stdlib.h>

#include "engine/engine.h"
#include "test.h"
#include "unit/ckpt_test_util.h"

/* ModernBERT */
static void mb_chunked(cJSON *c) { ckpt_set(c, "layer_types", cJSON_Parse("[\"full_attention\", \"chunked_attention\", \"full_attention\"]")); }
static void mb_short_types(cJSON *c) { ckpt_set(c, "layer_types", cJSON_Parse("[\"full_attention\"]")); }
static void mb_auto_map(cJSON *c) { ckpt_set(c, "auto_map", cJSON_Parse("{\"AutoModel\": \"x/y--modeling.M\"}")); }
static void mb_pool_max(cJSON *c) { ckpt_set(c, "classifier_pooling", cJSON_CreateString("max")); }
static void mb_qa(cJSON *c) { ckpt_set(c, "architectures", cJSON_Parse("[\"ModernBertForQuestionAnswering\"]")); }
static void mb_rope_yarn_missing(cJSON *c)
{
    ckpt_set(c, "rope_parameters", cJSON_Parse("{\"full_attention\": {\"rope_type\": \"axial\", \"rope_theta\": 1e4}, "
                                              "\"sliding_attention\": {\"rope_type\": \"default\", \"rope_theta\": 1e4}}"));
}
/* GTE "new" */
static void gte_linear(cJSON *c) { ckpt_set(c, "rope_scaling", cJSON_Parse("{\"type\": \"linear\", \"factor\": 2.0}")); }
static void gte_ntk_no_factor(cJSON *c) { ckpt_set(c, "rope_scaling", cJSON_Parse("{\"type\": \"ntk\"}")); }
static void gte_scale_norm(cJSON *c) { ckpt_set(c, "layer_norm_type", cJSON_CreateString("scale_norm")); }
static void gte_alibi(cJSON *c) { ckpt_set(c, "position_embedding_type", cJSON_CreateString("alibi")); }
static void gte_mlm(cJSON *c) { ckpt_set(c, "architectures", cJSON_Parse("[\"NewForMaskedLM\"]")); }
static void gte_other_code(cJSON *c)
{
    ckpt_set(c, "auto_map", cJSON_Parse("{\"AutoModel\": \"someone/gte-fork--modeling.FancyModel\"}"));
}
/* Nomic BERT (hub config keys) */
static void nomic_moe(cJSON *c) { ckpt_set(c, "moe_every_n_layers", cJSON_CreateNumber(2)); }
static void nomic_prenorm(cJSON *c) { ckpt_set(c, "prenorm", cJSON_CreateTrue()); }
static void nomic_rms(cJSON *c) { ckpt_set(c, "use_rms_norm", cJSON_CreateTrue()); }
static void nomic_xpos(cJSON *c) { ckpt_set(c, "rotary_emb_scale_base", cJSON_CreateNumber(512)); }
static void nomic_absolute(cJSON *c) { ckpt_set(c, "rotary_emb_fraction", cJSON_CreateNumber(0.0)); }
static void nomic_odd_rotary(cJSON *c) { ckpt_set(c, "rotary_emb_fraction", cJSON_CreateNumber(0.3)); }
static void nomic_relu(cJSON *c) { ckpt_set(c, "activation_function", cJSON_CreateString("relu")); }
static void nomic_mlm(cJSON *c) { ckpt_set(c, "architectures", cJSON_Parse("[\"NomicBertForPreTraining\"]")); }
/* Nomic BERT MoE (nomic_bert_moe: hub keys, gelu experts) */
static void moe_swiglu(cJSON *c) { ckpt_set(c, "activation_function", cJSON_CreateString("swiglu")); }
static void moe_shared(cJSON *c) { ckpt_set(c, "num_shared_experts", cJSON_CreateNumber(1)); }
static void moe_renorm(cJSON *c) { ckpt_set(c, "moe_normalize_expert_weights", cJSON_CreateNumber(1.0)); }
static void moe_impl(cJSON *c) { ckpt_set(c, "moe_impl", cJSON_CreateString("contrastors")); }
static void moe_expert_choice(cJSON *c) { ckpt_set(c, "expert_choice_router", cJSON_CreateTrue()); }
static void moe_ffn_div(cJSON *c) { ckpt_set(c, "ffn_div", cJSON_CreateNumber(2)); }
static void moe_top_k_too_big(cJSON *c) { ckpt_set(c, "moe_top_k", cJSON_CreateNumber(5)); }
static void moe_wrong_width(cJSON *c) { ckpt_set(c, "n_inner", cJSON_CreateNumber(40)); }
/* Nomic BERT (transformers config keys) */
static void nomic_v5_yarn(cJSON *c)
{
    ckpt_set(c, "rope_parameters", cJSON_Parse("{\"rope_type\": \"linear\", \"factor\": 2.0, \"rope_theta\": 1000.0}"));
}
static void nomic_v5_moe(cJSON *c)
{
    ckpt_set(c, "moe_every_n_layers", cJSON_CreateNumber(2));
    ckpt_set(c, "num_experts", cJSON_CreateNumber(4));
}
/* transformers' native gte */
static void gte_native_logn(cJSON *c) { ckpt_set(c, "logn_attention_scale", cJSON_CreateTrue()); }
static void gte_native_rms(cJSON *c) { ckpt_set(c, "layer_norm_type", cJSON_CreateString("rms_norm")); }
static void gte_native_ntk(cJSON *c)
{
    ckpt_set(c, "rope_parameters", cJSON_Parse("{\"rope_type\": \"ntk\", \"factor\": 2.0, \"rope_theta\": 1000.0}"));
}
static void gte_native_partial(cJSON *c)
{
    ckpt_set(c, "rope_parameters",
             cJSON_Parse("{\"rope_type\": \"default\", \"rope_theta\": 1000.0, \"partial_rotary_factor\": 0.5}"));
}
static void gte_native_code(cJSON *c) { ckpt_set(c, "auto_map", cJSON_Parse("{\"AutoModel\": \"x--m.GteModel\"}")); }
static void gte_native_new_arch(cJSON *c) { ckpt_set(c, "architectures", cJSON_Parse("[\"NewModel\"]")); }
/* Jina BERT */
static void jina_original_ffn(cJSON *c) { ckpt_set(c, "feed_forward_type", cJSON_CreateString("original")); }
static void jina_absolute(cJSON *c) { ckpt_set(c, "position_embedding_type", cJSON_CreateString("absolute")); }

TEST(encoder_rejects_unimplemented_switches)
{
    CKPT_REJECT("modernbert", mb_chunked, "layer_types[1] \"chunked_attention\" is not supported", IV_E_UNSUPPORTED);
    CKPT_REJECT("modernbert", mb_short_types, "layer_types must list 3 layer types", IV_E_FORMAT);
    CKPT_REJECT("modernbert", mb_auto_map, "custom code (auto_map)", IV_E_UNSUPPORTED);
    CKPT_REJECT("modernbert", mb_rope_yarn_missing, "rope type \"axial\" is not supported", IV_E_UNSUPPORTED);
    CKPT_REJECT("modernbert_seqcls", mb_pool_max, "classifier_pooling \"max\"", IV_E_UNSUPPORTED);
    CKPT_REJECT("modernbert", mb_qa, "unsupported architecture \"ModernBertForQuestionAnswering\"", IV_E_UNSUPPORTED);

    CKPT_REJECT("gte_new", gte_linear, "rope_scaling type \"linear\" is not supported by new-impl", IV_E_UNSUPPORTED);
    CKPT_REJECT("gte_new", gte_ntk_no_factor, "needs a positive \"factor\"", IV_E_FORMAT);
    CKPT_REJECT("gte_new", gte_scale_norm, "layer_norm_type \"scale_norm\"", IV_E_UNSUPPORTED);
    CKPT_REJECT("gte_new", gte_alibi, "position_embedding_type \"alibi\"", IV_E_UNSUPPORTED);
    CKPT_REJECT("gte_new", gte_mlm, "unsupported architecture \"NewForMaskedLM\"", IV_E_UNSUPPORTED);
    CKPT_REJECT("gte_new", gte_other_code, "someone/gte-fork--modeling.FancyModel", IV_E_UNSUPPORTED);

    CKPT_REJECT("nomic_bert_hub", nomic_moe, "moe_every_n_layers 2 routes layers through experts", IV_E_FORMAT);
    CKPT_REJECT("nomic_bert_moe", moe_swiglu, "gated activation_function \"swiglu\"", IV_E_UNSUPPORTED);
    CKPT_REJECT("nomic_bert_moe", moe_shared, "num_shared_experts", IV_E_UNSUPPORTED);
    CKPT_REJECT("nomic_bert_moe", moe_renorm, "moe_normalize_expert_weights", IV_E_UNSUPPORTED);
    CKPT_REJECT("nomic_bert_moe", moe_impl, "moe_impl \"contrastors\"", IV_E_UNSUPPORTED);
    CKPT_REJECT("nomic_bert_moe", moe_expert_choice, "\"expert_choice_router\": true", IV_E_UNSUPPORTED);
    CKPT_REJECT("nomic_bert_moe", moe_ffn_div, "ffn_div", IV_E_UNSUPPORTED);
    CKPT_REJECT("nomic_bert_moe", moe_top_k_too_big, "0 < moe_top_k <= num_experts", IV_E_FORMAT);
    CKPT_REJECT("nomic_bert_moe", moe_wrong_width, "encoder.layers.0.mlp.fc1.weight", IV_E_FORMAT);
    CKPT_REJECT("nomic_bert", nomic_v5_moe, "moe_every_n_layers with transformers-style keys", IV_E_UNSUPPORTED);
    CKPT_REJECT("gte_native", gte_native_logn, "\"logn_attention_scale\": true is a new-impl switch",
                IV_E_UNSUPPORTED);
    CKPT_REJECT("gte_native", gte_native_rms, "layer_norm_type \"rms_norm\"", IV_E_UNSUPPORTED);
    CKPT_REJECT("gte_native", gte_native_ntk, "rope type \"ntk\" is new-impl's", IV_E_UNSUPPORTED);
    CKPT_REJECT("gte_native", gte_native_partial, "partial_rotary_factor", IV_E_UNSUPPORTED);
    CKPT_REJECT("gte_native", gte_native_code, "custom code (auto_map) for model_type \"gte\"", IV_E_UNSUPPORTED);
    CKPT_REJECT("gte_native", gte_native_new_arch, "unsupported architecture \"NewModel\"", IV_E_UNSUPPORTED);
    CKPT_REJECT("nomic_bert_hub", nomic_prenorm, "\"prenorm\": true is not supported", IV_E_UNSUPPORTED);
    CKPT_REJECT("nomic_bert_hub", nomic_rms, "\"use_rms_norm\": true is not supported", IV_E_UNSUPPORTED);
    CKPT_REJECT("nomic_bert_hub", nomic_xpos, "rotary_emb_scale_base (xPos)", IV_E_UNSUPPORTED);
    CKPT_REJECT("nomic_bert_hub", nomic_absolute, "rotary_emb_fraction <= 0", IV_E_UNSUPPORTED);
    CKPT_REJECT("nomic_bert_hub", nomic_odd_rotary, "does not give an even rotary width", IV_E_FORMAT);
    CKPT_REJECT("nomic_bert_hub", nomic_relu, "activation_function \"relu\"", IV_E_UNSUPPORTED);
    CKPT_REJECT("nomic_bert_hub", nomic_mlm, "unsupported architecture \"NomicBertForPreTraining\"", IV_E_UNSUPPORTED);
    CKPT_REJECT("nomic_bert", nomic_v5_yarn, "rope type \"linear\" is not supported by nomic_bert", IV_E_UNSUPPORTED);

    CKPT_REJECT("jina_bert_v2", jina_original_ffn, "feed_forward_type \"original\"", IV_E_UNSUPPORTED);
    CKPT_REJECT("jina_code", jina_absolute, "position_embedding_type \"absolute\"", IV_E_UNSUPPORTED);
}

/* Routing: only the exact code repository sends a bert config to the Jina family. */
static void not_quite_jina(cJSON *c)
{
    cJSON_DeleteItemFromObjectCaseSensitive(c, "_name_or_path");
    ckpt_set(c, "auto_map", cJSON_Parse("{\"AutoConfig\": \"jinaai/jina-bert-implementation-v3--configuration_bert.C\"}"));
}
static void name_only_code(cJSON *c)
{
    /* No auto_map: _name_or_path alone names the code (JinaCode), so its tensor names are required. */
    cJSON_DeleteItemFromObjectCaseSensitive(c, "auto_map");
    ckpt_set(c, "_name_or_path", cJSON_CreateString("jinaai/jina-bert-v2-qk-post-norm"));
}

TEST(encoder_routes_jina_by_code_repository)
{
    CKPT_REJECT("jina_bert_v2", not_quite_jina, "references custom code (auto_map)", IV_E_UNSUPPORTED);
    /* A v2 checkpoint claiming the qk-post-norm code lacks up_gated_layer: the JinaCode path ran. */
    CKPT_REJECT("jina_bert_v2", name_only_code, "mlp.up_gated_layer", IV_E_NOTFOUND);
}

/* Dynamic NTK lengths follow n_positions in hub configs, not max_trained_positions * factor. */
TEST(encoder_nomic_hub_length_limit)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/models/nomic_bert_ntk", iv_test_fixtures_dir());
    iv_engine *e;
    iv_err err = {0};
    REQUIRE(iv_engine_load(&e, dir, NULL, &err) == 0);
    int32_t *ids = calloc(129, sizeof(int32_t));
    for (int i = 0; i < 129; i++) ids[i] = 104 + i % 50;
    iv_seq_input s = {.ids = ids, .len = 128};
    iv_outputs out;
    CHECK(iv_engine_run(e, IV_TASK_EMBED_ALL, &s, 1, &out, &err) == 0);
    if (!err.code) iv_outputs_free(&out);
    s.len = 129;
    CHECK(iv_engine_run(e, IV_TASK_EMBED_ALL, &s, 1, &out, &err) == -1);
    CHECK_CONTAINS(err.msg, "the maximum is 128");
    free(ids);
    iv_engine_free(e);
}
