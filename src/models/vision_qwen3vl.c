/* The Qwen3-VL vision tower and the mixed text + image forward (see
 * vision_qwen3vl.h). Written from transformers 5's modeling_qwen3_vl.py and
 * vision_utils.py (get_vision_interpolation_indices_and_weights,
 * get_vision_position_ids, get_vision_cu_seqlens); host-side tables
 * (resampling taps, rotary positions, cu_seqlens, mRoPE positions) follow
 * those functions' float32 arithmetic step by step. */
#include "models/vision_qwen3vl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "models/loader.h"
#include "models/rope.h"
#include "models/vision.h"
#include "tensor/safetensors.h"

static const char *const k_vision_prefixes[] = {"model.visual.", "visual.", "vlm.model.visual.", NULL};

/* ---------------------------------------------------------------- loading */

static int vld(iv_model *m, const char *pre, const char *name, int64_t d0, int64_t d1, const iv_tensor **out,
               iv_err *err)
{
    char full[512];
    snprintf(full, sizeof full, "%s%s", pre, name);
    return iv_ld_top(m, full, d0, d1, out, err);
}

static int vld_norm(iv_model *m, const char *pre, const char *base, int64_t dim, iv_norm *out, iv_err *err)
{
    char full[512];
    snprintf(full, sizeof full, "%s%s", pre, base);
    if (iv_ld_layer_norm(m, full, dim, 1, out, err)) return -1;
    if (!out->b) return iv_errf(err, IV_E_NOTFOUND, "checkpoint is missing tensor \"%s.bias\"", full);
    return 0;
}

static int load_merger(iv_model *m, const char *pre, const char *base, const iv_qwen3vl_vision *v, int postshuffle,
                       iv_vision_merger *mg, iv_err *err)
{
    const int64_t wide = (int64_t)v->hidden * v->merge * v->merge;
    char n[256];
    mg->postshuffle = postshuffle;
    snprintf(n, sizeof n, "%s.norm", base);
    if (vld_norm(m, pre, n, postshuffle ? wide : v->hidden, &mg->norm, err)) return -1;
    snprintf(n, sizeof n, "%s.linear_fc1.weight", base);
    if (vld(m, pre, n, wide, wide, &mg->fc1_w, err)) return -1;
    snprintf(n, sizeof n, "%s.linear_fc1.bias", base);
    if (vld(m, pre, n, wide, -1, &mg->fc1_b, err)) return -1;
    snprintf(n, sizeof n, "%s.linear_fc2.weight", base);
    if (vld(m, pre, n, v->out_hidden, wide, &mg->fc2_w, err)) return -1;
    snprintf(n, sizeof n, "%s.linear_fc2.bias", base);
    return vld(m, pre, n, v->out_hidden, -1, &mg->fc2_b, err);
}

static int load_block(iv_model *m, const char *pre, int l, const iv_qwen3vl_vision *v, int64_t inter, iv_layer *L,
                      iv_err *err)
{
    char n[256];
    const int64_t H = v->hidden;
#define VNAME(s) (snprintf(n, sizeof n, "blocks.%d." s, l), n)
    if (vld(m, pre, VNAME("attn.qkv.weight"), 3 * H, H, &L->qkv_w, err) ||
        vld(m, pre, VNAME("attn.qkv.bias"), 3 * H, -1, &L->qkv_b, err) ||
        vld(m, pre, VNAME("attn.proj.weight"), H, H, &L->o_w, err) ||
        vld(m, pre, VNAME("attn.proj.bias"), H, -1, &L->o_b, err) ||
        vld(m, pre, VNAME("mlp.linear_fc1.weight"), inter, H, &L->up_w, err) ||
        vld(m, pre, VNAME("mlp.linear_fc1.bias"), inter, -1, &L->up_b, err) ||
        vld(m, pre, VNAME("mlp.linear_fc2.weight"), H, inter, &L->down_w, err) ||
        vld(m, pre, VNAME("mlp.linear_fc2.bias"), H, -1, &L->down_b, err))
        return -1;
    snprintf(n, sizeof n, "blocks.%d.norm1", l);
    if (vld_norm(m, pre, n, H, &L->attn_norm, err)) return -1;
    snprintf(n, sizeof n, "blocks.%d.norm2", l);
    if (vld_norm(m, pre, n, H, &L->mlp_norm, err)) return -1;
#undef VNAME
    L->window_left = L->window_right = -1;
    L->inv_freq = v->inv_freq;
    return 0;
}

