#include "models/config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/file.h"
#include "base/json.h"

static int read_int(const cJSON *j, const char *key, int def, int *out, iv_err *err)
{
    int64_t v;
    if (iv_json_int_chk(j, key, def, &v, "config.json", err)) return -1;
    if (v < INT_MIN || v > INT_MAX) return iv_errf(err, IV_E_FORMAT, "config.json: \"%s\" out of range", key);
    *out = (int)v;
    return 0;
}

static void copy_str(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

static int read_labels(iv_hf_config *cfg, iv_err *err)
{
    const cJSON *id2label = iv_json_get(cfg->root, "id2label");
    int n = 0;
    if (cJSON_IsObject(id2label)) {
        const cJSON *it;
        cJSON_ArrayForEach(it, id2label) {
            char *end;
            long idx = strtol(it->string, &end, 10);
            if (*end || idx < 0 || idx >= IV_MAX_LABELS || !cJSON_IsString(it))
                return iv_errf(err, IV_E_FORMAT, "config.json: bad id2label entry \"%s\"", it->string);
            free(cfg->labels[idx]);
            cfg->labels[idx] = strdup(it->valuestring);
            if (idx + 1 > n) n = (int)idx + 1;
        }
    }
    int num_labels = 2;
    if (read_int(cfg->root, "num_labels", n ? n : 2, &num_labels, err)) return -1;
    if (n && num_labels != n) num_labels = n; /* transformers derives num_labels from id2label */
    if (num_labels <= 0 || num_labels > IV_MAX_LABELS)
        return iv_errf(err, IV_E_FORMAT, "config.json: num_labels %d out of range", num_labels);
    cfg->num_labels = num_labels;
    return 0;
}

int iv_hf_config_load(iv_hf_config *cfg, const char *model_dir, iv_err *err)
{
    memset(cfg, 0, sizeof *cfg);
    char path[4096];
    iv_path_join(path, sizeof path, model_dir, "config.json");
    char *buf;
    size_t len;
    if (iv_file_read_all(path, 16u << 20, &buf, &len, err)) return -1;
    int rc = iv_hf_config_parse(cfg, buf, len, err);
    free(buf);
    if (rc) iv_err_prefix(err, "%s: ", path);
    return rc;
}

int iv_hf_config_parse(iv_hf_config *cfg, const char *text, size_t len, iv_err *err)
{
    memset(cfg, 0, sizeof *cfg);
    if (iv_json_parse(text, len, "config.json", &cfg->root, err)) return -1;
    cfg->json = cfg->root;
    const cJSON *j = cfg->root;
    if (!cJSON_IsObject(j)) return iv_errf(err, IV_E_FORMAT, "config.json: not a JSON object");

    const cJSON *archs = iv_json_get(j, "architectures");
    if (cJSON_IsArray(archs) && cJSON_GetArraySize(archs) > 0) {
        const cJSON *a0 = cJSON_GetArrayItem(archs, 0);
        if (!cJSON_IsString(a0)) return iv_errf(err, IV_E_FORMAT, "config.json: architectures[0] must be a string");
        copy_str(cfg->architecture, sizeof cfg->architecture, a0->valuestring);
    }
    copy_str(cfg->model_type, sizeof cfg->model_type, iv_json_str(j, "model_type", ""));
    cfg->has_auto_map = cJSON_IsObject(iv_json_get(j, "auto_map"));
    cJSON *text_cfg = iv_json_get(j, "text_config");
    if (cJSON_IsObject(text_cfg) && !iv_json_get(j, "hidden_size")) j = cfg->json = text_cfg;

    /* DistilBERT and GPT-2 style configs (Nomic BERT hub checkpoints) spell these
     * differently; families may override. */
    int rc = 0;
    rc |= read_int(j, "hidden_size", (int)iv_json_int(j, "dim", iv_json_int(j, "n_embd", 0)), &cfg->hidden_size, err);
    rc |= read_int(j, "num_hidden_layers", (int)iv_json_int(j, "n_layers", iv_json_int(j, "n_layer", 0)),
                   &cfg->num_layers, err);
    rc |= read_int(j, "num_attention_heads", (int)iv_json_int(j, "n_heads", iv_json_int(j, "n_head", 0)),
                   &cfg->num_heads, err);
    rc |= read_int(j, "intermediate_size", (int)iv_json_int(j, "hidden_dim", iv_json_int(j, "n_inner", 0)),
                   &cfg->intermediate_size, err);
    rc |= read_int(j, "max_position_embeddings", 0, &cfg->max_position_embeddings, err);
    rc |= read_int(j, "type_vocab_size", 0, &cfg->type_vocab_size, err);
    rc |= read_int(j, "vocab_size", 0, &cfg->vocab_size, err);
    rc |= read_int(j, "pad_token_id", -1, &cfg->pad_token_id, err);
    if (rc) return -1;
    if (read_int(j, "num_key_value_heads", cfg->num_heads, &cfg->num_kv_heads, err)) return -1;
    if (cfg->num_heads <= 0 || cfg->hidden_size <= 0 || cfg->num_layers <= 0)
        return iv_errf(err, IV_E_FORMAT,
                       "config.json: hidden_size, num_hidden_layers and num_attention_heads must be positive");
    if (read_int(j, "head_dim", cfg->hidden_size / cfg->num_heads, &cfg->head_dim, err)) return -1;
    if (cfg->head_dim <= 0 || cfg->num_kv_heads <= 0 || cfg->num_heads % cfg->num_kv_heads)
        return iv_errf(err, IV_E_FORMAT, "config.json: inconsistent head_dim / num_key_value_heads");
    const char *act = iv_json_str(j, "hidden_act", iv_json_str(j, "activation", "gelu"));
    copy_str(cfg->hidden_act, sizeof cfg->hidden_act, act);
    double eps;
    if (iv_json_num_chk(j, "layer_norm_eps", iv_json_num(j, "rms_norm_eps", iv_json_num(j, "norm_eps", 1e-12)),
                        &eps, "config.json", err))
        return -1;
    cfg->layer_norm_eps = eps;
    copy_str(cfg->problem_type, sizeof cfg->problem_type, iv_json_str(j, "problem_type", ""));
    return read_labels(cfg, err);
}

void iv_hf_config_free(iv_hf_config *cfg)
{
    for (int i = 0; i < IV_MAX_LABELS; i++) free(cfg->labels[i]);
    cJSON_Delete(cfg->root);
    memset(cfg, 0, sizeof *cfg);
}

int iv_arch_has_suffix(const iv_hf_config *cfg, const char *suffix)
{
    size_t n = strlen(cfg->architecture), m = strlen(suffix);
    return n >= m && strcmp(cfg->architecture + n - m, suffix) == 0;
}

/* "owner/name--module.Class" (or a list whose first item is) names repo. */
static int names_repo(const cJSON *v, const char *repo)
{
    if (cJSON_IsArray(v)) v = cJSON_GetArrayItem(v, 0);
    if (!cJSON_IsString(v)) return 0;
    size_t n = strlen(repo);
    return !strncmp(v->valuestring, repo, n) && !strncmp(v->valuestring + n, "--", 2);
}

int iv_config_references_code(const iv_hf_config *cfg, const char *repo)
{
    if (!strcmp(iv_json_str(cfg->root, "_name_or_path", ""), repo)) return 1;
    const cJSON *map = iv_json_get(cfg->root, "auto_map");
    const cJSON *it;
    if (cJSON_IsObject(map))
        cJSON_ArrayForEach(it, map) if (names_repo(it, repo)) return 1;
    return 0;
}

int iv_config_auto_map_classes(const iv_hf_config *cfg, const char *class_prefix, iv_err *err)
{
    const cJSON *map = iv_json_get(cfg->root, "auto_map");
    const cJSON *it;
    if (!cJSON_IsObject(map)) return 0;
    cJSON_ArrayForEach(it, map) {
        /* Model and config classes; tokenizer entries name other code. */
        if (strncmp(it->string, "AutoModel", 9) && strcmp(it->string, "AutoConfig")) continue;
        const cJSON *v = cJSON_IsArray(it) ? cJSON_GetArrayItem(it, 0) : it;
        if (!cJSON_IsString(v)) continue; /* [null, "Fast"] tokenizer entries and the like */
        const char *cls = strrchr(v->valuestring, '.');
        cls = cls ? cls + 1 : v->valuestring;
        if (strncmp(cls, class_prefix, strlen(class_prefix)))
            return iv_errf(err, IV_E_UNSUPPORTED,
                           "config.json references custom code (auto_map %s: \"%s\") other than the %s* classes "
                           "this family implements",
                           it->string, v->valuestring, class_prefix);
    }
    return 0;
}
