/* Pre-tokenizers: loading and splitting. Each one maps a split (a
 * NormalizedString) to the list of pieces the library produces; splits that
 * already carry tokens (added tokens) pass through untouched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "tokenizer/tok_internal.h"

static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* ------------------------------------------------------------- loading */

/* tok_json_members' view of tok_load_pretokenizer. */
static int load_member(const cJSON *j, void *member, const char *path, iv_err *err)
{
    return tok_load_pretokenizer(j, member, path, err);
}

int tok_load_pretokenizer(const cJSON *j, tok_pretokenizer *p, const char *path, iv_err *err)
{
    memset(p, 0, sizeof *p);
    char what[TOK_WHAT_LEN];
    const char *type = tok_json_component(j, path, what, err);
    if (!type) return -1;
    if (!strcmp(type, "BertPreTokenizer")) {
        p->kind = TOK_P_BERT;
    } else if (!strcmp(type, "ByteLevel")) {
        p->kind = TOK_P_BYTELEVEL;
        if (iv_json_bool_chk(j, "add_prefix_space", 1, &p->add_prefix_space, what, err) ||
            iv_json_bool_chk(j, "trim_offsets", 1, &p->trim_offsets, what, err) ||
            iv_json_bool_chk(j, "use_regex", 1, &p->use_regex, what, err))
            return -1;
        if (p->use_regex && tok_regex_compile(&p->re, GPT2_PATTERN, strlen(GPT2_PATTERN), 1, what, err))
            return -1;
    } else if (!strcmp(type, "Whitespace")) {
        p->kind = TOK_P_WHITESPACE;
    } else if (!strcmp(type, "WhitespaceSplit")) {
        p->kind = TOK_P_WHITESPACE_SPLIT;
    } else if (!strcmp(type, "Metaspace")) {
        p->kind = TOK_P_METASPACE;
        if (tok_json_char(j, "replacement", 0x2581, &p->replacement, what, err)) return -1;
        p->rep_len = tok_utf8_encode(p->replacement, p->rep_str);
        p->rep_str[p->rep_len] = 0;
        if (iv_json_bool_chk(j, "split", 1, &p->split, what, err)) return -1;
        const char *scheme = iv_json_str(j, "prepend_scheme", NULL);
        int add_prefix = -1;
        if (iv_json_bool_chk(j, "add_prefix_space", -1, &add_prefix, what, err)) return -1;
        p->prepend_scheme = TOK_PREPEND_ALWAYS;
        if (scheme) {
            if (!strcmp(scheme, "first")) p->prepend_scheme = TOK_PREPEND_FIRST;
            else if (!strcmp(scheme, "never")) p->prepend_scheme = TOK_PREPEND_NEVER;
            else if (strcmp(scheme, "always"))
                return iv_errf(err, IV_E_FORMAT, "%s: \"prepend_scheme\" must be first, always or never", what);
            if (add_prefix == 0 && p->prepend_scheme != TOK_PREPEND_NEVER)
                return iv_errf(err, IV_E_FORMAT,
                               "%s: add_prefix_space=false does not match prepend_scheme \"%s\"", what, scheme);
        } else if (add_prefix == 0) {
            /* Older serialization: add_prefix_space alone. */
            p->prepend_scheme = TOK_PREPEND_NEVER;
        }
    } else if (!strcmp(type, "Split")) {
        p->kind = TOK_P_SPLIT;
        if (tok_json_pattern(j, &p->re, what, err) ||
            tok_json_split_behavior(j, "behavior", -1, &p->behavior, what, err) ||
            iv_json_bool_chk(j, "invert", 0, &p->invert, what, err))
            return -1;
    } else if (!strcmp(type, "Punctuation")) {
        p->kind = TOK_P_PUNCTUATION;
        if (tok_json_split_behavior(j, "behavior", TOK_ISOLATED, &p->behavior, what, err)) return -1;
    } else if (!strcmp(type, "Digits")) {
        p->kind = TOK_P_DIGITS;
        if (iv_json_bool_chk(j, "individual_digits", 0, &p->individual_digits, what, err)) return -1;
    } else if (!strcmp(type, "UnicodeScripts")) {
        p->kind = TOK_P_UNICODE_SCRIPTS;
    } else if (!strcmp(type, "CharDelimiterSplit") || !strcmp(type, "Delimiter")) {
        p->kind = TOK_P_CHAR_DELIMITER;
        if (!cJSON_GetObjectItemCaseSensitive(j, "delimiter"))
            return iv_errf(err, IV_E_FORMAT, "%s: missing \"delimiter\"", what);
        if (tok_json_char(j, "delimiter", ' ', &p->delimiter, what, err)) return -1;
    } else if (!strcmp(type, "FixedLength")) {
        p->kind = TOK_P_FIXED_LENGTH;
        int64_t len = 5;
        if (iv_json_int_chk(j, "length", 5, &len, what, err)) return -1;
        if (len <= 0 || len > 1 << 20) return iv_errf(err, IV_E_FORMAT, "%s: \"length\" must be positive", what);
        p->length = (int)len;
    } else if (!strcmp(type, "Sequence")) {
        p->kind = TOK_P_SEQUENCE;
        void *items;
        const int rc = tok_json_members(j, "pretokenizers", sizeof *p->items, load_member, &items, &p->n_items,
                                        path, what, err);
        p->items = items;
        if (rc) return -1;
    } else {
        return iv_errf(err, IV_E_UNSUPPORTED, "%s: unknown pre_tokenizer type \"%s\"", path, type);
    }
    return 0;
}

