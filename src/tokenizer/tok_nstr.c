/* NormalizedString: the normalized text plus, for each normalized byte, the
 * span of original bytes it came from. Every operation here reproduces the
 * library's alignment bookkeeping (NormalizedString::transform_range and
 * friends), because token offsets are read from these alignments.
 * Buffers are never modified in place, so slices share their parent's
 * memory. */
#include <string.h>

#include "tokenizer/tok_internal.h"

static void edits_reserve(tok_ctx *c, tok_edits *e, int need)
{
    if (need <= e->cap) return;
    int cap = e->cap ? e->cap : 16;
    while (cap < need) cap *= 2;
    uint32_t *cp = tok_alloc(&c->a, sizeof *cp * (size_t)cap);
    int32_t *chg = tok_alloc(&c->a, sizeof *chg * (size_t)cap);
    if (e->n) {
        memcpy(cp, e->cp, sizeof *cp * (size_t)e->n);
        memcpy(chg, e->chg, sizeof *chg * (size_t)e->n);
    }
    e->cp = cp;
    e->chg = chg;
    e->cap = cap;
}

void tok_edits_reset(tok_ctx *c, tok_edits *e, int hint)
{
    e->n = 0;
    edits_reserve(c, e, hint);
}

void tok_edits_push(tok_ctx *c, tok_edits *e, uint32_t cp, int32_t chg)
{
    if (e->n == e->cap) edits_reserve(c, e, e->n + 1);
    e->cp[e->n] = cp;
    e->chg[e->n] = chg;
    e->n++;
}

void tok_ns_from(tok_ctx *c, tok_nstr *ns, const char *text, int32_t len)
{
    ns->s = (char *)text;
    ns->len = len;
    ns->al = tok_alloc(&c->a, sizeof *ns->al * (size_t)(len ? len : 1));
    for (int32_t i = 0; i < len;) {
        int l = tok_utf8_len((unsigned char)text[i]);
        for (int k = 0; k < l; k++) ns->al[i + k] = (tok_span){i, i + l};
        i += l;
    }
    ns->ostart = 0;
    ns->oend = len;
}

static tok_span align_at(const tok_nstr *ns, int32_t idx)
{
    if (idx >= 0 && idx < ns->len) return ns->al[idx];
    return (tok_span){ns->oend, ns->oend};
}

/* The end of a rewrite into fresh buffers s2 / al2 of nlen bytes, written up
 * to o: ns's bytes from `from` on follow unchanged, and the new buffers
 * become ns's. */
static void finish_rewrite(tok_nstr *ns, char *s2, tok_span *al2, int32_t nlen, int32_t o, int32_t from)
{
    memcpy(s2 + o, ns->s + from, (size_t)(ns->len - from));
    memcpy(al2 + o, ns->al + from, sizeof *al2 * (size_t)(ns->len - from));
    s2[nlen] = 0;
    ns->s = s2;
    ns->al = al2;
    ns->len = nlen;
}

void tok_ns_transform_range(tok_ctx *c, tok_nstr *ns, int32_t n0, int32_t n1, const tok_edits *ed,
                            int initial_offset)
{
    int32_t mid = 0;
    for (int i = 0; i < ed->n; i++) mid += tok_utf8_cp_len(ed->cp[i]);
    int32_t nlen = n0 + mid + (ns->len - n1);
    char *s2 = tok_alloc(&c->a, (size_t)nlen + 1);
    tok_span *al2 = tok_alloc(&c->a, sizeof *al2 * (size_t)(nlen ? nlen : 1));
    memcpy(s2, ns->s, (size_t)n0);
    memcpy(al2, ns->al, sizeof *al2 * (size_t)n0);

    const char *rp = ns->s + n0, *rend = ns->s + n1;
    int32_t offset = n0;
    for (int k = 0; k < initial_offset && rp < rend; k++) {
        int l = tok_utf8_len((unsigned char)*rp);
        rp += l;
        offset += l;
    }
    int32_t o = n0;
    for (int i = 0; i < ed->n; i++) {
        int32_t chg = ed->chg[i];
        tok_span al;
        if (chg > 0)
            al = offset < 1 ? (tok_span){ns->ostart, ns->ostart} : align_at(ns, offset - 1);
        else
            al = align_at(ns, offset);
        if (chg <= 0 && rp < rend) {
            int l = tok_utf8_len((unsigned char)*rp);
            rp += l;
            offset += l;
        }
        for (int32_t k = 0; k < -chg && rp < rend; k++) {
            int l = tok_utf8_len((unsigned char)*rp);
            rp += l;
            offset += l;
        }
        int l = tok_utf8_encode(ed->cp[i], s2 + o);
        for (int k = 0; k < l; k++) al2[o + k] = al;
        o += l;
    }
    finish_rewrite(ns, s2, al2, nlen, o, n1);
}

