/* The Pixtral vision tower, Mistral3's projector and mixed forward (see
 * vision_pixtral.h). Written from transformers 5.25's modeling_pixtral.py
 * (PixtralVisionModel, PixtralVisionRotaryEmbedding) and
 * modeling_mistral3.py (Mistral3PatchMerger, Mistral3MultiModalProjector,
 * Mistral3Model.forward). */
#include "models/vision_pixtral.h"

#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "image/pixtral.h"
#include "models/loader.h"
#include "models/vision.h"
#include "tensor/safetensors.h"

/* transformers 5 writes the legacy names (vision_tower., multi_modal_projector.);
 * its in-memory names put model. in front. */
static const char *const k_prefixes[] = {"", "model.", NULL};

/* ---------------------------------------------------------------- loading */

static int pld(iv_model *m, const char *pre, const char *name, int64_t d0, int64_t d1, const iv_tensor **out,
               iv_err *err)
{
    char full[512];
    snprintf(full, sizeof full, "%s%s", pre, name);
    return iv_ld_top(m, full, d0, d1, out, err);
}

static int pld_opt(iv_model *m, const char *pre, const char *name, int64_t d0, int64_t d1, const iv_tensor **out,
                   iv_err *err)
{
    char full[512];
    snprintf(full, sizeof full, "%s%s", pre, name);
    return iv_ld_top_opt(m, full, d0, d1, out, err);
}

/* An RMSNorm weight: x * w. */
static int pld_rms(iv_model *m, const char *pre, const char *name, int64_t dim, iv_norm *out, iv_err *err)
{
    out->present = 1;
    out->b = NULL;
    return pld(m, pre, name, dim, -1, &out->w, err);
}

static int load_layer(iv_model *m, const char *pre, int l, const iv_pixtral_vision *v, int64_t inter, iv_layer *L,
                      iv_err *err)
{
    char n[256];
    const int64_t H = v->hidden;
    const iv_tensor *q, *k, *vv, *gate_up[2], *qkv_b;
#define LNAME(s) (snprintf(n, sizeof n, "vision_tower.transformer.layers.%d." s, l), n)
    if (pld(m, pre, LNAME("attention.q_proj.weight"), H, H, &q, err) ||
        pld(m, pre, LNAME("attention.k_proj.weight"), H, H, &k, err) ||
        pld(m, pre, LNAME("attention.v_proj.weight"), H, H, &vv, err) ||
        pld(m, pre, LNAME("attention.o_proj.weight"), H, H, &L->o_w, err) ||
        pld(m, pre, LNAME("feed_forward.gate_proj.weight"), inter, H, &gate_up[0], err) ||
        pld(m, pre, LNAME("feed_forward.up_proj.weight"), inter, H, &gate_up[1], err) ||
        pld(m, pre, LNAME("feed_forward.down_proj.weight"), H, inter, &L->down_w, err) ||
        pld_rms(m, pre, LNAME("attention_norm.weight"), H, &L->attn_norm, err) ||
        pld_rms(m, pre, LNAME("ffn_norm.weight"), H, &L->mlp_norm, err))
        return -1;
    static const char *const biases[] = {"attention.q_proj.bias", "attention.k_proj.bias", "attention.v_proj.bias",
                                         "attention.o_proj.bias", "feed_forward.gate_proj.bias",
                                         "feed_forward.up_proj.bias", "feed_forward.down_proj.bias"};
    for (size_t i = 0; i < sizeof biases / sizeof *biases; i++) {
        char full[512];
        snprintf(full, sizeof full, "%svision_tower.transformer.layers.%d.%s", pre, l, biases[i]);
        if (iv_weights_find(m->weights, full))
            return iv_errf(err, IV_E_UNSUPPORTED, "checkpoint has %s, but Pixtral's linears have no bias", full);
    }
#undef LNAME
    /* Gate rows first: the block's GLU runs act(gate) * up with act_on_first. */
    if (iv_fuse_qkv(m, q, k, vv, NULL, NULL, NULL, &L->qkv_w, &qkv_b, err) ||
        iv_concat_rows(m, gate_up, 2, &L->up_w, err))
        return -1;
    L->window_left = L->window_right = -1;
    L->inv_freq = v->inv_freq;
    return 0;
}

/* compute_axial_rope_parameters: f_k = 1 / theta^(2k / head_dim) in float32
 * (the text models' default rope over head_dim), even k for rows, then odd
 * k for columns. */
