/* Post-processors: TemplateProcessing (loaded in template.c),
 * BertProcessing, RobertaProcessing, ByteLevel and Sequence. Like the
 * library they map a list of encodings to a list of encodings (a template
 * yields one per piece) that is concatenated at the end, so a Sequence sees
 * the same intermediate lists. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "tokenizer/tok_internal.h"

/* ------------------------------------------------------------- loading */

/* tok_json_members' view of tok_load_postproc. */
static int load_member(const cJSON *j, void *member, const char *path, iv_err *err)
{
    return tok_load_postproc(j, member, path, err);
}

static int load_pair_token(const cJSON *j, const char *key, const char *def, int32_t def_id, char **tok, int32_t *len,
                           int32_t *id, const char *what, iv_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    const char *s = def;
    int32_t i = def_id;
    if (v && !cJSON_IsNull(v)) {
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2 || !cJSON_IsString(v->child) ||
            !iv_json_is_integer(v->child->next) || v->child->next->valuedouble < 0)
            return iv_errf(err, IV_E_FORMAT, "%s: \"%s\" must be [token, id]", what, key);
        s = v->child->valuestring;
        i = (int32_t)v->child->next->valuedouble;
    }
    *tok = tok_xstrdup(s);
    if (!*tok) return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
    *len = (int32_t)strlen(s);
    *id = i;
    return 0;
}

int tok_load_postproc(const cJSON *j, tok_postproc *pp, const char *path, iv_err *err)
{
    memset(pp, 0, sizeof *pp);
    char what[TOK_WHAT_LEN];
    const char *type = tok_json_component(j, path, what, err);
    if (!type) return -1;
    if (!strcmp(type, "TemplateProcessing")) return tok_load_template(j, pp, what, err);
    if (!strcmp(type, "BertProcessing")) {
        pp->kind = TOK_PP_BERT;
        return load_pair_token(j, "sep", "[SEP]", 102, &pp->sep, &pp->sep_len, &pp->sep_id, what, err) ||
                       load_pair_token(j, "cls", "[CLS]", 101, &pp->cls, &pp->cls_len, &pp->cls_id, what, err)
                   ? -1
                   : 0;
    }
    if (!strcmp(type, "RobertaProcessing")) {
        pp->kind = TOK_PP_ROBERTA;
        return load_pair_token(j, "sep", "</s>", 2, &pp->sep, &pp->sep_len, &pp->sep_id, what, err) ||
                       load_pair_token(j, "cls", "<s>", 0, &pp->cls, &pp->cls_len, &pp->cls_id, what, err) ||
                       iv_json_bool_chk(j, "trim_offsets", 1, &pp->trim_offsets, what, err) ||
                       iv_json_bool_chk(j, "add_prefix_space", 1, &pp->add_prefix_space, what, err)
                   ? -1
                   : 0;
    }
    if (!strcmp(type, "ByteLevel")) {
        pp->kind = TOK_PP_BYTELEVEL;
        return iv_json_bool_chk(j, "trim_offsets", 1, &pp->trim_offsets, what, err) ||
                       iv_json_bool_chk(j, "add_prefix_space", 1, &pp->add_prefix_space, what, err)
                   ? -1
                   : 0;
    }
    if (!strcmp(type, "Sequence")) {
        pp->kind = TOK_PP_SEQUENCE;
        void *items;
        const int rc = tok_json_members(j, "processors", sizeof *pp->items, load_member, &items, &pp->n_items, path,
                                        what, err);
        pp->items = items;
        return rc;
    }
    return iv_errf(err, IV_E_UNSUPPORTED, "%s: unknown post_processor type \"%s\"", path, type);
}

void tok_free_postproc(tok_postproc *pp)
{
    if (!pp) return;
    for (int i = 0; i < pp->n_specials; i++) {
        tok_special *s = &pp->specials[i];
        free(s->name);
        for (int k = 0; k < s->n; k++) free(s->toks[k]);
        free(s->toks);
        free(s->ids);
        free(s->tok_lens);
    }
    free(pp->specials);
    free(pp->single);
    free(pp->pair);
    free(pp->sep);
    free(pp->cls);
    for (int i = 0; i < pp->n_items; i++) tok_free_postproc(&pp->items[i]);
    free(pp->items);
    memset(pp, 0, sizeof *pp);
}

