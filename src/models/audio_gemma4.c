/* Gemma4's audio tower and EmbeddingGemma2's audio embedder
 * (models/audio_gemma4.h): loading and the forward pass, all through ops. */
#include "models/audio_gemma4.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio/gemma4_features.h" /* iv_gemma4_audio_num_tokens */
#include "base/json.h"
#include "models/loader.h"

static const char *const k_prefixes[] = {"", "model.", NULL};

/* ---- loading ---- */

typedef struct ldctx {
    iv_model *m;
    const char *pre; /* "" or "model." */
    char name[256];
} ldctx;

static const char *nm(ldctx *c, const char *fmt, int l)
{
    char f[200];
    snprintf(f, sizeof f, "%s%s", c->pre, fmt);
    snprintf(c->name, sizeof c->name, f, l);
    return c->name;
}

static int mat(ldctx *c, const char *fmt, int l, int64_t d0, int64_t d1, const iv_tensor **out, iv_err *err)
{
    return iv_ld_top(c->m, nm(c, fmt, l), d0, d1, out, err);
}

/* A scalar buffer (ClippableLinear's bounds), or def when absent. */
static int scalar(ldctx *c, const char *base, const char *what, float def, float *out, iv_err *err)
{
    char n[300];
    snprintf(n, sizeof n, "%s.%s", base, what);
    const iv_tensor *t = iv_weights_find(c->m->weights, n);
    *out = def;
    if (!t) return 0;
    if (iv_weights_f32(c->m->weights, n, 0, NULL, &t, err)) return -1;
    if (iv_tensor_numel(t) != 1) return iv_errf(err, IV_E_FORMAT, "%s must hold one value", n);
    *out = iv_f32(t)[0];
    if (isnan(*out)) return iv_errf(err, IV_E_FORMAT, "%s is NaN", n);
    return 0;
}

static int clip_linear(ldctx *c, int clipped, const char *fmt, int l, int64_t rows, int64_t cols, iv_clip_linear *o,
                       iv_err *err)
{
    char base[256], wname[300];
    snprintf(base, sizeof base, "%s", nm(c, fmt, l));
    snprintf(wname, sizeof wname, "%s.linear.weight", base);
    if (iv_ld_top(c->m, wname, rows, cols, &o->w, err)) return -1;
    if (!clipped) {
        o->in_lo = o->out_lo = -INFINITY;
        o->in_hi = o->out_hi = INFINITY;
        return 0;
    }
    return scalar(c, base, "input_min", -INFINITY, &o->in_lo, err) ||
                   scalar(c, base, "input_max", INFINITY, &o->in_hi, err) ||
                   scalar(c, base, "output_min", -INFINITY, &o->out_lo, err) ||
                   scalar(c, base, "output_max", INFINITY, &o->out_hi, err)
               ? -1
               : 0;
}

static int ffw(ldctx *c, int clipped, int l, const char *which, int H, iv_g4a_ffw *f, iv_err *err)
{
    char fmt[160];
#define F(s) (snprintf(fmt, sizeof fmt, "audio_tower.layers.%%d.%s.%s", which, s), fmt)
    return mat(c, F("pre_layer_norm.weight"), l, H, -1, &f->pre_norm, err) ||
                   mat(c, F("post_layer_norm.weight"), l, H, -1, &f->post_norm, err) ||
                   clip_linear(c, clipped, F("ffw_layer_1"), l, 4 * (int64_t)H, H, &f->up, err) ||
                   clip_linear(c, clipped, F("ffw_layer_2"), l, H, 4 * (int64_t)H, &f->down, err)
               ? -1
               : 0;
#undef F
}

