/* Decoder checkpoints with switches the families do not implement must be
 * rejected naming the switch; lengths follow max_position_embeddings (or
 * the dynamic-NTK factor). Built in temp dirs from the decoder fixtures. */
#include <stdio.h>

#include "engine/engine.h"
#include "engine/inputs.h"
#include "test.h"
#include "unit/ckpt_test_util.h"

static void rope_made_up(cJSON *c)
{
    ckpt_set(c, "rope_parameters", cJSON_Parse("{\"rope_type\": \"made_up\", \"rope_theta\": 10000.0}"));
}
static void add_auto_map(cJSON *c) { ckpt_set(c, "auto_map", cJSON_Parse("{\"AutoModel\": \"modeling.X\"}")); }
static void weighted_pooling(cJSON *c) { ckpt_set(c, "pooling", cJSON_CreateString("weighted_avg")); }
static void sliding_layers(cJSON *c)
{
    ckpt_set(c, "layer_types", cJSON_Parse("[\"sliding_attention\", \"full_attention\"]"));
    ckpt_set(c, "sliding_window", cJSON_CreateNumber(8));
}
static void mistral_layer_types(cJSON *c)
{
    ckpt_set(c, "layer_types", cJSON_Parse("[\"sliding_attention\", \"full_attention\"]"));
}
static void partial_rotary(cJSON *c) { ckpt_set(c, "partial_rotary_factor", cJSON_CreateNumber(0.5)); }
static void no_top_k(cJSON *c) { ckpt_set(c, "num_experts_per_tok", cJSON_CreateNumber(0)); }
static void gemma_not_causal(cJSON *c) { ckpt_set(c, "is_causal", cJSON_CreateFalse()); }
static void chunked_layers(cJSON *c)
{
    ckpt_set(c, "layer_types", cJSON_Parse("[\"chunked_attention\", \"full_attention\"]"));
}
static void no_llama4_beta(cJSON *c)
{
    cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "rope_parameters"),
                                            "llama_4_scaling_beta");
}
static void quick_gelu(cJSON *c) { ckpt_set(c, "hidden_act", cJSON_CreateString("quick_gelu")); }
static void qa_arch(cJSON *c) { ckpt_set(c, "architectures", cJSON_Parse("[\"LlamaForQuestionAnswering\"]")); }

static void max_pooling(cJSON *c) { ckpt_set(c, "classifier_pooling", cJSON_CreateString("max")); }
static void short_windows(cJSON *c)
{
    cJSON_DeleteItemFromObjectCaseSensitive(c, "layer_types");
    ckpt_set(c, "attention_windows", cJSON_Parse("[0, 6]"));
}
static void legacy_rope_scaling(cJSON *c)
{
    ckpt_set(c, "rope_scaling", cJSON_Parse("{\"rope_type\": \"linear\", \"factor\": 2.0}"));
}
static void one_rope_theta(cJSON *c) { ckpt_set(c, "rope_theta", cJSON_CreateNumber(10000)); }
static void no_sliding_rope(cJSON *c)
{
    cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "rope_parameters"),
                                            "sliding_attention");
}

/* UltraBERT: both config styles are checked; the hub style only by
 * ultrabert_legacy_seqcls (attention_windows, per-layer rope_theta). */
TEST(ultrabert_rejects_bad_configs)
{
    CKPT_REJECT("ultrabert_seqcls", max_pooling, "classifier_pooling \"max\" is not supported", IV_E_UNSUPPORTED);
    CKPT_REJECT("ultrabert_legacy_seqcls", short_windows, "attention_windows must list 4 layers", IV_E_FORMAT);
    CKPT_REJECT("ultrabert_legacy_seqcls", legacy_rope_scaling, "rope_scaling without per-kind rope_parameters",
                IV_E_UNSUPPORTED);
    CKPT_REJECT("ultrabert_legacy_seqcls", one_rope_theta, "rope_theta must list a positive base per layer",
                IV_E_FORMAT);
    CKPT_REJECT("ultrabert", no_sliding_rope, "rope_parameters has no \"sliding_attention\" entry", IV_E_FORMAT);
}

