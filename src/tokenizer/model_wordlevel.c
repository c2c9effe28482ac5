/* WordLevel: each pre-token is looked up whole; unknown ones map to the
 * unknown token. */
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "tokenizer/tok_internal.h"

int tok_load_wordlevel(const cJSON *j, tok_model *m, iv_err *err)
{
    const char *what = "model (WordLevel)";
    m->kind = TOK_M_WORDLEVEL;
    if (tok_load_vocab_object(cJSON_GetObjectItemCaseSensitive(j, "vocab"), m, what, err)) return -1;
    const char *unk = iv_json_str(j, "unk_token", "<unk>");
    m->unk_token = tok_xstrdup(unk);
    if (!m->unk_token) return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
    m->unk_len = (int32_t)strlen(unk);
    m->unk_id = tok_strmap_get(&m->vocab, m->unk_token, m->unk_len);
    if (m->unk_id < 0)
        return iv_errf(err, IV_E_FORMAT, "%s: unk_token \"%s\" is not in the vocabulary", what, unk);
    return 0;
}

int tok_wordlevel_tokenize(tok_ctx *c, const tok_model *m, const char *s, int32_t len, tok_token **out,
                           int32_t *n)
{
    tok_token *t = tok_alloc(&c->a, sizeof *t);
    const tok_strmap_ent *e = tok_strmap_find(&m->vocab, s, len);
    if (e) *t = (tok_token){e->val, 0, len, e->key, e->len};
    else *t = (tok_token){m->unk_id, 0, len, m->unk_token, m->unk_len};
    *out = t;
    *n = 1;
    return 0;
}