int tok_post_added(const tok_postproc *pp, int pair)
{
    switch (pp->kind) {
    case TOK_PP_TEMPLATE:
        return pair ? pp->added_pair : pp->added_single;
    case TOK_PP_BERT:
        return pair ? 3 : 2;
    case TOK_PP_ROBERTA:
        return pair ? 4 : 2;
    case TOK_PP_SEQUENCE: {
        int k = 0;
        for (int i = 0; i < pp->n_items; i++) k += tok_post_added(&pp->items[i], pair);
        return k;
    }
    default:
        return 0;
    }
}

/* ------------------------------------------------------------ applying */

static int is_space_like(uint32_t c)
{
    return c == 0x120 /* 'Ġ', the byte-level space */ || tok_is_whitespace(c);
}

/* Lazily built byte <-> char maps of a sequence's text. */
static void text_maps(tok_ctx *c, tok_post_text *t)
{
    if (t->b2c) return;
    t->b2c = tok_alloc(&c->a, sizeof *t->b2c * (size_t)(t->len + 1));
    t->c2b = tok_alloc(&c->a, sizeof *t->c2b * (size_t)(t->len + 2));
    int32_t ci = -1;
    for (int32_t i = 0; i < t->len; i++) {
        if (((unsigned char)t->s[i] & 0xC0) != 0x80) t->c2b[++ci] = i;
        t->b2c[i] = ci;
    }
    t->nchars = ci + 1;
    t->c2b[t->nchars] = t->len;
}

static int32_t char_to_byte(const tok_post_text *t, int32_t k)
{
    if (k < 0) return 0;
    if (k <= t->nchars) return t->c2b[k];
    return t->len + (k - t->nchars);
}

/* ByteLevel's process_offsets. The library runs it after converting the
 * offsets to chars (what Python reports), so the arithmetic is done on
 * char offsets obtained exactly as the library converts them, and the
 * result is mapped back to bytes. */
static void trim_offsets(tok_ctx *c, tok_enc *e, int add_prefix_space, tok_post_text *texts)
{
    for (int i = 0; i < e->n; i++) {
        const char *s = e->str[i];
        int32_t sl = e->slen[i];
        if (sl == 0) continue;
        /* Most tokens neither start nor end with a space: check both ends first. */
        uint32_t first, last;
        tok_utf8_decode(s, &first);
        int32_t lp = sl - 1;
        while (lp > 0 && ((unsigned char)s[lp] & 0xC0) == 0x80) lp--;
        tok_utf8_decode(s + lp, &last);
        if (!is_space_like(first) && !is_space_like(last)) continue;
        int32_t leading = 0, trailing = 0;
        int in_lead = 1;
        for (int32_t k = 0; k < sl;) {
            uint32_t cp;
            k += tok_utf8_decode(s + k, &cp);
            int sp = is_space_like(cp);
            if (in_lead && sp) leading++;
            else in_lead = 0;
            trailing = sp ? trailing + 1 : 0;
        }
        if (leading == 0 && trailing == 0) continue;
        int seq = e->seq[i];
        tok_post_text *t = seq >= 0 && seq < 2 ? &texts[seq] : NULL;
        int32_t *o = &e->offs[2 * i];
        int32_t cs = o[0], ce = o[1];
        int in_chars = 0;
        if (t) {
            text_maps(c, t);
            if (cs >= 0 && cs < t->len) {
                cs = t->b2c[cs];
                if (ce >= 0 && ce < t->len) ce = t->b2c[ce];
                else if (ce >= 1 && ce - 1 < t->len) ce = t->b2c[ce - 1] + 1;
                else ce = cs + 2;
                in_chars = 1;
            }
        }
        if (leading > 0) {
            int is_first = i == 0 || cs == 0;
            if (is_first && add_prefix_space && leading == 1) leading = 0;
            cs = cs + leading < ce ? cs + leading : ce;
        }
        if (trailing > 0 && ce >= trailing) ce = ce - trailing > cs ? ce - trailing : cs;
        if (in_chars) {
            o[0] = char_to_byte(t, cs);
            o[1] = char_to_byte(t, ce);
        } else {
            o[0] = cs;
            o[1] = ce;
        }
    }
}

