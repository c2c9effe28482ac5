/* Which repository files the engine needs. A hub repository often holds the
 * same weights several times (pytorch_model.bin, ONNX, TF, OpenVINO); we take
 * only safetensors, the configs, the tokenizer and the chat templates, plus whatever the
 * sentence-transformers modules and the shard index name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/json.h"
#include "engine/hub.h"

int iv_strlist_add(iv_strlist *l, const char *s)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 16;
        char **items = realloc(l->items, (size_t)cap * sizeof *items);
        if (!items) return -1;
        l->items = items;
        l->cap = cap;
    }
    if (!(l->items[l->n] = strdup(s))) return -1;
    l->n++;
    return 0;
}

int iv_strlist_has(const iv_strlist *l, const char *s)
{
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->items[i], s)) return 1;
    return 0;
}

void iv_strlist_free(iv_strlist *l)
{
    for (int i = 0; i < l->n; i++) free(l->items[i]);
    free(l->items);
    *l = (iv_strlist){0};
}

static int add_unique(iv_strlist *l, const char *s, iv_err *err)
{
    if (iv_strlist_has(l, s)) return 0;
    if (iv_strlist_add(l, s)) return iv_errf(err, IV_E_NOMEM, "out of memory listing files");
    return 0;
}

/* Root files taken whenever the repository has them. */
static const char *const k_root_files[] = {
    "config.json",       "tokenizer.json",           "tokenizer_config.json",
    "special_tokens_map.json", "modules.json",       "sentence_bert_config.json",
    "config_sentence_transformers.json", "chat_template.jinja", "chat_template.json",
    "processor_config.json",
    /* Decision sidecars (docs/decisions.md): pplx-decider v1, Clef. */
    "decision_config.json", "readout.safetensors", "joint_head_config.json", "joint_head.safetensors",
};

/* transformers 5's named templates beside chat_template.jinja. */
static int is_additional_template(const char *name)
{
    static const char dir[] = "additional_chat_templates/";
    const size_t n = strlen(name);
    return !strncmp(name, dir, sizeof dir - 1) && !strchr(name + sizeof dir - 1, '/') && n > sizeof dir - 1 + 6 &&
           !strcmp(name + n - 6, ".jinja");
}

/* Weight formats we never download; named in the error when they are all a repo has. */
static const char *const k_other_weights[] = {
    "pytorch_model.bin", "model.onnx", "onnx/model.onnx", "tf_model.h5", "flax_model.msgpack",
    "pytorch_model.bin.index.json", "openvino/openvino_model.bin",
};

/* A Laya decision checkpoint (convaiinnovations/laya's root layout):
 * rl_agent_config.json, model.safetensors, encoder/ and tokenizer/
 * (docs/decisions.md). Its sibling checkpoints in subfolders are not taken. */
static int select_laya(const iv_strlist *repo_files, const char *id, iv_strlist *out, iv_err *err)
{
    static const char *const need[] = {"rl_agent_config.json", "model.safetensors", "encoder/config.json",
                                       "tokenizer/tokenizer.json"};
    static const char *const optional[] = {"tokenizer/tokenizer_config.json", "tokenizer/special_tokens_map.json"};
    for (size_t i = 0; i < sizeof need / sizeof *need; i++) {
        if (!iv_strlist_has(repo_files, need[i]))
            return iv_errf(err, IV_E_UNSUPPORTED, "%s has rl_agent_config.json but no %s: not a Laya checkpoint", id,
                           need[i]);
        if (add_unique(out, need[i], err)) return -1;
    }
    for (size_t i = 0; i < sizeof optional / sizeof *optional; i++)
        if (iv_strlist_has(repo_files, optional[i]) && add_unique(out, optional[i], err)) return -1;
    return 0;
}

