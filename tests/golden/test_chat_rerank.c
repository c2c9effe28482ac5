/* LLM reranking through the checkpoint's chat template, as
 * sentence-transformers 6.3's CrossEncoder does it (qwen3_st_reranker,
 * tools/fixtures/synthetic_chat_rerank.py): each (query, document) pair, with
 * an optional prompt, becomes a conversation, the chat template renders it,
 * the text is tokenized without added special tokens, a cut document gets
 * the template's tail back, and LogitScore gives logit(yes) - logit(no) at
 * the last token. The token ids must equal CrossEncoder.preprocess's exactly;
 * the scores of all pairs run as one packed batch must be within 1e-4 (FP32)
 * of CrossEncoder.predict's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/json.h"
#include "engine/engine.h"
#include "engine/inputs.h"
#include "test.h"

#define MAX_ABS 1e-4
#define MAX_CASES 16

static cJSON *load_cases(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/chat_cases.json", dir);
    cJSON *doc = NULL;
    iv_err err = {0};
    if (iv_json_load_file(path, 1 << 20, &doc, &err)) iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
    return doc;
}

static iv_engine *open_fixture(char *dir, size_t cap, const iv_engine_opts *opts)
{
    snprintf(dir, cap, "%s/models/qwen3_st_reranker", iv_test_fixtures_dir());
    iv_engine *e = NULL;
    iv_err err = {0};
    if (iv_engine_load(&e, dir, opts, &err)) iv_test_fail(__FILE__, __LINE__, "load: %s", err.msg);
    return e;
}

TEST(golden_chat_template_reranker_matches_cross_encoder)
{
    char dir[4096];
    iv_engine *e = open_fixture(dir, sizeof dir, NULL);
    cJSON *doc = load_cases(dir);
    if (!e || !doc) goto out;
    CHECK(iv_engine_capabilities(e) & IV_CAN(IV_TASK_CLASSIFY));
    CHECK_EQ_INT(iv_engine_num_labels(e), 1);
    CHECK_EQ_INT(iv_engine_max_input_length(e), iv_json_int(doc, "max_seq_length", 0));
    const cJSON *cases = iv_json_get(doc, "cases");
    int n = cJSON_GetArraySize(cases);
    REQUIRE(n > 0 && n <= MAX_CASES);
    iv_prepared prep[MAX_CASES];
    iv_seq_input seqs[MAX_CASES];
    float want[MAX_CASES];
    memset(prep, 0, sizeof prep);
    int ok = 1, truncated = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *c = cJSON_GetArrayItem(cases, i);
        const char *q = iv_json_str(c, "query", ""), *d = iv_json_str(c, "document", "");
        const char *pname = iv_json_str(c, "prompt_name", NULL);
        iv_input in = {.text = q, .text_len = strlen(q), .pair = d, .pair_len = strlen(d)};
        iv_input_opts o = iv_input_opts_default();
        o.prompt = pname ? iv_st_meta_prompt(iv_engine_st_meta(e), pname) : NULL;
        CHECK(!pname || o.prompt);
        iv_err err = {0};
        if (iv_prepare_input(e, &in, &o, &prep[i], &err)) {
            iv_test_fail(__FILE__, __LINE__, "case %d: %s", i, err.msg);
            ok = 0;
            continue;
        }
        const cJSON *ids = iv_json_get(c, "ids");
        int match = prep[i].seq.len == cJSON_GetArraySize(ids);
        for (int k = 0; match && k < prep[i].seq.len; k++) match = prep[i].seq.ids[k] == cJSON_GetArrayItem(ids, k)->valueint;
        CHECK_MSG(match, "case %d (\"%s\"): %d token ids differ from CrossEncoder.preprocess's %d", i, q,
                  prep[i].seq.len, cJSON_GetArraySize(ids));
        truncated += prep[i].enc.n_truncated > 0;
        seqs[i] = prep[i].seq;
        want[i] = (float)iv_json_num(c, "score", NAN);
    }
    CHECK_MSG(truncated == 1, "exactly one case is cut at the limit (its template tail restored); got %d", truncated);
    if (ok) {
        iv_outputs out;
        iv_err err = {0};
        if (iv_engine_run(e, IV_TASK_CLASSIFY, seqs, n, &out, &err)) {
            iv_test_fail(__FILE__, __LINE__, "run: %s", err.msg);
        } else {
            for (int i = 0; i < n; i++) {
                const float got = out.data[out.offsets[i]];
                CHECK_MSG(fabsf(got - want[i]) <= MAX_ABS, "case %d: score %.6f, CrossEncoder %.6f", i, got, want[i]);
            }
            iv_outputs_free(&out);
        }
    }
    for (int i = 0; i < n; i++) iv_prepared_free(&prep[i]);
out:
    cJSON_Delete(doc);
    iv_engine_free(e);
}

/* The checkpoint names its score tokens; --causal-lm-rerank on top is refused. */
TEST(chat_template_reranker_refuses_second_score_tokens)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/models/qwen3_st_reranker", iv_test_fixtures_dir());
    iv_engine_opts opts = {.rerank_tokens = "yes,no"};
    iv_engine *e = NULL;
    iv_err err = {0};
    CHECK(iv_engine_load(&e, dir, &opts, &err) != 0);
    CHECK_CONTAINS(err.msg, "LogitScore");
    iv_engine_free(e);
}

/* A conversation given as such renders through the same template: the pair
 * as explicit query/document messages gives the pair's tokens. Image parts
 * on this text-only model and malformed messages are refused by name. */
