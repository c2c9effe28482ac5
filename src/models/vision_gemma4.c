/* The Gemma4 vision tower, embedder and mixed forward (see vision_gemma4.h).
 * Written from transformers 5.25's modeling_gemma4.py (Gemma4VisionModel,
 * Gemma4VisionPatchEmbedder, Gemma4VisionEncoder, Gemma4VisionPooler,
 * Gemma4MultimodalEmbedder, Gemma4Model.forward). */
#include "models/vision_gemma4.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "image/gemma4.h" /* iv_gemma4_image_token_run */
#include "models/loader.h"
#include "models/vision.h"
#include "models/vision_gemma4_unified.h"
#include "tensor/safetensors.h"

/* Gemma4ForConditionalGeneration saves model.vision_tower. / model.embed_vision.;
 * Gemma4Model saves them without "model.". */
static const char *const k_prefixes[] = {"model.", "", NULL};

/* pre + name, into buf. */
static const char *pname(char *buf, size_t cap, const char *pre, const char *name)
{
    snprintf(buf, cap, "%s%s", pre, name);
    return buf;
}

/* ---------------------------------------------------------------- loading */

int iv_gemma4_vision_int(const cJSON *vc, const char *key, int64_t def, int64_t max, int *out, iv_err *err)
{
    const cJSON *it = iv_json_get(vc, key);
    if (it && !iv_json_is_integer(it))
        return iv_errf(err, IV_E_FORMAT, "config.json: vision_config.%s must be a positive integer", key);
    const int64_t x = iv_json_int(vc, key, def);
    if (x <= 0 || x > max)
        return iv_errf(err, IV_E_FORMAT, "config.json: vision_config.%s must be an integer in [1, %lld]", key,
                       (long long)max);
    *out = (int)x;
    return 0;
}

/* Switches Gemma4VisionConfig has that this tower does not run. */
static int refuse_switches(const cJSON *vc, iv_err *err)
{
    static const char *const flags[] = {"use_clipped_linears", "standardize", "attention_bias"};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
        const cJSON *f = iv_json_get(vc, flags[i]);
        if (f && !cJSON_IsBool(f))
            return iv_errf(err, IV_E_FORMAT, "config.json: vision_config.%s must be true or false", flags[i]);
        if (cJSON_IsTrue(f))
            return iv_errf(err, IV_E_UNSUPPORTED, "config.json: vision_config.%s true is not implemented for the "
                                                  "Gemma4 vision tower",
                           flags[i]);
    }
    const char *type = iv_json_str(vc, "model_type", "gemma4_vision");
    if (strcmp(type, "gemma4_vision"))
        return iv_errf(err, IV_E_UNSUPPORTED, "config.json: vision_config.model_type \"%s\" (only \"gemma4_vision\")",
                       type);
    return 0;
}

/* compute_axial_rope_parameters: head_dim / 4 frequencies 1 / theta^(2i /
 * (head_dim / 2)) in float32, the first copy turning with the column (axis
 * 0), the second with the row (axis 1), over the permuted head. */
static int vision_rope(iv_model *m, const cJSON *vc, iv_gemma4_vision *v, iv_err *err)
{
    return iv_vision_axial_rope(m, vc, v->head_dim, 100.0, 0, &v->inv_freq, &v->freq_section, err);
}

/* The head channel that new channel j reads: the second and third quarters
 * swap, so that apply_multidimensional_rope's two NeoX halves-of-halves
 * become one whole-head NeoX rotation (see the header). Its own inverse. */
static int head_perm(int j, int hd)
{
    const int q = hd / 4, part = j / q;
    return part == 1 ? j + q : part == 2 ? j - q : j;
}

/* A copy of w ([heads * hd, C], or [hd] when heads is 0) with each head's
 * rows permuted. */
static int permuted(iv_model *m, const iv_tensor *w, int heads, int hd, const iv_tensor **out, iv_err *err)
{
    const int64_t C = heads ? w->shape[1] : 1, rows = heads ? (int64_t)heads * hd : hd;
    iv_tensor *t = heads ? iv_model_new_tensor(m, rows, C) : iv_model_new_tensor(m, hd, -1);
    if (!t) return iv_errf(err, IV_E_NOMEM, "out of memory");
    const float *src = w->data;
    float *dst = t->data;
    for (int64_t r = 0; r < rows; r++) {
        const int64_t h = r / hd, j = r % hd;
        memcpy(dst + r * C, src + (h * hd + head_perm((int)j, hd)) * C, (size_t)C * sizeof(float));
    }
    *out = t;
    return 0;
}

