/* sentence-transformers metadata. modules.json lists the pipeline a
 * SentenceTransformer runs after the backbone; we accept the modules whose
 * inference we reproduce (Pooling, Dense, Normalize, and Dropout, which is
 * the identity at inference) and refuse every other type by name, since
 * silently skipping a module changes the embeddings.
 *
 * Module "type" strings changed over releases: v2-v5 wrote the module path
 * ("sentence_transformers.models.Pooling"); v6 writes module path + class
 * ("sentence_transformers.sentence_transformer.modules.pooling.Pooling",
 * "sentence_transformers.base.modules.dense.Dense"). All forms are accepted.
 *
 * PyLate (ColBERT in the sentence-transformers layout) saves its Dense as
 * "pylate.models.Dense.Dense" (older releases: "pylate.models.Dense"); it
 * projects token embeddings, and its settings sit in
 * config_sentence_transformers.json next to the prompts. */
#include "heads/st_meta.h"

#include <cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/json.h"

/* Config files are a few hundred bytes; prompts can run to kilobytes. */
#define ST_JSON_MAX_BYTES (4u << 20)

typedef enum st_kind {
    ST_UNKNOWN = 0,
    ST_TRANSFORMER,
    ST_POOLING,
    ST_DENSE,
    ST_NORMALIZE,
    ST_DROPOUT,
    ST_PYLATE_DENSE,
    ST_LOGIT_SCORE,
} st_kind;

static st_kind module_kind(const char *type)
{
    if (!strcmp(type, "pylate.models.Dense.Dense") || !strcmp(type, "pylate.models.Dense")) return ST_PYLATE_DENSE;
    if (!strcmp(type, "sentence_transformers.cross_encoder.modules.logit_score.LogitScore") ||
        !strcmp(type, "sentence_transformers.cross_encoder.modules.LogitScore"))
        return ST_LOGIT_SCORE;
    static const char *const k_prefixes[] = {
        "sentence_transformers.models.",
        "sentence_transformers.base.modules.",
        "sentence_transformers.sentence_transformer.modules.",
    };
    static const struct {
        const char *cls, *file;
        st_kind kind;
    } k_mods[] = {
        {"Transformer", "transformer", ST_TRANSFORMER}, {"Pooling", "pooling", ST_POOLING},
        {"Dense", "dense", ST_DENSE},                   {"Normalize", "normalize", ST_NORMALIZE},
        {"Dropout", "dropout", ST_DROPOUT},
    };
    for (size_t p = 0; p < sizeof k_prefixes / sizeof k_prefixes[0]; p++) {
        size_t n = strlen(k_prefixes[p]);
        if (strncmp(type, k_prefixes[p], n) != 0) continue;
        const char *rest = type + n;
        for (size_t m = 0; m < sizeof k_mods / sizeof k_mods[0]; m++) {
            char file_cls[64], cls_cls[64];
            snprintf(file_cls, sizeof file_cls, "%s.%s", k_mods[m].file, k_mods[m].cls);
            snprintf(cls_cls, sizeof cls_cls, "%s.%s", k_mods[m].cls, k_mods[m].cls);
            if (!strcmp(rest, k_mods[m].cls) || !strcmp(rest, file_cls) || !strcmp(rest, cls_cls))
                return k_mods[m].kind;
        }
    }
    return ST_UNKNOWN;
}

int iv_act_from_torch_name(const char *name)
{
    static const struct {
        const char *cls;
        iv_act act;
    } k[] = {
        {"Tanh", IV_ACT_TANH}, {"ReLU", IV_ACT_RELU},       {"GELU", IV_ACT_GELU},
        {"SiLU", IV_ACT_SILU}, {"Sigmoid", IV_ACT_SIGMOID},
    };
    if (!strcmp(name, "torch.nn.modules.linear.Identity") || !strcmp(name, "torch.nn.Identity")) return IV_ACT_NONE;
    const char *cls = NULL;
    if (!strncmp(name, "torch.nn.modules.activation.", 28)) cls = name + 28;
    else if (!strncmp(name, "torch.nn.", 9)) cls = name + 9;
    if (!cls) return -1;
    /* torch reconstructs GELU() with approximate="none": erf GELU. */
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (!strcmp(cls, k[i].cls)) return (int)k[i].act;
    return -1;
}