/* q's per-dim scale and the per-head relative key table, from weights. */
static int attention_tables(ldctx *c, iv_gemma4_audio *a, iv_g4a_layer *L, int l, iv_err *err)
{
    const int D = a->head_dim, H = a->hidden;
    const iv_tensor *pds, *rel;
    if (mat(c, "audio_tower.layers.%d.self_attn.per_dim_scale", l, D, -1, &pds, err) ||
        mat(c, "audio_tower.layers.%d.self_attn.relative_k_proj.weight", l, (int64_t)a->n_heads * D, H, &rel, err))
        return -1;
    iv_tensor *qs = iv_model_new_tensor(c->m, D, -1);
    L->rel_k = iv_model_alloc(c->m, (size_t)a->n_heads * sizeof *L->rel_k);
    if (!qs || !L->rel_k) return iv_errf(err, IV_E_NOMEM, "out of memory");
    const float *p = iv_f32(pds), *w = iv_f32(rel);
    const double q_scale = pow((double)D, -0.5) / log(2.0);
    for (int e = 0; e < D; e++) {
        const double x = p[e], softplus = x > 20 ? x : log1p(exp(x)); /* torch's threshold 20 */
        ((float *)qs->data)[e] = (float)(q_scale * softplus);
    }
    L->q_scale = qs;
    /* sinusoid(d) = [sin(d w_i), cos(d w_i)], w_i = exp(-i ln(1e4) / max(H/2 - 1, 1)) */
    const int half = H / 2;
    double *sinus = malloc((size_t)a->n_pos * H * sizeof(double));
    if (!sinus) return iv_errf(err, IV_E_NOMEM, "out of memory");
    const double inc = log(10000.0) / (half - 1 > 1 ? half - 1 : 1);
    for (int d = 0; d < a->n_pos; d++)
        for (int i = 0; i < half; i++) {
            const float inv = (float)exp(-(double)i * inc), t = (float)d * inv; /* float, as the buffer */
            sinus[(size_t)d * H + i] = (float)sin((double)t);
            sinus[(size_t)d * H + half + i] = (float)cos((double)t);
        }
    for (int h = 0; h < a->n_heads; h++) {
        iv_tensor *r = iv_model_new_tensor(c->m, a->n_pos, D);
        if (!r) {
            free(sinus);
            return iv_errf(err, IV_E_NOMEM, "out of memory");
        }
        for (int d = 0; d < a->n_pos; d++)
            for (int e = 0; e < D; e++) {
                double acc = 0;
                const float *wr = w + (size_t)(h * D + e) * H;
                for (int i = 0; i < H; i++) acc += (double)wr[i] * sinus[(size_t)d * H + i];
                ((float *)r->data)[(size_t)d * D + e] = (float)acc;
            }
        L->rel_k[h] = r;
    }
    free(sinus);
    return 0;
}

static int layer(ldctx *c, iv_gemma4_audio *a, int clipped, int l, iv_err *err)
{
    iv_g4a_layer *L = &a->layers[l];
    const int H = a->hidden;
    if (ffw(c, clipped, l, "feed_forward1", H, &L->ffw1, err) || ffw(c, clipped, l, "feed_forward2", H, &L->ffw2, err) ||
        mat(c, "audio_tower.layers.%d.norm_pre_attn.weight", l, H, -1, &L->norm_pre_attn, err) ||
        mat(c, "audio_tower.layers.%d.norm_post_attn.weight", l, H, -1, &L->norm_post_attn, err) ||
        mat(c, "audio_tower.layers.%d.norm_out.weight", l, H, -1, &L->norm_out, err) ||
        clip_linear(c, clipped, "audio_tower.layers.%d.self_attn.q_proj", l, H, H, &L->q, err) ||
        clip_linear(c, clipped, "audio_tower.layers.%d.self_attn.k_proj", l, H, H, &L->k, err) ||
        clip_linear(c, clipped, "audio_tower.layers.%d.self_attn.v_proj", l, H, H, &L->v, err) ||
        clip_linear(c, clipped, "audio_tower.layers.%d.self_attn.post", l, H, H, &L->post, err) ||
        attention_tables(c, a, L, l, err) ||
        mat(c, "audio_tower.layers.%d.lconv1d.pre_layer_norm.weight", l, H, -1, &L->lconv_pre_norm, err) ||
        mat(c, "audio_tower.layers.%d.lconv1d.conv_norm.weight", l, H, -1, &L->conv_norm, err) ||
        clip_linear(c, clipped, "audio_tower.layers.%d.lconv1d.linear_start", l, 2 * (int64_t)H, H, &L->lin_start,
                    err) ||
        clip_linear(c, clipped, "audio_tower.layers.%d.lconv1d.linear_end", l, H, H, &L->lin_end, err))
        return -1;
    const iv_tensor *cw;
    nm(c, "audio_tower.layers.%d.lconv1d.depthwise_conv1d.weight", l);
    if (iv_weights_f32(c->m->weights, c->name, 0, NULL, &cw, err)) return -1;
    if (cw->ndim != 3 || cw->shape[0] != H || cw->shape[1] != 1 || cw->shape[2] != a->conv_kernel)
        return iv_errf(err, IV_E_FORMAT, "%s: expected [%d, 1, %d]", c->name, H, a->conv_kernel);
    iv_tensor *w2 = iv_model_new_tensor(c->m, H, a->conv_kernel);
    if (!w2) return iv_errf(err, IV_E_NOMEM, "out of memory");
    memcpy(w2->data, cw->data, (size_t)H * a->conv_kernel * sizeof(float));
    L->conv_w = w2;
    return 0;
}

/* A Conv2d weight [c_out, c_in, 3, 3] viewed [c_out, c_in * 9]. */
static int conv_weight(ldctx *c, const char *fmt, int c_out, int c_in, const iv_tensor **out, iv_err *err)
{
    const iv_tensor *t;
    nm(c, fmt, 0);
    if (iv_weights_f32(c->m->weights, c->name, 0, NULL, &t, err)) return -1;
    if (t->ndim != 4 || t->shape[0] != c_out || t->shape[1] != c_in || t->shape[2] != 3 || t->shape[3] != 3)
        return iv_errf(err, IV_E_FORMAT, "%s: expected [%d, %d, 3, 3]", c->name, c_out, c_in);
    iv_tensor *v = iv_model_new_tensor(c->m, c_out, (int64_t)c_in * 9);
    if (!v) return iv_errf(err, IV_E_NOMEM, "out of memory");
    memcpy(v->data, t->data, (size_t)c_out * c_in * 9 * sizeof(float));
    *out = v;
    return 0;
}