void tok_ns_transform(tok_ctx *c, tok_nstr *ns, const tok_edits *ed, int initial_offset)
{
    /* transform() targets Range::Original(..). Its conversion to normalized
     * bytes (convert_offsets) starts at the first byte with a non-empty
     * alignment; an empty original maps to the empty range at 0, and when
     * no byte has a non-empty alignment the range is the empty one at the
     * end. */
    if (ns->oend == ns->ostart) {
        tok_ns_transform_range(c, ns, 0, 0, ed, initial_offset);
        return;
    }
    int32_t n0 = 0;
    while (n0 < ns->len && ns->al[n0].s == ns->al[n0].e) n0++;
    tok_ns_transform_range(c, ns, n0, ns->len, ed, initial_offset);
}

void tok_ns_filter(tok_ctx *c, tok_nstr *ns, int (*keep)(uint32_t, const void *), const void *arg)
{
    /* Fast path: nothing removed means no change at all. */
    int32_t i = 0;
    for (; i < ns->len;) {
        uint32_t cp;
        int l = tok_utf8_decode(ns->s + i, &cp);
        if (!keep(cp, arg)) break;
        i += l;
    }
    if (i == ns->len) return;

    tok_edits *ed = &c->ed;
    tok_edits_reset(c, ed, ns->len + 1);
    int32_t removed = 0, removed_start = 0;
    int have_last = 0;
    uint32_t last = 0;
    for (i = 0; i < ns->len;) {
        uint32_t cp;
        i += tok_utf8_decode(ns->s + i, &cp);
        if (keep(cp, arg)) {
            if (have_last) tok_edits_push(c, ed, last, -removed);
            else removed_start = removed;
            last = cp;
            have_last = 1;
            removed = 0;
        } else {
            removed++;
        }
    }
    if (have_last) tok_edits_push(c, ed, last, -removed);
    tok_ns_transform(c, ns, ed, removed_start);
}

void tok_ns_map(tok_ctx *c, tok_nstr *ns, uint32_t (*fn)(uint32_t, const void *), const void *arg)
{
    int32_t i = 0;
    for (; i < ns->len;) {
        uint32_t cp;
        int l = tok_utf8_decode(ns->s + i, &cp);
        if (fn(cp, arg) != cp) break;
        i += l;
    }
    if (i == ns->len) return;
    tok_edits *ed = &c->ed;
    tok_edits_reset(c, ed, ns->len + 1);
    for (i = 0; i < ns->len;) {
        uint32_t cp;
        i += tok_utf8_decode(ns->s + i, &cp);
        tok_edits_push(c, ed, fn(cp, arg), 0);
    }
    tok_ns_transform(c, ns, ed, 0);
}

void tok_ns_lowercase(tok_ctx *c, tok_nstr *ns)
{
    int32_t i = 0;
    for (; i < ns->len;) {
        uint32_t cp, lo[2];
        int l = tok_utf8_decode(ns->s + i, &cp);
        if (tok_to_lower(cp, lo) != 1 || lo[0] != cp) break;
        i += l;
    }
    if (i == ns->len) return;
    tok_edits *ed = &c->ed;
    tok_edits_reset(c, ed, ns->len + 2);
    for (i = 0; i < ns->len;) {
        uint32_t cp, lo[2];
        i += tok_utf8_decode(ns->s + i, &cp);
        int k = tok_to_lower(cp, lo);
        for (int j = 0; j < k; j++) tok_edits_push(c, ed, lo[j], j > 0);
    }
    tok_ns_transform(c, ns, ed, 0);
}