static int lnorm(iv_model *m, const char *name, int64_t dim, iv_norm *out, iv_err *err)
{
    out->present = 1;
    out->b = NULL;
    return iv_ld_top(m, name, dim, -1, &out->w, err);
}

static int load_layer(iv_model *m, const char *pre, int l, const iv_gemma4_vision *v, int64_t inter, iv_layer *L, iv_err *err)
{
    char n[6][256];
    const int64_t H = v->hidden, D = v->head_dim, Q = (int64_t)v->n_heads * D, K = (int64_t)v->n_kv_heads * D;
    const iv_tensor *q, *k, *vv, *gate_up[2], *qkv_b, *qn, *kn;
#define LN(i, s) (snprintf(n[i], sizeof n[i], "%svision_tower.encoder.layers.%d." s, pre, l), n[i])
    if (iv_ld_top(m, LN(0, "self_attn.q_proj.linear.weight"), Q, H, &q, err) ||
        iv_ld_top(m, LN(1, "self_attn.k_proj.linear.weight"), K, H, &k, err) ||
        iv_ld_top(m, LN(2, "self_attn.v_proj.linear.weight"), K, H, &vv, err) ||
        iv_ld_top(m, LN(3, "self_attn.o_proj.linear.weight"), H, Q, &L->o_w, err) ||
        iv_ld_top(m, LN(4, "self_attn.q_norm.weight"), D, -1, &qn, err) ||
        iv_ld_top(m, LN(5, "self_attn.k_norm.weight"), D, -1, &kn, err) ||
        iv_ld_top(m, LN(0, "mlp.gate_proj.linear.weight"), inter, H, &gate_up[0], err) ||
        iv_ld_top(m, LN(1, "mlp.up_proj.linear.weight"), inter, H, &gate_up[1], err) ||
        iv_ld_top(m, LN(2, "mlp.down_proj.linear.weight"), H, inter, &L->down_w, err) ||
        lnorm(m, LN(3, "input_layernorm.weight"), H, &L->attn_norm, err) ||
        lnorm(m, LN(4, "post_attention_layernorm.weight"), H, &L->post_attn_norm, err) ||
        lnorm(m, LN(5, "pre_feedforward_layernorm.weight"), H, &L->mlp_norm, err) ||
        lnorm(m, LN(0, "post_feedforward_layernorm.weight"), H, &L->post_mlp_norm, err))
        return -1;
#undef LN
    const iv_tensor *qp, *kp;
    if (permuted(m, q, v->n_heads, v->head_dim, &qp, err) || permuted(m, k, v->n_kv_heads, v->head_dim, &kp, err) ||
        permuted(m, qn, 0, v->head_dim, &L->q_norm_w, err) || permuted(m, kn, 0, v->head_dim, &L->k_norm_w, err))
        return -1;
    /* Gate rows first: the block's GLU runs act(gate) * up with act_on_first. */
    if (iv_fuse_qkv(m, qp, kp, vv, NULL, NULL, NULL, &L->qkv_w, &qkv_b, err) ||
        iv_concat_rows(m, gate_up, 2, &L->up_w, err))
        return -1;
    L->window_left = L->window_right = -1;
    L->inv_freq = v->inv_freq;
    return 0;
}

static int vision_geometry(const cJSON *vc, iv_gemma4_vision *v, int *inter, iv_err *err)
{
    const int64_t big = 1 << 20, small = 1 << 10;
    if (iv_gemma4_vision_int(vc, "num_hidden_layers", 16, small, &v->depth, err) ||
        iv_gemma4_vision_int(vc, "hidden_size", 768, big, &v->hidden, err) ||
        iv_gemma4_vision_int(vc, "num_attention_heads", 12, small, &v->n_heads, err) ||
        iv_gemma4_vision_int(vc, "num_key_value_heads", 12, small, &v->n_kv_heads, err) ||
        iv_gemma4_vision_int(vc, "head_dim", 64, small, &v->head_dim, err) ||
        iv_gemma4_vision_int(vc, "intermediate_size", 3072, big, inter, err) ||
        iv_gemma4_vision_int(vc, "patch_size", 16, small, &v->patch, err) ||
        iv_gemma4_vision_int(vc, "pooling_kernel_size", 3, small, &v->pool, err) ||
        iv_gemma4_vision_int(vc, "position_embedding_size", 10240, big, &v->pos_size, err))
        return -1;
    if (v->n_heads % v->n_kv_heads)
        return iv_errf(err, IV_E_FORMAT, "vision num_attention_heads %d is not a multiple of num_key_value_heads %d",
                       v->n_heads, v->n_kv_heads);
    v->patch_dim = 3 * (int64_t)v->patch * v->patch;
    return 0;
}

