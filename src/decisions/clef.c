#include "decisions/clef.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/file.h"
#include "base/json.h"
#include "base/strbuf.h"
#include "decisions/answer.h"
#include "decisions/pyjson.h"

#define CLEF_SYSTEM                                                                                                    \
    "Read the complete state and schema. Decide every field jointly. Each answer must be exactly one of that field's " \
    "allowed options."

int iv_clef_is_checkpoint(const char *dir)
{
    char p[4200];
    iv_path_join(p, sizeof p, dir, "joint_head_config.json");
    return iv_file_exists(p);
}

int iv_clef_parse_config(const cJSON *j, iv_clef_head_config *c, iv_err *err)
{
    if (!cJSON_IsObject(j)) return iv_errf(err, IV_E_FORMAT, "joint_head_config.json: not a JSON object");
    static const char *const names[] = {"hidden_size", "width", "routing_layers", "layers", "heads", "feedforward"};
    int *const dst[] = {&c->hidden_size, &c->width, &c->routing_layers, &c->layers, &c->heads, &c->feedforward};
    int seen[6] = {0};
    const cJSON *v;
    cJSON_ArrayForEach(v, j)
    {
        int k = 0;
        while (k < 6 && strcmp(v->string, names[k])) k++;
        if (k == 6) {
            /* JointSchemaHead(dropout=...) is training only. */
            if (!strcmp(v->string, "dropout") && cJSON_IsNumber(v)) continue;
            return iv_errf(err, IV_E_UNSUPPORTED,
                           "joint_head_config.json: unknown field \"%.60s\" (the published JointSchemaHead takes "
                           "hidden_size, width, routing_layers, layers, heads, feedforward)",
                           v->string);
        }
        const int min = k == 2 || k == 3 ? 0 : 1; /* routing and decoder layers may be 0 */
        if (!iv_json_is_integer(v) || v->valuedouble < min || v->valuedouble > (1 << 20))
            return iv_errf(err, IV_E_FORMAT, "joint_head_config.json: %s must be an integer >= %d", names[k], min);
        *dst[k] = (int)v->valuedouble;
        seen[k] = 1;
    }
    for (int k = 0; k < 6; k++)
        if (!seen[k]) return iv_errf(err, IV_E_FORMAT, "joint_head_config.json: %s is missing", names[k]);
    if (c->width % c->heads)
        return iv_errf(err, IV_E_FORMAT, "joint_head_config.json: width %d is not a multiple of heads %d", c->width,
                       c->heads);
    return 0;
}

void iv_clef_free(iv_clef *c)
{
    if (!c) return;
    iv_clef_head_free(c->head);
    iv_weights_close(c->w);
    free(c);
}

int iv_clef_load(iv_clef **out, const char *dir, int hidden, const float *out_emb, int64_t n_vocab, iv_err *err)
{
    *out = NULL;
    char path[4200];
    iv_path_join(path, sizeof path, dir, "joint_head_config.json");
    cJSON *j = NULL;
    if (iv_json_load_file(path, 1 << 20, &j, err)) return -1;
    iv_clef *c = calloc(1, sizeof *c);
    if (!c) {
        cJSON_Delete(j);
        return iv_errf(err, IV_E_NOMEM, "out of memory");
    }
    int rc = iv_clef_parse_config(j, &c->cfg, err);
    cJSON_Delete(j);
    if (!rc && c->cfg.hidden_size != hidden)
        rc = iv_errf(err, IV_E_FORMAT, "joint_head_config.json: hidden_size %d, but the backbone's is %d",
                     c->cfg.hidden_size, hidden);
    iv_path_join(path, sizeof path, dir, "joint_head.safetensors");
    if (!rc) rc = iv_weights_open_file(&c->w, path, err);
    if (!rc) rc = iv_clef_head_load(&c->head, c->w, &c->cfg, err);
    /* The head reads its weights for the whole run: no file under a server. */
    if (!rc) rc = iv_weights_own_mapped(c->w, err);
    if (rc) {
        iv_clef_free(c);
        return -1;
    }
    c->out_emb = out_emb;
    c->n_vocab = n_vocab;
    *out = c;
    return 0;
}

/* A growing token list. */
typedef struct ids_buf {
    int32_t *v;
    int n, cap;
} ids_buf;

