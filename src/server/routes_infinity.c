/* Infinity's routes (infinity_emb/infinity_server.py): POST /embeddings
 * (OpenAI shape plus `modality`), /rerank with `documents` (Cohere shape:
 * top_n, return_documents), /classify, and GET /models. Responses carry
 * Infinity's "id" and "created"; app errors use its
 * {"error": {"message", "type", "param", "code"}} body and request-shape
 * errors FastAPI's 422 {"detail": [...]}. Differences from Infinity, by
 * design: `usage` counts real tokens (Infinity counts characters unless
 * --lengths-via-tokenize), inputs may also be token ids, and --auto-truncate
 * applies. Multi-vector (ColBERT) models answer /embeddings with one token
 * matrix per input and are listed with "multi_vector":{"dim":D}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include "base/utf8.h"
#include "server/routes_common.h"

/* pydantic: INPUT_STRING = StringConstraints(max_length=8192 * 15). */
#define INFINITY_MAX_STRING 122880

void iv_infinity_id_created(iv_strbuf *b)
{
    unsigned char u[16] = {0};
    if (getrandom(u, sizeof u, 0) != (ssize_t)sizeof u) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        memcpy(u, &ts, sizeof ts < sizeof u ? sizeof ts : sizeof u);
    }
    u[6] = (unsigned char)((u[6] & 0x0F) | 0x40); /* version 4 */
    u[8] = (unsigned char)((u[8] & 0x3F) | 0x80); /* RFC 4122 variant */
    iv_sb_puts(b, ",\"id\":\"infinity-");
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) iv_sb_putc(b, '-');
        iv_sb_printf(b, "%02x", u[i]);
    }
    iv_sb_printf(b, "\",\"created\":%lld", (long long)time(NULL));
}

/* Checks Infinity's per-string length limit; replies and returns -1. */
static int check_string_lengths(iv_req *r, const char *key)
{
    for (int i = 0; i < r->inputs.n; i++) {
        const iv_input *in = &r->inputs.items[i];
        if (!in->text || iv_utf8_count(in->text, in->text_len) <= INFINITY_MAX_STRING) continue;
        iv_api_error e;
        char loc[96];
        if (r->inputs.single) snprintf(loc, sizeof loc, "\"body\",\"%s\"", key);
        else snprintf(loc, sizeof loc, "\"body\",\"%s\",%d", key, i);
        iv_api_errorf(&e, IV_API_JSON_DATA, "String should have at most %d characters", INFINITY_MAX_STRING);
        iv_api_error_shape(&e, loc, "string_too_long", "String should have at most %d characters",
                           INFINITY_MAX_STRING);
        iv_req_fail(r, &e);
        return -1;
    }
    return 0;
}

/* ---- /embeddings ---- */