/* What both image paths set on the model: the run ids and the hook. */
static void set_image_run(iv_model *m, iv_gemma4_vision *v)
{
    v->boi_id = (int)iv_json_int(m->cfg.root, "boi_token_id", 255999);
    v->eoi_id = (int)iv_json_int(m->cfg.root, "eoi_token_id", 258882);
    m->image_token_id = (int)iv_json_int(m->cfg.root, "image_token_id", 258880);
    m->image_placeholder_id = m->image_token_id;
    m->image_token_run = iv_gemma4_model_token_run;
}

int iv_gemma4_vision_load(iv_model *m, iv_gemma4_vision **out, iv_err *err)
{
    *out = NULL;
    const cJSON *vc = iv_json_get(m->cfg.root, "vision_config");
    if (!vc || cJSON_IsNull(vc)) return 0;
    if (!cJSON_IsObject(vc)) return iv_errf(err, IV_E_FORMAT, "config.json: vision_config must be an object");
    if (!strcmp(m->cfg.model_type, "gemma4_unified")) {
        iv_gemma4_vision *v = iv_model_alloc(m, sizeof *v);
        if (!v) return iv_errf(err, IV_E_NOMEM, "out of memory");
        if (iv_gemma4_unified_vision_load(m, vc, v, err)) return -1;
        set_image_run(m, v);
        *out = v;
        return 0;
    }
    iv_gemma4_vision *v = iv_model_alloc(m, sizeof *v);
    if (!v) return iv_errf(err, IV_E_NOMEM, "out of memory");
    int inter = 0;
    if (refuse_switches(vc, err) || vision_geometry(vc, v, &inter, err) || vision_rope(m, vc, v, err)) return -1;
    const char *act_name = iv_json_str(vc, "hidden_activation", "gelu_pytorch_tanh");
    const int act = iv_act_from_name(act_name);
    if (act < 0)
        return iv_errf(err, IV_E_UNSUPPORTED, "vision_config hidden_activation \"%s\" is not supported", act_name);
    const float eps = (float)iv_json_num(vc, "rms_norm_eps", 1e-6);
    v->block = (iv_block_spec){.hidden = v->hidden, .n_heads = v->n_heads, .n_kv_heads = v->n_kv_heads,
                               .head_dim = v->head_dim, .intermediate = inter, .norm_kind = IV_NORM_RMS,
                               .norm_place = IV_NORM_SANDWICH, .norm_eps = eps, .causal = 0, .attn_scale = 1.0f,
                               .act = (iv_act)act, .gated = 1, .act_on_first = 1, .rot_dim = v->head_dim,
                               .rope_freq_section = v->freq_section, .qk_norm_eps = eps, .v_norm = 1};
    v->embed_eps = eps;
    v->root_hidden = (float)sqrt((double)v->hidden);
    v->out_hidden = m->block.hidden;
    const cJSON *tc = iv_json_get(m->cfg.root, "text_config");
    v->bidirectional_vision = !strcmp(iv_json_str(tc ? tc : m->cfg.root, "use_bidirectional_attention", ""), "vision");

    const char *pre = NULL;
    char name[512];
    for (const char *const *p = k_prefixes; *p && !pre; p++)
        if (iv_weights_find(m->weights, pname(name, sizeof name, *p, "vision_tower.patch_embedder.input_proj.weight")))
            pre = *p;
    if (!pre)
        return iv_errf(err, IV_E_FORMAT, "config.json has a vision_config but the checkpoint no "
                                         "(model.)vision_tower.patch_embedder.input_proj.weight");
    const iv_tensor *table;
    if (iv_weights_f32_matrix(m->weights, pname(name, sizeof name, pre, "vision_tower.patch_embedder.input_proj.weight"),
                              v->hidden, v->patch_dim, &v->patch_w, err) ||
        iv_weights_f32_matrix(m->weights,
                              pname(name, sizeof name, pre, "vision_tower.patch_embedder.position_embedding_table"), 2,
                              (int64_t)v->pos_size * v->hidden, &table, err))
        return -1;
    iv_tensor *pt = iv_model_new_tensor(m, 2 * (int64_t)v->pos_size, v->hidden);
    if (!pt) return iv_errf(err, IV_E_NOMEM, "out of memory");
    memcpy(pt->data, table->data, (size_t)(2 * (int64_t)v->pos_size * v->hidden) * sizeof(float));
    iv_weights_release(m->weights, table);
    v->pos_table = pt;
    v->layers = iv_model_alloc(m, (size_t)v->depth * sizeof *v->layers);
    if (!v->layers) return iv_errf(err, IV_E_NOMEM, "out of memory");
    for (int l = 0; l < v->depth; l++)
        if (load_layer(m, pre, l, v, inter, &v->layers[l], err)) return -1;
    snprintf(name, sizeof name, "%svision_tower.encoder.layers.%d.input_layernorm.weight", pre, v->depth);
    if (iv_weights_find(m->weights, name))
        return iv_errf(err, IV_E_FORMAT, "the checkpoint has more vision layers than vision_config.num_hidden_layers");
    if (iv_ld_top(m, pname(name, sizeof name, pre, "embed_vision.embedding_projection.weight"), v->out_hidden,
                  v->hidden, &v->proj_w, err))
        return -1;
    set_image_run(m, v);
    *out = v;
    return 0;
}

