/* vLLM's pair scoring, POST /score and /v1/score:
 *   {"model", "text_1": str | [str], "text_2": str | [str], "truncate_prompt_tokens"}
 * text_1 of one item is scored against every text_2 (1:N), otherwise the
 * lists pair up (N:N). A cross-encoder (a one-label sequence classifier)
 * scores each pair with the sigmoid of its logit; an embedding model scores
 * the cosine similarity of the two texts' embeddings, as vLLM does for
 * bi-encoders. Response:
 *   {"id":"score-<uuid>","object":"list","created","model",
 *    "data":[{"index","object":"score","score"}],"usage":{...}}
 * Errors are vLLM's {"object":"error","message","type","param","code"}. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "heads/scores.h"
#include "server/routes_compat.h"

/* r->p.similarity: 1 for the bi-encoder path; r->p.top_n carries n1 there. */

static void reply_scores(iv_req *r, const float *scores, int n)
{
    char id[37];
    iv_compat_uuid(id);
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_printf(&b, "{\"id\":\"score-%s\",\"object\":\"list\",\"created\":%lld,\"model\":", id, (long long)time(NULL));
    iv_sb_json_string(&b, r->model->served_name, strlen(r->model->served_name));
    iv_sb_puts(&b, ",\"data\":[");
    for (int i = 0; i < n; i++) {
        iv_sb_printf(&b, "%s{\"index\":%d,\"object\":\"score\",\"score\":", i ? "," : "", i);
        iv_sb_float(&b, scores[i]);
        iv_sb_putc(&b, '}');
    }
    const long long t = iv_route_job_tokens(r);
    iv_sb_printf(&b,
                 "],\"usage\":{\"prompt_tokens\":%lld,\"total_tokens\":%lld,\"completion_tokens\":0,"
                 "\"prompt_tokens_details\":null}}",
                 t, t);
    iv_req_reply_json(r, &b);
}

static void finish_score(iv_req *r)
{
    if (iv_req_fail_if_job_failed(r)) return;
    const int bi = r->p.similarity, n1 = r->p.top_n;
    const int n = bi ? r->job.n_items - n1 : r->job.n_items;
    float *scores = malloc((size_t)(n > 0 ? n : 1) * sizeof *scores);
    if (!scores) {
        iv_api_error e;
        iv_api_errorf(&e, IV_API_INTERNAL, "out of memory");
        iv_req_fail(r, &e);
        return;
    }
    for (int i = 0; i < n; i++) {
        if (!bi) {
            scores[i] = iv_sigmoid(r->job.items[i].out[0]);
            continue;
        }
        const float *a = r->job.items[n1 == 1 ? 0 : i].out, *v = r->job.items[n1 + i].out;
        double ab = 0, aa = 0, bb = 0;
        for (int k = 0; k < r->job.cols; k++) {
            ab += (double)a[k] * v[k];
            aa += (double)a[k] * a[k];
            bb += (double)v[k] * v[k];
        }
        scores[i] = aa > 0 && bb > 0 ? (float)(ab / sqrt(aa * bb)) : 0.0f;
    }
    reply_scores(r, scores, n);
    free(scores);
}

/* A string or a list of strings; items point into the cJSON tree. */
static int text_list(iv_req *r, const char *key, const cJSON ***out, int *n)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->json, key);
    *out = NULL;
    *n = 0;
    if (!v) return iv_compat_bad_request(r, "invalid request: `%s` is required", key);
    if (cJSON_IsString(v)) {
        *out = malloc(sizeof **out);
        if (!*out) return iv_compat_bad_request(r, "out of memory");
        (*out)[0] = v;
        *n = 1;
        return 0;
    }
    if (!cJSON_IsArray(v)) return iv_compat_bad_request(r, "invalid request: `%s` must be a string or a list of strings", key);
    const int count = cJSON_GetArraySize(v);
    *out = malloc((size_t)(count > 0 ? count : 1) * sizeof **out);
    if (!*out) return iv_compat_bad_request(r, "out of memory");
    const cJSON *x;
    cJSON_ArrayForEach(x, v) {
        if (!cJSON_IsString(x)) {
            free(*out);
            *out = NULL;
            return iv_compat_bad_request(r, "invalid request: `%s[%d]` must be a string", key, *n);
        }
        (*out)[(*n)++] = x;
    }
    return 0;
}

