/* Token classification on the wire: POST /token_classify, and POST /predict
 * (and POST /, /invocations) when the model is a *ForTokenClassification
 * checkpoint. TEI has no token classification (TEI #707); the response is
 * what transformers' pipeline("token-classification") returns, which is
 * also the Hugging Face Inference API's shape:
 *   aggregation_strategy "none":  [{"entity","score","index","word","start","end"}]
 *   otherwise:                    [{"entity_group","score","word","start","end"}]
 * per input (a list of those for a list of inputs). Request:
 *   inputs: "text" | ["text", ...]
 *   aggregation_strategy: none (default) | simple | first | average | max
 *   ignore_labels: ["O"] (default) | [label, ...]
 *   raw_scores: false (logits instead of softmax probabilities)
 *   truncate, truncation_direction, model
 * The options may also sit in a "parameters" object (the Inference API's
 * {"inputs": ..., "parameters": {...}}). Errors use TEI's bodies. */
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "engine/token_entities.h"
#include "server/routes_common.h"

static int is_token_classifier(const iv_model_slot *m)
{
    return (m->caps & IV_CAN(IV_TASK_TOKEN_CLASSIFY)) && !(m->caps & IV_CAN(IV_TASK_CLASSIFY));
}

/* An option from "parameters" when it has it, else from the body. */
static const cJSON *opts_obj(const cJSON *body, const char *key)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(body, "parameters");
    if (cJSON_IsObject(p) && cJSON_GetObjectItemCaseSensitive(p, key)) return p;
    return body;
}

static int parse_strategy(const cJSON *body, int *out, iv_api_error *e)
{
    const char *s = NULL;
    *out = IV_AGG_NONE;
    if (iv_codec_opt_string(opts_obj(body, "aggregation_strategy"), "aggregation_strategy", &s, e)) return -1;
    iv_aggregation a;
    if (!s) return 0;
    if (iv_aggregation_parse(s, &a)) {
        iv_api_errorf(e, IV_API_JSON_DATA, "aggregation_strategy: unknown variant `%.*s`, expected one of %s",
                      IV_UTF8_ECHO(64, s), IV_AGGREGATION_NAMES);
        return -1;
    }
    *out = (int)a;
    return 0;
}

static int parse_ignore_labels(const cJSON *body, const cJSON **out, iv_api_error *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(opts_obj(body, "ignore_labels"), "ignore_labels");
    *out = NULL;
    if (!v || cJSON_IsNull(v)) return 0;
    int ok = cJSON_IsArray(v) && cJSON_GetArraySize(v) <= 1024;
    const cJSON *x;
    cJSON_ArrayForEach(x, v) if (!cJSON_IsString(x)) ok = 0;
    if (!ok) {
        iv_api_errorf(e, IV_API_JSON_DATA, "ignore_labels: invalid type, expected a list of label strings");
        return -1;
    }
    *out = v;
    return 0;
}

static void finish_token_classify(iv_req *r)
{
    if (iv_req_fail_if_job_failed(r)) return;
    const cJSON *ig = r->p.ignore_labels;
    const int n_ignore = ig ? cJSON_GetArraySize(ig) : 0;
    const char **ignore = ig ? calloc((size_t)(n_ignore ? n_ignore : 1), sizeof *ignore) : NULL;
    iv_strbuf b;
    iv_sb_init(&b);
    if (ig && !ignore) b.oom = 1;
    for (int k = 0; ignore && k < n_ignore; k++) ignore[k] = cJSON_GetArrayItem(ig, k)->valuestring;
    const iv_tokcls_opts o = {.aggregation = (iv_aggregation)r->p.aggregation,
                              .raw_scores = r->p.raw_scores,
                              .ignore_labels = ig ? ignore : NULL,
                              .n_ignore = n_ignore};
    if (!r->inputs.single) iv_sb_putc(&b, '[');
    for (int i = 0; !b.oom && i < r->job.n_items; i++) {
        const iv_job_item *it = &r->job.items[i];
        iv_token_entities ents;
        iv_err err = {0};
        if (iv_token_entities_build(r->model->engine, it->in.text, it->in.text_len, &it->prep.enc, it->out, &o, &ents,
                                    &err)) {
            iv_api_error e;
            iv_api_errorf(&e, IV_API_BACKEND, "Backend error: %s", err.msg);
            iv_sb_free(&b);
            free(ignore);
            iv_req_fail(r, &e);
            return;
        }
        /* Offsets into the request's text when the character limit cut its start. */
        const iv_input *given = &r->inputs.items[i];
        const int shift = (int)iv_utf8_count(given->text, (size_t)(it->in.text - given->text));
        for (int k = 0; k < ents.n; k++) {
            ents.items[k].start += shift;
            ents.items[k].end += shift;
        }
        if (i) iv_sb_putc(&b, ',');
        iv_token_entities_json(&b, &ents);
        iv_token_entities_free(&ents);
    }
    if (!r->inputs.single) iv_sb_putc(&b, ']');
    free(ignore);
    iv_req_reply_json(r, &b);
}

void iv_route_token_classify(iv_req *r)
{
    if (!r->json && iv_req_parse_json(r)) return;
    iv_api_error e;
    int truncate = -1, left = 0;
    if (iv_codec_inputs(r->json, "inputs", &r->inputs, &e) || parse_strategy(r->json, &r->p.aggregation, &e) ||
        parse_ignore_labels(r->json, &r->p.ignore_labels, &e) ||
        iv_codec_bool(opts_obj(r->json, "raw_scores"), "raw_scores", 0, &r->p.raw_scores, &e) ||
        iv_codec_opt_bool(opts_obj(r->json, "truncate"), "truncate", &truncate, &e) ||
        iv_codec_truncation_left(opts_obj(r->json, "truncation_direction"), &left, &e)) {
        iv_req_fail(r, &e);
        return;
    }
    iv_model_slot *m = iv_req_pick_model(r, "model");
    if (!m) return;
    r->model = m;
    iv_req_count(r, r->inputs.single);
    if (iv_req_check_batch(r, r->inputs.n)) return;
    if (!is_token_classifier(m)) {
        iv_req_not_supported(r, "Model is not a token classification model", "token_classify");
        return;
    }
    if (iv_route_check_nonempty(r, "inputs")) return;
    for (int i = 0; i < r->inputs.n; i++)
        if (!r->inputs.items[i].text) {
            iv_api_errorf(&e, IV_API_VALIDATION,
                          "Input validation error: token classification takes texts, not token ids (the entities "
                          "carry character offsets into the text)");
            iv_req_fail(r, &e);
            return;
        }
    iv_input_opts o;
    if (iv_route_input_opts(r, truncate, left, NULL, 0, &o)) return;
    r->p.metric_task = "predict";
    iv_metrics_inc(r->srv->metrics, "te_predict_count", r->inputs.n);
    iv_req_submit(r, m, IV_TASK_TOKEN_CLASSIFY, &o, finish_token_classify);
}

int iv_route_predict_tokens(iv_req *r)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(r->json, "model");
    const iv_model_slot *m = iv_server_find_model(r->srv, cJSON_IsString(name) ? name->valuestring : NULL);
    if (!m || !is_token_classifier(m)) return 0;
    iv_route_token_classify(r);
    return 1;
}
