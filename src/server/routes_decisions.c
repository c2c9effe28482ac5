/* Typed decisions: POST /v1/systemone and its alias /v1/decisions (the
 * TypeSafe System One contract; docs/decisions.md).
 *
 * The body is validated as a whole first (decisions/contract.h): every
 * problem comes back at once as FastAPI's {"detail":[{type, loc, msg}]},
 * 422 for validation and 413 for a limit. Then the model's family lays out
 * one sequence per question (Laya: decisions/laya_layout.h), the engine
 * runs them as one job (the encoder's last hidden state), and the finish
 * function reads each question's option logits through the family's head,
 * calibrates them and writes {model, answers, usage}. No streaming. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "decisions/answer.h"
#include "decisions/clef.h"
#include "decisions/continuation.h"
#include "decisions/contract.h"
#include "decisions/laya.h"
#include "decisions/letters.h"
#include "decisions/pplx.h"
#include "server/routes_common.h"

typedef struct decision_job {
    iv_dq_request req;
    int **markers;      /* Laya: per question */
    cJSON **messages;   /* letters: per question */
    cJSON *chat_kwargs; /* letters: {"enable_thinking": false} */
    iv_clef_record clef; /* Clef: the joint sequence */
    iv_cont_plan cont;   /* continuation: the sequences and reads */
    /* A state with images: decoded once here, borrowed by every question's
     * sequences (decisions/state_images.h). */
    iv_image_set images;
    iv_prepared *prompts; /* continuation with images: each question's rendered prompt, its image runs expanded */
    int extended;
} decision_job;

static void decision_job_free(void *p)
{
    decision_job *d = p;
    if (!d) return;
    for (int i = 0; d->markers && i < d->req.n_questions; i++) free(d->markers[i]);
    free(d->markers);
    for (int i = 0; d->messages && i < d->req.n_questions; i++) cJSON_Delete(d->messages[i]);
    free(d->messages);
    cJSON_Delete(d->chat_kwargs);
    iv_clef_record_free(&d->clef);
    iv_cont_plan_free(&d->cont);
    for (int i = 0; d->prompts && i < d->req.n_questions; i++) iv_prepared_free(&d->prompts[i]);
    free(d->prompts);
    iv_image_set_free(&d->images);
    iv_dq_request_free(&d->req);
    free(d);
}

static void reply_detail(iv_req *r, const iv_dq_errors *e)
{
    iv_strbuf b;
    iv_sb_init(&b);
    iv_dq_errors_json(e, &b);
    iv_req_reply(r, e->status ? e->status : 422, "application/json", &b);
}

/* One detail item and the reply. */
static void fail_one(iv_req *r, int status, const char *type, const char *msg, const char *const *loc)
{
    iv_dq_errors e;
    iv_dq_errors_init(&e);
    iv_dq_error(&e, status, type, msg, loc);
    reply_detail(r, &e);
    iv_dq_errors_free(&e);
}

static void finish_laya(iv_req *r)
{
    if (iv_req_fail_if_job_failed(r)) return;
    decision_job *d = r->route_data;
    const iv_laya *L = iv_engine_laya(r->model->engine);
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_puts(&b, "{\"model\":");
    iv_sb_json_string(&b, r->model->served_name, strlen(r->model->served_name));
    iv_sb_puts(&b, ",\"answers\":{");
    long long tokens = 0;
    for (int i = 0; i < d->req.n_questions; i++) {
        const iv_dq_question *q = &d->req.questions[i];
        const iv_job_item *it = &r->job.items[i];
        const int k = q->n_options;
        float *logits = malloc(sizeof(float) * (size_t)k);
        double *p = malloc(sizeof(double) * (size_t)k);
        float act[16];
        iv_err err = {0};
        if (!logits || !p ||
            iv_laya_head_run(L->head, it->out, it->rows, (int)q->type, d->markers[i], k, logits,
                             iv_laya_head_n_act(L->head) <= 16 ? act : NULL, &err)) {
            free(logits), free(p), iv_sb_free(&b);
            iv_api_error e;
            iv_api_errorf(&e, IV_API_INTERNAL, "decision head failed: %s", err.msg[0] ? err.msg : "out of memory");
            iv_req_fail(r, &e);
            return;
        }
        const double t = iv_laya_temperature(&L->cfg, q->type, k);
        iv_dq_softmax(logits, k, t, p);
        if (i) iv_sb_putc(&b, ',');
        iv_sb_json_string(&b, q->id, strlen(q->id));
        iv_sb_putc(&b, ':');
        iv_dq_extras x = {.temperature = t, .tokens = it->n_tokens, .logits = logits,
                          .act_probability = iv_laya_head_n_act(L->head) <= 16 ? act[0] : -1};
        iv_dq_answer_json(&b, q, p, d->extended, &x);
        tokens += it->n_tokens;
        free(logits), free(p);
    }
    iv_sb_printf(&b, "},\"usage\":{\"input_tokens\":%lld,\"output_tokens\":0}}", tokens);
    iv_req_reply_json(r, &b);
}

