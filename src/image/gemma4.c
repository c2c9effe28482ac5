/* The Gemma4 image processor (see gemma4.h). Written from transformers
 * 5.25's image_processing_pil_gemma4.py and processing_gemma4.py. */
#include "image/gemma4.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "image/planes.h"
#include "image/processor_keys.h"

#define BOUND (1 << 16) /* sides and patch sizes above this are not images this server takes */

void iv_gemma4_image_config_default(iv_gemma4_image_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->patch_size = 16;
    cfg->max_soft_tokens = 280;
    cfg->pooling_kernel_size = 3;
    cfg->do_resize = 1;
    /* The class does not normalise (do_normalize false, mean 0, std 1). */
    static const double zero[3] = {0, 0, 0}, one[3] = {1, 1, 1};
    iv_pixel_steps_default(&cfg->px, zero, one);
    cfg->px.do_normalize = 0;
}

/* This processor's keys that change nothing for one image: size is not
 * read (its resize is driven by the patch budget), image_seq_length is
 * Gemma4Processor's default run length, which the per-image soft token
 * count replaces. */
static const char *const ignored_keys[] = {"size", "image_seq_length", NULL};

static int pos_int(const cJSON *v, const char *key, int *out, iv_err *err)
{
    if (!iv_json_is_integer(v) || v->valuedouble <= 0 || v->valuedouble > BOUND)
        return iv_errf(err, IV_E_FORMAT, "preprocessor config: \"%s\" must be a positive integer up to %d", key,
                       BOUND);
    *out = (int)v->valuedouble;
    return 0;
}

/* 1 when type names one of the Gemma4 image processors; *merged 1 for the
 * unified one (exactly its name: it has no PIL or Fast variant). */
static int processor_type(const char *type, int *merged)
{
    *merged = !strcmp(type, "Gemma4UnifiedImageProcessor");
    return *merged || !strncmp(type, "Gemma4ImageProcessor", 20);
}

static int parse_obj(void *config, const cJSON *root, iv_err *err)
{
    iv_gemma4_image_config *cfg = config;
    if (!cJSON_IsObject(root)) return iv_errf(err, IV_E_FORMAT, "preprocessor config: not a JSON object");
    const cJSON *it;
    cJSON_ArrayForEach(it, root)
    {
        const char *k = it->string;
        iv_json_get(root, k); /* seen by the checkpoint-field recorder */
        if (iv_processor_key_ignored(k, ignored_keys)) continue;
        const int px = iv_processor_pixel_key(k, it, &cfg->px, err);
        if (px < 0) return -1;
        if (px) continue;
        if (!strcmp(k, "patch_size")) {
            if (pos_int(it, k, &cfg->patch_size, err)) return -1;
        } else if (!strcmp(k, "pooling_kernel_size")) {
            if (pos_int(it, k, &cfg->pooling_kernel_size, err)) return -1;
        } else if (!strcmp(k, "max_soft_tokens")) {
            if (!iv_json_is_integer(it) || fabs(it->valuedouble) > BOUND)
                return iv_errf(err, IV_E_FORMAT, "preprocessor config: \"%s\" must be an integer", k);
            const int v = (int)it->valuedouble;
            if (v != 70 && v != 140 && v != 280 && v != 560 && v != 1120)
                return iv_errf(err, IV_E_UNSUPPORTED, "preprocessor config: \"max_soft_tokens\" must be one of 70, "
                                                      "140, 280, 560, 1120 (as the processor requires), not %d",
                               v);
            cfg->max_soft_tokens = v;
        } else if (!strcmp(k, "do_resize")) {
            if (iv_processor_key_bool(it, k, &cfg->do_resize, err)) return -1;
        } else {
            return iv_errf(err, IV_E_UNSUPPORTED, "preprocessor config: unknown key \"%s\" for the Gemma4 image "
                                                  "processor",
                           k);
        }
    }
    const cJSON *t = iv_json_get(root, "image_processor_type");
    if (t && (!cJSON_IsString(t) || !processor_type(t->valuestring, &cfg->merged)))
        return iv_errf(err, IV_E_UNSUPPORTED, "preprocessor config: image_processor_type %s is not the Gemma4 "
                                              "image processor",
                       cJSON_IsString(t) ? t->valuestring : "(not a string)");
    if ((int64_t)cfg->patch_size * cfg->pooling_kernel_size > BOUND)
        return iv_errf(err, IV_E_FORMAT, "preprocessor config: patch_size * pooling_kernel_size is over %d", BOUND);
    return 0;
}

int iv_gemma4_image_config_parse(iv_gemma4_image_config *cfg, const char *json, size_t len, iv_err *err)
{
    return iv_processor_config_parse(cfg, parse_obj, json, len, err);
}

int iv_gemma4_image_config_load(iv_gemma4_image_config *cfg, const char *dir, iv_err *err)
{
    iv_gemma4_image_config_default(cfg);
    return iv_processor_config_load(cfg, parse_obj, dir, err);
}

int iv_gemma4_processor_named(const char *dir)
{
    char type[128];
    int merged;
    iv_processor_type_of(dir, type, sizeof type);
    return processor_type(type, &merged);
}

