#include "decisions/laya_layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/file.h"
#include "base/json.h"
#include "base/strbuf.h"

/* A special token's text in tokenizer_config.json: "..." or {"content": "..."}. */
static const char *special_text(const cJSON *cfg, const char *key, const char *def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsString(v)) return v->valuestring;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "content");
    return cJSON_IsString(c) ? c->valuestring : def;
}

int iv_laya_specials_load(iv_laya_specials *s, const iv_tokenizer *tok, const char *dir, iv_err *err)
{
    char path[4096];
    iv_path_join(path, sizeof path, dir, "tokenizer_config.json");
    cJSON *cfg = NULL;
    if (iv_file_exists(path) && iv_json_load_file(path, 1 << 24, &cfg, err)) return -1;
    const char *names[3] = {special_text(cfg, "cls_token", "[CLS]"), special_text(cfg, "sep_token", "[SEP]"),
                            special_text(cfg, "mask_token", "[MASK]")};
    int32_t *ids[3] = {&s->cls, &s->sep, &s->mask};
    int rc = 0;
    for (int i = 0; i < 3 && !rc; i++) {
        *ids[i] = iv_tokenizer_token_to_id(tok, names[i]);
        if (*ids[i] < 0) rc = iv_errf(err, IV_E_FORMAT, "tokenizer: no token \"%s\", which a Laya sequence needs", names[i]);
    }
    snprintf(s->mask_text, sizeof s->mask_text, "%s", names[2]);
    cJSON_Delete(cfg);
    return rc;
}

int iv_laya_encode(const iv_tokenizer *tok, const iv_laya_specials *s, const char *text, int32_t **ids, int *n,
                   iv_err *err)
{
    iv_strbuf b;
    iv_sb_init(&b);
    const size_t ml = strlen(s->mask_text);
    for (const char *p = text; *p;) {
        const char *hit = ml ? strstr(p, s->mask_text) : NULL;
        if (!hit) {
            iv_sb_puts(&b, p);
            break;
        }
        iv_sb_append(&b, p, (size_t)(hit - p));
        iv_sb_putc(&b, ' ');
        p = hit + ml;
    }
    iv_encode_opts o = iv_encode_opts_default();
    o.add_special_tokens = 0;
    iv_encoding enc = {0};
    int rc = iv_tokenizer_encode(tok, b.data ? b.data : "", b.len, NULL, 0, &o, &enc, err);
    iv_sb_free(&b);
    if (rc) return -1;
    *n = enc.len;
    *ids = malloc(sizeof(int32_t) * (size_t)(enc.len > 0 ? enc.len : 1));
    if (*ids) memcpy(*ids, enc.ids, sizeof(int32_t) * (size_t)enc.len);
    iv_encoding_free(&enc);
    return *ids ? 0 : iv_errf(err, IV_E_NOMEM, "out of memory");
}

/* laya common.render_options, one option. */
static void option_text(iv_strbuf *b, const iv_dq_question *q, int i)
{
    const iv_dq_option *o = &q->options[i];
    iv_sb_putc(b, ' ');
    if (q->type == IV_DQ_CHOICE) {
        iv_sb_puts(b, o->key);
        if (o->desc) iv_sb_puts(b, ": "), iv_sb_puts(b, o->desc);
    } else if (q->type == IV_DQ_SCORE) {
        iv_sb_printf(b, "level %d: %s", i, o->desc ? o->desc : "");
    } else {
        iv_sb_puts(b, i ? "true: " : "false: ");
        iv_sb_puts(b, o->desc ? o->desc : i ? "yes, the statement holds" : "no, the statement does not hold");
    }
}

int iv_laya_build(const iv_tokenizer *tok, const iv_laya_specials *s, const iv_laya_config *c, const iv_dq_question *q,
                  const int32_t *state_ids, int n_state, int truncate_left, int32_t **out, int *out_len, int *markers,
                  iv_err *err)
{
    const int k = q->n_options;
    int32_t **opt = calloc((size_t)k, sizeof *opt);
    int *opt_len = calloc((size_t)k, sizeof *opt_len);
    int32_t *head = NULL, *ids = NULL;
    int n_head = 0, rc = -1;
    iv_strbuf b;
    iv_sb_init(&b);
    if (!opt || !opt_len) goto done;
    iv_sb_printf(&b, "%s question: %s", iv_dq_type_name(q->type), q->instructions);
    if (iv_laya_encode(tok, s, b.data, &head, &n_head, err)) goto done;
    int opt_total = 0;
    for (int i = 0; i < k; i++) {
        iv_sb_reset(&b);
        option_text(&b, q, i);
        int32_t *t;
        int n;
        if (iv_laya_encode(tok, s, b.data, &t, &n, err)) goto done;
        if (n > 48) n = 48;
        opt[i] = malloc(sizeof(int32_t) * (size_t)(n + 1));
        if (!opt[i]) {
            free(t);
            goto done;
        }
        opt[i][0] = s->mask;
        memcpy(opt[i] + 1, t, sizeof(int32_t) * (size_t)n);
        free(t);
        opt_len[i] = n + 1;
        opt_total += n + 1;
    }
    int budget = c->head_max_len - opt_total;
    if (budget < 16) {
        int per = (c->head_max_len - 16) / (k > 1 ? k : 1);
        if (per < 4) per = 4;
        opt_total = 0;
        for (int i = 0; i < k; i++) {
            if (opt_len[i] > per) opt_len[i] = per;
            opt_total += opt_len[i];
        }
        budget = c->head_max_len - opt_total;
    }
    if (n_head > (budget > 8 ? budget : 8)) n_head = budget > 8 ? budget : 8;
    const int fixed = 1 + n_head + 1 + opt_total + 1;
    int room = c->max_len - fixed - 1;
    if (room < 0) room = 0;
    const int n_st = n_state < room ? n_state : room;
    const int total = fixed + n_st + 1;
    ids = malloc(sizeof(int32_t) * (size_t)total);
    if (!ids) goto done;
    int p = 0;
    ids[p++] = s->cls;
    memcpy(ids + p, head, sizeof(int32_t) * (size_t)n_head);
    p += n_head;
    ids[p++] = s->sep;
    for (int i = 0; i < k; i++) {
        markers[i] = p < c->max_len ? p : -1;
        memcpy(ids + p, opt[i], sizeof(int32_t) * (size_t)opt_len[i]);
        p += opt_len[i];
    }
    ids[p++] = s->sep;
    memcpy(ids + p, state_ids + (truncate_left ? n_state - n_st : 0), sizeof(int32_t) * (size_t)n_st);
    p += n_st;
    ids[p++] = s->sep;
    *out_len = p < c->max_len ? p : c->max_len;
    *out = ids;
    ids = NULL;
    rc = 0;
done:
    if (rc && !err->msg[0]) iv_errf(err, IV_E_NOMEM, "out of memory");
    for (int i = 0; opt && i < k; i++) free(opt[i]);
    free(opt);
    free(opt_len);
    free(head);
    free(ids);
    iv_sb_free(&b);
    return rc;
}
