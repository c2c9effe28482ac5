#include "decisions/continuation.h"

#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "chat/chat_template.h"
#include "decisions/state_images.h"

#define SYSTEM_PROMPT "You answer one question about a state. Reply with exactly one of the options, and nothing else."

/* Option j of the prompt, as a question option index: noul shows yes
 * (true) first. */
static int option_at(const iv_dq_question *q, int j) { return q->type == IV_DQ_NOUL ? 1 - j : j; }

const char *iv_cont_text(const iv_dq_question *q, int j)
{
    if (q->type == IV_DQ_NOUL) return j == 1 ? "yes" : "no";
    return q->options[j].key; /* choice: the label; score: the level "i" */
}

cJSON *iv_cont_messages(const iv_dq_request *r, const iv_dq_question *q)
{
    /* What follows the state; a state with images becomes content parts. */
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_puts(&b, "\n\nQuestion: ");
    iv_sb_puts(&b, q->instructions);
    iv_sb_puts(&b, "\n\nOptions:\n");
    for (int j = 0; j < q->n_options; j++) {
        const int o = option_at(q, j);
        iv_sb_printf(&b, "- %s", iv_cont_text(q, o));
        if (q->options[o].desc && q->options[o].desc[0]) iv_sb_printf(&b, ": %s", q->options[o].desc);
        iv_sb_putc(&b, '\n');
    }
    iv_sb_puts(&b, "Answer with one option.");
    cJSON *msgs = b.oom ? NULL : iv_dq_messages(r, SYSTEM_PROMPT, b.data);
    iv_sb_free(&b);
    return msgs;
}

static int encode(const iv_tokenizer *tok, const char *text, size_t len, iv_encoding *enc, iv_err *err)
{
    iv_encode_opts eo = iv_encode_opts_default();
    eo.add_special_tokens = 0; /* the template wrote them, as apply_chat_template tokenizes */
    return iv_tokenizer_encode(tok, text, len, NULL, 0, &eo, enc, err);
}

/* The index of sequence ids[len] among the question's sequences, added when
 * new (the plan takes ids); -1 out of memory. */
static int intern_seq(iv_cont_plan *p, int first, int32_t *ids, int len)
{
    for (int s = first; s < p->n_seqs; s++)
        if (p->seq_len[s] == len && !memcmp(p->seq_ids[s], ids, sizeof(int32_t) * (size_t)len)) {
            free(ids);
            return s;
        }
    if (p->n_seqs == p->cap_seqs) {
        const int cap = p->cap_seqs ? 2 * p->cap_seqs : 16;
        int32_t **si = realloc(p->seq_ids, sizeof *si * (size_t)cap);
        if (si) p->seq_ids = si;
        int *sl = realloc(p->seq_len, sizeof *sl * (size_t)cap);
        if (sl) p->seq_len = sl;
        if (!si || !sl) {
            free(ids);
            return -1;
        }
        p->cap_seqs = cap;
    }
    p->seq_ids[p->n_seqs] = ids;
    p->seq_len[p->n_seqs] = len;
    return p->n_seqs++;
}

static int add_read(iv_cont_plan *p, int seq, int32_t token)
{
    if (p->n_reads == p->cap_reads) {
        const int cap = p->cap_reads ? 2 * p->cap_reads : 64;
        iv_cont_read *r = realloc(p->reads, sizeof *r * (size_t)cap);
        if (!r) return -1;
        p->reads = r;
        p->cap_reads = cap;
    }
    p->reads[p->n_reads++] = (iv_cont_read){seq, token};
    return 0;
}

/* Question qi's prefix: the conversation rendered by ct and tokenized. */
static int render_prefix(const iv_dq_request *r, const iv_dq_question *q, const iv_chat_template *ct,
                         const iv_tokenizer *tok, iv_encoding *pre, iv_err *err)
{
    cJSON *msgs = iv_cont_messages(r, q), *vars = cJSON_CreateObject();
    iv_strbuf text;
    iv_sb_init(&text);
    int rc = 0;
    if (!msgs || !vars || !cJSON_AddFalseToObject(vars, "enable_thinking"))
        rc = iv_errf(err, IV_E_NOMEM, "out of memory");
    if (!rc) rc = iv_chat_template_render(ct, msgs, NULL, vars, 1, NULL, &text, err);
    if (!rc && text.oom) rc = iv_errf(err, IV_E_NOMEM, "out of memory rendering the chat template");
    if (!rc) rc = encode(tok, text.data ? text.data : "", text.len, pre, err);
    cJSON_Delete(msgs);
    cJSON_Delete(vars);
    iv_sb_free(&text);
    return rc;
}

