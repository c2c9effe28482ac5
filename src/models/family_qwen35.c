/* Qwen3.5 (model_type qwen3_5, and its text model qwen3_5_text): the
 * Qwen3-Next hybrid decoder with a dense SwiGLU MLP. config.json's
 * layer_types (else every full_attention_interval-th layer, default 4) says
 * which layers are full_attention, the rest linear_attention:
 *
 * - full attention is Qwen3's (per-head q/k norms, GQA) with an output gate:
 *   q_proj gives each head [q | gate], and the attention output is multiplied
 *   by sigmoid(gate) before o_proj (decoder_common's attn_out_gate); RoPE
 *   turns the first partial_rotary_factor (0.25) of each head. Its mRoPE
 *   sections give text tokens the same position on every axis, which is the
 *   plain rotary table.
 * - linear attention is a Gated DeltaNet (iv_deltanet, block_deltanet.c):
 *   in_proj_qkv / in_proj_z / in_proj_b / in_proj_a fused at load, a causal
 *   depthwise conv1d with hidden_act, the gated delta rule, the gated
 *   RMSNorm (plain w) and out_proj.
 * - every other RMSNorm is zero-centred, x * (1 + w) (IV_NORM_RMS_PLUS1),
 *   q_norm and k_norm included.
 *
 * Qwen3.5-MoE (qwen3_5_moe, qwen3_5_moe_text) routes every layer's MLP:
 * softmax router, top num_experts_per_tok renormalised, per-expert SwiGLU
 * (mlp.experts.N.{gate,up,down}_proj, as save_pretrained writes them), plus
 * the shared expert scaled by sigmoid(shared_expert_gate(x)).
 *
 * Qwen3-Next (qwen3_next), the architecture Qwen3.5 grew from, is the same
 * stack with the fused in_proj_qkvz / in_proj_ba DeltaNet layout (reordered
 * at load) and Qwen3-MoE's layer rule for routed MLPs (decoder_sparse_step,
 * mlp_only_layers, norm_topk_prob), each routed MLP with the shared expert.
 *
 * Qwen3_5ForConditionalGeneration checkpoints (config nesting text_config,
 * tensors under model.language_model.) load their text model and, when the
 * checkpoint has one (model.visual.), the vision tower: Qwen3-VL's without
 * DeepStack (models/vision_qwen3vl.h), whose image rows the mixed forward
 * puts at the image pad tokens, with get_rope_index's three-axis positions
 * on the full-attention layers' interleaved mRoPE (mrope_section, default
 * [11, 11, 10], over the partial rotary dims). Heads are the decoders'
 * `score` ones (sequence and token classification). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "models/decoder_common.h"
#include "models/family.h"
#include "models/loader.h"
#include "models/vision_qwen3vl.h"

static const char *const k_archs[] = {
    "Qwen3_5TextModel", "Qwen3_5Model", "Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration",
    "Qwen3_5ForSequenceClassification", "Qwen3_5TextForSequenceClassification", "Qwen3_5ForTokenClassification",
    NULL,
};
static const char *const k_moe_archs[] = {
    "Qwen3_5MoeTextModel", "Qwen3_5MoeModel", "Qwen3_5MoeForCausalLM", "Qwen3_5MoeForConditionalGeneration", NULL,
};
static const char *const k_next_archs[] = {
    "Qwen3NextModel", "Qwen3NextForCausalLM", "Qwen3NextForSequenceClassification", "Qwen3NextForTokenClassification",
    NULL,
};
static const char *const k_prefixes[] = {"model.language_model.", "language_model.", "model.", "", NULL};

/* linear[l] = 1 for linear_attention layers. */
static int layer_kinds(const iv_model *m, unsigned char *linear, iv_err *err)
{
    const cJSON *lt = iv_json_get(m->cfg.json, "layer_types");
    if (!lt || cJSON_IsNull(lt)) {
        const int64_t every = iv_json_int(m->cfg.json, "full_attention_interval", 4);
        if (every <= 0) return iv_errf(err, IV_E_FORMAT, "config.json: full_attention_interval must be positive");
        for (int l = 0; l < m->cfg.num_layers; l++) linear[l] = (l + 1) % every != 0;
        return 0;
    }
    if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) < m->cfg.num_layers)
        return iv_errf(err, IV_E_FORMAT, "config.json: layer_types must list all %d layers", m->cfg.num_layers);
    for (int l = 0; l < m->cfg.num_layers; l++) {
        const cJSON *t = cJSON_GetArrayItem(lt, l);
        const char *s = cJSON_IsString(t) ? t->valuestring : "";
        if (!strcmp(s, "linear_attention")) linear[l] = 1;
        else if (!strcmp(s, "full_attention")) linear[l] = 0;
        else
            return iv_errf(err, IV_E_UNSUPPORTED,
                           "config.json: layer_types[%d] \"%s\" is not supported (linear_attention, full_attention)",
                           l, s);
    }
    return 0;
}