void tok_free_pretokenizer(tok_pretokenizer *p)
{
    if (!p) return;
    tok_regex_free(&p->re);
    for (int i = 0; i < p->n_items; i++) tok_free_pretokenizer(&p->items[i]);
    free(p->items);
    memset(p, 0, sizeof *p);
}

/* ------------------------------------------------------------ splitting */

static int pred_ws(uint32_t c, const void *a)
{
    (void)a;
    return tok_is_whitespace(c);
}
static int pred_punct(uint32_t c, const void *a)
{
    (void)a;
    return tok_is_bert_punct(c);
}
static int pred_numeric(uint32_t c, const void *a)
{
    (void)a;
    return tok_is_numeric(c);
}
static int pred_char(uint32_t c, const void *a)
{
    return c == *(const uint32_t *)a;
}

static void split_pred(tok_ctx *c, const tok_nstr *ns, int (*pred)(uint32_t, const void *), const void *arg,
                       int behavior, tok_splits *out)
{
    tok_matches m = {0};
    tok_find_char_matches(c, ns->s, ns->len, pred, arg, &m);
    tok_split_by_matches(c, ns, &m, behavior, out);
}

static void byte_level_map(tok_ctx *c, tok_nstr *ns)
{
    tok_edits *ed = &c->ed;
    tok_edits_reset(c, ed, ns->len + 1);
    for (int32_t i = 0; i < ns->len;) {
        int l = tok_utf8_len((unsigned char)ns->s[i]);
        for (int k = 0; k < l; k++) tok_edits_push(c, ed, tok_byte_to_char((unsigned char)ns->s[i + k]), k > 0);
        i += l;
    }
    tok_ns_transform(c, ns, ed, 0);
}

/* Whitespace: the regex \w+|[^\w\s]+, keeping the matches. */
static void split_whitespace(tok_ctx *c, const tok_nstr *ns, tok_splits *out)
{
    int32_t i = 0;
    while (i < ns->len) {
        uint32_t cp;
        int l = tok_utf8_decode(ns->s + i, &cp);
        int cls = tok_is_word(cp) ? 1 : tok_is_whitespace(cp) ? 0 : 2;
        if (cls == 0) {
            i += l;
            continue;
        }
        int32_t j = i + l;
        while (j < ns->len) {
            uint32_t cq;
            int lq = tok_utf8_decode(ns->s + j, &cq);
            int cq_cls = tok_is_word(cq) ? 1 : tok_is_whitespace(cq) ? 0 : 2;
            if (cq_cls != cls) break;
            j += lq;
        }
        tok_nstr piece;
        if (!tok_ns_slice(c, ns, i, j, &piece)) tok_splits_push(c, out, &piece);
        i = j;
    }
}

/* Script ids from tok_unicode_script(); sentencepiece folds kana into Han
 * and treats ' ' (and unassigned chars) as belonging to any script. */
enum { SCRIPT_ANY = 0, SCRIPT_HAN = 1, SCRIPT_HIRAGANA = 2, SCRIPT_KATAKANA = 3 };

static int fixed_script(uint32_t c)
{
    if (c == 0x30FC) return SCRIPT_HAN;
    if (c == ' ') return SCRIPT_ANY;
    int s = tok_unicode_script(c);
    return (s == SCRIPT_HIRAGANA || s == SCRIPT_KATAKANA) ? SCRIPT_HAN : s;
}

static void split_scripts(tok_ctx *c, const tok_nstr *ns, tok_splits *out)
{
    int32_t *cuts = tok_alloc(&c->a, sizeof *cuts * (size_t)(ns->len + 2));
    int nc = 0, have_last = 0, last = 0;
    for (int32_t i = 0; i < ns->len;) {
        uint32_t cp;
        int l = tok_utf8_decode(ns->s + i, &cp);
        int sc = fixed_script(cp);
        if (sc != SCRIPT_ANY && (!have_last || last != sc)) cuts[nc++] = i;
        i += l;
        if (sc != SCRIPT_ANY) {
            last = sc;
            have_last = 1;
        }
    }
    cuts[nc++] = ns->len;
    for (int k = 0; k + 1 < nc; k++) {
        tok_nstr piece;
        if (cuts[k + 1] > cuts[k] && !tok_ns_slice(c, ns, cuts[k], cuts[k + 1], &piece))
            tok_splits_push(c, out, &piece);
    }
}

