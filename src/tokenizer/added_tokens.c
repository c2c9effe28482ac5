/* Added tokens (AddedVocabulary): ids are assigned as the library does when
 * it deserializes tokenizer.json (an existing vocabulary id wins, otherwise
 * the next id after the model vocabulary). Tokens with normalized=false are
 * matched on the raw text first; the remaining pieces are normalized and
 * searched for the normalized=true tokens (in their normalized form). Both
 * searches are leftmost-longest, with single_word / lstrip / rstrip applied
 * to each match. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "tokenizer/tok_internal.h"

/* ------------------------------------------------------------- matcher */

typedef struct cand {
    int32_t idx, len;
} cand;

static int cmp_len_desc(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->idx - y->idx;
}

static int build_matcher(tok_matcher *mt, const tok_added_vocab *av, int normalized)
{
    memset(mt, 0, sizeof *mt);
    int counts[256] = {0};
    for (int i = 0; i < av->n; i++) {
        const tok_added_token *t = &av->toks[i];
        if (t->id < 0 || !!t->normalized != normalized || t->match_len == 0) continue;
        counts[(unsigned char)t->match[0]]++;
    }
    for (int b = 0; b < 256; b++) {
        if (!counts[b]) continue;
        cand *cs = malloc(sizeof *cs * (size_t)counts[b]);
        mt->by_byte[b] = malloc(sizeof *mt->by_byte[b] * (size_t)(counts[b] + 1));
        if (!cs || !mt->by_byte[b]) {
            free(cs);
            return -1;
        }
        int k = 0;
        for (int i = 0; i < av->n; i++) {
            const tok_added_token *t = &av->toks[i];
            if (t->id < 0 || !!t->normalized != normalized || t->match_len == 0) continue;
            if ((unsigned char)t->match[0] == b) cs[k++] = (cand){i, t->match_len};
        }
        qsort(cs, (size_t)k, sizeof *cs, cmp_len_desc);
        for (int i = 0; i < k; i++) mt->by_byte[b][i] = cs[i].idx;
        mt->by_byte[b][k] = -1;
        free(cs);
        mt->any = 1;
    }
    return 0;
}

static void free_matcher(tok_matcher *mt)
{
    for (int b = 0; b < 256; b++) free(mt->by_byte[b]);
    memset(mt, 0, sizeof *mt);
}

/* Leftmost-longest match at or after `from`: returns the token index. */
static int next_match(const tok_matcher *mt, const tok_added_vocab *av, const char *s, int32_t len, int32_t from,
                      int32_t *ms, int32_t *me)
{
    for (int32_t p = from; p < len; p++) {
        const int32_t *list = mt->by_byte[(unsigned char)s[p]];
        if (!list) continue;
        for (; *list >= 0; list++) {
            const tok_added_token *t = &av->toks[*list];
            if (p + t->match_len <= len && !memcmp(s + p, t->match, (size_t)t->match_len)) {
                *ms = p;
                *me = p + t->match_len;
                return *list;
            }
        }
    }
    return -1;
}

/* --------------------------------------------------------- word checks */

static int ends_with_word(const char *s, int32_t end)
{
    if (end <= 0) return 0;
    int32_t i = end - 1;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
    uint32_t cp;
    tok_utf8_decode(s + i, &cp);
    return tok_is_word(cp);
}

static int starts_with_word(const char *s, int32_t start, int32_t len)
{
    if (start >= len) return 0;
    uint32_t cp;
    tok_utf8_decode(s + start, &cp);
    return tok_is_word(cp);
}