/* Lays out one sequence per question and submits them (Laya). */
static void submit_laya(iv_req *r, iv_model_slot *m, decision_job *d)
{
    const iv_laya *L = iv_engine_laya(m->engine);
    const iv_tokenizer *tok = iv_engine_tokenizer(m->engine);
    const iv_dq_request *q = &d->req;
    iv_err err = {0};
    int32_t *st = NULL;
    int n_st = 0;
    if (iv_laya_encode(tok, &L->sp, q->state_text, &st, &n_st, &err)) {
        fail_one(r, 422, "value_error", err.msg, (const char *const[]){"body", "state", NULL});
        return;
    }
    if (n_st > r->srv->o.decision_max_state_tokens) {
        char msg[200];
        snprintf(msg, sizeof msg, "the state has %d tokens; this server reads at most %d", n_st,
                 r->srv->o.decision_max_state_tokens);
        free(st);
        fail_one(r, 413, "too_long", msg, (const char *const[]){"body", "state", NULL});
        return;
    }
    d->markers = calloc((size_t)q->n_questions, sizeof *d->markers);
    r->inputs.items = calloc((size_t)q->n_questions, sizeof *r->inputs.items);
    if (!d->markers || !r->inputs.items) {
        free(st);
        fail_one(r, 500, "internal_error", "out of memory", (const char *const[]){"body", NULL});
        return;
    }
    for (int i = 0; i < q->n_questions; i++) {
        const iv_dq_question *qq = &q->questions[i];
        int32_t *ids;
        int len;
        d->markers[i] = calloc((size_t)qq->n_options, sizeof(int));
        if (!d->markers[i] || iv_laya_build(tok, &L->sp, &L->cfg, qq, st, n_st, q->state_kind == IV_DQ_STATE_ARRAY,
                                            &ids, &len, d->markers[i], &err)) {
            free(st);
            fail_one(r, 422, "value_error", err.msg[0] ? err.msg : "out of memory",
                     (const char *const[]){"body", "questions", qq->id, NULL});
            return;
        }
        r->inputs.items[r->inputs.n++] = (iv_input){.ids = ids, .n_ids = len};
        for (int k = 0; k < qq->n_options; k++)
            if (d->markers[i][k] < 0) {
                char msg[200];
                snprintf(msg, sizeof msg, "the options do not fit this model's %d-token sequence", L->cfg.max_len);
                free(st);
                fail_one(r, 422, "value_error", msg, (const char *const[]){"body", "questions", qq->id, "criteria", NULL});
                return;
            }
    }
    free(st);
    iv_input_opts o = iv_input_opts_default();
    o.truncate = 0;
    o.no_fold = 1; /* typed decisions never fold (docs/prefix-folding.md) */
    iv_req_submit(r, m, IV_TASK_EMBED_ALL, &o, finish_laya);
}

/* Letters and pplx-decider v1: one classify output per question (the
 * option-token or readout logits at its last token). */
