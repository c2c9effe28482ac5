#include "engine/image_inputs.h"

#include "engine/media_runs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void refuse_missing_processor(iv_image_proc *p)
{
    snprintf(p->refused, sizeof p->refused,
             "this checkpoint has a vision tower but no image processor config (preprocessor_config.json or "
             "processor_config.json), so it cannot take images");
}

/* Mistral3: PixtralProcessor's files, checked against the tower. */
static int pixtral_proc_load(iv_image_proc *p, const char *dir, const iv_model *m, iv_err *err)
{
    p->pixtral = 1;
    if (!iv_pixtral_processor_named(dir)) {
        refuse_missing_processor(p);
        return 0;
    }
    if (iv_pixtral_config_load(&p->pix, dir, err)) return iv_err_prefix(err, "image processor: ");
    const iv_pixtral_vision *v = m->pixtral;
    if (p->pix.patch_size != v->patch || p->pix.merge_size != v->merge)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "image processor: patch_size %d and spatial_merge_size %d disagree with the vision tower's "
                       "%d and %d (config.json vision_config, spatial_merge_size)",
                       p->pix.patch_size, p->pix.merge_size, v->patch, v->merge);
    if (m->image_break_id < 0 || m->image_end_id < 0)
        snprintf(p->refused, sizeof p->refused,
                 "the tokenizer has no [IMG_BREAK] / [IMG_END] tokens, which Pixtral's image token runs need");
    return 0;
}

/* Gemma4: Gemma4ImageProcessor's file, checked against the tower. */
static int gemma4_proc_load(iv_image_proc *p, const char *dir, const iv_model *m, iv_err *err)
{
    p->gemma4 = 1;
    if (!iv_gemma4_processor_named(dir)) {
        refuse_missing_processor(p);
        return 0;
    }
    if (iv_gemma4_image_config_load(&p->g4, dir, err)) return iv_err_prefix(err, "image processor: ");
    const iv_gemma4_vision *v = m->gemma4_vision;
    if (p->g4.merged != v->merged)
        return iv_errf(err, IV_E_UNSUPPORTED, "image processor: %s cannot feed %s",
                       p->g4.merged ? "Gemma4UnifiedImageProcessor" : "Gemma4ImageProcessor",
                       v->merged ? "the Gemma4 unified vision embedder" : "the Gemma4 vision tower");
    if (p->g4.patch_size != v->patch || p->g4.pooling_kernel_size != v->pool)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "image processor: patch_size %d and pooling_kernel_size %d disagree with the vision tower's "
                       "%d and %d (config.json vision_config)",
                       p->g4.patch_size, p->g4.pooling_kernel_size, v->patch, v->pool);
    return 0;
}

int iv_image_proc_load(iv_image_proc *p, const char *dir, const iv_model *m, int64_t max_pixels, iv_err *err)
{
    memset(p, 0, sizeof *p);
    if ((!m->vision && !m->pixtral && !m->gemma4_vision) || !m->image_token_run) return 0;
    p->model = m;
    /* ColQwen3's processor puts an image document in a user message with
     * this text after the image (issue 17 / the model card). */
    if (!strcmp(m->cfg.model_type, "colqwen3")) p->image_doc_text = "Describe the image.";
    p->limits.max_pixels = max_pixels > 0 ? max_pixels : IV_IMAGE_DEFAULT_MAX_PIXELS;
    if (m->pixtral) return pixtral_proc_load(p, dir, m, err);
    if (m->gemma4_vision) return gemma4_proc_load(p, dir, m, err);
    if (iv_qwen_vl_config_load(&p->qwen, dir, err)) {
        if (err->code != IV_E_NOTFOUND) return iv_err_prefix(err, "image processor: ");
        refuse_missing_processor(p);
        return 0;
    }
    const iv_qwen3vl_vision *v = m->vision;
    /* The processor cuts patches the tower must read: any disagreement
     * would run, and be wrong. */
    if (p->qwen.patch_size != v->patch || p->qwen.temporal_patch_size != v->temporal_patch ||
        p->qwen.merge_size != v->merge)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "image processor: patch_size %d, temporal_patch_size %d, merge_size %d disagree with the "
                       "vision tower's %d, %d, %d (config.json vision_config)",
                       p->qwen.patch_size, p->qwen.temporal_patch_size, p->qwen.merge_size, v->patch,
                       v->temporal_patch, v->merge);
    return 0;
}

static int grow(iv_image_set *s)
{
    if (s->n < s->cap) return 0;
    const int cap = s->cap ? 2 * s->cap : 4;
    iv_image_input *in = realloc(s->in, (size_t)cap * sizeof *in);
    if (in) s->in = in;
    float **px = realloc(s->pixels, (size_t)cap * sizeof *px);
    if (px) s->pixels = px;
    int64_t *rs = realloc(s->run_start, (size_t)cap * sizeof *rs);
    if (rs) s->run_start = rs;
    int64_t *rl = realloc(s->run_len, (size_t)cap * sizeof *rl);
    if (rl) s->run_len = rl;
    if (!in || !px || !rs || !rl) return -1;
    s->cap = cap;
    return 0;
}

/* One decoded image through the checkpoint's processor into the tower's
 * input; *pixels receives the owned patch buffer. */