/* ---------------------------------------------------------------- the tower */

int64_t iv_gemma4_image_tokens(const iv_gemma4_vision *v, const iv_image_input *img)
{
    const int k = v->merged ? 1 : v->pool;
    return (int64_t)(img->grid_h / k) * (img->grid_w / k);
}

int64_t iv_gemma4_model_token_run(const iv_model *m, const iv_image_input *img, int32_t *out,
                                  int64_t *feature_start)
{
    const iv_gemma4_vision *v = m->gemma4_vision;
    *feature_start = 1;
    return iv_gemma4_image_token_run((int)iv_gemma4_image_tokens(v, img), v->boi_id, m->image_token_id, v->eoi_id,
                                     out);
}

static int check_image(const iv_gemma4_vision *v, const iv_image_input *im, iv_err *err)
{
    const int k = v->merged ? 1 : v->pool; /* unified rows are merged already */
    if (im->grid_t != 1 || im->grid_h <= 0 || im->grid_w <= 0 || im->grid_h % k || im->grid_w % k)
        return iv_errf(err, IV_E_INVALID,
                       "grid (%d, %d, %d) must be one frame of positive height and width, multiples of the pooling "
                       "kernel %d",
                       im->grid_t, im->grid_h, im->grid_w, k);
    if (im->grid_h > v->pos_size || im->grid_w > v->pos_size)
        return iv_errf(err, IV_E_INVALID, "grid %d x %d is past the %d positions of the position table", im->grid_h,
                       im->grid_w, v->pos_size);
    return 0;
}

static int check_images(const iv_gemma4_vision *v, const iv_image_input *imgs, int n, int64_t *N, iv_err *err)
{
    *N = 0;
    for (int i = 0; i < n; i++) {
        if (check_image(v, &imgs[i], err)) return iv_err_prefix(err, "image %d: ", i);
        if (!imgs[i].pixel_values) return iv_errf(err, IV_E_INVALID, "image %d has no pixel values", i);
        const int64_t np = (int64_t)imgs[i].grid_h * imgs[i].grid_w;
        if (np > (1 << 24) || np > (1 << 26) - *N)
            return iv_errf(err, IV_E_INVALID, "image %d: %d x %d patches is too many", i, imgs[i].grid_h,
                           imgs[i].grid_w);
        *N += np;
    }
    return 0;
}

/* Host tables, patches in pool-block order (block row, block column, row
 * in the block, column in the block): the patch rows scaled to 2 (x - 0.5)
 * as the patch embedder does, the two position-table ids of each patch
 * (column, pos_size + row), its rotary axes (column at [t], row at [N +
 * t]), the images' attention segments and the k^2-row pooling segments. */