static int cfg_int(const cJSON *ac, const char *key, int64_t def, int64_t lo, int64_t hi, int *out, iv_err *err)
{
    const int64_t v = iv_json_int(ac, key, def);
    if (v < lo || v > hi)
        return iv_errf(err, IV_E_FORMAT, "config.json: audio_config.%s = %lld is out of range", key, (long long)v);
    *out = (int)v;
    return 0;
}

int iv_gemma4_audio_load(iv_model *m, iv_gemma4_audio **out, iv_err *err)
{
    *out = NULL;
    const cJSON *ac = iv_json_get(m->cfg.root, "audio_config");
    if (!ac || cJSON_IsNull(ac)) return 0;
    if (!cJSON_IsObject(ac)) return iv_errf(err, IV_E_FORMAT, "config.json: audio_config must be an object");
    if (!strcmp(m->cfg.model_type, "gemma4_unified")) return iv_gemma4_unified_audio_load(m, ac, out, err);
    const char *mt = iv_json_str(ac, "model_type", "gemma4_audio");
    if (strcmp(mt, "gemma4_audio"))
        return iv_errf(err, IV_E_UNSUPPORTED, "audio_config.model_type \"%s\" is not supported (gemma4_audio only)", mt);
    ldctx c = {.m = m, .pre = NULL};
    char probe[128];
    for (const char *const *p = k_prefixes; *p && !c.pre; p++) {
        snprintf(probe, sizeof probe, "%saudio_tower.", *p);
        if (iv_weights_has_prefix(m->weights, probe)) c.pre = *p;
    }
    if (!c.pre) return 0; /* a text-only export: audio inputs are then refused as for a model without audio */
    iv_gemma4_audio *a = iv_model_alloc(m, sizeof *a);
    if (!a) return iv_errf(err, IV_E_NOMEM, "out of memory");
    int chunk = 0, left = 0, right = 0;
    if (cfg_int(ac, "hidden_size", 1024, 2, 1 << 16, &a->hidden, err) ||
        cfg_int(ac, "num_attention_heads", 8, 1, 1024, &a->n_heads, err) ||
        cfg_int(ac, "num_hidden_layers", 12, 1, 1024, &a->n_layers, err) ||
        cfg_int(ac, "conv_kernel_size", 5, 1, 1024, &a->conv_kernel, err) ||
        cfg_int(ac, "output_proj_dims", 1536, 1, 1 << 16, &a->out_dims, err) ||
        cfg_int(ac, "attention_chunk_size", 12, 1, 1 << 16, &chunk, err) ||
        cfg_int(ac, "attention_context_left", 13, 2, 1 << 16, &left, err) ||
        cfg_int(ac, "attention_context_right", 0, 0, 1 << 16, &right, err))
        return -1;
    /* Keys ahead of the query (context_right > 0) would need the blocked
     * form's exact reach; only the released causal layout is implemented. */
    if (right != 0)
        return iv_errf(err, IV_E_UNSUPPORTED, "audio_config.attention_context_right = %d is not supported (0 only)",
                       right);
    if (a->hidden % a->n_heads || a->hidden % 2)
        return iv_errf(err, IV_E_FORMAT, "audio_config: hidden_size %d does not split into %d heads", a->hidden,
                       a->n_heads);
    a->head_dim = a->hidden / a->n_heads;
    a->window_left = left - 2;
    a->n_pos = (chunk + left - 1 + right) / 2 + 1;
    if (a->n_pos < left - 1)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "audio_config: attention_chunk_size %d is too small for attention_context_left %d", chunk, left);
    const char *act = iv_json_str(ac, "hidden_act", "silu");
    if (strcmp(act, "silu") && strcmp(act, "swish"))
        return iv_errf(err, IV_E_UNSUPPORTED, "audio_config.hidden_act \"%s\" is not supported (silu only)", act);
    a->eps = (float)iv_json_num(ac, "rms_norm_eps", 1e-6);
    a->grad_clip = (float)iv_json_num(ac, "gradient_clipping", 1e10);
    a->residual_weight = (float)iv_json_num(ac, "residual_weight", 0.5);
    a->softcap = (float)iv_json_num(ac, "attention_logit_cap", 50.0);
    if (!(a->eps > 0) || !(a->grad_clip > 0) || !(a->softcap > 0))
        return iv_errf(err, IV_E_FORMAT, "audio_config: rms_norm_eps, gradient_clipping and attention_logit_cap "
                                         "must be positive");
    a->k_scale = (float)(log(1.0 + exp(1.0)) / log(2.0));
    const int clipped = iv_json_bool(ac, "use_clipped_linears", 1); /* Gemma4AudioConfig's default */
    const cJSON *ch = iv_json_get(ac, "subsampling_conv_channels");
    if (ch && (!cJSON_IsArray(ch) || cJSON_GetArraySize(ch) != 2))
        return iv_errf(err, IV_E_UNSUPPORTED, "audio_config.subsampling_conv_channels must list two channel counts");
    a->ch0 = ch ? cJSON_GetArrayItem(ch, 0)->valueint : 128;
    a->ch1 = ch ? cJSON_GetArrayItem(ch, 1)->valueint : 32;
    if (a->ch0 <= 0 || a->ch1 <= 0 || a->ch0 > 65536 || a->ch1 > 65536)
        return iv_errf(err, IV_E_FORMAT, "audio_config.subsampling_conv_channels out of range");
    /* The mel width the features have: the extractor's feature_size, which
     * the released tower assumes equals subsampling_conv_channels[0] (its
     * input_proj_linear is (channels[0] // 4) * channels[1] wide). */
    a->n_mels = a->ch0;
    a->w1 = (a->n_mels + 2 - 3) / 2 + 1;
    a->w2 = (a->w1 + 2 - 3) / 2 + 1;
    if ((int64_t)a->w2 * a->ch1 != (int64_t)(a->ch0 / 4) * a->ch1)
        return iv_errf(err, IV_E_UNSUPPORTED, "audio_config.subsampling_conv_channels[0] = %d: the subsampler's "
                                              "output width does not match input_proj_linear",
                       a->ch0);
    a->text_hidden = m->cfg.hidden_size;
    const int64_t tok = iv_json_int(m->cfg.root, "audio_token_id", 258881);
    if (tok < 0 || tok > INT32_MAX) return iv_errf(err, IV_E_FORMAT, "config.json: audio_token_id out of range");
    a->audio_token_id = (int)tok;
    a->embed_eps = a->eps;
    a->layers = iv_model_alloc(m, (size_t)a->n_layers * sizeof *a->layers);
    if (!a->layers) return iv_errf(err, IV_E_NOMEM, "out of memory");
    const int H = a->hidden;
    if (conv_weight(&c, "audio_tower.subsample_conv_projection.layer0.conv.weight", a->ch0, 1, &a->conv0_w, err) ||
        conv_weight(&c, "audio_tower.subsample_conv_projection.layer1.conv.weight", a->ch1, a->ch0, &a->conv1_w,
                    err) ||
        mat(&c, "audio_tower.subsample_conv_projection.layer0.norm.weight", 0, a->ch0, -1, &a->norm0_w, err) ||
        mat(&c, "audio_tower.subsample_conv_projection.layer1.norm.weight", 0, a->ch1, -1, &a->norm1_w, err) ||
        mat(&c, "audio_tower.subsample_conv_projection.input_proj_linear.weight", 0, H, (int64_t)a->w2 * a->ch1,
            &a->proj_w, err) ||
        mat(&c, "audio_tower.output_proj.weight", 0, a->out_dims, H, &a->out_w, err) ||
        mat(&c, "audio_tower.output_proj.bias", 0, a->out_dims, -1, &a->out_b, err) ||
        mat(&c, "embed_audio.embedding_projection.weight", 0, a->text_hidden, a->out_dims, &a->embed_w, err))
        return -1;
    for (int l = 0; l < a->n_layers; l++)
        if (layer(&c, a, clipped, l, err)) return -1;
    *out = a;
    return 0;
}

