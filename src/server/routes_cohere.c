/* Cohere-compatible routes, as the cohere Python SDK (v5 and later) calls
 * them:
 *   POST /v1/embed, /v2/embed   texts, input_type, embedding_types (float,
 *                               int8, uint8, binary, ubinary, base64),
 *                               truncate NONE|START|END, max_tokens,
 *                               output_dimension
 *   POST /v1/rerank, /v2/rerank query, documents (strings, or Jina's and
 *                               Cohere v1's {"text": ...} objects), top_n,
 *                               return_documents
 * Responses follow the SDK's pydantic types (EmbedByTypeResponse,
 * EmbedFloatsResponse, RerankResponse / V2RerankResponse); errors are
 * Cohere's {"message": ...} with 400 for every request problem. Quantized
 * embedding types use the rule in quantize_embeddings.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "base/utf8.h"
#include "server/quantize_embeddings.h"
#include "server/routes_compat.h"

void iv_compat_uuid(char out[37])
{
    unsigned char u[16] = {0};
    if (getrandom(u, sizeof u, 0) != (ssize_t)sizeof u) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        memcpy(u, &ts, sizeof ts < sizeof u ? sizeof ts : sizeof u);
    }
    u[6] = (unsigned char)((u[6] & 0x0F) | 0x40);
    u[8] = (unsigned char)((u[8] & 0x3F) | 0x80);
    size_t k = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out[k++] = '-';
        k += (size_t)snprintf(out + k, 3, "%02x", u[i]);
    }
    out[k] = 0;
}

int iv_compat_bad_request(iv_req *r, const char *fmt, ...)
{
    iv_api_error e;
    iv_api_errorf(&e, IV_API_BAD_REQUEST, "%s", "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.msg, sizeof e.msg, fmt, ap);
    va_end(ap);
    iv_req_fail(r, &e);
    return -1;
}

int iv_compat_opt_positive(iv_req *r, const char *key, int *out)
{
    int64_t v = 0;
    int present;
    iv_api_error e;
    *out = 0;
    if (iv_codec_opt_int(r->json, key, &v, &present, &e)) {
        iv_req_fail(r, &e);
        return -1;
    }
    if (present && v < 1) return iv_compat_bad_request(r, "invalid request: %s must be at least 1", key);
    *out = present ? (int)v : 0;
    return 0;
}

static int is_v2(const iv_req *r) { return !strncmp(r->path, "/v2/", 4); }

static void put_meta(iv_strbuf *b, const iv_req *r, const char *billed)
{
    iv_sb_printf(b, ",\"meta\":{\"api_version\":{\"version\":\"%s\"},\"billed_units\":{%s}}", is_v2(r) ? "2" : "1",
                 billed);
}

/* ---- embed ---- */

/* r->p.encoding carries the requested embedding types as a bit set
 * (1 << IV_QUANT_*); 0 on /v1/embed without embedding_types (floats response). */
static void finish_embed(iv_req *r)
{
    if (iv_req_fail_if_job_failed(r)) return;
    const unsigned types = (unsigned)r->p.encoding;
    int n = 0;
    for (int i = 0; i < r->job.n_items; i++) n = iv_route_finish_embedding(r, i);
    char id[37];
    iv_compat_uuid(id);
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_printf(&b, "{\"id\":\"%s\",\"embeddings\":", id);
    if (!types) {
        iv_sb_putc(&b, '[');
        for (int i = 0; i < r->job.n_items; i++) {
            if (i) iv_sb_putc(&b, ',');
            iv_quant_json(&b, IV_QUANT_FLOAT, r->job.items[i].out, n);
        }
        iv_sb_putc(&b, ']');
    } else {
        iv_sb_putc(&b, '{');
        int first = 1;
        for (int q = 0; q < IV_QUANT_COUNT; q++) {
            if (!(types & (1u << q))) continue;
            iv_sb_printf(&b, "%s\"%s\":[", first ? "" : ",", iv_quant_name((iv_quant)q));
            first = 0;
            for (int i = 0; i < r->job.n_items; i++) {
                if (i) iv_sb_putc(&b, ',');
                iv_quant_json(&b, (iv_quant)q, r->job.items[i].out, n);
            }
            iv_sb_putc(&b, ']');
        }
        iv_sb_putc(&b, '}');
    }
    iv_sb_puts(&b, ",\"texts\":[");
    for (int i = 0; i < r->inputs.n; i++) {
        const iv_input *in = &r->inputs.items[i];
        if (i) iv_sb_putc(&b, ',');
        iv_sb_json_string(&b, in->text, in->text_len);
    }
    iv_sb_putc(&b, ']');
    char billed[64];
    snprintf(billed, sizeof billed, "\"input_tokens\":%lld", iv_route_job_tokens(r));
    put_meta(&b, r, billed);
    iv_sb_printf(&b, ",\"response_type\":\"%s\"}", types ? "embeddings_by_type" : "embeddings_floats");
    iv_req_reply_json(r, &b);
}