typedef struct enc_list {
    tok_enc *v;
    int n;
} enc_list;

static void set_type_ids(tok_enc *e, int type_id)
{
    for (int i = 0; i < e->n; i++) e->type_ids[i] = type_id;
}

static int process(tok_ctx *c, const tok_postproc *pp, enc_list *in, int add_special, tok_post_text *texts,
                   enc_list *out)
{
    switch (pp->kind) {
    case TOK_PP_TEMPLATE: {
        const tok_tpl_piece *v = in->n == 2 ? pp->pair : pp->single;
        int n = in->n == 2 ? pp->n_pair : pp->n_single;
        out->v = tok_alloc(&c->a, sizeof *out->v * (size_t)(n ? n : 1));
        out->n = 0;
        for (int i = 0; i < n; i++) {
            tok_enc e = {0};
            if (v[i].is_seq) {
                if (v[i].seq >= in->n) continue;
                tok_enc_append(c, &e, &in->v[v[i].seq]);
                set_type_ids(&e, v[i].type_id);
            } else {
                if (!add_special) continue;
                const tok_special *s = &pp->specials[v[i].special];
                for (int k = 0; k < s->n; k++)
                    tok_enc_push(c, &e, s->ids[k], v[i].type_id, 0, 0, -1, 1, s->toks[k], s->tok_lens[k]);
            }
            out->v[out->n++] = e;
        }
        return 0;
    }
    case TOK_PP_BERT:
    case TOK_PP_ROBERTA: {
        int roberta = pp->kind == TOK_PP_ROBERTA;
        if (roberta) {
            for (int i = 0; i < in->n; i++) {
                if (pp->trim_offsets) trim_offsets(c, &in->v[i], pp->add_prefix_space, texts);
                set_type_ids(&in->v[i], 0);
            }
        }
        if (!add_special) {
            *out = *in;
            return 0;
        }
        out->v = tok_alloc(&c->a, sizeof *out->v * (size_t)(in->n ? in->n : 1));
        out->n = in->n;
        for (int i = 0; i < in->n; i++) {
            tok_enc e = {0};
            const tok_enc *src = &in->v[i];
            int tid = roberta ? 0 : i;
            if (i == 0) tok_enc_push(c, &e, pp->cls_id, 0, 0, 0, -1, 1, pp->cls, pp->cls_len);
            else if (roberta) tok_enc_push(c, &e, pp->sep_id, 0, 0, 0, -1, 1, pp->sep, pp->sep_len);
            tok_enc_append(c, &e, src);
            tok_enc_push(c, &e, pp->sep_id, tid, 0, 0, -1, 1, pp->sep, pp->sep_len);
            out->v[i] = e;
        }
        return 0;
    }
    case TOK_PP_BYTELEVEL:
        if (pp->trim_offsets)
            for (int i = 0; i < in->n; i++) trim_offsets(c, &in->v[i], pp->add_prefix_space, texts);
        *out = *in;
        return 0;
    case TOK_PP_SEQUENCE: {
        enc_list cur = *in;
        for (int i = 0; i < pp->n_items; i++) {
            enc_list nx = {0};
            if (process(c, &pp->items[i], &cur, add_special, texts, &nx)) return -1;
            cur = nx;
        }
        *out = cur;
        return 0;
    }
    default:
        return iv_errf(c->err, IV_E_INTERNAL, "unknown post-processor kind %d", pp->kind);
    }
}

int tok_postprocess(tok_ctx *c, const tok_postproc *pp, tok_enc *encs, int n_enc, int add_special,
                    tok_post_text *texts, tok_enc *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < n_enc; i++) set_type_ids(&encs[i], i);
    enc_list in = {encs, n_enc}, res = {0};
    if (process(c, pp, &in, add_special, texts, &res)) return -1;
    for (int i = 0; i < res.n; i++) tok_enc_append(c, out, &res.v[i]);
    return 0;
}
