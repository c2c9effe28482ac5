/* WordPiece: greedy longest-match-first over each pre-token, with the
 * continuing-subword prefix on non-initial pieces; a word that cannot be
 * covered, or is longer than max_input_chars_per_word chars, becomes a
 * single unknown token. */
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "tokenizer/tok_internal.h"

int tok_load_wordpiece(const cJSON *j, tok_model *m, iv_err *err)
{
    const char *what = "model (WordPiece)";
    m->kind = TOK_M_WORDPIECE;
    if (tok_load_vocab_object(cJSON_GetObjectItemCaseSensitive(j, "vocab"), m, what, err)) return -1;
    int64_t max_chars = 100;
    if (iv_json_int_chk(j, "max_input_chars_per_word", 100, &max_chars, what, err)) return -1;
    m->max_chars = max_chars < 0 ? 0 : max_chars > INT32_MAX ? INT32_MAX : (int)max_chars;
    const char *unk = iv_json_str(j, "unk_token", "[UNK]");
    const char *prefix = iv_json_str(j, "continuing_subword_prefix", "##");
    m->unk_token = tok_xstrdup(unk);
    m->prefix = tok_xstrdup(prefix);
    if (!m->unk_token || !m->prefix) return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
    m->unk_len = (int32_t)strlen(unk);
    m->prefix_len = (int32_t)strlen(prefix);
    m->unk_id = tok_strmap_get(&m->vocab, m->unk_token, m->unk_len);
    if (m->unk_id < 0)
        return iv_errf(err, IV_E_FORMAT, "%s: unk_token \"%s\" is not in the vocabulary", what, unk);
    return 0;
}

int tok_wordpiece_tokenize(tok_ctx *c, const tok_model *m, const char *s, int32_t len, tok_token **out,
                           int32_t *n)
{
    *n = 0;
    int32_t cap = 4;
    tok_token *toks = tok_alloc(&c->a, sizeof *toks * (size_t)cap);
    *out = toks;
    if (tok_utf8_count(s, len) > m->max_chars) goto unknown;
    /* Candidate buffer: prefix + the longest possible substring. */
    char *buf = tok_alloc(&c->a, (size_t)(m->prefix_len + len + 1));
    memcpy(buf, m->prefix, (size_t)m->prefix_len);
    int32_t start = 0;
    while (start < len) {
        int32_t end = len;
        const tok_strmap_ent *found = NULL;
        while (start < end) {
            const char *key;
            int32_t klen;
            if (start > 0) {
                memcpy(buf + m->prefix_len, s + start, (size_t)(end - start));
                key = buf;
                klen = m->prefix_len + end - start;
            } else {
                key = s;
                klen = end;
            }
            found = tok_strmap_find(&m->vocab, key, klen);
            if (found) break;
            /* Step back one char. */
            end--;
            while (end > start && ((unsigned char)s[end] & 0xC0) == 0x80) end--;
        }
        if (!found) goto unknown;
        if (*n == cap) toks = *out = tok_grow(&c->a, toks, &cap, *n + 1, sizeof *toks);
        toks[(*n)++] = (tok_token){found->val, start, end, found->key, found->len};
        start = end;
    }
    return 0;
unknown:
    *n = 1;
    toks[0] = (tok_token){m->unk_id, 0, len, m->unk_token, m->unk_len};
    return 0;
}