void iv_route_infinity_embeddings(iv_req *r)
{
    if (iv_req_parse_json(r)) return;
    iv_api_error e;
    const char *modality, *user;
    int64_t dims = 0;
    int has_dims;
    if (iv_codec_opt_string(r->json, "modality", &modality, &e) || iv_codec_inputs(r->json, "input", &r->inputs, &e) ||
        iv_codec_opt_string(r->json, "user", &user, &e) || iv_codec_encoding_format(r->json, &r->p.encoding, &e) ||
        iv_codec_opt_int(r->json, "dimensions", &dims, &has_dims, &e)) {
        iv_req_fail(r, &e);
        return;
    }
    if (modality && strcmp(modality, "text") && strcmp(modality, "image") && strcmp(modality, "audio")) {
        iv_api_errorf(&e, IV_API_JSON_DATA, "unknown modality `%.*s`", IV_UTF8_ECHO(64, modality));
        iv_api_error_shape(&e, "\"body\"", "union_tag_invalid",
                           "Input tag '%.*s' found using 'get_modality' does not match any of the expected tags: "
                           "'text', 'audio', 'image'",
                           IV_UTF8_ECHO(64, modality));
        iv_req_fail(r, &e);
        return;
    }
    iv_model_slot *m = iv_req_pick_model(r, "model");
    if (!m) return;
    r->model = m;
    iv_req_count(r, r->inputs.single);
    /* [] is an empty list here (pydantic's min_length=1), not one empty id list. */
    if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r->json, "input")) == 0 && !r->inputs.items[0].text) {
        free((void *)r->inputs.items[0].ids);
        r->inputs.items[0].ids = NULL;
        r->inputs.n = 0;
    }
    if (iv_route_check_nonempty(r, "input")) return;
    if (iv_req_check_batch(r, r->inputs.n) ||
        (!(modality && (!strcmp(modality, "image") || !strcmp(modality, "audio"))) &&
         check_string_lengths(r, "input")))
        return;
    /* modality "image" / "audio": every input string is an image / an audio
     * clip (a data URL or base64), for models with that tower. */
    const int image_modality = modality && !strcmp(modality, "image") && iv_engine_image_proc(m->engine);
    const int audio_modality = modality && !strcmp(modality, "audio") && iv_engine_audio_proc(m->engine);
    if (image_modality || audio_modality) {
        for (int i = 0; i < r->inputs.n; i++) {
            iv_input *in = &r->inputs.items[i];
            if (!in->text) {
                iv_api_errorf(&e, IV_API_JSON_DATA, "input %d: an %s must be a string (a data URL or base64)", i,
                              image_modality ? "image" : "audio clip");
                iv_req_fail(r, &e);
                return;
            }
            if (image_modality) in->image = in->text, in->image_len = in->text_len;
            else in->audio = in->text, in->audio_len = in->text_len;
            in->text = NULL;
            in->text_len = 0;
        }
    }
    if (modality && strcmp(modality, "text") && !image_modality && !audio_modality) {
        char caps[128];
        iv_model_capability_set(m, caps, sizeof caps);
        iv_api_errorf(&e, IV_API_NOT_SUPPORTED,
                      "ModelNotDeployedError: model=`%.*s` does not support `embed` for modality `%s`. Reason: the "
                      "loaded moded cannot fullyfill `%s_embed`. Options are %s.",
                      IV_UTF8_ECHO(200, m->served_name), modality, modality, caps);
        iv_req_fail(r, &e);
        return;
    }
    if (iv_route_check_encoding(r)) return;
    const int multivector = iv_route_is_multivector(m);
    if (multivector && dims != 0) {
        iv_route_refuse_multivector(r, "dimensions", "token vectors cannot be truncated");
        return;
    }
    if (!multivector && !(m->caps & IV_CAN(IV_TASK_EMBED))) {
        iv_req_not_supported(r, "Model is not an embedding model", "embed");
        return;
    }
    const int dim = iv_engine_embedding_dim(m->engine);
    if (dims != 0 && (dims < 1 || dims > dim)) {
        iv_api_errorf(&e, IV_API_BAD_REQUEST,
                      "<class 'infinity_emb.primitives.MatryoshkaDimError'> -> matryoshka_dim=%lld is not in a valid "
                      "range. Select between 1 and %d.",
                      (long long)dims, dim);
        iv_req_fail(r, &e);
        return;
    }
    iv_input_opts o;
    if (iv_route_input_opts(r, -1, 0, NULL, 1, &o)) return;
    r->p.normalize = 1;
    r->p.renormalize = 0; /* Infinity slices the normalised vector */
    r->p.dimensions = (int)dims;
    r->p.metric_task = "embed";
    iv_metrics_inc(r->srv->metrics, "te_embed_count", r->inputs.n);
    iv_req_submit(r, m, multivector ? IV_TASK_MULTIVECTOR : IV_TASK_EMBED, &o, iv_openai_finish_embeddings);
}

/* ---- /rerank (documents) ---- */

