#include "models/lm_score_head.h"

#include <stdio.h>
#include <string.h>
#include <cJSON.h>
#include "base/json.h"
#include "models/loader.h"

/* Where the LM head sits beside the text model: the prefix above the
 * backbone's. A *ForConditionalGeneration keeps it next to its language
 * model (transformers 5: model.language_model. with lm_head. at the top;
 * the legacy layout language_model.model. with language_model.lm_head.). */
static void lm_head_name(const iv_model *m, char *out, size_t n)
{
    static const char *const inner[] = {"model.language_model.", "language_model.model.", "language_model.", "model.",
                                        NULL};
    const size_t len = strlen(m->prefix);
    size_t keep = len;
    for (int i = 0; inner[i]; i++) {
        const size_t k = strlen(inner[i]);
        if (len >= k && !strcmp(m->prefix + len - k, inner[i])) {
            /* language_model.model. keeps its language_model. (the legacy owner of lm_head). */
            keep = len - k + (i == 1 ? strlen("language_model.") : 0);
            break;
        }
    }
    snprintf(out, n, "%.*slm_head.weight", (int)keep, m->prefix);
}

/* tie_word_embeddings as transformers reads it: the top-level config's
 * (a multimodal checkpoint's own flag, not its text_config's). */
static const cJSON *tie_flag(const iv_model *m)
{
    const cJSON *top = iv_json_get(m->cfg.root, "tie_word_embeddings");
    return top ? top : iv_json_get(m->cfg.json, "tie_word_embeddings");
}

/* The LM head weight [V, H] (and bias [V] or NULL), as transformers ties it. */
static int lm_head(iv_model *m, const iv_tensor **w, const iv_tensor **b, iv_err *err)
{
    const cJSON *tie = tie_flag(m);
    const int64_t V = m->embed.word->shape[0], H = m->embed.word->shape[1];
    *w = *b = NULL;
    if (!cJSON_IsTrue(tie)) {
        char name[128], bias[128];
        lm_head_name(m, name, sizeof name);
        snprintf(bias, sizeof bias, "%.*sbias", (int)(strlen(name) - strlen("weight")), name);
        if (iv_ld_top_opt(m, name, V, H, w, err) || iv_ld_top_opt(m, bias, V, -1, b, err)) return -1;
        if (!*w && strcmp(name, "lm_head.weight") &&
            (iv_ld_top_opt(m, "lm_head.weight", V, H, w, err) || iv_ld_top_opt(m, "lm_head.bias", V, -1, b, err)))
            return -1;
        if (!*w && cJSON_IsFalse(tie))
            return iv_errf(err, IV_E_NOTFOUND,
                           "checkpoint has no %s and config.json says tie_word_embeddings: false", name);
    }
    if (!*w) *w = m->embed.word; /* tied: the output projection is the input embedding table */
    return 0;
}

int iv_model_can_score_tokens(const iv_model *m, iv_err *err)
{
    const iv_hf_config *c = &m->cfg;
    /* A vision-language *ForConditionalGeneration is a causal LM with towers
     * (Qwen3-VL, Mistral3 + Pixtral, Gemma4 with its tower or the unified
     * image embedder): its LM head reads the text model. */
    const int vlm = iv_arch_has_suffix(c, "ForConditionalGeneration") && (m->vision || m->pixtral || m->gemma4_vision);
    if (!iv_arch_has_suffix(c, "ForCausalLM") && !vlm)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "scoring with LM-head tokens needs a *ForCausalLM checkpoint (or a Qwen3-VL / Mistral3 / "
                       "Gemma4 *ForConditionalGeneration with its image tower); this one is \"%s\"",
                       c->architecture[0] ? c->architecture : c->model_type);
    return 0;
}

/* config.json final_logit_softcapping (Gemma 2 / 3): 0 when absent or null. */
static float final_softcap(const iv_model *m)
{
    const cJSON *cap = iv_json_get(m->cfg.json, "final_logit_softcapping");
    return cJSON_IsNumber(cap) && cap->valuedouble > 0 ? (float)cap->valuedouble : 0.0f;
}

/* With soft-capping transformers' logits are c tanh(l / c) (Gemma2ForCausalLM,
 * Gemma3ForCausalLM: logits / c, tanh, * c), so the log-odds are
 * c tanh(l_yes / c) - c tanh(l_no / c): no longer one row. The head becomes
 * two steps of existing ops: rows W[yes] / c and W[no] / c (bias / c) with
 * tanh, then the row [c, -c]. With no "no" token (wn NULL) the second row is
 * zero and contributes c tanh(0) = 0. */
static int softcapped_head(iv_model *m, const float *wp, const float *wn, const float *bp, const float *bn,
                           int64_t H, float c, iv_err *err)
{
    iv_tensor *w0 = iv_model_new_tensor(m, 2, H), *b0 = bp ? iv_model_new_tensor(m, 2, -1) : NULL;
    iv_tensor *w1 = iv_model_new_tensor(m, 1, 2);
    if (!w0 || !w1 || (bp && !b0)) return iv_errf(err, IV_E_NOMEM, "out of memory");
    for (int64_t i = 0; i < H; i++) {
        iv_f32(w0)[i] = wp[i] / c;
        iv_f32(w0)[H + i] = wn ? wn[i] / c : 0.0f;
    }
    if (b0) {
        iv_f32(b0)[0] = *bp / c;
        iv_f32(b0)[1] = bn ? *bn / c : 0.0f;
    }
    iv_f32(w1)[0] = c;
    iv_f32(w1)[1] = -c;
    m->seq_head = (iv_head){.n_steps = 2, .out_dim = 1};
    m->seq_head.steps[0] = (iv_head_step){.w = w0, .b = b0, .act = IV_ACT_TANH};
    m->seq_head.steps[1] = (iv_head_step){.w = w1, .b = NULL, .act = IV_ACT_NONE};
    return 0;
}

