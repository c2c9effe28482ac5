#include <string.h>
#include <strings.h>

#include "models/family.h"

static const iv_family *const k_families[] = {
    &iv_family_bert,
    &iv_family_distilbert,
    &iv_family_mpnet,
    &iv_family_llama,
    &iv_family_mistral,
    &iv_family_qwen,
    &iv_family_qwen35,
    &iv_family_gemma3,
    &iv_family_modernbert,
    &iv_family_gte,
    &iv_family_nomic_bert,
    &iv_family_jina_bert,
    &iv_family_deberta,
    &iv_family_ultrabert,
    &iv_family_embedding_gemma2,
    &iv_family_gemma4,
    NULL,
};

/* Checkpoints that share a model_type with a native family but run remote
 * code another family implements, recognised by the code repository their
 * config.json names (auto_map "repo--module.Class", or _name_or_path), as
 * TEI does. Other auto_map targets stay with the model_type's family, which
 * rejects code it does not implement. */
typedef struct code_route {
    const char *model_type;
    const char *code_repo;
    const iv_family *family;
} code_route;

static const code_route k_code_routes[] = {
    {"bert", "jinaai/jina-bert-implementation", &iv_family_jina_bert},
    {"bert", "jinaai/jina-bert-v2-qk-post-norm", &iv_family_jina_bert},
    {NULL, NULL, NULL},
};

const iv_family *iv_family_for_config(const iv_hf_config *cfg)
{
    for (const code_route *r = k_code_routes; r->model_type; r++)
        if (!strcmp(r->model_type, cfg->model_type) && iv_config_references_code(cfg, r->code_repo))
            return r->family;
    return iv_family_find(cfg->model_type);
}

const iv_family *iv_family_find(const char *model_type)
{
    for (int i = 0; k_families[i]; i++)
        for (const char *const *t = k_families[i]->model_types; *t; t++)
            if (!strcmp(*t, model_type)) return k_families[i];
    return NULL;
}

const char *iv_family_supported_list(void)
{
    static char buf[1024];
    if (buf[0]) return buf;
    size_t off = 0;
    for (int i = 0; k_families[i]; i++)
        for (const char *const *t = k_families[i]->model_types; *t; t++) {
            size_t n = strlen(*t);
            if (off + n + 3 >= sizeof buf) break;
            if (off) {
                memcpy(buf + off, ", ", 2);
                off += 2;
            }
            memcpy(buf + off, *t, n);
            off += n;
        }
    buf[off] = 0;
    return buf;
}

/* Checkpoints we know and do not run, with what they would need: better
 * than "unsupported model_type" for the retrievers users ask for most. */
const char *iv_family_known_refusal(const iv_hf_config *cfg)
{
    const char *t = cfg->model_type, *a = cfg->architecture;
    if (!strcmp(t, "colqwen2") || !strcmp(t, "colqwen2_5") || strstr(a, "ColQwen2"))
        return "ColQwen2 / ColQwen2.5 checkpoints need the Qwen2-VL / Qwen2.5-VL backbone (its vision tower, "
               "windowed attention and 3-section mRoPE) with the ColQwen2 projection, and their adapter releases a "
               "merged base model; only the Qwen3-VL retrievers (colqwen3, qwen3_vl_nemotron_embed) are implemented";
    if (!strcmp(t, "colpali") || strstr(a, "ColPali"))
        return "ColPali needs the PaliGemma backbone (SigLIP tower, Gemma decoder), which is not implemented";
    if (strcasestr(t, "eagle") || strcasestr(a, "eagle") || strcasestr(t, "nemoretriever") ||
        strcasestr(a, "nemoretriever"))
        return "this is the Eagle-based Nemotron ColEmbed (3B: a SigLIP tower with a Llama 3.2 decoder), a different "
               "architecture from the Qwen3-VL based ColEmbed V2 4B / 8B (qwen3_vl_nemotron_embed), which alone is "
               "implemented";
    return NULL;
}
