#include "image/processor_keys.h"

int iv_processor_key_bool(const cJSON *v, const char *key, int *out, iv_err *err)
{
    if (!cJSON_IsBool(v)) return iv_errf(err, IV_E_FORMAT, "preprocessor config: \"%s\" must be true or false", key);
    *out = cJSON_IsTrue(v);
    return 0;
}

int iv_processor_key_triple(const cJSON *v, const char *key, double out[3], iv_err *err)
{
    if (cJSON_IsNumber(v)) {
        out[0] = out[1] = out[2] = v->valuedouble;
        return 0;
    }
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 3)
        return iv_errf(err, IV_E_FORMAT, "preprocessor config: \"%s\" must be a number or a list of 3 numbers", key);
    for (int i = 0; i < 3; i++) {
        const cJSON *e = cJSON_GetArrayItem(v, i);
        if (!cJSON_IsNumber(e)) return iv_errf(err, IV_E_FORMAT, "preprocessor config: \"%s\" must hold numbers", key);
        out[i] = e->valuedouble;
    }
    return 0;
}