TEST(chat_template_messages_input)
{
    char dir[4096];
    iv_engine *e = open_fixture(dir, sizeof dir, NULL);
    if (!e) return;
    cJSON *conv = cJSON_Parse("[{\"role\":\"query\",\"content\":\"explain gravity\"},"
                              "{\"role\":\"document\",\"content\":\"Gravity pulls.\"}]");
    iv_input as_pair = {.text = "explain gravity", .text_len = 15, .pair = "Gravity pulls.", .pair_len = 14};
    iv_input as_msgs = {.messages = conv};
    iv_prepared a, b;
    iv_err err = {0};
    REQUIRE(iv_prepare_input(e, &as_pair, NULL, &a, &err) == 0);
    REQUIRE(iv_prepare_input(e, &as_msgs, NULL, &b, &err) == 0);
    CHECK_EQ_INT(a.seq.len, b.seq.len);
    CHECK(a.seq.len == b.seq.len && !memcmp(a.seq.ids, b.seq.ids, (size_t)a.seq.len * sizeof(int32_t)));
    iv_prepared_free(&a);
    iv_prepared_free(&b);
    cJSON_Delete(conv);

    static const struct {
        const char *json, *msg;
    } bad[] = {
        {"[]", "non-empty list"},
        {"{\"role\":\"user\"}", "non-empty list"},
        {"[{\"content\":\"x\"}]", "string `role`"},
        {"[{\"role\":\"user\",\"content\":7}]", "`content` must be"},
        {"[{\"role\":\"user\",\"content\":[\"x\"]}]", "content part"},
        {"[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:,\"}}]}]",
         "reads text only"},
    };
    /* A NUL would end the template's string early: refused, not cut. */
    iv_input nul = {.text = "a\0b", .text_len = 3, .pair = "d", .pair_len = 1};
    CHECK(iv_prepare_input(e, &nul, NULL, &a, &err) != 0);
    CHECK_CONTAINS(err.msg, "U+0000");
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cJSON *m = cJSON_Parse(bad[i].json);
        iv_input in = {.messages = m};
        iv_prepared p;
        memset(&err, 0, sizeof err);
        CHECK_MSG(iv_prepare_input(e, &in, NULL, &p, &err) != 0, "%s accepted", bad[i].json);
        CHECK_EQ_INT(err.code, IV_E_INVALID);
        CHECK_CONTAINS(err.msg, bad[i].msg);
        cJSON_Delete(m);
    }
    iv_engine_free(e);
}

/* vLLM's score template on a checkpoint without sentence-transformers files
 * (qwen3_causal_rerank, an older Qwen3-Reranker layout): the operator's
 * chat template (iv_engine_opts.chat_template) renders each text pair as
 * query/document messages; the tokens are those of the text the template
 * writes, tokenized without added special tokens, cut at the limit with the
 * template's tail restored. Single texts keep the plain path (the
 * tokenizer's specials). */
TEST(chat_template_file_renders_pairs)
{
    char dir[4096], tpl[4200];
    snprintf(dir, sizeof dir, "%s/models/qwen3_causal_rerank", iv_test_fixtures_dir());
    snprintf(tpl, sizeof tpl, "%s/models/qwen3_st_reranker/chat_template.jinja", iv_test_fixtures_dir());
    iv_engine_opts opts = {.rerank_tokens = "yes,no", .chat_template = tpl};
    iv_engine *e = NULL;
    iv_err err = {0};
    if (iv_engine_load(&e, dir, &opts, &err)) {
        iv_test_fail(__FILE__, __LINE__, "load: %s", err.msg);
        return;
    }
    CHECK(iv_engine_pairs_as_messages(e));
    static const char want[] =
        "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
        "provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n<Instruct>: Given "
        "a web search query, retrieve relevant passages that answer the query\n<Query>: capital of france\n"
        "<Document>: Paris is the capital.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
    iv_encoding enc;
    iv_encode_opts eo = iv_encode_opts_default();
    eo.add_special_tokens = 0;
    REQUIRE(iv_tokenizer_encode(iv_engine_tokenizer(e), want, sizeof want - 1, NULL, 0, &eo, &enc, &err) == 0);
    iv_input pair = {.text = "capital of france", .text_len = 17, .pair = "Paris is the capital.", .pair_len = 21};
    iv_prepared p;
    REQUIRE(iv_prepare_input(e, &pair, NULL, &p, &err) == 0);
    /* The fixture runs 128 tokens: the rendered pair is cut there, and its
     * last tokens are the template's tail written back. */
    const int max = iv_engine_max_input_length(e), tail = 10;
    REQUIRE(enc.len > max);
    CHECK_EQ_INT(p.seq.len, max);
    CHECK(!memcmp(p.seq.ids, enc.ids, (size_t)(max / 2) * sizeof(int32_t)));
    CHECK(!memcmp(p.seq.ids + max - tail, enc.ids + enc.len - tail, (size_t)tail * sizeof(int32_t)));
    iv_prepared_free(&p);
    iv_encoding_free(&enc);
    /* A single text is not a pair: the tokenizer's own specials, no template. */
    iv_input single = {.text = "capital of france", .text_len = 17};
    eo.add_special_tokens = 1;
    REQUIRE(iv_tokenizer_encode(iv_engine_tokenizer(e), single.text, single.text_len, NULL, 0, &eo, &enc, &err) == 0);
    REQUIRE(iv_prepare_input(e, &single, NULL, &p, &err) == 0);
    CHECK(p.seq.len == enc.len && !memcmp(p.seq.ids, enc.ids, (size_t)enc.len * sizeof(int32_t)));
    iv_prepared_free(&p);
    iv_encoding_free(&enc);
    iv_engine_free(e);

    /* A template file that does not exist or does not compile fails the load, naming it. */
    opts.chat_template = "/nonexistent/t.jinja";
    CHECK(iv_engine_load(&e, dir, &opts, &err) != 0);
    CHECK_CONTAINS(err.msg, "chat template");
}
