#include "models/gemma4_text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "models/decoder_common.h"
#include "models/loader.h"

enum { FULL = 0, SLIDING = 1 };
static const char *const k_kind_key[] = {"full_attention", "sliding_attention"};

/* Per-layer settings read from config.json before the layers are loaded. */
typedef struct layer_plan {
    int *head_dim, *kv_heads, *intermediate;
    unsigned char *sliding, *kv_reuse, *k_eq_v;
    int *kv_store; /* slot (kind + 1) the layer's keys and values go to, or 0 */
} layer_plan;

static void plan_free(layer_plan *p)
{
    free(p->head_dim);
    free(p->kv_heads);
    free(p->intermediate);
    free(p->sliding);
    free(p->kv_reuse);
    free(p->k_eq_v);
    free(p->kv_store);
}

static int plan_alloc(layer_plan *p, int n)
{
    p->head_dim = calloc((size_t)n, sizeof(int));
    p->kv_heads = calloc((size_t)n, sizeof(int));
    p->intermediate = calloc((size_t)n, sizeof(int));
    p->kv_store = calloc((size_t)n, sizeof(int));
    p->sliding = calloc((size_t)n, 1);
    p->kv_reuse = calloc((size_t)n, 1);
    p->k_eq_v = calloc((size_t)n, 1);
    return p->head_dim && p->kv_heads && p->intermediate && p->kv_store && p->sliding && p->kv_reuse && p->k_eq_v
               ? 0
               : -1;
}

/* layer_types, else the config class's default (every 6th layer full;
 * EmbeddingGemma 2 also takes sliding_window_pattern); the last layer is
 * always full, as both config classes force it. */
static int read_layer_kinds(const iv_model *m, const iv_gemma4_text_desc *d, unsigned char *sliding, iv_err *err)
{
    int found;
    if (iv_decoder_layer_types(m, sliding, &found, err)) return -1;
    if (!found) {
        const int64_t pattern = d->encoder ? iv_json_int(m->cfg.json, "sliding_window_pattern", 6) : 6;
        if (pattern <= 0) return iv_errf(err, IV_E_FORMAT, "config.json: sliding_window_pattern must be positive");
        for (int l = 0; l < m->n_layers; l++) sliding[l] = (l + 1) % pattern != 0;
    }
    sliding[m->n_layers - 1] = 0;
    return 0;
}

/* Head width and key/value heads per layer: per_layer_config
 * {"<layer>": {"head_dim", "num_key_value_heads"}} when config.json has it
 * (transformers 5 writes it); else what the config class derives: full
 * layers get global_head_dim (512) and num_global_key_value_heads (Gemma4:
 * only with attention_k_eq_v). */
static int read_layer_dims(const iv_model *m, const iv_gemma4_text_desc *d, const layer_plan *p, int k_eq_v,
                           iv_err *err)
{
    const iv_hf_config *c = &m->cfg;
    const cJSON *per = iv_json_get(c->json, "per_layer_config");
    for (int l = 0; l < m->n_layers; l++) {
        p->head_dim[l] = c->head_dim;
        p->kv_heads[l] = c->num_kv_heads;
    }
    if (!per || cJSON_IsNull(per)) {
        const int64_t global_dim = iv_json_int(c->json, "global_head_dim", 512);
        const cJSON *gkv = iv_json_get(c->json, "num_global_key_value_heads");
        int64_t global_kv = d->default_global_kv_heads;
        if (cJSON_IsNumber(gkv)) global_kv = (int64_t)gkv->valuedouble;
        if (!d->encoder && !k_eq_v) global_kv = 0;
        for (int l = 0; l < m->n_layers; l++) {
            if (p->sliding[l]) continue;
            p->head_dim[l] = (int)global_dim;
            if (global_kv > 0) p->kv_heads[l] = (int)global_kv;
        }
    } else {
        if (!cJSON_IsObject(per)) return iv_errf(err, IV_E_FORMAT, "config.json: per_layer_config must be an object");
        const cJSON *it;
        cJSON_ArrayForEach(it, per) {
            char *end;
            const long l = strtol(it->string, &end, 10);
            if (*end || end == it->string || l < 0 || l >= m->n_layers || !cJSON_IsObject(it))
                return iv_errf(err, IV_E_FORMAT, "config.json: per_layer_config key \"%s\" is not a layer index",
                               it->string);
            p->head_dim[l] = (int)iv_json_int(it, "head_dim", p->head_dim[l]);
            p->kv_heads[l] = (int)iv_json_int(it, "num_key_value_heads", p->kv_heads[l]);
        }
    }
    for (int l = 0; l < m->n_layers; l++)
        if (p->head_dim[l] <= 0 || p->head_dim[l] % 2 || p->head_dim[l] / 2 > 256 || p->kv_heads[l] <= 0 ||
            c->num_heads % p->kv_heads[l])
            return iv_errf(err, IV_E_FORMAT, "config.json: layer %d has an invalid head geometry (head_dim %d, %d "
                           "key/value heads)", l, p->head_dim[l], p->kv_heads[l]);
    return 0;
}

