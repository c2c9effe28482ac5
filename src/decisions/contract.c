#include "decisions/contract.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "base/utf8.h"
#include "decisions/pyjson.h"
#include "decisions/state_images.h"

const char *iv_dq_type_name(iv_dq_type t)
{
    return t == IV_DQ_CHOICE ? "choice" : t == IV_DQ_SCORE ? "score" : "noul";
}

void iv_dq_limits_default(iv_dq_limits *l)
{
    /* The peers' limits (reference/systemone-decisions.md 1.6): 64 questions
     * (Cloudflare Clef, laya-serve, colibri), 255 options (Jev, Perplexity,
     * Clef), 10 score levels (Jev, Perplexity, Clef). */
    l->max_questions = 64;
    l->max_options = 255;
    l->max_levels = 10;
    /* llama.cpp's server-decision takes at most 8 images (Clef's API 4). */
    l->max_images = 8;
    l->lenient = 0;
}

void iv_dq_errors_init(iv_dq_errors *e)
{
    e->n = 0;
    e->status = 0;
    iv_sb_init(&e->items);
}

void iv_dq_errors_free(iv_dq_errors *e) { iv_sb_free(&e->items); }

void iv_dq_error(iv_dq_errors *e, int status, const char *type, const char *msg, const char *const *loc)
{
    /* 422 unless every error is a size limit (then 413). */
    if (!e->status || (e->status == 413 && status != 413)) e->status = status;
    iv_strbuf *b = &e->items;
    if (e->n++) iv_sb_putc(b, ',');
    iv_sb_puts(b, "{\"type\":");
    iv_sb_json_string(b, type, strlen(type));
    iv_sb_puts(b, ",\"loc\":[");
    for (int i = 0; loc[i]; i++) {
        if (i) iv_sb_putc(b, ',');
        /* A client's key may be invalid UTF-8 only if the JSON parser let it
         * through; scrub a copy so the reply stays valid JSON. */
        char *s = strdup(loc[i]);
        if (!s) continue;
        iv_utf8_scrub(s);
        iv_sb_json_string(b, s, strlen(s));
        free(s);
    }
    iv_sb_puts(b, "],\"msg\":");
    iv_sb_json_string(b, msg, strlen(msg));
    iv_sb_putc(b, '}');
}

void iv_dq_errors_json(const iv_dq_errors *e, iv_strbuf *b)
{
    iv_sb_puts(b, "{\"detail\":[");
    iv_sb_append(b, e->items.data ? e->items.data : "", e->items.len);
    iv_sb_puts(b, "]}");
}

static char *xstrdup(const char *s) { return strdup(s ? s : ""); }

/* A criterion as the model reads it: a string as is, null or "" as no
 * description, anything else as JSON text (Laya's render_criterion). */
static char *render_criterion(const cJSON *v)
{
    if (!v || cJSON_IsNull(v)) return NULL;
    if (cJSON_IsString(v)) return v->valuestring[0] ? xstrdup(v->valuestring) : NULL;
    iv_strbuf b;
    iv_sb_init(&b);
    iv_pyjson_dumps(&b, v);
    char *s = xstrdup(b.data);
    iv_sb_free(&b);
    return s;
}

static char *json_text(const cJSON *v)
{
    if (cJSON_IsString(v)) return xstrdup(v->valuestring);
    iv_strbuf b;
    iv_sb_init(&b);
    iv_pyjson_dumps(&b, v);
    char *s = xstrdup(b.data);
    iv_sb_free(&b);
    return s;
}

static int add_option(iv_dq_question *q, const char *key, const cJSON *raw)
{
    iv_dq_option *o = &q->options[q->n_options++];
    o->key = xstrdup(key);
    o->raw = raw;
    o->desc = render_criterion(raw);
    return o->key ? 0 : -1;
}

#define LOC(...) ((const char *const[]){"body", __VA_ARGS__, NULL})

/* The criteria's count within [1, max] (422 below, 413 above, naming the
 * question) and room for that many options; -1 after reporting. */
static int alloc_criteria(const cJSON *crit, int max, const char *kind, const char *unit, iv_dq_question *q,
                          iv_dq_errors *e)
{
    const char *id = q->id;
    const int n = cJSON_GetArraySize(crit);
    char msg[160];
    if (n < 1) {
        snprintf(msg, sizeof msg, "a %s question needs at least 1 %s", kind, unit);
        iv_dq_error(e, 422, "too_short", msg, LOC("questions", id, "criteria"));
        return -1;
    }
    if (n > max) {
        snprintf(msg, sizeof msg, "a %s question has at most %d %ss; this one has %d", kind, max, unit, n);
        iv_dq_error(e, 413, "too_long", msg, LOC("questions", id, "criteria"));
        return -1;
    }
    q->options = calloc((size_t)n, sizeof *q->options);
    return q->options ? 0 : -1;
}