int iv_gemma4_resize_size(const iv_gemma4_image_config *cfg, int height, int width, int *out_h, int *out_w,
                          iv_err *err)
{
    const int64_t p = cfg->patch_size, k = cfg->pooling_kernel_size, u = p * k;
    const int64_t max_patches = (int64_t)cfg->max_soft_tokens * k * k;
    if (height <= 0 || width <= 0) return iv_errf(err, IV_E_INVALID, "image has a zero size (%dx%d)", width, height);
    if (!cfg->do_resize) {
        if (height % u || width % u || (height / p) * (width / p) > max_patches)
            return iv_errf(err, IV_E_INVALID, "image is %dx%d: without resizing, both sides must be multiples of "
                                              "%lld and the image at most %lld patches",
                           width, height, (long long)u, (long long)max_patches);
        *out_h = height, *out_w = width;
        return 0;
    }
    /* get_aspect_ratio_preserving_size, in Python's float64 arithmetic. */
    const double total_px = (double)height * (double)width;
    const double target_px = (double)max_patches * (double)(p * p);
    const double factor = sqrt(target_px / total_px);
    int64_t th = (int64_t)floor(factor * height / (double)u) * u;
    int64_t tw = (int64_t)floor(factor * width / (double)u) * u;
    if (th == 0 && tw == 0)
        return iv_errf(err, IV_E_INVALID, "image is %dx%d: it resizes to 0x0 (the processor refuses it too)", width,
                       height);
    const int64_t max_side = (max_patches / (k * k)) * u;
    if (th == 0) {
        th = u;
        tw = (int64_t)floor((double)width / (double)height) * u;
        if (tw > max_side) tw = max_side;
    } else if (tw == 0) {
        tw = u;
        th = (int64_t)floor((double)height / (double)width) * u;
        if (th > max_side) th = max_side;
    }
    if ((double)th * (double)tw > target_px)
        return iv_errf(err, IV_E_INVALID, "image is %dx%d: it resizes to %lldx%lld, over %lld patches of %lld "
                                          "(the processor refuses it too)",
                       width, height, (long long)tw, (long long)th, (long long)max_patches, (long long)p);
    *out_h = (int)th;
    *out_w = (int)tw;
    return 0;
}

int iv_gemma4_soft_tokens(const iv_gemma4_image_config *cfg, int height, int width, int *n, iv_err *err)
{
    int h = 0, w = 0;
    if (iv_gemma4_resize_size(cfg, height, width, &h, &w, err)) return -1;
    const int p = cfg->patch_size, k = cfg->pooling_kernel_size;
    *n = (h / p) * (w / p) / (k * k);
    return 0;
}

int iv_gemma4_preprocess(const iv_gemma4_image_config *cfg, const iv_image *img, iv_gemma4_pixels *out,
                         iv_err *err)
{
    memset(out, 0, sizeof *out);
    int W = img->width, H = img->height, rh = 0, rw = 0;
    if (iv_gemma4_resize_size(cfg, H, W, &rh, &rw, err)) return -1;
    const iv_planes_spec ps = {.width = rw, .height = rh, .px = &cfg->px};
    if (iv_image_planes(img, &ps, &out->pixel_values, err)) return -1;
    W = ps.width, H = ps.height;
    const int k = cfg->pooling_kernel_size;
    out->height = H, out->width = W;
    out->grid_h = H / cfg->patch_size, out->grid_w = W / cfg->patch_size;
    out->soft_tokens = out->grid_h * out->grid_w / (k * k);
    return 0;
}

void iv_gemma4_pixels_free(iv_gemma4_pixels *p)
{
    if (!p) return;
    free(p->pixel_values);
    memset(p, 0, sizeof *p);
}

int iv_gemma4_row_side(const iv_gemma4_image_config *cfg)
{
    return cfg->patch_size * (cfg->merged ? cfg->pooling_kernel_size : 1);
}

/* patches_merge's order, (kernel row, kernel column, patch row in the
 * kernel, pixel row, patch column, pixel column, channel), is the k p block
 * read row by row: the same loop over squares of side k p. */
void iv_gemma4_patchify(const iv_gemma4_image_config *cfg, const iv_gemma4_pixels *px, float *out)
{
    const int P = iv_gemma4_row_side(cfg);
    const size_t W = (size_t)px->width, plane = W * (size_t)px->height;
    float *o = out;
    for (int gy = 0; gy < px->height / P; gy++)
        for (int gx = 0; gx < px->width / P; gx++)
            for (int py = 0; py < P; py++)
                for (int qx = 0; qx < P; qx++) {
                    const size_t at = ((size_t)gy * P + py) * W + (size_t)gx * P + qx;
                    for (int c = 0; c < 3; c++) *o++ = px->pixel_values[c * plane + at];
                }
}

int64_t iv_gemma4_image_token_run(int n_soft, int32_t boi_id, int32_t image_id, int32_t eoi_id, int32_t *out)
{
    if (n_soft <= 0) return 0;
    if (out) {
        out[0] = boi_id;
        for (int i = 0; i < n_soft; i++) out[1 + i] = image_id;
        out[n_soft + 1] = eoi_id;
    }
    return (int64_t)n_soft + 2;
}