static void finish_rerank(iv_req *r)
{
    if (iv_req_fail_if_job_failed(r)) return;
    iv_rank *ranks = iv_rerank_ranks(r);
    if (!ranks) return;
    int n = r->job.n_items;
    if (r->p.top_n > 0 && r->p.top_n < n) n = r->p.top_n;
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_puts(&b, "{\"object\":\"rerank\",\"results\":[");
    for (int k = 0; k < n; k++) {
        iv_sb_puts(&b, k ? ",{\"relevance_score\":" : "{\"relevance_score\":");
        iv_sb_float(&b, ranks[k].score);
        iv_sb_printf(&b, ",\"index\":%d", ranks[k].index);
        if (r->p.return_text) {
            const iv_input *in = &r->inputs.items[ranks[k].index];
            iv_sb_puts(&b, ",\"document\":");
            iv_sb_json_string(&b, in->pair, in->pair_len);
        }
        iv_sb_putc(&b, '}');
    }
    free(ranks);
    iv_sb_puts(&b, "],\"model\":");
    iv_sb_json_string(&b, r->model->served_name, strlen(r->model->served_name));
    iv_sb_putc(&b, ',');
    iv_route_usage(&b, iv_route_job_tokens(r));
    iv_infinity_id_created(&b);
    iv_sb_putc(&b, '}');
    iv_req_reply_json(r, &b);
}

void iv_route_infinity_rerank(iv_req *r)
{
    iv_api_error e;
    const char *query;
    int64_t top_n = 0;
    int has_top_n;
    if (iv_codec_required_string(r->json, "query", &query, &e) ||
        iv_codec_string_list(r->json, "documents", &r->inputs, &e) ||
        iv_codec_bool(r->json, "return_documents", 0, &r->p.return_text, &e) ||
        iv_codec_bool(r->json, "raw_scores", 0, &r->p.raw_scores, &e) ||
        iv_codec_opt_int(r->json, "top_n", &top_n, &has_top_n, &e)) {
        iv_req_fail(r, &e);
        return;
    }
    if (has_top_n && top_n <= 0) {
        iv_api_errorf(&e, IV_API_JSON_DATA, "top_n: Input should be greater than 0");
        iv_api_error_shape(&e, "\"body\",\"top_n\"", "greater_than", "Input should be greater than 0");
        iv_req_fail(r, &e);
        return;
    }
    if (iv_utf8_count(query, iv_codec_str_len(cJSON_GetObjectItemCaseSensitive(r->json, "query"))) > INFINITY_MAX_STRING) {
        iv_api_errorf(&e, IV_API_JSON_DATA, "String should have at most %d characters", INFINITY_MAX_STRING);
        iv_api_error_shape(&e, "\"body\",\"query\"", "string_too_long", "String should have at most %d characters",
                           INFINITY_MAX_STRING);
        iv_req_fail(r, &e);
        return;
    }
    if (r->inputs.n == 0) {
        iv_route_check_nonempty(r, "documents");
        return;
    }
    if (iv_req_check_batch(r, r->inputs.n) || check_string_lengths(r, "documents")) return;
    iv_model_slot *m = iv_route_reranker(r);
    if (!m) return;
    iv_req_count(r, 0);
    r->p.top_n = has_top_n ? (int)top_n : 0;
    iv_route_submit_rerank(r, m, cJSON_GetObjectItemCaseSensitive(r->json, "query"), "documents", -1, 0, finish_rerank);
}

/* ---- /classify ---- */

