/* The TEI routes of the real binary against the tiny fixture checkpoints
 * (token-id inputs compared with the reference outputs in
 * expected.safetensors: cosine >= 0.99999, max abs error <= 1e-4 as the
 * golden tests) and the real all-MiniLM-L6-v2 for text routes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "golden/golden_util.h"
#include "server_harness.h"
#include "test.h"

#define MIN_COS 0.99999
#define MAX_ABS 1e-4

/* {"inputs":[[ids of case 0], [ids of case 1], ...]} plus extra fields. */
static char *ids_request(const golden_case *g, const char *key, const char *extra)
{
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_printf(&b, "{\"%s\":[", key);
    for (int i = 0; i < g->n; i++) {
        iv_sb_puts(&b, i ? ",[" : "[");
        for (int k = 0; k < g->lens[i]; k++) iv_sb_printf(&b, "%s%d", k ? "," : "", g->ids[i][k]);
        iv_sb_putc(&b, ']');
    }
    iv_sb_printf(&b, "]%s%s}", extra ? "," : "", extra ? extra : "");
    return b.data;
}

/* Compares every row of a [[f32]] response with expected "<name>.<i>". */
static void check_vectors(const char *what, const cJSON *arr, golden_case *g, const char *name)
{
    CHECK_EQ_INT(cJSON_GetArraySize(arr), g->n);
    for (int i = 0; i < g->n && i < cJSON_GetArraySize(arr); i++) {
        int n;
        float *got = json_floats(cJSON_GetArrayItem(arr, i), &n);
        const iv_tensor *want = golden_expected(g, name, i);
        REQUIRE(want);
        CHECK_EQ_INT(n, iv_tensor_numel(want));
        if (n == iv_tensor_numel(want)) {
            char label[128];
            snprintf(label, sizeof label, "%s %s.%d", what, name, i);
            golden_compare(label, got, want->data, 1, n, MIN_COS, MAX_ABS);
        }
        free(got);
    }
}

