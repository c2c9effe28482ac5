#include "decisions/laya_config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "base/file.h"
#include "base/json.h"

/* laya common.clamp_temperature: not a finite number -> 1.0, else confined
 * to [0.5, 5] (a shipped choice:11+ of 0.1006 would sharpen ~10x). */
static double clamp_temperature(const cJSON *v)
{
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) return 1.0;
    const double t = v->valuedouble;
    return t < IV_LAYA_TEMP_MIN ? IV_LAYA_TEMP_MIN : t > IV_LAYA_TEMP_MAX ? IV_LAYA_TEMP_MAX : t;
}

static int bucket_of(int k) { return k <= 2 ? 0 : k <= 5 ? 1 : k <= 10 ? 2 : 3; }

static int parse_bucket_key(const char *key, int *type, int *bucket)
{
    static const char *const types[] = {"choice", "score", "noul"};
    static const char *const buckets[] = {"2", "3-5", "6-10", "11+"};
    const char *colon = strchr(key, ':');
    if (!colon) return -1;
    *type = *bucket = -1;
    for (int i = 0; i < 3; i++)
        if (strlen(types[i]) == (size_t)(colon - key) && !strncmp(key, types[i], (size_t)(colon - key))) *type = i;
    for (int i = 0; i < 4; i++)
        if (!strcmp(colon + 1, buckets[i])) *bucket = i;
    return *type < 0 || *bucket < 0 ? -1 : 0;
}

static int positive_int(const cJSON *j, const char *key, int def, int min, int *out, iv_err *err)
{
    int64_t v;
    if (iv_json_int_chk(j, key, def, &v, "rl_agent_config.json", err)) return -1;
    if (v < min || v > 1 << 20)
        return iv_errf(err, IV_E_FORMAT, "rl_agent_config.json: \"%s\" = %lld is out of range", key, (long long)v);
    *out = (int)v;
    return 0;
}

static int parse_obj(iv_laya_config *c, const cJSON *j, iv_err *err)
{
    /* Keys laya's own code writes (train.py, agent.py) or the public
     * checkpoints carry; max_prefixes, amp_dtype, model_name, fine_tuned
     * and training do not change inference. */
    static const char *const known[] = {"encoder", "head_layers", "max_len", "head_max_len", "max_prefixes",
                                        "temperature", "temperature_by_options", "act_costs", "amp_dtype",
                                        "model_name", "fine_tuned", "training", NULL};
    if (!cJSON_IsObject(j)) return iv_errf(err, IV_E_FORMAT, "rl_agent_config.json: not a JSON object");
    for (const cJSON *it = j->child; it; it = it->next) {
        int ok = 0;
        for (int i = 0; known[i] && !ok; i++) ok = !strcmp(it->string, known[i]);
        if (!ok)
            return iv_errf(err, IV_E_UNSUPPORTED,
                           "rl_agent_config.json: unknown key \"%s\"; this Laya checkpoint asks for something "
                           "infinity_v3 does not implement",
                           it->string);
    }
    if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "encoder")))
        return iv_errf(err, IV_E_FORMAT, "rl_agent_config.json: \"encoder\" (a string) is required");
    if (!cJSON_GetObjectItemCaseSensitive(j, "head_layers"))
        return iv_errf(err, IV_E_FORMAT, "rl_agent_config.json: \"head_layers\" is required");
    if (positive_int(j, "head_layers", 2, 0, &c->head_layers, err) ||
        positive_int(j, "max_len", 512, 8, &c->max_len, err) ||
        positive_int(j, "head_max_len", 192, 8, &c->head_max_len, err))
        return -1;
    const cJSON *acts = cJSON_GetObjectItemCaseSensitive(j, "act_costs");
    if (acts && !cJSON_IsObject(acts))
        return iv_errf(err, IV_E_FORMAT, "rl_agent_config.json: \"act_costs\" must be an object");
    c->n_act = (acts ? cJSON_GetArraySize(acts) : 0) + 1;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "temperature");
    for (int i = 0; i < 3; i++) c->temperature[i] = 1.0;
    if (t) {
        if (!cJSON_IsArray(t) || cJSON_GetArraySize(t) != 3)
            return iv_errf(err, IV_E_FORMAT, "rl_agent_config.json: \"temperature\" must be a list of 3 numbers");
        for (int i = 0; i < 3; i++) c->temperature[i] = clamp_temperature(cJSON_GetArrayItem(t, i));
    }
    const cJSON *by = cJSON_GetObjectItemCaseSensitive(j, "temperature_by_options");
    if (by && !cJSON_IsObject(by))
        return iv_errf(err, IV_E_FORMAT, "rl_agent_config.json: \"temperature_by_options\" must be an object");
    for (const cJSON *it = by ? by->child : NULL; it; it = it->next) {
        int ty, bu;
        if (parse_bucket_key(it->string, &ty, &bu))
            return iv_errf(err, IV_E_UNSUPPORTED,
                           "rl_agent_config.json: temperature_by_options key \"%s\" is not <choice|score|noul>:<2|3-5|6-10|11+>",
                           it->string);
        c->by_options[ty][bu] = clamp_temperature(it);
    }
    return 0;
}

int iv_laya_config_parse(iv_laya_config *c, const char *json, size_t len, iv_err *err)
{
    memset(c, 0, sizeof *c);
    cJSON *j;
    if (iv_json_parse(json, len, "rl_agent_config.json", &j, err)) return -1;
    int rc = parse_obj(c, j, err);
    cJSON_Delete(j);
    return rc;
}

int iv_laya_config_load(iv_laya_config *c, const char *dir, iv_err *err)
{
    char path[4096];
    iv_path_join(path, sizeof path, dir, "rl_agent_config.json");
    memset(c, 0, sizeof *c);
    cJSON *j;
    if (iv_json_load_file(path, 1 << 20, &j, err)) return -1;
    int rc = parse_obj(c, j, err);
    cJSON_Delete(j);
    return rc;
}

double iv_laya_temperature(const iv_laya_config *c, iv_dq_type t, int k)
{
    const double b = c->by_options[t][bucket_of(k)];
    return b > 0 ? b : c->temperature[t];
}
