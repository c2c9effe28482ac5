/* Unigram (SentencePiece): Viterbi over the lattice of vocabulary pieces
 * found with a byte trie, unknown chars scored min_score - 10 and fused
 * into one piece, optional byte fallback for pieces not in the vocabulary.
 * Mirrors Unigram::encode_optimized, including its tie-breaking. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "tokenizer/tok_internal.h"

#define UNK_PENALTY 10.0

int tok_load_unigram(const cJSON *j, tok_model *m, iv_err *err)
{
    const char *what = "model (Unigram)";
    m->kind = TOK_M_UNIGRAM;
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(j, "vocab");
    if (!cJSON_IsArray(vocab)) return iv_errf(err, IV_E_FORMAT, "%s: \"vocab\" must be an array of [piece, score]", what);
    int n = cJSON_GetArraySize(vocab);
    int64_t unk = -1;
    if (iv_json_int_chk(j, "unk_id", -1, &unk, what, err) || iv_json_bool_chk(j, "byte_fallback", 0, &m->byte_fallback, what, err))
        return -1;
    if (unk >= 0 && (n == 0 || unk >= n))
        return iv_errf(err, IV_E_FORMAT, "%s: unk_id %lld is outside the vocabulary (size %d)", what, (long long)unk, n);
    m->unk_id = (int32_t)unk;
    m->vocab_size = n;
    m->n_ids = n;
    m->scores = malloc(sizeof *m->scores * (size_t)(n ? n : 1));
    m->id_str = calloc((size_t)(n ? n : 1), sizeof *m->id_str);
    m->id_len = calloc((size_t)(n ? n : 1), sizeof *m->id_len);
    if (!m->scores || !m->id_str || !m->id_len || tok_strmap_init(&m->vocab, n))
        return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
    m->min_score = 1.0 / 0.0;
    int id = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, vocab)
    {
        if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2 || !cJSON_IsString(it->child) ||
            !cJSON_IsNumber(it->child->next))
            return iv_errf(err, IV_E_FORMAT, "%s: vocab entry %d must be [piece, score]", what, id);
        int32_t plen;
        char *tmp;
        const char *piece = tok_json_bytes(it->child->valuestring, m->nul_ph, &plen, &tmp);
        double score = it->child->next->valuedouble;
        const char *key = piece ? tok_strmap_put(&m->vocab, piece, plen, id) : NULL;
        free(tmp);
        if (!key) return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
        m->id_str[id] = key;
        m->id_len[id] = plen;
        m->scores[id] = score;
        if (score < m->min_score) m->min_score = score;
        id++;
    }
    /* Trie over all pieces; a terminal node holds the id the piece maps to
     * (the last occurrence when a piece repeats, as the library's map). */
    if (tok_trie_init(&m->trie, n * 2 + 16))
        return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
    for (int i = 0; i < n; i++) {
        if (m->id_len[i] == 0) continue;
        if (tok_trie_insert(&m->trie, m->id_str[i], m->id_len[i],
                            tok_strmap_get(&m->vocab, m->id_str[i], m->id_len[i])))
            return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        m->byte_ids[b] = tok_strmap_get(&m->vocab, name, 6);
    }
    return 0;
}

typedef struct best_node {
    double score;
    int32_t start; /* -1: unreached */
    int32_t id;
} best_node;

static void push_tok(tok_ctx *c, tok_token **v, int32_t *n, int32_t *cap, tok_token t)
{
    if (*n == *cap) *v = tok_grow(&c->a, *v, cap, *n + 1, sizeof **v);
    (*v)[(*n)++] = t;
}