static void finish_classify(iv_req *r)
{
    if (iv_req_fail_if_job_failed(r)) return;
    int *order = malloc((size_t)r->job.cols * sizeof *order);
    iv_strbuf b;
    iv_sb_init(&b);
    if (!order) b.oom = 1;
    iv_sb_puts(&b, "{\"object\":\"classify\",\"data\":[");
    for (int i = 0; order && i < r->job.n_items; i++) {
        if (iv_route_scores(r, i, r->p.raw_scores, order)) {
            free(order);
            iv_sb_free(&b);
            return;
        }
        const float *s = r->job.items[i].out;
        iv_sb_puts(&b, i ? ",[" : "[");
        for (int k = 0; k < r->job.cols; k++) {
            const char *label = iv_engine_label(r->model->engine, order[k]);
            iv_sb_puts(&b, k ? ",{\"score\":" : "{\"score\":");
            iv_sb_float(&b, s[order[k]]);
            iv_sb_puts(&b, ",\"label\":");
            iv_sb_json_string(&b, label, strlen(label));
            iv_sb_putc(&b, '}');
        }
        iv_sb_putc(&b, ']');
    }
    free(order);
    iv_sb_puts(&b, "],\"model\":");
    iv_sb_json_string(&b, r->model->served_name, strlen(r->model->served_name));
    iv_sb_putc(&b, ',');
    iv_route_usage(&b, iv_route_job_tokens(r));
    iv_infinity_id_created(&b);
    iv_sb_putc(&b, '}');
    iv_req_reply_json(r, &b);
}

void iv_route_classify(iv_req *r)
{
    if (iv_req_parse_json(r)) return;
    iv_api_error e;
    if (iv_codec_string_list(r->json, "input", &r->inputs, &e) ||
        iv_codec_bool(r->json, "raw_scores", 0, &r->p.raw_scores, &e)) {
        iv_req_fail(r, &e);
        return;
    }
    if (r->inputs.n == 0) {
        iv_route_check_nonempty(r, "input");
        return;
    }
    if (iv_req_check_batch(r, r->inputs.n) || check_string_lengths(r, "input")) return;
    iv_model_slot *m = iv_req_pick_model(r, "model");
    if (!m) return;
    r->model = m;
    if (!(m->caps & IV_CAN(IV_TASK_CLASSIFY))) {
        iv_req_not_supported(r, "Model is not a classifier model", "classify");
        return;
    }
    iv_req_count(r, 0);
    iv_input_opts o;
    if (iv_route_check_nonempty(r, "input")) return;
    if (iv_route_input_opts(r, -1, 0, NULL, 0, &o)) return;
    r->p.metric_task = "predict";
    iv_metrics_inc(r->srv->metrics, "te_predict_count", r->inputs.n);
    iv_req_submit(r, m, IV_TASK_CLASSIFY, &o, finish_classify);
}

/* ---- /models ---- */

