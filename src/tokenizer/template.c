/* TemplateProcessing: the "single" and "pair" templates of tokenizer.json
 * (object pieces, or the "[CLS] $A:0 [SEP]" string form), their special
 * tokens, and the Llama-style template transformers builds from
 * add_bos_token / add_eos_token. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "tokenizer/tok_internal.h"

static int find_special(const tok_postproc *pp, const char *name)
{
    for (int i = 0; i < pp->n_specials; i++)
        if (!strcmp(pp->specials[i].name, name)) return i;
    return -1;
}

static int parse_piece_string(const char *s, tok_tpl_piece *p, char **special_name)
{
    /* "$A", "$B:1", "$1", "[CLS]:0", ... */
    const char *colon = strchr(s, ':');
    size_t idlen = colon ? (size_t)(colon - s) : strlen(s);
    int type_id = 0;
    if (colon) {
        char *end;
        long v = strtol(colon + 1, &end, 10);
        if (*end || end == colon + 1 || v < 0) return -1;
        type_id = (int)v;
    }
    memset(p, 0, sizeof *p);
    p->type_id = type_id;
    *special_name = NULL;
    if (s[0] == '$') {
        p->is_seq = 1;
        const char *rest = s + 1;
        size_t rl = idlen - 1;
        if (rl == 0 || (rl == 1 && (rest[0] == 'A' || rest[0] == 'a'))) p->seq = 0;
        else if (rl == 1 && (rest[0] == 'B' || rest[0] == 'b')) p->seq = 1;
        else {
            char buf[16];
            if (rl >= sizeof buf) return -1;
            memcpy(buf, rest, rl);
            buf[rl] = 0;
            char *end;
            long v = strtol(buf, &end, 10);
            if (*end || v < 0) return -1;
            p->seq = 0;
            if (!colon) p->type_id = (int)v;
        }
        return 0;
    }
    *special_name = tok_xmemdup(s, idlen);
    return *special_name ? 0 : -1;
}

static int load_template(const cJSON *arr, tok_postproc *pp, tok_tpl_piece **out, int *n, const char *what,
                         const char *key, iv_err *err)
{
    if (cJSON_IsString(arr)) {
        /* "[CLS] $A [SEP]" shorthand, split on spaces. */
        cJSON *list = cJSON_CreateArray();
        char *copy = tok_xstrdup(arr->valuestring);
        if (!list || !copy) {
            cJSON_Delete(list);
            free(copy);
            return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
        }
        for (char *save = NULL, *t = strtok_r(copy, " ", &save); t; t = strtok_r(NULL, " ", &save))
            cJSON_AddItemToArray(list, cJSON_CreateString(t));
        free(copy);
        int rc = load_template(list, pp, out, n, what, key, err);
        cJSON_Delete(list);
        return rc;
    }
    if (!cJSON_IsArray(arr)) return iv_errf(err, IV_E_FORMAT, "%s: \"%s\" must be an array of pieces", what, key);
    int cnt = cJSON_GetArraySize(arr);
    *out = calloc((size_t)(cnt ? cnt : 1), sizeof **out);
    if (!*out) return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
    *n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        tok_tpl_piece *p = &(*out)[(*n)++];
        char *name = NULL;
        if (cJSON_IsString(it)) {
            if (parse_piece_string(it->valuestring, p, &name))
                return iv_errf(err, IV_E_FORMAT, "%s: cannot parse template piece \"%s\"", what, it->valuestring);
        } else {
            const cJSON *seq = cJSON_GetObjectItemCaseSensitive(it, "Sequence");
            const cJSON *sp = cJSON_GetObjectItemCaseSensitive(it, "SpecialToken");
            const cJSON *body = seq ? seq : sp;
            if (!body || !cJSON_IsObject(body))
                return iv_errf(err, IV_E_FORMAT, "%s: \"%s\" pieces must be {\"Sequence\": ...} or {\"SpecialToken\": ...}",
                               what, key);
            int64_t type_id = 0;
            if (iv_json_int_chk(body, "type_id", 0, &type_id, what, err)) return -1;
            p->type_id = (int)type_id;
            const char *id = iv_json_str(body, "id", NULL);
            if (!id) return iv_errf(err, IV_E_FORMAT, "%s: template piece without \"id\"", what);
            if (seq) {
                p->is_seq = 1;
                if (!strcmp(id, "A")) p->seq = 0;
                else if (!strcmp(id, "B")) p->seq = 1;
                else return iv_errf(err, IV_E_FORMAT, "%s: sequence id must be \"A\" or \"B\", got \"%s\"", what, id);
            } else {
                name = tok_xstrdup(id);
                if (!name) return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
            }
        }
        if (name) {
            p->special = find_special(pp, name);
            if (p->special < 0) {
                iv_errf(err, IV_E_FORMAT, "%s: template uses special token \"%s\" missing from \"special_tokens\"", what,
                        name);
                free(name);
                return -1;
            }
            free(name);
        }
    }
    return 0;
}

