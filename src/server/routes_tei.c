/* TEI's routes (router/src/http/server.rs): /embed, /embed_all,
 * /embed_sparse, /predict, /rerank, /similarity, /tokenize, /decode,
 * /info, and POST / (by model type). Request fields, defaults, checks and
 * their order, messages and response shapes follow TEI; an optional
 * "model" field picks one of several loaded models. Multi-vector (ColBERT)
 * models answer /embed and /embed_all with one token matrix per input
 * (docs/colbert.md) and refuse `dimensions`, `normalize: false` and
 * /similarity. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "engine/hub.h"
#include "server/routes_common.h"
#include "server/replica_report.h"

/* Fields shared by the embedding-style requests. */
typedef struct common_fields {
    int truncate; /* -1: server default */
    int left;
    const char *prompt_name;
} common_fields;

static int parse_common(iv_req *r, const cJSON *obj, common_fields *c, int with_prompt)
{
    iv_api_error e;
    if (iv_codec_opt_bool(obj, "truncate", &c->truncate, &e) || iv_codec_truncation_left(obj, &c->left, &e) ||
        (with_prompt && iv_codec_opt_string(obj, "prompt_name", &c->prompt_name, &e))) {
        iv_req_fail(r, &e);
        return -1;
    }
    return 0;
}

/* Parse, pick the model, count, and run the common checks of an
 * embedding-style route. Returns the model or NULL after replying. */
static iv_model_slot *begin_inputs(iv_req *r, const char *key)
{
    if (iv_req_parse_json(r)) return NULL;
    iv_api_error e;
    if (iv_codec_inputs(r->json, key, &r->inputs, &e)) {
        iv_req_fail(r, &e);
        return NULL;
    }
    iv_model_slot *m = iv_req_pick_model(r, "model");
    if (!m) return NULL;
    r->model = m;
    iv_req_count(r, r->inputs.single);
    if (iv_req_check_batch(r, r->inputs.n)) return NULL;
    return m;
}

/* ---- /embed ---- */

static void finish_similarity(iv_req *r);
static void finish_embed_all(iv_req *r);

static void finish_embed(iv_req *r)
{
    if (iv_req_fail_if_job_failed(r)) return;
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_putc(&b, '[');
    for (int i = 0; i < r->job.n_items; i++) {
        if (i) iv_sb_putc(&b, ',');
        int n = iv_route_finish_embedding(r, i);
        iv_sb_float_array(&b, r->job.items[i].out, (size_t)n);
    }
    iv_sb_putc(&b, ']');
    iv_req_reply_json(r, &b);
}

/* Checks `dimensions` against the model (TEI's messages). */
static int check_dimensions(iv_req *r, int64_t dims)
{
    if (dims < 0) return 0;
    iv_api_error e;
    if (dims == 0) iv_api_errorf(&e, IV_API_VALIDATION, "Input validation error: `dimensions` should be positive");
    else if (dims > iv_engine_embedding_dim(r->model->engine))
        iv_api_errorf(&e, IV_API_VALIDATION,
                      "Input validation error: `dimensions` should be smaller than the maximum embedding dimension.");
    else return 0;
    iv_req_fail(r, &e);
    return -1;
}

static void start_embed(iv_req *r, iv_model_slot *m, const common_fields *c, iv_task task, iv_finish_fn finish)
{
    iv_input_opts o;
    if (iv_route_check_nonempty(r, "inputs")) return;
    if (iv_route_input_opts(r, c->truncate, c->left, c->prompt_name, 1, &o)) return;
    r->p.metric_task = "embed";
    iv_metrics_inc(r->srv->metrics, "te_embed_count", r->inputs.n);
    iv_req_submit(r, m, task, &o, finish);
}

