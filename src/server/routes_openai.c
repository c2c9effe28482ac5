/* OpenAI's POST /v1/embeddings as TEI implements it: `input` in every TEI
 * form (text, token ids, lists of either), conversations (a list of
 * messages in `input`, or vLLM's `messages` with `chat_template_kwargs` and
 * `add_generation_prompt`) rendered by the chat template, `encoding_format` float or
 * base64 (little-endian float32), `dimensions` (truncate, then
 * re-normalise), `model`, `user`; always normalised, truncation from
 * --auto-truncate, the default prompt if one is configured. Errors use
 * TEI's OpenAI body {"message", "code", "type"}. Multi-vector (ColBERT)
 * models return one token matrix per input (docs/colbert.md), also as
 * encoding_format=tensor, and refuse `dimensions`. */
#include <stdio.h>
#include <string.h>

#include "server/routes_common.h"

void iv_openai_finish_embeddings(iv_req *r)
{
    if (iv_req_fail_if_job_failed(r)) return;
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_puts(&b, "{\"object\":\"list\",\"data\":[");
    for (int i = 0; i < r->job.n_items; i++) {
        const iv_job_item *it = &r->job.items[i];
        iv_sb_puts(&b, i ? ",{\"object\":\"embedding\",\"embedding\":" : "{\"object\":\"embedding\",\"embedding\":");
        if (r->job.task == IV_TASK_MULTIVECTOR) iv_codec_matrix(&b, it->out, it->rows, r->job.cols, r->p.encoding);
        else iv_codec_embedding(&b, it->out, iv_route_finish_embedding(r, i), r->p.encoding == IV_ENCODING_BASE64);
        iv_sb_printf(&b, ",\"index\":%d}", i);
    }
    iv_sb_puts(&b, "],\"model\":");
    iv_sb_json_string(&b, r->model->served_name, strlen(r->model->served_name));
    iv_sb_putc(&b, ',');
    iv_route_usage(&b, iv_route_job_tokens(r));
    if (r->flavour == IV_FLAVOUR_INFINITY) iv_infinity_id_created(&b);
    iv_sb_putc(&b, '}');
    iv_req_reply_json(r, &b);
}

void iv_route_openai_embeddings(iv_req *r)
{
    if (iv_req_parse_json(r)) return;
    iv_api_error e;
    const char *user;
    int64_t dims;
    /* vLLM's chat form: one conversation as `messages` instead of `input`. */
    const int chat = !cJSON_GetObjectItemCaseSensitive(r->json, "input") &&
                     cJSON_GetObjectItemCaseSensitive(r->json, "messages");
    if ((chat ? iv_codec_messages(r->json, "messages", &r->inputs, &e)
              : iv_codec_inputs(r->json, "input", &r->inputs, &e)) ||
        iv_codec_opt_string(r->json, "user", &user, &e) ||
        iv_codec_encoding_format(r->json, &r->p.encoding, &e) ||
        iv_codec_opt_uint(r->json, "dimensions", 1 << 30, &dims, &e)) {
        iv_req_fail(r, &e);
        return;
    }
    iv_model_slot *m = iv_req_pick_model(r, "model");
    if (!m) return;
    r->model = m;
    iv_req_count(r, r->inputs.single);
    if (r->inputs.n == 0) {
        iv_api_errorf(&e, IV_API_EMPTY, "`inputs` cannot be empty");
        iv_req_fail(r, &e);
        return;
    }
    if (iv_req_check_batch(r, r->inputs.n) || iv_route_check_encoding(r)) return;
    const int multivector = iv_route_is_multivector(m);
    if (multivector && dims >= 0) {
        iv_route_refuse_multivector(r, "dimensions", "token vectors cannot be truncated");
        return;
    }
    if (!multivector && !(m->caps & IV_CAN(IV_TASK_EMBED))) {
        iv_req_not_supported(r, "Model is not an embedding model", "embed");
        return;
    }
    if (dims == 0) iv_api_errorf(&e, IV_API_VALIDATION, "Input validation error: `dimensions` should be positive");
    else if (dims > iv_engine_embedding_dim(m->engine))
        iv_api_errorf(&e, IV_API_VALIDATION,
                      "Input validation error: `dimensions` should be smaller than the maximum embedding dimension.");
    if (dims == 0 || dims > iv_engine_embedding_dim(m->engine)) {
        iv_req_fail(r, &e);
        return;
    }
    iv_input_opts o;
    if (iv_route_check_nonempty(r, "inputs")) return;
    if (iv_route_input_opts(r, -1, 0, NULL, 1, &o)) return;
    r->p.normalize = 1;
    r->p.renormalize = 1;
    r->p.dimensions = dims > 0 ? (int)dims : 0;
    r->p.metric_task = "embed";
    iv_metrics_inc(r->srv->metrics, "te_embed_count", r->inputs.n);
    iv_req_submit(r, m, multivector ? IV_TASK_MULTIVECTOR : IV_TASK_EMBED, &o, iv_openai_finish_embeddings);
}