void iv_route_models(iv_req *r)
{
    const iv_server *s = r->srv;
    /* GET /v1/models/{id}: that model's object alone (OpenAI), 404 when unknown. */
    const char *one = !strncmp(r->path, "/v1/models/", 11) ? r->path + 11 : NULL;
    int found = -1;
    for (int i = 0; one && i < s->n_models && found < 0; i++)
        if (!strcmp(s->models[i].served_name, one) || !strcmp(s->models[i].model_id, one)) found = i;
    if (one && found < 0) {
        iv_strbuf nb;
        iv_sb_init(&nb);
        iv_sb_puts(&nb, "{\"error\":{\"message\":");
        char msg[512];
        snprintf(msg, sizeof msg, "The model `%.*s` does not exist.", IV_UTF8_ECHO(400, one));
        iv_utf8_scrub(msg); /* the path is the client's bytes */
        iv_sb_json_string(&nb, msg, strlen(msg));
        iv_sb_puts(&nb, ",\"type\":\"invalid_request_error\",\"param\":\"model\",\"code\":\"model_not_found\"}}");
        iv_req_reply(r, 404, "application/json", &nb);
        return;
    }
    iv_strbuf b;
    iv_sb_init(&b);
    if (!one) iv_sb_puts(&b, "{\"object\":\"list\",\"data\":[");
    for (int i = one ? found : 0; i < (one ? found + 1 : s->n_models); i++) {
        const iv_model_slot *m = &s->models[i];
        const int queued = iv_batcher_queue_size(m->batcher) + iv_batcher_tokenize_backlog(m->batcher);
        const int in_use = iv_batcher_permits_in_use(m->batcher);
        iv_sb_puts(&b, i && !one ? ",{\"id\":" : "{\"id\":");
        iv_sb_json_string(&b, m->served_name, strlen(m->served_name));
        iv_sb_printf(&b, ",\"object\":\"model\",\"owned_by\":\"infinity\",\"created\":%lld,\"backend\":\"native\"",
                     (long long)time(NULL));
        iv_sb_puts(&b, ",\"capabilities\":[");
        int first = 1;
        const iv_multivector_info *mv = iv_engine_multivector(m->engine);
        if ((m->caps & IV_CAN(IV_TASK_EMBED)) || mv) iv_sb_puts(&b, "\"embed\""), first = 0;
        if (m->caps & IV_CAN(IV_TASK_CLASSIFY))
            iv_sb_puts(&b, first ? "" : ","), iv_sb_puts(&b, m->num_labels == 1 ? "\"rerank\"" : "\"classify\""), first = 0;
        if (mv) iv_sb_puts(&b, first ? "\"rerank\"" : ",\"rerank\""), first = 0; /* MaxSim */
        if (iv_engine_decision_family(m->engine))
            iv_sb_puts(&b, first ? "\"systemone\"" : ",\"systemone\"");
        iv_sb_putc(&b, ']');
        if (mv) iv_sb_printf(&b, ",\"multi_vector\":{\"dim\":%d}", mv->dim);
        iv_sb_printf(&b,
                     ",\"stats\":{\"queue_fraction\":%.6f,\"queue_absolute\":%d,\"results_pending\":%d,"
                     "\"batch_size\":%d}}",
                     (double)in_use / (double)s->o.max_concurrent_requests, queued, in_use - queued > 0 ? in_use - queued : 0,
                     s->o.max_batch_requests > 0 ? s->o.max_batch_requests : s->o.max_client_batch_size);
    }
    if (!one) {
        iv_sb_putc(&b, ']');
        /* The System One SDKs read {"models":[{name, description, release_date}]}
         * (reference/systemone-decisions.md 1.1): listed when a decision model is served. */
        int n_dec = 0;
        for (int i = 0; i < s->n_models; i++) {
            const iv_model_slot *m = &s->models[i];
            const char *fam = iv_engine_decision_family(m->engine);
            if (!fam) continue;
            iv_sb_puts(&b, n_dec++ ? ",{\"name\":" : ",\"models\":[{\"name\":");
            iv_sb_json_string(&b, m->served_name, strlen(m->served_name));
            iv_sb_puts(&b, !strcmp(fam, "laya")
                               ? ",\"description\":\"Laya typed-decision model (noul, choice, score)\",\"release_date\":"
                           : !strcmp(fam, "clef")
                               ? ",\"description\":\"Clef joint typed-decision model (noul, choice, score)\",\"release_date\":"
                           : !strcmp(fam, "letters")
                               ? ",\"description\":\"chat LM read at option letters (noul, choice, score)\",\"release_date\":"
                               : ",\"description\":\"pplx-decider v1 typed-decision model (noul, choice, score)\",\"release_date\":");
            /* YYYY-MM-DD (the SDK requires a string): the date of the checkpoint's weights. */
            char path[4200], date[16] = "1970-01-01";
            struct stat st;
            snprintf(path, sizeof path, "%s/model.safetensors", m->model_dir ? m->model_dir : ".");
            if (!stat(path, &st)) {
                struct tm tm;
                gmtime_r(&st.st_mtime, &tm);
                strftime(date, sizeof date, "%Y-%m-%d", &tm);
            }
            iv_sb_printf(&b, "\"%s\"}", date);
        }
        if (n_dec) iv_sb_putc(&b, ']');
        iv_sb_putc(&b, '}');
    }
    iv_req_reply_json(r, &b);
}
