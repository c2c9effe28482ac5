/* The Nemotron Mistral3 reranker's text pairs in its processor's format
 * (engine/pair_format.h; Mistral3BiEncoderProcessor's cross-encoder path,
 * re-derived in tools/fixtures/synthetic_mistral3_rerank.py): the ids of each
 * (query, text) of cases.json "server_rerank" must equal the reference's
 * exactly (marking, join, special tokens, truncation), and the scores of all
 * pairs run as one packed batch be within 1e-4 of its raw logits. The
 * integration test srv_rerank_mistral3_reranker sends the same pairs over
 * HTTP; the load checks here reject what the processor would read otherwise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "engine/engine.h"
#include "engine/inputs.h"
#include "engine/pair_format.h"
#include "test.h"
#include "unit/ckpt_test_util.h"

#define MAX_ABS 1e-4
#define MAX_TEXTS 16

static void check_fixture(const char *fixture)
{
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/models/%s", iv_test_fixtures_dir(), fixture);
    snprintf(path, sizeof path, "%s/cases.json", dir);
    cJSON *doc = NULL;
    iv_engine *e = NULL;
    iv_err err = {0};
    if (iv_json_load_file(path, 1 << 20, &doc, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return;
    }
    if (iv_engine_load(&e, dir, NULL, &err)) {
        iv_test_fail(__FILE__, __LINE__, "load %s: %s", fixture, err.msg);
        cJSON_Delete(doc);
        return;
    }
    CHECK(iv_engine_pair_format(e) != NULL);
    const cJSON *want = iv_json_get(doc, "server_rerank");
    const char *query = iv_json_str(want, "query", "");
    const cJSON *texts = iv_json_get(want, "texts"), *ids = iv_json_get(want, "ids"),
                *scores = iv_json_get(want, "raw_scores");
    const int n = cJSON_GetArraySize(texts);
    REQUIRE(n > 0 && n <= MAX_TEXTS && cJSON_GetArraySize(ids) == n && cJSON_GetArraySize(scores) == n);
    iv_prepared prep[MAX_TEXTS];
    iv_seq_input seqs[MAX_TEXTS];
    memset(prep, 0, sizeof prep);
    int ok = 1, max_len = 0;
    for (int i = 0; i < n; i++) {
        const char *text = cJSON_GetArrayItem(texts, i)->valuestring;
        const iv_input in = {.text = query, .text_len = strlen(query), .pair = text, .pair_len = strlen(text)};
        if (iv_prepare_input(e, &in, NULL, &prep[i], &err)) {
            iv_test_fail(__FILE__, __LINE__, "%s text %d: %s", fixture, i, err.msg);
            ok = 0;
            continue;
        }
        const cJSON *ref = cJSON_GetArrayItem(ids, i);
        const int len = cJSON_GetArraySize(ref);
        int same = prep[i].seq.len == len;
        for (int k = 0; same && k < len; k++) same = prep[i].seq.ids[k] == cJSON_GetArrayItem(ref, k)->valueint;
        CHECK_MSG(same, "%s text %d: %d ids, reference %d, or a different id", fixture, i, prep[i].seq.len, len);
        ok &= same;
        seqs[i] = prep[i].seq;
        if (len > max_len) max_len = len;
    }
    /* The texts include one cut at the limit: the truncation is under test too. */
    CHECK_EQ_INT(max_len, iv_engine_max_input_length(e));
    iv_outputs out;
    if (ok && iv_engine_run(e, IV_TASK_CLASSIFY, seqs, n, &out, &err) == 0) {
        for (int i = 0; i < n; i++) {
            const double got = out.data[i], ref = cJSON_GetArrayItem(scores, i)->valuedouble;
            CHECK_MSG(fabs(got - ref) <= MAX_ABS, "%s text %d: raw score %.7f, reference %.7f", fixture, i, got, ref);
        }
        iv_outputs_free(&out);
    } else if (ok) {
        iv_test_fail(__FILE__, __LINE__, "%s run: %s", fixture, err.msg);
    }
    for (int i = 0; i < n; i++) iv_prepared_free(&prep[i]);
    iv_engine_free(e);
    cJSON_Delete(doc);
}