/* ---- devices ---- */

int iv_gemma4_audio_table_ok(const iv_ops *ops)
{
    return ops->conv2d && ops->clamp && ops->mul_cols && ops->causal_conv1d && ops->rel_bias;
}

static int prep(const iv_ops *ops, const iv_tensor **w, iv_err *err)
{
    const iv_tensor *r = ops->prepare_weight(ops, *w, (*w)->ndim == 2, err);
    if (!r) return -1;
    *w = r;
    return 0;
}

static int prep_clip(const iv_ops *ops, iv_clip_linear *L, iv_err *err) { return prep(ops, &L->w, err); }

static int prep_ffw(const iv_ops *ops, iv_g4a_ffw *F, iv_err *err)
{
    return prep(ops, &F->pre_norm, err) || prep(ops, &F->post_norm, err) || prep_clip(ops, &F->up, err) ||
                   prep_clip(ops, &F->down, err)
               ? -1
               : 0;
}

int iv_gemma4_audio_to_device(iv_gemma4_audio *a, const iv_ops *ops, iv_err *err)
{
    if (a->raw_frame) { /* the embedder alone: ops every table has */
        if (ops->host_visible || prep(ops, &a->embed_w, err) == 0) return 0;
        return iv_err_prefix(err, "audio embedder: ");
    }
    if (ops->host_visible || !iv_gemma4_audio_table_ok(ops)) return 0; /* the forward refuses the latter */
    if (prep(ops, &a->conv0_w, err) || prep(ops, &a->norm0_w, err) || prep(ops, &a->conv1_w, err) ||
        prep(ops, &a->norm1_w, err) || prep(ops, &a->proj_w, err) || prep(ops, &a->out_w, err) ||
        prep(ops, &a->out_b, err) || prep(ops, &a->embed_w, err))
        goto fail;
    for (int l = 0; l < a->n_layers; l++) {
        iv_g4a_layer *L = &a->layers[l];
        if (prep_ffw(ops, &L->ffw1, err) || prep_ffw(ops, &L->ffw2, err) || prep(ops, &L->norm_pre_attn, err) ||
            prep(ops, &L->norm_post_attn, err) || prep(ops, &L->norm_out, err) || prep_clip(ops, &L->q, err) ||
            prep_clip(ops, &L->k, err) || prep_clip(ops, &L->v, err) || prep_clip(ops, &L->post, err) ||
            prep(ops, &L->q_scale, err) || prep(ops, &L->lconv_pre_norm, err) || prep(ops, &L->conv_norm, err) ||
            prep(ops, &L->conv_w, err) || prep_clip(ops, &L->lin_start, err) || prep_clip(ops, &L->lin_end, err))
            goto fail;
        for (int h = 0; h < a->n_heads; h++)
            if (prep(ops, &L->rel_k[h], err)) goto fail;
    }
    return 0;
fail:
    iv_err_prefix(err, "audio tower: ");
    return -1;
}

