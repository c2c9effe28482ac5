#include "base/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "base/file.h"

int iv_json_parse(const char *buf, size_t len, const char *what, cJSON **out, iv_err *err)
{
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
    if (!j) {
        size_t off = end ? (size_t)(end - buf) : 0;
        return iv_errf(err, IV_E_FORMAT, "%s: malformed JSON near byte %zu", what, off);
    }
    *out = j;
    return 0;
}

int iv_json_load_file(const char *path, size_t max_size, cJSON **out, iv_err *err)
{
    char *buf;
    size_t len;
    if (iv_file_read_all(path, max_size, &buf, &len, err)) return -1;
    int rc = iv_json_parse(buf, len, path, out, err);
    free(buf);
    return rc;
}

static const cJSON *item(const cJSON *obj, const char *key)
{
    if (!obj || !cJSON_IsObject(obj)) return NULL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v)) return NULL;
    return v;
}

int iv_json_is_integer(const cJSON *v)
{
    if (!cJSON_IsNumber(v)) return 0;
    double d = v->valuedouble;
    return isfinite(d) && d == floor(d) && fabs(d) <= 9007199254740992.0;
}

int64_t iv_json_int(const cJSON *obj, const char *key, int64_t def)
{
    const cJSON *v = item(obj, key);
    return v && iv_json_is_integer(v) ? (int64_t)v->valuedouble : def;
}

double iv_json_num(const cJSON *obj, const char *key, double def)
{
    const cJSON *v = item(obj, key);
    return v && cJSON_IsNumber(v) ? v->valuedouble : def;
}

int iv_json_bool(const cJSON *obj, const char *key, int def)
{
    const cJSON *v = item(obj, key);
    return v && cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}

const char *iv_json_str(const cJSON *obj, const char *key, const char *def)
{
    const cJSON *v = item(obj, key);
    return v && cJSON_IsString(v) ? v->valuestring : def;
}

int iv_json_int_chk(const cJSON *obj, const char *key, int64_t def, int64_t *out, const char *what,
                    iv_err *err)
{
    const cJSON *v = item(obj, key);
    if (!v) { *out = def; return 0; }
    if (!iv_json_is_integer(v))
        return iv_errf(err, IV_E_FORMAT, "%s: \"%s\" must be an integer", what, key);
    *out = (int64_t)v->valuedouble;
    return 0;
}

int iv_json_num_chk(const cJSON *obj, const char *key, double def, double *out, const char *what,
                    iv_err *err)
{
    const cJSON *v = item(obj, key);
    if (!v) { *out = def; return 0; }
    if (!cJSON_IsNumber(v))
        return iv_errf(err, IV_E_FORMAT, "%s: \"%s\" must be a number", what, key);
    *out = v->valuedouble;
    return 0;
}

int iv_json_bool_chk(const cJSON *obj, const char *key, int def, int *out, const char *what,
                     iv_err *err)
{
    const cJSON *v = item(obj, key);
    if (!v) { *out = def; return 0; }
    if (!cJSON_IsBool(v))
        return iv_errf(err, IV_E_FORMAT, "%s: \"%s\" must be true or false", what, key);
    *out = cJSON_IsTrue(v);
    return 0;
}
