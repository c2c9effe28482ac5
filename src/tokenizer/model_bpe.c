/* BPE: each pre-token starts as one symbol per char (with the subword
 * prefix/suffix, byte fallback and unknown-token fusion of the library),
 * then merges are applied lowest rank first with a binary heap keyed by
 * (rank, position): O(n log n) per word. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "tokenizer/tok_internal.h"

static int merge_part(const char *s, size_t n, const tok_model *m, int32_t *id, const char *what, int rank,
                      iv_err *err)
{
    *id = tok_strmap_get(&m->vocab, s, (int32_t)n);
    if (*id < 0)
        return iv_errf(err, IV_E_FORMAT, "%s: merge %d references \"%.*s\", which is not in the vocabulary", what,
                       rank, (int)n, s);
    return 0;
}

static int add_merge(tok_model *m, const char *a, size_t alen, const char *b, size_t blen, int rank, char *buf,
                     const char *what, iv_err *err)
{
    int32_t ia, ib, inew;
    if (merge_part(a, alen, m, &ia, what, rank, err) || merge_part(b, blen, m, &ib, what, rank, err)) return -1;
    /* The merged token drops the continuing-subword prefix of the right part. */
    size_t plen = m->has_prefix ? (size_t)m->prefix_len : 0;
    if (blen < plen)
        return iv_errf(err, IV_E_FORMAT, "%s: merge %d: \"%.*s\" is shorter than continuing_subword_prefix", what,
                       rank, (int)blen, b);
    memcpy(buf, a, alen);
    memcpy(buf + alen, b + plen, blen - plen);
    size_t nlen = alen + blen - plen;
    inew = tok_strmap_get(&m->vocab, buf, (int32_t)nlen);
    if (inew < 0)
        return iv_errf(err, IV_E_FORMAT, "%s: merge %d produces \"%.*s\", which is not in the vocabulary", what,
                       rank, (int)nlen, buf);
    if (tok_u64map_put(&m->merges, (uint64_t)(uint32_t)ia << 32 | (uint32_t)ib,
                       (uint64_t)(uint32_t)rank << 32 | (uint32_t)inew))
        return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
    return 0;
}

int tok_load_bpe(const cJSON *j, tok_model *m, iv_err *err)
{
    const char *what = "model (BPE)";
    m->kind = TOK_M_BPE;
    if (tok_load_vocab_object(cJSON_GetObjectItemCaseSensitive(j, "vocab"), m, what, err)) return -1;
    if (tok_json_opt_string(j, "unk_token", &m->unk_token, &m->unk_len, what, err) ||
        tok_json_opt_string(j, "continuing_subword_prefix", &m->prefix, &m->prefix_len, what, err) ||
        tok_json_opt_string(j, "end_of_word_suffix", &m->suffix, &m->suffix_len, what, err) ||
        iv_json_bool_chk(j, "fuse_unk", 0, &m->fuse_unk, what, err) ||
        iv_json_bool_chk(j, "byte_fallback", 0, &m->byte_fallback, what, err) ||
        iv_json_bool_chk(j, "ignore_merges", 0, &m->ignore_merges, what, err))
        return -1;
    double dropout = 0;
    if (iv_json_num_chk(j, "dropout", 0, &dropout, what, err)) return -1;
    if (dropout < 0 || dropout > 1) return iv_errf(err, IV_E_FORMAT, "%s: \"dropout\" must be in [0, 1]", what);
    /* dropout only matters for training-time sampling; encoding ignores it. */
    m->has_prefix = m->prefix != NULL;
    m->has_suffix = m->suffix != NULL;
    if (m->unk_token) {
        m->unk_id = tok_strmap_get(&m->vocab, m->unk_token, m->unk_len);
        if (m->unk_id < 0)
            return iv_errf(err, IV_E_FORMAT, "%s: unk_token \"%s\" is not in the vocabulary", what, m->unk_token);
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        m->byte_ids[b] = tok_strmap_get(&m->vocab, name, 6);
    }

    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(j, "merges");
    if (!cJSON_IsArray(merges)) return iv_errf(err, IV_E_FORMAT, "%s: \"merges\" must be an array", what);
    int n = cJSON_GetArraySize(merges);
    if (tok_u64map_init(&m->merges, n)) return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
    size_t maxlen = 0;
    for (int i = 0; i < m->vocab.n; i++)
        if ((size_t)m->vocab.ents[i].len > maxlen) maxlen = (size_t)m->vocab.ents[i].len;
    char *buf = malloc(maxlen * 2 + 16);
    if (!buf) return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
    int rank = 0, rc = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, merges)
    {
        if (cJSON_IsString(it)) {
            int32_t slen;
            char *tmp;
            const char *s = tok_json_bytes(it->valuestring, m->nul_ph, &slen, &tmp);
            if (!s) {
                rc = iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
                break;
            }
            if (!strncmp(s, "#version", 8)) {
                free(tmp);
                continue;
            }
            const char *sp = memchr(s, ' ', (size_t)slen);
            if (!sp || memchr(sp + 1, ' ', (size_t)(s + slen - sp - 1))) {
                rc = iv_errf(err, IV_E_FORMAT, "%s: merge %d (\"%s\") must be two tokens separated by one space",
                             what, rank, it->valuestring);
                free(tmp);
                break;
            }
            size_t alen = (size_t)(sp - s), blen = (size_t)(s + slen - sp - 1);
            if (alen + blen > maxlen * 2)
                rc = iv_errf(err, IV_E_FORMAT, "%s: merge %d (\"%s\") is longer than any vocabulary entry", what,
                             rank, it->valuestring);
            else rc = add_merge(m, s, alen, sp + 1, blen, rank, buf, what, err);
            free(tmp);
        } else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsString(it->child) &&
                   cJSON_IsString(it->child->next)) {
            int32_t al, bl;
            char *ta, *tb;
            const char *a = tok_json_bytes(it->child->valuestring, m->nul_ph, &al, &ta);
            const char *b = tok_json_bytes(it->child->next->valuestring, m->nul_ph, &bl, &tb);
            if (!a || !b) rc = iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
            else if ((size_t)(al + bl) > maxlen * 2)
                rc = iv_errf(err, IV_E_FORMAT, "%s: merge %d is longer than any vocabulary entry", what, rank);
            else rc = add_merge(m, a, (size_t)al, b, (size_t)bl, rank, buf, what, err);
            free(ta);
            free(tb);
        } else {
            rc = iv_errf(err, IV_E_FORMAT, "%s: merge %d must be \"a b\" or [\"a\", \"b\"]", what, rank);
        }
        if (rc) break;
        rank++;
    }
    free(buf);
    return rc;
}