/* ---- forward ---- */

typedef struct fwd {
    const iv_ops *ops;
    const iv_gemma4_audio *a;
    iv_arena *dev;
    int oom;
} fwd;

static iv_view act_buf(fwd *f, int64_t rows, int64_t cols)
{
    iv_view v = iv_act_alloc(f->ops, f->dev, rows, cols, iv_ops_act_stride(f->ops, cols));
    if (!v.data) f->oom = 1;
    return v;
}

/* y = clamp(clamp(x) W^T) (Gemma4ClippableLinear); tmp as wide as x. */
static void clip_linear_run(fwd *f, iv_view y, iv_view x, iv_view tmp, const iv_clip_linear *L)
{
    iv_view in = x;
    if (!isinf(L->in_lo) || !isinf(L->in_hi)) {
        f->ops->clamp(f->ops, tmp, x, L->in_lo, L->in_hi);
        in = tmp;
    }
    f->ops->linear(f->ops, y, in, L->w, NULL, IV_ACT_NONE, NULL);
    if (!isinf(L->out_lo) || !isinf(L->out_hi)) f->ops->clamp(f->ops, y, y, L->out_lo, L->out_hi);
}

/* h += residual_weight * N(clamp(down(silu(up(N(clamp(h))))))) */
static void ffw_run(fwd *f, iv_view h, const iv_g4a_ffw *F, iv_view t, iv_view t2, iv_view wide, iv_view wide2)
{
    const iv_ops *ops = f->ops;
    const float gc = f->a->grad_clip;
    ops->clamp(ops, t, h, -gc, gc);
    ops->rms_norm(ops, t, t, NULL, F->pre_norm, 1e-6f, 0.0f);
    clip_linear_run(f, wide, t, t2, &F->up);
    ops->act(ops, wide, wide, IV_ACT_SILU);
    clip_linear_run(f, t, wide, wide2, &F->down);
    ops->clamp(ops, t, t, -gc, gc);
    ops->rms_norm(ops, t, t, NULL, F->post_norm, 1e-6f, 0.0f);
    ops->scale(ops, t, t, f->a->residual_weight);
    ops->add(ops, h, h, t);
}

