#include "models/lm_score_head.h"

#include <cJSON.h>
#include "base/json.h"
#include "models/loader.h"

/* The LM head weight [V, H] (and bias [V] or NULL), as transformers ties it. */
static int lm_head(iv_model *m, const iv_tensor **w, const iv_tensor **b, iv_err *err)
{
    const cJSON *tie = iv_json_get(m->cfg.json, "tie_word_embeddings");
    const int64_t V = m->embed.word->shape[0], H = m->embed.word->shape[1];
    *w = *b = NULL;
    if (!cJSON_IsTrue(tie)) {
        if (iv_ld_top_opt(m, "lm_head.weight", V, H, w, err) || iv_ld_top_opt(m, "lm_head.bias", V, -1, b, err))
            return -1;
        if (!*w && cJSON_IsFalse(tie))
            return iv_errf(err, IV_E_NOTFOUND,
                           "checkpoint has no lm_head.weight and config.json says tie_word_embeddings: false");
    }
    if (!*w) *w = m->embed.word; /* tied: the output projection is the input embedding table */
    return 0;
}

int iv_model_can_score_tokens(const iv_model *m, iv_err *err)
{
    const iv_hf_config *c = &m->cfg;
    if (!iv_arch_has_suffix(c, "ForCausalLM"))
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "scoring with LM-head tokens needs a *ForCausalLM checkpoint; this one is \"%s\"",
                       c->architecture[0] ? c->architecture : c->model_type);
    const cJSON *cap = iv_json_get(c->json, "final_logit_softcapping");
    if (cJSON_IsNumber(cap) && cap->valuedouble > 0)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "config.json: final_logit_softcapping makes the yes/no log-odds non-linear in the hidden "
                       "state; scoring with LM-head tokens is not supported for this checkpoint");
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
    if (pos < 0 || pos >= V || neg < 0 || neg >= V)
        return iv_errf(err, IV_E_INVALID, "score token ids %d / %d are outside the LM head's %lld rows", pos, neg,
                       (long long)V);
    iv_tensor *sw = iv_model_new_tensor(m, 1, H), *sb = b ? iv_model_new_tensor(m, 1, -1) : NULL;
    if (!sw || (b && !sb)) return iv_errf(err, IV_E_NOMEM, "out of memory");
    const float *wp = iv_f32(w) + (int64_t)pos * H, *wn = iv_f32(w) + (int64_t)neg * H;
    for (int64_t i = 0; i < H; i++) iv_f32(sw)[i] = wp[i] - wn[i];
    if (sb) iv_f32(sb)[0] = iv_f32(b)[pos] - iv_f32(b)[neg];
    m->seq_head = (iv_head){.n_steps = 1, .out_dim = 1};
    m->seq_head.steps[0] = (iv_head_step){.w = sw, .b = sb, .act = IV_ACT_NONE};
    m->seq_head_pool = IV_SEQ_POOL_LAST;
    return 0;
}