const char *iv_pool_mode_name(iv_pool_mode m)
{
    switch (m) {
    case IV_POOL_NONE: return "none";
    case IV_POOL_CLS: return "cls";
    case IV_POOL_MEAN: return "mean";
    case IV_POOL_MAX: return "max";
    case IV_POOL_LAST: return "lasttoken";
    case IV_POOL_MEAN_SQRT_LEN: return "mean_sqrt_len_tokens";
    case IV_POOL_WEIGHTED_MEAN: return "weightedmean";
    }
    return "?";
}

/* The names of the current "pooling_mode" and of the legacy boolean keys,
 * in the order sentence-transformers concatenates them. */
static const struct {
    const char *mode, *legacy_key;
    iv_pool_mode pool;
} k_pool_modes[] = {
    {"cls", "pooling_mode_cls_token", IV_POOL_CLS},
    {"max", "pooling_mode_max_tokens", IV_POOL_MAX},
    {"mean", "pooling_mode_mean_tokens", IV_POOL_MEAN},
    {"mean_sqrt_len_tokens", "pooling_mode_mean_sqrt_len_tokens", IV_POOL_MEAN_SQRT_LEN},
    {"weightedmean", "pooling_mode_weightedmean_tokens", IV_POOL_WEIGHTED_MEAN},
    {"lasttoken", "pooling_mode_lasttoken", IV_POOL_LAST},
};
#define ST_N_POOL_MODES ((int)(sizeof k_pool_modes / sizeof k_pool_modes[0]))

static int pool_from_mode_name(const char *s)
{
    for (int i = 0; i < ST_N_POOL_MODES; i++)
        if (!strcmp(s, k_pool_modes[i].mode)) return (int)k_pool_modes[i].pool;
    return -1;
}

/* A module directory must stay inside the model directory. */
static int rel_path_ok(const char *p)
{
    if (p[0] == '/') return 0;
    for (const char *s = p; *s;) {
        const char *slash = strchr(s, '/');
        size_t n = slash ? (size_t)(slash - s) : strlen(s);
        if (n == 2 && s[0] == '.' && s[1] == '.') return 0;
        if (!slash) break;
        s = slash + 1;
    }
    return 1;
}

static int load_module_config(const char *dir, const char *module_name, const char *type_name, cJSON **out,
                              char *path, size_t cap, iv_err *err)
{
    iv_path_join(path, cap, dir, "config.json");
    if (!iv_file_exists(path))
        return iv_errf(err, IV_E_NOTFOUND, "%s module \"%s\" has no config.json (looked for %s)", type_name,
                       module_name, path);
    if (iv_json_load_file(path, ST_JSON_MAX_BYTES, out, err)) return -1;
    if (!cJSON_IsObject(*out)) {
        cJSON_Delete(*out);
        *out = NULL;
        return iv_errf(err, IV_E_FORMAT, "%s: must be a JSON object", path);
    }
    return 0;
}

static int add_pool_mode(iv_st_meta *m, iv_pool_mode pool, const char *path, iv_err *err)
{
    if (m->n_pool_modes == IV_ST_MAX_POOL_MODES)
        return iv_errf(err, IV_E_UNSUPPORTED, "%s: more than %d pooling modes", path, IV_ST_MAX_POOL_MODES);
    m->pool_modes[m->n_pool_modes++] = pool;
    m->pool = m->pool_modes[0];
    return 0;
}

static int pool_mode_item(iv_st_meta *m, const cJSON *it, const char *path, iv_err *err)
{
    if (!cJSON_IsString(it))
        return iv_errf(err, IV_E_FORMAT, "%s: \"pooling_mode\" must be a string or a list of strings", path);
    int pool = pool_from_mode_name(it->valuestring);
    if (pool < 0)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "%s: unknown pooling_mode \"%.64s\" (known: cls, max, mean, mean_sqrt_len_tokens, "
                       "weightedmean, lasttoken)",
                       path, it->valuestring);
    return add_pool_mode(m, (iv_pool_mode)pool, path, err);
}

/* One mode or several: sentence-transformers' Pooling concatenates several
 * modes' vectors in the order of its "pooling_mode" list, or for the legacy
 * boolean keys in k_pool_modes' order (_LEGACY_POOLING_MODE_KWARGS). */