static int vision_rope(iv_model *m, const cJSON *vc, iv_pixtral_vision *v, iv_err *err)
{
    /* Older configs put rope_theta at the top of vision_config. */
    return iv_vision_axial_rope(m, vc, v->head_dim, iv_json_num(vc, "rope_theta", 10000.0), 1, &v->inv_freq,
                                &v->freq_section, err);
}

/* The top-level Mistral3Config switches the projector reads. */
static int projector_config(const iv_model *m, iv_pixtral_vision *v, int *bias, iv_err *err)
{
    const cJSON *root = m->cfg.root;
    const cJSON *fl = iv_json_get(root, "vision_feature_layer");
    if (fl && (!iv_json_is_integer(fl) || fl->valuedouble != -1))
        return iv_errf(err, IV_E_UNSUPPORTED, "config.json: vision_feature_layer other than -1 (the last layer) is "
                                              "not supported");
    if (iv_vision_config_int(root, "spatial_merge_size", 2, 64, &v->merge, err)) return -1;
    const cJSON *b = iv_json_get(root, "multimodal_projector_bias");
    if (b && !cJSON_IsBool(b))
        return iv_errf(err, IV_E_FORMAT, "config.json: multimodal_projector_bias must be true or false");
    *bias = cJSON_IsTrue(b);
    const char *act = iv_json_str(root, "projector_hidden_act", "gelu");
    const int a = iv_act_from_name(act);
    if (a < 0) return iv_errf(err, IV_E_UNSUPPORTED, "config.json: projector_hidden_act \"%s\" is not supported", act);
    v->proj_act = (iv_act)a;
    return 0;
}

static int vision_geometry(const iv_model *m, const cJSON *vc, iv_pixtral_vision *v, int *inter, iv_err *err)
{
    const int64_t big = 1 << 20, small = 1 << 10;
    const char *type = iv_json_str(vc, "model_type", "pixtral");
    if (strcmp(type, "pixtral"))
        return iv_errf(err, IV_E_UNSUPPORTED, "config.json: vision_config.model_type \"%s\" (only \"pixtral\")", type);
    if (iv_vision_config_int(vc, "num_hidden_layers", 24, small, &v->depth, err) ||
        iv_vision_config_int(vc, "hidden_size", 1024, big, &v->hidden, err) ||
        iv_vision_config_int(vc, "num_attention_heads", 16, small, &v->n_heads, err) ||
        iv_vision_config_int(vc, "intermediate_size", 4096, big, inter, err) ||
        iv_vision_config_int(vc, "num_channels", 3, small, &v->in_channels, err) ||
        iv_vision_config_int(vc, "patch_size", 16, small, &v->patch, err))
        return -1;
    if (v->hidden % v->n_heads)
        return iv_errf(err, IV_E_FORMAT, "vision hidden_size %d is not a multiple of num_attention_heads %d",
                       v->hidden, v->n_heads);
    v->head_dim = v->hidden / v->n_heads;
    /* The attention splits hidden_size by heads; the rotary reads head_dim. */
    const int64_t hd = iv_json_int(vc, "head_dim", v->head_dim);
    if (hd != v->head_dim)
        return iv_errf(err, IV_E_UNSUPPORTED, "vision_config.head_dim %lld differs from hidden_size / "
                                              "num_attention_heads %d",
                       (long long)hd, v->head_dim);
    v->patch_dim = (int64_t)v->in_channels * v->patch * v->patch;
    v->out_hidden = m->block.hidden;
    return 0;
}

