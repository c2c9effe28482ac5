/* The model section of tokenizer.json: type dispatch (including the older
 * files without a "type" field), the shared token <-> id tables, and the
 * per-model loaders declared in model_*.c. */
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "tokenizer/tok_internal.h"

int tok_load_wordpiece(const cJSON *j, tok_model *m, iv_err *err);
int tok_load_bpe(const cJSON *j, tok_model *m, iv_err *err);
int tok_load_unigram(const cJSON *j, tok_model *m, iv_err *err);
int tok_load_wordlevel(const cJSON *j, tok_model *m, iv_err *err);
int tok_wordpiece_tokenize(tok_ctx *c, const tok_model *m, const char *s, int32_t len, tok_token **out, int32_t *n);
int tok_bpe_tokenize(tok_ctx *c, const tok_model *m, const char *s, int32_t len, tok_token **out, int32_t *n);
int tok_unigram_tokenize(tok_ctx *c, const tok_model *m, const char *s, int32_t len, tok_token **out, int32_t *n);
int tok_wordlevel_tokenize(tok_ctx *c, const tok_model *m, const char *s, int32_t len, tok_token **out, int32_t *n);

/* Largest token id accepted; the id -> token table is dense. */
#define TOK_MAX_ID 50000000

/* Reads {"token": id, ...} into m->vocab and the id -> token table. */
int tok_load_vocab_object(const cJSON *v, tok_model *m, const char *what, iv_err *err)
{
    if (!cJSON_IsObject(v)) return iv_errf(err, IV_E_FORMAT, "%s: \"vocab\" must be an object of token: id", what);
    int n = cJSON_GetArraySize(v);
    if (tok_strmap_init(&m->vocab, n)) return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
    int64_t max_id = -1;
    const cJSON *it;
    cJSON_ArrayForEach(it, v)
    {
        if (!iv_json_is_integer(it) || it->valuedouble < 0 || it->valuedouble >= TOK_MAX_ID)
            return iv_errf(err, IV_E_FORMAT, "%s: vocab entry \"%s\" must have an id in [0, %d)", what,
                           it->string, TOK_MAX_ID);
        int32_t id = (int32_t)it->valuedouble, klen;
        char *tmp;
        const char *key = tok_json_bytes(it->string, m->nul_ph, &klen, &tmp);
        const char *stored = key ? tok_strmap_put(&m->vocab, key, klen, id) : NULL;
        free(tmp);
        if (!stored) return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
        if (id > max_id) max_id = id;
    }
    m->vocab_size = m->vocab.n;
    m->n_ids = (int32_t)(max_id + 1);
    m->id_str = calloc((size_t)(m->n_ids ? m->n_ids : 1), sizeof *m->id_str);
    m->id_len = calloc((size_t)(m->n_ids ? m->n_ids : 1), sizeof *m->id_len);
    if (!m->id_str || !m->id_len) return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
    for (int i = 0; i < m->vocab.n; i++) {
        const tok_strmap_ent *e = &m->vocab.ents[i];
        if (e->val < 0) continue;
        if (!m->id_str[e->val] || tok_strmap_get(&m->vocab, m->id_str[e->val], m->id_len[e->val]) != e->val) {
            m->id_str[e->val] = e->key;
            m->id_len[e->val] = e->len;
        }
    }
    return 0;
}

/* Optional string field: NULL when absent or null. */
int tok_json_opt_string(const cJSON *j, const char *key, char **out, int32_t *len, const char *what, iv_err *err)
{
    *out = NULL;
    if (len) *len = 0;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsString(v)) return iv_errf(err, IV_E_FORMAT, "%s: \"%s\" must be a string", what, key);
    *out = tok_xstrdup(v->valuestring);
    if (!*out) return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
    if (len) *len = (int32_t)strlen(v->valuestring);
    return 0;
}

int tok_load_model(const cJSON *j, tok_model *m, uint32_t nul_ph, iv_err *err)
{
    memset(m, 0, sizeof *m);
    m->nul_ph = nul_ph;
    m->unk_id = -1;
    for (int i = 0; i < 256; i++) m->byte_ids[i] = -1;
    if (!cJSON_IsObject(j)) return iv_errf(err, IV_E_FORMAT, "tokenizer.json: \"model\" must be an object");
    const char *type = tok_json_type(j);
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(j, "vocab");
    if (!type) {
        /* Older files have no "type": infer it the way the library does. */
        if (cJSON_GetObjectItemCaseSensitive(j, "merges")) type = "BPE";
        else if (cJSON_IsArray(vocab)) type = "Unigram";
        else if (cJSON_GetObjectItemCaseSensitive(j, "continuing_subword_prefix") ||
                 cJSON_GetObjectItemCaseSensitive(j, "max_input_chars_per_word"))
            type = "WordPiece";
        else type = "WordLevel";
    }
    if (!vocab) return iv_errf(err, IV_E_FORMAT, "model (%s): missing \"vocab\"", type);
    if (!strcmp(type, "WordPiece")) return tok_load_wordpiece(j, m, err);
    if (!strcmp(type, "BPE")) return tok_load_bpe(j, m, err);
    if (!strcmp(type, "Unigram")) return tok_load_unigram(j, m, err);
    if (!strcmp(type, "WordLevel")) return tok_load_wordlevel(j, m, err);
    return iv_errf(err, IV_E_UNSUPPORTED, "model: unknown type \"%s\" (expected BPE, WordPiece, WordLevel or Unigram)",
                   type);
}

void tok_free_model(tok_model *m)
{
    tok_strmap_free(&m->vocab);
    free(m->id_str);
    free(m->id_len);
    free(m->unk_token);
    free(m->prefix);
    free(m->suffix);
    tok_u64map_free(&m->merges);
    free(m->scores);
    tok_trie_free(&m->trie);
    tok_trie_free(&m->trie2);
    memset(m, 0, sizeof *m);
}

int tok_model_tokenize(tok_ctx *c, const tok_model *m, const char *s, int32_t len, tok_token **out, int32_t *n)
{
    switch (m->kind) {
    case TOK_M_WORDPIECE:
        return tok_wordpiece_tokenize(c, m, s, len, out, n);
    case TOK_M_BPE:
        return tok_bpe_tokenize(c, m, s, len, out, n);
    case TOK_M_UNIGRAM:
        return tok_unigram_tokenize(c, m, s, len, out, n);
    case TOK_M_WORDLEVEL:
        return tok_wordlevel_tokenize(c, m, s, len, out, n);
    default:
        return iv_errf(c->err, IV_E_INTERNAL, "unknown model kind %d", m->kind);
    }
}

int32_t tok_model_token_to_id(const tok_model *m, const char *s, int32_t len)
{
    return tok_strmap_get(&m->vocab, s, len);
}

const char *tok_model_id_to_token(const tok_model *m, int32_t id, int32_t *len)
{
    if (id < 0 || id >= m->n_ids || !m->id_str[id]) return NULL;
    *len = m->id_len[id];
    return m->id_str[id];
}