static void vision_tables(const iv_gemma4_vision *v, const iv_image_input *imgs, int n, int64_t N, float *pix,
                          int32_t *ids, int32_t *pos, int32_t *cu, int32_t *pool_cu)
{
    const int k = v->pool;
    const int64_t D = v->patch_dim;
    int64_t t = 0, s = 0;
    cu[0] = pool_cu[0] = 0;
    for (int i = 0; i < n; i++) {
        const iv_image_input *im = &imgs[i];
        for (int by = 0; by < im->grid_h / k; by++)
            for (int bx = 0; bx < im->grid_w / k; bx++, s++) {
                pool_cu[s + 1] = pool_cu[s] + k * k;
                for (int ky = 0; ky < k; ky++)
                    for (int kx = 0; kx < k; kx++, t++) {
                        const int y = by * k + ky, x = bx * k + kx;
                        const float *src = im->pixel_values + ((int64_t)y * im->grid_w + x) * D;
                        for (int64_t c = 0; c < D; c++) pix[t * D + c] = 2.0f * (src[c] - 0.5f);
                        ids[2 * t] = x;
                        ids[2 * t + 1] = v->pos_size + y;
                        pos[t] = x;
                        pos[N + t] = y;
                    }
            }
        cu[i + 1] = (int32_t)t;
    }
}

int iv_gemma4_vision_forward(const iv_model *m, const iv_image_input *imgs, int n, const iv_fwd_mem *mem,
                             iv_view *states, iv_view *features, iv_err *err)
{
    const iv_gemma4_vision *v = m->gemma4_vision;
    const iv_ops *ops = m->ops;
    if (!v) return iv_errf(err, IV_E_UNSUPPORTED, "this checkpoint has no vision tower");
    if (n <= 0) return iv_errf(err, IV_E_INVALID, "no images");
    int64_t N;
    if (check_images(v, imgs, n, &N, err)) return -1;
    if (v->merged) return iv_gemma4_unified_embed(m, imgs, n, N, mem, states, features, err);
    const int64_t H = v->hidden, S = N / ((int64_t)v->pool * v->pool);
    int32_t *ids = iv_arena_alloc(mem->host, (size_t)N * 2 * sizeof(int32_t));
    int32_t *pos = iv_arena_alloc(mem->host, (size_t)N * 2 * sizeof(int32_t));
    float *taps = iv_arena_alloc(mem->host, (size_t)N * 2 * sizeof(float));
    int32_t *cu = iv_arena_alloc(mem->host, (size_t)(n + 1) * sizeof(int32_t));
    int32_t *pool_cu = iv_arena_alloc(mem->host, (size_t)(S + 1) * sizeof(int32_t));
    float *pix = iv_arena_alloc(mem->host, (size_t)(N * v->patch_dim) * sizeof(float));
    if (!ids || !pos || !taps || !cu || !pool_cu || !pix) goto oom;
    vision_tables(v, imgs, n, N, pix, ids, pos, cu, pool_cu);
    for (int64_t i = 0; i < 2 * N; i++) taps[i] = 1.0f;
    const int32_t *ids_dev = iv_dev_upload_new(ops, mem->dev, ids, (size_t)N * 2 * sizeof(int32_t));
    const float *taps_dev = iv_dev_upload_new(ops, mem->dev, taps, (size_t)N * 2 * sizeof(float));
    const int32_t *pos_dev = iv_dev_upload_new(ops, mem->dev, pos, (size_t)N * 2 * sizeof(int32_t));
    const int32_t *cu_dev = iv_dev_upload_new(ops, mem->dev, cu, (size_t)(n + 1) * sizeof(int32_t));
    const int32_t *pool_cu_dev = iv_dev_upload_new(ops, mem->dev, pool_cu, (size_t)(S + 1) * sizeof(int32_t));
    const iv_view pv = iv_act_alloc(ops, mem->dev, N, v->patch_dim, iv_ops_act_stride(ops, v->patch_dim));
    const iv_view x = iv_act_alloc(ops, mem->dev, N, H, H);
    const iv_view pe = iv_act_alloc(ops, mem->dev, N, H, H);
    if (!ids_dev || !taps_dev || !pos_dev || !cu_dev || !pool_cu_dev || !pv.data || !x.data || !pe.data ||
        iv_ops_upload_f32(ops, pv, pix, mem->host))
        goto oom;

    ops->linear(ops, x, pv, v->patch_w, NULL, IV_ACT_NONE, NULL); /* input_proj */
    ops->embed_bag(ops, pe, v->pos_table, ids_dev, taps_dev, 2);  /* x_emb + y_emb */
    ops->add(ops, x, x, pe);

    iv_batch batch = {.n_seqs = n, .n_tokens = N, .cu_seqlens = cu, .cu_seqlens_dev = cu_dev};
    for (int s = 0; s < n; s++)
        if (iv_batch_seqlen(&batch, s) > batch.max_seqlen) batch.max_seqlen = iv_batch_seqlen(&batch, s);
    const iv_attn_extras ex = {.positions = pos, .positions_dev = pos_dev, .pos_axis_stride = N};
    if (iv_block_stack_forward(ops, &v->block, v->layers, v->depth, &batch, &ex, x, mem)) goto oom;

    /* The pooler: the mean of each block's k^2 rows, times sqrt(hidden). */
    const iv_view pooled = iv_act_alloc(ops, mem->dev, S, H, iv_ops_act_stride(ops, H));
    if (!pooled.data) goto oom;
    const iv_pool_args pa = {.out = pooled, .x = x, .cu_seqlens = pool_cu, .cu_seqlens_dev = pool_cu_dev,
                             .n_seqs = (int)S, .mode = IV_POOL_MEAN};
    ops->pool(ops, &pa);
    ops->scale(ops, pooled, pooled, v->root_hidden);
    *states = pooled;
    if (features) {
        const iv_view normed = iv_act_alloc(ops, mem->dev, S, H, iv_ops_act_stride(ops, H));
        *features = iv_act_alloc(ops, mem->dev, S, v->out_hidden, v->out_hidden);
        if (!normed.data || !features->data) goto oom;
        ops->rms_norm(ops, normed, pooled, NULL, NULL, v->embed_eps, 0.0f);
        ops->linear(ops, *features, normed, v->proj_w, NULL, IV_ACT_NONE, NULL);
    }
    return 0;
oom:
    return iv_errf(err, IV_E_NOMEM, "out of memory for the vision tower over %d images", n);
}