int iv_hub_select_first(const iv_strlist *repo_files, const char *id, iv_strlist *out, iv_err *err)
{
    if (iv_strlist_has(repo_files, "rl_agent_config.json")) return select_laya(repo_files, id, out, err);
    if (!iv_strlist_has(repo_files, "config.json"))
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "%s has no config.json on the hub; it is not a transformers checkpoint "
                       "infinity_v3 can load",
                       id);
    for (size_t i = 0; i < sizeof k_root_files / sizeof *k_root_files; i++)
        if (iv_strlist_has(repo_files, k_root_files[i]) && add_unique(out, k_root_files[i], err))
            return -1;
    for (int i = 0; i < repo_files->n; i++)
        if (is_additional_template(repo_files->items[i]) && add_unique(out, repo_files->items[i], err)) return -1;
    /* A WordPiece vocabulary matters only when there is no tokenizer.json. */
    if (!iv_strlist_has(repo_files, "tokenizer.json") && iv_strlist_has(repo_files, "vocab.txt") &&
        add_unique(out, "vocab.txt", err))
        return -1;
    if (iv_strlist_has(repo_files, "model.safetensors"))
        return add_unique(out, "model.safetensors", err);
    if (iv_strlist_has(repo_files, "model.safetensors.index.json"))
        return add_unique(out, "model.safetensors.index.json", err);
    const char *other = NULL;
    for (size_t i = 0; i < sizeof k_other_weights / sizeof *k_other_weights && !other; i++)
        if (iv_strlist_has(repo_files, k_other_weights[i])) other = k_other_weights[i];
    if (other)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "%s has no model.safetensors on the hub (only %s); infinity_v3 loads "
                       "safetensors only: choose a --revision that has them (the hub's "
                       "safetensors conversion is often refs/pr/N) or convert the checkpoint "
                       "and pass its local directory",
                       id, other);
    return iv_errf(err, IV_E_UNSUPPORTED, "%s has no model.safetensors on the hub", id);
}

/* A module folder file worth taking: configs, safetensors weights, a vocabulary. */
static int module_file_wanted(const char *name)
{
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    size_t n = strlen(base);
    return (n > 5 && !strcmp(base + n - 5, ".json")) ||
           (n > 12 && !strcmp(base + n - 12, ".safetensors")) || !strcmp(base, "vocab.txt");
}

/* Unique shard names of an index file's weight_map, added to out. */
static int add_shards(const char *index_path, iv_strlist *out, iv_err *err)
{
    cJSON *j;
    if (iv_json_load_file(index_path, 64u << 20, &j, err)) return -1;
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(j, "weight_map");
    if (!cJSON_IsObject(map)) {
        cJSON_Delete(j);
        return iv_errf(err, IV_E_FORMAT, "%s has no weight_map object", index_path);
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, map)
    {
        if (!cJSON_IsString(e)) {
            cJSON_Delete(j);
            return iv_errf(err, IV_E_FORMAT, "%s: weight_map[\"%s\"] is not a file name", index_path,
                           e->string);
        }
        if (add_unique(out, e->valuestring, err)) {
            cJSON_Delete(j);
            return -1;
        }
    }
    cJSON_Delete(j);
    return 0;
}

/* Calls fn(path, type) for each module of modules.json with a folder. */
typedef int (*module_fn)(const char *path, const char *type, void *ctx, iv_err *err);
static int for_each_module(const char *modules_path, module_fn fn, void *ctx, iv_err *err)
{
    cJSON *j;
    if (iv_json_load_file(modules_path, 1u << 20, &j, err)) return -1;
    if (!cJSON_IsArray(j)) {
        cJSON_Delete(j);
        return iv_errf(err, IV_E_FORMAT, "%s is not a JSON array", modules_path);
    }
    const cJSON *m;
    int rc = 0;
    cJSON_ArrayForEach(m, j)
    {
        const char *path = iv_json_str(m, "path", "");
        const char *type = iv_json_str(m, "type", "");
        if (!*path || !strcmp(path, ".") || !strcmp(path, "./")) continue;
        if ((rc = fn(path, type, ctx, err))) break;
    }
    cJSON_Delete(j);
    return rc;
}

typedef struct {
    const iv_strlist *repo_files;
    iv_strlist *out;
} module_pick;

static int pick_module_files(const char *path, const char *type, void *ctx, iv_err *err)
{
    module_pick *p = ctx;
    size_t n = strlen(path);
    while (n && path[n - 1] == '/') n--;
    for (int i = 0; i < p->repo_files->n; i++) {
        const char *f = p->repo_files->items[i];
        if (!strncmp(f, path, n) && f[n] == '/' && module_file_wanted(f) &&
            add_unique(p->out, f, err))
            return -1;
    }
    return 0;
}