/* input_type -> the checkpoint's prompt of that role, when it has one. */
static const char *prompt_for(const iv_model_slot *m, const char *input_type)
{
    static const char *const query[] = {"query", "search_query", NULL};
    static const char *const doc[] = {"document", "passage", "search_document", NULL};
    static const char *const other[] = {"classification", "clustering", NULL};
    const char *const *names = !strcmp(input_type, "search_query")      ? query
                               : !strcmp(input_type, "search_document") ? doc
                                                                        : other;
    const iv_st_meta *meta = iv_engine_st_meta(m->engine);
    for (int k = 0; names[k]; k++)
        if (iv_st_meta_prompt(meta, names[k])) return names[k];
    return NULL;
}

void iv_route_cohere_embed(iv_req *r)
{
    if (iv_req_parse_json(r)) return;
    iv_api_error e;
    const char *input_type, *truncate;
    if (cJSON_GetObjectItemCaseSensitive(r->json, "images") || cJSON_GetObjectItemCaseSensitive(r->json, "inputs")) {
        iv_compat_bad_request(r, "invalid request: only `texts` are supported (this server embeds text)");
        return;
    }
    if (iv_codec_string_list(r->json, "texts", &r->inputs, &e) ||
        iv_codec_opt_string(r->json, "input_type", &input_type, &e) ||
        iv_codec_opt_string(r->json, "truncate", &truncate, &e)) {
        iv_req_fail(r, &e);
        return;
    }
    if (input_type && strcmp(input_type, "search_document") && strcmp(input_type, "search_query") &&
        strcmp(input_type, "classification") && strcmp(input_type, "clustering")) {
        iv_compat_bad_request(r,
                              "invalid request: input_type must be one of search_document, search_query, "
                              "classification, clustering; got `%.*s`",
                              IV_UTF8_ECHO(64, input_type));
        return;
    }
    int trunc = 1, left = 0;
    if (truncate) {
        if (!strcasecmp(truncate, "NONE")) trunc = 0;
        else if (!strcasecmp(truncate, "START")) left = 1;
        else if (strcasecmp(truncate, "END")) {
            iv_compat_bad_request(r, "invalid request: truncate must be one of NONE, START, END; got `%.*s`",
                                  IV_UTF8_ECHO(64, truncate));
            return;
        }
    }
    unsigned types = is_v2(r) ? 1u << IV_QUANT_FLOAT : 0;
    const cJSON *et = cJSON_GetObjectItemCaseSensitive(r->json, "embedding_types");
    if (et && !cJSON_IsNull(et)) {
        if (!cJSON_IsArray(et)) {
            iv_compat_bad_request(r, "invalid request: embedding_types must be a list of strings");
            return;
        }
        types = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, et) {
            int q = cJSON_IsString(x) ? iv_quant_parse(x->valuestring) : -1;
            if (q < 0) {
                iv_compat_bad_request(r,
                                      "invalid request: embedding_types must be among float, int8, uint8, binary, "
                                      "ubinary, base64");
                return;
            }
            types |= 1u << q;
        }
        if (!types) types = 1u << IV_QUANT_FLOAT;
    }
    int max_tokens, out_dim;
    if (iv_compat_opt_positive(r, "max_tokens", &max_tokens) || iv_compat_opt_positive(r, "output_dimension", &out_dim))
        return;
    iv_model_slot *m = iv_req_pick_model(r, "model");
    if (!m) return;
    r->model = m;
    iv_req_count(r, 0);
    if (iv_route_check_nonempty(r, "texts")) return;
    if (iv_req_check_batch(r, r->inputs.n)) return;
    if (!(m->caps & IV_CAN(IV_TASK_EMBED)) || iv_route_is_multivector(m)) {
        iv_req_not_supported(r, "Model is not an embedding model", "embed");
        return;
    }
    if (out_dim > iv_engine_embedding_dim(m->engine)) {
        iv_compat_bad_request(r, "invalid request: output_dimension %d is larger than the model's dimension %d",
                              out_dim, iv_engine_embedding_dim(m->engine));
        return;
    }
    iv_input_opts o;
    if (iv_route_input_opts(r, trunc, left, input_type ? prompt_for(m, input_type) : NULL, 1, &o)) return;
    if (max_tokens && (o.max_length <= 0 || max_tokens < o.max_length)) o.max_length = max_tokens;
    r->p.normalize = 1;
    r->p.renormalize = 1;
    r->p.dimensions = out_dim;
    r->p.encoding = (int)types;
    r->p.metric_task = "embed";
    iv_metrics_inc(r->srv->metrics, "te_embed_count", r->inputs.n);
    iv_req_submit(r, m, IV_TASK_EMBED, &o, finish_embed);
}