static void finish_last_token(iv_req *r)
{
    if (iv_req_fail_if_job_failed(r)) return;
    decision_job *d = r->route_data;
    const iv_pplx *P = iv_engine_pplx(r->model->engine);
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_puts(&b, "{\"model\":");
    iv_sb_json_string(&b, r->model->served_name, strlen(r->model->served_name));
    iv_sb_puts(&b, ",\"answers\":{");
    long long tokens = 0;
    for (int i = 0; i < d->req.n_questions; i++) {
        const iv_dq_question *q = &d->req.questions[i];
        const iv_job_item *it = &r->job.items[i];
        double p[IV_PPLX_MAX_CODES > IV_LETTERS_MAX ? IV_PPLX_MAX_CODES : IV_LETTERS_MAX];
        if (P) iv_pplx_probabilities(P, q, it->out, p);
        else iv_letters_probabilities(q, it->out, p);
        if (i) iv_sb_putc(&b, ',');
        iv_sb_json_string(&b, q->id, strlen(q->id));
        iv_sb_putc(&b, ':');
        iv_dq_extras x = {.temperature = P ? P->temperature : 1.0, .tokens = it->n_tokens, .logits = it->out,
                          .act_probability = -1};
        iv_dq_answer_json(&b, q, p, d->extended, &x);
        tokens += it->n_tokens;
    }
    iv_sb_printf(&b, "},\"usage\":{\"input_tokens\":%lld,\"output_tokens\":0}}", tokens);
    iv_req_reply_json(r, &b);
}

/* The state's tokens against --decision-max-state-tokens (replies 413; -1):
 * its text's, and with images their runs' (each image's tokens as the
 * processor lays them out) and the text between them. */
static int check_state_tokens(iv_req *r, const iv_tokenizer *tok, const decision_job *d)
{
    const iv_dq_request *q = &d->req;
    iv_encode_opts eo = iv_encode_opts_default();
    eo.add_special_tokens = 0;
    long long n = iv_image_set_tokens(&d->images);
    for (int k = 0; k <= q->n_images; k++) {
        const char *text = q->n_images ? q->state_pieces[k] : q->state_text;
        iv_encoding enc = {0};
        iv_err err = {0};
        if (iv_tokenizer_encode(tok, text, strlen(text), NULL, 0, &eo, &enc, &err)) {
            fail_one(r, 422, "value_error", err.msg, (const char *const[]){"body", "state", NULL});
            return -1;
        }
        n += enc.len;
        iv_encoding_free(&enc);
    }
    if (n <= r->srv->o.decision_max_state_tokens) return 0;
    char msg[300];
    if (q->n_images)
        snprintf(msg, sizeof msg, "the state has %lld tokens (%lld of them for its %d image(s)); this server reads at most %d",
                 n, (long long)iv_image_set_tokens(&d->images), q->n_images, r->srv->o.decision_max_state_tokens);
    else snprintf(msg, sizeof msg, "the state has %lld tokens; this server reads at most %d", n,
                  r->srv->o.decision_max_state_tokens);
    fail_one(r, 413, "too_long", msg, (const char *const[]){"body", "state", NULL});
    return -1;
}

/* The state's images decoded and preprocessed once, for every question
 * (replies 422 for a bad image, 413 over a size limit; -1). Only the
 * option-token recipes on a model with a vision tower read them. */
static int take_state_images(iv_req *r, iv_model_slot *m, decision_job *d)
{
    const iv_image_proc *ip = iv_engine_image_proc(m->engine);
    const char *family = iv_engine_decision_family(m->engine);
    const int recipe = !strcmp(family, "letters") || !strcmp(family, "continuation");
    if (!recipe || !ip) {
        char msg[400];
        if (!recipe)
            snprintf(msg, sizeof msg,
                     "the %s decision family reads no images here: the state may hold text only (images are read by "
                     "--decision-letters and --decision-continuation on a model with a vision tower)",
                     family);
        else snprintf(msg, sizeof msg, "model `%s` has no vision tower: the state may hold text only", m->served_name);
        fail_one(r, 422, "value_error", msg, (const char *const[]){"body", "state", NULL});
        return -1;
    }
    for (int k = 0; k < d->req.n_images; k++) {
        const char *src = d->req.image_src[k];
        iv_err err = {0};
        if (iv_image_set_add(ip, &d->images, src, strlen(src), &err)) {
            const int big = err.code == IV_E_TOO_LARGE, oom = err.code == IV_E_NOMEM;
            fail_one(r, oom ? 500 : big ? 413 : 422, oom ? "internal_error" : big ? "too_long" : "value_error",
                     err.msg, (const char *const[]){"body", "state", NULL});
            return -1;
        }
    }
    return 0;
}