/* Gemma4TextConfig.kv_sharing_modes: the last n_shared layers reuse the keys
 * and values of the last earlier layer of their kind, which stores them. */
static int plan_kv_sharing(const iv_model *m, layer_plan *p, int64_t n_shared, iv_err *err)
{
    const int n = m->n_layers;
    if (n_shared < 0 || n_shared > n)
        return iv_errf(err, IV_E_FORMAT, "config.json: num_kv_shared_layers %lld is out of range", (long long)n_shared);
    if (n_shared == 0) return 0;
    if (n_shared == n)
        return iv_errf(err, IV_E_UNSUPPORTED, "num_kv_shared_layers equal to num_hidden_layers (no layer computes "
                       "the shared keys and values) is not supported");
    const int first = n - (int)n_shared;
    for (int kind = FULL; kind <= SLIDING; kind++) {
        int producer = -1, used = 0;
        for (int l = 0; l < n; l++) {
            if (p->sliding[l] != kind) continue;
            if (l < first) producer = l;
            else used = 1;
        }
        if (used && producer < 0)
            return iv_errf(err, IV_E_FORMAT, "config.json: num_kv_shared_layers leaves no %s layer to share keys and "
                           "values from", k_kind_key[kind]);
        if (producer >= 0) p->kv_store[producer] = kind + 1;
    }
    for (int l = first; l < n; l++) {
        const int src = p->sliding[l] + 1;
        p->kv_reuse[l] = 1;
        for (int j = 0; j < first; j++)
            if (p->kv_store[j] == src && (p->head_dim[j] != p->head_dim[l] || p->kv_heads[j] != p->kv_heads[l]))
                return iv_errf(err, IV_E_UNSUPPORTED, "layer %d shares keys and values with layer %d of another head "
                               "geometry", l, j);
    }
    return 0;
}

/* Rotary tables of one kind over its layers' whole heads, which must all be
 * one width (transformers builds one table per kind). Without
 * rope_parameters, the config class's default for the kind. */