int iv_pixtral_vision_load(iv_model *m, iv_pixtral_vision **out, iv_err *err)
{
    *out = NULL;
    const char *pre = NULL;
    char name[512];
    for (const char *const *p = k_prefixes; *p && !pre; p++) {
        snprintf(name, sizeof name, "%svision_tower.", *p);
        if (iv_weights_has_prefix(m->weights, name)) pre = *p;
    }
    const cJSON *vc = iv_json_get(m->cfg.root, "vision_config");
    if (!pre) return 0; /* a text-only export */
    if (!cJSON_IsObject(vc))
        return iv_errf(err, IV_E_FORMAT, "the checkpoint has %svision_tower. tensors but config.json no vision_config",
                       pre);
    iv_pixtral_vision *v = iv_model_alloc(m, sizeof *v);
    if (!v) return iv_errf(err, IV_E_NOMEM, "out of memory");
    int inter = 0, proj_bias = 0;
    if (vision_geometry(m, vc, v, &inter, err) || projector_config(m, v, &proj_bias, err) ||
        vision_rope(m, vc, v, err))
        return -1;
    const char *act_name = iv_json_str(vc, "hidden_act", "gelu");
    const int act = iv_act_from_name(act_name);
    if (act < 0) return iv_errf(err, IV_E_UNSUPPORTED, "vision_config hidden_act \"%s\" is not supported", act_name);
    v->block = (iv_block_spec){.hidden = v->hidden, .n_heads = v->n_heads, .n_kv_heads = v->n_heads,
                               .head_dim = v->head_dim, .intermediate = inter, .norm_kind = IV_NORM_RMS,
                               .norm_place = IV_NORM_PRE, .norm_eps = 1e-5f, .causal = 0, .act = (iv_act)act,
                               .gated = 1, .act_on_first = 1, .rot_dim = v->head_dim,
                               .rope_freq_section = v->freq_section};
    /* Mistral3RMSNorm(vision hidden, eps = text_config.rms_norm_eps). */
    v->proj_spec = v->block;
    v->proj_spec.norm_eps = (float)iv_json_num(m->cfg.json, "rms_norm_eps", 1e-6);

    snprintf(name, sizeof name, "%svision_tower.patch_conv.weight", pre);
    if (iv_weights_f32_matrix(m->weights, name, v->hidden, v->patch_dim, &v->patch_w, err) ||
        pld_rms(m, pre, "vision_tower.ln_pre.weight", v->hidden, &v->ln_pre, err))
        return -1;
    snprintf(name, sizeof name, "%svision_tower.patch_conv.bias", pre);
    if (iv_weights_find(m->weights, name))
        return iv_errf(err, IV_E_UNSUPPORTED, "checkpoint has %s, but Pixtral's patch_conv has no bias", name);
    v->layers = iv_model_alloc(m, (size_t)v->depth * sizeof *v->layers);
    if (!v->layers) return iv_errf(err, IV_E_NOMEM, "out of memory");
    for (int l = 0; l < v->depth; l++)
        if (load_layer(m, pre, l, v, inter, &v->layers[l], err)) return -1;
    snprintf(name, sizeof name, "%svision_tower.transformer.layers.%d.attention_norm.weight", pre, v->depth);
    if (iv_weights_find(m->weights, name))
        return iv_errf(err, IV_E_FORMAT, "the checkpoint has more vision layers than vision_config.num_hidden_layers");

    /* The projector. merging_layer's columns (c, ki, kj) -> (ki, kj, c). */
    const int64_t Hv = v->hidden, s2 = (int64_t)v->merge * v->merge, T = v->out_hidden;
    const iv_tensor *mw;
    if (pld_rms(m, pre, "multi_modal_projector.norm.weight", Hv, &v->proj_norm, err) ||
        pld(m, pre, "multi_modal_projector.patch_merger.merging_layer.weight", Hv, s2 * Hv, &mw, err) ||
        pld(m, pre, "multi_modal_projector.linear_1.weight", T, Hv, &v->l1_w, err) ||
        pld(m, pre, "multi_modal_projector.linear_2.weight", T, T, &v->l2_w, err) ||
        pld_opt(m, pre, "multi_modal_projector.linear_1.bias", T, -1, &v->l1_b, err) ||
        pld_opt(m, pre, "multi_modal_projector.linear_2.bias", T, -1, &v->l2_b, err))
        return -1;
    if ((v->l1_b != NULL) != proj_bias || (v->l2_b != NULL) != proj_bias)
        return iv_errf(err, IV_E_FORMAT, "config.json: multimodal_projector_bias is %s but the checkpoint %s "
                                         "multi_modal_projector.linear_1/2.bias",
                       proj_bias ? "true" : "false", proj_bias ? "lacks" : "has");
    iv_tensor *pw = iv_model_new_tensor(m, Hv, s2 * Hv);
    if (!pw) return iv_errf(err, IV_E_NOMEM, "out of memory");
    const float *src = mw->data;
    float *dst = pw->data;
    for (int64_t o = 0; o < Hv; o++)
        for (int64_t c = 0; c < Hv; c++)
            for (int64_t k = 0; k < s2; k++) dst[o * s2 * Hv + k * Hv + c] = src[o * s2 * Hv + c * s2 + k];
    iv_weights_release(m->weights, mw);
    v->merge_w = pw;
    *out = v;
    return 0;
}

