/* UltraBERT (dmis-lab/UltraBERT-*, transformers `ultrabert`): a bidirectional
 * encoder built like a Llama decoder (pre-RMSNorm, SwiGLU, GQA, rotary
 * positions, final norm; EuroBERT's layer) with two kinds of layer: full
 * attention, and sliding attention where query i sees key j iff
 * |i - j| <= sliding_window. Each kind has its own rotary parameters.
 * Heads follow ModernBERT's classes without its head transform: the
 * sequence classifier pools (classifier_pooling cls | mean) straight into
 * `classifier` (with bias), the token classifier applies `classifier` to
 * every token, and the masked-LM head is linear1 -> gelu_tanh -> linear2 ->
 * gelu_tanh -> decoder, none with bias.
 *
 * Two on-disk forms, as transformers reads them:
 *   - transformers 5 (save_pretrained): layer_types + rope_parameters
 *     {full_attention: {...}, sliding_attention: {...}}, tensors under
 *     `model.` (task classes) or unprefixed, MLM decoder `head.decoder`;
 *   - the hub checkpoints that predate the port: attention_windows (per
 *     layer, 0 = full; the first non-zero one is the window) and rope_theta
 *     (per layer; each kind takes the theta of its last layer, as the
 *     config's dict comprehension does), tensors under `ultrabert.`, MLM
 *     decoder `cls`. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "models/decoder_common.h"
#include "models/encoder_common.h"
#include "models/family.h"
#include "models/loader.h"
#include "models/rope.h"

static const char *const k_archs[] = {
    "UltrabertModel", "UltrabertForMaskedLM", "UltrabertForSequenceClassification",
    "UltrabertForTokenClassification", NULL,
};
static const char *const k_prefixes[] = {"model.", "ultrabert.", "", NULL};

enum { FULL = 0, SLIDING = 1 };
static const char *const k_kind_key[] = {"full_attention", "sliding_attention"};

/* Which layers slide, and the window: layer_types, else attention_windows,
 * else UltrabertConfig's default (every third layer full, from the third). */
static int read_layers(const iv_model *m, unsigned char *sliding, int64_t *window, iv_err *err)
{
    const cJSON *cfg = m->cfg.json;
    const cJSON *windows = iv_json_get(cfg, "attention_windows");
    *window = iv_json_int(cfg, "sliding_window", 128);
    if (windows && !cJSON_IsNull(windows)) {
        if (!cJSON_IsArray(windows) || cJSON_GetArraySize(windows) != m->n_layers)
            return iv_errf(err, IV_E_FORMAT, "config.json: attention_windows must list %d layers", m->n_layers);
        int first = 1;
        for (int l = 0; l < m->n_layers; l++) {
            const cJSON *w = cJSON_GetArrayItem(windows, l);
            if (!cJSON_IsNumber(w) || w->valuedouble < 0 || w->valuedouble > INT_MAX)
                return iv_errf(err, IV_E_FORMAT, "config.json: attention_windows[%d] must be a window size", l);
            sliding[l] = w->valueint != 0;
            if (sliding[l] && first) {
                *window = w->valueint;
                first = 0;
            }
        }
    }
    int found;
    if (iv_decoder_layer_types(m, sliding, &found, err)) return -1;
    if (!found && !(windows && !cJSON_IsNull(windows)))
        for (int l = 0; l < m->n_layers; l++) sliding[l] = (l + 1) % 3 != 0;
    if (*window < 0 || *window > INT_MAX) return iv_errf(err, IV_E_FORMAT, "config.json: sliding_window out of range");
    return 0;
}

/* Rotary tables of one kind for the layers flagged in which. */
static int kind_rope(iv_model *m, int kind, const unsigned char *sliding, unsigned char *which, iv_err *err)
{
    static const double default_theta[] = {2560000.0, 10000.0};
    const cJSON *cfg = m->cfg.json;
    int any = 0, last = -1;
    for (int l = 0; l < m->n_layers; l++) {
        which[l] = sliding[l] == kind;
        if (which[l]) any = 1, last = l;
    }
    if (!any) return 0;
    const cJSON *params = iv_json_get(cfg, "rope_parameters");
    if (params && !cJSON_IsNull(params))
        return iv_decoder_kind_rope(m, k_kind_key[kind], which, m->block.head_dim, default_theta[kind], err);
    /* The hub style: default tables from rope_theta alone. */
    if (cJSON_IsObject(iv_json_get(cfg, "rope_scaling")))
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "config.json: rope_scaling without per-kind rope_parameters is not supported for ultrabert "
                       "(transformers builds default rotary tables from rope_theta alone)");
    const cJSON *thetas = iv_json_get(cfg, "rope_theta");
    double theta = default_theta[kind];
    if (thetas && !cJSON_IsNull(thetas)) {
        const int listed = cJSON_IsArray(thetas) && cJSON_GetArraySize(thetas) == m->n_layers;
        const cJSON *t = listed ? cJSON_GetArrayItem(thetas, last) : NULL;
        if (!cJSON_IsNumber(t) || !(t->valuedouble > 0))
            return iv_errf(err, IV_E_FORMAT, "config.json: rope_theta must list a positive base per layer");
        theta = t->valuedouble;
    }
    iv_rope_params p;
    if (iv_rope_params_from_config(cfg, NULL, m->block.head_dim, theta, m->cfg.max_position_embeddings, &p, err))
        return -1;
    p.theta = theta;
    return iv_decoder_rope(m, &p, which, err);
}

