#include "image/processor_keys.h"

#include <stdio.h>
#include <string.h>

#include "base/file.h"
#include "base/json.h"
#include "image/resample.h"

const double iv_clip_mean[3] = {0.48145466, 0.4578275, 0.40821073};
const double iv_clip_std[3] = {0.26862954, 0.26130258, 0.27577711};

/* One number for all three channels, or a list of 3 (image_mean, image_std). */
static int key_triple(const cJSON *v, const char *key, double out[3], iv_err *err)
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

void iv_pixel_steps_default(iv_pixel_steps *px, const double mean[3], const double std[3])
{
    px->resample = IV_RESAMPLE_BICUBIC;
    px->do_rescale = px->do_normalize = 1;
    px->rescale_factor = 1.0 / 255.0;
    memcpy(px->image_mean, mean, sizeof px->image_mean);
    memcpy(px->image_std, std, sizeof px->image_std);
}

int iv_processor_pixel_key(const char *k, const cJSON *v, iv_pixel_steps *px, iv_err *err)
{
    if (!strcmp(k, "do_rescale")) return iv_processor_key_bool(v, k, &px->do_rescale, err) ? -1 : 1;
    if (!strcmp(k, "do_normalize")) return iv_processor_key_bool(v, k, &px->do_normalize, err) ? -1 : 1;
    if (!strcmp(k, "do_convert_rgb")) {
        int b = 1;
        if (iv_processor_key_bool(v, k, &b, err)) return -1;
        if (!b)
            return iv_errf(err, IV_E_UNSUPPORTED, "preprocessor config: \"do_convert_rgb\": false is not supported "
                                                  "(images are always converted to RGB)");
        return 1;
    }
    if (!strcmp(k, "rescale_factor")) {
        if (!cJSON_IsNumber(v) || !(v->valuedouble > 0))
            return iv_errf(err, IV_E_FORMAT, "preprocessor config: \"rescale_factor\" must be a positive number");
        px->rescale_factor = v->valuedouble;
        return 1;
    }
    if (!strcmp(k, "resample")) {
        if (!iv_json_is_integer(v) || (v->valuedouble != IV_RESAMPLE_BICUBIC && v->valuedouble != IV_RESAMPLE_BILINEAR))
            return iv_errf(err, IV_E_UNSUPPORTED, "preprocessor config: \"resample\" must be 3 (bicubic) or 2 "
                                                  "(bilinear)");
        px->resample = (int)v->valuedouble;
        return 1;
    }
    if (!strcmp(k, "image_mean")) return key_triple(v, k, px->image_mean, err) ? -1 : 1;
    if (!strcmp(k, "image_std")) {
        if (key_triple(v, k, px->image_std, err)) return -1;
        for (int i = 0; i < 3; i++)
            if (px->image_std[i] == 0)
                return iv_errf(err, IV_E_FORMAT, "preprocessor config: \"image_std\" has a zero");
        return 1;
    }
    return 0;
}

int iv_processor_key_ignored(const char *k, const char *const *extra)
{
    static const char *const common[] = {
        "image_processor_type", "processor_class", "auto_map", "_processor_class", "return_tensors",
        "data_format",          "input_data_format", "device", "disable_grouping", NULL,
    };
    for (int i = 0; common[i]; i++)
        if (!strcmp(k, common[i])) return 1;
    for (int i = 0; extra && extra[i]; i++)
        if (!strcmp(k, extra[i])) return 1;
    return 0;
}

int iv_processor_key_bool(const cJSON *v, const char *key, int *out, iv_err *err)
{
    if (!cJSON_IsBool(v)) return iv_errf(err, IV_E_FORMAT, "preprocessor config: \"%s\" must be true or false", key);
    *out = cJSON_IsTrue(v);
    return 0;
}

int iv_processor_keys_load(const char *dir, char *path, size_t n, cJSON **root, const cJSON **keys, iv_err *err)
{
    *root = NULL;
    *keys = NULL;
    iv_path_join(path, n, dir, "preprocessor_config.json");
    const int pre = iv_file_exists(path);
    if (!pre) iv_path_join(path, n, dir, "processor_config.json");
    if (!pre && !iv_file_exists(path))
        return iv_errf(err, IV_E_NOTFOUND, "%s has no preprocessor_config.json (nor processor_config.json): the "
                                           "image processor is not configured",
                       dir);
    if (iv_json_load_file(path, 1 << 20, root, err)) return -1;
    *keys = pre ? *root : iv_json_get(*root, "image_processor");
    if (!*keys) {
        cJSON_Delete(*root);
        *root = NULL;
        return iv_errf(err, IV_E_FORMAT, "%s: no \"image_processor\" object in it", path);
    }
    return 0;
}

void iv_processor_type_of(const char *dir, char *type, size_t n)
{
    char path[4096];
    cJSON *root;
    const cJSON *keys;
    iv_err err = {0};
    type[0] = 0;
    if (iv_processor_keys_load(dir, path, sizeof path, &root, &keys, &err) == 0)
        snprintf(type, n, "%s", iv_json_str(keys, "image_processor_type", ""));
    cJSON_Delete(root);
}

int iv_processor_config_parse(void *cfg, iv_processor_parse_fn parse, const char *json, size_t len, iv_err *err)
{
    cJSON *root;
    if (iv_json_parse(json, len, "preprocessor_config.json", &root, err)) return -1;
    const int rc = parse(cfg, root, err);
    cJSON_Delete(root);
    return rc;
}

int iv_processor_config_load(void *cfg, iv_processor_parse_fn parse, const char *dir, iv_err *err)
{
    char path[4096];
    cJSON *root;
    const cJSON *keys;
    if (iv_processor_keys_load(dir, path, sizeof path, &root, &keys, err)) return -1;
    const int rc = parse(cfg, keys, err) ? iv_err_prefix(err, "%s: ", path) : 0;
    cJSON_Delete(root);
    return rc;
}