/* One conversation per question, rendered by the chat template (letters,
 * pplx-decider v1). */
static void submit_letters(iv_req *r, iv_model_slot *m, decision_job *d)
{
    const iv_dq_request *q = &d->req;
    const iv_pplx *P = iv_engine_pplx(m->engine);
    const int max_options = P ? P->n_codes : iv_engine_decision_letters(m->engine);
    if (check_state_tokens(r, iv_engine_tokenizer(m->engine), d)) return;
    for (int i = 0; i < q->n_questions; i++)
        if (q->questions[i].n_options > max_options) {
            char msg[200];
            if (P) snprintf(msg, sizeof msg, "this model reads at most %d options (its answer codes)", max_options);
            else snprintf(msg, sizeof msg, "this model reads at most %d options (letters A..Z, a..z)", max_options);
            fail_one(r, 413, "too_long", msg, (const char *const[]){"body", "questions", q->questions[i].id, "criteria", NULL});
            return;
        }
    d->messages = calloc((size_t)q->n_questions, sizeof *d->messages);
    r->inputs.items = calloc((size_t)q->n_questions, sizeof *r->inputs.items);
    d->chat_kwargs = cJSON_CreateObject();
    if (!d->messages || !r->inputs.items || !d->chat_kwargs) {
        fail_one(r, 500, "internal_error", "out of memory", (const char *const[]){"body", NULL});
        return;
    }
    cJSON_AddFalseToObject(d->chat_kwargs, "enable_thinking");
    for (int i = 0; i < q->n_questions; i++) {
        d->messages[i] = P ? iv_pplx_messages(P, q, &q->questions[i]) : iv_letters_messages(q, &q->questions[i]);
        if (!d->messages[i]) {
            fail_one(r, 500, "internal_error", "out of memory", (const char *const[]){"body", NULL});
            return;
        }
        r->inputs.items[r->inputs.n++] =
            (iv_input){.messages = d->messages[i], .decoded_images = q->n_images ? &d->images : NULL};
    }
    iv_input_opts o = iv_input_opts_default();
    o.truncate = 0;
    o.generation_prompt = IV_GEN_PROMPT_ON;
    o.chat_kwargs = d->chat_kwargs;
    /* Folding stays on for text: on a causal backbone it is exact (the model refuses
     * it otherwise: pplx-decider's Qwen3.5 is recurrent), and the questions'
     * conversations share the template head and the state
     * (docs/prefix-folding.md: the server's own folding, not a client's
     * folded input). Folding happens within a batch: the questions go in
     * one. A state with images never folds (media requests reject folding,
     * the spec): the engine runs a batch with images unfolded anyway, and
     * no_fold also keeps its sequences out of the prefix cache. */
    o.no_fold = q->n_images > 0;
    iv_req_submit(r, m, IV_TASK_CLASSIFY, &o, finish_last_token);
}

/* Continuation: each question's options scored from the LM logits at the
 * end of its sequences (decisions/continuation.h). */