/* linear1 -> gelu_tanh -> linear2 -> gelu_tanh -> decoder (`head.decoder`,
 * hub `cls`, or the word embeddings when tie_word_embeddings says so). */
static int load_mlm_head(iv_model *m, iv_err *err)
{
    const int64_t H = m->cfg.hidden_size, V = m->embed.word->shape[0];
    iv_head *h = &m->mlm_head;
    *h = (iv_head){0};
    if (iv_head_absent(m, h, (const char *const[]){"head.linear1", "head.linear2", "head.decoder", "cls", NULL}))
        return 0;
    const iv_tensor *w1, *w2, *dec;
    const int64_t mid = iv_json_int(m->cfg.json, "prediction_head_size", 768);
    int tied;
    if (iv_json_bool_chk(m->cfg.json, "tie_word_embeddings", 0, &tied, "config.json", err)) return -1;
    if (iv_ld_top(m, "head.linear1.weight", mid, H, &w1, err) ||
        iv_ld_top(m, "head.linear2.weight", H, mid, &w2, err) ||
        iv_ld_top_opt(m, "head.decoder.weight", V, H, &dec, err))
        return -1;
    if (!dec && iv_ld_top_opt(m, "cls.weight", V, H, &dec, err)) return -1;
    if (!dec && !tied)
        return iv_errf(err, IV_E_NOTFOUND,
                       "checkpoint is missing the MLM decoder \"head.decoder.weight\" (or \"cls.weight\") and "
                       "tie_word_embeddings is false");
    h->steps[0] = (iv_head_step){.w = w1, .act = IV_ACT_GELU_TANH};
    h->steps[1] = (iv_head_step){.w = w2, .act = IV_ACT_GELU_TANH};
    h->steps[2] = (iv_head_step){.w = dec ? dec : m->embed.word, .act = IV_ACT_NONE};
    h->n_steps = 3;
    h->out_dim = (int)V;
    return 0;
}

static int load_heads(iv_model *m, iv_err *err)
{
    const int64_t H = m->cfg.hidden_size;
    if (iv_arch_has_suffix(&m->cfg, "ForSequenceClassification")) {
        const char *pool = iv_json_str(m->cfg.json, "classifier_pooling", "cls");
        if (!strcmp(pool, "cls")) m->seq_head_pool = IV_SEQ_POOL_FIRST;
        else if (!strcmp(pool, "mean")) m->seq_head_pool = IV_SEQ_POOL_MEAN;
        else return iv_errf(err, IV_E_UNSUPPORTED, "classifier_pooling \"%s\" is not supported (cls, mean)", pool);
        return iv_load_linear_head(m, &m->seq_head, "classifier", H, err);
    }
    if (iv_arch_has_suffix(&m->cfg, "ForTokenClassification"))
        return iv_load_linear_head(m, &m->token_head, "classifier", H, err);
    if (iv_arch_has_suffix(&m->cfg, "ForMaskedLM")) return load_mlm_head(m, err);
    return 0;
}

static int ultrabert_load(iv_model *m, iv_err *err)
{
    /* The hub checkpoints' own code (auto_map) is what transformers'
     * ultrabert port reads natively, config keys and tensor names included. */
    const iv_decoder_desc d = {.archs = k_archs, .norm_kind = IV_NORM_RMS, .prefixes = k_prefixes, .own_heads = 1};
    if (iv_decoder_load(m, &d, err)) return -1;
    m->block.causal = 0;
    unsigned char *sliding = calloc((size_t)m->n_layers, 1), *which = calloc((size_t)m->n_layers, 1);
    int64_t window = 0;
    int rc = !sliding || !which ? iv_errf(err, IV_E_NOMEM, "out of memory") : read_layers(m, sliding, &window, err);
    for (int kind = FULL; kind <= SLIDING && !rc; kind++) rc = kind_rope(m, kind, sliding, which, err);
    if (!rc) iv_decoder_windows(m, sliding, (int)window, IV_WINDOW_SYMMETRIC);
    free(sliding);
    free(which);
    return rc ? -1 : load_heads(m, err);
}

static const char *const k_types[] = {"ultrabert", NULL};
const iv_family iv_family_ultrabert = {"ultrabert", k_types, ultrabert_load};
