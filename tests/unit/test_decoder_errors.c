/* Decoder checkpoints with switches the families do not implement must be
 * rejected naming the switch; lengths follow max_position_embeddings (or
 * the dynamic-NTK factor). Built in temp dirs from the decoder fixtures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/file.h"
#include "base/json.h"
#include "engine/engine.h"
#include "test.h"

/* A temp checkpoint: fixture `name`'s weights (linked) and config edited by `edit`. */
static int dec_make_ckpt(char *dir, size_t cap, const char *name, void (*edit)(cJSON *cfg))
{
    snprintf(dir, cap, "/tmp/iv_dec_XXXXXX");
    if (!mkdtemp(dir)) return -1;
    char src[4096], dst[4096];
    snprintf(src, sizeof src, "%s/models/%s/config.json", iv_test_fixtures_dir(), name);
    cJSON *cfg;
    iv_err err = {0};
    if (iv_json_load_file(src, 1 << 20, &cfg, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return -1;
    }
    if (edit) edit(cfg);
    char *txt = cJSON_Print(cfg);
    snprintf(dst, sizeof dst, "%s/config.json", dir);
    FILE *f = fopen(dst, "wb");
    if (f) {
        fputs(txt, f);
        fclose(f);
    }
    free(txt);
    cJSON_Delete(cfg);
    char abs[4096];
    snprintf(src, sizeof src, "%s/models/%s/model.safetensors", iv_test_fixtures_dir(), name);
    if (!realpath(src, abs)) return -1;
    snprintf(dst, sizeof dst, "%s/model.safetensors", dir);
    return symlink(abs, dst);
}

static void dec_cleanup(const char *dir)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    unlink(p);
    rmdir(dir);
}

static void set_key(cJSON *c, const char *key, cJSON *v)
{
    if (cJSON_GetObjectItemCaseSensitive(c, key)) cJSON_ReplaceItemInObjectCaseSensitive(c, key, v);
    else cJSON_AddItemToObject(c, key, v);
}

static void expect_reject(const char *fixture, void (*edit)(cJSON *), const char *needle, int code)
{
    char dir[256];
    if (dec_make_ckpt(dir, sizeof dir, fixture, edit)) {
        iv_test_fail(__FILE__, __LINE__, "cannot build a checkpoint from %s", fixture);
        return;
    }
    iv_engine *e = NULL;
    iv_err err = {0};
    int rc = iv_engine_load(&e, dir, NULL, &err);
    CHECK_MSG(rc == -1, "%s: loaded although it should say \"%s\"", fixture, needle);
    CHECK_CONTAINS(err.msg, needle);
    CHECK_EQ_INT(err.code, code);
    if (e) iv_engine_free(e);
    dec_cleanup(dir);
}

static void rope_proportional(cJSON *c)
{
    set_key(c, "rope_parameters", cJSON_Parse("{\"rope_type\": \"proportional\", \"rope_theta\": 10000.0}"));
}
static void add_auto_map(cJSON *c) { set_key(c, "auto_map", cJSON_Parse("{\"AutoModel\": \"modeling.X\"}")); }
static void weighted_pooling(cJSON *c) { set_key(c, "pooling", cJSON_CreateString("weighted_avg")); }
static void sliding_layers(cJSON *c)
{
    set_key(c, "layer_types", cJSON_Parse("[\"sliding_attention\", \"full_attention\"]"));
    set_key(c, "sliding_window", cJSON_CreateNumber(8));
}
static void mistral_layer_types(cJSON *c)
{
    set_key(c, "layer_types", cJSON_Parse("[\"sliding_attention\", \"full_attention\"]"));
}
static void partial_rotary(cJSON *c) { set_key(c, "partial_rotary_factor", cJSON_CreateNumber(0.5)); }
static void no_top_k(cJSON *c) { set_key(c, "num_experts_per_tok", cJSON_CreateNumber(0)); }
static void gemma_not_causal(cJSON *c) { set_key(c, "is_causal", cJSON_CreateFalse()); }
static void chunked_layers(cJSON *c)
{
    set_key(c, "layer_types", cJSON_Parse("[\"chunked_attention\", \"full_attention\"]"));
}
static void no_llama4_beta(cJSON *c)
{
    cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "rope_parameters"),
                                            "llama_4_scaling_beta");
}
static void quick_gelu(cJSON *c) { set_key(c, "hidden_act", cJSON_CreateString("quick_gelu")); }
static void qa_arch(cJSON *c) { set_key(c, "architectures", cJSON_Parse("[\"LlamaForQuestionAnswering\"]")); }

TEST(decoder_rejects_unimplemented_switches)
{
    expect_reject("llama", rope_proportional, "rope type \"proportional\" is not supported", IV_E_UNSUPPORTED);
    expect_reject("llama", add_auto_map, "custom code (auto_map)", IV_E_UNSUPPORTED);
    expect_reject("llama", partial_rotary, "partial_rotary_factor 0.5", IV_E_UNSUPPORTED);
    expect_reject("llama", quick_gelu, "unsupported MLP activation \"quick_gelu\"", IV_E_UNSUPPORTED);
    expect_reject("llama", qa_arch, "unsupported architecture \"LlamaForQuestionAnswering\"", IV_E_UNSUPPORTED);
    expect_reject("llama_bidirec_rerank", weighted_pooling, "pooling \"weighted_avg\" is not supported",
                  IV_E_UNSUPPORTED);
    expect_reject("pplx_embed", sliding_layers, "sliding_attention layers is not supported", IV_E_UNSUPPORTED);
    expect_reject("mistral", mistral_layer_types, "layer_types (alternating attention)", IV_E_UNSUPPORTED);
    expect_reject("ministral3", no_llama4_beta, "llama_4_scaling_beta", IV_E_FORMAT);
    expect_reject("qwen3_moe", no_top_k, "num_experts_per_tok", IV_E_FORMAT);
    expect_reject("qwen3", chunked_layers, "layer_types[0] \"chunked_attention\"", IV_E_UNSUPPORTED);
    expect_reject("gemma3", gemma_not_causal, "use_bidirectional_attention", IV_E_UNSUPPORTED);
}

/* Decoders have no position table: max_position_embeddings bounds inputs,
 * raised by the factor for dynamic NTK (which exists to run past it). */
TEST(decoder_max_input_length)
{
    static const struct {
        const char *fixture;
        int max_len;
    } cases[] = {{"llama", 128}, {"llama_dynamic", 128}, {"llama_longrope", 128}, {"qwen3", 128}};
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
        iv_engine_free(e);
    }
    /* llama_dynamic's config says 64; its dynamic factor 2 allows 128. */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/models/llama_dynamic", iv_test_fixtures_dir());
    iv_engine *e = NULL;
    iv_err err = {0};
    REQUIRE(iv_engine_load(&e, dir, NULL, &err) == 0);
    int32_t ids[129];
    for (int i = 0; i < 129; i++) ids[i] = 4 + i;
    iv_seq_input in = {.ids = ids, .len = 129};
    iv_outputs out;
    CHECK(iv_engine_run(e, IV_TASK_EMBED_ALL, &in, 1, &out, &err) == -1);
    CHECK_CONTAINS(err.msg, "129 tokens");
    in.len = 128;
    CHECK(iv_engine_run(e, IV_TASK_EMBED_ALL, &in, 1, &out, &err) == 0);
    iv_outputs_free(&out);
    iv_engine_free(e);
}