void iv_route_embed(iv_req *r)
{
    iv_model_slot *m = begin_inputs(r, "inputs");
    if (!m) return;
    common_fields c = {0};
    iv_api_error e;
    int64_t dims;
    if (parse_common(r, r->json, &c, 1) || iv_codec_bool(r->json, "normalize", 1, &r->p.normalize, &e) ||
        iv_codec_opt_uint(r->json, "dimensions", 1 << 30, &dims, &e)) {
        if (!r->has_reply) iv_req_fail(r, &e);
        return;
    }
    if (iv_route_is_multivector(m)) {
        if (dims >= 0) iv_route_refuse_multivector(r, "dimensions", "token vectors cannot be truncated");
        else if (!r->p.normalize)
            iv_route_refuse_multivector(r, "normalize", "its token vectors are always L2-normalised");
        else start_embed(r, m, &c, IV_TASK_MULTIVECTOR, finish_embed_all);
        return;
    }
    if (!(m->caps & IV_CAN(IV_TASK_EMBED))) {
        iv_req_not_supported(r, "Model is not an embedding model", "embed");
        return;
    }
    if (check_dimensions(r, dims)) return;
    r->p.dimensions = dims > 0 ? (int)dims : 0;
    r->p.renormalize = 1;
    start_embed(r, m, &c, IV_TASK_EMBED, finish_embed);
}

/* ---- /embed_all ---- */

static void finish_embed_all(iv_req *r)
{
    if (iv_req_fail_if_job_failed(r)) return;
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_putc(&b, '[');
    const int cols = r->job.cols;
    for (int i = 0; i < r->job.n_items; i++) {
        const iv_job_item *it = &r->job.items[i];
        iv_sb_puts(&b, i ? ",[" : "[");
        for (int t = 0; t < it->rows; t++) {
            if (t) iv_sb_putc(&b, ',');
            iv_sb_float_array(&b, it->out + (size_t)t * cols, (size_t)cols);
        }
        iv_sb_putc(&b, ']');
    }
    iv_sb_putc(&b, ']');
    iv_req_reply_json(r, &b);
}

/* The shared start of TEI routes over "inputs": the model, the common
 * fields, and the capability the route needs (else a 4xx naming what the
 * model serves). NULL when a reply has been sent. */
static iv_model_slot *begin_task_route(iv_req *r, common_fields *c, iv_task need, const char *not_msg,
                                       const char *route)
{
    iv_model_slot *m = begin_inputs(r, "inputs");
    if (!m || parse_common(r, r->json, c, 1)) return NULL;
    if (!(m->caps & IV_CAN(need))) {
        iv_req_not_supported(r, not_msg, route);
        return NULL;
    }
    return m;
}

void iv_route_embed_all(iv_req *r)
{
    common_fields c = {0};
    iv_model_slot *m = begin_task_route(r, &c, IV_TASK_EMBED_ALL, "Model is not an embedding model", "embed");
    if (!m) return;
    /* Multi-vector models give their kept, projected token vectors here
     * too, not the raw hidden states (docs/colbert.md). */
    start_embed(r, m, &c, iv_route_is_multivector(m) ? IV_TASK_MULTIVECTOR : IV_TASK_EMBED_ALL, finish_embed_all);
}

/* ---- /embed_sparse ---- */

static void finish_sparse(iv_req *r)
{
    if (iv_req_fail_if_job_failed(r)) return;
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_putc(&b, '[');
    for (int i = 0; i < r->job.n_items; i++) {
        if (i) iv_sb_putc(&b, ',');
        iv_codec_sparse(&b, r->job.items[i].out, r->job.cols);
    }
    iv_sb_putc(&b, ']');
    iv_req_reply_json(r, &b);
}

void iv_route_embed_sparse(iv_req *r)
{
    common_fields c = {0};
    iv_model_slot *m =
        begin_task_route(r, &c, IV_TASK_SPARSE, "Model is not an embedding model with SPLADE pooling", "embed_sparse");
    if (!m) return;
    iv_input_opts o;
    if (iv_route_check_nonempty(r, "inputs")) return;
    if (iv_route_input_opts(r, c.truncate, c.left, c.prompt_name, 1, &o)) return;
    r->p.metric_task = "embed";
    iv_metrics_inc(r->srv->metrics, "te_embed_count", r->inputs.n);
    iv_req_submit(r, m, IV_TASK_SPARSE, &o, finish_sparse);
}

/* ---- /predict ---- */