int iv_model_token_score_head(iv_model *m, int32_t pos, int32_t neg, iv_err *err)
{
    if (iv_model_can_score_tokens(m, err)) return -1;
    const iv_tensor *w, *b;
    if (lm_head(m, &w, &b, err)) return -1;
    const int64_t V = w->shape[0], H = w->shape[1];
    if (H != m->block.hidden)
        return iv_errf(err, IV_E_FORMAT, "the LM head takes %lld inputs, the model's hidden size is %d", (long long)H,
                       m->block.hidden);
    if (pos < 0 || pos >= V || neg < -1 || neg >= V)
        return iv_errf(err, IV_E_INVALID, "score token ids %d / %d are outside the LM head's %lld rows", pos, neg,
                       (long long)V);
    const float *wp = iv_f32(w) + (int64_t)pos * H, *wn = neg >= 0 ? iv_f32(w) + (int64_t)neg * H : NULL;
    const float *bp = b ? iv_f32(b) + pos : NULL, *bn = b && neg >= 0 ? iv_f32(b) + neg : NULL;
    m->seq_head_pool = IV_SEQ_POOL_LAST;
    const float cap = final_softcap(m);
    if (cap > 0) return softcapped_head(m, wp, wn, bp, bn, H, cap, err);
    iv_tensor *sw = iv_model_new_tensor(m, 1, H), *sb = b ? iv_model_new_tensor(m, 1, -1) : NULL;
    if (!sw || (b && !sb)) return iv_errf(err, IV_E_NOMEM, "out of memory");
    for (int64_t i = 0; i < H; i++) iv_f32(sw)[i] = wp[i] - (wn ? wn[i] : 0.0f);
    if (sb) iv_f32(sb)[0] = *bp - (bn ? *bn : 0.0f);
    m->seq_head = (iv_head){.n_steps = 1, .out_dim = 1};
    m->seq_head.steps[0] = (iv_head_step){.w = sw, .b = sb, .act = IV_ACT_NONE};
    return 0;
}

int iv_model_token_rows_head(iv_model *m, const int32_t *ids, int n, iv_err *err)
{
    if (iv_model_can_score_tokens(m, err)) return -1;
    const iv_tensor *w, *b;
    if (lm_head(m, &w, &b, err)) return -1;
    const int64_t V = w->shape[0], H = w->shape[1];
    if (H != m->block.hidden)
        return iv_errf(err, IV_E_FORMAT, "the LM head takes %lld inputs, the model's hidden size is %d", (long long)H,
                       m->block.hidden);
    iv_tensor *sw = iv_model_new_tensor(m, n, H), *sb = b ? iv_model_new_tensor(m, n, -1) : NULL;
    if (!sw || (b && !sb)) return iv_errf(err, IV_E_NOMEM, "out of memory");
    for (int r = 0; r < n; r++) {
        if (ids[r] < 0 || ids[r] >= V)
            return iv_errf(err, IV_E_INVALID, "token id %d is outside the LM head's %lld rows", ids[r], (long long)V);
        for (int64_t i = 0; i < H; i++) iv_f32(sw)[(int64_t)r * H + i] = iv_f32(w)[(int64_t)ids[r] * H + i];
        if (sb) iv_f32(sb)[r] = iv_f32(b)[ids[r]];
    }
    m->seq_head_pool = IV_SEQ_POOL_LAST;
    /* Soft-capped checkpoints (Gemma 2/3/4): each row's logit capped as transformers caps it. */
    m->seq_head = (iv_head){.n_steps = 1, .out_dim = n, .softcap = final_softcap(m)};
    m->seq_head.steps[0] = (iv_head_step){.w = sw, .b = sb, .act = IV_ACT_NONE};
    return 0;
}

int iv_model_last_token_readout(iv_model *m, const iv_tensor *w, int n, iv_err *err)
{
    const int64_t H = m->block.hidden;
    if (w->ndim != 2 || w->shape[1] != H || w->shape[0] < n || n < 1)
        return iv_errf(err, IV_E_FORMAT, "the readout is [%lld, %lld]; the model needs at least %d rows of %lld",
                       (long long)w->shape[0], (long long)(w->ndim > 1 ? w->shape[1] : 0), n, (long long)H);
    iv_tensor *sw = iv_model_new_tensor(m, n, H);
    if (!sw) return iv_errf(err, IV_E_NOMEM, "out of memory");
    memcpy(iv_f32(sw), iv_f32(w), sizeof(float) * (size_t)n * (size_t)H);
    m->seq_head_pool = IV_SEQ_POOL_LAST;
    m->seq_head = (iv_head){.n_steps = 1, .out_dim = n};
    m->seq_head.steps[0] = (iv_head_step){.w = sw, .b = NULL, .act = IV_ACT_NONE};
    return 0;
}

int iv_model_output_embeddings(iv_model *m, const iv_tensor **w, iv_err *err)
{
    const iv_tensor *b;
    if (lm_head(m, w, &b, err)) return -1;
    if ((*w)->shape[1] != m->block.hidden)
        return iv_errf(err, IV_E_FORMAT, "the LM head takes %lld inputs, the model's hidden size is %d",
                       (long long)(*w)->shape[1], m->block.hidden);
    return 0;
}