static int parse_pooling(iv_st_meta *m, const cJSON *cfg, const char *path, iv_err *err)
{
    if (iv_json_bool_chk(cfg, "include_prompt", 1, &m->pool_include_prompt, path, err)) return -1;
    m->n_pool_modes = 0;
    const cJSON *pm = iv_json_get(cfg, "pooling_mode");
    if (pm && !cJSON_IsNull(pm)) { /* the current form wins over legacy keys, as in sentence-transformers */
        if (!cJSON_IsArray(pm)) return pool_mode_item(m, pm, path, err);
        if (cJSON_GetArraySize(pm) == 0)
            return iv_errf(err, IV_E_FORMAT, "%s: \"pooling_mode\" is an empty list", path);
        const cJSON *it;
        cJSON_ArrayForEach(it, pm) if (pool_mode_item(m, it, path, err)) return -1;
        return 0;
    }
    for (int i = 0; i < ST_N_POOL_MODES; i++) {
        int on;
        if (iv_json_bool_chk(cfg, k_pool_modes[i].legacy_key, 0, &on, path, err)) return -1;
        if (on && add_pool_mode(m, k_pool_modes[i].pool, path, err)) return -1;
    }
    /* no mode enabled: sentence-transformers falls back to mean */
    return m->n_pool_modes ? 0 : add_pool_mode(m, IV_POOL_MEAN, path, err);
}

static int parse_dense(iv_st_dense *d, const cJSON *cfg, const char *path, iv_err *err)
{
    int64_t in, out;
    if (iv_json_int_chk(cfg, "in_features", 0, &in, path, err) ||
        iv_json_int_chk(cfg, "out_features", 0, &out, path, err))
        return -1;
    if (in <= 0 || in > INT_MAX || out <= 0 || out > INT_MAX)
        return iv_errf(err, IV_E_FORMAT, "%s: \"in_features\" and \"out_features\" must be positive integers", path);
    d->in_features = (int)in;
    d->out_features = (int)out;
    if (iv_json_bool_chk(cfg, "bias", 1, &d->bias, path, err)) return -1;

    /* Absent: the Dense default, Tanh. null: sentence-transformers builds Identity. */
    const cJSON *af = iv_json_get(cfg, "activation_function");
    if (!af) {
        d->act = IV_ACT_TANH;
    } else if (cJSON_IsNull(af)) {
        d->act = IV_ACT_NONE;
    } else {
        if (!cJSON_IsString(af))
            return iv_errf(err, IV_E_FORMAT, "%s: \"activation_function\" must be a string", path);
        int act = iv_act_from_torch_name(af->valuestring);
        if (act < 0)
            return iv_errf(err, IV_E_UNSUPPORTED,
                           "%s: activation_function \"%.128s\" is not supported (known: Identity, Tanh, ReLU, GELU, "
                           "SiLU, Sigmoid from torch.nn)",
                           path, af->valuestring);
        d->act = (iv_act)act;
    }

    int residual;
    if (iv_json_bool_chk(cfg, "use_residual", 0, &residual, path, err)) return -1;
    if (residual) return iv_errf(err, IV_E_UNSUPPORTED, "%s: Dense with use_residual is not supported", path);
    const char *in_name = iv_json_str(cfg, "module_input_name", "sentence_embedding");
    const char *out_name = iv_json_str(cfg, "module_output_name", in_name);
    if (strcmp(in_name, "sentence_embedding") && strcmp(in_name, "token_embeddings"))
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "%s: Dense reading \"%.64s\" is not supported (only sentence_embedding or token_embeddings)",
                       path, in_name);
    /* A CrossEncoder's last Dense turns the pooled state into its "scores"
     * (finish_cross_encoder checks the model type). */
    d->scores = !strcmp(in_name, "sentence_embedding") && !strcmp(out_name, "scores");
    if (strcmp(out_name, in_name) && !d->scores)
        return iv_errf(err, IV_E_UNSUPPORTED, "%s: Dense writing \"%.64s\" from \"%s\" is not supported", path,
                       out_name, in_name);
    d->token_level = !strcmp(in_name, "token_embeddings");
    return 0;
}

static int token_id_field(const cJSON *cfg, const char *key, int required, int32_t *out, const char *path,
                          iv_err *err)
{
    const cJSON *v = iv_json_get(cfg, key);
    *out = -1;
    if ((!v || cJSON_IsNull(v)) && !required) return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > INT32_MAX || v->valuedouble != (int32_t)v->valuedouble)
        return iv_errf(err, IV_E_FORMAT, "%s: \"%s\" must be a token id (a non-negative integer)%s", path, key,
                       required ? "" : " or null");
    *out = (int32_t)v->valuedouble;
    return 0;
}