static void parse_choice(const cJSON *crit, const iv_dq_limits *lim, iv_dq_question *q, iv_dq_errors *e)
{
    const char *id = q->id;
    if (!cJSON_IsObject(crit) && !cJSON_IsArray(crit)) {
        iv_dq_error(e, 422, crit ? "dict_type" : "missing",
                    crit ? "a choice question takes criteria as an object of label -> description, or a list of labels"
                         : "Field required",
                    LOC("questions", id, "criteria"));
        return;
    }
    if (alloc_criteria(crit, lim->max_options, "choice", "option", q, e)) return;
    for (const cJSON *c = crit->child; c; c = c->next) {
        const char *label = cJSON_IsObject(crit) ? c->string : cJSON_IsString(c) ? c->valuestring : NULL;
        if (!label) {
            iv_dq_error(e, 422, "string_type", "a choice label must be a string", LOC("questions", id, "criteria"));
            return;
        }
        for (int i = 0; i < q->n_options; i++)
            if (!strcmp(q->options[i].key, label)) {
                iv_dq_error(e, 422, "value_error", "choice labels must be distinct",
                            LOC("questions", id, "criteria", label));
                return;
            }
        add_option(q, label, cJSON_IsObject(crit) ? c : NULL);
    }
}

static void parse_score(const cJSON *crit, const iv_dq_limits *lim, iv_dq_question *q, iv_dq_errors *e)
{
    const char *id = q->id;
    if (!cJSON_IsArray(crit)) {
        iv_dq_error(e, 422, crit ? "list_type" : "missing",
                    crit ? "a score question takes criteria as a list of level descriptions, index 0 first"
                         : "Field required",
                    LOC("questions", id, "criteria"));
        return;
    }
    if (alloc_criteria(crit, lim->max_levels, "score", "level", q, e)) return;
    int i = 0;
    for (const cJSON *c = crit->child; c; c = c->next, i++) {
        char key[16];
        snprintf(key, sizeof key, "%d", i);
        if (cJSON_IsNull(c)) {
            iv_dq_error(e, 422, "value_error", "a score level needs a description", LOC("questions", id, "criteria", key));
            return;
        }
        add_option(q, key, c);
        /* "" is a description here (Laya renders "level i: ") */
        if (!q->options[i].desc) q->options[i].desc = xstrdup("");
    }
}

static void parse_noul(const cJSON *crit, iv_dq_question *q, iv_dq_errors *e)
{
    const char *id = q->id;
    const cJSON *f = NULL, *t = NULL;
    if (crit && !cJSON_IsNull(crit)) {
        if (!cJSON_IsObject(crit)) {
            iv_dq_error(e, 422, "dict_type", "a noul question takes criteria as an object with \"true\" and/or \"false\"",
                        LOC("questions", id, "criteria"));
            return;
        }
        for (const cJSON *c = crit->child; c; c = c->next) {
            if (!strcasecmp(c->string, "true")) t = c;
            else if (!strcasecmp(c->string, "false")) f = c;
            else {
                iv_dq_error(e, 422, "extra_forbidden", "a noul criterion is keyed \"true\" or \"false\"",
                            LOC("questions", id, "criteria", c->string));
                return;
            }
        }
    }
    q->options = calloc(2, sizeof *q->options);
    if (!q->options) return;
    add_option(q, "false", f);
    add_option(q, "true", t);
}

static void parse_question(const cJSON *v, const iv_dq_limits *lim, iv_dq_question *q, iv_dq_errors *e)
{
    const char *id = q->id;
    if (!cJSON_IsObject(v)) {
        iv_dq_error(e, 422, "dict_type", "Input should be a valid dictionary", LOC("questions", id));
        return;
    }
    const cJSON *type = NULL, *ins = NULL, *crit = NULL;
    for (const cJSON *c = v->child; c; c = c->next) {
        if (!strcmp(c->string, "type")) type = c;
        else if (!strcmp(c->string, "instructions")) ins = c;
        else if (!strcmp(c->string, "criteria")) crit = c;
        else if (!lim->lenient)
            iv_dq_error(e, 422, "extra_forbidden", "Extra inputs are not permitted", LOC("questions", id, c->string));
    }
    if (!type) {
        iv_dq_error(e, 422, "missing", "Field required", LOC("questions", id, "type"));
        return;
    }
    if (!cJSON_IsString(type) || (strcmp(type->valuestring, "noul") && strcmp(type->valuestring, "choice") &&
                                  strcmp(type->valuestring, "score"))) {
        iv_dq_error(e, 422, "literal_error", "Input should be 'noul', 'choice' or 'score'", LOC("questions", id, "type"));
        return;
    }
    q->type = !strcmp(type->valuestring, "choice") ? IV_DQ_CHOICE
              : !strcmp(type->valuestring, "score") ? IV_DQ_SCORE
                                                     : IV_DQ_NOUL;
    /* Instructions: optional in the spec; a non-string is read as its JSON
     * text (Laya's _to_internal). */
    q->instructions = ins && !cJSON_IsNull(ins) ? json_text(ins) : xstrdup("");
    q->instructions_raw = ins;
    if (q->type == IV_DQ_CHOICE) parse_choice(crit, lim, q, e);
    else if (q->type == IV_DQ_SCORE) parse_score(crit, lim, q, e);
    else parse_noul(crit, q, e);
}