/* 2-D axial rotary: head_dim / 4 frequencies 1 / theta^(2i / (head_dim / 2))
 * (float32, as compute_axial_rope_parameters), used for the row, then again
 * for the column (recomposition_frequencies), NeoX halves over the head. */
static int vision_rope(iv_model *m, const cJSON *vc, iv_qwen3vl_vision *v, iv_err *err)
{
    return iv_vision_axial_rope(m, vc, v->head_dim, 10000.0, 0, &v->inv_freq, &v->freq_section, err);
}

static int vision_geometry(const iv_model *m, const cJSON *vc, iv_qwen3vl_vision *v, int *inter, iv_err *err)
{
    int n_pos = 0;
    /* Bounds keep every product of these (patch_dim, 4 * hidden, ...) far from overflow. */
    const int64_t big = 1 << 20, small = 1 << 10;
    if (iv_vision_config_int(vc, "depth", 27, small, &v->depth, err) || iv_vision_config_int(vc, "hidden_size", 1152, big, &v->hidden, err) ||
        iv_vision_config_int(vc, "num_heads", 16, small, &v->n_heads, err) ||
        iv_vision_config_int(vc, "intermediate_size", 4304, big, inter, err) ||
        iv_vision_config_int(vc, "in_channels", 3, small, &v->in_channels, err) ||
        iv_vision_config_int(vc, "patch_size", 16, small, &v->patch, err) ||
        iv_vision_config_int(vc, "temporal_patch_size", 2, small, &v->temporal_patch, err) ||
        iv_vision_config_int(vc, "spatial_merge_size", 2, small, &v->merge, err) ||
        iv_vision_config_int(vc, "out_hidden_size", 3584, big, &v->out_hidden, err) ||
        iv_vision_config_int(vc, "num_position_embeddings", 2304, big, &n_pos, err))
        return -1;
    if (v->hidden % v->n_heads)
        return iv_errf(err, IV_E_FORMAT, "vision hidden_size %d is not a multiple of num_heads %d", v->hidden,
                       v->n_heads);
    v->head_dim = v->hidden / v->n_heads;
    v->side = (int)sqrt((double)n_pos); /* int(num_position_embeddings ** 0.5) */
    while ((int64_t)(v->side + 1) * (v->side + 1) <= n_pos) v->side++;
    while ((int64_t)v->side * v->side > n_pos) v->side--;
    v->patch_dim = (int64_t)v->in_channels * v->temporal_patch * v->patch * v->patch;
    if (v->out_hidden != m->block.hidden)
        return iv_errf(err, IV_E_FORMAT, "vision out_hidden_size %d differs from the text hidden size %d",
                       v->out_hidden, m->block.hidden);
    const cJSON *ds = iv_json_get(vc, "deepstack_visual_indexes"), *it;
    if (ds && !cJSON_IsArray(ds))
        return iv_errf(err, IV_E_FORMAT, "config.json: vision_config.deepstack_visual_indexes must be a list");
    cJSON_ArrayForEach(it, ds) {
        if (!iv_json_is_integer(it) || it->valuedouble < 0 || it->valuedouble >= v->depth)
            return iv_errf(err, IV_E_FORMAT, "config.json: deepstack_visual_indexes must list vision blocks < %d",
                           v->depth);
        for (int k = 0; k < v->n_deepstack; k++)
            if (v->deepstack_layers[k] == (int)it->valuedouble)
                return iv_errf(err, IV_E_UNSUPPORTED, "config.json: deepstack_visual_indexes lists block %d twice",
                               v->deepstack_layers[k]);
        if (v->n_deepstack == IV_QWEN3VL_MAX_DEEPSTACK)
            return iv_errf(err, IV_E_UNSUPPORTED, "more than %d deepstack_visual_indexes", IV_QWEN3VL_MAX_DEEPSTACK);
        v->deepstack_layers[v->n_deepstack++] = (int)it->valuedouble;
    }
    return 0;
}