static int parse_logit_score(iv_st_logit_score *ls, const cJSON *cfg, const char *path, iv_err *err)
{
    if (token_id_field(cfg, "true_token_id", 1, &ls->true_id, path, err) ||
        token_id_field(cfg, "false_token_id", 0, &ls->false_id, path, err))
        return -1;
    const char *in = iv_json_str(cfg, "module_input_name", "causal_logits");
    if (strcmp(in, "causal_logits"))
        return iv_errf(err, IV_E_UNSUPPORTED, "%s: LogitScore reading \"%.64s\" is not supported (causal_logits)",
                       path, in);
    return 0;
}

static int load_modules(iv_st_meta *m, const char *model_dir, const char *modules_path, iv_err *err)
{
    cJSON *root;
    if (iv_json_load_file(modules_path, ST_JSON_MAX_BYTES, &root, err)) return -1;
    int rc = 0, seen_transformer = 0, seen_pooling = 0;
    if (!cJSON_IsArray(root)) {
        rc = iv_errf(err, IV_E_FORMAT, "%s: must be a list of modules", modules_path);
        goto done;
    }
    const cJSON *it;
    int idx = 0;
    cJSON_ArrayForEach(it, root)
    {
        const char *type = iv_json_str(it, "type", NULL);
        const char *rel = iv_json_str(it, "path", "");
        char name[64];
        snprintf(name, sizeof name, "%.48s", iv_json_str(it, "name", ""));
        if (!name[0]) snprintf(name, sizeof name, "%d", idx);
        idx++;
        if (!cJSON_IsObject(it) || !type) {
            rc = iv_errf(err, IV_E_FORMAT, "%s: module %s needs a string \"type\"", modules_path, name);
            break;
        }
        if (!rel_path_ok(rel)) {
            rc = iv_errf(err, IV_E_FORMAT, "%s: module %s path \"%.128s\" leaves the model directory", modules_path,
                         name, rel);
            break;
        }
        char dir[PATH_MAX], cfg_path[PATH_MAX];
        if (rel[0]) iv_path_join(dir, sizeof dir, model_dir, rel);
        else snprintf(dir, sizeof dir, "%s", model_dir);
        cJSON *cfg = NULL;
        switch (module_kind(type)) {
        case ST_TRANSFORMER:
            if (seen_transformer++) {
                rc = iv_errf(err, IV_E_UNSUPPORTED, "%s: more than one Transformer module", modules_path);
                break;
            }
            snprintf(m->backbone_dir, sizeof m->backbone_dir, "%s", dir);
            break;
        case ST_POOLING:
            if (seen_pooling++)
                rc = iv_errf(err, IV_E_UNSUPPORTED, "%s: more than one Pooling module", modules_path);
            else if (m->normalize)
                rc = iv_errf(err, IV_E_UNSUPPORTED, "%s: Pooling after Normalize is not supported", modules_path);
            else if (!load_module_config(dir, name, "Pooling", &cfg, cfg_path, sizeof cfg_path, err))
                rc = parse_pooling(m, cfg, cfg_path, err);
            else
                rc = -1;
            break;
        case ST_DENSE:
        case ST_PYLATE_DENSE: {
            if (m->n_dense == IV_ST_MAX_DENSE) {
                rc = iv_errf(err, IV_E_UNSUPPORTED, "%s: more than %d Dense modules", modules_path, IV_ST_MAX_DENSE);
                break;
            }
            if (m->normalize) {
                rc = iv_errf(err, IV_E_UNSUPPORTED, "%s: Dense module %s after Normalize is not supported",
                             modules_path, name);
                break;
            }
            iv_st_dense *d = &m->dense[m->n_dense];
            memset(d, 0, sizeof *d);
            snprintf(d->dir, sizeof d->dir, "%s", dir);
            if (load_module_config(dir, name, "Dense", &cfg, cfg_path, sizeof cfg_path, err) ||
                parse_dense(d, cfg, cfg_path, err)) {
                rc = -1;
                break;
            }
            if (module_kind(type) == ST_PYLATE_DENSE) {
                d->token_level = 1; /* PyLate's Dense always reads token_embeddings */
                m->pylate.present = 1;
            }
            if (d->token_level && seen_pooling)
                rc = iv_errf(err, IV_E_UNSUPPORTED, "%s: token-level Dense module %s after Pooling is not supported",
                             modules_path, name);
            else if (!d->token_level && !seen_pooling)
                rc = iv_errf(err, IV_E_UNSUPPORTED,
                             "%s: Dense module %s projects the sentence embedding but comes before any Pooling module",
                             modules_path, name);
            else
                m->n_dense++;
            break;
        }
        case ST_LOGIT_SCORE:
            if (m->logit_score.present++ || seen_pooling || m->n_dense || m->normalize)
                rc = iv_errf(err, IV_E_UNSUPPORTED, "%s: LogitScore must be the one module after the Transformer",
                             modules_path);
            else if (!load_module_config(dir, name, "LogitScore", &cfg, cfg_path, sizeof cfg_path, err))
                rc = parse_logit_score(&m->logit_score, cfg, cfg_path, err);
            else
                rc = -1;
            break;
        case ST_NORMALIZE:
            m->normalize = 1;
            break;
        case ST_DROPOUT:
            break; /* the identity at inference */
        case ST_UNKNOWN:
            rc = iv_errf(err, IV_E_UNSUPPORTED,
                         "%s: module %s has type %.200s, which infinity_v3 does not support (supported: Transformer, "
                         "Pooling, Dense, Normalize, Dropout, LogitScore, pylate.models.Dense)",
                         modules_path, name, type);
            break;
        }
        cJSON_Delete(cfg);
        if (rc) break;
    }
done:
    cJSON_Delete(root);
    return rc;
}