TEST(golden_mistral3_rerank_pair_format_matches_processor)
{
    check_fixture("mistral3_rerank");         /* use_prompt_template true, rerank_max_length null */
    check_fixture("mistral3_rerank_mistral"); /* use_prompt_template false, rerank_max_length 128 */
}

TEST(mistral3_rerank_pair_format_marks_control_prefixes)
{
    iv_pair_format pf = {.enabled = 1, .use_prompt_template = 1};
    char *s = NULL;
    size_t n = 0;
    iv_err err = {0};
    REQUIRE(iv_pair_format_render(&pf, "a[b", 3, "<s>x<", 5, &s, &n, &err) == 0);
    CHECK_STR(s, "query: a[\xE2\x80\x8C"
                    "b\n\npassage: <\xE2\x80\x8C"
                    "s>x<\xE2\x80\x8C");
    CHECK(n == strlen(s));
    free(s);
    pf.use_prompt_template = 0;
    REQUIRE(iv_pair_format_render(&pf, "q", 1, "", 0, &s, &n, &err) == 0);
    CHECK_STR(s, "q\n");
    free(s);
}

/* A temp checkpoint from the fixture with the given processor_config.json
 * and tokenizer_config.json (NULL: the fixture's). */
static int make_ckpt(char *dir, size_t cap, const char *processor_config, const char *tokenizer_config)
{
    static const char *fixture = "mistral3_rerank_mistral";
    if (ckpt_make(dir, cap, fixture, NULL, 1) || ckpt_link(dir, fixture, "tokenizer.json")) return -1;
    if (tokenizer_config ? ckpt_write(dir, "tokenizer_config.json", tokenizer_config, strlen(tokenizer_config))
                         : ckpt_link(dir, fixture, "tokenizer_config.json"))
        return -1;
    return processor_config ? ckpt_write(dir, "processor_config.json", processor_config, strlen(processor_config)) : 0;
}

static void expect_reject(int line, const char *processor_config, const char *tokenizer_config, const char *needle,
                          int code)
{
    char dir[256];
    if (make_ckpt(dir, sizeof dir, processor_config, tokenizer_config)) return;
    ckpt_expect_load_error_at(__FILE__, line, dir, "processor_config.json", needle, code);
    tmp_rmtree(dir);
}

/* Loads; returns whether the pair format is on (-1: load failed). */
static int pair_format_on(int line, const char *processor_config)
{
    char dir[256];
    if (make_ckpt(dir, sizeof dir, processor_config, NULL)) return -1;
    iv_engine *e = NULL;
    iv_err err = {0};
    int on = -1;
    if (iv_engine_load(&e, dir, NULL, &err)) iv_test_fail(__FILE__, line, "load: %s", err.msg);
    else on = iv_engine_pair_format(e) != NULL;
    iv_engine_free(e);
    tmp_rmtree(dir);
    return on;
}

#define AUTO "\"auto_map\": {\"AutoProcessor\": \"processor.Mistral3BiEncoderProcessor\"}"
#define CLS "\"processor_class\": \"Mistral3BiEncoderProcessor\""
#define FIELDS "\"use_prompt_template\": true, \"rerank_max_length\": null"
#define POLICY "\"nemo_control_token_escape_policy\": \"mistral_retrieval_zwnj_prefix_v1\""