int iv_qwen3vl_vision_load(iv_model *m, iv_qwen3vl_vision **out, int deepstack, iv_err *err)
{
    *out = NULL;
    const char *pre = NULL;
    for (const char *const *p = k_vision_prefixes; *p && !pre; p++)
        if (iv_weights_has_prefix(m->weights, *p)) pre = *p;
    if (!pre) return 0; /* a text-only export */
    const cJSON *vc = iv_json_get(m->cfg.root, "vision_config");
    if (!cJSON_IsObject(vc))
        return iv_errf(err, IV_E_FORMAT, "the checkpoint has %s tensors but config.json no vision_config", pre);
    iv_qwen3vl_vision *v = iv_model_alloc(m, sizeof *v);
    if (!v) return iv_errf(err, IV_E_NOMEM, "out of memory");
    int inter = 0;
    if (vision_geometry(m, vc, v, &inter, err)) return -1;
    if (!deepstack) v->n_deepstack = 0;
    const int act = iv_act_from_name(iv_json_str(vc, "hidden_act", "gelu_pytorch_tanh"));
    if (act < 0)
        return iv_errf(err, IV_E_UNSUPPORTED, "vision_config hidden_act \"%s\" is not supported",
                       iv_json_str(vc, "hidden_act", ""));
    if (vision_rope(m, vc, v, err)) return -1;
    v->block = (iv_block_spec){
        .hidden = v->hidden, .n_heads = v->n_heads, .n_kv_heads = v->n_heads, .head_dim = v->head_dim,
        .intermediate = inter, .norm_kind = IV_NORM_LAYER, .norm_place = IV_NORM_PRE, .norm_eps = 1e-6f,
        .causal = 0, .act = (iv_act)act, .rot_dim = v->head_dim, .rope_freq_section = v->freq_section,
    };
    char name[512];
    snprintf(name, sizeof name, "%spatch_embed.proj.weight", pre);
    if (iv_weights_f32_matrix(m->weights, name, v->hidden, v->patch_dim, &v->patch_w, err) ||
        vld(m, pre, "patch_embed.proj.bias", v->hidden, -1, &v->patch_b, err) ||
        vld(m, pre, "pos_embed.weight", (int64_t)v->side * v->side, v->hidden, &v->pos_embed, err))
        return -1;
    v->layers = iv_model_alloc(m, (size_t)v->depth * sizeof *v->layers);
    if (!v->layers) return iv_errf(err, IV_E_NOMEM, "out of memory");
    for (int l = 0; l < v->depth; l++)
        if (load_block(m, pre, l, v, inter, &v->layers[l], err)) return -1;
    if (load_merger(m, pre, "merger", v, 0, &v->merger, err)) return -1;
    for (int k = 0; k < v->n_deepstack; k++) {
        char base[64];
        snprintf(base, sizeof base, "deepstack_merger_list.%d", k);
        if (load_merger(m, pre, base, v, 1, &v->deepstack[k], err)) return -1;
    }
    snprintf(name, sizeof name, "%sdeepstack_merger_list.%d.norm.weight", pre, v->n_deepstack);
    if (iv_weights_find(m->weights, name))
        return iv_errf(err, IV_E_FORMAT, "the checkpoint has more DeepStack mergers than deepstack_visual_indexes");
    snprintf(name, sizeof name, "%sblocks.%d.norm1.weight", pre, v->depth);
    if (iv_weights_find(m->weights, name))
        return iv_errf(err, IV_E_FORMAT, "the checkpoint has more vision blocks than vision_config.depth");
    *out = v;
    return 0;
}