/* ---------------------------------------------------------------- the tower */

int64_t iv_pixtral_image_tokens(const iv_pixtral_vision *v, const iv_image_input *img)
{
    return (int64_t)(img->grid_h / v->merge) * (img->grid_w / v->merge);
}

int64_t iv_pixtral_image_run(const iv_pixtral_vision *v, const iv_image_input *img)
{
    return (int64_t)(img->grid_h / v->merge) * (img->grid_w / v->merge + 1);
}

int64_t iv_pixtral_model_token_run(const iv_model *m, const iv_image_input *img, int32_t *out,
                                   int64_t *feature_start)
{
    const iv_pixtral_vision *v = m->pixtral;
    *feature_start = 0;
    if (!out) return iv_pixtral_image_run(v, img);
    return iv_pixtral_image_token_run(img->grid_h / v->merge, img->grid_w / v->merge, m->image_token_id,
                                      m->image_break_id, m->image_end_id, out);
}

static int check_images(const iv_pixtral_vision *v, const iv_image_input *imgs, int n, int64_t *N, iv_err *err)
{
    *N = 0;
    for (int i = 0; i < n; i++) {
        const iv_image_input *im = &imgs[i];
        if (im->grid_t != 1 || im->grid_h <= 0 || im->grid_w <= 0 || im->grid_h % v->merge || im->grid_w % v->merge)
            return iv_errf(err, IV_E_INVALID,
                           "image %d: grid (%d, %d, %d) must be one frame of positive height and width, multiples of "
                           "the spatial merge %d",
                           i, im->grid_t, im->grid_h, im->grid_w, v->merge);
        if (!im->pixel_values) return iv_errf(err, IV_E_INVALID, "image %d has no pixel values", i);
        const int64_t np = (int64_t)im->grid_h * im->grid_w;
        if (np > (1 << 24) || np > (1 << 26) - *N)
            return iv_errf(err, IV_E_INVALID, "image %d: %d x %d patches is too many", i, im->grid_h, im->grid_w);
        *N += np;
    }
    return 0;
}

/* Per patch: its (row, column) in the image's grid (axis 0 rows, N apart
 * from axis 1), from its place in merge-block order; cu_seqlens, one
 * segment per image. */
static void vision_tables(const iv_pixtral_vision *v, const iv_image_input *imgs, int n, int64_t N, int32_t *pos,
                          int32_t *cu)
{
    const int s = v->merge;
    int64_t j0 = 0;
    cu[0] = 0;
    for (int i = 0; i < n; i++) {
        const int64_t np = (int64_t)imgs[i].grid_h * imgs[i].grid_w, blocks_w = imgs[i].grid_w / s;
        cu[i + 1] = cu[i] + (int32_t)np;
        for (int64_t j = 0; j < np; j++) {
            const int64_t blk = j / ((int64_t)s * s), in = j % ((int64_t)s * s);
            pos[j0 + j] = (int32_t)(blk / blocks_w * s + in / s);
            pos[N + j0 + j] = (int32_t)(blk % blocks_w * s + in % s);
        }
        j0 += np;
    }
}

/* norm -> s x s merge (a view) -> merging_layer -> linear_1 -> act -> linear_2. */
static int run_projector(const iv_ops *ops, const iv_pixtral_vision *v, iv_view x, iv_arena *dev, iv_view *out)
{
    const int64_t unit = (int64_t)v->merge * v->merge, F = x.rows / unit, wide = unit * v->hidden;
    const int64_t T = v->out_hidden;
    const iv_view normed = iv_act_alloc(ops, dev, x.rows, x.cols, x.cols);
    const iv_view merged = iv_act_alloc(ops, dev, F, v->hidden, v->hidden);
    const iv_view h = iv_act_alloc(ops, dev, F, T, iv_ops_act_stride(ops, T));
    *out = iv_act_alloc(ops, dev, F, T, T);
    if (!normed.data || !merged.data || !h.data || !out->data) return -1;
    iv_block_norm(ops, &v->proj_spec, &v->proj_norm, normed, x, NULL);
    ops->linear(ops, merged, iv_view_make(normed.data, normed.dtype, F, wide, wide), v->merge_w, NULL, IV_ACT_NONE,
                NULL);
    ops->linear(ops, h, merged, v->l1_w, v->l1_b, v->proj_act, NULL);
    ops->linear(ops, *out, h, v->l2_w, v->l2_b, IV_ACT_NONE, NULL);
    return 0;
}