/* Start of the trailing whitespace run of s[0..end). */
static int32_t trailing_space_start(const char *s, int32_t end)
{
    int32_t i = end;
    while (i > 0) {
        int32_t j = i - 1;
        while (j > 0 && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
        uint32_t cp;
        tok_utf8_decode(s + j, &cp);
        if (!tok_is_whitespace(cp)) break;
        i = j;
    }
    return i;
}

/* End of the leading whitespace run of s[start..len). */
static int32_t leading_space_end(const char *s, int32_t start, int32_t len)
{
    int32_t i = start;
    while (i < len) {
        uint32_t cp;
        int l = tok_utf8_decode(s + i, &cp);
        if (!tok_is_whitespace(cp)) break;
        i += l;
    }
    return i;
}

/* AddedVocabulary::split_with_indices on one normalized piece. */
static void split_with_tokens(tok_ctx *c, const tok_added_vocab *av, const tok_matcher *mt, const tok_nstr *ns,
                              tok_splits *out)
{
    const char *s = ns->s;
    int32_t len = ns->len;
    if (len == 0) return;
    if (!mt->any) {
        /* Still a slice: its original start is that of its first char,
         * which Metaspace's prepend_scheme "first" looks at. */
        tok_nstr whole;
        if (!tok_ns_slice(c, ns, 0, len, &whole)) tok_splits_push(c, out, &whole);
        return;
    }
    int32_t start_offset = 0, from = 0, ms, me;
    int idx;
    while ((idx = next_match(mt, av, s, len, from, &ms, &me)) >= 0) {
        from = me;
        const tok_added_token *t = &av->toks[idx];
        int32_t start = ms, stop = me;
        if (t->single_word) {
            int start_space = start == 0 || !ends_with_word(s, start);
            int stop_space = stop == len || !starts_with_word(s, stop, len);
            if (!start_space || !stop_space) continue;
        }
        if (t->lstrip) {
            int32_t ns_start = trailing_space_start(s, start);
            start = ns_start > start_offset ? ns_start : start_offset;
        }
        if (t->rstrip) stop = leading_space_end(s, stop, len);
        tok_nstr piece;
        if (start_offset < start && !tok_ns_slice(c, ns, start_offset, start, &piece))
            tok_splits_push(c, out, &piece);
        if (stop > start && !tok_ns_slice(c, ns, start, stop, &piece)) {
            tok_splits_push(c, out, &piece);
            tok_split *sp = &out->v[out->n - 1];
            sp->tokenized = 1;
            sp->ntoks = 1;
            sp->toks = tok_alloc(&c->a, sizeof *sp->toks);
            sp->toks[0] = (tok_token){t->id, 0, piece.len, piece.s, piece.len};
        }
        start_offset = stop;
    }
    tok_nstr piece;
    if (start_offset < len && !tok_ns_slice(c, ns, start_offset, len, &piece)) tok_splits_push(c, out, &piece);
}

int tok_extract_and_normalize(tok_ctx *c, const iv_tokenizer *tok, const char *text, int32_t len, tok_splits *out)
{
    const tok_added_vocab *av = &tok->added;
    tok_nstr whole;
    tok_ns_from(c, &whole, text, len);
    tok_splits raw = {0};
    split_with_tokens(c, av, &av->raw, &whole, &raw);
    out->n = 0;
    for (int i = 0; i < raw.n; i++) {
        if (raw.v[i].tokenized) {
            out->v = tok_grow(&c->a, out->v, &out->cap, out->n + 1, sizeof *out->v);
            out->v[out->n++] = raw.v[i];
            continue;
        }
        tok_nstr ns = raw.v[i].ns;
        if (tok->normalizer && tok_normalize(c, tok->normalizer, &ns)) return -1;
        split_with_tokens(c, av, &av->norm, &ns, out);
    }
    return 0;
}

/* ------------------------------------------------------------- loading */

static int same_props(const tok_added_token *a, const tok_added_token *b)
{
    return a->len == b->len && !memcmp(a->content, b->content, (size_t)a->len) && a->special == b->special &&
           a->single_word == b->single_word && a->lstrip == b->lstrip && a->rstrip == b->rstrip &&
           a->normalized == b->normalized;
}

static int normalize_content(const iv_tokenizer *tok, tok_added_token *t, iv_err *err)
{
    t->match = t->content;
    t->match_len = t->len;
    t->decode_str = t->content;
    t->decode_len = t->len;
    if (!t->normalized || !tok->normalizer) return 0;
    tok_ctx c;
    if (tok_ctx_init(&c, tok, err)) return -1;
    if (setjmp(c.oom)) {
        tok_ctx_free(&c);
        return iv_errf(err, IV_E_NOMEM, "out of memory normalizing added token");
    }
    tok_nstr ns;
    tok_ns_from(&c, &ns, t->content, t->len);
    int rc = tok_normalize(&c, tok->normalizer, &ns);
    if (!rc && (ns.len != t->len || memcmp(ns.s, t->content, (size_t)ns.len))) {
        char *norm = tok_xmemdup(ns.s, (size_t)ns.len);
        if (!norm) rc = iv_errf(err, IV_E_NOMEM, "out of memory");
        else {
            t->match = t->decode_str = norm;
            t->match_len = t->decode_len = ns.len;
        }
    }
    tok_ctx_free(&c);
    return rc;
}

int tok_load_added_tokens(const cJSON *arr, iv_tokenizer *tok, iv_err *err)
{
    tok_added_vocab *av = &tok->added;
    int n = arr ? cJSON_GetArraySize(arr) : 0;
    if (arr && !cJSON_IsArray(arr)) return iv_errf(err, IV_E_FORMAT, "tokenizer.json: \"added_tokens\" must be an array");
    av->toks = calloc((size_t)(n ? n : 1), sizeof *av->toks);
    if (!av->toks || tok_strmap_init(&av->by_content, n) || tok_strmap_init(&av->special, n) ||
        tok_u64map_init(&av->by_id, n))
        return iv_errf(err, IV_E_NOMEM, "out of memory loading added_tokens");
    int32_t next_id = tok->model.vocab_size;
    const cJSON *it;
    int k = 0;
    cJSON_ArrayForEach(it, arr)
    {
        char what[64];
        snprintf(what, sizeof what, "added_tokens[%d]", k++);
        const char *content = iv_json_str(it, "content", NULL);
        if (!content) return iv_errf(err, IV_E_FORMAT, "%s: \"content\" must be a string", what);
        tok_added_token t = {0};
        int special = 0, single = 0, lstrip = 0, rstrip = 0, normalized = 0;
        if (iv_json_bool_chk(it, "special", 0, &special, what, err) ||
            iv_json_bool_chk(it, "single_word", 0, &single, what, err) ||
            iv_json_bool_chk(it, "lstrip", 0, &lstrip, what, err) ||
            iv_json_bool_chk(it, "rstrip", 0, &rstrip, what, err) ||
            iv_json_bool_chk(it, "normalized", !special, &normalized, what, err))
            return -1;
        char *ctmp;
        content = tok_json_bytes(content, tok->model.nul_ph, &t.len, &ctmp);
        if (!content) return iv_errf(err, IV_E_NOMEM, "out of memory");
        t.content = (char *)content;
        t.special = (uint8_t)special;
        t.single_word = (uint8_t)single;
        t.lstrip = (uint8_t)lstrip;
        t.rstrip = (uint8_t)rstrip;
        t.normalized = (uint8_t)normalized;
        if (t.len == 0 || (tok_strmap_get(&av->by_content, content, t.len) >= 0 &&
                           same_props(&av->toks[tok_strmap_get(&av->by_content, content, t.len)], &t))) {
            free(ctmp);
            continue;
        }
        int32_t existing = tok_strmap_get(&av->by_content, content, t.len);

        int32_t id = -1;
        if (existing >= 0) id = av->toks[existing].id;
        if (id < 0) id = tok_model_token_to_id(&tok->model, content, t.len);
        if (id < 0) id = next_id++;
        t.id = id;
        t.content = tok_xmemdup(content, (size_t)t.len);
        free(ctmp);
        if (!t.content) return iv_errf(err, IV_E_NOMEM, "out of memory");
        if (normalize_content(tok, &t, err)) {
            free(t.content);
            return iv_err_prefix(err, "%s: ", what);
        }
        /* One entry per id: a later token with the same id replaces it. */
        uint64_t slot;
        int idx;
        if (tok_u64map_get(&av->by_id, (uint64_t)(uint32_t)id, &slot)) {
            idx = (int)slot;
            tok_added_token *old = &av->toks[idx];
            if (old->match != old->content) free(old->match);
            free(old->content);
        } else {
            idx = av->n++;
            if (tok_u64map_put(&av->by_id, (uint64_t)(uint32_t)id, (uint64_t)idx))
                return iv_errf(err, IV_E_NOMEM, "out of memory");
        }
        av->toks[idx] = t;
        if (!tok_strmap_put(&av->by_content, t.content, t.len, idx)) return iv_errf(err, IV_E_NOMEM, "out of memory");
        if (t.special && !tok_strmap_put(&av->special, t.content, t.len, 1))
            return iv_errf(err, IV_E_NOMEM, "out of memory");
    }
    /* by_content maps to the entry index; keep only entries whose id it names. */
    if (build_matcher(&av->raw, av, 0) || build_matcher(&av->norm, av, 1))
        return iv_errf(err, IV_E_NOMEM, "out of memory building the added-token matcher");
    return 0;
}

void tok_free_added(tok_added_vocab *av)
{
    for (int i = 0; i < av->n; i++) {
        if (av->toks[i].match != av->toks[i].content) free(av->toks[i].match);
        free(av->toks[i].content);
    }
    free(av->toks);
    tok_strmap_free(&av->by_content);
    tok_strmap_free(&av->special);
    tok_u64map_free(&av->by_id);
    free_matcher(&av->raw);
    free_matcher(&av->norm);
    memset(av, 0, sizeof *av);
}
