/* Normalizers: loading from tokenizer.json and applying them to a
 * NormalizedString with the library's alignment semantics. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "tokenizer/tok_internal.h"

/* ------------------------------------------------------------- loading */

/* tok_json_members' view of tok_load_normalizer. */
static int load_member(const cJSON *j, void *member, const char *path, iv_err *err)
{
    return tok_load_normalizer(j, member, path, err);
}

int tok_load_normalizer(const cJSON *j, tok_normalizer *n, const char *path, iv_err *err)
{
    memset(n, 0, sizeof *n);
    char what[TOK_WHAT_LEN];
    const char *type = tok_json_component(j, path, what, err);
    if (!type) return -1;
    if (!strcmp(type, "BertNormalizer")) {
        n->kind = TOK_N_BERT;
        if (iv_json_bool_chk(j, "clean_text", 1, &n->clean_text, what, err) ||
            iv_json_bool_chk(j, "handle_chinese_chars", 1, &n->handle_chinese, what, err) ||
            iv_json_bool_chk(j, "lowercase", 1, &n->lowercase, what, err) ||
            iv_json_bool_chk(j, "strip_accents", -1, &n->strip_accents, what, err))
            return -1;
        return 0;
    }
    if (!strcmp(type, "NFC")) n->kind = TOK_N_NFC;
    else if (!strcmp(type, "NFD")) n->kind = TOK_N_NFD;
    else if (!strcmp(type, "NFKC")) n->kind = TOK_N_NFKC;
    else if (!strcmp(type, "NFKD")) n->kind = TOK_N_NFKD;
    else if (!strcmp(type, "Lowercase")) n->kind = TOK_N_LOWERCASE;
    else if (!strcmp(type, "StripAccents")) n->kind = TOK_N_STRIP_ACCENTS;
    else if (!strcmp(type, "Nmt")) n->kind = TOK_N_NMT;
    else if (!strcmp(type, "ByteLevel")) n->kind = TOK_N_BYTELEVEL;
    else if (!strcmp(type, "Strip")) {
        n->kind = TOK_N_STRIP;
        return iv_json_bool_chk(j, "strip_left", 1, &n->strip_left, what, err) ||
                       iv_json_bool_chk(j, "strip_right", 1, &n->strip_right, what, err)
                   ? -1
                   : 0;
    } else if (!strcmp(type, "Replace")) {
        n->kind = TOK_N_REPLACE;
        if (tok_json_pattern(j, &n->re, what, err)) return -1;
        return tok_json_dup_str(j, "content", NULL, &n->content, &n->content_len, what, err);
    } else if (!strcmp(type, "Prepend")) {
        n->kind = TOK_N_PREPEND;
        return tok_json_dup_str(j, "prepend", NULL, &n->content, &n->content_len, what, err);
    } else if (!strcmp(type, "Precompiled")) {
        n->kind = TOK_N_PRECOMPILED;
        const char *b64 = iv_json_str(j, "precompiled_charsmap", NULL);
        if (!b64) return iv_errf(err, IV_E_FORMAT, "%s: \"precompiled_charsmap\" must be a base64 string", what);
        if (tok_precompiled_load(&n->pc, b64, err)) return iv_err_prefix(err, "%s: ", what);
        return 0;
    } else if (!strcmp(type, "Sequence")) {
        n->kind = TOK_N_SEQUENCE;
        void *items;
        const int rc = tok_json_members(j, "normalizers", sizeof *n->items, load_member, &items, &n->n_items, path,
                                        what, err);
        n->items = items;
        return rc;
    } else {
        return iv_errf(err, IV_E_UNSUPPORTED, "%s: unknown normalizer type \"%s\"", path, type);
    }
    return 0;
}

void tok_free_normalizer(tok_normalizer *n)
{
    if (!n) return;
    tok_regex_free(&n->re);
    free(n->content);
    free(n->pc.trie);
    free(n->pc.normalized);
    for (int i = 0; i < n->n_items; i++) tok_free_normalizer(&n->items[i]);
    free(n->items);
    memset(n, 0, sizeof *n);
}

/* ------------------------------------------------------------ applying */

static int keep_bert_clean(uint32_t c, const void *arg)
{
    (void)arg;
    if (c == 0 || c == 0xFFFD) return 0;
    if (c == '\t' || c == '\n' || c == '\r') return 1;
    return !tok_is_other_ccfco(c);
}

static uint32_t map_bert_ws(uint32_t c, const void *arg)
{
    (void)arg;
    return (c == '\t' || c == '\n' || c == '\r' || tok_is_whitespace(c)) ? ' ' : c;
}

static int keep_not_mn(uint32_t c, const void *arg)
{
    (void)arg;
    return !tok_is_mark_nonspacing(c);
}

static int keep_not_combining(uint32_t c, const void *arg)
{
    (void)arg;
    return !tok_is_combining_mark(c);
}

static int keep_nmt(uint32_t c, const void *arg)
{
    (void)arg;
    return !((c >= 0x01 && c <= 0x08) || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F ||
             c == 0x8F || c == 0x9F);
}