int iv_pixtral_vision_forward(const iv_model *m, const iv_image_input *imgs, int n, const iv_fwd_mem *mem,
                              iv_view *states, iv_view *features, iv_err *err)
{
    const iv_pixtral_vision *v = m->pixtral;
    const iv_ops *ops = m->ops;
    if (!v) return iv_errf(err, IV_E_UNSUPPORTED, "this checkpoint has no vision tower");
    if (n <= 0) return iv_errf(err, IV_E_INVALID, "no images");
    int64_t N;
    if (check_images(v, imgs, n, &N, err)) return -1;
    const int64_t H = v->hidden;
    int32_t *pos = iv_arena_alloc(mem->host, (size_t)N * 2 * sizeof(int32_t));
    int32_t *cu = iv_arena_alloc(mem->host, (size_t)(n + 1) * sizeof(int32_t));
    float *pix = iv_arena_alloc(mem->host, (size_t)(N * v->patch_dim) * sizeof(float));
    if (!pos || !cu || !pix) goto oom;
    vision_tables(v, imgs, n, N, pos, cu);
    for (int i = 0, j0 = 0; i < n; i++) {
        const int64_t np = (int64_t)imgs[i].grid_h * imgs[i].grid_w;
        memcpy(pix + j0 * v->patch_dim, imgs[i].pixel_values, (size_t)(np * v->patch_dim) * sizeof(float));
        j0 += (int)np;
    }
    const int32_t *pos_dev = iv_dev_upload_new(ops, mem->dev, pos, (size_t)N * 2 * sizeof(int32_t));
    const int32_t *cu_dev = iv_dev_upload_new(ops, mem->dev, cu, (size_t)(n + 1) * sizeof(int32_t));
    const iv_view pv = iv_act_alloc(ops, mem->dev, N, v->patch_dim, iv_ops_act_stride(ops, v->patch_dim));
    const iv_view x = iv_act_alloc(ops, mem->dev, N, H, H);
    if (!pos_dev || !cu_dev || !pv.data || !x.data || iv_ops_upload_f32(ops, pv, pix, mem->host)) goto oom;

    ops->linear(ops, x, pv, v->patch_w, NULL, IV_ACT_NONE, NULL); /* patch_conv */
    iv_block_norm(ops, &v->block, &v->ln_pre, x, x, NULL);

    iv_batch batch = {.n_seqs = n, .n_tokens = N, .cu_seqlens = cu, .cu_seqlens_dev = cu_dev};
    for (int s = 0; s < n; s++)
        if (iv_batch_seqlen(&batch, s) > batch.max_seqlen) batch.max_seqlen = iv_batch_seqlen(&batch, s);
    const iv_attn_extras ex = {.positions = pos, .positions_dev = pos_dev, .pos_axis_stride = N};
    if (iv_block_stack_forward(ops, &v->block, v->layers, v->depth, &batch, &ex, x, mem)) goto oom;
    *states = x;
    if (features && run_projector(ops, v, x, mem->dev, features)) goto oom;
    return 0;
oom:
    return iv_errf(err, IV_E_NOMEM, "out of memory for the vision tower over %d images", n);
}

/* ---------------------------------------------------------------- mixed forward */

/* Each image's run lies within its sequence after the previous one, holds
 * [IMG] exactly where the layout puts image rows (and not at the line
 * ends), and no [IMG] of the sequence is left outside the runs. */