static void bad_layer_key(cJSON *c) { ckpt_set(c, "per_layer_config", cJSON_Parse("{\"x1\": {\"head_dim\": 16}}")); }
static void drop_per_layer_config(cJSON *c) { cJSON_DeleteItemFromObjectCaseSensitive(c, "per_layer_config"); }
static void odd_kv_heads(cJSON *c)
{
    ckpt_set(c, "per_layer_config", cJSON_Parse("{\"1\": {\"head_dim\": 16, \"num_key_value_heads\": 3}}"));
}

TEST(embedding_gemma2_rejects_bad_configs)
{
    CKPT_REJECT("embedding_gemma2", add_auto_map, "custom code (auto_map)", IV_E_UNSUPPORTED);
    CKPT_REJECT("embedding_gemma2", bad_layer_key, "per_layer_config key \"x1\" is not a layer index", IV_E_FORMAT);
    CKPT_REJECT("embedding_gemma2", odd_kv_heads, "layer 1 has an invalid head geometry", IV_E_FORMAT);
    /* Without per_layer_config, full layers get the config class's
     * global_head_dim (512), which these tensors do not have. */
    CKPT_REJECT("embedding_gemma2", drop_per_layer_config, "q_proj.weight has shape [64, 32], expected [2048, 32]",
                IV_E_FORMAT);
}

static void gemma4_audio(cJSON *c) { ckpt_set(c, "audio_config", cJSON_Parse("{\"model_type\": \"gemma4_audio\"}")); }
static void gemma4_bidir_text(cJSON *c) { ckpt_set(c, "use_bidirectional_attention", cJSON_CreateString("text")); }
static void gemma4_all_shared(cJSON *c) { ckpt_set(c, "num_kv_shared_layers", cJSON_CreateNumber(5)); }
static void gemma4_no_top_k(cJSON *c) { ckpt_set(c, "top_k_experts", cJSON_CreateNumber(0)); }
static void gemma4_bad_partial(cJSON *c)
{
    ckpt_set(c, "rope_parameters",
             cJSON_Parse("{\"full_attention\": {\"rope_type\": \"proportional\", \"partial_rotary_factor\": 1.5}, "
                         "\"sliding_attention\": {\"rope_type\": \"default\"}}"));
}
/* Shared keys and values need a storing layer of the same kind before the
 * shared layers: with 3 of 4 layers shared, no full layer is left. */
static void gemma4_no_full_producer(cJSON *c) { ckpt_set(c, "num_kv_shared_layers", cJSON_CreateNumber(3)); }

TEST(gemma4_rejects_bad_configs)
{
    CKPT_REJECT("gemma4_cond", gemma4_audio, "audio tower (audio_config)", IV_E_UNSUPPORTED);
    CKPT_REJECT("gemma4_text", add_auto_map, "custom code (auto_map)", IV_E_UNSUPPORTED);
    CKPT_REJECT("gemma4_text", gemma4_bidir_text, "use_bidirectional_attention must be", IV_E_UNSUPPORTED);
    CKPT_REJECT("gemma4_kv_shared", gemma4_all_shared, "num_kv_shared_layers equal to num_hidden_layers",
                IV_E_UNSUPPORTED);
    CKPT_REJECT("gemma4_text", gemma4_no_full_producer, "leaves no full_attention layer", IV_E_FORMAT);
    CKPT_REJECT("gemma4_moe", gemma4_no_top_k, "enable_moe_block needs", IV_E_FORMAT);
    CKPT_REJECT("gemma4_text", gemma4_bad_partial, "partial_rotary_factor 1.5 is out of [0, 1]", IV_E_FORMAT);
}

static void mistral3_llama_text(cJSON *c)
{
    ckpt_set(cJSON_GetObjectItemCaseSensitive(c, "text_config"), "model_type", cJSON_CreateString("llama"));
}
/* The reranker's auto_map on a checkpoint that is not the reranker (its
 * architectures still say Mistral3Model): custom code we did not read. The
 * reranker itself: tests/unit/test_mistral3_rerank.c. */
static void mistral3_rerank_code(cJSON *c)
{
    ckpt_set(c, "auto_map", cJSON_Parse("{\"AutoModelForSequenceClassification\": "
                                        "\"model.Mistral3ForSequenceClassification\"}"));
}

/* Multimodal checkpoints run as their text backbone only when the family
 * knows that backbone. */