static void put_predictions(iv_req *r, iv_strbuf *b, int i, int *order)
{
    const float *s = r->job.items[i].out;
    iv_sb_putc(b, '[');
    for (int k = 0; k < r->job.cols; k++) {
        const char *label = iv_engine_label(r->model->engine, order[k]);
        iv_sb_puts(b, k ? ",{\"score\":" : "{\"score\":");
        iv_sb_float(b, s[order[k]]);
        iv_sb_puts(b, ",\"label\":");
        iv_sb_json_string(b, label, strlen(label));
        iv_sb_putc(b, '}');
    }
    iv_sb_putc(b, ']');
}

static void finish_predict(iv_req *r)
{
    if (iv_req_fail_if_job_failed(r)) return;
    int *order = malloc((size_t)r->job.cols * sizeof *order);
    iv_strbuf b;
    iv_sb_init(&b);
    if (!order) b.oom = 1;
    /* POST / answers the Hugging Face Inference API's [[...]] even for one
     * input (huggingface_hub's InferenceClient.text_classification reads
     * that shape); /predict keeps TEI's flat list. */
    const int wrap = !r->inputs.single || !strcmp(r->path, "/");
    if (wrap) iv_sb_putc(&b, '[');
    for (int i = 0; order && i < r->job.n_items; i++) {
        if (iv_route_scores(r, i, r->p.raw_scores, order)) {
            free(order);
            iv_sb_free(&b);
            return;
        }
        if (i) iv_sb_putc(&b, ',');
        put_predictions(r, &b, i, order);
    }
    if (wrap) iv_sb_putc(&b, ']');
    free(order);
    iv_req_reply_json(r, &b);
}

void iv_route_predict(iv_req *r)
{
    if (!r->json && iv_req_parse_json(r)) return;
    if (iv_route_predict_tokens(r)) return;
    iv_api_error e;
    common_fields c = {0};
    if (iv_codec_predict_inputs(r->json, "inputs", &r->inputs, &e) ||
        iv_codec_bool(r->json, "raw_scores", 0, &r->p.raw_scores, &e)) {
        iv_req_fail(r, &e);
        return;
    }
    if (parse_common(r, r->json, &c, 0)) return;
    iv_model_slot *m = iv_req_pick_model(r, "model");
    if (!m) return;
    r->model = m;
    iv_req_count(r, r->inputs.single);
    if (iv_req_check_batch(r, r->inputs.n)) return;
    if (!(m->caps & IV_CAN(IV_TASK_CLASSIFY))) {
        iv_req_not_supported(r, "Model is not a classifier model", "classify");
        return;
    }
    iv_input_opts o;
    if (iv_route_check_nonempty(r, "inputs")) return;
    if (iv_route_input_opts(r, c.truncate, c.left, NULL, 0, &o)) return;
    r->p.metric_task = "predict";
    iv_metrics_inc(r->srv->metrics, "te_predict_count", r->inputs.n);
    iv_req_submit(r, m, IV_TASK_CLASSIFY, &o, finish_predict);
}

/* ---- /rerank ---- */

static void finish_rerank(iv_req *r)
{
    if (iv_req_fail_if_job_failed(r)) return;
    iv_rank *ranks = iv_rerank_ranks(r);
    if (!ranks) return;
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_putc(&b, '[');
    for (int k = 0; k < r->job.n_items; k++) {
        const iv_input *in = &r->inputs.items[ranks[k].index];
        iv_sb_printf(&b, "%s{\"index\":%d,", k ? "," : "", ranks[k].index);
        if (r->p.return_text) {
            iv_sb_puts(&b, "\"text\":");
            iv_sb_json_string(&b, in->pair, in->pair_len);
            iv_sb_putc(&b, ',');
        }
        iv_sb_puts(&b, "\"score\":");
        iv_sb_float(&b, ranks[k].score);
        iv_sb_putc(&b, '}');
    }
    iv_sb_putc(&b, ']');
    free(ranks);
    iv_req_reply_json(r, &b);
}

