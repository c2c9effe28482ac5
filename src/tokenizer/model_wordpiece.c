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
    /* Longest-match tries: every key as is (first piece of a word), and the
     * keys that start with the prefix, without it (following pieces). Values
     * are vocab entry indices (key and id). */
    if (tok_trie_init(&m->trie, m->vocab.n * 4) || tok_trie_init(&m->trie2, m->vocab.n * 2))
        return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
    for (int i = 0; i < m->vocab.n; i++) {
        const tok_strmap_ent *e = &m->vocab.ents[i];
        if (tok_trie_insert(&m->trie, e->key, e->len, i))
            return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
        if (e->len >= m->prefix_len && !memcmp(e->key, m->prefix, (size_t)m->prefix_len) &&
            tok_trie_insert(&m->trie2, e->key + m->prefix_len, e->len - m->prefix_len, i))
            return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
    }
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
    /* Greedy longest match first: the longest vocabulary entry that prefixes
     * the rest of the word (with the continuing prefix after the first piece). */
    int32_t start = 0;
    while (start < len) {
        const tok_trie *t = start == 0 ? &m->trie : &m->trie2;
        int32_t node = 0, best_end = -1, best = -1;
        for (int32_t k = start; k < len; k++) {
            node = tok_trie_child(t, node, (unsigned char)s[k]);
            if (node < 0) break;
            if (t->term[node] >= 0) {
                best = t->term[node];
                best_end = k + 1;
            }
        }
        if (best < 0) goto unknown;
        const tok_strmap_ent *e = &m->vocab.ents[best];
        if (*n == cap) toks = *out = tok_grow(&c->a, toks, &cap, *n + 1, sizeof *toks);
        toks[(*n)++] = (tok_token){e->val, start, best_end, e->key, e->len};
        start = best_end;
    }
    return 0;
unknown:
    *n = 1;
    toks[0] = (tok_token){m->unk_id, 0, len, m->unk_token, m->unk_len};
    return 0;
}
