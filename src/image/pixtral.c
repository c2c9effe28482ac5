/* The Pixtral image processor (see pixtral.h). Written from transformers
 * 5.25's image_processing_pil_pixtral.py and processing_pixtral.py. */
#include "image/pixtral.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/json.h"
#include "image/planes.h"
#include "image/processor_keys.h"

void iv_pixtral_config_default(iv_pixtral_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->patch_size = 16;
    cfg->merge_size = 1;
    cfg->max_height = cfg->max_width = 1024;
    cfg->do_resize = 1;
    iv_pixel_steps_default(&cfg->px, iv_clip_mean, iv_clip_std);
}

/* This processor's keys that change nothing for one image (do_pad only
 * pads a batch to its largest image). */
static const char *const ignored_keys[] = {"default_to_square", "do_pad", "pad_size", NULL};

#define BOUND (1 << 16) /* sides and patch sizes above this are not images this server takes */

static int pos_int(const cJSON *v, const char *key, int *out, iv_err *err)
{
    if (!iv_json_is_integer(v) || v->valuedouble <= 0 || v->valuedouble > BOUND)
        return iv_errf(err, IV_E_FORMAT, "preprocessor config: \"%s\" must be a positive integer up to %d", key,
                       BOUND);
    *out = (int)v->valuedouble;
    return 0;
}

/* patch_size: an integer, or {"height": p, "width": p} (square only: the
 * tower's Conv2d is square). */
static int get_patch(const cJSON *v, int *out, iv_err *err)
{
    if (!cJSON_IsObject(v)) return pos_int(v, "patch_size", out, err);
    int h = 0, w = 0;
    if (pos_int(iv_json_get(v, "height"), "patch_size.height", &h, err) ||
        pos_int(iv_json_get(v, "width"), "patch_size.width", &w, err))
        return -1;
    if (h != w || cJSON_GetArraySize(v) != 2)
        return iv_errf(err, IV_E_UNSUPPORTED, "preprocessor config: \"patch_size\" must be square {height, width}");
    *out = h;
    return 0;
}

static int get_size(iv_pixtral_config *cfg, const cJSON *v, iv_err *err)
{
    if (!cJSON_IsObject(v)) return iv_errf(err, IV_E_FORMAT, "preprocessor config: \"size\" must be an object");
    const cJSON *le = iv_json_get(v, "longest_edge");
    if (le && !cJSON_IsNull(le)) { /* longest_edge wins over height / width, as resize() reads it */
        if (pos_int(le, "size.longest_edge", &cfg->max_height, err)) return -1;
        cfg->max_width = cfg->max_height;
    } else if (pos_int(iv_json_get(v, "height"), "size.height", &cfg->max_height, err) ||
               pos_int(iv_json_get(v, "width"), "size.width", &cfg->max_width, err)) {
        return iv_err_prefix(err, "size needs longest_edge, or height and width: ");
    }
    const cJSON *s;
    cJSON_ArrayForEach(s, v)
    {
        if (strcmp(s->string, "longest_edge") && strcmp(s->string, "height") && strcmp(s->string, "width"))
            return iv_errf(err, IV_E_UNSUPPORTED,
                           "preprocessor config: unknown key \"size.%s\" (the Pixtral image processor reads "
                           "size.longest_edge, or size.height and size.width)",
                           s->string);
    }
    return 0;
}