/* ---------------------------------------------------------------- mixed forward */

/* Each image's soft tokens lie within its sequence after the previous
 * image's, all image tokens, and no image token of the sequence is left
 * outside them. */
static int check_runs(const iv_model *m, const iv_batch *b, int s, const iv_seq_images *si, iv_err *err)
{
    const iv_gemma4_vision *v = m->gemma4_vision;
    const int len = iv_batch_seqlen(b, s), img_id = m->image_token_id;
    const int32_t *ids = b->ids + b->cu_seqlens[s];
    int64_t covered = 0, present = 0, end = 0;
    for (int t = 0; t < len; t++) present += ids[t] == img_id;
    for (int i = 0; si && i < si->n; i++) {
        const iv_image_input *im = &si->images[i];
        if (check_image(v, im, err)) return iv_err_prefix(err, "input %d image %d: ", s, i);
        const int64_t soft = iv_gemma4_image_tokens(v, im);
        if (im->token_offset < end || im->token_offset + soft > len)
            return iv_errf(err, IV_E_INVALID, "input %d image %d: its %lld image tokens at %d overlap another image "
                                              "or pass the end of the input (%d tokens)",
                           s, i, (long long)soft, im->token_offset, len);
        for (int64_t j = 0; j < soft; j++)
            if (ids[im->token_offset + j] != img_id)
                return iv_errf(err, IV_E_INVALID, "input %d image %d: token %lld is %d, not the image token %d", s, i,
                               (long long)(im->token_offset + j), ids[im->token_offset + j], img_id);
        end = im->token_offset + soft;
        covered += soft;
    }
    if (covered != present)
        return iv_errf(err, IV_E_INVALID, "input %d has %lld image tokens but its images fill %lld", s,
                       (long long)present, (long long)covered);
    return 0;
}

/* Each token's run of image tokens within its sequence (0, 1, ...), or -1. */
static void image_runs(const iv_model *m, const iv_batch *b, int32_t *blk)
{
    for (int s = 0; s < b->n_seqs; s++) {
        const int32_t *ids = b->ids + b->cu_seqlens[s];
        int32_t *out = blk + b->cu_seqlens[s];
        for (int t = 0, g = -1; t < iv_batch_seqlen(b, s); t++) {
            const int img = ids[t] == m->image_token_id;
            if (img && (t == 0 || ids[t - 1] != m->image_token_id)) g++;
            out[t] = img ? g : -1;
        }
    }
}