TEST(multimodal_text_backbones_reject_what_they_do_not_run)
{
    CKPT_REJECT("mistral3", mistral3_llama_text, "mistral3 with a text model of type \"llama\"", IV_E_UNSUPPORTED);
    CKPT_REJECT("mistral3", mistral3_rerank_code, "custom code (auto_map)", IV_E_UNSUPPORTED);
}

TEST(decoder_rejects_unimplemented_switches)
{
    CKPT_REJECT("llama", rope_made_up, "rope type \"made_up\" is not supported", IV_E_UNSUPPORTED);
    CKPT_REJECT("llama", add_auto_map, "custom code (auto_map)", IV_E_UNSUPPORTED);
    CKPT_REJECT("llama", partial_rotary, "partial_rotary_factor 0.5", IV_E_UNSUPPORTED);
    CKPT_REJECT("llama", quick_gelu, "unsupported MLP activation \"quick_gelu\"", IV_E_UNSUPPORTED);
    CKPT_REJECT("llama", qa_arch, "unsupported architecture \"LlamaForQuestionAnswering\"", IV_E_UNSUPPORTED);
    CKPT_REJECT("llama_bidirec_rerank", weighted_pooling, "pooling \"weighted_avg\" is not supported",
                IV_E_UNSUPPORTED);
    CKPT_REJECT("pplx_embed", sliding_layers, "sliding_attention layers is not supported", IV_E_UNSUPPORTED);
    CKPT_REJECT("mistral", mistral_layer_types, "layer_types (alternating attention)", IV_E_UNSUPPORTED);
    CKPT_REJECT("ministral3", no_llama4_beta, "llama_4_scaling_beta", IV_E_FORMAT);
    CKPT_REJECT("qwen3_moe", no_top_k, "num_experts_per_tok", IV_E_FORMAT);
    CKPT_REJECT("qwen3", chunked_layers, "layer_types[0] \"chunked_attention\"", IV_E_UNSUPPORTED);
    CKPT_REJECT("gemma3", gemma_not_causal, "use_bidirectional_attention", IV_E_UNSUPPORTED);
}

/* Decoders have no position table. The limit in force is sentence-transformers'
 * (tokenizer_config.json model_max_length, 128 in the fixtures, capped at
 * max_position_embeddings); dynamic NTK, which exists to run past
 * max_position_embeddings, has no cap of its own, as in transformers: the
 * engine runs given sequences of any length, and inputs prepared from a
 * request are cut at the limit. */