static int parse_obj(void *config, const cJSON *root, iv_err *err)
{
    iv_pixtral_config *cfg = config;
    if (!cJSON_IsObject(root)) return iv_errf(err, IV_E_FORMAT, "preprocessor config: not a JSON object");
    const cJSON *it;
    cJSON_ArrayForEach(it, root)
    {
        const char *k = it->string;
        int b = 0;
        iv_json_get(root, k); /* seen by the checkpoint-field recorder */
        if (iv_processor_key_ignored(k, ignored_keys)) continue;
        const int px = iv_processor_pixel_key(k, it, &cfg->px, err);
        if (px < 0) return -1;
        if (px) continue;
        if (!strcmp(k, "patch_size")) {
            if (get_patch(it, &cfg->patch_size, err)) return -1;
        } else if (!strcmp(k, "size")) {
            if (get_size(cfg, it, err)) return -1;
        } else if (!strcmp(k, "do_resize")) {
            if (iv_processor_key_bool(it, k, &cfg->do_resize, err)) return -1;
        } else if (!strcmp(k, "do_center_crop")) {
            if (cJSON_IsNull(it)) continue;
            if (iv_processor_key_bool(it, k, &b, err)) return -1;
            if (b) return iv_errf(err, IV_E_UNSUPPORTED, "preprocessor config: \"do_center_crop\": true is not supported");
        } else if (!strcmp(k, "crop_size")) {
            if (!cJSON_IsNull(it))
                return iv_errf(err, IV_E_UNSUPPORTED, "preprocessor config: \"crop_size\" is not supported (null only)");
        } else {
            return iv_errf(err, IV_E_UNSUPPORTED, "preprocessor config: unknown key \"%s\" for the Pixtral image "
                                                  "processor",
                           k);
        }
    }
    const cJSON *t = iv_json_get(root, "image_processor_type");
    if (t && (!cJSON_IsString(t) || strncmp(t->valuestring, "PixtralImageProcessor", 21)))
        return iv_errf(err, IV_E_UNSUPPORTED, "preprocessor config: image_processor_type %s is not the Pixtral "
                                              "image processor",
                       cJSON_IsString(t) ? t->valuestring : "(not a string)");
    return 0;
}

int iv_pixtral_config_parse(iv_pixtral_config *cfg, const char *json, size_t len, iv_err *err)
{
    return iv_processor_config_parse(cfg, parse_obj, json, len, err);
}

/* PixtralProcessor's own keys: the tower's patch and merge, and the image
 * token strings, which must be the defaults iv_pixtral_image_token_run's
 * callers look up. */
static int parse_processor(iv_pixtral_config *cfg, const cJSON *root, iv_err *err)
{
    static const char *const tokens[][2] = {
        {"image_token", "[IMG]"}, {"image_break_token", "[IMG_BREAK]"}, {"image_end_token", "[IMG_END]"}};
    const cJSON *v = iv_json_get(root, "patch_size");
    if (v && pos_int(v, "processor_config.json patch_size", &cfg->patch_size, err)) return -1;
    v = iv_json_get(root, "spatial_merge_size");
    if (v && pos_int(v, "processor_config.json spatial_merge_size", &cfg->merge_size, err)) return -1;
    for (int i = 0; i < 3; i++) {
        v = iv_json_get(root, tokens[i][0]);
        if (v && (!cJSON_IsString(v) || strcmp(v->valuestring, tokens[i][1])))
            return iv_errf(err, IV_E_UNSUPPORTED, "processor_config.json: %s other than \"%s\" is not supported",
                           tokens[i][0], tokens[i][1]);
    }
    return 0;
}

int iv_pixtral_config_load(iv_pixtral_config *cfg, const char *dir, iv_err *err)
{
    char proc[4096];
    cJSON *proot = NULL;
    iv_pixtral_config_default(cfg);
    int rc = iv_processor_config_load(cfg, parse_obj, dir, err);
    iv_path_join(proc, sizeof proc, dir, "processor_config.json");
    if (!rc && iv_file_exists(proc)) {
        if (iv_json_load_file(proc, 1 << 20, &proot, err)) rc = -1;
        else if (parse_processor(cfg, proot, err)) rc = iv_err_prefix(err, "%s: ", proc);
    }
    if (!rc && (int64_t)cfg->patch_size * cfg->merge_size > BOUND)
        rc = iv_errf(err, IV_E_FORMAT, "%s: patch_size * spatial_merge_size is over %d", dir, BOUND);
    cJSON_Delete(proot);
    return rc;
}

int iv_pixtral_processor_named(const char *dir)
{
    char type[128];
    iv_processor_type_of(dir, type, sizeof type);
    return !strncmp(type, "PixtralImageProcessor", 21);
}