static int qwen_input(const iv_image_proc *p, const iv_image *img, iv_image_input *in, float **pixels, iv_err *err)
{
    iv_qwen_vl_patches pt;
    if (iv_qwen_vl_preprocess(&p->qwen, img, &pt, err)) return -1;
    *pixels = pt.pixel_values;
    *in = (iv_image_input){.pixel_values = pt.pixel_values, .grid_t = (int)pt.grid_thw[0],
                           .grid_h = (int)pt.grid_thw[1], .grid_w = (int)pt.grid_thw[2]};
    return 0;
}

static int pixtral_input(const iv_image_proc *p, const iv_image *img, iv_image_input *in, float **pixels,
                         iv_err *err)
{
    iv_pixtral_pixels px;
    if (iv_pixtral_preprocess(&p->pix, img, &px, err)) return -1;
    const size_t n = (size_t)px.grid_h * px.grid_w * 3 * p->pix.patch_size * p->pix.patch_size;
    float *patches = malloc(n * sizeof *patches);
    if (!patches) {
        iv_pixtral_pixels_free(&px);
        return iv_errf(err, IV_E_NOMEM, "out of memory");
    }
    iv_pixtral_patchify(&p->pix, &px, patches);
    *pixels = patches;
    *in = (iv_image_input){.pixel_values = patches, .grid_t = 1, .grid_h = px.grid_h, .grid_w = px.grid_w};
    iv_pixtral_pixels_free(&px);
    return 0;
}

static int gemma4_input(const iv_image_proc *p, const iv_image *img, iv_image_input *in, float **pixels,
                        iv_err *err)
{
    iv_gemma4_pixels px;
    if (iv_gemma4_preprocess(&p->g4, img, &px, err)) return -1;
    /* The grid counts pixel_values rows: patches, or the unified processor's k x k blocks. */
    const int side = iv_gemma4_row_side(&p->g4), gh = px.height / side, gw = px.width / side;
    const size_t n = (size_t)gh * gw * 3 * side * side;
    float *patches = malloc(n * sizeof *patches);
    if (!patches) {
        iv_gemma4_pixels_free(&px);
        return iv_errf(err, IV_E_NOMEM, "out of memory");
    }
    iv_gemma4_patchify(&p->g4, &px, patches);
    *pixels = patches;
    *in = (iv_image_input){.pixel_values = patches, .grid_t = 1, .grid_h = gh, .grid_w = gw};
    iv_gemma4_pixels_free(&px);
    return 0;
}

int iv_image_set_add(const iv_image_proc *p, iv_image_set *s, const char *src, size_t n, iv_err *err)
{
    const int k = s->n;
    if (!p->model) return iv_errf(err, IV_E_INVALID, "this model takes no images (it has no vision tower)");
    if (p->refused[0]) return iv_errf(err, IV_E_INVALID, "%s", p->refused);
    if (grow(s)) return iv_errf(err, IV_E_NOMEM, "out of memory");
    iv_image img;
    if (iv_image_decode_source(src, n, &p->limits, &img, err)) return iv_err_prefix(err, "image %d: ", k);
    const int rc = p->pixtral  ? pixtral_input(p, &img, &s->in[k], &s->pixels[k], err)
                   : p->gemma4 ? gemma4_input(p, &img, &s->in[k], &s->pixels[k], err)
                               : qwen_input(p, &img, &s->in[k], &s->pixels[k], err);
    iv_image_free(&img);
    if (rc) return iv_err_prefix(err, "image %d: ", k);
    int64_t start;
    s->run_len[k] = p->model->image_token_run(p->model, &s->in[k], NULL, &start);
    s->run_start[k] = 0;
    s->n++;
    return 0;
}

int iv_image_set_borrow(iv_image_set *s, const iv_image_set *from, int k, iv_err *err)
{
    if (k < 0 || k >= from->n)
        return iv_errf(err, IV_E_INVALID, "the conversation has more image parts than the %d image(s) given", from->n);
    if (grow(s)) return iv_errf(err, IV_E_NOMEM, "out of memory");
    s->in[s->n] = from->in[k];
    s->pixels[s->n] = NULL; /* borrowed: not freed here */
    s->run_start[s->n] = 0;
    s->run_len[s->n] = from->run_len[k];
    s->n++;
    return 0;
}

void iv_image_set_free(iv_image_set *s)
{
    for (int i = 0; i < s->n; i++) free(s->pixels[i]);
    free(s->in);
    free(s->pixels);
    free(s->run_start);
    free(s->run_len);
    memset(s, 0, sizeof *s);
}

int64_t iv_image_set_tokens(const iv_image_set *s)
{
    int64_t t = 0;
    for (int i = 0; i < s->n; i++) t += s->run_len[i];
    return t;
}

/* Images only: engine/media_runs.c lays out images and audio together. */
int iv_image_expand(const iv_image_proc *p, iv_image_set *s, const int32_t *ids, int len, int32_t **out,
                    int *out_len, iv_err *err)
{
    return iv_media_expand(p, s, NULL, NULL, ids, len, out, out_len, err);
}

int iv_image_truncate(iv_image_set *s, int32_t *ids, int *len, int max, int truncate, int left, iv_err *err)
{
    return iv_media_truncate(s, NULL, ids, len, max, truncate, left, err);
}