static int positive(const cJSON *j, const char *key, int64_t dflt, int *out, iv_err *err)
{
    const int64_t v = iv_json_int(j, key, dflt);
    if (v <= 0 || v > (1 << 20)) return iv_errf(err, IV_E_FORMAT, "config.json: %s must be positive", key);
    *out = (int)v;
    return 0;
}

/* Qwen3-Next's fused layout: in_proj_qkvz rows grouped by key head g, each
 * [q_g (Dk) | k_g (Dk) | v of its r = Hv / Hk value heads (r Dv) | z of
 * them (r Dv)], and in_proj_ba grouped the same way, [b (r) | a (r)]
 * (transformers' fix_query_key_value_ordering). Reordered at load into the
 * split layout's [q | k | v | z | b | a]. */
static int load_fused_in_proj(iv_model *m, iv_deltanet *d, const char *pre, iv_err *err)
{
    const int64_t H = m->cfg.hidden_size, Hk = d->n_k_heads, Dk = d->k_head_dim, Dv = d->v_head_dim;
    const int64_t r = d->n_v_heads / Hk, group = 2 * Dk + 2 * r * Dv, Hv = d->n_v_heads;
    char name[320];
    const iv_tensor *qkvz, *ba;
    snprintf(name, sizeof name, "%sin_proj_qkvz.weight", pre);
    if (iv_ld(m, name, Hk * group, H, &qkvz, err)) return -1;
    snprintf(name, sizeof name, "%sin_proj_ba.weight", pre);
    if (iv_ld(m, name, Hk * 2 * r, H, &ba, err)) return -1;
    iv_tensor *w = iv_model_new_tensor(m, 2 * Hk * Dk + 2 * Hv * Dv + 2 * Hv, H);
    if (!w) return iv_errf(err, IV_E_NOMEM, "out of memory");
    const float *src = qkvz->data, *bsrc = ba->data;
    float *dst = w->data;
    const size_t row = (size_t)H * sizeof(float);
    const int64_t q0 = 0, k0 = Hk * Dk, v0 = 2 * Hk * Dk, z0 = v0 + Hv * Dv, b0 = z0 + Hv * Dv, a0 = b0 + Hv;
    for (int64_t g = 0; g < Hk; g++) {
        const float *grp = src + g * group * H;
        memcpy(dst + (q0 + g * Dk) * H, grp, (size_t)Dk * row);
        memcpy(dst + (k0 + g * Dk) * H, grp + Dk * H, (size_t)Dk * row);
        memcpy(dst + (v0 + g * r * Dv) * H, grp + 2 * Dk * H, (size_t)(r * Dv) * row);
        memcpy(dst + (z0 + g * r * Dv) * H, grp + (2 * Dk + r * Dv) * H, (size_t)(r * Dv) * row);
        memcpy(dst + (b0 + g * r) * H, bsrc + g * 2 * r * H, (size_t)r * row);
        memcpy(dst + (a0 + g * r) * H, bsrc + (g * 2 * r + r) * H, (size_t)r * row);
    }
    d->in_w = w;
    return 0;
}