int iv_pixtral_resize_size(const iv_pixtral_config *cfg, int height, int width, int *out_h, int *out_w,
                           iv_err *err)
{
    const int64_t u = (int64_t)cfg->patch_size * cfg->merge_size;
    double h = height, w = width;
    if (height <= 0 || width <= 0) return iv_errf(err, IV_E_INVALID, "image has a zero size (%dx%d)", width, height);
    if (!cfg->do_resize) {
        if (height % u || width % u)
            return iv_errf(err, IV_E_INVALID, "image is %dx%d: without resizing, both sides must be multiples of %lld",
                           width, height, (long long)u);
        *out_h = height, *out_w = width;
        return 0;
    }
    /* get_resize_output_image_size, in Python's float64 arithmetic. */
    const double ratio = fmax(h / cfg->max_height, w / cfg->max_width);
    if (ratio > 1) {
        h = floor(h / ratio);
        w = floor(w / ratio);
    }
    if (h < 1 || w < 1)
        return iv_errf(err, IV_E_INVALID, "image is %dx%d: it resizes to %.0fx%.0f within %dx%d, an empty side "
                                          "(the processor refuses it too)",
                       width, height, w, h, cfg->max_width, cfg->max_height);
    /* _num_image_tokens: (side - 1) // unit + 1 units. */
    const int64_t th = ((int64_t)h - 1) / u + 1, tw = ((int64_t)w - 1) / u + 1;
    if (th * u > BOUND || tw * u > BOUND)
        return iv_errf(err, IV_E_INVALID, "image is %dx%d: it resizes past %d pixels a side", width, height, BOUND);
    *out_h = (int)(th * u);
    *out_w = (int)(tw * u);
    return 0;
}

int iv_pixtral_token_grid(const iv_pixtral_config *cfg, int height, int width, int *rows, int *cols, iv_err *err)
{
    int h = 0, w = 0;
    if (iv_pixtral_resize_size(cfg, height, width, &h, &w, err)) return -1;
    *rows = h / (cfg->patch_size * cfg->merge_size);
    *cols = w / (cfg->patch_size * cfg->merge_size);
    return 0;
}

int iv_pixtral_preprocess(const iv_pixtral_config *cfg, const iv_image *img, iv_pixtral_pixels *out, iv_err *err)
{
    memset(out, 0, sizeof *out);
    int W = img->width, H = img->height, rh = 0, rw = 0;
    if (iv_pixtral_resize_size(cfg, H, W, &rh, &rw, err)) return -1;
    const iv_planes_spec ps = {.width = cfg->do_resize ? rw : W, .height = cfg->do_resize ? rh : H, .px = &cfg->px};
    if (iv_image_planes(img, &ps, &out->pixel_values, err)) return -1;
    W = ps.width, H = ps.height;
    out->height = H, out->width = W;
    out->grid_h = H / cfg->patch_size, out->grid_w = W / cfg->patch_size;
    out->rows = out->grid_h / cfg->merge_size, out->cols = out->grid_w / cfg->merge_size;
    return 0;
}

void iv_pixtral_pixels_free(iv_pixtral_pixels *p)
{
    if (!p) return;
    free(p->pixel_values);
    memset(p, 0, sizeof *p);
}

void iv_pixtral_patchify(const iv_pixtral_config *cfg, const iv_pixtral_pixels *px, float *out)
{
    const int P = cfg->patch_size, M = cfg->merge_size;
    const size_t W = (size_t)px->width, plane = W * (size_t)px->height;
    float *o = out;
    for (int bh = 0; bh < px->rows; bh++)
        for (int bw = 0; bw < px->cols; bw++)
            for (int mh = 0; mh < M; mh++)
                for (int mw = 0; mw < M; mw++) {
                    const size_t y0 = (size_t)(bh * M + mh) * P, x0 = (size_t)(bw * M + mw) * P;
                    for (int c = 0; c < 3; c++)
                        for (int py = 0; py < P; py++) {
                            memcpy(o, px->pixel_values + c * plane + (y0 + py) * W + x0, (size_t)P * sizeof(float));
                            o += P;
                        }
                }
}

int64_t iv_pixtral_image_token_run(int rows, int cols, int32_t img_id, int32_t break_id, int32_t end_id,
                                   int32_t *out)
{
    if (rows <= 0 || cols <= 0) return 0;
    int64_t n = 0;
    for (int r = 0; r < rows; r++) {
        for (int c = 0; c < cols; c++) out[n++] = img_id;
        out[n++] = r == rows - 1 ? end_id : break_id;
    }
    return n;
}