static int kind_rope(iv_model *m, const iv_gemma4_text_desc *d, int kind, const layer_plan *p, iv_err *err)
{
    static const double default_theta[] = {1000000.0, 10000.0};
    unsigned char *which = calloc((size_t)m->n_layers, 1);
    if (!which) return iv_errf(err, IV_E_NOMEM, "out of memory");
    int width = 0, rc = 0;
    for (int l = 0; l < m->n_layers && !rc; l++) {
        if (p->sliding[l] != kind) continue;
        which[l] = 1;
        if (width && p->head_dim[l] != width)
            rc = iv_errf(err, IV_E_UNSUPPORTED, "%s layers of different head widths (%d, %d) are not supported",
                         k_kind_key[kind], width, p->head_dim[l]);
        width = p->head_dim[l];
    }
    const cJSON *params = iv_json_get(m->cfg.json, "rope_parameters");
    if (!rc && width && kind == FULL && (!params || cJSON_IsNull(params)) &&
        strcmp(d->full_rope_default, "default")) {
        cJSON *obj = cJSON_CreateObject();
        cJSON_AddStringToObject(obj, "rope_type", d->full_rope_default);
        cJSON_AddNumberToObject(obj, "partial_rotary_factor", 0.25);
        cJSON_AddNumberToObject(obj, "rope_theta", default_theta[FULL]);
        iv_rope_params rp;
        rc = iv_rope_params_from_config(m->cfg.json, obj, width, default_theta[FULL], m->cfg.max_position_embeddings,
                                        &rp, err);
        if (!rc) rc = iv_decoder_rope(m, &rp, which, err);
        cJSON_Delete(obj);
    } else if (!rc && width) {
        rc = iv_decoder_kind_rope(m, k_kind_key[kind], which, width, default_theta[kind], err);
    }
    for (int l = 0; l < m->n_layers && !rc; l++)
        if (which[l]) m->layers[l].rot_dim = width;
    free(which);
    return rc;
}

/* The PLE projection, norm and (Gemma4) token table; each layer's PLE
 * sub-block and layer_scalar. hidden_size_per_layer_input 0 or null: no PLE
 * (Gemma4 checkpoints without it). */
static int load_per_layer_inputs(iv_model *m, const iv_gemma4_text_desc *d, iv_err *err)
{
    const iv_hf_config *c = &m->cfg;
    const int64_t H = c->hidden_size;
    const cJSON *pj = iv_json_get(c->json, "hidden_size_per_layer_input");
    const int64_t P = pj && cJSON_IsNull(pj) ? 0 : iv_json_int(c->json, "hidden_size_per_layer_input", d->default_ple_dim);
    if (P < 0 || P > (1 << 20) || (P == 0 && d->encoder))
        return iv_errf(err, IV_E_FORMAT, "config.json: hidden_size_per_layer_input out of range");
    char name[320];
    if (P > 0) {
        m->block.ple_dim = (int)P;
        m->ple_scale = (float)pow((double)H, -0.5);
        snprintf(name, sizeof name, "%sper_layer_model_projection.weight", d->ple_prefix);
        if (iv_ld(m, name, m->n_layers * P, H, &m->ple_w, err)) return -1;
        snprintf(name, sizeof name, "%sper_layer_projection_norm.weight", d->ple_prefix);
        if (iv_ld(m, name, P, -1, &m->ple_norm_w, err)) return -1;
        if (d->ple_token_table) {
            if (iv_ld_table(m, "embed_tokens_per_layer.weight", m->n_layers * P, 1, &m->ple_tok, err)) return -1;
            if (m->ple_tok->shape[0] < m->embed.word->shape[0])
                return iv_errf(err, IV_E_UNSUPPORTED,
                               "embed_tokens_per_layer has %lld rows, fewer than the vocabulary's %lld "
                               "(vocab_size_per_layer_input < vocab_size is not supported)",
                               (long long)m->ple_tok->shape[0], (long long)m->embed.word->shape[0]);
            m->ple_tok_scale = (float)sqrt((double)P);
            m->ple_mix_scale = (float)pow(2.0, -0.5);
        }
    }
    for (int l = 0; l < m->n_layers; l++) {
        iv_layer *L = &m->layers[l];
#define NAME(fmt) (snprintf(name, sizeof name, "layers.%d.%s" fmt, l, d->ple_block), name)
        if (P > 0 && (iv_ld(m, NAME("per_layer_input_gate.weight"), P, H, &L->ple_gate_w, err) ||
                      iv_ld(m, NAME("per_layer_projection.weight"), H, P, &L->ple_proj_w, err) ||
                      iv_ld(m, NAME("post_per_layer_input_norm.weight"), H, -1, &L->ple_norm.w, err)))
            return -1;
#undef NAME
        const iv_tensor *scalar;
        snprintf(name, sizeof name, "layers.%d.layer_scalar", l);
        if (iv_ld(m, name, 1, -1, &scalar, err)) return -1;
        L->ple_norm.present = P > 0;
        L->ple_layer = l;
        L->scale_out = 1;
        L->out_scale = iv_f32(scalar)[0];
    }
    return 0;
}

