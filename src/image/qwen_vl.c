/* The Qwen2-VL / Qwen3-VL image processor (see qwen_vl.h). */
#include "image/qwen_vl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "image/planes.h"
#include "image/processor_keys.h"
#include "image/resample.h"

void iv_qwen_vl_config_default(iv_qwen_vl_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->patch_size = 14;
    cfg->temporal_patch_size = 2;
    cfg->merge_size = 2;
    cfg->min_pixels = 56 * 56;
    cfg->max_pixels = 28 * 28 * 1280;
    cfg->do_resize = 1;
    iv_pixel_steps_default(&cfg->px, iv_clip_mean, iv_clip_std);
}

/* The keys of this processor that change nothing here. */
static const char *const ignored_keys[] = {"feature_extractor_type", "default_to_square", NULL};

static int get_pos_int(const cJSON *v, const char *key, int64_t *out, iv_err *err)
{
    if (!iv_json_is_integer(v) || v->valuedouble <= 0)
        return iv_errf(err, IV_E_FORMAT, "preprocessor config: \"%s\" must be a positive integer", key);
    *out = (int64_t)v->valuedouble;
    return 0;
}

static int parse_obj(void *config, const cJSON *root, iv_err *err)
{
    iv_qwen_vl_config *cfg = config;
    if (!cJSON_IsObject(root)) return iv_errf(err, IV_E_FORMAT, "preprocessor config: not a JSON object");
    int64_t v = 0, top_min = -1, top_max = -1;
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
            if (get_pos_int(it, k, &v, err)) return -1;
            cfg->patch_size = (int)v;
        } else if (!strcmp(k, "temporal_patch_size")) {
            if (get_pos_int(it, k, &v, err)) return -1;
            cfg->temporal_patch_size = (int)v;
        } else if (!strcmp(k, "merge_size")) {
            if (get_pos_int(it, k, &v, err)) return -1;
            cfg->merge_size = (int)v;
        } else if (!strcmp(k, "min_pixels")) {
            if (cJSON_IsNull(it)) continue;
            if (get_pos_int(it, k, &top_min, err)) return -1;
        } else if (!strcmp(k, "max_pixels")) {
            if (cJSON_IsNull(it)) continue;
            if (get_pos_int(it, k, &top_max, err)) return -1;
        } else if (!strcmp(k, "size")) {
            if (!cJSON_IsObject(it)) return iv_errf(err, IV_E_FORMAT, "preprocessor config: \"size\" must be an object");
            const cJSON *s;
            cJSON_ArrayForEach(s, it)
            {
                if (!strcmp(s->string, "shortest_edge") || !strcmp(s->string, "min_pixels")) {
                    if (get_pos_int(s, "size.shortest_edge", &cfg->min_pixels, err)) return -1;
                } else if (!strcmp(s->string, "longest_edge") || !strcmp(s->string, "max_pixels")) {
                    if (get_pos_int(s, "size.longest_edge", &cfg->max_pixels, err)) return -1;
                } else {
                    return iv_errf(err, IV_E_UNSUPPORTED,
                                   "preprocessor config: unknown key \"size.%s\" (this image processor reads "
                                   "size.shortest_edge and size.longest_edge, the pixel-count bounds)",
                                   s->string);
                }
            }
        } else if (!strcmp(k, "do_resize")) {
            if (iv_processor_key_bool(it, k, &cfg->do_resize, err)) return -1;
        } else {
            return iv_errf(err, IV_E_UNSUPPORTED,
                           "preprocessor config: unknown key \"%s\" for the Qwen2-VL/Qwen3-VL image processor", k);
        }
    }
    /* As the processor's __init__: min_pixels / max_pixels override size. */
    if (top_min > 0) cfg->min_pixels = top_min;
    if (top_max > 0) cfg->max_pixels = top_max;
    if (cfg->min_pixels > cfg->max_pixels)
        return iv_errf(err, IV_E_FORMAT, "preprocessor config: min_pixels %lld is over max_pixels %lld",
                       (long long)cfg->min_pixels, (long long)cfg->max_pixels);
    if (cfg->patch_size > 1024 || cfg->merge_size > 64 || cfg->temporal_patch_size > 64)
        return iv_errf(err, IV_E_UNSUPPORTED, "preprocessor config: patch_size, merge_size or temporal_patch_size out of range");
    const cJSON *t = iv_json_get(root, "image_processor_type");
    if (t && (!cJSON_IsString(t) || !strstr(t->valuestring, "Qwen2VLImageProcessor")))
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "preprocessor config: image_processor_type %s is not the Qwen2-VL/Qwen3-VL image processor",
                       cJSON_IsString(t) ? t->valuestring : "(not a string)");
    return 0;
}

int iv_qwen_vl_config_parse(iv_qwen_vl_config *cfg, const char *json, size_t len, iv_err *err)
{
    return iv_processor_config_parse(cfg, parse_obj, json, len, err);
}

int iv_qwen_vl_config_load(iv_qwen_vl_config *cfg, const char *dir, iv_err *err)
{
    iv_qwen_vl_config_default(cfg);
    return iv_processor_config_load(cfg, parse_obj, dir, err);
}