/* ---- rerank ---- */

static void finish_rerank(iv_req *r)
{
    if (iv_req_fail_if_job_failed(r)) return;
    iv_rank *ranks = iv_rerank_ranks(r);
    if (!ranks) return;
    int n = r->job.n_items;
    if (r->p.top_n > 0 && r->p.top_n < n) n = r->p.top_n;
    char id[37];
    iv_compat_uuid(id);
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_printf(&b, "{\"id\":\"%s\",\"results\":[", id);
    for (int k = 0; k < n; k++) {
        iv_sb_printf(&b, "%s{\"index\":%d,\"relevance_score\":", k ? "," : "", ranks[k].index);
        iv_sb_float(&b, ranks[k].score);
        if (r->p.return_text) {
            const iv_input *in = &r->inputs.items[ranks[k].index];
            iv_sb_puts(&b, ",\"document\":{\"text\":");
            iv_sb_json_string(&b, in->pair, in->pair_len);
            iv_sb_putc(&b, '}');
        }
        iv_sb_putc(&b, '}');
    }
    free(ranks);
    iv_sb_putc(&b, ']');
    put_meta(&b, r, "\"search_units\":1");
    iv_sb_puts(&b, ",\"model\":");
    iv_sb_json_string(&b, r->model->served_name, strlen(r->model->served_name));
    const long long t = iv_route_job_tokens(r);
    iv_sb_printf(&b, ",\"usage\":{\"prompt_tokens\":%lld,\"total_tokens\":%lld}}", t, t);
    iv_req_reply_json(r, &b);
}

/* documents: strings, or objects with a "text" string (Jina, Cohere v1). */
static int parse_documents(iv_req *r)
{
    const cJSON *docs = cJSON_GetObjectItemCaseSensitive(r->json, "documents");
    if (!docs) return iv_compat_bad_request(r, "invalid request: documents is required");
    if (!cJSON_IsArray(docs))
        return iv_compat_bad_request(r, "invalid request: documents must be a list of strings or {\"text\": ...}");
    const int n = cJSON_GetArraySize(docs);
    r->inputs.items = calloc((size_t)(n > 0 ? n : 1), sizeof *r->inputs.items);
    if (!r->inputs.items) return iv_compat_bad_request(r, "out of memory");
    const cJSON *d;
    cJSON_ArrayForEach(d, docs) {
        const cJSON *t = cJSON_IsObject(d) ? cJSON_GetObjectItemCaseSensitive(d, "text") : d;
        if (!cJSON_IsString(t))
            return iv_compat_bad_request(
                r, "invalid request: documents[%d] must be a string or an object with a `text` string", r->inputs.n);
        iv_input *in = &r->inputs.items[r->inputs.n++];
        in->text = t->valuestring;
        in->text_len = iv_codec_str_len(t);
        r->inputs.n_chars += iv_utf8_count(in->text, in->text_len);
    }
    return 0;
}

void iv_route_cohere_rerank(iv_req *r)
{
    if (iv_req_parse_json(r)) return;
    iv_api_error e;
    const char *query;
    int top_n, max_tokens;
    if (iv_codec_required_string(r->json, "query", &query, &e) ||
        iv_codec_bool(r->json, "return_documents", 0, &r->p.return_text, &e)) {
        iv_req_fail(r, &e);
        return;
    }
    if (parse_documents(r) || iv_compat_opt_positive(r, "top_n", &top_n) ||
        iv_compat_opt_positive(r, "max_tokens_per_doc", &max_tokens))
        return;
    if (r->inputs.n == 0) {
        iv_compat_bad_request(r, "invalid request: documents must contain at least one item");
        return;
    }
    if (iv_req_check_batch(r, r->inputs.n)) return;
    iv_model_slot *m = iv_route_reranker(r);
    if (!m) return;
    iv_req_count(r, 0);
    r->p.top_n = top_n;
    iv_route_submit_rerank(r, m, cJSON_GetObjectItemCaseSensitive(r->json, "query"), "documents", -1, 0, finish_rerank);
}