/* Per sequence [H, L, L] at off[s]: 0 where i may see j (j <= i, and i - j
 * <= window_left when window_left >= 0; or i, j in the same image run),
 * else -1e30 (the softmax weight is exactly 0, as transformers' min-float
 * mask). */
static void fill_mask(const iv_batch *b, const int32_t *blk, int H, int window_left, const int64_t *off, float *bias)
{
    for (int s = 0; s < b->n_seqs; s++) {
        const int L = iv_batch_seqlen(b, s);
        const int32_t *g = blk + b->cu_seqlens[s];
        float *row = bias + off[s];
        for (int i = 0; i < L; i++)
            for (int j = 0; j < L; j++) {
                const int near = j <= i && (window_left < 0 || i - j <= window_left);
                row[(int64_t)i * L + j] = near || (g[i] >= 0 && g[i] == g[j]) ? 0.0f : -1e30f;
            }
        for (int h = 1; h < H; h++) memcpy(row + (int64_t)h * L * L, row, (size_t)L * L * sizeof(float));
    }
}

/* Gemma4 unified's sliding layers: their own mask, built once per batch
 * on the host (fill_mask with the window) and uploaded into the layer's
 * dynamic bias blocks. The static bias (causal OR image run) the block adds
 * on top changes nothing: it allows a superset. */
typedef struct window_mask {
    const float *bias;   /* host, at off[s] per sequence */
    const int64_t *off;  /* host */
    int window_left;     /* the sliding layers' (one table serves them all) */
} window_mask;

static int copy_window_mask(const iv_ops *ops, const void *ctx, const iv_dyn_bias_args *a)
{
    const window_mask *w = ctx;
    for (int s = a->seq_begin; s < a->seq_end; s++) {
        const int64_t n = a->offsets[s - a->seq_begin + 1] - a->offsets[s - a->seq_begin];
        ops->upload(ops, a->bias + a->offsets[s - a->seq_begin], w->bias + w->off[s], (size_t)n * sizeof(float));
    }
    return 0;
}

/* use_bidirectional_attention "vision": image tokens also see their whole
 * run of image tokens. How that combines with each layer's own mask is the
 * reference's:
 *  - Gemma4 (create_masks_for_vision_model): sliding layers j > i - W AND
 *    (j <= i OR same run); full layers causal. The attention op runs
 *    without its causal flag: sliding layers keep their left window and
 *    lose any right bound, full layers get a right window of 0, and a bias
 *    per sequence masks j > i outside image runs.
 *  - Gemma4 unified (create_masks_for_generate with block_sequence_ids):
 *    every layer's mask OR same run: full layers (j <= i) OR same run, the
 *    static bias with no window; sliding layers (j <= i AND i - j < W) OR
 *    same run, which a window cannot express: their own bias
 *    (window_mask) and no window. */