static void finish_continuation(iv_req *r)
{
    if (iv_req_fail_if_job_failed(r)) return;
    decision_job *d = r->route_data;
    int V = 0;
    const iv_cont_norm norm = (iv_cont_norm)iv_engine_decision_continuation(r->model->engine, &V);
    const iv_cont_plan *P = &d->cont;
    const float **logits = malloc(sizeof *logits * (size_t)P->n_seqs);
    double *lse = malloc(sizeof(double) * (size_t)P->n_seqs);
    int ok = logits && lse && r->job.n_items == P->n_seqs;
    for (int s = 0; ok && s < P->n_seqs; s++) {
        ok = r->job.items[s].rows == 1 && r->job.cols == V;
        logits[s] = r->job.items[s].out;
        if (ok) lse[s] = iv_cont_logsumexp(logits[s], V);
    }
    if (!ok) {
        free(logits), free(lse);
        iv_api_error e;
        iv_api_errorf(&e, IV_API_INTERNAL, "decision readout failed: unexpected engine output");
        iv_req_fail(r, &e);
        return;
    }
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_puts(&b, "{\"model\":");
    iv_sb_json_string(&b, r->model->served_name, strlen(r->model->served_name));
    iv_sb_puts(&b, ",\"answers\":{");
    long long tokens = 0;
    for (int i = 0; i < d->req.n_questions; i++) {
        const iv_dq_question *q = &d->req.questions[i];
        double *sc = malloc(sizeof(double) * (size_t)q->n_options), *p = malloc(sizeof(double) * (size_t)q->n_options);
        float *lf = malloc(sizeof(float) * (size_t)q->n_options);
        if (!sc || !p || !lf) {
            free(sc), free(p), free(lf), free(logits), free(lse), iv_sb_free(&b);
            iv_api_error e;
            iv_api_errorf(&e, IV_API_INTERNAL, "out of memory");
            iv_req_fail(r, &e);
            return;
        }
        iv_cont_probabilities(P, i, q, logits, lse, norm, sc, p);
        for (int j = 0; j < q->n_options; j++) lf[j] = (float)sc[j];
        if (i) iv_sb_putc(&b, ',');
        iv_sb_json_string(&b, q->id, strlen(q->id));
        iv_sb_putc(&b, ':');
        /* logits: the option scores (log-probs, summed or averaged). */
        iv_dq_extras x = {.temperature = 1.0, .tokens = P->q[i].tokens, .logits = lf, .act_probability = -1};
        iv_dq_answer_json(&b, q, p, d->extended, &x);
        tokens += P->q[i].tokens;
        free(sc), free(p), free(lf);
    }
    free(logits), free(lse);
    iv_sb_printf(&b, "},\"usage\":{\"input_tokens\":%lld,\"output_tokens\":0}}", tokens);
    iv_req_reply_json(r, &b);
}

/* Continuation with images: each question's prompt rendered through the
 * engine's conversation path (the state's images decoded once, their
 * placeholders expanded to the runs), so the plan's sequences start with
 * it (replies and returns -1 on an error). */
static int render_prompts(iv_req *r, iv_model_slot *m, decision_job *d, iv_cont_prefix **given)
{
    const iv_dq_request *q = &d->req;
    d->prompts = calloc((size_t)q->n_questions, sizeof *d->prompts);
    d->chat_kwargs = cJSON_CreateObject();
    *given = calloc((size_t)q->n_questions, sizeof **given);
    if (!d->prompts || !*given || !d->chat_kwargs || !cJSON_AddFalseToObject(d->chat_kwargs, "enable_thinking")) {
        free(*given);
        fail_one(r, 500, "internal_error", "out of memory", (const char *const[]){"body", NULL});
        return -1;
    }
    iv_input_opts o = iv_input_opts_default();
    o.truncate = 0;
    o.generation_prompt = IV_GEN_PROMPT_ON;
    o.chat_kwargs = d->chat_kwargs;
    for (int i = 0; i < q->n_questions; i++) {
        cJSON *msgs = iv_cont_messages(q, &q->questions[i]);
        iv_err err = {0};
        const iv_input in = {.messages = msgs, .decoded_images = &d->images};
        const int rc = !msgs ? iv_errf(&err, IV_E_NOMEM, "out of memory")
                             : iv_prepare_input(m->engine, &in, &o, &d->prompts[i], &err);
        cJSON_Delete(msgs);
        if (rc) {
            free(*given);
            const int oom = err.code == IV_E_NOMEM;
            fail_one(r, oom ? 500 : 422, oom ? "internal_error" : "value_error", err.msg,
                     (const char *const[]){"body", "questions", q->questions[i].id, NULL});
            return -1;
        }
        (*given)[i] = (iv_cont_prefix){d->prompts[i].seq.ids, d->prompts[i].seq.len};
    }
    return 0;
}

/* Continuation: each question's prompt rendered and tokenized here, its
 * sequences (prefix + continuation heads, deduplicated) submitted as ids. */