static uint32_t map_nmt(uint32_t c, const void *arg)
{
    (void)arg;
    switch (c) {
    case 0x09:
    case 0x0A:
    case 0x0C:
    case 0x0D:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x2581:
    case 0xFEFF:
    case 0xFFFD:
        return ' ';
    default:
        return (c >= 0x200B && c <= 0x200F) ? ' ' : c;
    }
}

static int is_ascii(const tok_nstr *ns)
{
    for (int32_t i = 0; i < ns->len; i++)
        if ((unsigned char)ns->s[i] >= 0x80) return 0;
    return 1;
}

static void unicode_form(tok_ctx *c, tok_nstr *ns, int form)
{
    if (is_ascii(ns)) return; /* every form leaves ASCII unchanged */
    tok_unicode_normalize(c, ns->s, ns->len, form, &c->ed);
    tok_ns_transform(c, ns, &c->ed, 0);
}

static void bert_chinese(tok_ctx *c, tok_nstr *ns)
{
    int any = 0;
    for (int32_t i = 0; i < ns->len && !any;) {
        uint32_t cp;
        i += tok_utf8_decode(ns->s + i, &cp);
        any = tok_is_chinese(cp);
    }
    if (!any) return;
    tok_edits *ed = &c->ed;
    tok_edits_reset(c, ed, ns->len + 8);
    for (int32_t i = 0; i < ns->len;) {
        uint32_t cp;
        i += tok_utf8_decode(ns->s + i, &cp);
        if (tok_is_chinese(cp)) {
            tok_edits_push(c, ed, ' ', 0);
            tok_edits_push(c, ed, cp, 1);
            tok_edits_push(c, ed, ' ', 1);
        } else {
            tok_edits_push(c, ed, cp, 0);
        }
    }
    tok_ns_transform(c, ns, ed, 0);
}

static void byte_level(tok_ctx *c, tok_nstr *ns)
{
    if (ns->len == 0) return;
    tok_edits *ed = &c->ed;
    tok_edits_reset(c, ed, ns->len + 1);
    for (int32_t i = 0; i < ns->len;) {
        int l = tok_utf8_len((unsigned char)ns->s[i]);
        for (int k = 0; k < l; k++) tok_edits_push(c, ed, tok_byte_to_char((unsigned char)ns->s[i + k]), k > 0);
        i += l;
    }
    tok_ns_transform(c, ns, ed, 0);
}

int tok_normalize(tok_ctx *c, const tok_normalizer *n, tok_nstr *ns)
{
    switch (n->kind) {
    case TOK_N_BERT: {
        if (n->clean_text) {
            tok_ns_filter(c, ns, keep_bert_clean, NULL);
            tok_ns_map(c, ns, map_bert_ws, NULL);
        }
        if (n->handle_chinese) bert_chinese(c, ns);
        int strip = n->strip_accents >= 0 ? n->strip_accents : n->lowercase;
        if (strip) {
            unicode_form(c, ns, TOK_NFD);
            tok_ns_filter(c, ns, keep_not_mn, NULL);
        }
        if (n->lowercase) tok_ns_lowercase(c, ns);
        return 0;
    }
    case TOK_N_NFC:
        unicode_form(c, ns, TOK_NFC);
        return 0;
    case TOK_N_NFD:
        unicode_form(c, ns, TOK_NFD);
        return 0;
    case TOK_N_NFKC:
        unicode_form(c, ns, TOK_NFKC);
        return 0;
    case TOK_N_NFKD:
        unicode_form(c, ns, TOK_NFKD);
        return 0;
    case TOK_N_LOWERCASE:
        tok_ns_lowercase(c, ns);
        return 0;
    case TOK_N_STRIP:
        if (n->strip_left && n->strip_right) {
            tok_ns_strip(c, ns, 1, 1);
        } else {
            if (n->strip_left) tok_ns_strip(c, ns, 1, 0);
            if (n->strip_right) tok_ns_strip(c, ns, 0, 1);
        }
        return 0;
    case TOK_N_STRIP_ACCENTS:
        tok_ns_filter(c, ns, keep_not_combining, NULL);
        return 0;
    case TOK_N_REPLACE: {
        tok_matches m = {0};
        if (tok_regex_find_matches(c, &n->re, ns->s, ns->len, &m)) return -1;
        tok_ns_replace(c, ns, &m, n->content, n->content_len);
        return 0;
    }
    case TOK_N_PREPEND:
        if (ns->len) tok_ns_prepend(c, ns, n->content, n->content_len);
        return 0;
    case TOK_N_PRECOMPILED:
        tok_precompiled_normalize(c, &n->pc, ns);
        return 0;
    case TOK_N_BYTELEVEL:
        byte_level(c, ns);
        return 0;
    case TOK_N_NMT:
        tok_ns_filter(c, ns, keep_nmt, NULL);
        tok_ns_map(c, ns, map_nmt, NULL);
        return 0;
    case TOK_N_SEQUENCE:
        for (int i = 0; i < n->n_items; i++)
            if (tok_normalize(c, &n->items[i], ns)) return -1;
        return 0;
    default:
        return iv_errf(c->err, IV_E_INTERNAL, "unknown normalizer kind %d", n->kind);
    }
}