/* The Transformer module's config file: sentence-transformers 6.3
 * (Transformer.load_config) tries these names in this order, the first
 * found wins; older saves used per-family names. */
static const char *const k_bert_config_names[] = {
    "sentence_bert_config.json",      "sentence_roberta_config.json", "sentence_distilbert_config.json",
    "sentence_camembert_config.json", "sentence_albert_config.json",  "sentence_xlm-roberta_config.json",
    "sentence_xlnet_config.json",
};

static int find_bert_config(const iv_st_meta *m, const char *model_dir, char *path, size_t cap)
{
    const char *dirs[2] = {m->backbone_dir, model_dir};
    for (int d = 0; d < 2; d++)
        for (size_t i = 0; i < sizeof k_bert_config_names / sizeof *k_bert_config_names; i++) {
            iv_path_join(path, cap, dirs[d], k_bert_config_names[i]);
            if (iv_file_exists(path)) return 1;
        }
    return 0;
}

/* A model_max_length the config passes to the tokenizer: "processor_kwargs",
 * or "tokenizer_args" as older saves call it (0 when absent). */
static int kwargs_model_max_length(const cJSON *cfg, int64_t *out, const char *path, iv_err *err)
{
    *out = 0;
    const char *keys[2] = {"processor_kwargs", "tokenizer_args"};
    for (int k = 0; k < 2; k++) {
        const cJSON *kw = iv_json_get(cfg, keys[k]);
        if (!cJSON_IsObject(kw)) continue;
        const cJSON *v = iv_json_get(kw, "model_max_length");
        if (!v || cJSON_IsNull(v)) continue;
        if (iv_json_int_chk(kw, "model_max_length", 0, out, path, err)) return -1;
    }
    return 0;
}

/* modality_config "message" turns every input into a conversation
 * (sentence-transformers 6.3 Transformer.preprocess: "Always convert to the
 * message format if it's supported"); its "format" says how text content is
 * written. processing_kwargs "chat_template" holds apply_chat_template
 * kwargs (template variables such as add_generation_prompt), plus
 * sentence-transformers' own "restore_suffix" (default true). */