static void set_text(iv_inputs *in, iv_input *it, const cJSON *s)
{
    it->text = s->valuestring;
    it->text_len = iv_codec_str_len(s);
    in->n_chars += iv_utf8_count(it->text, it->text_len);
}

void iv_route_vllm_score(iv_req *r)
{
    if (iv_req_parse_json(r)) return;
    const cJSON **t1 = NULL, **t2 = NULL;
    int n1, n2;
    int64_t trunc = -1;
    int has_trunc;
    iv_api_error e;
    if (text_list(r, "text_1", &t1, &n1) || text_list(r, "text_2", &t2, &n2)) goto out;
    if (iv_codec_opt_int(r->json, "truncate_prompt_tokens", &trunc, &has_trunc, &e)) {
        iv_req_fail(r, &e);
        goto out;
    }
    if (n1 == 0 || n2 == 0 || (n1 > 1 && n1 != n2)) {
        iv_compat_bad_request(r, "Input lengths must be either 1:1, 1:N or N:N (got %d text_1, %d text_2)", n1, n2);
        goto out;
    }
    iv_model_slot *m = iv_req_pick_model(r, "model");
    if (!m) goto out;
    r->model = m;
    const int cross = (m->caps & IV_CAN(IV_TASK_CLASSIFY)) && m->num_labels == 1;
    if (!cross && (!(m->caps & IV_CAN(IV_TASK_EMBED)) || iv_route_is_multivector(m))) {
        iv_req_not_supported(r, "model can neither score pairs (cross-encoder) nor embed (bi-encoder)", "rerank");
        goto out;
    }
    const int n = cross ? n2 : n1 + n2;
    if (iv_req_check_batch(r, n)) goto out;
    r->inputs.items = calloc((size_t)n, sizeof *r->inputs.items);
    if (!r->inputs.items) {
        iv_compat_bad_request(r, "out of memory");
        goto out;
    }
    r->inputs.n = n;
    if (cross) {
        for (int i = 0; i < n2; i++) {
            iv_input *it = &r->inputs.items[i];
            set_text(&r->inputs, it, t1[n1 == 1 ? 0 : i]);
            it->pair = t2[i]->valuestring;
            it->pair_len = iv_codec_str_len(t2[i]);
            r->inputs.n_chars += iv_utf8_count(it->pair, it->pair_len);
        }
    } else {
        for (int i = 0; i < n1; i++) set_text(&r->inputs, &r->inputs.items[i], t1[i]);
        for (int i = 0; i < n2; i++) set_text(&r->inputs, &r->inputs.items[n1 + i], t2[i]);
    }
    iv_req_count(r, 0);
    if (iv_route_check_nonempty(r, "text_1")) goto out;
    iv_input_opts o;
    if (iv_route_input_opts(r, has_trunc && trunc > 0 ? 1 : -1, 0, NULL, !cross, &o)) goto out;
    if (has_trunc && trunc > 0 && (o.max_length <= 0 || trunc < o.max_length)) o.max_length = (int)trunc;
    r->p.similarity = !cross;
    r->p.top_n = n1;
    r->p.normalize = 0;
    r->p.metric_task = cross ? "predict" : "embed";
    iv_metrics_inc(r->srv->metrics, cross ? "te_predict_count" : "te_embed_count", n);
    iv_req_submit(r, m, cross ? IV_TASK_CLASSIFY : IV_TASK_EMBED, &o, finish_score);
out:
    free(t1);
    free(t2);
}
