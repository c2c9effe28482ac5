/* EmbeddingGemma 2 text (transformers `embedding_gemma2_text`, and the text
 * backbone of the multimodal `embedding_gemma2` checkpoint, whose
 * text_config iv_hf_config reads and whose tensors sit under
 * `language_model.`; its audio tower, when audio_config declares one, is
 * loaded by models/audio_gemma4.c; the image tower is not run). A
 * bidirectional Gemma-style encoder:
 *   - embeddings x sqrt(hidden); RMSNorm x * w (weights around 1, not
 *     Gemma3's 1 + w), sandwich norms around attention and MLP;
 *   - per-head q_norm / k_norm, and v_norm (no weight) on V; attention
 *     scale 1 (the norms carry it); GeGLU with hidden_activation;
 *   - sliding layers see |i - j| <= sliding_window; full layers have their
 *     own head width and key/value head count (per_layer_config) and each
 *     kind its own rotary base over its whole head;
 *   - projection-only per-layer inputs (PLE): from the scaled embeddings e,
 *     ple = RMSNorm_P(reshape(e W^T * hidden^-0.5, [T, layers, P])); layer
 *     l ends with x += N(per_layer_projection(act(per_layer_input_gate(x))
 *     * ple_l)), then x *= layer_scalar;
 *   - final norm, then embedding_projection (hidden -> embedding_dim, no
 *     bias) on every token: the states the sentence-transformers pipeline
 *     pools are embedding_dim wide. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "models/audio_gemma4.h"
#include "models/decoder_common.h"
#include "models/family.h"
#include "models/loader.h"

static const char *const k_archs[] = {"EmbeddingGemma2TextModel", "EmbeddingGemma2Model", NULL};
static const char *const k_prefixes[] = {"language_model.", "model.language_model.", "model.", "", NULL};

enum { FULL = 0, SLIDING = 1 };
static const char *const k_kind_key[] = {"full_attention", "sliding_attention"};

/* sliding[l]: layer_types, else EmbeddingGemma2TextConfig's default (every
 * sliding_window_pattern-th layer full); the last layer is always full. */
static int read_layer_kinds(const iv_model *m, unsigned char *sliding, iv_err *err)
{
    int found;
    if (iv_decoder_layer_types(m, sliding, &found, err)) return -1;
    if (!found) {
        const int64_t pattern = iv_json_int(m->cfg.json, "sliding_window_pattern", 6);
        if (pattern <= 0) return iv_errf(err, IV_E_FORMAT, "config.json: sliding_window_pattern must be positive");
        for (int l = 0; l < m->n_layers; l++) sliding[l] = (l + 1) % pattern != 0;
    }
    sliding[m->n_layers - 1] = 0;
    return 0;
}

/* Head width and key/value heads per layer: the config's, or per_layer_config
 * {"<layer>": {"head_dim", "num_key_value_heads"}} for the layers it lists. */
static int read_layer_dims(const iv_model *m, int *head_dim, int *kv_heads, iv_err *err)
{
    const iv_hf_config *c = &m->cfg;
    for (int l = 0; l < m->n_layers; l++) {
        head_dim[l] = c->head_dim;
        kv_heads[l] = c->num_kv_heads;
    }
    const cJSON *per = iv_json_get(c->json, "per_layer_config");
    if (!per || cJSON_IsNull(per)) return 0;
    if (!cJSON_IsObject(per)) return iv_errf(err, IV_E_FORMAT, "config.json: per_layer_config must be an object");
    const cJSON *it;
    cJSON_ArrayForEach(it, per) {
        char *end;
        const long l = strtol(it->string, &end, 10);
        if (*end || end == it->string || l < 0 || l >= m->n_layers || !cJSON_IsObject(it))
            return iv_errf(err, IV_E_FORMAT, "config.json: per_layer_config key \"%s\" is not a layer index",
                           it->string);
        head_dim[l] = (int)iv_json_int(it, "head_dim", head_dim[l]);
        kv_heads[l] = (int)iv_json_int(it, "num_key_value_heads", kv_heads[l]);
        if (head_dim[l] <= 0 || head_dim[l] % 2 || kv_heads[l] <= 0 || c->num_heads % kv_heads[l])
            return iv_errf(err, IV_E_FORMAT, "config.json: per_layer_config[%ld] has an invalid head geometry", l);
    }
    return 0;
}

/* Rotary tables of one kind over its layers' whole heads, which must all be
 * one width (transformers builds one table per kind). */
static int kind_rope(iv_model *m, int kind, const unsigned char *sliding, const int *head_dim, iv_err *err)
{
    static const double default_theta[] = {1000000.0, 10000.0};
    unsigned char *which = calloc((size_t)m->n_layers, 1);
    if (!which) return iv_errf(err, IV_E_NOMEM, "out of memory");
    int width = 0, rc = 0;
    for (int l = 0; l < m->n_layers && !rc; l++) {
        if (sliding[l] != kind) continue;
        which[l] = 1;
        if (width && head_dim[l] != width)
            rc = iv_errf(err, IV_E_UNSUPPORTED, "%s layers of different head widths (%d, %d) are not supported",
                         k_kind_key[kind], width, head_dim[l]);
        width = head_dim[l];
    }
    if (!rc && width) {
        rc = iv_decoder_kind_rope(m, k_kind_key[kind], which, width, default_theta[kind], err);
        for (int l = 0; l < m->n_layers && !rc; l++)
            if (which[l]) m->layers[l].rot_dim = width;
    }
    free(which);
    return rc;
}