/* Gemma4TextRouter + Gemma4TextExperts of layer l, as iv_layer.moe_beside:
 * router.proj [E, H] with router.scale [H] and hidden^-0.5 folded in (the
 * router reads RMS(x) * scale * hidden^-0.5), softmax, top k renormalised;
 * router.per_expert_scale [E] folded into each expert's down projection
 * (the scatter multiplies its output by the routing weight);
 * experts.gate_up_proj [E, 2I, H] (gate rows first), experts.down_proj
 * [E, H, I]. */
static int load_moe_layer(iv_model *m, int l, int E, int K, int I, iv_err *err)
{
    const int64_t H = m->cfg.hidden_size;
    iv_layer *L = &m->layers[l];
    iv_moe *moe = iv_model_alloc(m, sizeof *moe);
    const iv_tensor **up = iv_model_alloc(m, (size_t)E * sizeof *up), **down = iv_model_alloc(m, (size_t)E * sizeof *down);
    iv_tensor *views = iv_model_alloc(m, (size_t)(2 * E) * sizeof *views);
    if (!moe || !up || !down || !views) return iv_errf(err, IV_E_NOMEM, "out of memory");
    char name[320];
    const iv_tensor *proj, *scale, *pes, *gate_up, *down_all;
#define NAME(fmt) (snprintf(name, sizeof name, "layers.%d." fmt, l), name)
    if (iv_ld(m, NAME("router.proj.weight"), E, H, &proj, err) || iv_ld(m, NAME("router.scale"), H, -1, &scale, err) ||
        iv_ld(m, NAME("router.per_expert_scale"), E, -1, &pes, err))
        return -1;
    const int64_t gu_shape[3] = {E, 2 * (int64_t)I, H}, d_shape[3] = {E, H, I};
    char full[400];
    snprintf(full, sizeof full, "%s%s", m->prefix, NAME("experts.gate_up_proj"));
    if (!iv_weights_find(m->weights, full)) return iv_errf(err, IV_E_NOTFOUND, "checkpoint is missing tensor \"%s\"", full);
    if (iv_weights_f32(m->weights, full, 3, gu_shape, &gate_up, err)) return -1;
    snprintf(full, sizeof full, "%s%s", m->prefix, NAME("experts.down_proj"));
    if (!iv_weights_find(m->weights, full)) return iv_errf(err, IV_E_NOTFOUND, "checkpoint is missing tensor \"%s\"", full);
    if (iv_weights_f32(m->weights, full, 3, d_shape, &down_all, err)) return -1;
    const char *norms[3] = {"post_feedforward_layernorm_1", "pre_feedforward_layernorm_2",
                            "post_feedforward_layernorm_2"};
    iv_norm *dst[3] = {&L->post_mlp_norm_1, &L->pre_moe_norm, &L->post_moe_norm};
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "layers.%d.%s.weight", l, norms[i]);
        if (iv_ld(m, name, H, -1, &dst[i]->w, err)) return -1;
        dst[i]->present = 1;
    }