void iv_route_rerank(iv_req *r)
{
    if (iv_req_parse_json(r)) return;
    if (cJSON_GetObjectItemCaseSensitive(r->json, "documents")) {
        r->flavour = IV_FLAVOUR_INFINITY;
        iv_route_infinity_rerank(r);
        return;
    }
    iv_api_error e;
    const char *query;
    common_fields c = {0};
    if (iv_codec_required_string(r->json, "query", &query, &e) ||
        iv_codec_string_list(r->json, "texts", &r->inputs, &e) ||
        iv_codec_bool(r->json, "raw_scores", 0, &r->p.raw_scores, &e) ||
        iv_codec_bool(r->json, "return_text", 0, &r->p.return_text, &e)) {
        iv_req_fail(r, &e);
        return;
    }
    if (parse_common(r, r->json, &c, 0)) return;
    if (r->inputs.n == 0) {
        iv_api_errorf(&e, IV_API_EMPTY, "`texts` cannot be empty");
        iv_req_fail(r, &e);
        return;
    }
    iv_model_slot *m = iv_route_reranker(r);
    if (!m) return;
    iv_req_count(r, 0);
    if (iv_req_check_batch(r, r->inputs.n)) return;
    iv_route_submit_rerank(r, m, cJSON_GetObjectItemCaseSensitive(r->json, "query"), "texts", c.truncate, c.left, finish_rerank);
}

/* ---- /similarity ---- */

static void finish_similarity(iv_req *r)
{
    if (iv_req_fail_if_job_failed(r)) return;
    const int dim = r->job.cols;
    const float *src = r->job.items[0].out;
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_putc(&b, '[');
    for (int i = 1; i < r->job.n_items; i++) {
        const float *v = r->job.items[i].out;
        double ab = 0, aa = 0, bb = 0;
        for (int k = 0; k < dim; k++) {
            ab += (double)src[k] * v[k];
            aa += (double)src[k] * src[k];
            bb += (double)v[k] * v[k];
        }
        /* simsimd's cosine distance, turned back into a similarity as TEI does. */
        double sim = aa == 0 && bb == 0 ? 1.0 : aa == 0 || bb == 0 ? 0.0 : ab / sqrt(aa * bb);
        if (i > 1) iv_sb_putc(&b, ',');
        iv_sb_float(&b, (float)sim);
    }
    iv_sb_putc(&b, ']');
    iv_req_reply_json(r, &b);
}

void iv_route_similarity(iv_req *r)
{
    if (iv_req_parse_json(r)) return;
    iv_api_error e;
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(r->json, "inputs");
    if (!in) {
        iv_api_errorf(&e, IV_API_JSON_DATA, "missing field `inputs`");
        iv_req_fail(r, &e);
        return;
    }
    if (!cJSON_IsObject(in)) {
        iv_api_errorf(&e, IV_API_JSON_DATA, "inputs: invalid type, expected struct SimilarityInput");
        iv_req_fail(r, &e);
        return;
    }
    const char *source;
    iv_inputs sentences;
    if (iv_codec_required_string(in, "source_sentence", &source, &e) ||
        iv_codec_string_list(in, "sentences", &sentences, &e)) {
        iv_req_fail(r, &e);
        return;
    }
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(r->json, "parameters");
    common_fields c = {.truncate = -1};
    if (params && !cJSON_IsNull(params)) {
        if (!cJSON_IsObject(params)) {
            iv_inputs_free(&sentences);
            iv_api_errorf(&e, IV_API_JSON_DATA, "parameters: invalid type, expected struct SimilarityParameters");
            iv_req_fail(r, &e);
            return;
        }
        if (parse_common(r, params, &c, 1)) {
            iv_inputs_free(&sentences);
            return;
        }
    }
    if (sentences.n == 0) {
        iv_inputs_free(&sentences);
        iv_api_errorf(&e, IV_API_EMPTY, "`inputs.sentences` cannot be empty");
        iv_req_fail(r, &e);
        return;
    }
    /* Inputs: the source sentence, then the sentences. */
    r->inputs.n = sentences.n + 1;
    r->inputs.items = calloc((size_t)r->inputs.n, sizeof *r->inputs.items);
    if (!r->inputs.items) {
        iv_inputs_free(&sentences);
        iv_api_errorf(&e, IV_API_INTERNAL, "out of memory");
        iv_req_fail(r, &e);
        return;
    }
    const size_t source_len = iv_codec_str_len(cJSON_GetObjectItemCaseSensitive(in, "source_sentence"));
    r->inputs.items[0].text = source;
    r->inputs.items[0].text_len = source_len;
    memcpy(r->inputs.items + 1, sentences.items, (size_t)sentences.n * sizeof *sentences.items);
    r->inputs.n_chars = sentences.n_chars + iv_utf8_count(source, source_len);
    free(sentences.items);
    if (iv_req_check_batch(r, r->inputs.n)) return;
    iv_model_slot *m = iv_req_pick_model(r, "model");
    if (!m) return;
    r->model = m;
    iv_req_count(r, 0);
    if (iv_route_is_multivector(m)) {
        iv_api_errorf(&e, IV_API_VALIDATION,
                      "Input validation error: /similarity compares single vectors; model `%.*s` is multi-vector "
                      "(one matrix per input): get the matrices from /embed and score them with MaxSim",
                      IV_UTF8_ECHO(200, m->served_name));
        iv_req_fail(r, &e);
        return;
    }
    if (!(m->caps & IV_CAN(IV_TASK_EMBED))) {
        iv_req_not_supported(r, "Model is not an embedding model", "embed");
        return;
    }
    r->p.normalize = 0;
    start_embed(r, m, &c, IV_TASK_EMBED, finish_similarity);
}