static void split_fixed(tok_ctx *c, const tok_nstr *ns, int length, tok_splits *out)
{
    int32_t i = 0;
    while (i < ns->len) {
        int32_t j = i;
        for (int k = 0; k < length && j < ns->len; k++) j += tok_utf8_len((unsigned char)ns->s[j]);
        tok_nstr piece;
        if (!tok_ns_slice(c, ns, i, j, &piece)) tok_splits_push(c, out, &piece);
        i = j;
    }
}

static int split_one(tok_ctx *c, const tok_pretokenizer *p, const tok_nstr *in, tok_splits *out)
{
    switch (p->kind) {
    case TOK_P_BERT: {
        tok_splits tmp = {0};
        split_pred(c, in, pred_ws, NULL, TOK_REMOVED, &tmp);
        for (int i = 0; i < tmp.n; i++) split_pred(c, &tmp.v[i].ns, pred_punct, NULL, TOK_ISOLATED, out);
        return 0;
    }
    case TOK_P_BYTELEVEL: {
        tok_nstr ns = *in;
        if (p->add_prefix_space && !(ns.len > 0 && ns.s[0] == ' ')) tok_ns_prepend(c, &ns, " ", 1);
        int first = out->n;
        if (p->use_regex) {
            tok_matches m = {0};
            if (tok_regex_find_matches(c, &p->re, ns.s, ns.len, &m)) return -1;
            tok_split_by_matches(c, &ns, &m, TOK_ISOLATED, out);
        } else if (ns.len) {
            tok_splits_push(c, out, &ns);
        }
        for (int i = first; i < out->n; i++) byte_level_map(c, &out->v[i].ns);
        return 0;
    }
    case TOK_P_WHITESPACE:
        split_whitespace(c, in, out);
        return 0;
    case TOK_P_WHITESPACE_SPLIT:
        split_pred(c, in, pred_ws, NULL, TOK_REMOVED, out);
        return 0;
    case TOK_P_METASPACE: {
        tok_nstr ns = *in;
        uint32_t space = ' ';
        tok_matches m = {0};
        tok_find_char_matches(c, ns.s, ns.len, pred_char, &space, &m);
        tok_ns_replace(c, &ns, &m, p->rep_str, p->rep_len);
        int starts = ns.len >= p->rep_len && !memcmp(ns.s, p->rep_str, (size_t)p->rep_len);
        if (p->prepend_scheme == TOK_PREPEND_ALWAYS && !starts) tok_ns_prepend(c, &ns, p->rep_str, p->rep_len);
        else if (p->prepend_scheme == TOK_PREPEND_FIRST && !starts && ns.ostart == 0)
            tok_ns_prepend(c, &ns, p->rep_str, p->rep_len);
        if (p->split) split_pred(c, &ns, pred_char, &p->replacement, TOK_MERGED_WITH_NEXT, out);
        else if (ns.len) tok_splits_push(c, out, &ns);
        return 0;
    }
    case TOK_P_SPLIT: {
        tok_matches m = {0};
        if (tok_regex_find_matches(c, &p->re, in->s, in->len, &m)) return -1;
        if (p->invert)
            for (int i = 0; i < m.n; i++) m.v[i].m = !m.v[i].m;
        tok_split_by_matches(c, in, &m, p->behavior, out);
        return 0;
    }
    case TOK_P_PUNCTUATION:
        split_pred(c, in, pred_punct, NULL, p->behavior, out);
        return 0;
    case TOK_P_DIGITS:
        split_pred(c, in, pred_numeric, NULL, p->individual_digits ? TOK_ISOLATED : TOK_CONTIGUOUS, out);
        return 0;
    case TOK_P_UNICODE_SCRIPTS:
        split_scripts(c, in, out);
        return 0;
    case TOK_P_CHAR_DELIMITER:
        split_pred(c, in, pred_char, &p->delimiter, TOK_REMOVED, out);
        return 0;
    case TOK_P_FIXED_LENGTH:
        split_fixed(c, in, p->length, out);
        return 0;
    default:
        return iv_errf(c->err, IV_E_INTERNAL, "unknown pre-tokenizer kind %d", p->kind);
    }
}

int tok_pretokenize(tok_ctx *c, const tok_pretokenizer *p, tok_splits *splits)
{
    if (p->kind == TOK_P_SEQUENCE) {
        for (int i = 0; i < p->n_items; i++)
            if (tok_pretokenize(c, &p->items[i], splits)) return -1;
        return 0;
    }
    tok_splits out = {0};
    out.v = tok_grow(&c->a, NULL, &out.cap, splits->n * 2 + 4, sizeof *out.v);
    for (int i = 0; i < splits->n; i++) {
        if (splits->v[i].tokenized) {
            out.v = tok_grow(&c->a, out.v, &out.cap, out.n + 1, sizeof *out.v);
            out.v[out.n++] = splits->v[i];
            continue;
        }
        if (split_one(c, p, &splits->v[i].ns, &out)) return -1;
    }
    *splits = out;
    return 0;
}
