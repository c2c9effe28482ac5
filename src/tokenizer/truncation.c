/* The encoding under construction and truncate_encodings: longest_first,
 * only_first and only_second, from the right or the left (stride 0; the
 * overflowing parts are dropped). */
#include <string.h>

#include "tokenizer/tok_internal.h"

void tok_enc_push(tok_ctx *c, tok_enc *e, int32_t id, int32_t type_id, int32_t s, int32_t en, int32_t seq,
                  int special, const char *str, int32_t slen)
{
    if (e->n == e->cap) {
        int cap = e->cap ? e->cap * 2 : 32, k = e->cap;
        e->ids = tok_grow(&c->a, e->ids, &k, cap, sizeof *e->ids);
        k = e->cap;
        e->type_ids = tok_grow(&c->a, e->type_ids, &k, cap, sizeof *e->type_ids);
        k = e->cap;
        e->seq = tok_grow(&c->a, e->seq, &k, cap, sizeof *e->seq);
        k = e->cap;
        e->special = tok_grow(&c->a, e->special, &k, cap, sizeof *e->special);
        k = e->cap;
        e->str = tok_grow(&c->a, e->str, &k, cap, sizeof *e->str);
        k = e->cap;
        e->slen = tok_grow(&c->a, e->slen, &k, cap, sizeof *e->slen);
        k = e->cap * 2;
        e->offs = tok_grow(&c->a, e->offs, &k, cap * 2, sizeof *e->offs);
        e->cap = cap;
    }
    int i = e->n++;
    e->ids[i] = id;
    e->type_ids[i] = type_id;
    e->offs[2 * i] = s;
    e->offs[2 * i + 1] = en;
    e->seq[i] = seq;
    e->special[i] = (uint8_t)special;
    e->str[i] = str;
    e->slen[i] = slen;
}

void tok_enc_append(tok_ctx *c, tok_enc *dst, const tok_enc *src)
{
    for (int i = 0; i < src->n; i++)
        tok_enc_push(c, dst, src->ids[i], src->type_ids[i], src->offs[2 * i], src->offs[2 * i + 1], src->seq[i],
                     src->special[i], src->str[i], src->slen[i]);
}

void tok_enc_truncate(tok_enc *e, int max_len, int left)
{
    if (max_len >= e->n) return;
    if (max_len < 0) max_len = 0;
    if (left) {
        int drop = e->n - max_len;
        memmove(e->ids, e->ids + drop, sizeof *e->ids * (size_t)max_len);
        memmove(e->type_ids, e->type_ids + drop, sizeof *e->type_ids * (size_t)max_len);
        memmove(e->offs, e->offs + 2 * drop, sizeof *e->offs * 2 * (size_t)max_len);
        memmove(e->seq, e->seq + drop, sizeof *e->seq * (size_t)max_len);
        memmove(e->special, e->special + drop, sizeof *e->special * (size_t)max_len);
        memmove(e->str, e->str + drop, sizeof *e->str * (size_t)max_len);
        memmove(e->slen, e->slen + drop, sizeof *e->slen * (size_t)max_len);
    }
    e->n = max_len;
}

int tok_truncate(tok_ctx *c, tok_enc *a, tok_enc *b, int max_length, int strategy, int left)
{
    if (max_length == 0) {
        tok_enc_truncate(a, 0, left);
        if (b) tok_enc_truncate(b, 0, left);
        return 0;
    }
    int total = a->n + (b ? b->n : 0);
    if (total <= max_length) return 0;
    int to_remove = total - max_length;
    if (strategy == IV_TRUNC_LONGEST_FIRST) {
        if (!b) {
            tok_enc_truncate(a, total - to_remove, left);
            return 0;
        }
        int n1 = a->n, n2 = b->n, swap = 0;
        if (n1 > n2) {
            swap = 1;
            int t = n1;
            n1 = n2;
            n2 = t;
        }
        if (n1 > max_length) n2 = n1;
        else n2 = n1 > max_length - n1 ? n1 : max_length - n1;
        if (n1 + n2 > max_length) {
            n1 = max_length / 2;
            n2 = n1 + max_length % 2;
        }
        if (swap) {
            int t = n1;
            n1 = n2;
            n2 = t;
        }
        tok_enc_truncate(a, n1, left);
        tok_enc_truncate(b, n2, left);
        return 0;
    }
    tok_enc *target = strategy == IV_TRUNC_ONLY_FIRST ? a : b;
    if (!target)
        return iv_errf(c->err, IV_E_INVALID, "truncation only_second needs a second sequence, but none was given");
    if (target->n > to_remove) {
        tok_enc_truncate(target, target->n - to_remove, left);
        return 0;
    }
    return iv_errf(c->err, IV_E_INVALID,
                   "cannot truncate to max_length %d with strategy %s: the %s sequence has only %d tokens "
                   "and %d must be removed",
                   max_length, strategy == IV_TRUNC_ONLY_FIRST ? "only_first" : "only_second",
                   strategy == IV_TRUNC_ONLY_FIRST ? "first" : "second", target->n, to_remove);
}