/* Appends the tokens of one piece (tokenized alone, no special tokens added). */
static int piece(const iv_tokenizer *tok, ids_buf *b, const char *text, size_t len, iv_err *err)
{
    if (!len) return 0;
    iv_encode_opts eo = iv_encode_opts_default();
    eo.add_special_tokens = 0;
    iv_encoding enc = {0};
    if (iv_tokenizer_encode(tok, text, len, NULL, 0, &eo, &enc, err)) return -1;
    if (b->n + enc.len > b->cap) {
        int cap = b->cap ? b->cap : 256;
        while (cap < b->n + enc.len) cap *= 2;
        int32_t *v = realloc(b->v, sizeof *v * (size_t)cap);
        if (!v) {
            iv_encoding_free(&enc);
            return iv_errf(err, IV_E_NOMEM, "out of memory");
        }
        b->v = v, b->cap = cap;
    }
    memcpy(b->v + b->n, enc.ids, sizeof(int32_t) * (size_t)enc.len);
    b->n += enc.len;
    iv_encoding_free(&enc);
    return 0;
}

static int piece_s(const iv_tokenizer *tok, ids_buf *b, const char *text, iv_err *err)
{
    return piece(tok, b, text, strlen(text), err);
}

/* Clef's render(): a string as is, anything else compact JSON with sorted keys. */
static void render(iv_strbuf *s, const cJSON *v)
{
    if (cJSON_IsString(v)) iv_sb_puts(s, v->valuestring);
    else iv_pyjson_dumps_compact_sorted(s, v);
}

/* The published noul descriptions, used when the criteria give none. */
static const cJSON *noul_default(int is_true)
{
    static cJSON t = {.type = cJSON_String, .valuestring = "The proposition is true or the answer is yes."};
    static cJSON f = {.type = cJSON_String, .valuestring = "The proposition is false or the answer is no."};
    return is_true ? &t : &f;
}

static int cmp_key(const void *a, const void *b, void *ctx)
{
    const iv_dq_question *q = ctx;
    return strcmp(q->options[*(const int *)a].key, q->options[*(const int *)b].key);
}

/* Prompt order of q's options (indices into q->options). */
static void prompt_order(const iv_dq_question *q, int *order)
{
    for (int j = 0; j < q->n_options; j++) order[j] = j;
    if (q->type == IV_DQ_NOUL) order[0] = 1, order[1] = 0; /* true first */
    else if (q->type == IV_DQ_CHOICE) qsort_r(order, (size_t)q->n_options, sizeof *order, cmp_key, (void *)q);
}

/* The description of q's option i as encode_record writes it, or NULL for
 * none (a null one, or a choice given as a list of labels). */
static const cJSON *description(const iv_dq_question *q, int i)
{
    const cJSON *raw = q->options[i].raw;
    if (q->type == IV_DQ_NOUL && !raw) return noul_default(i == 1); /* absent: the default */
    return raw && !cJSON_IsNull(raw) ? raw : NULL;
}

void iv_clef_record_free(iv_clef_record *rec)
{
    free(rec->ids);
    free(rec->qs);
    free(rec->spans);
    free(rec->option_of);
    memset(rec, 0, sizeof *rec);
}