static int count_added(const tok_postproc *pp, const tok_tpl_piece *v, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!v[i].is_seq) k += pp->specials[v[i].special].n;
    return k;
}

static int load_specials(const cJSON *sp, tok_postproc *pp, const char *what, iv_err *err)
{
    if (!sp || cJSON_IsNull(sp)) return 0;
    if (!cJSON_IsObject(sp)) return iv_errf(err, IV_E_FORMAT, "%s: \"special_tokens\" must be an object", what);
    int cnt = cJSON_GetArraySize(sp);
    pp->specials = calloc((size_t)(cnt ? cnt : 1), sizeof *pp->specials);
    if (!pp->specials) return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
    const cJSON *it;
    cJSON_ArrayForEach(it, sp)
    {
        tok_special *s = &pp->specials[pp->n_specials++];
        s->name = tok_xstrdup(it->string);
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(it, "ids");
        const cJSON *toks = cJSON_GetObjectItemCaseSensitive(it, "tokens");
        if (!s->name) return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
        if (!cJSON_IsArray(ids) || !cJSON_IsArray(toks) || cJSON_GetArraySize(ids) != cJSON_GetArraySize(toks))
            return iv_errf(err, IV_E_FORMAT,
                           "%s: special token \"%s\" needs \"ids\" and \"tokens\" arrays of the same length", what,
                           it->string);
        int n = cJSON_GetArraySize(ids);
        s->ids = calloc((size_t)(n ? n : 1), sizeof *s->ids);
        s->toks = calloc((size_t)(n ? n : 1), sizeof *s->toks);
        s->tok_lens = calloc((size_t)(n ? n : 1), sizeof *s->tok_lens);
        if (!s->ids || !s->toks || !s->tok_lens) return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
        const cJSON *a = ids->child, *b = toks->child;
        for (int k = 0; k < n; k++, a = a->next, b = b->next) {
            if (!iv_json_is_integer(a) || a->valuedouble < 0 || !cJSON_IsString(b))
                return iv_errf(err, IV_E_FORMAT, "%s: special token \"%s\": bad id or token at %d", what, it->string, k);
            s->ids[k] = (int32_t)a->valuedouble;
            s->toks[k] = tok_xstrdup(b->valuestring);
            if (!s->toks[k]) return iv_errf(err, IV_E_NOMEM, "%s: out of memory", what);
            s->tok_lens[k] = (int32_t)strlen(b->valuestring);
            s->n = k + 1;
        }
    }
    return 0;
}

static int validate_template(tok_postproc *pp, const char *what, iv_err *err)
{
    int has_a = 0, has_b = 0;
    for (int i = 0; i < pp->n_pair; i++)
        if (pp->pair[i].is_seq) {
            has_a |= pp->pair[i].seq == 0;
            has_b |= pp->pair[i].seq == 1;
        }
    if (!has_a || !has_b) return iv_errf(err, IV_E_FORMAT, "%s: the \"pair\" template must use both $A and $B", what);
    pp->added_single = count_added(pp, pp->single, pp->n_single);
    pp->added_pair = count_added(pp, pp->pair, pp->n_pair);
    return 0;
}