int tok_unigram_tokenize(tok_ctx *c, const tok_model *m, const char *s, int32_t len, tok_token **out, int32_t *n)
{
    *n = 0;
    *out = NULL;
    if (len == 0) return 0;
    double unk_score = m->min_score - UNK_PENALTY;
    best_node *best = tok_alloc(&c->a, sizeof *best * (size_t)(len + 1));
    for (int32_t i = 0; i <= len; i++) best[i] = (best_node){0.0, -1, 0};
    for (int32_t start = 0; start < len;) {
        double base = best[start].score;
        int mblen = tok_utf8_len((unsigned char)s[start]);
        int has_single = 0;
        int32_t node = 0;
        for (int32_t k = start; k < len; k++) {
            node = tok_trie_child(&m->trie, node, (unsigned char)s[k]);
            if (node < 0) break;
            int32_t id = m->trie.term[node];
            if (id < 0) continue;
            int32_t end = k + 1;
            double cand = m->scores[id] + base;
            best_node *t = &best[end];
            if (t->start < 0 || cand > t->score) {
                t->score = cand;
                t->start = start;
                t->id = id;
            }
            if (end - start == mblen) has_single = 1;
        }
        if (!has_single) {
            if (m->unk_id < 0)
                return iv_errf(c->err, IV_E_INVALID,
                               "Unigram: no piece covers \"%.*s\" and the model has no unk_id", mblen, s + start);
            best_node *t = &best[start + mblen];
            double cand = unk_score + base;
            if (t->start < 0 || cand > t->score) {
                t->score = cand;
                t->start = start;
                t->id = m->unk_id;
            }
        }
        start += mblen;
    }

    /* Walk back; consecutive unknown pieces fuse into one string. Pieces
     * are collected in reverse as (start, end, id); a fused unknown run has
     * id -1 and is looked up as a string, as the library does. */
    int32_t pcap = 16, pn = 0;
    int32_t *pieces = tok_alloc(&c->a, sizeof *pieces * 3 * (size_t)pcap);
    int32_t end = len, unk_end = -1;
    while (end > 0) {
        best_node *b = &best[end];
        int32_t st = b->start < 0 ? 0 : b->start;
        if (pn + 2 > pcap) pieces = tok_grow(&c->a, pieces, &pcap, pn + 2, sizeof *pieces * 3);
        if (b->id == m->unk_id) {
            if (unk_end < 0) unk_end = end;
        } else {
            if (unk_end >= 0) {
                pieces[3 * pn] = end;
                pieces[3 * pn + 1] = unk_end;
                pieces[3 * pn + 2] = -1;
                pn++;
                unk_end = -1;
            }
            pieces[3 * pn] = st;
            pieces[3 * pn + 1] = end;
            pieces[3 * pn + 2] = b->id;
            pn++;
        }
        end = st;
    }
    if (unk_end >= 0) {
        if (pn + 1 > pcap) pieces = tok_grow(&c->a, pieces, &pcap, pn + 1, sizeof *pieces * 3);
        pieces[3 * pn] = 0;
        pieces[3 * pn + 1] = unk_end;
        pieces[3 * pn + 2] = -1;
        pn++;
    }

    int32_t tcap = pn + 4, tn = 0;
    tok_token *toks = tok_alloc(&c->a, sizeof *toks * (size_t)tcap);
    for (int32_t p = pn - 1; p >= 0; p--) {
        int32_t ps = pieces[3 * p], pe = pieces[3 * p + 1], plen = pe - ps;
        int32_t id = pieces[3 * p + 2] >= 0 ? pieces[3 * p + 2] : tok_strmap_get(&m->vocab, s + ps, plen);
        if (id < 0 && m->byte_fallback) {
            int all = 1;
            for (int32_t k = ps; k < pe && all; k++) all = m->byte_ids[(unsigned char)s[k]] >= 0;
            if (all) {
                for (int32_t k = ps; k < pe; k++) {
                    int32_t bid = m->byte_ids[(unsigned char)s[k]];
                    push_tok(c, &toks, &tn, &tcap, (tok_token){bid, ps, pe, m->id_str[bid], m->id_len[bid]});
                }
                continue;
            }
        }
        if (id < 0) {
            if (m->unk_id < 0)
                return iv_errf(c->err, IV_E_INVALID, "Unigram: unknown piece \"%.*s\" and the model has no unk_id",
                               (int)plen, s + ps);
            id = m->unk_id;
        }
        push_tok(c, &toks, &tn, &tcap, (tok_token){id, ps, pe, s + ps, plen});
    }
    *out = toks;
    *n = tn;
    return 0;
}