int iv_dq_parse(const cJSON *body, const iv_dq_limits *lim, iv_dq_request *out, iv_dq_errors *e)
{
    memset(out, 0, sizeof *out);
    if (!cJSON_IsObject(body)) {
        iv_dq_error(e, 422, "dict_type", "Input should be a valid dictionary", (const char *const[]){"body", NULL});
        return -1;
    }
    const cJSON *model = NULL, *state = NULL, *questions = NULL, *ext = NULL;
    for (const cJSON *c = body->child; c; c = c->next) {
        if (!strcmp(c->string, "model")) model = c;
        else if (!strcmp(c->string, "state")) state = c;
        else if (!strcmp(c->string, "questions")) questions = c;
        else if (!strcmp(c->string, "extended")) ext = c;
        else if (!strcmp(c->string, "assets")) /* TypeSafe's multipart/asset dialect: its format is not public */
            iv_dq_error(e, 422, "value_error",
                        "media assets are not supported: send images as image_url parts (data URLs) in the state",
                        LOC("assets"));
        else if (!lim->lenient) iv_dq_error(e, 422, "extra_forbidden", "Extra inputs are not permitted", LOC(c->string));
    }
    if (!model) iv_dq_error(e, 422, "missing", "Field required", LOC("model"));
    else if (!cJSON_IsString(model) || !model->valuestring[0])
        iv_dq_error(e, 422, "string_type", "Input should be a non-empty string", LOC("model"));
    else out->model = xstrdup(model->valuestring);
    if (ext && !cJSON_IsBool(ext)) iv_dq_error(e, 422, "bool_type", "Input should be a valid boolean", LOC("extended"));
    out->extended = ext && cJSON_IsTrue(ext);
    if (!state) iv_dq_error(e, 422, "missing", "Field required", LOC("state"));
    else if (!cJSON_IsString(state) && !cJSON_IsObject(state) && !cJSON_IsArray(state))
        iv_dq_error(e, 422, "type_error", "state must be a string, an object or an array", LOC("state"));
    else {
        out->state = state;
        out->state_kind = cJSON_IsString(state) ? IV_DQ_STATE_TEXT
                          : cJSON_IsObject(state) ? IV_DQ_STATE_OBJECT
                                                  : IV_DQ_STATE_ARRAY;
        out->state_text = json_text(state);
        iv_dq_state_images(state, lim, out, e);
    }
    if (!questions) iv_dq_error(e, 422, "missing", "Field required", LOC("questions"));
    else if (!cJSON_IsObject(questions))
        iv_dq_error(e, 422, "dict_type", "Input should be a valid dictionary", LOC("questions"));
    else {
        const int n = cJSON_GetArraySize(questions);
        if (n < 1)
            iv_dq_error(e, 422, "too_short", "Dictionary should have at least 1 item after validation, not 0",
                        LOC("questions"));
        else if (n > lim->max_questions) {
            char msg[160];
            snprintf(msg, sizeof msg, "at most %d questions per request; this one has %d", lim->max_questions, n);
            iv_dq_error(e, 413, "too_long", msg, LOC("questions"));
        } else {
            out->questions = calloc((size_t)n, sizeof *out->questions);
            if (!out->questions) {
                iv_dq_error(e, 422, "value_error", "out of memory", LOC("questions"));
            } else {
                for (const cJSON *c = questions->child; c; c = c->next) {
                    iv_dq_question *q = &out->questions[out->n_questions++];
                    q->id = xstrdup(c->string);
                    for (int i = 0; i < out->n_questions - 1; i++)
                        if (!strcmp(out->questions[i].id, q->id))
                            iv_dq_error(e, 422, "value_error", "duplicate question id", LOC("questions", q->id));
                    parse_question(c, lim, q, e);
                }
            }
        }
    }
    if (e->n) {
        iv_dq_request_free(out);
        return -1;
    }
    return 0;
}

void iv_dq_request_free(iv_dq_request *r)
{
    for (int i = 0; i < r->n_questions; i++) {
        iv_dq_question *q = &r->questions[i];
        for (int j = 0; j < q->n_options; j++) free(q->options[j].key), free(q->options[j].desc);
        free(q->options);
        free(q->id);
        free(q->instructions);
    }
    free(r->questions);
    free(r->state_text);
    iv_dq_state_images_free(r);
    free(r->model);
    memset(r, 0, sizeof *r);
}