int tok_load_template(const cJSON *j, tok_postproc *pp, const char *what, iv_err *err)
{
    pp->kind = TOK_PP_TEMPLATE;
    if (load_specials(cJSON_GetObjectItemCaseSensitive(j, "special_tokens"), pp, what, err)) return -1;
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(j, "single");
    const cJSON *pair = cJSON_GetObjectItemCaseSensitive(j, "pair");
    if (!single || !pair) return iv_errf(err, IV_E_FORMAT, "%s: \"single\" and \"pair\" are required", what);
    if (load_template(single, pp, &pp->single, &pp->n_single, what, "single", err) ||
        load_template(pair, pp, &pp->pair, &pp->n_pair, what, "pair", err))
        return -1;
    return validate_template(pp, what, err);
}

int tok_template_from_flags(tok_postproc *pp, const char *bos, int32_t bos_id, const char *eos, int32_t eos_id,
                            int add_bos, int add_eos, iv_err *err)
{
    /* transformers' update_post_processor():
     *   single = [bos:0] $A:0 [eos:0]
     *   pair   = single [bos:1] $B:1 [eos:1] */
    memset(pp, 0, sizeof *pp);
    pp->kind = TOK_PP_TEMPLATE;
    if (!bos) add_bos = 0;
    if (!eos) add_eos = 0;
    pp->specials = calloc(2, sizeof *pp->specials);
    pp->single = calloc(3, sizeof *pp->single);
    pp->pair = calloc(6, sizeof *pp->pair);
    if (!pp->specials || !pp->single || !pp->pair) return iv_errf(err, IV_E_NOMEM, "out of memory");
    int bos_idx = -1, eos_idx = -1;
    const char *names[2] = {bos, eos};
    int32_t ids[2] = {bos_id, eos_id};
    int use[2] = {add_bos, add_eos};
    for (int k = 0; k < 2; k++) {
        if (!use[k]) continue;
        if (k == 1 && add_bos && !strcmp(bos, eos)) {
            eos_idx = bos_idx;
            continue;
        }
        tok_special *s = &pp->specials[pp->n_specials];
        s->name = tok_xstrdup(names[k]);
        s->ids = malloc(sizeof *s->ids);
        s->toks = malloc(sizeof *s->toks);
        s->tok_lens = malloc(sizeof *s->tok_lens);
        if (!s->name || !s->ids || !s->toks || !s->tok_lens) return iv_errf(err, IV_E_NOMEM, "out of memory");
        s->toks[0] = tok_xstrdup(names[k]);
        if (!s->toks[0]) return iv_errf(err, IV_E_NOMEM, "out of memory");
        s->n = 1;
        s->ids[0] = ids[k];
        s->tok_lens[0] = (int32_t)strlen(names[k]);
        if (k == 0) bos_idx = pp->n_specials;
        else eos_idx = pp->n_specials;
        pp->n_specials++;
    }
    for (int pair = 0; pair < 2; pair++) {
        tok_tpl_piece *v = pair ? pp->pair : pp->single;
        int n = 0;
        for (int seq = 0; seq <= pair; seq++) {
            if (add_bos) v[n++] = (tok_tpl_piece){0, 0, seq, bos_idx};
            v[n++] = (tok_tpl_piece){1, seq, seq, 0};
            if (add_eos) v[n++] = (tok_tpl_piece){0, 0, seq, eos_idx};
        }
        if (pair) pp->n_pair = n;
        else pp->n_single = n;
    }
    pp->added_single = count_added(pp, pp->single, pp->n_single);
    pp->added_pair = count_added(pp, pp->pair, pp->n_pair);
    return 0;
}

