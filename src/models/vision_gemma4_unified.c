/* Gemma4 unified's vision embedder (see vision_gemma4_unified.h). Written
 * from transformers 5.25's modular_gemma4_unified.py
 * (Gemma4UnifiedVisionEmbedder, Gemma4UnifiedMultimodalEmbedder,
 * Gemma4UnifiedModel.get_image_features). */
#include "models/vision_gemma4_unified.h"

#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "models/loader.h"
#include "tensor/safetensors.h"

/* nn.LayerNorm's default: the embedder builds its norms without eps. */
#define LN_EPS 1e-5f

/* Gemma4UnifiedForConditionalGeneration saves under model., Gemma4UnifiedModel without. */
static const char *const k_prefixes[] = {"model.", "", NULL};

static int geometry(const cJSON *vc, iv_gemma4_vision *v, iv_err *err)
{
    const int64_t big = 1 << 20, small = 1 << 10;
    const char *type = iv_json_str(vc, "model_type", "gemma4_unified_vision");
    if (strcmp(type, "gemma4_unified_vision"))
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "config.json: vision_config.model_type \"%s\" (gemma4_unified takes \"gemma4_unified_vision\")",
                       type);
    int out_dims;
    if (iv_gemma4_vision_int(vc, "patch_size", 16, small, &v->patch, err) ||
        iv_gemma4_vision_int(vc, "pooling_kernel_size", 3, small, &v->pool, err) ||
        iv_gemma4_vision_int(vc, "mm_embed_dim", 3840, big, &v->hidden, err) ||
        iv_gemma4_vision_int(vc, "mm_posemb_size", 1120, big, &v->pos_size, err) ||
        iv_gemma4_vision_int(vc, "output_proj_dims", 3840, big, &out_dims, err))
        return -1;
    /* The embedder's RMSNorm and projection read output_proj_dims features
     * from a pos_norm of mm_embed_dim: transformers itself fails otherwise. */
    if (out_dims != v->hidden)
        return iv_errf(err, IV_E_FORMAT, "config.json: vision_config.output_proj_dims %d differs from mm_embed_dim %d",
                       out_dims, v->hidden);
    const int64_t side = (int64_t)v->patch * v->pool;
    if (side > 1024) return iv_errf(err, IV_E_FORMAT, "config.json: vision_config model patch side %lld is too large",
                                    (long long)side);
    v->patch_dim = 3 * side * side;
    return 0;
}

static int layer_norm(iv_model *m, const char *pre, const char *name, int64_t dim, iv_norm *out, iv_err *err)
{
    char base[256];
    snprintf(base, sizeof base, "%svision_embedder.%s", pre, name);
    if (iv_ld_layer_norm(m, base, dim, 1, out, err)) return -1;
    if (!out->b) return iv_errf(err, IV_E_NOTFOUND, "checkpoint is missing tensor \"%s.bias\"", base);
    return 0;
}

int iv_gemma4_unified_vision_load(iv_model *m, const cJSON *vc, iv_gemma4_vision *v, iv_err *err)
{
    iv_gemma4_unified_embedder *u = iv_model_alloc(m, sizeof *u);
    if (!u) return iv_errf(err, IV_E_NOMEM, "out of memory");
    if (geometry(vc, v, err)) return -1;
    v->merged = 1;
    v->unified = u;
    v->out_hidden = m->block.hidden;
    v->embed_eps = (float)iv_json_num(vc, "rms_norm_eps", 1e-6);
    /* Gemma4UnifiedTextConfig's default is "vision" (Gemma4's is null). */
    const cJSON *tc = iv_json_get(m->cfg.root, "text_config");
    const cJSON *bi = iv_json_get(tc ? tc : m->cfg.root, "use_bidirectional_attention");
    v->bidirectional_vision = !bi || (cJSON_IsString(bi) && !strcmp(bi->valuestring, "vision"));

    const char *pre = NULL;
    char name[320];
    for (const char *const *p = k_prefixes; *p && !pre; p++) {
        snprintf(name, sizeof name, "%svision_embedder.patch_dense.weight", *p);
        if (iv_weights_find(m->weights, name)) pre = *p;
    }
    if (!pre)
        return iv_errf(err, IV_E_NOTFOUND, "config.json has a vision_config but the checkpoint has no "
                                           "(model.)vision_embedder.patch_dense.weight");
    const int64_t E = v->hidden, S = v->pos_size;
    const iv_tensor *table;
    if (layer_norm(m, pre, "patch_ln1", v->patch_dim, &u->ln1, err) ||
        layer_norm(m, pre, "patch_ln2", E, &u->ln2, err) || layer_norm(m, pre, "pos_norm", E, &u->pos_norm, err))
        return -1;
    snprintf(name, sizeof name, "%svision_embedder.patch_dense.weight", pre);
    if (iv_ld_top(m, name, E, v->patch_dim, &u->dense_w, err)) return -1;
    snprintf(name, sizeof name, "%svision_embedder.patch_dense.bias", pre);
    if (iv_ld_top(m, name, E, -1, &u->dense_b, err)) return -1;
    /* [S, 2, E] as [S, 2 E]; copied as [2 S, E] so that one lookup per axis is a table row. */
    snprintf(name, sizeof name, "%svision_embedder.pos_embedding", pre);
    if (!iv_weights_find(m->weights, name))
        return iv_errf(err, IV_E_NOTFOUND, "checkpoint is missing tensor \"%s\"", name);
    if (iv_weights_f32_matrix(m->weights, name, S, 2 * E, &table, err)) return -1;
    iv_tensor *pt = iv_model_new_tensor(m, 2 * S, E);
    if (!pt) return iv_errf(err, IV_E_NOMEM, "out of memory");
    memcpy(pt->data, table->data, (size_t)(2 * S * E) * sizeof(float));
    iv_weights_release(m->weights, table);
    u->pos_table = pt;
    snprintf(name, sizeof name, "%sembed_vision.embedding_projection.weight", pre);
    return iv_ld_top(m, name, v->out_hidden, E, &v->proj_w, err);
}