/* ---- /tokenize ---- */

static void put_tokens(iv_strbuf *b, const iv_encoding *enc, const char *text, size_t len)
{
    iv_sb_putc(b, '[');
    for (int t = 0; t < enc->len; t++) {
        if (t) iv_sb_putc(b, ',');
        iv_sb_printf(b, "{\"id\":%d,\"text\":", enc->ids[t]);
        int special = enc->special_mask && enc->special_mask[t];
        if (special) {
            const char *tok = enc->tokens && enc->tokens[t] ? enc->tokens[t] : "";
            iv_sb_json_string(b, tok, strlen(tok));
            iv_sb_puts(b, ",\"special\":true,\"start\":null,\"stop\":null}");
            continue;
        }
        /* Byte offsets into the (prompted) input, as TEI returns them. */
        int32_t s = enc->offsets[2 * t], e = enc->offsets[2 * t + 1];
        if (s < 0) s = 0;
        if (e > (int32_t)len) e = (int32_t)len;
        if (e < s) e = s;
        iv_sb_json_string(b, text + s, (size_t)(e - s));
        iv_sb_printf(b, ",\"special\":false,\"start\":%d,\"stop\":%d}", s, e);
    }
    iv_sb_putc(b, ']');
}

/* The limits of every other route apply (TEI's character cap of 250 x the
 * token limit, the token limit with the truncation rule, the batch size,
 * the permits), so the reply is bounded: at most the model's limit in
 * tokens per input. */