TEST(srv_embed_matches_reference)
{
    const char *dir = srv_fixture("bert");
    if (!dir) return;
    golden_case g;
    REQUIRE(golden_load(&g, dir) == 0);
    srv s;
    const char *args[] = {"--model-id", dir, NULL};
    REQUIRE(srv_start(&s, args) == 0);

    char *req = ids_request(&g, "inputs", NULL);
    http_resp r;
    REQUIRE(http_post(&s, "/embed", req, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    REQUIRE(cJSON_IsArray(r.json));
    check_vectors("/embed", r.json, &g, "pooled");
    /* TEI timing and size headers. */
    char v[64];
    CHECK(http_header(&r, "x-compute-time", v, sizeof v) != NULL);
    CHECK(http_header(&r, "x-queue-time", v, sizeof v) != NULL);
    CHECK(http_header(&r, "x-inference-time", v, sizeof v) != NULL);
    CHECK(http_header(&r, "x-tokenization-time", v, sizeof v) != NULL);
    CHECK(http_header(&r, "x-total-time", v, sizeof v) != NULL);
    int tokens = 0;
    for (int i = 0; i < g.n; i++) tokens += g.lens[i];
    CHECK(http_header(&r, "x-compute-tokens", v, sizeof v) && atoi(v) == tokens);
    CHECK(http_header(&r, "x-compute-characters", v, sizeof v) && atoi(v) == tokens);
    CHECK_STR(http_header(&r, "x-compute-type", v, sizeof v), "cpu");
    CHECK_STR(http_header(&r, "Content-Type", v, sizeof v), "application/json");
    http_resp_free(&r);
    free(req);

    /* A single id list is one input, still wrapped in the outer list. */
    REQUIRE(http_post(&s, "/embed", "{\"inputs\":[101,154,102]}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(cJSON_GetArraySize(r.json), 1);
    int n;
    float *one = json_floats(cJSON_GetArrayItem(r.json, 0), &n);
    const iv_tensor *want = golden_expected(&g, "pooled", 0);
    REQUIRE(want && n == iv_tensor_numel(want));
    golden_compare("single /embed", one, want->data, 1, n, MIN_COS, MAX_ABS);
    free(one);
    http_resp_free(&r);

    /* normalize=false: the unnormalised pooled vector (bert's Normalize module
     * makes the reference unit length, so compare directions and check the norm moved). */
    REQUIRE(http_post(&s, "/embed", "{\"inputs\":[[101,154,102]],\"normalize\":false}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    one = json_floats(cJSON_GetArrayItem(r.json, 0), &n);
    double norm = 0;
    for (int i = 0; i < n; i++) norm += (double)one[i] * one[i];
    CHECK(fabs(sqrt(norm) - 1.0) > 1e-3);
    CHECK(iv_test_cosine(one, want->data, n) > MIN_COS);
    free(one);
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);
    golden_free(&g);
}

TEST(srv_embed_dimensions_matryoshka)
{
    const char *dir = srv_fixture("mpnet");
    if (!dir) return;
    golden_case g;
    REQUIRE(golden_load(&g, dir) == 0);
    srv s;
    const char *args[] = {"--model-id", dir, NULL};
    REQUIRE(srv_start(&s, args) == 0);
    /* TEI: truncate to 16, then re-normalise = encode(truncate_dim=16, normalize_embeddings=True). */
    char *req = ids_request(&g, "inputs", "\"dimensions\":16");
    http_resp r;
    REQUIRE(http_post(&s, "/embed", req, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    check_vectors("/embed dimensions=16", r.json, &g, "pooled_dim16");
    http_resp_free(&r);
    free(req);
    /* OpenAI route: the same semantics. */
    req = ids_request(&g, "input", "\"dimensions\":16");
    REQUIRE(http_post(&s, "/v1/embeddings", req, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    const cJSON *data = cJSON_GetObjectItem(r.json, "data");
    for (int i = 0; i < g.n; i++) {
        int n;
        float *got = json_floats(cJSON_GetObjectItem(cJSON_GetArrayItem(data, i), "embedding"), &n);
        const iv_tensor *want = golden_expected(&g, "pooled_dim16", i);
        REQUIRE(want && n == 16);
        golden_compare("/v1/embeddings dimensions=16", got, want->data, 1, n, MIN_COS, MAX_ABS);
        free(got);
    }
    http_resp_free(&r);
    free(req);
    /* Infinity route: slices the normalised vector without re-normalising. */
    req = ids_request(&g, "input", "\"dimensions\":16");
    REQUIRE(http_post(&s, "/embeddings", req, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    data = cJSON_GetObjectItem(r.json, "data");
    for (int i = 0; i < g.n; i++) {
        int n;
        float *got = json_floats(cJSON_GetObjectItem(cJSON_GetArrayItem(data, i), "embedding"), &n);
        const iv_tensor *want = golden_expected(&g, "pooled", i);
        REQUIRE(want && n == 16);
        CHECK(iv_test_max_abs_diff(got, want->data, 16) <= MAX_ABS);
        free(got);
    }
    http_resp_free(&r);
    free(req);
    CHECK_EQ_INT(srv_stop(&s), 0);
    golden_free(&g);
}

TEST(srv_embed_all_and_sparse)
{
    const char *bert = srv_fixture("bert"), *splade = srv_fixture("bert_splade");
    if (!bert || !splade) return;
    golden_case g, gs;
    REQUIRE(golden_load(&g, bert) == 0);
    REQUIRE(golden_load(&gs, splade) == 0);
    srv s;
    const char *args[] = {"--model-id", bert, "--model-id", splade, "--served-model-name", "bert",
                          "--served-model-name", "splade", NULL};
    REQUIRE(srv_start(&s, args) == 0);

    char *req = ids_request(&g, "inputs", "\"model\":\"bert\"");
    http_resp r;
    REQUIRE(http_post(&s, "/embed_all", req, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(cJSON_GetArraySize(r.json), g.n);
    for (int i = 0; i < g.n && r.json; i++) {
        const cJSON *rows = cJSON_GetArrayItem(r.json, i);
        const iv_tensor *want = golden_expected(&g, "hidden", i);
        REQUIRE(want);
        CHECK_EQ_INT(cJSON_GetArraySize(rows), g.lens[i]);
        int cols = (int)(iv_tensor_numel(want) / g.lens[i]);
        for (int t = 0; t < g.lens[i] && t < cJSON_GetArraySize(rows); t++) {
            int n;
            float *got = json_floats(cJSON_GetArrayItem(rows, t), &n);
            CHECK_EQ_INT(n, cols);
            if (n == cols) golden_compare("/embed_all", got, (const float *)want->data + (size_t)t * cols, 1, n, MIN_COS, MAX_ABS);
            free(got);
        }
    }
    http_resp_free(&r);
    free(req);

    /* /embed_sparse: the non-zero entries of the reference SPLADE vector. */
    req = ids_request(&gs, "inputs", "\"model\":\"splade\"");
    REQUIRE(http_post(&s, "/embed_sparse", req, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    for (int i = 0; i < gs.n && r.json; i++) {
        const iv_tensor *want = golden_expected(&gs, "sparse", i);
        REQUIRE(want);
        int64_t vocab = iv_tensor_numel(want);
        float *dense = calloc((size_t)vocab, sizeof *dense);
        const cJSON *x;
        int last = -1, ordered = 1;
        cJSON_ArrayForEach(x, cJSON_GetArrayItem(r.json, i))
        {
            int idx = jint(x, "index");
            ordered &= idx > last;
            last = idx;
            if (idx >= 0 && idx < vocab) dense[idx] = (float)jnum(x, "value");
            CHECK(jnum(x, "value") != 0.0);
        }
        CHECK(ordered);
        golden_compare("/embed_sparse", dense, want->data, 1, vocab, MIN_COS, MAX_ABS);
        free(dense);
    }
    http_resp_free(&r);
    free(req);

    /* The embedding model has no SPLADE head: 424 naming what it serves. */
    REQUIRE(http_post(&s, "/embed_sparse", "{\"inputs\":[[101,102]],\"model\":\"bert\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 424);
    CHECK_CONTAINS(r.body, "Model is not an embedding model with SPLADE pooling");
    CHECK_CONTAINS(r.body, "/embed, /v1/embeddings");
    CHECK_STR(jstr(r.json, "error_type"), "Backend");
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);
    golden_free(&g);
    golden_free(&gs);
}

/* Labels in the response mapped back to the reference logits order. */
static void check_predictions(const cJSON *preds, const float *want, int n_labels, const char *const *labels, int raw)
{
    REQUIRE(cJSON_GetArraySize(preds) == n_labels);
    double prev = INFINITY, sum = 0;
    for (int k = 0; k < n_labels; k++) {
        const cJSON *p = cJSON_GetArrayItem(preds, k);
        double score = jnum(p, "score");
        const char *label = jstr(p, "label");
        CHECK(score <= prev); /* sorted, highest first */
        prev = score;
        sum += score;
        int idx = -1;
        for (int j = 0; j < n_labels; j++)
            if (!strcmp(labels[j], label)) idx = j;
        REQUIRE(idx >= 0);
        double expect = want[idx];
        if (!raw) {
            double mx = want[0], z = 0;
            for (int j = 1; j < n_labels; j++) mx = fmax(mx, want[j]);
            for (int j = 0; j < n_labels; j++) z += exp(want[j] - mx);
            expect = exp(want[idx] - mx) / z;
        }
        CHECK_MSG(fabs(score - expect) <= 1e-4, "label %s: %g vs %g", label, score, expect);
    }
    if (!raw) CHECK(fabs(sum - 1.0) < 1e-5);
}

TEST(srv_predict_single_pair_batch)
{
    const char *dir = srv_fixture("bert_seqcls3");
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, NULL};
    REQUIRE(srv_start(&s, args) == 0);
    static const char *labels[] = {"negative", "neutral", "positive"};
    /* Reference logits for the texts come from the CLI over the same engine. */
    http_resp raw, act, pair, batch;
    REQUIRE(http_post(&s, "/predict", "{\"inputs\":\"good day\",\"raw_scores\":true}", &raw) == 0);
    CHECK_EQ_INT(raw.status, 200);
    REQUIRE(cJSON_IsArray(raw.json) && cJSON_IsObject(cJSON_GetArrayItem(raw.json, 0)));
    float logits[3];
    for (int k = 0; k < 3; k++) {
        const cJSON *p = cJSON_GetArrayItem(raw.json, k);
        for (int j = 0; j < 3; j++)
            if (!strcmp(jstr(p, "label"), labels[j]))
                logits[j] = (float)jnum(p, "score");
    }
    check_predictions(raw.json, logits, 3, labels, 1);
    REQUIRE(http_post(&s, "/predict", "{\"inputs\":\"good day\"}", &act) == 0);
    CHECK_EQ_INT(act.status, 200);
    check_predictions(act.json, logits, 3, labels, 0);
    /* ["a", "b"] is one pair; [["a"], ["a","b"]] a batch. */
    REQUIRE(http_post(&s, "/predict", "{\"inputs\":[\"good day\",\"bad night\"]}", &pair) == 0);
    CHECK_EQ_INT(pair.status, 200);
    CHECK(cJSON_IsObject(cJSON_GetArrayItem(pair.json, 0)));
    REQUIRE(http_post(&s, "/predict", "{\"inputs\":[[\"good day\"],[\"good day\",\"bad night\"]]}", &batch) == 0);
    CHECK_EQ_INT(batch.status, 200);
    CHECK_EQ_INT(cJSON_GetArraySize(batch.json), 2);
    /* The same scores alone or batched (packed batches agree to float rounding). */
    for (int k = 0; k < 3; k++) {
        const cJSON *x = cJSON_GetArrayItem(cJSON_GetArrayItem(batch.json, 0), k), *y = cJSON_GetArrayItem(act.json, k);
        const cJSON *u = cJSON_GetArrayItem(cJSON_GetArrayItem(batch.json, 1), k), *v = cJSON_GetArrayItem(pair.json, k);
        CHECK_STR(jstr(x, "label"), jstr(y, "label"));
        CHECK_STR(jstr(u, "label"), jstr(v, "label"));
        CHECK(fabs(jnum(x, "score") - jnum(y, "score")) < 1e-5);
        CHECK(fabs(jnum(u, "score") - jnum(v, "score")) < 1e-5);
    }
    http_resp_free(&raw);
    http_resp_free(&act);
    http_resp_free(&pair);
    http_resp_free(&batch);

    /* Classifier on /embed and /rerank: 424 naming what it serves. */
    http_resp r;
    REQUIRE(http_post(&s, "/embed", "{\"inputs\":\"x\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 424);
    CHECK_CONTAINS(r.body, "Model is not an embedding model");
    CHECK_CONTAINS(r.body, "/predict, /classify");
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/rerank", "{\"query\":\"x\",\"texts\":[\"y\"]}", &r) == 0);
    CHECK_EQ_INT(r.status, 424);
    CHECK_CONTAINS(r.body, "model is not a re-ranker model");
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);
}

TEST(srv_rerank_tei_and_infinity)
{
    const char *dir = srv_fixture("bert_seqcls1");
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, "--served-model-name", "tiny-reranker", NULL};
    REQUIRE(srv_start(&s, args) == 0);
    const char *texts[] = {"abc", "the cat sat", "zz", "hello world"};
    /* Each pair alone through /predict (raw logit, then sigmoid). */
    double logit[4];
    for (int i = 0; i < 4; i++) {
        char body[256];
        snprintf(body, sizeof body, "{\"inputs\":[\"what is a cat\",\"%s\"],\"raw_scores\":true}", texts[i]);
        http_resp r;
        REQUIRE(http_post(&s, "/predict", body, &r) == 0);
        REQUIRE(r.status == 200);
        logit[i] = jnum(cJSON_GetArrayItem(r.json, 0), "score");
        CHECK_STR(jstr(cJSON_GetArrayItem(r.json, 0), "label"), "LABEL_0");
        http_resp_free(&r);
    }
    http_resp r;
    REQUIRE(http_post(&s, "/rerank",
                      "{\"query\":\"what is a cat\",\"texts\":[\"abc\",\"the cat sat\",\"zz\",\"hello world\"],"
                      "\"return_text\":true}",
                      &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    REQUIRE(cJSON_GetArraySize(r.json) == 4);
    double prev = INFINITY;
    for (int k = 0; k < 4; k++) {
        const cJSON *x = cJSON_GetArrayItem(r.json, k);
        int idx = jint(x, "index");
        double score = jnum(x, "score");
        REQUIRE(idx >= 0 && idx < 4);
        CHECK(score <= prev);
        prev = score;
        CHECK(fabs(score - 1.0 / (1.0 + exp(-logit[idx]))) < 1e-5);
        CHECK_STR(jstr(x, "text"), texts[idx]);
    }
    http_resp_free(&r);
    /* raw_scores, no text. */
    REQUIRE(http_post(&s, "/rerank", "{\"query\":\"what is a cat\",\"texts\":[\"abc\",\"zz\"],\"raw_scores\":true}",
                      &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    for (int k = 0; k < 2; k++) {
        const cJSON *x = cJSON_GetArrayItem(r.json, k);
        int idx = jint(x, "index");
        CHECK(cJSON_GetObjectItem(x, "text") == NULL);
        CHECK(fabs(jnum(x, "score") - logit[idx == 0 ? 0 : 2]) < 1e-4);
    }
    http_resp_free(&r);
    /* Infinity's shape on the same path: documents, top_n, return_documents. */
    REQUIRE(http_post(&s, "/rerank",
                      "{\"query\":\"what is a cat\",\"documents\":[\"abc\",\"the cat sat\",\"zz\",\"hello world\"],"
                      "\"top_n\":2,\"return_documents\":true,\"model\":\"tiny-reranker\"}",
                      &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(jstr(r.json, "object"), "rerank");
    CHECK_STR(jstr(r.json, "model"), "tiny-reranker");
    CHECK_CONTAINS(jstr(r.json, "id"), "infinity-");
    CHECK(cJSON_IsNumber(cJSON_GetObjectItem(r.json, "created")));
    const cJSON *results = cJSON_GetObjectItem(r.json, "results");
    REQUIRE(cJSON_GetArraySize(results) == 2);
    int best = 0;
    for (int i = 1; i < 4; i++)
        if (logit[i] > logit[best]) best = i;
    const cJSON *top = cJSON_GetArrayItem(results, 0);
    CHECK_EQ_INT(jint(top, "index"), best);
    CHECK_STR(jstr(top, "document"), texts[best]);
    CHECK(fabs(jnum(top, "relevance_score") - 1.0 / (1.0 + exp(-logit[best]))) < 1e-5);
    const cJSON *usage = cJSON_GetObjectItem(r.json, "usage");
    CHECK(jint(usage, "prompt_tokens") > 4);
    CHECK_EQ_INT(jint(usage, "total_tokens"),
                 jint(usage, "prompt_tokens"));
    http_resp_free(&r);
    /* A reranker has no pooled embedding. */
    REQUIRE(http_post(&s, "/embeddings", "{\"input\":\"abc\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 400);
    CHECK_CONTAINS(r.body, "ModelNotDeployedError: model=`tiny-reranker` does not support `embed`");
    CHECK_CONTAINS(r.body, "Options are {'rerank'}");
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);
}

TEST(srv_text_routes_minilm)
{
    const char *dir = srv_minilm();
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, NULL};
    REQUIRE(srv_start(&s, args) == 0);
    http_resp r;
    /* /similarity: cosine of unnormalised embeddings. */
    REQUIRE(http_post(&s, "/similarity",
                      "{\"inputs\":{\"source_sentence\":\"A man is eating food.\",\"sentences\":[\"A man is eating "
                      "a piece of bread.\",\"The girl is carrying a baby.\"]}}",
                      &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    REQUIRE(cJSON_GetArraySize(r.json) == 2);
    const cJSON *sim1 = cJSON_GetArrayItem(r.json, 0), *sim2 = cJSON_GetArrayItem(r.json, 1);
    REQUIRE(cJSON_IsNumber(sim1) && cJSON_IsNumber(sim2));
    double s1 = sim1->valuedouble, s2 = sim2->valuedouble;
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/embed",
                      "{\"inputs\":[\"A man is eating food.\",\"A man is eating a piece of bread.\",\"The girl is "
                      "carrying a baby.\"]}",
                      &r) == 0);
    REQUIRE(r.status == 200);
    int n;
    float *e0 = json_floats(cJSON_GetArrayItem(r.json, 0), &n), *e1 = json_floats(cJSON_GetArrayItem(r.json, 1), &n),
          *e2 = json_floats(cJSON_GetArrayItem(r.json, 2), &n);
    CHECK_EQ_INT(n, 384);
    CHECK(fabs(s1 - iv_test_cosine(e0, e1, n)) < 1e-5);
    CHECK(fabs(s2 - iv_test_cosine(e0, e2, n)) < 1e-5);
    CHECK(s1 > s2);
    free(e0), free(e1), free(e2);
    http_resp_free(&r);

    /* /tokenize: byte offsets into the input, specials without offsets. */
    REQUIRE(http_post(&s, "/tokenize", "{\"inputs\":\"Hello world\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(r.body, "[[{\"id\":101,\"text\":\"[CLS]\",\"special\":true,\"start\":null,\"stop\":null},"
                      "{\"id\":7592,\"text\":\"Hello\",\"special\":false,\"start\":0,\"stop\":5},"
                      "{\"id\":2088,\"text\":\"world\",\"special\":false,\"start\":6,\"stop\":11},"
                      "{\"id\":102,\"text\":\"[SEP]\",\"special\":true,\"start\":null,\"stop\":null}]]");
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/tokenize", "{\"inputs\":[\"héllo\",\"a b\"],\"add_special_tokens\":false}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(cJSON_GetArraySize(r.json), 2);
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetArrayItem(r.json, 1)), 2);
    http_resp_free(&r);
    /* /decode: one id list or several; special tokens skipped by default. */
    REQUIRE(http_post(&s, "/decode", "{\"ids\":[101,7592,2088,102]}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(r.body, "[\"hello world\"]");
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/decode", "{\"ids\":[[101,7592,102],[2088]],\"skip_special_tokens\":false}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(r.body, "[\"[CLS] hello [SEP]\",\"world\"]");
    http_resp_free(&r);

    /* /info, /health, /metrics. */
    REQUIRE(http_get(&s, "/info", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(jstr(r.json, "model_id"), dir);
    CHECK_STR(jstr(cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "model_type"), "embedding"),
                                  "pooling"),
              "mean");
    CHECK_EQ_INT(jint(r.json, "max_input_length"), 256);
    CHECK_STR(jstr(r.json, "max_input_length_source"), "sentence_bert_config.json");
    CHECK_EQ_INT(jint(r.json, "max_client_batch_size"), 32);
    CHECK_EQ_INT(jint(r.json, "max_concurrent_requests"), 2048); /* raised to --max-client-batch-size-openai */
    CHECK_EQ_INT(jint(r.json, "max_batch_tokens"), 16384);
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(r.json, "max_batch_requests")));
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(r.json, "auto_truncate")));
    http_resp_free(&r);
    REQUIRE(http_get(&s, "/health", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK(cJSON_IsNumber(cJSON_GetObjectItem(r.json, "unix")));
    http_resp_free(&r);
    REQUIRE(http_get(&s, "/metrics", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(metric_value(r.body, "te_request_count{method=\"batch\"}"), 2); /* /similarity, /embed */
    CHECK_EQ_INT(metric_value(r.body, "te_request_success{method=\"batch\"}"), 2);
    CHECK(metric_value(r.body, "te_embed_count") >= 6);
    CHECK(metric_value(r.body, "te_embed_success") >= 6);
    CHECK(metric_value(r.body, "te_queue_size") == 0);
    CHECK(metric_value(r.body, "te_request_duration_count") >= 2);
    CHECK(metric_value(r.body, "te_batch_next_size_count") >= 1);
    CHECK(metric_value(r.body, "te_request_input_length_bucket{le=\"256\"}") >= 6);
    CHECK_CONTAINS(r.body, "# TYPE te_request_duration histogram");
    CHECK_CONTAINS(r.body, "te_request_duration_bucket{le=\"+Inf\"}");
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);
}

/* Issue 22: /tokenize skipped every limit of the other routes (a 1.9 MB
 * body answered 129 MB). It now applies the character cap (250 x the token
 * limit), the token limit with the truncation rule, the batch size and the
 * permits, so its reply is at most the limit in tokens per input. */
TEST(srv_tokenize_limits)
{
    const char *dir = srv_fixture("bert"); /* token limit 128 */
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, "--max-concurrent-requests", "2", "--max-client-batch-size", "4", NULL};
    REQUIRE(srv_start(&s, args) == 0);
    http_resp r;
    /* 400 words: truncated to the limit (the server's default), the last token special. */
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_puts(&b, "{\"inputs\":\"");
    for (int i = 0; i < 400; i++) iv_sb_puts(&b, "a ");
    iv_sb_puts(&b, "\"}");
    REQUIRE(http_post(&s, "/tokenize", b.data, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    const cJSON *toks = cJSON_GetArrayItem(r.json, 0);
    CHECK_EQ_INT(cJSON_GetArraySize(toks), 128);
    CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(toks, 127), "special")));
    http_resp_free(&r);
    /* truncate: false answers 422 naming the limit, as the other routes. */
    b.len -= 2;
    iv_sb_puts(&b, "\",\"truncate\":false}");
    REQUIRE(http_post(&s, "/tokenize", b.data, &r) == 0);
    CHECK_EQ_INT(r.status, 422);
    CHECK_STR(jstr(r.json, "error"), "Input validation error: `inputs` must have less than 128 tokens. Given: 402");
    http_resp_free(&r);
    iv_sb_free(&b);
    /* The character cap: 250 x 128 = 32000. */
    iv_sb_init(&b);
    iv_sb_puts(&b, "{\"truncate\":false,\"inputs\":\"");
    for (int i = 0; i < 32001; i++) iv_sb_putc(&b, 'a');
    iv_sb_puts(&b, "\"}");
    REQUIRE(http_post(&s, "/tokenize", b.data, &r) == 0);
    CHECK_EQ_INT(r.status, 422);
    CHECK_STR(jstr(r.json, "error"), "Input validation error: `inputs` must have less than 32000 characters. Given: 32001");
    http_resp_free(&r);
    iv_sb_free(&b);
    /* The batch size, then the permits: three inputs never fit two. */
    REQUIRE(http_post(&s, "/tokenize", "{\"inputs\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", &r) == 0);
    CHECK_EQ_INT(r.status, 422);
    CHECK_CONTAINS(r.body, "batch size 5 > maximum allowed batch size 4");
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/tokenize", "{\"inputs\":[\"a\",\"b\",\"c\"]}", &r) == 0);
    CHECK_EQ_INT(r.status, 422);
    CHECK_CONTAINS(r.body, "batch size 3 > maximum concurrent inputs 2 (--max-concurrent-requests)");
    http_resp_free(&r);
    /* Permits come back: two inputs run, again and again. */
    for (int i = 0; i < 3; i++) {
        REQUIRE(http_post(&s, "/tokenize", "{\"inputs\":[\"a\",\"b\"]}", &r) == 0);
        CHECK_EQ_INT(r.status, 200);
        http_resp_free(&r);
    }
    CHECK_EQ_INT(srv_stop(&s), 0);
}

/* Issue 22: "hello\u0000world" embedded as "hello" (cJSON strings end at
 * NUL), and raw control bytes inside strings were accepted. The tokenizers
 * library keeps the NUL as a character (the BERT normalizer then drops it):
 * for all-MiniLM-L6-v2 it gives [CLS] hello ##world [SEP] with offsets
 * (0,5), (6,11), the reference below. */
TEST(srv_json_nul_and_control_bytes)
{
    const char *dir = srv_minilm();
    if (!dir) return;
    srv s;
    const char *args[] = {"--model-id", dir, NULL};
    REQUIRE(srv_start(&s, args) == 0);
    http_resp r;
    REQUIRE(http_post(&s, "/tokenize", "{\"inputs\":\"hello\\u0000world\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(r.body, "[[{\"id\":101,\"text\":\"[CLS]\",\"special\":true,\"start\":null,\"stop\":null},"
                      "{\"id\":7592,\"text\":\"hello\",\"special\":false,\"start\":0,\"stop\":5},"
                      "{\"id\":11108,\"text\":\"world\",\"special\":false,\"start\":6,\"stop\":11},"
                      "{\"id\":102,\"text\":\"[SEP]\",\"special\":true,\"start\":null,\"stop\":null}]]");
    http_resp_free(&r);
    /* The embedding is that of the same ids, not of "hello"; also in a pair and a list. */
    const char *bodies[][2] = {
        {"/embed", "{\"inputs\":\"hello\\u0000world\"}"},
        {"/embed", "{\"inputs\":[\"x\",\"hello\\u0000world\"]}"},
        {"/v1/embeddings", "{\"input\":\"hello\\u0000world\"}"},
    };
    http_resp ref, hello;
    REQUIRE(http_post(&s, "/embed", "{\"inputs\":[[101,7592,11108,102]]}", &ref) == 0);
    REQUIRE(http_post(&s, "/embed", "{\"inputs\":\"hello\"}", &hello) == 0);
    int n;
    float *want = json_floats(cJSON_GetArrayItem(ref.json, 0), &n);
    float *h = json_floats(cJSON_GetArrayItem(hello.json, 0), &n);
    for (int k = 0; k < 3; k++) {
        REQUIRE(http_post(&s, bodies[k][0], bodies[k][1], &r) == 0);
        CHECK_EQ_INT(r.status, 200);
        const cJSON *v = k == 2 ? cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(
                                      cJSON_GetObjectItemCaseSensitive(r.json, "data"), 0), "embedding")
                                : cJSON_GetArrayItem(r.json, k == 1 ? 1 : 0);
        int m;
        float *got = json_floats(v, &m);
        REQUIRE(got && m == n);
        float d_ref = 0, d_hello = 0;
        for (int i = 0; i < n; i++) {
            d_ref = fmaxf(d_ref, fabsf(got[i] - want[i]));
            d_hello = fmaxf(d_hello, fabsf(got[i] - h[i]));
        }
        if (d_ref > 1e-5f || d_hello < 1e-3f)
            iv_test_fail(__FILE__, __LINE__, "%s %s: |d| to the reference %g, to \"hello\" %g", bodies[k][0],
                         bodies[k][1], d_ref, d_hello);
        free(got);
        http_resp_free(&r);
    }
    free(want);
    free(h);
    http_resp_free(&ref);
    http_resp_free(&hello);
    /* Raw control bytes inside a string: a JSON syntax error (RFC 8259). */
    REQUIRE(http_post(&s, "/embed", "{\"inputs\":\"a\x01" "b\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 400);
    CHECK_STR(r.body, "Failed to parse the request body as JSON: control character (\\u0000-\\u001F) found while "
                      "parsing a string at line 1 column 13");
    http_resp_free(&r);
    REQUIRE(http_post(&s, "/embeddings", "{\"input\":[\"a\nb\"]}", &r) == 0);
    CHECK_EQ_INT(r.status, 422);
    CHECK_CONTAINS(r.body, "json_invalid");
    http_resp_free(&r);
    /* Control bytes between tokens are whitespace or errors as before. */
    REQUIRE(http_post(&s, "/embed", "{\"inputs\":\n\t\"a\\tb\"}", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    http_resp_free(&r);
    CHECK_EQ_INT(srv_stop(&s), 0);
}