static int parse_messages(iv_st_messages *msg, const cJSON *cfg, const char *path, iv_err *err)
{
    msg->restore_suffix = 1;
    const cJSON *mc = iv_json_get(cfg, "modality_config");
    if (mc && !cJSON_IsNull(mc) && !cJSON_IsObject(mc))
        return iv_errf(err, IV_E_FORMAT, "%s: \"modality_config\" must be an object", path);
    const cJSON *message = iv_json_get(mc, "message");
    if (message) {
        if (!cJSON_IsObject(message))
            return iv_errf(err, IV_E_FORMAT, "%s: modality_config \"message\" must be an object", path);
        msg->enabled = 1;
        const char *fmt = iv_json_str(message, "format", "auto");
        if (!strcmp(fmt, "flat")) msg->format = IV_ST_MESSAGES_FLAT;
        else if (!strcmp(fmt, "structured")) msg->format = IV_ST_MESSAGES_STRUCTURED;
        else if (!strcmp(fmt, "auto")) msg->format = IV_ST_MESSAGES_AUTO;
        else
            return iv_errf(err, IV_E_FORMAT, "%s: modality_config message format \"%.32s\" is not one of auto, flat, "
                                             "structured", path, fmt);
    }
    const cJSON *kw = iv_json_get(iv_json_get(cfg, "processing_kwargs"), "chat_template");
    if (!kw || cJSON_IsNull(kw)) return 0;
    if (!cJSON_IsObject(kw))
        return iv_errf(err, IV_E_FORMAT, "%s: processing_kwargs \"chat_template\" must be an object", path);
    if (iv_json_bool_chk(kw, "restore_suffix", 1, &msg->restore_suffix, path, err)) return -1;
    if (!(msg->template_kwargs = cJSON_Duplicate(kw, 1))) return iv_errf(err, IV_E_NOMEM, "out of memory");
    cJSON_DeleteItemFromObjectCaseSensitive(msg->template_kwargs, "restore_suffix");
    return 0;
}

/* sentence_bert_config.json sits with the Transformer module (usually the
 * model root). Its length limit, as sentence-transformers 6.3's Transformer
 * takes it: processor_kwargs (tokenizer_args) model_max_length, else
 * max_seq_length; either replaces the tokenizer's own model_max_length and is
 * not capped by max_position_embeddings (engine/max_length.c). */
static int load_bert_config(iv_st_meta *m, const char *model_dir, iv_err *err)
{
    char path[PATH_MAX];
    if (!find_bert_config(m, model_dir, path, sizeof path)) return 0;
    cJSON *cfg;
    if (iv_json_load_file(path, ST_JSON_MAX_BYTES, &cfg, err)) return -1;
    int64_t msl = 0, kw = 0;
    int rc = 0;
    if (!cJSON_IsObject(cfg)) rc = iv_errf(err, IV_E_FORMAT, "%s: must be a JSON object", path);
    else if (iv_json_int_chk(cfg, "max_seq_length", 0, &msl, path, err) ||
             kwargs_model_max_length(cfg, &kw, path, err) ||
             iv_json_bool_chk(cfg, "do_lower_case", 0, &m->do_lower_case, path, err) ||
             parse_messages(&m->messages, cfg, path, err))
        rc = -1;
    else if (kw > 0)
        msl = kw;
    if (!rc && (msl < 0 || msl > INT_MAX))
        rc = iv_errf(err, IV_E_FORMAT, "%s: \"max_seq_length\" %lld is out of range", path, (long long)msl);
    m->max_seq_length = (int)(rc ? 0 : msl);
    cJSON_Delete(cfg);
    return rc;
}

/* Reads an optional string-or-null field into a malloc'd copy. */
static int dup_opt_str(const cJSON *obj, const char *key, char **out, const char *path, iv_err *err)
{
    const cJSON *v = iv_json_get(obj, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsString(v)) return iv_errf(err, IV_E_FORMAT, "%s: \"%s\" must be a string or null", path, key);
    *out = strdup(v->valuestring);
    return *out ? 0 : iv_errf(err, IV_E_NOMEM, "out of memory reading %s", path);
}

static int pylate_int(const cJSON *cfg, const char *key, int *val, const char *path, iv_err *err)
{
    int64_t v;
    if (iv_json_int_chk(cfg, key, *val, &v, path, err)) return -1;
    if (v <= 0 || v > INT_MAX) return iv_errf(err, IV_E_FORMAT, "%s: \"%s\" must be a positive integer", path, key);
    *val = (int)v;
    return 0;
}