void iv_route_tokenize(iv_req *r)
{
    if (iv_req_parse_json(r)) return;
    iv_api_error e;
    const char *prompt_name;
    int add_special;
    common_fields c = {.truncate = -1};
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->json, "inputs");
    if (v && !cJSON_IsString(v)) {
        if (iv_codec_string_list(r->json, "inputs", &r->inputs, &e)) {
            iv_req_fail(r, &e);
            return;
        }
    } else if (iv_codec_inputs(r->json, "inputs", &r->inputs, &e)) {
        iv_req_fail(r, &e);
        return;
    }
    if (iv_codec_bool(r->json, "add_special_tokens", 1, &add_special, &e) ||
        iv_codec_opt_string(r->json, "prompt_name", &prompt_name, &e)) {
        iv_req_fail(r, &e);
        return;
    }
    if (parse_common(r, r->json, &c, 0)) return;
    iv_model_slot *m = iv_req_pick_model(r, "model");
    if (!m) return;
    r->model = m;
    const iv_tokenizer *tok = iv_engine_tokenizer(m->engine);
    if (!tok) {
        iv_req_not_supported(r, "Model has no tokenizer", "tokenize");
        return;
    }
    if (iv_req_check_batch(r, r->inputs.n)) return;
    if (iv_route_check_nonempty(r, "inputs")) return;
    iv_input_opts o;
    if (iv_route_input_opts(r, c.truncate, c.left, prompt_name, 1, &o)) return;
    const int max = o.max_length > 0 ? o.max_length : iv_engine_max_input_length(m->engine);
    const size_t char_limit = (size_t)max * 250;
    if (iv_req_take_permits(r, m, r->inputs.n)) return;
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_putc(&b, '[');
    for (int i = 0; i < r->inputs.n; i++) {
        const iv_input *in = &r->inputs.items[i];
        const char *t = in->text;
        size_t tn = in->text_len;
        const size_t chars = iv_utf8_chars(t, tn);
        if (chars > char_limit && !o.truncate) {
            iv_api_errorf(&e, IV_API_VALIDATION,
                          "Input validation error: `inputs` must have less than %zu characters. Given: %zu", char_limit,
                          chars);
            goto fail;
        }
        if (chars > char_limit) {
            size_t keep = iv_utf8_prefix_bytes(t, tn, char_limit, o.truncate_left);
            if (o.truncate_left) t += tn - keep;
            tn = keep;
        }
        iv_strbuf text;
        iv_sb_init(&text);
        if (o.prompt) iv_sb_puts(&text, o.prompt);
        iv_sb_append(&text, t, tn);
        iv_encode_opts eo = iv_encode_opts_default();
        eo.add_special_tokens = add_special;
        eo.want_tokens = 1;
        eo.max_length = max;
        eo.truncate_left = o.truncate_left;
        iv_encoding enc;
        iv_err err = {0};
        if (iv_tokenizer_encode(tok, text.data ? text.data : "", text.len, NULL, 0, &eo, &enc, &err)) {
            iv_sb_free(&text);
            iv_api_errorf(&e, IV_API_TOKENIZER, "tokenizer error %s", err.msg);
            goto fail;
        }
        if (!o.truncate && enc.n_truncated > 0) {
            iv_api_errorf(&e, IV_API_VALIDATION, "Input validation error: `inputs` must have less than %d tokens. Given: %d",
                          max, enc.len + enc.n_truncated);
            iv_encoding_free(&enc);
            iv_sb_free(&text);
            goto fail;
        }
        if (i) iv_sb_putc(&b, ',');
        put_tokens(&b, &enc, text.data ? text.data : "", text.len);
        iv_encoding_free(&enc);
        iv_sb_free(&text);
    }
    iv_batcher_return_permits(m->batcher, r->inputs.n);
    iv_sb_putc(&b, ']');
    iv_req_reply_json(r, &b);
    return;
fail:
    iv_batcher_return_permits(m->batcher, r->inputs.n);
    iv_sb_free(&b);
    iv_req_fail(r, &e);
}

/* ---- /decode ---- */