int iv_qwen3vl_mm_load(iv_model *m, const int default_sections[3], int default_image_token, int deepstack,
                       iv_err *err)
{
    const cJSON *j = m->cfg.json;
    const cJSON *rp = iv_json_get(j, "rope_parameters");
    if (!cJSON_IsObject(rp)) rp = iv_json_get(j, "rope_scaling");
    const cJSON *sec = cJSON_IsObject(rp) ? iv_json_get(rp, "mrope_section") : NULL;
    int s[3] = {default_sections[0], default_sections[1], default_sections[2]};
    if (sec) {
        if (!cJSON_IsArray(sec) || cJSON_GetArraySize(sec) != 3)
            return iv_errf(err, IV_E_FORMAT, "config.json: mrope_section must list 3 integers");
        for (int i = 0; i < 3; i++) {
            const cJSON *v = cJSON_GetArrayItem(sec, i);
            if (!iv_json_is_integer(v) || v->valuedouble < 0 || v->valuedouble > IV_ROPE_MAX_HALF)
                return iv_errf(err, IV_E_FORMAT, "config.json: mrope_section must list 3 integers up to %d",
                               IV_ROPE_MAX_HALF);
            s[i] = (int)v->valuedouble;
        }
    }
    const int half = m->block.rot_dim / 2;
    uint8_t *axis = iv_model_alloc(m, (size_t)(half > 0 ? half : 1));
    if (!axis) return iv_errf(err, IV_E_NOMEM, "out of memory");
    for (int i = 0; i < half; i++) axis[i] = i % 3 == 1 && i < 3 * s[1] ? 1 : i % 3 == 2 && i < 3 * s[2] ? 2 : 0;
    m->block.rope_freq_section = axis;
    m->image_token_id = (int)iv_json_int(m->cfg.root, "image_token_id", default_image_token);
    if (iv_qwen3vl_vision_load(m, &m->vision, deepstack, err)) return -1;
    /* The processor's placeholder expansion, for the request path
     * (engine/image_inputs.c). */
    if (m->vision) {
        m->image_token_run = iv_qwen3vl_image_token_run;
        m->image_placeholder_id = m->image_token_id;
    }
    return 0;
}

/* ---------------------------------------------------------------- the tower */

int64_t iv_qwen3vl_image_tokens(const iv_qwen3vl_vision *v, const iv_image_input *img)
{
    return (int64_t)img->grid_t * img->grid_h * img->grid_w / ((int64_t)v->merge * v->merge);
}

int64_t iv_qwen3vl_image_token_run(const iv_model *m, const iv_image_input *img, int32_t *out,
                                   int64_t *feature_start)
{
    const int64_t n = iv_qwen3vl_image_tokens(m->vision, img);
    for (int64_t i = 0; out && i < n; i++) out[i] = m->image_token_id;
    *feature_start = 0;
    return n;
}

/* Patch j of a frame of h x w patches in merge-block order: its grid row and
 * column (the inverse of the processor's 2x2 reordering). */
static void patch_rc(int64_t within, int w, int merge, int *row, int *col)
{
    const int64_t blocks_w = w / merge;
    const int64_t in_col = within % merge, in_row = (within / merge) % merge;
    const int64_t block_col = (within / ((int64_t)merge * merge)) % blocks_w;
    const int64_t block_row = within / ((int64_t)merge * merge * blocks_w);
    *row = (int)(block_row * merge + in_row);
    *col = (int)(block_col * merge + in_col);
}

/* _interpolation_axis_taps_weights, bilinear, align_corners, border padding. */
static void axis_taps(int index, int size, int side, int tap[2], float wt[2])
{
    const float src = (float)index * (float)(side - 1) / (float)(size - 1 > 1 ? size - 1 : 1);
    const float fl = floorf(src), frac = src - fl;
    for (int o = 0; o < 2; o++) {
        int t = (int)fl + o;
        tap[o] = t < 0 ? 0 : t > side - 1 ? side - 1 : t;
        const float w = 1.0f - fabsf(frac - (float)o);
        wt[o] = w > 0 ? w : 0;
    }
}