TEST(decoder_max_input_length)
{
    static const struct {
        const char *fixture;
        int max_len;
        const char *source;
    } cases[] = {{"llama", 128, "tokenizer_config.json"},
                 {"llama_dynamic", 64, "config.json"},
                 {"llama_longrope", 128, "tokenizer_config.json"},
                 {"qwen3", 128, "tokenizer_config.json"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/models/%s", iv_test_fixtures_dir(), cases[i].fixture);
        iv_engine *e = NULL;
        iv_err err = {0};
        if (iv_engine_load(&e, dir, NULL, &err)) {
            iv_test_fail(__FILE__, __LINE__, "%s: %s", cases[i].fixture, err.msg);
            continue;
        }
        CHECK_EQ_INT(iv_engine_max_input_length(e), cases[i].max_len);
        CHECK_STR(iv_engine_max_input_length_source(e), cases[i].source);
        iv_engine_free(e);
    }
    /* llama_dynamic's config says 64, factor 2: 300 tokens still run. */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/models/llama_dynamic", iv_test_fixtures_dir());
    iv_engine *e = NULL;
    iv_err err = {0};
    REQUIRE(iv_engine_load(&e, dir, NULL, &err) == 0);
    int32_t ids[300];
    for (int i = 0; i < 300; i++) ids[i] = 4 + i % 250;
    iv_seq_input in = {.ids = ids, .len = 300};
    iv_outputs out;
    CHECK(iv_engine_run(e, IV_TASK_EMBED_ALL, &in, 1, &out, &err) == 0);
    if (!err.msg[0]) {
        CHECK_EQ_INT(out.rows[0], 300);
        iv_outputs_free(&out);
    }
    /* A request's ids are cut at the limit in force, or refused without truncation. */
    const iv_input req = {.ids = ids, .n_ids = 300};
    iv_input_opts o = iv_input_opts_default();
    iv_prepared p;
    REQUIRE(iv_prepare_input(e, &req, &o, &p, &err) == 0);
    CHECK_EQ_INT(p.seq.len, 64);
    iv_prepared_free(&p);
    o.truncate = 0;
    CHECK(iv_prepare_input(e, &req, &o, &p, &err) == -1);
    CHECK_CONTAINS(err.msg, "maximum of 64");
    iv_engine_free(e);
}

/* Qwen3-VL's vision tower: an incomplete or inconsistent tower, or a switch
 * not implemented, is refused at load naming it. */
static cJSON *vision_cfg(cJSON *c) { return cJSON_GetObjectItemCaseSensitive(c, "vision_config"); }
static void vl_fewer_deepstack(cJSON *c) { ckpt_set(vision_cfg(c), "deepstack_visual_indexes", cJSON_Parse("[0]")); }
static void vl_shallower(cJSON *c)
{
    ckpt_set(vision_cfg(c), "depth", cJSON_CreateNumber(2));
    ckpt_set(vision_cfg(c), "deepstack_visual_indexes", cJSON_Parse("[0, 1]"));
}
static void vl_deepstack_past_depth(cJSON *c) { ckpt_set(vision_cfg(c), "deepstack_visual_indexes", cJSON_Parse("[0, 3]")); }
static void vl_deepstack_twice(cJSON *c) { ckpt_set(vision_cfg(c), "deepstack_visual_indexes", cJSON_Parse("[0, 0]")); }
static void vl_patch_list(cJSON *c) { ckpt_set(vision_cfg(c), "patch_size", cJSON_Parse("[4, 4]")); }
static void vl_out_width(cJSON *c) { ckpt_set(vision_cfg(c), "out_hidden_size", cJSON_CreateNumber(40)); }
static void vl_rope_type(cJSON *c)
{
    ckpt_set(vision_cfg(c), "rope_parameters", cJSON_Parse("{\"rope_type\": \"default\", \"rope_theta\": 10000.0}"));
}
static void vl_no_vision_config(cJSON *c) { cJSON_DeleteItemFromObjectCaseSensitive(c, "vision_config"); }
static void vl_bad_mrope(cJSON *c)
{
    ckpt_set(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "text_config"), "rope_parameters"),
             "mrope_section", cJSON_Parse("[3, 2]"));
}

TEST(qwen3_vl_rejects_bad_vision_towers)
{
    CKPT_REJECT("qwen3_vl_vision", vl_fewer_deepstack, "more DeepStack mergers than deepstack_visual_indexes",
                IV_E_FORMAT);
    CKPT_REJECT("qwen3_vl_vision", vl_shallower, "more vision blocks than vision_config.depth", IV_E_FORMAT);
    CKPT_REJECT("qwen3_vl_vision", vl_deepstack_past_depth, "deepstack_visual_indexes must list vision blocks < 3",
                IV_E_FORMAT);
    CKPT_REJECT("qwen3_vl_vision", vl_deepstack_twice, "deepstack_visual_indexes lists block 0 twice",
                IV_E_UNSUPPORTED);
    CKPT_REJECT("qwen3_vl_vision", vl_patch_list, "vision_config.patch_size must be a positive integer",
                IV_E_UNSUPPORTED);
    CKPT_REJECT("qwen3_vl_vision", vl_out_width, "out_hidden_size 40 differs from the text hidden size 48",
                IV_E_FORMAT);
    CKPT_REJECT("qwen3_vl_vision", vl_rope_type, "rope_type \"default\" (only \"axial\"", IV_E_UNSUPPORTED);
    CKPT_REJECT("qwen3_vl_vision", vl_no_vision_config, "no vision_config", IV_E_FORMAT);
    CKPT_REJECT("qwen3_vl_vision", vl_bad_mrope, "mrope_section must list 3 integers", IV_E_FORMAT);
    /* A tower missing one tensor. */
    char dir[4096];
    static const char *const drop[] = {"visual.blocks.1.mlp.linear_fc1.bias", NULL};
    if (ckpt_make(dir, sizeof dir, "qwen3_vl_vision", NULL, 0) == 0) {
        if (ckpt_write_weights(dir, "qwen3_vl_vision", drop, NULL, NULL, 0) == 0)
            CKPT_LOAD_ERROR(dir, "vision tensor dropped", "visual.blocks.1.mlp.linear_fc1.bias", IV_E_NOTFOUND);
        tmp_rmtree(dir);
    }
}