static int vision_masks(const iv_model *m, const iv_batch *b, const iv_fwd_mem *mem, iv_visual_inject *vi,
                        iv_err *err)
{
    const int H = m->block.n_heads, merged = m->gemma4_vision->merged;
    int64_t *off = iv_arena_alloc(mem->host, (size_t)(b->n_seqs + 1) * sizeof(int64_t));
    int32_t *blk = iv_arena_alloc(mem->host, (size_t)(b->n_tokens > 0 ? b->n_tokens : 1) * sizeof(int32_t));
    if (!off || !blk) return iv_errf(err, IV_E_NOMEM, "out of memory");
    int64_t total = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        const int64_t L = iv_batch_seqlen(b, s);
        off[s] = total;
        total += (int64_t)H * L * L;
    }
    off[b->n_seqs] = total;
    if (total > ((int64_t)1 << 27) >> merged)
        return iv_errf(err, IV_E_TOO_LARGE, "the image attention mask of this batch would take %lld floats (over "
                                            "2^%d): send fewer or shorter inputs per batch",
                       (long long)total, 27 - merged);
    float *bias = iv_arena_alloc(mem->host, (size_t)(total > 0 ? total : 1) * sizeof(float));
    iv_layer *layers = iv_arena_alloc(mem->host, (size_t)m->n_layers * sizeof *layers);
    iv_block_spec *spec = iv_arena_alloc(mem->host, sizeof *spec);
    if (!bias || !layers || !spec) return iv_errf(err, IV_E_NOMEM, "out of memory for the image attention mask");
    image_runs(m, b, blk);
    fill_mask(b, blk, H, -1, off, bias);
    *spec = m->block;
    spec->causal = 0;
    window_mask *wm = NULL;
    for (int l = 0; l < m->n_layers; l++) {
        iv_layer *L = &layers[l];
        *L = m->layers[l];
        if (!merged) {
            L->window_right = L->window_left >= 0 ? -1 : 0; /* sliding: no right bound; full: causal */
            continue;
        }
        if (L->window_left >= 0) {
            if (wm && L->window_left != wm->window_left)
                return iv_errf(err, IV_E_UNSUPPORTED, "sliding layers of different windows with images");
            if (!wm) {
                wm = iv_arena_alloc(mem->host, sizeof *wm);
                float *wb = iv_arena_alloc(mem->host, (size_t)(total > 0 ? total : 1) * sizeof(float));
                if (!wm || !wb) return iv_errf(err, IV_E_NOMEM, "out of memory for the image attention mask");
                fill_mask(b, blk, H, L->window_left, off, wb);
                *wm = (window_mask){.bias = wb, .off = off, .window_left = L->window_left};
            }
            L->dyn_bias = copy_window_mask;
            L->dyn_bias_ctx = wm;
        }
        L->window_left = L->window_right = -1;
    }
    vi->spec = spec;
    vi->layers = layers;
    vi->bias = iv_dev_upload_new(m->ops, mem->dev, bias, (size_t)total * sizeof(float));
    vi->bias_offsets = off;
    vi->bias_offsets_dev = iv_dev_upload_new(m->ops, mem->dev, off, (size_t)b->n_seqs * sizeof(int64_t));
    if (!vi->bias || !vi->bias_offsets_dev) return iv_errf(err, IV_E_NOMEM, "out of memory for the image attention mask");
    return 0;
}

int iv_gemma4_image_inject(const iv_model *m, const iv_batch *b, const iv_seq_images *images, const iv_fwd_mem *mem,
                           iv_visual_inject *vi, iv_err *err)
{
    const iv_gemma4_vision *v = m->gemma4_vision;
    memset(vi, 0, sizeof *vi);
    int n_images = 0;
    for (int s = 0; images && s < b->n_seqs; s++) {
        if (images[s].n < 0 || (images[s].n > 0 && !images[s].images))
            return iv_errf(err, IV_E_INVALID, "input %d: bad image list", s);
        n_images += images[s].n;
    }
    if (!v) {
        if (n_images) return iv_errf(err, IV_E_UNSUPPORTED, "this checkpoint has no vision tower: images cannot be used");
        return 0;
    }
    for (int s = 0; s < b->n_seqs; s++)
        if (check_runs(m, b, s, images ? &images[s] : NULL, err)) return -1;
    if (!n_images) return 0;
    iv_image_input *flat = iv_arena_alloc(mem->host, (size_t)n_images * sizeof *flat);
    int64_t *spans = iv_arena_alloc(mem->host, (size_t)(3 * n_images) * sizeof(int64_t));
    if (!flat || !spans) return iv_errf(err, IV_E_NOMEM, "out of memory");
    int64_t *tok = spans, *feat_row = spans + n_images, *len = spans + 2 * n_images;
    int k = 0;
    int64_t feat = 0;
    for (int s = 0; s < b->n_seqs; s++)
        for (int i = 0; images && i < images[s].n; i++, k++) {
            flat[k] = images[s].images[i];
            tok[k] = b->cu_seqlens[s] + flat[k].token_offset;
            feat_row[k] = feat;
            len[k] = iv_gemma4_image_tokens(v, &flat[k]);
            feat += len[k];
        }
    *vi = (iv_visual_inject){.n_spans = n_images, .token_row = tok, .feat_row = feat_row, .len = len};
    if (v->bidirectional_vision && vision_masks(m, b, mem, vi, err)) return -1;
    iv_view states;
    return iv_gemma4_vision_forward(m, flat, n_images, mem, &states, &vi->embeds, err);
}

int iv_gemma4_forward(const iv_model *m, const iv_batch *b, const iv_seq_images *images, const iv_fwd_mem *mem,
                      iv_view *hidden, iv_err *err)
{
    iv_visual_inject vi;
    if (iv_gemma4_image_inject(m, b, images, mem, &vi, err)) return -1;
    if (!vi.n_spans) return iv_model_forward(m, b, mem, hidden, err);
    return iv_model_forward_visual(m, b, &vi, mem, hidden, err);
}