int iv_gemma4_audio_forward(const iv_model *m, const iv_gemma4_audio *a, const iv_audio_input *clips, int n,
                            const iv_fwd_mem *mem, iv_view *tokens, iv_audio_tap_fn tap, void *tap_ctx, iv_err *err)
{
    const iv_ops *ops = m->ops;
    if (a->raw_frame) return iv_gemma4_unified_audio_forward(m, a, clips, n, mem, tokens, err);
    /* Tables without the tower's ops (a device table may lack them) kept its weights on the
     * host (iv_gemma4_audio_to_device): refuse by name. */
    if (!iv_gemma4_audio_table_ok(ops))
        return iv_errf(err, IV_E_UNSUPPORTED, "the %s device has no kernels for the Gemma4 audio tower yet "
                                              "(conv2d, clamp, mul_cols); run it with --device cpu",
                       ops->name);
    if (n <= 0) return iv_errf(err, IV_E_INVALID, "no audio clips");
    int32_t *cu0 = iv_arena_alloc(mem->host, (size_t)(n + 1) * sizeof(int32_t));
    int32_t *cu1 = iv_arena_alloc(mem->host, (size_t)(n + 1) * sizeof(int32_t));
    int32_t *cu2 = iv_arena_alloc(mem->host, (size_t)(n + 1) * sizeof(int32_t));
    if (!cu0 || !cu1 || !cu2) return iv_errf(err, IV_E_NOMEM, "out of memory");
    cu0[0] = cu1[0] = cu2[0] = 0;
    int max_len = 0;
    for (int i = 0; i < n; i++) {
        if (!clips[i].features || clips[i].n_frames <= 0 || clips[i].n_mels != a->n_mels)
            return iv_errf(err, IV_E_INVALID, "audio clip %d: %d frames of %d mel bins (the tower takes %d bins, at "
                                              "least one frame)",
                           i, clips[i].n_frames, clips[i].n_mels, a->n_mels);
        const int l1 = (clips[i].n_frames + 1) / 2, l2 = (l1 + 1) / 2;
        cu0[i + 1] = cu0[i] + clips[i].n_frames;
        cu1[i + 1] = cu1[i] + l1;
        cu2[i + 1] = cu2[i] + l2;
        max_len = l2 > max_len ? l2 : max_len;
    }
    const int64_t T0 = cu0[n], T1 = cu1[n], T = cu2[n], H = a->hidden;
    fwd f = {.ops = ops, .a = a, .dev = mem->dev};

    /* host staging: features, bias offsets, relative-distance columns */
    float *feat = iv_arena_alloc(mem->host, (size_t)(T0 * a->n_mels) * sizeof(float));
    int64_t *offs = iv_arena_alloc(mem->host, (size_t)n * sizeof(int64_t));
    const int idx_mid = max_len - 1;
    int32_t *cidx = iv_arena_alloc(mem->host, (size_t)(2 * idx_mid + 1) * sizeof(int32_t));
    if (!feat || !offs || !cidx) return iv_errf(err, IV_E_NOMEM, "out of memory");
    int64_t bias_total = 0;
    for (int i = 0; i < n; i++) {
        memcpy(feat + (int64_t)cu0[i] * a->n_mels, clips[i].features,
               (size_t)clips[i].n_frames * a->n_mels * sizeof(float));
        const int64_t L = cu2[i + 1] - cu2[i];
        offs[i] = bias_total;
        bias_total += (int64_t)a->n_heads * L * L;
    }
    /* distance t - s = d - idx_mid; distances outside the window are masked
     * by the attention, so any column serves them */
    for (int d = 0; d <= 2 * idx_mid; d++) {
        const int dist = d - idx_mid;
        cidx[d] = dist >= 0 && dist < a->n_pos ? dist : 0;
    }
    const int32_t *cu0_dev = iv_dev_upload_new(ops, mem->dev, cu0, (size_t)(n + 1) * sizeof(int32_t));
    const int32_t *cu1_dev = iv_dev_upload_new(ops, mem->dev, cu1, (size_t)(n + 1) * sizeof(int32_t));
    const int32_t *cu2_dev = iv_dev_upload_new(ops, mem->dev, cu2, (size_t)(n + 1) * sizeof(int32_t));
    const int64_t *offs_dev = iv_dev_upload_new(ops, mem->dev, offs, (size_t)n * sizeof(int64_t));
    const int32_t *cidx_dev = iv_dev_upload_new(ops, mem->dev, cidx, (size_t)(2 * idx_mid + 1) * sizeof(int32_t));
    float *bias = iv_dev_arena_alloc(mem->dev, (size_t)bias_total * sizeof(float));
    const iv_view x0 = iv_act_alloc(ops, mem->dev, T0, a->n_mels, a->n_mels);
    const iv_view y1 = iv_act_alloc(ops, mem->dev, T1, (int64_t)a->w1 * a->ch0, (int64_t)a->w1 * a->ch0);
    const iv_view y2 = iv_act_alloc(ops, mem->dev, T, (int64_t)a->w2 * a->ch1, (int64_t)a->w2 * a->ch1);
    const iv_view y2s = act_buf(&f, T, (int64_t)a->w2 * a->ch1);
    const iv_view h = act_buf(&f, T, H), t = act_buf(&f, T, H), t2 = act_buf(&f, T, H), res = act_buf(&f, T, H);
    const iv_view q = act_buf(&f, T, H), k = act_buf(&f, T, H), v = act_buf(&f, T, H), o = act_buf(&f, T, H);
    const iv_view wide = act_buf(&f, T, 4 * H), wide2 = act_buf(&f, T, 4 * H);
    const iv_view c2p = act_buf(&f, T, (int64_t)a->n_heads * a->n_pos);
    const iv_view tower = act_buf(&f, T, a->out_dims), tnorm = act_buf(&f, T, a->out_dims);
    *tokens = act_buf(&f, T, a->text_hidden);
    if (f.oom || !cu0_dev || !cu1_dev || !cu2_dev || !offs_dev || !cidx_dev || (bias_total && !bias) || !x0.data ||
        !y1.data || !y2.data || iv_ops_upload_f32(ops, x0, feat, mem->host))
        return iv_errf(err, IV_E_NOMEM, "out of memory for the audio tower (%lld frames)", (long long)T0);

    /* subsampler: conv -> LayerNorm over channels (no bias) -> ReLU, twice */
    iv_conv2d_args cv = {.y = y1, .x = x0, .w = a->conv0_w, .c_in = 1, .c_out = a->ch0, .w_in = a->n_mels,
                         .w_out = a->w1, .kernel = 3, .stride = 2, .pad = 1, .cu_in = cu0, .cu_out = cu1,
                         .cu_in_dev = cu0_dev, .cu_out_dev = cu1_dev, .n_seqs = n};
    ops->conv2d(ops, &cv);
    iv_view cells = iv_view_make(y1.data, y1.dtype, T1 * a->w1, a->ch0, a->ch0);
    ops->layer_norm(ops, cells, cells, NULL, a->norm0_w, NULL, a->eps);
    ops->act(ops, cells, cells, IV_ACT_RELU);
    cv = (iv_conv2d_args){.y = y2, .x = y1, .w = a->conv1_w, .c_in = a->ch0, .c_out = a->ch1, .w_in = a->w1,
                          .w_out = a->w2, .kernel = 3, .stride = 2, .pad = 1, .cu_in = cu1, .cu_out = cu2,
                          .cu_in_dev = cu1_dev, .cu_out_dev = cu2_dev, .n_seqs = n};
    ops->conv2d(ops, &cv);
    cells = iv_view_make(y2.data, y2.dtype, T * a->w2, a->ch1, a->ch1);
    ops->layer_norm(ops, cells, cells, NULL, a->norm1_w, NULL, a->eps);
    ops->act(ops, y2s, y2, IV_ACT_RELU); /* into the linear's row stride */
    ops->linear(ops, h, y2s, a->proj_w, NULL, IV_ACT_NONE, NULL);
    if (tap) tap(tap_ctx, "subsample", h);

    const float gc = a->grad_clip;
    for (int l = 0; l < a->n_layers; l++) {
        const iv_g4a_layer *L = &a->layers[l];
        ffw_run(&f, h, &L->ffw1, t, t2, wide, wide2);

        /* attention block */
        ops->clamp(ops, t, h, -gc, gc);
        ops->rms_norm(ops, t, t, NULL, L->norm_pre_attn, 1e-6f, 0.0f);
        clip_linear_run(&f, q, t, t2, &L->q);
        clip_linear_run(&f, k, t, t2, &L->k);
        clip_linear_run(&f, v, t, t2, &L->v);
        ops->mul_cols(ops, q, q, L->q_scale);
        ops->scale(ops, k, k, a->k_scale);
        for (int hd = 0; hd < a->n_heads; hd++) {
            const iv_view c2p_h = iv_view_cols(c2p, (int64_t)hd * a->n_pos, a->n_pos);
            ops->linear(ops, c2p_h, iv_view_cols(q, (int64_t)hd * a->head_dim, a->head_dim), L->rel_k[hd], NULL,
                        IV_ACT_NONE, NULL);
            iv_rel_bias_args rb = {.bias = bias, .offsets = offs, .offsets_dev = offs_dev, .cu_seqlens = cu2,
                                   .cu_seqlens_dev = cu2_dev, .n_seqs = n, .head = hd, .c2p = c2p_h,
                                   .c2p_idx = cidx_dev, .idx_mid = idx_mid, .scale = 1.0f};
            ops->rel_bias(ops, &rb);
        }
        iv_attn_args at = {.q = q, .k = k, .v = v, .out = o, .cu_seqlens = cu2, .cu_seqlens_dev = cu2_dev,
                           .n_seqs = n, .max_seqlen = max_len, .n_heads = a->n_heads, .n_kv_heads = a->n_heads,
                           .head_dim = a->head_dim, .scale = 1.0f, .causal = 1, .window_left = a->window_left,
                           .window_right = -1, .bias = bias, .bias_offsets = offs, .bias_offsets_dev = offs_dev,
                           .softcap = a->softcap, .softcap_after_bias = 1};
        ops->attention(ops, &at);
        clip_linear_run(&f, t, o, t2, &L->post);
        ops->clamp(ops, t, t, -gc, gc);
        ops->rms_norm(ops, t, t, NULL, L->norm_post_attn, 1e-6f, 0.0f);
        ops->add(ops, h, h, t);

        /* lconv1d */
        ops->rms_norm(ops, t, h, NULL, L->lconv_pre_norm, a->eps, 0.0f);
        const iv_view w2h = iv_view_cols(wide, 0, 2 * H);
        clip_linear_run(&f, w2h, t, t2, &L->lin_start);
        ops->glu(ops, t, w2h, IV_ACT_SIGMOID, 0); /* first half * sigmoid(second) */
        iv_causal_conv_args cc = {.y = res, .x = t, .w = L->conv_w, .b = NULL, .act = IV_ACT_NONE,
                                  .cu_seqlens = cu2, .cu_seqlens_dev = cu2_dev, .n_seqs = n};
        ops->causal_conv1d(ops, &cc);
        ops->clamp(ops, res, res, -gc, gc);
        ops->rms_norm(ops, res, res, NULL, L->conv_norm, a->eps, 0.0f);
        ops->act(ops, res, res, IV_ACT_SILU);
        clip_linear_run(&f, t, res, t2, &L->lin_end);
        ops->add(ops, h, h, t);

        ffw_run(&f, h, &L->ffw2, t, t2, wide, wide2);
        ops->clamp(ops, h, h, -gc, gc);
        ops->rms_norm(ops, h, h, NULL, L->norm_out, 1e-6f, 0.0f);
        if (tap) {
            char stage[32];
            snprintf(stage, sizeof stage, "layer%d", l);
            tap(tap_ctx, stage, h);
        }
    }
    ops->linear(ops, tower, h, a->out_w, a->out_b, IV_ACT_NONE, NULL);
    if (tap) tap(tap_ctx, "tower", tower);
    ops->rms_norm(ops, tnorm, tower, NULL, NULL, a->embed_eps, 0.0f);
    ops->linear(ops, *tokens, tnorm, a->embed_w, NULL, IV_ACT_NONE, NULL);
    if (tap) tap(tap_ctx, "soft_tokens", *tokens);
    return 0;
}

