/* The Qwen3-VL retrievers' load-time refusals (docs/vision.md): ColQwen2 /
 * ColQwen2.5 (also as PEFT adapter releases), ColPali, the Eagle-based
 * Nemotron ColEmbed 3B, a ColQwen3 without its projection or with a
 * contradicting embed_dim, a Nemotron with another pooling, and a
 * processor config that disagrees with the tower. Built from the
 * colqwen3_tiny / nemotron_colembed_tiny fixtures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "test.h"
#include "unit/ckpt_test_util.h"
#include "unit/tmp_test_util.h"

static void set_colqwen2(cJSON *c)
{
    ckpt_set(c, "model_type", cJSON_CreateString("colqwen2"));
    ckpt_set(c, "architectures", cJSON_CreateStringArray((const char *[]){"ColQwen2ForRetrieval"}, 1));
}
static void set_colpali(cJSON *c)
{
    ckpt_set(c, "model_type", cJSON_CreateString("colpali"));
}
static void set_eagle(cJSON *c)
{
    ckpt_set(c, "model_type", cJSON_CreateString("llama_nemoretriever_colembed"));
    ckpt_set(c, "architectures", cJSON_CreateStringArray((const char *[]){"NemotronColEmbedEagleModel"}, 1));
}
static void set_embed_dim(cJSON *c)
{
    ckpt_set(c, "embed_dim", cJSON_CreateNumber(320));
}
static void set_pooling_mean(cJSON *c)
{
    ckpt_set(c, "pooling", cJSON_CreateString("mean"));
}

TEST(vlm_retrievers_reject_other_architectures)
{
    CKPT_REJECT("colqwen3_tiny", set_colqwen2, "ColQwen2 / ColQwen2.5 checkpoints need the Qwen2-VL", IV_E_UNSUPPORTED);
    CKPT_REJECT("colqwen3_tiny", set_colpali, "PaliGemma", IV_E_UNSUPPORTED);
    CKPT_REJECT("nemotron_colembed_tiny", set_eagle, "Eagle-based Nemotron ColEmbed", IV_E_UNSUPPORTED);
    CKPT_REJECT("colqwen3_tiny", set_embed_dim, "embed_dim 320 disagrees", IV_E_FORMAT);
    CKPT_REJECT("nemotron_colembed_tiny", set_pooling_mean, "pooling \"mean\"", IV_E_UNSUPPORTED);
}

TEST(vlm_retrievers_reject_adapters_and_missing_parts)
{
    char dir[4096];
    /* A PEFT adapter release (vidore/colqwen2-v1.0 ships one). */
    if (ckpt_make(dir, sizeof dir, "colqwen3_tiny", NULL, 1) == 0) {
        const char *adapter = "{\"base_model_name_or_path\": \"vidore/colqwen2-base\", \"peft_type\": \"LORA\"}";
        REQUIRE(ckpt_write(dir, "adapter_config.json", adapter, strlen(adapter)) == 0);
        CKPT_LOAD_ERROR(dir, "adapter", "PEFT adapter (adapter_config.json) for base model \"vidore/colqwen2-base\"",
                        IV_E_UNSUPPORTED);
        tmp_rmtree(dir);
    }
    /* ColQwen3 without embedding_proj_layer. */
    if (ckpt_make(dir, sizeof dir, "colqwen3_tiny", NULL, 0) == 0) {
        REQUIRE(ckpt_write_weights(dir, "colqwen3_tiny", (const char *const[]){"embedding_proj_layer", NULL}, NULL,
                                   NULL, 0) == 0);
        CKPT_LOAD_ERROR(dir, "no projection", "embedding_proj_layer", IV_E_NOTFOUND);
        tmp_rmtree(dir);
    }
    /* A preprocessor config whose patch size is not the tower's. */
    if (ckpt_make(dir, sizeof dir, "colqwen3_tiny", NULL, 1) == 0) {
        const char *pp = "{\"patch_size\": 14, \"temporal_patch_size\": 2, \"merge_size\": 2}";
        REQUIRE(ckpt_write(dir, "preprocessor_config.json", pp, strlen(pp)) == 0);
        CKPT_LOAD_ERROR(dir, "processor mismatch", "patch_size 14, temporal_patch_size 2, merge_size 2 disagree",
                        IV_E_UNSUPPORTED);
        tmp_rmtree(dir);
    }
}