static int check_runs(const iv_model *m, const iv_batch *b, int s, const iv_seq_images *si, iv_err *err)
{
    const iv_pixtral_vision *v = m->pixtral;
    const int len = iv_batch_seqlen(b, s), img_id = m->image_token_id;
    const int32_t *ids = b->ids + b->cu_seqlens[s];
    int64_t covered = 0, present = 0, end = 0;
    for (int t = 0; t < len; t++) present += ids[t] == img_id;
    for (int i = 0; si && i < si->n; i++) {
        const iv_image_input *im = &si->images[i];
        if (im->grid_t != 1 || im->grid_h <= 0 || im->grid_w <= 0 || im->grid_h % v->merge || im->grid_w % v->merge)
            return iv_errf(err, IV_E_INVALID, "input %d image %d: bad grid (%d, %d, %d)", s, i, im->grid_t,
                           im->grid_h, im->grid_w);
        const int64_t run = iv_pixtral_image_run(v, im), cols = im->grid_w / v->merge;
        if (im->token_offset < end || im->token_offset + run > len)
            return iv_errf(err, IV_E_INVALID, "input %d image %d: its run of %lld tokens at %d overlaps another image "
                                              "or passes the end of the input (%d tokens)",
                           s, i, (long long)run, im->token_offset, len);
        for (int64_t j = 0; j < run; j++) {
            const int want = j % (cols + 1) != cols, got = ids[im->token_offset + j] == img_id;
            if (want != got)
                return iv_errf(err, IV_E_INVALID, "input %d image %d: token %lld is %d, where the image layout (%lld "
                                                  "lines of %lld [IMG] tokens, each then [IMG_BREAK] or [IMG_END]) "
                                                  "wants %s",
                               s, i, (long long)(im->token_offset + j), ids[im->token_offset + j],
                               (long long)(run / (cols + 1)), (long long)cols,
                               want ? "the image token" : "a line end");
        }
        end = im->token_offset + run;
        covered += iv_pixtral_image_tokens(v, im);
    }
    if (covered != present)
        return iv_errf(err, IV_E_INVALID, "input %d has %lld image tokens but its images fill %lld", s,
                       (long long)present, (long long)covered);
    return 0;
}

int iv_mistral3_forward(const iv_model *m, const iv_batch *b, const iv_seq_images *images, const iv_fwd_mem *mem,
                        iv_view *hidden, iv_err *err)
{
    const iv_pixtral_vision *v = m->pixtral;
    int n_images = 0;
    int64_t n_lines = 0;
    for (int s = 0; images && s < b->n_seqs; s++) {
        if (images[s].n < 0 || (images[s].n > 0 && !images[s].images))
            return iv_errf(err, IV_E_INVALID, "input %d: bad image list", s);
        n_images += images[s].n;
        for (int i = 0; i < images[s].n; i++) n_lines += images[s].images[i].grid_h > 0 ? images[s].images[i].grid_h : 0;
    }
    if (!v) {
        if (n_images) return iv_errf(err, IV_E_UNSUPPORTED, "this checkpoint has no vision tower: images cannot be used");
        return iv_model_forward(m, b, mem, hidden, err);
    }
    for (int s = 0; s < b->n_seqs; s++)
        if (check_runs(m, b, s, images ? &images[s] : NULL, err)) return -1;
    if (!n_images) return iv_model_forward(m, b, mem, hidden, err);
    iv_image_input *flat = iv_arena_alloc(mem->host, (size_t)n_images * sizeof *flat);
    /* One span per image line (its [IMG] tokens are contiguous), at most grid_h lines an image. */
    int64_t *spans = iv_arena_alloc(mem->host, (size_t)(3 * (n_lines > 0 ? n_lines : 1)) * sizeof(int64_t));
    if (!flat || !spans) return iv_errf(err, IV_E_NOMEM, "out of memory");
    int64_t *tok = spans, *feat_row = spans + n_lines, *len = spans + 2 * n_lines;
    int k = 0, ns = 0;
    int64_t feat = 0;
    for (int s = 0; s < b->n_seqs; s++)
        for (int i = 0; images && i < images[s].n; i++) {
            const iv_image_input *im = &images[s].images[i];
            flat[k++] = *im;
            const int rows = im->grid_h / v->merge, cols = im->grid_w / v->merge;
            for (int r = 0; r < rows; r++, ns++) {
                tok[ns] = b->cu_seqlens[s] + im->token_offset + (int64_t)r * (cols + 1);
                feat_row[ns] = feat + (int64_t)r * cols;
                len[ns] = cols;
            }
            feat += (int64_t)rows * cols;
        }
    iv_visual_inject vi = {.n_spans = ns, .token_row = tok, .feat_row = feat_row, .len = len};
    iv_view states;
    if (iv_pixtral_vision_forward(m, flat, n_images, mem, &states, &vi.embeds, err)) return -1;
    return iv_model_forward_visual(m, b, &vi, mem, hidden, err);
}