int iv_qwen_vl_smart_resize(const iv_qwen_vl_config *cfg, int height, int width, int *out_h, int *out_w,
                            iv_err *err)
{
    double h = height, w = width, f = (double)cfg->patch_size * cfg->merge_size;
    if ((h > w ? h : w) / (h < w ? h : w) > 200)
        return iv_errf(err, IV_E_INVALID, "image is %dx%d: its aspect ratio %.1f is over 200, which the processor refuses",
                       width, height, (h > w ? h : w) / (h < w ? h : w));
    /* Python's round(): halves to even, as rint() in the default mode. */
    double hb = rint(h / f) * f, wb = rint(w / f) * f;
    if (hb * wb > (double)cfg->max_pixels) {
        double beta = sqrt(h * w / (double)cfg->max_pixels);
        hb = floor(h / beta / f) * f;
        wb = floor(w / beta / f) * f;
        if (hb < f) hb = f;
        if (wb < f) wb = f;
    } else if (hb * wb < (double)cfg->min_pixels) {
        double beta = sqrt((double)cfg->min_pixels / (h * w));
        hb = ceil(h * beta / f) * f;
        wb = ceil(w * beta / f) * f;
    }
    if (hb < f || wb < f || hb > 1e6 || wb > 1e6)
        return iv_errf(err, IV_E_INVALID, "image is %dx%d: it resizes to %.0fx%.0f, which the processor cannot patch",
                       width, height, wb, hb);
    *out_h = (int)hb;
    *out_w = (int)wb;
    return 0;
}

int iv_qwen_vl_num_tokens(const iv_qwen_vl_config *cfg, int height, int width, int64_t *n_tokens, iv_err *err)
{
    int h = height, w = width, f = cfg->patch_size * cfg->merge_size;
    if (h <= 0 || w <= 0) return iv_errf(err, IV_E_INVALID, "image has a zero size (%dx%d)", width, height);
    if (cfg->do_resize) {
        if (iv_qwen_vl_smart_resize(cfg, height, width, &h, &w, err)) return -1;
    } else if (h % f || w % f) {
        return iv_errf(err, IV_E_INVALID, "image is %dx%d: without resizing, both sides must be multiples of %d", width,
                       height, f);
    }
    *n_tokens = (int64_t)(h / cfg->patch_size) * (w / cfg->patch_size) / ((int64_t)cfg->merge_size * cfg->merge_size);
    return 0;
}

int iv_qwen_vl_preprocess(const iv_qwen_vl_config *cfg, const iv_image *img, iv_qwen_vl_patches *out, iv_err *err)
{
    memset(out, 0, sizeof *out);
    int W = img->width, H = img->height, P = cfg->patch_size, M = cfg->merge_size, T = cfg->temporal_patch_size;
    size_t n = (size_t)W * (size_t)H;
    uint8_t *rgb = malloc(n * 3);
    if (!rgb) return iv_errf(err, IV_E_NOMEM, "out of memory preprocessing an image");
    iv_image_flatten_on_white(img, rgb);
    if (cfg->do_resize) {
        int rh, rw;
        if (iv_qwen_vl_smart_resize(cfg, H, W, &rh, &rw, err)) {
            free(rgb);
            return -1;
        }
        uint8_t *r = malloc((size_t)rw * (size_t)rh * 3);
        if (!r || iv_resample_rgb(rgb, W, H, r, rw, rh, (enum iv_resample_filter)cfg->px.resample, err)) {
            free(r);
            free(rgb);
            return r ? -1 : iv_errf(err, IV_E_NOMEM, "out of memory resizing an image");
        }
        free(rgb);
        rgb = r;
        W = rw, H = rh;
    } else if (H % (P * M) || W % (P * M)) {
        free(rgb);
        return iv_errf(err, IV_E_INVALID, "image is %dx%d: without resizing, both sides must be multiples of %d", W, H, P * M);
    }
    float lut[3][256];
    iv_pixel_lut(&cfg->px, lut);
    int64_t gh = H / P, gw = W / P;
    out->grid_thw[0] = 1, out->grid_thw[1] = gh, out->grid_thw[2] = gw;
    out->rows = gh * gw;
    out->cols = (int64_t)3 * T * P * P;
    out->n_tokens = gh * gw / ((int64_t)M * M);
    out->pixel_values = malloc(sizeof(float) * (size_t)(out->rows * out->cols));
    if (!out->pixel_values) {
        free(rgb);
        return iv_errf(err, IV_E_NOMEM, "out of memory for %lld image patches", (long long)out->rows);
    }
    /* Rows: (block row, block column, row in block, column in block);
     * columns: (channel, frame, row in patch, column in patch). */
    float *o = out->pixel_values;
    for (int64_t bh = 0; bh < gh / M; bh++)
        for (int64_t bw = 0; bw < gw / M; bw++)
            for (int mh = 0; mh < M; mh++)
                for (int mw = 0; mw < M; mw++) {
                    int64_t y0 = (bh * M + mh) * P, x0 = (bw * M + mw) * P;
                    for (int c = 0; c < 3; c++)
                        for (int t = 0; t < T; t++)
                            for (int py = 0; py < P; py++) {
                                const uint8_t *row = rgb + ((size_t)(y0 + py) * (size_t)W + (size_t)x0) * 3 + c;
                                for (int px = 0; px < P; px++) *o++ = lut[c][row[px * 3]];
                            }
                }
    free(rgb);
    return 0;
}

void iv_qwen_vl_patches_free(iv_qwen_vl_patches *p)
{
    if (!p) return;
    free(p->pixel_values);
    memset(p, 0, sizeof *p);
}