static void submit_continuation(iv_req *r, iv_model_slot *m, decision_job *d)
{
    const iv_dq_request *q = &d->req;
    const iv_tokenizer *tok = iv_engine_tokenizer(m->engine);
    if (check_state_tokens(r, tok, d)) return;
    int V = 0, bad = -1;
    iv_engine_decision_continuation(m->engine, &V);
    iv_err err = {0};
    iv_cont_prefix *given = NULL;
    if (q->n_images && render_prompts(r, m, d, &given)) return;
    const int rc = iv_cont_plan_build(q, iv_engine_chat_template(m->engine), given, tok, V, &d->cont, &bad, &err);
    free(given);
    if (rc) {
        const int oom = err.code == IV_E_NOMEM;
        if (bad >= 0 && !oom)
            fail_one(r, 422, "value_error", err.msg, (const char *const[]){"body", "questions", q->questions[bad].id, NULL});
        else fail_one(r, 500, "internal_error", err.msg[0] ? err.msg : "out of memory", (const char *const[]){"body", NULL});
        return;
    }
    const int max_seqs = iv_cont_max_sequences(V);
    if (d->cont.n_seqs > max_seqs) {
        char msg[300];
        snprintf(msg, sizeof msg,
                 "the options' continuations need %d scored sequences (one per continuation token after the "
                 "first, per question); this model reads at most %d per request",
                 d->cont.n_seqs, max_seqs);
        fail_one(r, 413, "too_long", msg, (const char *const[]){"body", "questions", NULL});
        return;
    }
    r->inputs.items = calloc((size_t)d->cont.n_seqs, sizeof *r->inputs.items);
    if (!r->inputs.items) {
        fail_one(r, 500, "internal_error", "out of memory", (const char *const[]){"body", NULL});
        return;
    }
    /* The inputs take the plan's ids (freed with the request); with images,
     * every sequence of a question carries its prompt's image runs. */
    for (int i = 0; i < q->n_questions; i++)
        for (int s = d->cont.q[i].first_seq; s < d->cont.q[i].first_seq + d->cont.q[i].n_seqs; s++) {
            iv_input in = {.ids = d->cont.seq_ids[s], .n_ids = d->cont.seq_len[s]};
            if (d->prompts) in.id_images = d->prompts[i].seq.images, in.n_id_images = d->prompts[i].seq.n_images;
            r->inputs.items[r->inputs.n++] = in;
            d->cont.seq_ids[s] = NULL;
        }
    iv_input_opts o = iv_input_opts_default();
    o.truncate = 0;
    o.no_fold = q->n_images > 0; /* media requests never fold (see submit_letters) */
    /* No no_fold: the sequences of a question share its whole prompt, and
     * the questions share the template head and the state; on a causal LM
     * the engine's folding computes each shared prefix once, exactly, within
     * a batch: the request's sequences go in one. */
    iv_req_submit(r, m, IV_TASK_CLASSIFY, &o, finish_continuation);
}

/* Clef: every question read off one joint sequence by the joint head. */
static void finish_clef(iv_req *r)
{
    if (iv_req_fail_if_job_failed(r)) return;
    decision_job *d = r->route_data;
    const iv_clef *C = iv_engine_clef(r->model->engine);
    const iv_job_item *it = &r->job.items[0];
    int n_opt = 0;
    for (int i = 0; i < d->req.n_questions; i++) n_opt += d->req.questions[i].n_options;
    float *logits = malloc(sizeof(float) * (size_t)n_opt);
    double *p = malloc(sizeof(double) * (size_t)n_opt);
    iv_err err = {0};
    if (!logits || !p || it->rows != d->clef.len || iv_clef_answer(C, &d->clef, it->out, logits, p, &err)) {
        free(logits), free(p);
        iv_api_error e;
        iv_api_errorf(&e, IV_API_INTERNAL, "decision head failed: %s", err.msg[0] ? err.msg : "out of memory");
        iv_req_fail(r, &e);
        return;
    }
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_puts(&b, "{\"model\":");
    iv_sb_json_string(&b, r->model->served_name, strlen(r->model->served_name));
    iv_sb_puts(&b, ",\"answers\":{");
    int k = 0;
    for (int i = 0; i < d->req.n_questions; i++) {
        const iv_dq_question *q = &d->req.questions[i];
        if (i) iv_sb_putc(&b, ',');
        iv_sb_json_string(&b, q->id, strlen(q->id));
        iv_sb_putc(&b, ':');
        /* tokens: the joint sequence every answer was read from. */
        iv_dq_extras x = {.temperature = 1.0, .tokens = d->clef.len, .logits = logits + k, .act_probability = -1};
        iv_dq_answer_json(&b, q, p + k, d->extended, &x);
        k += q->n_options;
    }
    iv_sb_printf(&b, "},\"usage\":{\"input_tokens\":%d,\"output_tokens\":0}}", d->clef.len);
    free(logits), free(p);
    iv_req_reply_json(r, &b);
}