/* Per patch of the batch: the 4 resampling taps and weights, the rotary
 * (row, column) positions (row axis first, N apart), and cu_seqlens with one
 * segment per frame. */
static void vision_tables(const iv_qwen3vl_vision *v, const iv_image_input *imgs, int n, int64_t N, int32_t *taps,
                          float *weights, int32_t *pos, int32_t *cu)
{
    int64_t j0 = 0;
    int seg = 0;
    cu[0] = 0;
    for (int i = 0; i < n; i++) {
        const iv_image_input *im = &imgs[i];
        const int64_t frame = (int64_t)im->grid_h * im->grid_w;
        for (int f = 0; f < im->grid_t; f++) {
            cu[seg + 1] = cu[seg] + (int32_t)frame;
            seg++;
        }
        for (int64_t j = 0; j < (int64_t)im->grid_t * frame; j++) {
            int row, col, ht[2], wtp[2];
            float hw[2], ww[2];
            patch_rc(j % frame, im->grid_w, v->merge, &row, &col);
            pos[j0 + j] = row;
            pos[N + j0 + j] = col;
            axis_taps(row, im->grid_h, v->side, ht, hw);
            axis_taps(col, im->grid_w, v->side, wtp, ww);
            for (int a = 0; a < 2; a++)
                for (int b = 0; b < 2; b++) {
                    taps[(j0 + j) * 4 + a * 2 + b] = ht[a] * v->side + wtp[b];
                    weights[(j0 + j) * 4 + a * 2 + b] = hw[a] * ww[b];
                }
        }
        j0 += (int64_t)im->grid_t * frame;
    }
}

/* LayerNorm, 2x2 merge, fc1, GELU, fc2: x [N, Hv] dense -> out [N / 4, out_hidden]. */
static int run_merger(const iv_ops *ops, const iv_qwen3vl_vision *v, const iv_vision_merger *mg, iv_view x,
                      iv_arena *dev, iv_view out)
{
    const int64_t unit = (int64_t)v->merge * v->merge, rows = x.rows / unit, wide = unit * v->hidden;
    const iv_view normed = iv_act_alloc(ops, dev, x.rows, x.cols, x.cols);
    const iv_view h = iv_act_alloc(ops, dev, rows, wide, iv_ops_act_stride(ops, wide));
    if (!normed.data || !h.data) return -1;
    const iv_view merged = iv_view_make(normed.data, normed.dtype, rows, wide, wide);
    if (mg->postshuffle)
        ops->layer_norm(ops, merged, iv_view_make(x.data, x.dtype, rows, wide, wide), NULL, mg->norm.w, mg->norm.b,
                        1e-6f);
    else
        ops->layer_norm(ops, normed, x, NULL, mg->norm.w, mg->norm.b, 1e-6f);
    ops->linear(ops, h, merged, mg->fc1_w, mg->fc1_b, IV_ACT_GELU, NULL);
    ops->linear(ops, out, h, mg->fc2_w, mg->fc2_b, IV_ACT_NONE, NULL);
    return 0;
}

static int check_images(const iv_qwen3vl_vision *v, const iv_image_input *imgs, int n, int64_t *N, int *n_segs,
                        iv_err *err)
{
    *N = 0;
    *n_segs = 0;
    for (int i = 0; i < n; i++) {
        const iv_image_input *im = &imgs[i];
        if (im->grid_t <= 0 || im->grid_h <= 0 || im->grid_w <= 0 || im->grid_h % v->merge || im->grid_w % v->merge)
            return iv_errf(err, IV_E_INVALID,
                           "image %d: grid (%d, %d, %d) must be positive with height and width multiples of %d", i,
                           im->grid_t, im->grid_h, im->grid_w, v->merge);
        if (!im->pixel_values) return iv_errf(err, IV_E_INVALID, "image %d has no pixel values", i);
        const int64_t frame = (int64_t)im->grid_h * im->grid_w;
        if (frame > (1 << 24) || (int64_t)im->grid_t * frame > (1 << 26) - *N)
            return iv_errf(err, IV_E_INVALID, "image %d: %d x %d x %d patches is too many", i, im->grid_t,
                           im->grid_h, im->grid_w);
        *N += (int64_t)im->grid_t * frame;
        *n_segs += im->grid_t;
    }
    return 0;
}