void tok_ns_prepend(tok_ctx *c, tok_nstr *ns, const char *s, int32_t len)
{
    if (ns->len == 0) return;
    uint32_t next;
    int nl = tok_utf8_decode(ns->s, &next);
    tok_edits *ed = &c->ed;
    tok_edits_reset(c, ed, len + 2);
    int first = 1;
    for (int32_t i = 0; i < len;) {
        uint32_t cp;
        i += tok_utf8_decode(s + i, &cp);
        tok_edits_push(c, ed, cp, first ? 0 : 1);
        first = 0;
    }
    tok_edits_push(c, ed, next, 1);
    tok_ns_transform_range(c, ns, 0, nl, ed, 0);
}

void tok_ns_replace(tok_ctx *c, tok_nstr *ns, const tok_matches *m, const char *content, int32_t clen)
{
    int nmatch = 0;
    int64_t grow = 0;
    for (int i = 0; i < m->n; i++)
        if (m->v[i].m) {
            nmatch++;
            grow += clen - (m->v[i].e - m->v[i].s);
        }
    if (!nmatch) return;
    int32_t nlen = (int32_t)(ns->len + grow);
    char *s2 = tok_alloc(&c->a, (size_t)nlen + 1);
    tok_span *al2 = tok_alloc(&c->a, sizeof *al2 * (size_t)(nlen ? nlen : 1));
    int32_t o = 0, last = 0;
    for (int i = 0; i < m->n; i++) {
        if (!m->v[i].m) continue;
        int32_t s = m->v[i].s, e = m->v[i].e;
        memcpy(s2 + o, ns->s + last, (size_t)(s - last));
        memcpy(al2 + o, ns->al + last, sizeof *al2 * (size_t)(s - last));
        o += s - last;
        /* Every inserted char aligns with the last replaced byte. */
        tok_span al = e < 1 ? (tok_span){ns->ostart, ns->ostart} : align_at(ns, e - 1);
        memcpy(s2 + o, content, (size_t)clen);
        for (int32_t k = 0; k < clen; k++) al2[o + k] = al;
        o += clen;
        last = e;
    }
    finish_rewrite(ns, s2, al2, nlen, o, last);
}

void tok_ns_strip(tok_ctx *c, tok_nstr *ns, int left, int right)
{
    int32_t count = 0, leading = 0, trailing = 0;
    int in_lead = 1;
    for (int32_t i = 0; i < ns->len;) {
        uint32_t cp;
        i += tok_utf8_decode(ns->s + i, &cp);
        int ws = tok_is_whitespace(cp);
        if (in_lead && ws) leading++;
        else in_lead = 0;
        trailing = ws ? trailing + 1 : 0;
        count++;
    }
    if (!left) leading = 0;
    if (!right) trailing = 0;
    if (leading == 0 && trailing == 0) return;
    tok_edits *ed = &c->ed;
    tok_edits_reset(c, ed, count + 1);
    int32_t idx = 0;
    for (int32_t i = 0; i < ns->len; idx++) {
        uint32_t cp;
        i += tok_utf8_decode(ns->s + i, &cp);
        if (idx < leading || idx >= count - trailing) continue;
        /* The library compares a char index with a byte length here; kept. */
        if (idx == ns->len - trailing - 1) tok_edits_push(c, ed, cp, -trailing);
        else tok_edits_push(c, ed, cp, 0);
    }
    tok_ns_transform(c, ns, ed, leading);
}

static int is_boundary(const tok_nstr *ns, int32_t i)
{
    return i == ns->len || (i >= 0 && i < ns->len && ((unsigned char)ns->s[i] & 0xC0) != 0x80);
}

int tok_ns_slice(tok_ctx *c, const tok_nstr *ns, int32_t s, int32_t e, tok_nstr *out)
{
    (void)c;
    if (s < 0 || e > ns->len || s > e || !is_boundary(ns, s) || !is_boundary(ns, e)) return -1;
    out->s = ns->s + s;
    out->len = e - s;
    out->al = ns->al + s;
    if (s == e) {
        out->ostart = out->oend = ns->ostart + s;
    } else {
        out->ostart = ns->al[s].s;
        out->oend = ns->al[e - 1].e;
    }
    return 0;
}