/* ---- the mixed forward ---- */

int iv_gemma4_audio_tokens(const iv_gemma4_audio *a, int n_frames)
{
    return a->raw_frame ? n_frames : iv_gemma4_audio_num_tokens(n_frames);
}

int iv_gemma4_audio_inject(const iv_model *m, const iv_batch *b, const iv_seq_audios *audios, const iv_fwd_mem *mem,
                           iv_visual_inject *vi, iv_err *err)
{
    memset(vi, 0, sizeof *vi);
    int n = 0;
    for (int s = 0; audios && s < b->n_seqs; s++) n += audios[s].n > 0 ? audios[s].n : 0;
    if (n == 0) return 0;
    const iv_gemma4_audio *a = m->audio;
    if (!a)
        return iv_errf(err, IV_E_UNSUPPORTED, "model_type \"%s\" has no audio tower: audio inputs are not accepted",
                       m->cfg.model_type);
    iv_audio_input *clips = iv_arena_alloc(mem->host, (size_t)n * sizeof *clips);
    int64_t *spans = iv_arena_alloc(mem->host, (size_t)n * 3 * sizeof(int64_t));
    if (!clips || !spans) return iv_errf(err, IV_E_NOMEM, "out of memory");
    int64_t *token_row = spans, *feat_row = spans + n, *len = spans + 2 * n;
    int k = 0;
    int64_t feat = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        const int32_t *ids = b->ids + b->cu_seqlens[s];
        const int L = iv_batch_seqlen(b, s);
        int placeholders = 0, covered = 0, prev_end = 0;
        for (int t = 0; t < L; t++) placeholders += ids[t] == a->audio_token_id;
        for (int i = 0; i < (audios[s].n > 0 ? audios[s].n : 0); i++) {
            const iv_audio_input *c = &audios[s].clips[i];
            const int N = c->n_frames > 0 ? iv_gemma4_audio_tokens(a, c->n_frames) : 0;
            if (N <= 0) return iv_errf(err, IV_E_INVALID, "sequence %d, audio clip %d is too short (no frames)", s, i);
            if (c->token_offset < prev_end || c->token_offset > L - N)
                return iv_errf(err, IV_E_INVALID,
                               "sequence %d, audio clip %d: its %d soft tokens at %d do not fit the sequence of %d "
                               "tokens after the previous clip",
                               s, i, N, c->token_offset, L);
            for (int t = c->token_offset; t < c->token_offset + N; t++)
                if (ids[t] != a->audio_token_id)
                    return iv_errf(err, IV_E_INVALID,
                                   "sequence %d, audio clip %d: token %d is %d, not the audio token %d", s, i, t,
                                   ids[t], a->audio_token_id);
            clips[k] = *c;
            token_row[k] = b->cu_seqlens[s] + c->token_offset;
            feat_row[k] = feat;
            len[k] = N;
            feat += N;
            covered += N;
            prev_end = c->token_offset + N;
            k++;
        }
        if (covered != placeholders)
            return iv_errf(err, IV_E_INVALID, "sequence %d has %d audio tokens but its clips fill %d", s,
                           placeholders, covered);
    }
    iv_view soft;
    if (iv_gemma4_audio_forward(m, a, clips, n, mem, &soft, NULL, NULL, err)) return -1;
    *vi = (iv_visual_inject){.n_spans = n, .token_row = token_row, .feat_row = feat_row, .len = len, .embeds = soft};
    return 0;
}

int iv_model_forward_audio(const iv_model *m, const iv_batch *b, const iv_seq_audios *audios,
                           const iv_fwd_mem *mem, iv_view *hidden, iv_err *err)
{
    iv_visual_inject vi;
    if (iv_gemma4_audio_inject(m, b, audios, mem, &vi, err)) return -1;
    if (!vi.n_spans) return iv_model_forward(m, b, mem, hidden, err);
    return iv_model_forward_visual(m, b, &vi, mem, hidden, err);
}