/* PyLate's keys; absent ones keep the defaults set by iv_st_meta_load. */
static int parse_pylate(iv_st_pylate *p, const cJSON *cfg, const char *path, iv_err *err)
{
    char *q = NULL, *d = NULL;
    if (dup_opt_str(cfg, "query_prefix", &q, path, err) || dup_opt_str(cfg, "document_prefix", &d, path, err)) {
        free(q);
        return -1;
    }
    if (q) {
        free(p->query_prefix);
        p->query_prefix = q;
    }
    if (d) {
        free(p->document_prefix);
        p->document_prefix = d;
    }
    if (pylate_int(cfg, "query_length", &p->query_length, path, err) ||
        pylate_int(cfg, "document_length", &p->document_length, path, err) ||
        iv_json_bool_chk(cfg, "do_query_expansion", p->do_query_expansion, &p->do_query_expansion, path, err) ||
        iv_json_bool_chk(cfg, "attend_to_expansion_tokens", p->attend_to_expansion_tokens,
                         &p->attend_to_expansion_tokens, path, err))
        return -1;
    if (!p->do_query_expansion) p->attend_to_expansion_tokens = 0;
    const cJSON *sk = iv_json_get(cfg, "skiplist_words");
    if (!sk || cJSON_IsNull(sk)) return 0;
    if (!cJSON_IsArray(sk)) return iv_errf(err, IV_E_FORMAT, "%s: \"skiplist_words\" must be a list of strings", path);
    int n = cJSON_GetArraySize(sk);
    p->skiplist_words = calloc((size_t)(n ? n : 1), sizeof *p->skiplist_words);
    if (!p->skiplist_words) return iv_errf(err, IV_E_NOMEM, "out of memory reading %s", path);
    p->n_skiplist = 0;
    const cJSON *w;
    cJSON_ArrayForEach(w, sk)
    {
        if (!cJSON_IsString(w))
            return iv_errf(err, IV_E_FORMAT, "%s: \"skiplist_words\" must be a list of strings", path);
        if (!(p->skiplist_words[p->n_skiplist] = strdup(w->valuestring)))
            return iv_errf(err, IV_E_NOMEM, "out of memory reading %s", path);
        p->n_skiplist++;
    }
    return 0;
}

static int load_st_config(iv_st_meta *m, const char *model_dir, iv_err *err)
{
    char path[PATH_MAX];
    iv_path_join(path, sizeof path, model_dir, "config_sentence_transformers.json");
    if (!iv_file_exists(path)) return 0;
    cJSON *cfg;
    if (iv_json_load_file(path, ST_JSON_MAX_BYTES, &cfg, err)) return -1;
    int rc = 0;
    if (!cJSON_IsObject(cfg)) {
        rc = iv_errf(err, IV_E_FORMAT, "%s: must be a JSON object", path);
        goto done;
    }
    const cJSON *prompts = iv_json_get(cfg, "prompts");
    if (prompts && !cJSON_IsNull(prompts)) {
        if (!cJSON_IsObject(prompts)) {
            rc = iv_errf(err, IV_E_FORMAT, "%s: \"prompts\" must be an object of name -> text", path);
            goto done;
        }
        const cJSON *p;
        cJSON_ArrayForEach(p, prompts)
        {
            if (!cJSON_IsString(p)) {
                rc = iv_errf(err, IV_E_FORMAT, "%s: prompt \"%.64s\" must be a string", path, p->string);
                goto done;
            }
            if (m->n_prompts == IV_ST_MAX_PROMPTS) {
                rc = iv_errf(err, IV_E_UNSUPPORTED, "%s: more than %d prompts", path, IV_ST_MAX_PROMPTS);
                goto done;
            }
            iv_st_prompt *dst = &m->prompts[m->n_prompts];
            dst->name = strdup(p->string);
            dst->text = strdup(p->valuestring);
            m->n_prompts++; /* counted before the check so free() sees both */
            if (!dst->name || !dst->text) {
                rc = iv_errf(err, IV_E_NOMEM, "out of memory reading %s", path);
                goto done;
            }
        }
    }
    if (dup_opt_str(cfg, "default_prompt_name", &m->default_prompt_name, path, err) ||
        dup_opt_str(cfg, "similarity_fn_name", &m->similarity_fn, path, err)) {
        rc = -1;
        goto done;
    }
    if (m->default_prompt_name && !iv_st_meta_prompt(m, m->default_prompt_name)) {
        rc = iv_errf(err, IV_E_FORMAT, "%s: default_prompt_name \"%.64s\" is not one of the prompts", path,
                     m->default_prompt_name);
        goto done;
    }
    if (!strcmp(iv_json_str(cfg, "model_type", ""), "ColBERT")) m->pylate.present = 1;
    if (!strcmp(iv_json_str(cfg, "model_type", ""), "CrossEncoder")) m->cross_encoder = 1;
    if (m->pylate.present) rc = parse_pylate(&m->pylate, cfg, path, err);
done:
    cJSON_Delete(cfg);
    return rc;
}