static int load_deltanet(iv_model *m, int l, iv_err *err)
{
    const cJSON *j = m->cfg.json;
    iv_deltanet *d = iv_model_alloc(m, sizeof *d);
    if (!d) return iv_errf(err, IV_E_NOMEM, "out of memory");
    int K = 0;
    if (positive(j, "linear_num_key_heads", 16, &d->n_k_heads, err) ||
        positive(j, "linear_num_value_heads", 32, &d->n_v_heads, err) ||
        positive(j, "linear_key_head_dim", 128, &d->k_head_dim, err) ||
        positive(j, "linear_value_head_dim", 128, &d->v_head_dim, err) ||
        positive(j, "linear_conv_kernel_dim", 4, &K, err))
        return -1;
    if (d->n_v_heads % d->n_k_heads)
        return iv_errf(err, IV_E_FORMAT, "config.json: linear_num_value_heads must be a multiple of linear_num_key_heads");
    const int act = iv_act_from_name(m->cfg.hidden_act);
    if (act < 0) return iv_errf(err, IV_E_UNSUPPORTED, "unsupported activation \"%s\"", m->cfg.hidden_act);
    d->conv_act = (iv_act)act;
    d->norm_eps = (float)m->cfg.layer_norm_eps;
    const int64_t H = m->cfg.hidden_size, Hv = d->n_v_heads, value = Hv * d->v_head_dim;
    const int64_t conv = 2 * (int64_t)d->n_k_heads * d->k_head_dim + value;
    char pre[64], name[320];
    snprintf(pre, sizeof pre, "layers.%d.linear_attn.", l);
#define NAME(fmt) (snprintf(name, sizeof name, "%s" fmt, pre), name)
    char probe[512];
    snprintf(probe, sizeof probe, "%s%sin_proj_qkvz.weight", m->prefix, pre);
    if (iv_weights_find(m->weights, probe)) {
        if (load_fused_in_proj(m, d, pre, err)) return -1;
    } else {
        const iv_tensor *parts[4];
        if (iv_ld(m, NAME("in_proj_qkv.weight"), conv, H, &parts[0], err) ||
            iv_ld(m, NAME("in_proj_z.weight"), value, H, &parts[1], err) ||
            iv_ld(m, NAME("in_proj_b.weight"), Hv, H, &parts[2], err) ||
            iv_ld(m, NAME("in_proj_a.weight"), Hv, H, &parts[3], err) || iv_concat_rows(m, parts, 4, &d->in_w, err))
            return -1;
    }
    if (iv_ld(m, NAME("A_log"), Hv, -1, &d->a_log, err) || iv_ld(m, NAME("dt_bias"), Hv, -1, &d->dt_bias, err) ||
        iv_ld(m, NAME("norm.weight"), d->v_head_dim, -1, &d->norm_w, err) ||
        iv_ld(m, NAME("out_proj.weight"), H, value, &m->layers[l].o_w, err) ||
        iv_ld_opt(m, NAME("conv1d.bias"), conv, -1, &d->conv_b, err))
        return -1;
    /* conv1d.weight is PyTorch's depthwise [C, 1, K]: kept as [C, K]. */
    char full[512];
    snprintf(full, sizeof full, "%s%sconv1d.weight", m->prefix, pre);
    const int64_t shape[3] = {conv, 1, K};
    const iv_tensor *raw;
    if (iv_weights_f32(m->weights, full, 3, shape, &raw, err)) return -1;
    iv_tensor *cw = iv_model_new_tensor(m, conv, K);
    if (!cw) return iv_errf(err, IV_E_NOMEM, "out of memory");
    memcpy(cw->data, raw->data, (size_t)(conv * K) * sizeof(float));
    d->conv_w = cw;
#undef NAME
    m->layers[l].deltanet = d;
    return 0;
}