/* ---------------------------------------------------------------- encode */

typedef struct sym {
    int32_t c;
    int32_t prev, next;
    int32_t len;
} sym;

typedef struct heap_item {
    uint32_t rank;
    int32_t pos;
    int32_t new_id;
} heap_item;

static int item_less(heap_item a, heap_item b)
{
    return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos;
}

static void heap_push(heap_item *h, int *n, heap_item x)
{
    int i = (*n)++;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!item_less(x, h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

static heap_item heap_pop(heap_item *h, int *n)
{
    heap_item top = h[0];
    heap_item x = h[--(*n)];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1;
        if (l >= *n) break;
        int r = l + 1, m = (r < *n && item_less(h[r], h[l])) ? r : l;
        if (!item_less(h[m], x)) break;
        h[i] = h[m];
        i = m;
    }
    h[i] = x;
    return top;
}

static void add_sym(sym *w, int *n, int32_t c, int32_t len)
{
    int k = *n;
    if (k > 0) w[k - 1].next = k;
    w[k] = (sym){c, k - 1, -1, len};
    (*n)++;
}

static int lookup_merge(const tok_model *m, int32_t a, int32_t b, uint32_t *rank, int32_t *new_id)
{
    uint64_t v;
    if (!tok_u64map_get(&m->merges, (uint64_t)(uint32_t)a << 32 | (uint32_t)b, &v)) return 0;
    *rank = (uint32_t)(v >> 32);
    *new_id = (int32_t)(uint32_t)v;
    return 1;
}

int tok_bpe_tokenize(tok_ctx *c, const tok_model *m, const char *s, int32_t len, tok_token **out, int32_t *n)
{
    *n = 0;
    *out = NULL;
    if (len == 0) return 0;
    if (m->ignore_merges) {
        const tok_strmap_ent *e = tok_strmap_find(&m->vocab, s, len);
        if (e) {
            tok_token *t = tok_alloc(&c->a, sizeof *t);
            *t = (tok_token){e->val, 0, len, e->key, e->len};
            *out = t;
            *n = 1;
            return 0;
        }
    }
    /* Worst case: byte fallback of prefix + char + suffix for every char. */
    int cap = len * (1 + (m->has_prefix ? m->prefix_len : 0) + (m->has_suffix ? m->suffix_len : 0)) + 1;
    sym *w = tok_alloc(&c->a, sizeof *w * (size_t)cap);
    int nw = 0;
    char *buf = tok_alloc(&c->a, (size_t)(m->prefix_len + 4 + m->suffix_len + 1));
    int have_unk = 0;
    int32_t unk_id = 0, unk_len = 0;
    for (int32_t i = 0; i < len;) {
        int l = tok_utf8_len((unsigned char)s[i]);
        int is_first = i == 0, is_last = i + l >= len;
        int32_t blen = 0;
        if (!is_first && m->has_prefix) {
            memcpy(buf, m->prefix, (size_t)m->prefix_len);
            blen = m->prefix_len;
        }
        memcpy(buf + blen, s + i, (size_t)l);
        blen += l;
        if (is_last && m->has_suffix) {
            memcpy(buf + blen, m->suffix, (size_t)m->suffix_len);
            blen += m->suffix_len;
        }
        int32_t id = tok_strmap_get(&m->vocab, buf, blen);
        if (id >= 0) {
            if (have_unk) {
                add_sym(w, &nw, unk_id, unk_len);
                have_unk = 0;
            }
            add_sym(w, &nw, id, l);
        } else {
            int done = 0;
            if (m->byte_fallback) {
                int all = 1;
                for (int32_t k = 0; k < blen && all; k++) all = m->byte_ids[(unsigned char)buf[k]] >= 0;
                if (all) {
                    /* The pending unknown token is not flushed here (library behaviour). */
                    for (int32_t k = 0; k < blen; k++) add_sym(w, &nw, m->byte_ids[(unsigned char)buf[k]], 1);
                    done = 1;
                }
            }
            if (!done && m->unk_token) {
                if (have_unk && m->fuse_unk) {
                    unk_len += l;
                } else {
                    if (have_unk) add_sym(w, &nw, unk_id, unk_len);
                    unk_id = m->unk_id;
                    unk_len = l;
                    have_unk = 1;
                }
            }
        }
        i += l;
    }
    if (have_unk) add_sym(w, &nw, unk_id, unk_len);

    /* Merge, lowest rank first, leftmost on ties. */
    if (nw > 1) {
        int hcap = nw * 2 + 8, hn = 0;
        heap_item *h = tok_alloc(&c->a, sizeof *h * (size_t)hcap);
        for (int k = 0; k + 1 < nw; k++) {
            uint32_t rank;
            int32_t nid;
            if (lookup_merge(m, w[k].c, w[k + 1].c, &rank, &nid)) heap_push(h, &hn, (heap_item){rank, k, nid});
        }
        while (hn > 0) {
            heap_item top = heap_pop(h, &hn);
            sym *cur = &w[top.pos];
            if (cur->len == 0 || cur->next == -1) continue;
            int32_t next_pos = cur->next;
            sym right = w[next_pos];
            uint32_t rank;
            int32_t nid;
            if (!lookup_merge(m, cur->c, right.c, &rank, &nid) || nid != top.new_id) continue;
            cur->c = top.new_id;
            cur->len += right.len;
            cur->next = right.next;
            w[next_pos].len = 0;
            if (right.next > -1 && right.next < nw) w[right.next].prev = top.pos;
            if (hn + 2 > hcap) h = tok_grow(&c->a, h, &hcap, hn + 2, sizeof *h);
            if (cur->prev >= 0 && lookup_merge(m, w[cur->prev].c, cur->c, &rank, &nid))
                heap_push(h, &hn, (heap_item){rank, cur->prev, nid});
            if (cur->next >= 0 && cur->next < nw && lookup_merge(m, cur->c, w[cur->next].c, &rank, &nid))
                heap_push(h, &hn, (heap_item){rank, top.pos, nid});
        }
    }

    tok_token *toks = tok_alloc(&c->a, sizeof *toks * (size_t)(nw ? nw : 1));
    int32_t pos = 0, k = 0;
    for (int i = 0; i < nw; i++) {
        if (w[i].len == 0) continue;
        int32_t slen = 0;
        const char *str = tok_model_id_to_token(m, w[i].c, &slen);
        toks[k++] = (tok_token){w[i].c, pos, pos + w[i].len, str ? str : "", str ? slen : 0};
        pos += w[i].len;
    }
    *out = toks;
    *n = k;
    return 0;
}