#undef NAME
    iv_tensor *router = iv_model_new_tensor(m, E, H), *down_scaled = iv_model_new_tensor(m, (int64_t)E * H, I);
    if (!router || !down_scaled) return iv_errf(err, IV_E_NOMEM, "out of memory");
    const float root = (float)pow((double)H, -0.5);
    for (int64_t e = 0; e < E; e++) {
        for (int64_t h = 0; h < H; h++)
            iv_f32(router)[e * H + h] = iv_f32(proj)[e * H + h] * (iv_f32(scale)[h] * root);
        const float s = iv_f32(pes)[e];
        for (int64_t i = 0; i < H * I; i++) iv_f32(down_scaled)[e * H * I + i] = iv_f32(down_all)[e * H * I + i] * s;
        views[e] = iv_tensor_2d(iv_f32(gate_up) + e * 2 * I * H, 2 * (int64_t)I, H);
        views[E + e] = iv_tensor_2d(iv_f32(down_scaled) + e * H * I, H, I);
        up[e] = &views[e];
        down[e] = &views[E + e];
    }
    *moe = (iv_moe){.n_experts = E, .top_k = K, .intermediate = I, .norm_topk_prob = 1, .router_w = router,
                    .up_w = up, .down_w = down, .router_unit_rms = 1};
    L->moe_beside = moe;
    return 0;
}

static int load_experts(iv_model *m, iv_err *err)
{
    const cJSON *j = m->cfg.json;
    const int64_t E = iv_json_int(j, "num_experts", 0), K = iv_json_int(j, "top_k_experts", 0),
                  I = iv_json_int(j, "moe_intermediate_size", 0);
    if (E <= 0 || E > 4096 || K <= 0 || K > E || I <= 0 || I > (1 << 20))
        return iv_errf(err, IV_E_FORMAT, "config.json: enable_moe_block needs num_experts, top_k_experts (1 .. "
                       "num_experts) and moe_intermediate_size");
    for (int l = 0; l < m->n_layers; l++)
        if (load_moe_layer(m, l, (int)E, (int)K, (int)I, err)) return -1;
    return 0;
}

/* Gemma4's switches: use_bidirectional_attention ("all": no causal mask),
 * attention_k_eq_v, num_kv_shared_layers, use_double_wide_mlp. */
static int read_gemma4_switches(const iv_model *m, layer_plan *p, int *bidirectional, int *moe, iv_err *err)
{
    const cJSON *j = m->cfg.json;
    const cJSON *bi = iv_json_get(j, "use_bidirectional_attention");
    *bidirectional = 0;
    if (bi && !cJSON_IsNull(bi)) {
        if (!cJSON_IsString(bi) || (strcmp(bi->valuestring, "all") && strcmp(bi->valuestring, "vision")))
            return iv_errf(err, IV_E_UNSUPPORTED,
                           "config.json: use_bidirectional_attention must be \"all\", \"vision\" or null");
        /* "vision" only opens attention within image blocks; text stays causal. */
        *bidirectional = !strcmp(bi->valuestring, "all");
    }
    int double_wide;
    if (iv_json_bool_chk(j, "use_double_wide_mlp", 0, &double_wide, "config.json", err) ||
        iv_json_bool_chk(j, "enable_moe_block", 0, moe, "config.json", err))
        return -1;
    if (plan_kv_sharing(m, p, iv_json_int(j, "num_kv_shared_layers", 0), err)) return -1;
    for (int l = 0; l < m->n_layers; l++)
        p->intermediate[l] = m->cfg.intermediate_size * (double_wide && p->kv_reuse[l] ? 2 : 1);
    return 0;
}