/* The DeepStack merger that reads layer l's output
 * (deepstack_merger_list[deepstack_visual_indexes.index(l)]), or -1. */
static int deepstack_slot(const iv_qwen3vl_vision *v, int l)
{
    for (int k = 0; k < v->n_deepstack; k++)
        if (v->deepstack_layers[k] == l) return k;
    return -1;
}

int iv_qwen3vl_vision_forward(const iv_model *m, const iv_image_input *imgs, int n, const iv_fwd_mem *mem,
                              iv_view *merged, iv_view *deepstack, iv_err *err)
{
    const iv_qwen3vl_vision *v = m->vision;
    const iv_ops *ops = m->ops;
    if (!v) return iv_errf(err, IV_E_UNSUPPORTED, "this checkpoint has no vision tower");
    int64_t N;
    int n_segs;
    if (n <= 0) return iv_errf(err, IV_E_INVALID, "no images");
    if (check_images(v, imgs, n, &N, &n_segs, err)) return -1;
    const int64_t H = v->hidden, F = N / ((int64_t)v->merge * v->merge);

    /* Host tables: taps and weights, rotary positions, cu_seqlens, pixels. */
    int32_t *taps = iv_arena_alloc(mem->host, (size_t)N * 4 * sizeof(int32_t));
    float *weights = iv_arena_alloc(mem->host, (size_t)N * 4 * sizeof(float));
    int32_t *pos = iv_arena_alloc(mem->host, (size_t)N * 2 * sizeof(int32_t));
    int32_t *cu = iv_arena_alloc(mem->host, (size_t)(n_segs + 1) * sizeof(int32_t));
    float *pix = iv_arena_alloc(mem->host, (size_t)(N * v->patch_dim) * sizeof(float));
    if (!taps || !weights || !pos || !cu || !pix) goto oom;
    vision_tables(v, imgs, n, N, taps, weights, pos, cu);
    for (int i = 0, j0 = 0; i < n; i++) {
        const int64_t np = (int64_t)imgs[i].grid_t * imgs[i].grid_h * imgs[i].grid_w;
        memcpy(pix + j0 * v->patch_dim, imgs[i].pixel_values, (size_t)(np * v->patch_dim) * sizeof(float));
        j0 += (int)np;
    }
    const int32_t *taps_dev = iv_dev_upload_new(ops, mem->dev, taps, (size_t)N * 4 * sizeof(int32_t));
    const float *weights_dev = iv_dev_upload_new(ops, mem->dev, weights, (size_t)N * 4 * sizeof(float));
    const int32_t *pos_dev = iv_dev_upload_new(ops, mem->dev, pos, (size_t)N * 2 * sizeof(int32_t));
    const int32_t *cu_dev = iv_dev_upload_new(ops, mem->dev, cu, (size_t)(n_segs + 1) * sizeof(int32_t));
    const iv_view pv = iv_act_alloc(ops, mem->dev, N, v->patch_dim, iv_ops_act_stride(ops, v->patch_dim));
    const iv_view x = iv_act_alloc(ops, mem->dev, N, H, H);
    const iv_view pe = iv_act_alloc(ops, mem->dev, N, H, H);
    if (!taps_dev || !weights_dev || !pos_dev || !cu_dev || !pv.data || !x.data || !pe.data) goto oom;
    if (iv_ops_upload_f32(ops, pv, pix, mem->host)) goto oom;

    /* Patch embedding plus the resampled position grid. */
    ops->linear(ops, x, pv, v->patch_w, v->patch_b, IV_ACT_NONE, NULL);
    ops->embed_bag(ops, pe, v->pos_embed, taps_dev, weights_dev, 4);
    ops->add(ops, x, x, pe);

    iv_batch batch = {.n_seqs = n_segs, .n_tokens = N, .cu_seqlens = cu, .cu_seqlens_dev = cu_dev};
    for (int s = 0; s < n_segs; s++)
        if (iv_batch_seqlen(&batch, s) > batch.max_seqlen) batch.max_seqlen = iv_batch_seqlen(&batch, s);
    iv_attn_extras ex = {.positions = pos, .positions_dev = pos_dev, .pos_axis_stride = N};
    /* The blocks run as whole stretches up to each DeepStack layer: one
     * stack call allocates its scratch once for all its layers, where a call
     * per layer took fresh scratch 24 times (about 1 GB of new pages per
     * 448 x 448 image, each zeroed by the kernel and cold in cache). */
    int produced = 0;
    for (int l0 = 0; l0 < v->depth;) {
        int l1 = l0;
        while (l1 < v->depth - 1 && deepstack_slot(v, l1) < 0) l1++;
        ex.first_layer = l0;
        if (iv_block_stack_forward(ops, &v->block, &v->layers[l0], l1 - l0 + 1, &batch, &ex, x, mem)) goto oom;
        l0 = l1 + 1;
        const int k = deepstack_slot(v, l1);
        if (k < 0) continue;
        deepstack[produced] = iv_act_alloc(ops, mem->dev, F, v->out_hidden, v->out_hidden);
        if (!deepstack[produced].data || run_merger(ops, v, &v->deepstack[k], x, mem->dev, deepstack[produced]))
            goto oom;
        produced++;
    }
    *merged = iv_act_alloc(ops, mem->dev, F, v->out_hidden, v->out_hidden);
    if (!merged->data || run_merger(ops, v, &v->merger, x, mem->dev, *merged)) goto oom;
    return 0;
oom:
    return iv_errf(err, IV_E_NOMEM, "out of memory for the vision tower over %d images", n);
}