/* Clef: the request as one joint sequence (decisions/clef.h). */
static void submit_clef(iv_req *r, iv_model_slot *m, decision_job *d)
{
    iv_err err = {0};
    /* encode_record's max_length (16384), or the model's limit when lower:
     * the state is cut to fit either way. */
    const int cap = iv_engine_max_input_length(m->engine);
    const int max_length = cap > 0 && cap < IV_CLEF_MAX_LENGTH ? cap : IV_CLEF_MAX_LENGTH;
    if (iv_clef_encode(iv_engine_tokenizer(m->engine), &d->req, max_length, &d->clef, &err)) {
        const int big = err.code == IV_E_TOO_LARGE;
        fail_one(r, big ? 413 : 422, big ? "too_long" : "value_error", err.msg,
                 (const char *const[]){"body", big ? "questions" : "state", NULL});
        return;
    }
    if (d->clef.state_tokens > r->srv->o.decision_max_state_tokens) {
        char msg[200];
        snprintf(msg, sizeof msg, "the state has %d tokens; this server reads at most %d", d->clef.state_tokens,
                 r->srv->o.decision_max_state_tokens);
        fail_one(r, 413, "too_long", msg, (const char *const[]){"body", "state", NULL});
        return;
    }
    /* The inputs own their ids (freed with the request); the head reads the record's. */
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)d->clef.len);
    r->inputs.items = calloc(1, sizeof *r->inputs.items);
    if (!r->inputs.items || !ids) {
        free(ids);
        fail_one(r, 500, "internal_error", "out of memory", (const char *const[]){"body", NULL});
        return;
    }
    memcpy(ids, d->clef.ids, sizeof(int32_t) * (size_t)d->clef.len);
    r->inputs.items[r->inputs.n++] = (iv_input){.ids = ids, .n_ids = d->clef.len};
    iv_input_opts o = iv_input_opts_default();
    o.truncate = 0;
    o.no_fold = 1;
    iv_req_submit(r, m, IV_TASK_EMBED_ALL, &o, finish_clef);
}

void iv_route_decisions(iv_req *r)
{
    if (iv_req_parse_json(r)) return;
    decision_job *d = calloc(1, sizeof *d);
    if (!d) {
        fail_one(r, 500, "internal_error", "out of memory", (const char *const[]){"body", NULL});
        return;
    }
    r->route_data = d;
    r->route_data_free = decision_job_free;
    iv_dq_errors e;
    iv_dq_errors_init(&e);
    if (iv_dq_parse(r->json, &r->srv->o.decision_limits, &d->req, &e)) {
        reply_detail(r, &e);
        iv_dq_errors_free(&e);
        return;
    }
    iv_dq_errors_free(&e);
    d->extended = d->req.extended || r->srv->o.decision_extended;
    iv_model_slot *m = iv_server_find_model(r->srv, d->req.model);
    if (!m) {
        char msg[600];
        snprintf(msg, sizeof msg, "the model `%.*s` is not served here", IV_UTF8_ECHO(400, d->req.model));
        iv_utf8_scrub(msg);
        fail_one(r, 404, "model_not_found", msg, (const char *const[]){"body", "model", NULL});
        return;
    }
    r->model = m;
    iv_req_count(r, d->req.n_questions == 1);
    if (!iv_engine_decision_family(m->engine)) {
        char msg[600];
        snprintf(msg, sizeof msg,
                 "the model `%s` does not answer typed decisions (a Laya, Clef or pplx-decider checkpoint does, or a "
                 "chat LM served with --decision-letters or --decision-continuation)",
                 m->served_name);
        fail_one(r, 422, "value_error", msg, (const char *const[]){"body", "model", NULL});
        return;
    }
    if (d->req.n_images && take_state_images(r, m, d)) return;
    if (iv_engine_laya(m->engine)) submit_laya(r, m, d);
    else if (iv_engine_clef(m->engine)) submit_clef(r, m, d);
    else if (iv_engine_decision_continuation(m->engine, NULL)) submit_continuation(r, m, d);
    else submit_letters(r, m, d);
}