void iv_route_decode(iv_req *r)
{
    if (iv_req_parse_json(r)) return;
    iv_api_error e;
    int skip_special;
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(r->json, "ids");
    if (!ids) {
        iv_api_errorf(&e, IV_API_JSON_DATA, "missing field `ids`");
        iv_req_fail(r, &e);
        return;
    }
    /* [u32] or [[u32]]: the Input parser reads both; texts are not ids. */
    if (iv_codec_inputs(r->json, "ids", &r->inputs, &e)) {
        iv_req_fail(r, &e);
        return;
    }
    for (int i = 0; i < r->inputs.n; i++)
        if (!r->inputs.items[i].ids) {
            iv_api_errorf(&e, IV_API_JSON_DATA, "ids: data did not match any variant of untagged enum InputIds");
            iv_req_fail(r, &e);
            return;
        }
    if (iv_codec_bool(r->json, "skip_special_tokens", 1, &skip_special, &e)) {
        iv_req_fail(r, &e);
        return;
    }
    iv_model_slot *m = iv_req_pick_model(r, "model");
    if (!m) return;
    r->model = m;
    const iv_tokenizer *tok = iv_engine_tokenizer(m->engine);
    if (!tok) {
        iv_req_not_supported(r, "Model has no tokenizer", "decode");
        return;
    }
    if (iv_req_check_batch(r, r->inputs.n)) return;
    for (int i = 0; i < r->inputs.n; i++)
        if (r->inputs.items[i].n_ids == 0) {
            iv_api_errorf(&e, IV_API_EMPTY, "Input validation error: `input_ids` cannot be empty");
            iv_req_fail(r, &e);
            return;
        }
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_putc(&b, '[');
    for (int i = 0; i < r->inputs.n; i++) {
        char *text = NULL;
        iv_err err = {0};
        const iv_input *in = &r->inputs.items[i];
        if (iv_tokenizer_decode(tok, in->ids, in->n_ids, skip_special, &text, &err)) {
            iv_sb_free(&b);
            iv_api_errorf(&e, IV_API_TOKENIZER, "tokenizer error %s", err.msg);
            iv_req_fail(r, &e);
            return;
        }
        if (i) iv_sb_putc(&b, ',');
        iv_sb_json_string(&b, text, strlen(text));
        free(text);
    }
    iv_sb_putc(&b, ']');
    iv_req_reply_json(r, &b);
}

/* ---- /info ---- */

static void put_labels(iv_strbuf *b, const iv_engine *e, int n)
{
    iv_sb_puts(b, "{\"id2label\":{");
    for (int i = 0; i < n; i++) {
        const char *l = iv_engine_label(e, i);
        iv_sb_printf(b, "%s\"%d\":", i ? "," : "", i);
        iv_sb_json_string(b, l, strlen(l));
    }
    iv_sb_puts(b, "},\"label2id\":{");
    for (int i = 0; i < n; i++) {
        const char *l = iv_engine_label(e, i);
        if (i) iv_sb_putc(b, ',');
        iv_sb_json_string(b, l, strlen(l));
        iv_sb_printf(b, ":%d", i);
    }
    iv_sb_puts(b, "}}");
}