/* ---------------------------------------------------------------- mixed forward */

void iv_qwen3vl_rope_index(const iv_qwen3vl_vision *v, int len, const iv_seq_images *images, int32_t *pos,
                           int64_t stride)
{
    int32_t cur = 0;
    int next = 0;
    const int n = images ? images->n : 0;
    for (int t = 0; t < len;) {
        if (next < n && t == images->images[next].token_offset) {
            const iv_image_input *im = &images->images[next++];
            const int gh = im->grid_h / v->merge, gw = im->grid_w / v->merge;
            const int64_t count = (int64_t)im->grid_t * gh * gw;
            for (int64_t j = 0; j < count; j++) {
                pos[t + j] = (int32_t)(j / ((int64_t)gh * gw)) + cur;
                pos[stride + t + j] = (int32_t)((j / gw) % gh) + cur;
                pos[2 * stride + t + j] = (int32_t)(j % gw) + cur;
            }
            t += (int)count;
            cur += (im->grid_h > im->grid_w ? im->grid_h : im->grid_w) / v->merge;
        } else {
            pos[t] = pos[stride + t] = pos[2 * stride + t] = cur++;
            t++;
        }
    }
}

/* Each image's span holds exactly its image pad tokens, spans come in order,
 * and no image pad token is left outside them. */
