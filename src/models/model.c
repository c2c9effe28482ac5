/* Model lifecycle and validation; the forward pass is in forward.c. */
#include "models/fold.h"
#include "models/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/file.h"
#include "base/json.h"
#include "models/family.h"
#include "models/loader.h"

int iv_model_load(iv_model **out, const char *model_dir, const iv_ops *ops, iv_err *err)
{
    return iv_model_load_split(out, model_dir, model_dir, ops, err);
}

/* A PEFT adapter release (adapter_config.json beside adapter weights, as
 * vidore's ColQwen2 / ColQwen2.5 ship): the adapter applies to a base
 * model this loader would have to merge it into. */
static int refuse_adapter(const char *dir, iv_err *err)
{
    char path[4096];
    iv_path_join(path, sizeof path, dir, "adapter_config.json");
    if (!iv_file_exists(path)) return 0;
    cJSON *j = NULL;
    iv_err ignored = {0};
    const char *base = "?";
    if (!iv_json_load_file(path, 1 << 20, &j, &ignored)) base = iv_json_str(j, "base_model_name_or_path", "?");
    iv_errf(err, IV_E_UNSUPPORTED,
            "%s holds a PEFT adapter (adapter_config.json) for base model \"%s\": adapters are not applied here; "
            "merge it into its base model first (ColQwen2 / ColQwen2.5 adapters also need the Qwen2-VL backbone, "
            "which is not implemented)",
            dir, base);
    cJSON_Delete(j);
    return -1;
}

int iv_model_load_split(iv_model **out, const char *config_dir, const char *model_dir, const iv_ops *ops, iv_err *err)
{
    *out = NULL;
    iv_model *m = calloc(1, sizeof *m);
    if (!m) return iv_errf(err, IV_E_NOMEM, "out of memory");
    m->ops = ops;
    if (refuse_adapter(model_dir, err) || iv_hf_config_load(&m->cfg, config_dir, err)) goto fail;
    const char *refusal = iv_family_known_refusal(&m->cfg);
    if (refusal) {
        iv_errf(err, IV_E_UNSUPPORTED, "model_type \"%s\" (architecture \"%s\"): %s", m->cfg.model_type,
                m->cfg.architecture[0] ? m->cfg.architecture : "(none)", refusal);
        goto fail;
    }
    m->family = iv_family_for_config(&m->cfg);
    if (!m->family) {
        iv_errf(err, IV_E_UNSUPPORTED,
                "unsupported model_type \"%s\" (architecture \"%s\"); supported model types: %s",
                m->cfg.model_type, m->cfg.architecture[0] ? m->cfg.architecture : "(none)",
                iv_family_supported_list());
        goto fail;
    }
    if (iv_weights_open_dir(&m->weights, model_dir, err)) goto fail;
    if (m->family->load(m, err)) {
        iv_err_prefix(err, "%s model: ", m->family->name);
        goto fail;
    }
    m->no_fold_reason = iv_model_fold_blocker(m);
    m->no_head_rows_reason = iv_model_head_rows_blocker(m);
    if (iv_model_split_last_qkv(m, err)) goto fail;
    *out = m;
    return 0;
fail:
    iv_model_free(m);
    return -1;
}

void iv_model_free(iv_model *m)
{
    if (!m) return;
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    free(m->layers);
    if (m->weights) iv_weights_close(m->weights);
    iv_hf_config_free(&m->cfg);
    free(m);
}

int iv_model_max_length(const iv_model *m)
{
    if (m->max_len > 0) return m->max_len;
    if (m->embed.position) {
        int n = (int)m->embed.position->shape[0];
        /* RoBERTa-style positions start after padding_idx. */
        return m->embed.pos_mode == IV_POS_PADDING_IDX ? n - m->embed.padding_idx - 1 : n;
    }
    return m->cfg.max_position_embeddings > 0 ? m->cfg.max_position_embeddings : 8192;
}

int iv_model_check_batch(const iv_model *m, const iv_batch *b, iv_err *err)
{
    const int64_t vocab = m->embed.word->shape[0];
    const int max_len = iv_model_max_length(m);
    const int64_t types = m->embed.token_type ? m->embed.token_type->shape[0] : 1;
    if (b->n_seqs <= 0 || b->cu_seqlens[0] != 0 || b->cu_seqlens[b->n_seqs] != b->n_tokens)
        return iv_errf(err, IV_E_INTERNAL, "malformed batch");
    for (int s = 0; s < b->n_seqs; s++) {
        int len = iv_batch_seqlen(b, s);
        if (len <= 0) return iv_errf(err, IV_E_INVALID, "input %d is empty", s);
        if (len > max_len)
            return iv_errf(err, IV_E_INVALID, "input %d has %d tokens; the model accepts at most %d", s, len,
                           max_len);
    }
    for (int64_t t = 0; t < b->n_tokens; t++) {
        if (b->ids[t] < 0 || b->ids[t] >= vocab)
            return iv_errf(err, IV_E_INVALID, "token id %d is outside the vocabulary (size %lld)", b->ids[t],
                           (long long)vocab);
        /* Without a token-type table the ids are ignored, as transformers does
         * (DeBERTa-v3 tokenizers still mark pair segments with type 1). */
        if (b->type_ids && m->embed.token_type && (b->type_ids[t] < 0 || b->type_ids[t] >= types))
            return iv_errf(err, IV_E_INVALID, "token type id %d is out of range (the model has %lld)",
                           b->type_ids[t], (long long)types);
    }
    return 0;
}