/* Question qi: per option the sequences prefix + cont[:t] and the reads. */
static int plan_question(const iv_dq_request *r, int qi, const int32_t *pre, int pre_len, const iv_tokenizer *tok,
                         int vocab, iv_cont_plan *p, iv_err *err)
{
    const iv_dq_question *q = &r->questions[qi];
    iv_cont_question *pq = &p->q[qi];
    pq->first_seq = p->n_seqs;
    pq->opt_off = calloc((size_t)q->n_options + 1, sizeof(int));
    int rc = pq->opt_off ? 0 : iv_errf(err, IV_E_NOMEM, "out of memory");
    pq->prefix_len = pre_len;
    pq->tokens = pre_len;
    for (int i = 0; !rc && i < pre_len; i++)
        if (pre[i] < 0 || pre[i] >= vocab)
            rc = iv_errf(err, IV_E_FORMAT, "token id %d is outside the LM head's %d rows", pre[i], vocab);
    for (int j = 0; !rc && j < q->n_options; j++) {
        pq->opt_off[j] = p->n_reads;
        const char *c = iv_cont_text(q, j);
        iv_encoding ce = {0};
        if (encode(tok, c, strlen(c), &ce, err)) {
            rc = -1;
            break;
        }
        if (ce.len == 0)
            rc = iv_errf(err, IV_E_INVALID, "the option \"%.100s\" has no tokens to score", c);
        for (int t = 0; !rc && t < ce.len; t++) {
            if (ce.ids[t] < 0 || ce.ids[t] >= vocab) {
                rc = iv_errf(err, IV_E_FORMAT, "token id %d is outside the LM head's %d rows", ce.ids[t], vocab);
                break;
            }
            /* The sequence whose last token predicts cont[t]: prefix + cont[:t]. */
            const int len = pre_len + t;
            int32_t *ids = malloc(sizeof(int32_t) * (size_t)(len > 0 ? len : 1));
            if (!ids) {
                rc = iv_errf(err, IV_E_NOMEM, "out of memory");
                break;
            }
            memcpy(ids, pre, sizeof(int32_t) * (size_t)pre_len);
            memcpy(ids + pre_len, ce.ids, sizeof(int32_t) * (size_t)t);
            const int s = intern_seq(p, pq->first_seq, ids, len);
            if (s < 0 || add_read(p, s, ce.ids[t])) rc = iv_errf(err, IV_E_NOMEM, "out of memory");
        }
        pq->tokens += ce.len;
        iv_encoding_free(&ce);
    }
    if (!rc && pre_len == 0) rc = iv_errf(err, IV_E_INVALID, "the chat template rendered an empty prompt");
    if (pq->opt_off) pq->opt_off[q->n_options] = p->n_reads;
    pq->n_seqs = p->n_seqs - pq->first_seq;
    return rc;
}

int iv_cont_plan_build(const iv_dq_request *r, const iv_chat_template *ct, const iv_cont_prefix *given,
                       const iv_tokenizer *tok, int vocab, iv_cont_plan *plan, int *bad_q, iv_err *err)
{
    memset(plan, 0, sizeof *plan);
    *bad_q = -1;
    plan->q = calloc((size_t)r->n_questions, sizeof *plan->q);
    if (!plan->q) return iv_errf(err, IV_E_NOMEM, "out of memory");
    plan->n_questions = r->n_questions;
    for (int i = 0; i < r->n_questions; i++) {
        iv_encoding pre = {0};
        int rc = given ? 0 : render_prefix(r, &r->questions[i], ct, tok, &pre, err);
        if (!rc)
            rc = given ? plan_question(r, i, given[i].ids, given[i].len, tok, vocab, plan, err)
                       : plan_question(r, i, pre.ids, pre.len, tok, vocab, plan, err);
        iv_encoding_free(&pre);
        if (rc) {
            *bad_q = i;
            return -1;
        }
    }
    return 0;
}

void iv_cont_plan_free(iv_cont_plan *plan)
{
    for (int s = 0; s < plan->n_seqs; s++) free(plan->seq_ids[s]);
    free(plan->seq_ids);
    free(plan->seq_len);
    free(plan->reads);
    for (int i = 0; plan->q && i < plan->n_questions; i++) free(plan->q[i].opt_off);
    free(plan->q);
    memset(plan, 0, sizeof *plan);
}

int iv_cont_max_sequences(int vocab)
{
    const int64_t by_bytes = IV_CONT_MAX_LOGIT_BYTES / ((int64_t)sizeof(float) * (vocab > 0 ? vocab : 1));
    return by_bytes < IV_CONT_MAX_SEQUENCES ? (int)(by_bytes > 0 ? by_bytes : 1) : IV_CONT_MAX_SEQUENCES;
}

double iv_cont_logsumexp(const float *logits, int vocab)
{
    double m = -INFINITY, s = 0;
    for (int v = 0; v < vocab; v++) m = logits[v] > m ? logits[v] : m;
    for (int v = 0; v < vocab; v++) s += exp((double)logits[v] - m);
    return m + log(s);
}

void iv_cont_probabilities(const iv_cont_plan *plan, int qi, const iv_dq_question *q, const float *const *logits,
                           const double *lse, iv_cont_norm norm, double *scores, double *p)
{
    const iv_cont_question *pq = &plan->q[qi];
    double m = -INFINITY, s = 0;
    for (int j = 0; j < q->n_options; j++) {
        double lp = 0;
        for (int k = pq->opt_off[j]; k < pq->opt_off[j + 1]; k++) {
            const iv_cont_read *rd = &plan->reads[k];
            lp += (double)logits[rd->seq][rd->token] - lse[rd->seq];
        }
        const int n = pq->opt_off[j + 1] - pq->opt_off[j];
        scores[j] = norm == IV_CONT_MEAN ? lp / n : lp;
        m = scores[j] > m ? scores[j] : m;
    }
    for (int j = 0; j < q->n_options; j++) s += (p[j] = exp(scores[j] - m));
    for (int j = 0; j < q->n_options; j++) p[j] /= s;
}