void iv_route_info(iv_req *r)
{
    /* One model's description: the first, or the one named by ?model=. */
    const iv_server *s = r->srv;
    const char *name = iv_req_query(r, "model");
    const iv_model_slot *m = name ? iv_server_find_model(r->srv, name) : &s->models[0];
    if (!m) {
        iv_api_error e;
        iv_api_errorf(&e, IV_API_MODEL_NOT_FOUND, "Input validation error: model `%.*s` is not served here",
                      IV_UTF8_ECHO(200, name));
        iv_req_fail(r, &e);
        return;
    }
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_puts(&b, "{\"model_id\":");
    iv_sb_json_string(&b, m->model_id, strlen(m->model_id));
    /* TEI's model_sha: the snapshot's commit when the model came from the hub cache. */
    char sha[41];
    if (iv_hub_snapshot_commit(m->model_dir, sha) == 0) iv_sb_printf(&b, ",\"model_sha\":\"%s\",\"model_dtype\":", sha);
    else iv_sb_puts(&b, ",\"model_sha\":null,\"model_dtype\":");
    const char *dtype = iv_engine_dtype_name(m->engine);
    iv_sb_json_string(&b, dtype, strlen(dtype));
    iv_sb_puts(&b, ",\"served_model_name\":");
    iv_sb_json_string(&b, m->served_name, strlen(m->served_name));
    iv_sb_puts(&b, ",\"model_type\":");
    if ((m->caps & IV_CAN(IV_TASK_CLASSIFY)) && !(m->caps & IV_CAN(IV_TASK_EMBED))) {
        iv_sb_puts(&b, m->num_labels == 1 ? "{\"reranker\":" : "{\"classifier\":");
        put_labels(&b, m->engine, m->num_labels);
        iv_sb_putc(&b, '}');
    } else if (m->caps & IV_CAN(IV_TASK_TOKEN_CLASSIFY)) {
        iv_sb_puts(&b, "{\"token_classifier\":");
        put_labels(&b, m->engine, m->num_labels);
        iv_sb_putc(&b, '}');
    } else {
        const iv_st_meta *meta = iv_engine_st_meta(m->engine);
        const iv_pool_mode mode = s->o.engine.pooling_override ? (iv_pool_mode)s->o.engine.pooling_override : meta->pool;
        /* Several checkpoint modes (concatenated) read "cls+mean". */
        char modes[128] = "";
        if (!s->o.engine.pooling_override && meta->n_pool_modes > 1)
            for (int k = 0; k < meta->n_pool_modes; k++) {
                const size_t len = strlen(modes);
                snprintf(modes + len, sizeof modes - len, "%s%s", k ? "+" : "", iv_pool_mode_name(meta->pool_modes[k]));
            }
        const char *pool = (m->caps & IV_CAN(IV_TASK_EMBED)) ? (modes[0] ? modes : iv_pool_mode_name(mode))
                           : (m->caps & IV_CAN(IV_TASK_SPARSE)) ? "splade"
                                                                 : "none";
        const iv_multivector_info *mv = iv_engine_multivector(m->engine);
        iv_sb_printf(&b, "{\"embedding\":{\"pooling\":\"%s\"", pool);
        if (mv) iv_sb_printf(&b, ",\"multi_vector\":{\"dim\":%d}", mv->dim);
        iv_sb_puts(&b, "}}");
    }
    iv_model_tasks_json(m, &b);
    /* Conversations: whether the checkpoint has a chat template, and
     * whether every input goes through it (sentence-transformers' message
     * modality, e.g. an LLM reranker). */
    const iv_st_messages *mm = &iv_engine_st_meta(m->engine)->messages;
    iv_sb_printf(&b, ",\"chat_template\":%s,\"inputs_as_messages\":%s",
                 iv_engine_chat_template(m->engine) ? "true" : "false", mm->enabled ? "true" : "false");
    iv_sb_printf(&b,
                 ",\"max_concurrent_requests\":%d,\"max_input_length\":%d,\"max_input_length_source\":\"%s\","
                 "\"max_batch_tokens\":%d,\"max_batch_requests\":",
                 s->o.max_concurrent_requests, m->max_input_length,
                 m->max_input_length_source ? m->max_input_length_source : "config.json", m->max_batch_tokens);
    if (s->o.max_batch_requests > 0) iv_sb_printf(&b, "%d", s->o.max_batch_requests);
    else iv_sb_puts(&b, "null");
    iv_sb_putc(&b, ',');
    iv_replicas_json(&b, m);
    iv_sb_printf(&b,
                 ",\"max_client_batch_size\":%d,\"auto_truncate\":%s,\"tokenization_workers\":%d,"
                 "\"version\":\"%s\",\"sha\":null,\"docker_label\":null}",
                 s->o.max_client_batch_size, s->o.auto_truncate ? "true" : "false", s->o.tokenization_workers,
                 IV_SERVER_VERSION);
    iv_req_reply_json(r, &b);
}

/* ---- POST / and /invocations ---- */

static int is_similarity_body(iv_req *r)
{
    if (iv_req_parse_json(r)) return 0; /* /embed parses again and answers the error */
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(r->json, "inputs");
    return cJSON_IsObject(in) && cJSON_GetObjectItemCaseSensitive(in, "source_sentence");
}

void iv_route_default_post(iv_req *r)
{
    const iv_model_slot *m = &r->srv->models[0];
    if (m->caps & IV_CAN(IV_TASK_TOKEN_CLASSIFY)) {
        iv_route_token_classify(r);
    } else if ((m->caps & IV_CAN(IV_TASK_CLASSIFY)) && !(m->caps & IV_CAN(IV_TASK_EMBED))) {
        if (m->num_labels == 1) iv_route_rerank(r);
        else iv_route_predict(r);
    } else if (!(m->caps & IV_CAN(IV_TASK_EMBED)) && (m->caps & IV_CAN(IV_TASK_SPARSE))) {
        iv_route_embed_sparse(r);
    } else if (is_similarity_body(r)) {
        /* huggingface_hub's InferenceClient.sentence_similarity posts TEI's
         * /similarity body to the model's URL. */
        iv_route_similarity(r);
    } else {
        iv_route_embed(r);
    }
}