int iv_hub_select_then(const iv_strlist *repo_files, const char *snapshot_dir, iv_strlist *out,
                       iv_err *err)
{
    char path[PATH_MAX];
    iv_path_join(path, sizeof path, snapshot_dir, "model.safetensors.index.json");
    if (iv_file_exists(path)) {
        iv_strlist shards = {0};
        if (add_shards(path, &shards, err)) {
            iv_strlist_free(&shards);
            return -1;
        }
        for (int i = 0; i < shards.n; i++) {
            if (!iv_strlist_has(repo_files, shards.items[i])) {
                iv_errf(err, IV_E_FORMAT,
                        "model.safetensors.index.json names shard %s, which the repository lacks",
                        shards.items[i]);
                iv_strlist_free(&shards);
                return -1;
            }
            if (add_unique(out, shards.items[i], err)) {
                iv_strlist_free(&shards);
                return -1;
            }
        }
        iv_strlist_free(&shards);
    }
    iv_path_join(path, sizeof path, snapshot_dir, "modules.json");
    if (iv_file_exists(path)) {
        module_pick p = {repo_files, out};
        if (for_each_module(path, pick_module_files, &p, err)) return -1;
    }
    return 0;
}

/* ---- completeness of a cached snapshot ---- */

typedef struct {
    const char *dir;
    char *missing;
    size_t cap;
    int complete;
} module_check;

static int has_file(const char *dir, const char *name, char *missing, size_t cap)
{
    char path[PATH_MAX];
    iv_path_join(path, sizeof path, dir, name);
    if (iv_file_exists(path)) return 1; /* stat follows the symlink: a dangling one is missing */
    snprintf(missing, cap, "%s", name);
    return 0;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

static int check_module(const char *path, const char *type, void *ctx, iv_err *err)
{
    module_check *c = ctx;
    if (!c->complete) return 0;
    int pooling = ends_with(type, ".Pooling"), dense = ends_with(type, ".Dense");
    if (!pooling && !dense) return 0;
    char name[PATH_MAX];
    snprintf(name, sizeof name, "%s/config.json", path);
    if (!has_file(c->dir, name, c->missing, c->cap)) c->complete = 0;
    snprintf(name, sizeof name, "%s/model.safetensors", path);
    if (dense && c->complete && !has_file(c->dir, name, c->missing, c->cap)) c->complete = 0;
    return 0;
}

int iv_hub_snapshot_complete(const char *snapshot_dir, char *missing, size_t cap)
{
    char scratch[PATH_MAX];
    if (!missing) {
        missing = scratch;
        cap = sizeof scratch;
    }
    missing[0] = 0;
    if (has_file(snapshot_dir, "rl_agent_config.json", missing, cap)) /* a Laya checkpoint */
        return has_file(snapshot_dir, "model.safetensors", missing, cap) &&
               has_file(snapshot_dir, "encoder/config.json", missing, cap) &&
               has_file(snapshot_dir, "tokenizer/tokenizer.json", missing, cap);
    missing[0] = 0;
    if (!has_file(snapshot_dir, "config.json", missing, cap)) return 0;
    if (!has_file(snapshot_dir, "tokenizer.json", missing, cap) &&
        !has_file(snapshot_dir, "vocab.txt", missing, cap)) {
        snprintf(missing, cap, "tokenizer.json");
        return 0;
    }
    if (!has_file(snapshot_dir, "model.safetensors", missing, cap)) {
        if (!has_file(snapshot_dir, "model.safetensors.index.json", missing, cap)) {
            snprintf(missing, cap, "model.safetensors");
            return 0;
        }
        char path[PATH_MAX];
        iv_path_join(path, sizeof path, snapshot_dir, "model.safetensors.index.json");
        iv_strlist shards = {0};
        iv_err e;
        int ok = add_shards(path, &shards, &e) == 0;
        for (int i = 0; ok && i < shards.n; i++)
            ok = has_file(snapshot_dir, shards.items[i], missing, cap);
        if (!ok && !missing[0]) snprintf(missing, cap, "model.safetensors.index.json");
        iv_strlist_free(&shards);
        if (!ok) return 0;
    }
    missing[0] = 0;
    char modules[PATH_MAX];
    iv_path_join(modules, sizeof modules, snapshot_dir, "modules.json");
    if (iv_file_exists(modules)) {
        module_check c = {snapshot_dir, missing, cap, 1};
        iv_err e;
        if (for_each_module(modules, check_module, &c, &e)) {
            snprintf(missing, cap, "modules.json");
            return 0;
        }
        if (!c.complete) return 0;
    }
    return 1;
}
