/* A model family: the config keys, weight names and quirks that are truly
 * its own. To add a family, write models/family_<name>.c with one iv_family
 * and list it in models/registry.c. */
#ifndef IV_MODELS_FAMILY_H
#define IV_MODELS_FAMILY_H

#include "models/model.h"

typedef struct iv_family {
    const char *name;
    const char *const *model_types; /* NULL-terminated config.json model_type values */
    /* Fills m->embed, m->block, m->layers, heads from m->cfg and m->weights.
     * Must reject architectures and config switches it does not implement. */
    int (*load)(iv_model *m, iv_err *err);
} iv_family;

const iv_family *iv_family_find(const char *model_type);
/* The family for a parsed config: a checkpoint whose config points at remote
 * code a family implements (a table in registry.c) goes to that family,
 * anything else by model_type. NULL when none. */
const iv_family *iv_family_for_config(const iv_hf_config *cfg);
/* Why a checkpoint we recognise is not run (what it would need), or NULL. */
const char *iv_family_known_refusal(const iv_hf_config *cfg);
/* Comma-separated list of supported model types, for error messages. */
const char *iv_family_supported_list(void);

extern const iv_family iv_family_bert;
extern const iv_family iv_family_distilbert;
extern const iv_family iv_family_mpnet;
extern const iv_family iv_family_llama;
extern const iv_family iv_family_mistral;
extern const iv_family iv_family_qwen;
extern const iv_family iv_family_qwen35;
extern const iv_family iv_family_gemma3;
extern const iv_family iv_family_modernbert;
extern const iv_family iv_family_gte;
extern const iv_family iv_family_nomic_bert;
extern const iv_family iv_family_jina_bert;
extern const iv_family iv_family_deberta;
extern const iv_family iv_family_ultrabert;
extern const iv_family iv_family_embedding_gemma2;
extern const iv_family iv_family_gemma4;

#endif