int iv_gemma4_unified_embed(const iv_model *m, const iv_image_input *imgs, int n, int64_t N, const iv_fwd_mem *mem,
                            iv_view *states, iv_view *features, iv_err *err)
{
    const iv_gemma4_vision *v = m->gemma4_vision;
    const iv_gemma4_unified_embedder *u = v->unified;
    const iv_ops *ops = m->ops;
    const int64_t D = v->patch_dim, E = v->hidden;
    float *pix = iv_arena_alloc(mem->host, (size_t)(N * D) * sizeof(float));
    int32_t *ids = iv_arena_alloc(mem->host, (size_t)N * 2 * sizeof(int32_t));
    float *taps = iv_arena_alloc(mem->host, (size_t)N * 2 * sizeof(float));
    if (!pix || !ids || !taps) goto oom;
    /* Rows image after image, raster order; their table rows x (axis 0) and y (axis 1). */
    int64_t t = 0;
    for (int i = 0; i < n; i++) {
        const iv_image_input *im = &imgs[i];
        const int64_t rows = (int64_t)im->grid_h * im->grid_w;
        memcpy(pix + t * D, im->pixel_values, (size_t)(rows * D) * sizeof(float));
        for (int64_t r = 0; r < rows; r++, t++) {
            ids[2 * t] = (int32_t)(2 * (r % im->grid_w));
            ids[2 * t + 1] = (int32_t)(2 * (r / im->grid_w) + 1);
            taps[2 * t] = taps[2 * t + 1] = 1.0f;
        }
    }
    const int32_t *ids_dev = iv_dev_upload_new(ops, mem->dev, ids, (size_t)N * 2 * sizeof(int32_t));
    const float *taps_dev = iv_dev_upload_new(ops, mem->dev, taps, (size_t)N * 2 * sizeof(float));
    const iv_view pv = iv_act_alloc(ops, mem->dev, N, D, iv_ops_act_stride(ops, D));
    const iv_view pn = iv_act_alloc(ops, mem->dev, N, D, iv_ops_act_stride(ops, D));
    const iv_view x = iv_act_alloc(ops, mem->dev, N, E, iv_ops_act_stride(ops, E));
    const iv_view y = iv_act_alloc(ops, mem->dev, N, E, iv_ops_act_stride(ops, E));
    const iv_view pe = iv_act_alloc(ops, mem->dev, N, E, iv_ops_act_stride(ops, E));
    const iv_view out = iv_act_alloc(ops, mem->dev, N, E, iv_ops_act_stride(ops, E));
    if (!ids_dev || !taps_dev || !pv.data || !pn.data || !x.data || !y.data || !pe.data || !out.data ||
        iv_ops_upload_f32(ops, pv, pix, mem->host))
        goto oom;
    ops->layer_norm(ops, pn, pv, NULL, u->ln1.w, u->ln1.b, LN_EPS);
    ops->linear(ops, x, pn, u->dense_w, u->dense_b, IV_ACT_NONE, NULL);
    ops->layer_norm(ops, y, x, NULL, u->ln2.w, u->ln2.b, LN_EPS);
    ops->embed_bag(ops, pe, u->pos_table, ids_dev, taps_dev, 2);
    ops->layer_norm(ops, out, y, pe.data, u->pos_norm.w, u->pos_norm.b, LN_EPS); /* LN(y + pos) */
    *states = out;
    if (features) {
        *features = iv_act_alloc(ops, mem->dev, N, v->out_hidden, v->out_hidden);
        if (!features->data) goto oom;
        ops->rms_norm(ops, x, out, NULL, NULL, v->embed_eps, 0.0f);
        ops->linear(ops, *features, x, v->proj_w, NULL, IV_ACT_NONE, NULL);
    }
    return 0;
oom:
    return iv_errf(err, IV_E_NOMEM, "out of memory for the vision embedder over %d images", n);
}