TEST(mistral3_rerank_pair_format_rejects_unknown_processor_configs)
{
    /* Every field the format depends on, present and typed. */
    expect_reject(__LINE__, "{" CLS ", " AUTO ", \"rerank_max_length\": null}", NULL, "no \"use_prompt_template\"",
                  IV_E_UNSUPPORTED);
    expect_reject(__LINE__, "{" CLS ", \"use_prompt_template\": false}", NULL, "no \"rerank_max_length\"",
                  IV_E_UNSUPPORTED);
    expect_reject(__LINE__, "{" CLS ", \"use_prompt_template\": \"true\", \"rerank_max_length\": null}", NULL,
                  "\"use_prompt_template\" must be true or false", IV_E_FORMAT);
    expect_reject(__LINE__, "{" CLS ", \"use_prompt_template\": true, \"rerank_max_length\": 0}", NULL,
                  "\"rerank_max_length\" must be a positive integer or null", IV_E_FORMAT);
    expect_reject(__LINE__, "{" CLS ", \"use_prompt_template\": true, \"rerank_max_length\": 2.5}", NULL,
                  "\"rerank_max_length\" must be a positive integer or null", IV_E_FORMAT);
    /* Another rerank processor's format switch. */
    expect_reject(__LINE__, "{" CLS ", " FIELDS ", \"prompt_template\": \"v1\"}", NULL, "\"prompt_template\"",
                  IV_E_UNSUPPORTED);
    /* Class and auto_map naming different processors. */
    expect_reject(__LINE__, "{\"processor_class\": \"PixtralProcessor\", " AUTO ", " FIELDS "}", NULL,
                  "name different processors", IV_E_FORMAT);
    expect_reject(__LINE__,
                  "{" CLS ", \"auto_map\": {\"AutoProcessor\": \"processor.LlamaNemotronVLRerankProcessor\"}, " FIELDS
                  "}",
                  NULL, "name different processors", IV_E_FORMAT);
    /* Not JSON, not an object. */
    expect_reject(__LINE__, "{" CLS, NULL, "processor_config.json", IV_E_FORMAT);
    expect_reject(__LINE__, "[]", NULL, "must be a JSON object", IV_E_FORMAT);
    /* A tokenizer saved without the escape policy would read the marks as text. */
    expect_reject(__LINE__, "{" CLS ", " AUTO ", " FIELDS "}", "{\"model_max_length\": 128}",
                  "nemo_control_token_escape_policy", IV_E_UNSUPPORTED);
    expect_reject(__LINE__, "{" CLS ", " AUTO ", " FIELDS "}",
                  "{\"nemo_control_token_escape_policy\": \"other_v2\", \"model_max_length\": 128}",
                  "nemo_control_token_escape_policy", IV_E_UNSUPPORTED);

    /* Accepted: either name alone, the hub form of auto_map; off for other processors or none. */
    CHECK_EQ_INT(pair_format_on(__LINE__, "{" CLS ", " FIELDS "}"), 1);
    CHECK_EQ_INT(pair_format_on(__LINE__, "{" AUTO ", " FIELDS "}"), 1);
    CHECK_EQ_INT(pair_format_on(__LINE__, "{\"auto_map\": {\"AutoProcessor\": "
                                          "\"nvidia/x--processor.Mistral3BiEncoderProcessor\"}, " FIELDS "}"),
                 1);
    CHECK_EQ_INT(pair_format_on(__LINE__, "{\"processor_class\": \"PixtralProcessor\", \"patch_size\": 16}"), 0);
    CHECK_EQ_INT(pair_format_on(__LINE__, NULL), 0);
}

/* rerank_max_length below the engine's limit cuts pairs there (the
 * processor's max_length), with the tokenizer's special tokens kept. */
TEST(mistral3_rerank_pair_format_rerank_max_length)
{
    char dir[256];
    if (make_ckpt(dir, sizeof dir, "{" CLS ", \"use_prompt_template\": false, \"rerank_max_length\": 6}", NULL))
        return;
    iv_engine *e = NULL;
    iv_err err = {0};
    if (iv_engine_load(&e, dir, NULL, &err) == 0) {
        const iv_input in = {.text = "what is a cat", .text_len = 13, .pair = "hello world", .pair_len = 11};
        iv_prepared p;
        REQUIRE(iv_prepare_input(e, &in, NULL, &p, &err) == 0);
        /* <s> w h a t Ġis ... cut to 6 with </s> last: ids 0, 123, 108, 101, 120, 2. */
        static const int32_t want[] = {0, 123, 108, 101, 120, 2};
        CHECK_EQ_INT(p.seq.len, 6);
        for (int k = 0; k < 6 && k < p.seq.len; k++) CHECK_EQ_INT(p.seq.ids[k], want[k]);
        iv_prepared_free(&p);
        iv_input_opts o = iv_input_opts_default();
        o.truncate = 0;
        CHECK(iv_prepare_input(e, &in, &o, &p, &err) != 0 && strstr(err.msg, "maximum of 6"));
        o = iv_input_opts_default();
        o.prompt = "x: ";
        CHECK(iv_prepare_input(e, &in, &o, &p, &err) != 0 && strstr(err.msg, "formats pairs itself"));
        iv_engine_free(e);
    } else {
        iv_test_fail(__FILE__, __LINE__, "load: %s", err.msg);
    }
    tmp_rmtree(dir);
}