static int check_spans(const iv_model *m, const iv_batch *b, int s, const iv_seq_images *si, iv_err *err)
{
    const int len = iv_batch_seqlen(b, s);
    const int32_t *ids = b->ids + b->cu_seqlens[s];
    int64_t covered = 0, present = 0;
    int end = 0;
    for (int t = 0; t < len; t++) present += ids[t] == m->image_token_id;
    for (int i = 0; si && i < si->n; i++) {
        const iv_image_input *im = &si->images[i];
        if (im->grid_h % m->vision->merge || im->grid_w % m->vision->merge || im->grid_t <= 0 || im->grid_h <= 0 ||
            im->grid_w <= 0)
            return iv_errf(err, IV_E_INVALID, "input %d image %d: bad grid (%d, %d, %d)", s, i, im->grid_t,
                           im->grid_h, im->grid_w);
        const int64_t k = iv_qwen3vl_image_tokens(m->vision, im);
        if (im->token_offset < end || im->token_offset + k > len)
            return iv_errf(err, IV_E_INVALID, "input %d image %d: its %lld tokens at %d overlap another image or "
                                              "pass the end of the input (%d tokens)",
                           s, i, (long long)k, im->token_offset, len);
        for (int64_t t = im->token_offset; t < im->token_offset + k; t++)
            if (ids[t] != m->image_token_id)
                return iv_errf(err, IV_E_INVALID, "input %d image %d: token %lld is %d, not the image token %d", s,
                               i, (long long)t, ids[t], m->image_token_id);
        end = im->token_offset + (int)k;
        covered += k;
    }
    if (covered != present)
        return iv_errf(err, IV_E_INVALID, "input %d has %lld image tokens but its images fill %lld", s,
                       (long long)present, (long long)covered);
    return 0;
}

int iv_qwen3vl_forward(const iv_model *m, const iv_batch *b, const iv_seq_images *images, const iv_fwd_mem *mem,
                       iv_view *hidden, iv_err *err)
{
    const iv_qwen3vl_vision *v = m->vision;
    int n_images = 0;
    for (int s = 0; images && s < b->n_seqs; s++) n_images += images[s].n;
    if (!v) {
        if (n_images) return iv_errf(err, IV_E_UNSUPPORTED, "this checkpoint has no vision tower: images cannot be used");
        return iv_model_forward(m, b, mem, hidden, err);
    }
    for (int s = 0; s < b->n_seqs; s++)
        if (check_spans(m, b, s, images ? &images[s] : NULL, err)) return -1;
    const int64_t T = b->n_tokens;
    iv_image_input *flat = iv_arena_alloc(mem->host, (size_t)(n_images > 0 ? n_images : 1) * sizeof *flat);
    int64_t *spans = iv_arena_alloc(mem->host, (size_t)(n_images > 0 ? n_images : 1) * 3 * sizeof(int64_t));
    int32_t *pos = iv_arena_alloc(mem->host, (size_t)(3 * T) * sizeof(int32_t));
    if (!flat || !spans || !pos) return iv_errf(err, IV_E_NOMEM, "out of memory");
    iv_visual_inject vi = {.token_row = spans, .feat_row = spans + n_images, .len = spans + 2 * n_images};
    int64_t feat = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        const iv_seq_images *si = images ? &images[s] : NULL;
        for (int i = 0; si && i < si->n; i++) {
            flat[vi.n_spans] = si->images[i];
            spans[vi.n_spans] = b->cu_seqlens[s] + si->images[i].token_offset;
            spans[n_images + vi.n_spans] = feat;
            spans[2 * n_images + vi.n_spans] = iv_qwen3vl_image_tokens(v, &si->images[i]);
            feat += spans[2 * n_images + vi.n_spans++];
        }
        iv_qwen3vl_rope_index(v, iv_batch_seqlen(b, s), si, pos + b->cu_seqlens[s], T);
    }
    iv_view ds[IV_QWEN3VL_MAX_DEEPSTACK];
    if (n_images) {
        if (iv_qwen3vl_vision_forward(m, flat, n_images, mem, &vi.embeds, ds, err)) return -1;
        vi.n_deepstack = v->n_deepstack;
        vi.deepstack = ds;
    }
    vi.positions = pos;
    vi.pos_axis_stride = T;
    vi.positions_dev = iv_dev_upload_new(m->ops, mem->dev, pos, (size_t)(3 * T) * sizeof(int32_t));
    if (!vi.positions_dev) return iv_errf(err, IV_E_NOMEM, "out of memory");
    return iv_model_forward_visual(m, b, &vi, mem, hidden, err);
}