int iv_clef_encode(const iv_tokenizer *tok, const iv_dq_request *r, int max_length, iv_clef_record *out, iv_err *err)
{
    memset(out, 0, sizeof *out);
    int n_opt = 0;
    for (int i = 0; i < r->n_questions; i++) n_opt += r->questions[i].n_options;
    ids_buf schema = {0}, prefix = {0}, state = {0}, suffix = {0};
    iv_strbuf s;
    iv_sb_init(&s);
    out->n_questions = r->n_questions;
    out->qs = calloc((size_t)r->n_questions, sizeof *out->qs);
    out->spans = calloc((size_t)(2 * n_opt + 1), sizeof(int));
    out->option_of = calloc((size_t)(n_opt + 1), sizeof(int));
    int rc = !out->qs || !out->spans || !out->option_of ? iv_errf(err, IV_E_NOMEM, "out of memory") : 0;
    if (!rc) rc = piece_s(tok, &schema, "\n\nSCHEMA FIELDS:\n", err);
    int k = 0;
    for (int i = 0; i < r->n_questions && !rc; i++) {
        const iv_dq_question *q = &r->questions[i];
        iv_clef_question *cq = &out->qs[i];
        iv_sb_reset(&s);
        iv_sb_printf(&s, "\nFIELD %d\nID: %s\nTYPE: %s\nINSTRUCTION: ", i + 1, q->id, iv_dq_type_name(q->type));
        rc = piece(tok, &schema, s.data, s.len, err);
        cq->type = q->type == IV_DQ_NOUL ? 0 : q->type == IV_DQ_CHOICE ? 1 : 2;
        cq->q0 = schema.n;
        iv_sb_reset(&s);
        const cJSON *ins = q->instructions_raw;
        if (!ins || cJSON_IsNull(ins) || (cJSON_IsString(ins) && !ins->valuestring[0])) iv_sb_puts(&s, q->id);
        else render(&s, ins);
        if (!rc) rc = piece(tok, &schema, s.data, s.len, err);
        cq->q1 = schema.n;
        if (!rc) rc = piece_s(tok, &schema, "\nALLOWED OPTIONS:\n", err);
        cq->n_options = q->n_options;
        int *order = out->option_of + k;
        prompt_order(q, order);
        cq->o0 = out->spans + k;
        cq->o1 = out->spans + n_opt + k;
        for (int j = 0; j < q->n_options && !rc; j++) {
            iv_sb_reset(&s);
            iv_sb_printf(&s, "OPTION %d: ", j + 1);
            rc = piece(tok, &schema, s.data, s.len, err);
            out->spans[k + j] = schema.n;
            /* {"option_id": key, "description": d} with sorted keys. */
            iv_sb_reset(&s);
            const cJSON *desc = description(q, order[j]);
            iv_sb_putc(&s, '{');
            if (desc) {
                iv_sb_puts(&s, "\"description\":");
                iv_pyjson_dumps_compact_sorted(&s, desc);
                iv_sb_putc(&s, ',');
            }
            iv_sb_puts(&s, "\"option_id\":");
            iv_sb_json_string(&s, q->options[order[j]].key, strlen(q->options[order[j]].key));
            iv_sb_putc(&s, '}');
            if (!rc) rc = piece(tok, &schema, s.data, s.len, err);
            out->spans[n_opt + k + j] = schema.n;
            if (!rc) rc = piece_s(tok, &schema, "\n", err);
        }
        if (!rc) rc = piece_s(tok, &schema, "END FIELD\n", err);
        k += q->n_options;
    }
    if (!rc)
        rc = piece_s(tok, &prefix,
                     "<|im_start|>system\n" CLEF_SYSTEM "<|im_end|>\n<|im_start|>user\nSTATE:\n", err);
    if (!rc)
        rc = piece_s(tok, &suffix, "\n<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nJOINT SCHEMA DECISIONS:",
                     err);
    if (!rc && r->state) {
        iv_sb_reset(&s);
        render(&s, r->state);
        rc = piece(tok, &state, s.data ? s.data : "", s.len, err);
    }
    iv_sb_free(&s);
    const int fixed = prefix.n + schema.n + suffix.n;
    if (!rc && fixed > max_length)
        rc = iv_errf(err, IV_E_TOO_LARGE, "the questions take %d tokens before the state; this model reads at most %d",
                     fixed, max_length);
    if (!rc) {
        out->state_tokens = state.n;
        const int n_state = state.n < max_length - fixed ? state.n : max_length - fixed;
        out->len = fixed + n_state;
        out->ids = malloc(sizeof(int32_t) * (size_t)out->len);
        if (!out->ids) rc = iv_errf(err, IV_E_NOMEM, "out of memory");
        else {
            memcpy(out->ids, prefix.v, sizeof(int32_t) * (size_t)prefix.n);
            if (n_state) memcpy(out->ids + prefix.n, state.v, sizeof(int32_t) * (size_t)n_state);
            memcpy(out->ids + prefix.n + n_state, schema.v, sizeof(int32_t) * (size_t)schema.n);
            memcpy(out->ids + prefix.n + n_state + schema.n, suffix.v, sizeof(int32_t) * (size_t)suffix.n);
            const int off = prefix.n + n_state;
            for (int i = 0; i < out->n_questions; i++) out->qs[i].q0 += off, out->qs[i].q1 += off;
            for (int j = 0; j < 2 * n_opt; j++) out->spans[j] += off;
        }
    }
    free(schema.v), free(prefix.v), free(state.v), free(suffix.v);
    if (rc) iv_clef_record_free(out);
    return rc;
}

int iv_clef_answer(const iv_clef *c, const iv_clef_record *rec, const float *hidden,
                   float *logits, double *p, iv_err *err)
{
    int n_opt = 0;
    for (int i = 0; i < rec->n_questions; i++) n_opt += rec->qs[i].n_options;
    float *z = malloc(sizeof(float) * (size_t)(n_opt ? n_opt : 1));
    if (!z) return iv_errf(err, IV_E_NOMEM, "out of memory");
    if (iv_clef_head_run(c->head, hidden, rec->ids, rec->len, c->out_emb, c->n_vocab, rec->qs, rec->n_questions, z,
                         err)) {
        free(z);
        return -1;
    }
    /* Back to each question's option order; a plain softmax (no temperature). */
    int k = 0;
    for (int i = 0; i < rec->n_questions; i++) {
        const int n = rec->qs[i].n_options;
        for (int j = 0; j < n; j++) logits[k + rec->option_of[k + j]] = z[k + j];
        iv_dq_softmax(logits + k, n, 1.0, p + k);
        k += n;
    }
    free(z);
    return 0;
}