int iv_gemma4_text_load(iv_model *m, const iv_gemma4_text_desc *d, iv_err *err)
{
    const iv_hf_config *c = &m->cfg;
    if (c->has_auto_map)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "config.json references custom code (auto_map) for model_type \"%s\"; only transformers' own "
                       "implementation is supported",
                       c->model_type);
    const int n = c->num_layers;
    layer_plan p = {0};
    int rc = plan_alloc(&p, n) ? iv_errf(err, IV_E_NOMEM, "out of memory") : 0;
    m->n_layers = n; /* the plan is read before the layers exist */
    if (!iv_json_get(c->json, "head_dim")) m->cfg.head_dim = 256; /* the config classes' default */
    int k_eq_v = 0, bidirectional = d->encoder, moe = 0;
    if (!rc && !d->encoder) rc = iv_json_bool_chk(c->json, "attention_k_eq_v", 0, &k_eq_v, "config.json", err);
    if (!rc) rc = read_layer_kinds(m, d, p.sliding, err);
    if (!rc) rc = read_layer_dims(m, d, &p, k_eq_v, err);
    for (int l = 0; l < n && !rc; l++) {
        p.k_eq_v[l] = k_eq_v && !p.sliding[l];
        p.intermediate[l] = c->intermediate_size;
    }
    if (!rc && !d->encoder) rc = read_gemma4_switches(m, &p, &bidirectional, &moe, err);
    if (!rc) {
        const iv_decoder_desc dd = {
            .archs = d->archs, .norm_kind = IV_NORM_RMS, .sandwich = 1, .qk_norm = 1,
            .act_key = "hidden_activation", .layer_head_dim = p.head_dim, .layer_kv_heads = p.kv_heads,
            .prefixes = d->prefixes, .own_heads = 1, .partial_rotary = 1,
            .kv_reuse_layers = p.kv_reuse, .k_eq_v_layers = p.k_eq_v, .layer_intermediate = p.intermediate,
        };
        rc = iv_decoder_load(m, &dd, err);
    }
    if (!rc) {
        m->block.causal = !bidirectional;
        m->block.attn_scale = 1.0f;
        m->block.v_norm = 1;
        m->embed.scale = (float)sqrt((double)c->hidden_size);
        const int64_t window = iv_json_int(c->json, "sliding_window", 512);
        if (window <= 0 || window > (1 << 30)) rc = iv_errf(err, IV_E_FORMAT, "config.json: sliding_window out of range");
        else if (d->encoder || !bidirectional)
            iv_decoder_windows(m, p.sliding, (int)window, d->encoder ? IV_WINDOW_SYMMETRIC : IV_WINDOW_CAUSAL);
        else /* "all": Gemma4TextConfig keeps W // 2 + 1, which the bidirectional mask reads as inclusive */
            iv_decoder_windows(m, p.sliding, (int)(window / 2 + 1), IV_WINDOW_SYMMETRIC);
        for (int l = 0; l < n; l++) {
            m->layers[l].kv_store = p.kv_store[l];
            m->layers[l].kv_reuse = p.kv_reuse[l] ? p.sliding[l] + 1 : 0;
        }
    }
    for (int kind = FULL; kind <= SLIDING && !rc; kind++) rc = kind_rope(m, d, kind, &p, err);
    if (!rc) rc = load_per_layer_inputs(m, d, err);
    if (!rc && moe) rc = load_experts(m, err);
    plan_free(&p);
    return rc ? -1 : 0;
}

int iv_gemma4_placeholders_as_pad(iv_model *m, iv_err *err)
{
    if (m->cfg.pad_token_id < 0 || m->cfg.pad_token_id >= m->embed.word->shape[0])
        return iv_errf(err, IV_E_FORMAT, "config.json: %s needs text_config.pad_token_id within the vocabulary",
                       m->cfg.model_type);
    static const char *const keys[] = {"image_token_id", "video_token_id", "audio_token_id"};
    static const int64_t defaults[] = {258880, 258884, 258881}; /* Gemma4Config's and EmbeddingGemma2Config's */
    iv_embed_spec *es = &m->embed;
    es->as_pad_id = m->cfg.pad_token_id;
    for (int k = 0; k < 3; k++) {
        const cJSON *v = iv_json_get(m->cfg.root, keys[k]);
        const int64_t id = v && cJSON_IsNull(v) ? -1 : iv_json_int(m->cfg.root, keys[k], defaults[k]);
        if (id >= 0 && id < es->word->shape[0]) es->as_pad[es->n_as_pad++] = (int32_t)id;
    }
    return 0;
}
