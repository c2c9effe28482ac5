/* config.json parsed into the fields most families share. Family files read
 * their own extra keys from `json` (kept alive with the config). */
#ifndef IV_MODELS_CONFIG_H
#define IV_MODELS_CONFIG_H

#include <cJSON.h>
#include "base/err.h"

#define IV_MAX_LABELS 256

typedef struct iv_hf_config {
    cJSON *root;               /* the whole config.json */
    /* The backbone's keys: root, or for a multimodal checkpoint (no
     * hidden_size at the top, a text_config object) its text_config. Every
     * field below except the labels and the model type comes from it. */
    cJSON *json;
    char architecture[128];    /* architectures[0], or "" */
    char model_type[64];
    int has_auto_map;          /* custom code referenced: families must opt in */
    int hidden_size;
    int num_layers;
    int num_heads;
    int num_kv_heads;          /* defaults to num_heads */
    int head_dim;              /* defaults to hidden_size / num_heads */
    int intermediate_size;
    char hidden_act[32];
    int max_position_embeddings;
    int type_vocab_size;
    int vocab_size;
    double layer_norm_eps;     /* layer_norm_eps, else rms_norm_eps, else 1e-12 */
    int pad_token_id;          /* -1 when absent */
    int num_labels;            /* from id2label, else num_labels, else 2 */
    char *labels[IV_MAX_LABELS]; /* id2label names, or NULL */
    char problem_type[48];
} iv_hf_config;

int iv_hf_config_load(iv_hf_config *cfg, const char *model_dir, iv_err *err);
/* Parses config.json text (the loader and the fuzz target share it). On
 * failure cfg still needs iv_hf_config_free. */
int iv_hf_config_parse(iv_hf_config *cfg, const char *text, size_t len, iv_err *err);
void iv_hf_config_free(iv_hf_config *cfg);
/* True when config.json points at the hub code repository `repo` (e.g.
 * "jinaai/jina-bert-implementation"): any auto_map entry naming
 * "repo--module.Class", or _name_or_path equal to repo. */
int iv_config_references_code(const iv_hf_config *cfg, const char *repo);
/* For families that implement one remote code base: 0 when config.json has
 * no auto_map or every AutoConfig / AutoModel* class name starts with class_prefix (e.g.
 * "NomicBert" for "nomic-ai/nomic-bert-2048--modeling_hf_nomic_bert.NomicBertModel");
 * else an IV_E_UNSUPPORTED error naming the entry. */
int iv_config_auto_map_classes(const iv_hf_config *cfg, const char *class_prefix, iv_err *err);
/* Architecture names ending in this suffix, e.g. "ForSequenceClassification". */
int iv_arch_has_suffix(const iv_hf_config *cfg, const char *suffix);

#endif