/* A PyLate model runs Transformer then its Dense chain over every token
 * (PyLate keeps only those modules, and converts sentence-transformers Dense
 * modules to its own); a Pooling module there would mean something else. */
static int finish_pylate(iv_st_meta *m, iv_err *err)
{
    if (!m->pylate.present) return 0;
    if (m->pool != IV_POOL_NONE)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "PyLate ColBERT checkpoint with a Pooling module: PyLate drops it, and infinity_v3 does not "
                       "guess which output is meant");
    for (int i = 0; i < m->n_dense; i++) m->dense[i].token_level = 1;
    return 0;
}

/* A sentence-transformers CrossEncoder lists the modules that compute its
 * scores (NVIDIA's reranker export: Pooling mean, then a Dense writing
 * "scores" with the score head's weight / temperature). They describe the
 * checkpoint's own classification head, which the model file loads and the
 * engine scores with; they are not an embedding pipeline, so none is kept.
 * A Dense writing "scores" anywhere else has no meaning here. */
static int finish_cross_encoder(iv_st_meta *m, iv_err *err)
{
    for (int i = 0; i < m->n_dense; i++)
        if (m->dense[i].scores && (!m->cross_encoder || i != m->n_dense - 1))
            return iv_errf(err, IV_E_UNSUPPORTED,
                           "%s: a Dense writing \"scores\" is supported only as the last module of a "
                           "CrossEncoder (config_sentence_transformers.json model_type)",
                           m->dense[i].dir);
    if (!m->cross_encoder) return 0;
    m->n_dense = 0;
    m->n_pool_modes = 0;
    m->pool = IV_POOL_NONE;
    m->normalize = 0;
    return 0;
}

int iv_st_meta_load(iv_st_meta *out, const char *model_dir, iv_err *err)
{
    memset(out, 0, sizeof *out);
    out->pool_include_prompt = 1;
    out->messages.restore_suffix = 1;
    iv_st_pylate *p = &out->pylate;
    p->query_prefix = strdup("[Q] ");
    p->document_prefix = strdup("[D] ");
    p->query_length = 32;
    p->document_length = 180;
    p->do_query_expansion = 1;
    p->n_skiplist = -1;
    if (!p->query_prefix || !p->document_prefix) {
        iv_st_meta_free(out);
        return iv_errf(err, IV_E_NOMEM, "out of memory");
    }
    snprintf(out->backbone_dir, sizeof out->backbone_dir, "%s", model_dir);
    char path[PATH_MAX];
    iv_path_join(path, sizeof path, model_dir, "modules.json");
    int rc = 0;
    if (iv_file_exists(path)) {
        out->present = 1;
        rc = load_modules(out, model_dir, path, err);
    }
    if (!rc) rc = load_bert_config(out, model_dir, err);
    if (!rc) rc = load_st_config(out, model_dir, err);
    if (!rc) rc = finish_pylate(out, err);
    if (!rc) rc = finish_cross_encoder(out, err);
    if (rc) iv_st_meta_free(out);
    return rc;
}

void iv_st_meta_free(iv_st_meta *m)
{
    for (int i = 0; i < m->n_prompts; i++) {
        free(m->prompts[i].name);
        free(m->prompts[i].text);
    }
    free(m->default_prompt_name);
    free(m->similarity_fn);
    free(m->pylate.query_prefix);
    free(m->pylate.document_prefix);
    for (int i = 0; i < m->pylate.n_skiplist; i++) free(m->pylate.skiplist_words[i]);
    free(m->pylate.skiplist_words);
    cJSON_Delete(m->messages.template_kwargs);
    memset(m, 0, sizeof *m);
}

const char *iv_st_meta_prompt(const iv_st_meta *m, const char *name)
{
    for (int i = 0; i < m->n_prompts; i++)
        if (!strcmp(m->prompts[i].name, name)) return m->prompts[i].text;
    return NULL;
}