void tok_ns_to_original(const tok_nstr *ns, int32_t s, int32_t e, int32_t *os, int32_t *oe)
{
    if (s == e) {
        *os = ns->ostart + s;
        *oe = ns->ostart + e;
    } else if (s > e || s < 0 || e > ns->len) {
        *os = s;
        *oe = e;
    } else {
        *os = ns->al[s].s;
        *oe = ns->al[e - 1].e;
    }
}

static void push_match(tok_ctx *c, tok_matches *out, int32_t s, int32_t e, int m)
{
    out->v = tok_grow(&c->a, out->v, &out->cap, out->n + 1, sizeof *out->v);
    out->v[out->n++] = (tok_match){s, e, m};
}

void tok_find_char_matches(tok_ctx *c, const char *s, int32_t len, int (*pred)(uint32_t, const void *),
                           const void *arg, tok_matches *out)
{
    out->n = 0;
    if (len == 0) {
        push_match(c, out, 0, 0, 0);
        return;
    }
    int32_t last = 0;
    for (int32_t i = 0; i < len;) {
        uint32_t cp;
        int l = tok_utf8_decode(s + i, &cp);
        if (pred(cp, arg)) {
            if (last < i) push_match(c, out, last, i, 0);
            push_match(c, out, i, i + l, 1);
            last = i + l;
        }
        i += l;
    }
    if (len > last) push_match(c, out, last, len, 0);
}

void tok_splits_push(tok_ctx *c, tok_splits *l, const tok_nstr *ns)
{
    l->v = tok_grow(&c->a, l->v, &l->cap, l->n + 1, sizeof *l->v);
    tok_split *sp = &l->v[l->n++];
    sp->ns = *ns;
    sp->toks = NULL;
    sp->ntoks = 0;
    sp->tokenized = 0;
}

void tok_split_by_matches(tok_ctx *c, const tok_nstr *ns, tok_matches *mm, int behavior, tok_splits *out)
{
    tok_match *m = mm->v;
    int n = mm->n, k = 0;
    /* Rewrite the span list in place into the pieces to keep (m = 0). */
    switch (behavior) {
    case TOK_ISOLATED:
        for (int i = 0; i < n; i++) m[i].m = 0;
        k = n;
        break;
    case TOK_REMOVED:
        for (int i = 0; i < n; i++)
            if (!m[i].m) m[k++] = m[i];
        break;
    case TOK_CONTIGUOUS: {
        int prev = 0;
        for (int i = 0; i < n; i++) {
            int cur = m[i].m;
            if (cur == prev && k > 0) m[k - 1].e = m[i].e;
            else m[k++] = (tok_match){m[i].s, m[i].e, 0};
            prev = cur;
        }
        break;
    }
    case TOK_MERGED_WITH_PREVIOUS: {
        int prev = 0;
        for (int i = 0; i < n; i++) {
            int cur = m[i].m;
            if (cur && !prev && k > 0) m[k - 1].e = m[i].e;
            else m[k++] = (tok_match){m[i].s, m[i].e, 0};
            prev = cur;
        }
        break;
    }
    case TOK_MERGED_WITH_NEXT: {
        /* Walk backwards, then restore the order. */
        int prev = 0;
        int w = n;
        for (int i = n - 1; i >= 0; i--) {
            int cur = m[i].m;
            if (cur && !prev && w < n) m[w].s = m[i].s;
            else m[--w] = (tok_match){m[i].s, m[i].e, 0};
            prev = cur;
        }
        k = n - w;
        memmove(m, m + w, sizeof *m * (size_t)k);
        break;
    }
    default:
        k = n;
        break;
    }
    for (int i = 0; i < k; i++) {
        tok_nstr piece;
        if (m[i].e <= m[i].s) continue;
        if (tok_ns_slice(c, ns, m[i].s, m[i].e, &piece)) continue;
        tok_splits_push(c, out, &piece);
    }
    mm->n = 0;
}