static int qwen35_load(iv_model *m, iv_err *err)
{
    const iv_hf_config *c = &m->cfg;
    if (c->has_auto_map)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "config.json references custom code (auto_map) for model_type \"%s\"; only plain transformers "
                       "checkpoints are supported",
                       c->model_type);
    const int next = !strcmp(c->model_type, "qwen3_next");
    const int moe = next || !strncmp(c->model_type, "qwen3_5_moe", 11);
    unsigned char *linear = calloc((size_t)c->num_layers, 1), *moe_layers = calloc((size_t)c->num_layers, 1);
    if (!linear || !moe_layers) {
        free(linear);
        free(moe_layers);
        return iv_errf(err, IV_E_NOMEM, "out of memory");
    }
    int rc = layer_kinds(m, linear, err);
    iv_moe tmpl = {0};
    if (moe && !rc) {
        /* Qwen3.5-MoE: every layer routed, Qwen3_5MoeTopKRouter always
         * renormalises its top k. Qwen3-Next: layers (l + 1) %
         * decoder_sparse_step == 0 outside mlp_only_layers, norm_topk_prob
         * as configured. */
        const cJSON *j = c->json;
        tmpl = (iv_moe){
            .n_experts = (int)iv_json_int(j, "num_experts", 0), .top_k = (int)iv_json_int(j, "num_experts_per_tok", 0),
            .intermediate = (int)iv_json_int(j, "moe_intermediate_size", 0),
            .norm_topk_prob = next ? iv_json_bool(j, "norm_topk_prob", 1) : 1,
            .shared_intermediate = (int)iv_json_int(j, "shared_expert_intermediate_size", 0),
        };
        if (tmpl.n_experts <= 0 || tmpl.top_k <= 0 || tmpl.top_k > tmpl.n_experts || tmpl.intermediate <= 0 ||
            tmpl.shared_intermediate < 0)
            rc = iv_errf(err, IV_E_FORMAT,
                         "config.json: qwen3_5_moe needs 0 < num_experts_per_tok <= num_experts and "
                         "moe_intermediate_size");
        memset(moe_layers, 1, (size_t)c->num_layers);
        if (next && !rc) {
            const int step = (int)iv_json_int(j, "decoder_sparse_step", 1);
            if (step <= 0) rc = iv_errf(err, IV_E_FORMAT, "config.json: decoder_sparse_step must be positive");
            for (int l = 0; !rc && l < c->num_layers; l++) moe_layers[l] = (l + 1) % step == 0;
            const cJSON *only = iv_json_get(j, "mlp_only_layers"), *it;
            cJSON_ArrayForEach(it, only) {
                if (!iv_json_is_integer(it)) {
                    rc = iv_errf(err, IV_E_FORMAT, "config.json: mlp_only_layers must list layers");
                    break;
                }
                /* compared as doubles: an index past int is no layer (and would not convert) */
                if (it->valuedouble >= 0 && it->valuedouble < c->num_layers) moe_layers[(int)it->valuedouble] = 0;
            }
        }
    }
    const iv_decoder_desc d = {
        .archs = next ? k_next_archs : moe ? k_moe_archs : k_archs,
        .moe_layers = moe ? moe_layers : NULL,
        .moe = tmpl,
        .prefixes = k_prefixes,
        .norm_kind = IV_NORM_RMS_PLUS1,
        .qk_norm = 1,
        .default_head_dim = 256, /* Qwen3_5TextConfig's */
        .partial_rotary = 1,
        .attn_out_gate = 1,
        .own_mixer = linear,
    };
    if (!rc) rc = iv_decoder_load(m, &d, err);
    for (int l = 0; !rc && l < m->n_layers; l++)
        if (linear[l]) rc = load_deltanet(m, l, err);
    /* RoPE on the full-attention layers: the first partial_rotary_factor of each head. */
    unsigned char *full = linear;
    for (int l = 0; !rc && l < m->n_layers; l++) full[l] = !linear[l];
    if (!rc) {
        const cJSON *rp = iv_json_get(c->json, "rope_parameters");
        const double partial = iv_json_num(c->json, "partial_rotary_factor", iv_json_num(rp, "partial_rotary_factor", 0.25));
        const int rot = (int)(c->head_dim * partial);
        if (!(partial > 0 && partial <= 1) || rot < 2)
            rc = iv_errf(err, IV_E_FORMAT, "config.json: partial_rotary_factor %g is out of range", partial);
        iv_rope_params rope;
        if (!rc) rc = iv_rope_params_from_config(c->json, NULL, rot & ~1, 10000.0, c->max_position_embeddings, &rope, err);
        if (!rc) rc = iv_decoder_rope(m, &rope, full, err);
    }
    /* Qwen3.5's text rotary is mRoPE (Qwen3_5TextRotaryEmbedding); Qwen3-Next's is not. */
    static const int sections[3] = {11, 11, 10};
    if (!rc && !next) rc = iv_qwen3vl_mm_load(m, sections, 248056, 0, err);
    free(linear);
    free(moe_layers);
    return rc ? -1 : 0;
}

static const char *const k_types[] = {"qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_next",
                                      NULL};
const iv_family iv_family_qwen35 = {"qwen3_5", k_types, qwen35_load};