/* The PLE projection and norm, each layer's PLE sub-block and layer_scalar. */
static int load_per_layer_inputs(iv_model *m, iv_err *err)
{
    const iv_hf_config *c = &m->cfg;
    const int64_t H = c->hidden_size, P = iv_json_int(c->json, "hidden_size_per_layer_input", 512);
    if (P <= 0 || P > (1 << 20))
        return iv_errf(err, IV_E_FORMAT, "config.json: hidden_size_per_layer_input out of range");
    m->block.ple_dim = (int)P;
    m->ple_scale = (float)pow((double)H, -0.5);
    if (iv_ld(m, "ple.per_layer_model_projection.weight", m->n_layers * P, H, &m->ple_w, err) ||
        iv_ld(m, "ple.per_layer_projection_norm.weight", P, -1, &m->ple_norm_w, err))
        return -1;
    for (int l = 0; l < m->n_layers; l++) {
        iv_layer *L = &m->layers[l];
        char name[160];
#define NAME(fmt) (snprintf(name, sizeof name, "layers.%d." fmt, l), name)
        const iv_tensor *scalar;
        if (iv_ld(m, NAME("ple_block.per_layer_input_gate.weight"), P, H, &L->ple_gate_w, err) ||
            iv_ld(m, NAME("ple_block.per_layer_projection.weight"), H, P, &L->ple_proj_w, err) ||
            iv_ld(m, NAME("ple_block.post_per_layer_input_norm.weight"), H, -1, &L->ple_norm.w, err) ||
            iv_ld(m, NAME("layer_scalar"), 1, -1, &scalar, err))
            return -1;
#undef NAME
        L->ple_norm.present = 1;
        L->ple_layer = l;
        L->scale_out = 1;
        L->out_scale = iv_f32(scalar)[0];
    }
    return 0;
}

static int embedding_gemma2_load(iv_model *m, iv_err *err)
{
    const iv_hf_config *c = &m->cfg;
    if (c->has_auto_map)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "config.json references custom code (auto_map) for model_type \"%s\"; only transformers' own "
                       "embedding_gemma2 is supported",
                       c->model_type);
    const int n = c->num_layers;
    int *head_dim = calloc((size_t)n, sizeof *head_dim), *kv_heads = calloc((size_t)n, sizeof *kv_heads);
    unsigned char *sliding = calloc((size_t)n, 1);
    int rc = !head_dim || !kv_heads || !sliding ? iv_errf(err, IV_E_NOMEM, "out of memory") : 0;
    m->n_layers = n; /* read_layer_dims runs before the layers exist */
    if (!iv_json_get(c->json, "head_dim")) m->cfg.head_dim = 256; /* the config class's default */
    if (!rc) rc = read_layer_dims(m, head_dim, kv_heads, err);
    if (!rc) {
        const iv_decoder_desc d = {
            .archs = k_archs, .norm_kind = IV_NORM_RMS, .sandwich = 1, .qk_norm = 1,
            .act_key = "hidden_activation", .layer_head_dim = head_dim,
            .layer_kv_heads = kv_heads, .prefixes = k_prefixes, .own_heads = 1,
        };
        rc = iv_decoder_load(m, &d, err);
    }
    if (!rc) rc = read_layer_kinds(m, sliding, err);
    if (!rc) {
        m->block.causal = 0;
        m->block.attn_scale = 1.0f;
        m->block.v_norm = 1;
        m->embed.scale = (float)sqrt((double)c->hidden_size);
        const int64_t window = iv_json_int(c->json, "sliding_window", 512);
        if (window <= 0 || window > (1 << 30))
            rc = iv_errf(err, IV_E_FORMAT, "config.json: sliding_window out of range");
        else iv_decoder_windows(m, sliding, (int)window, IV_WINDOW_SYMMETRIC);
    }
    for (int kind = FULL; kind <= SLIDING && !rc; kind++) rc = kind_rope(m, kind, sliding, head_dim, err);
    if (!rc) rc = load_per_layer_inputs(m, err);
    if (!rc) {
        const int64_t E = iv_json_int(c->json, "embedding_dim", 768);
        if (E <= 0 || E > (1 << 20)) rc = iv_errf(err, IV_E_FORMAT, "config.json: embedding_dim out of range");
        else rc = iv_ld(m, "embedding_projection.weight", E, c->hidden_size, &m->out_proj, err);
    }
    if (!rc) rc = iv_gemma4_audio_load(m, &m->audio, err);
    free(head_dim);
    free(kv_heads);
    free(sliding);
    return rc ? -1 : 0;
}

static const char *const k_types[] = {"embedding_gemma2_text", "embedding_gemma2", NULL};
const iv_family iv_family_embedding_gemma2 = {"embedding_gemma2", k_types, embedding_gemma2_load};
