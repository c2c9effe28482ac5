/* Token classification against transformers' pipeline("token-classification")
 * (tools/gen_token_pipeline.py wrote token_pipeline.json next to each
 * *_tokcls fixture): every text of the file is tokenized by our tokenizer,
 * all of them run as one packed batch, and for every aggregation strategy,
 * ignore_labels and raw_scores case the entities must match the pipeline's:
 * labels, words, start and end exactly, scores within 1e-4. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/json.h"
#include "engine/inputs.h"
#include "engine/token_entities.h"
#include "test.h"

#define SCORE_TOL 1e-4

static const char *const FIXTURES[] = {"bert_tokcls",       "deberta_v2_tokcls", "gte_native_tokcls",
                                       "llama_tokcls",      "modernbert_tokcls", "ultrabert_tokcls"};

/* Compares one text's entities with the expected JSON list; returns the max score error. */
static double compare(const char *what, const iv_token_entities *got, const cJSON *want, int *n_checked)
{
    double worst = 0;
    const int nw = cJSON_GetArraySize(want);
    if (got->n != nw) {
        iv_strbuf b;
        iv_sb_init(&b);
        iv_token_entities_json(&b, got);
        char *w = cJSON_PrintUnformatted(want);
        iv_test_fail(__FILE__, __LINE__, "%s: %d entities, expected %d\n  got  %.*s\n  want %s", what, got->n, nw,
                     (int)b.len, b.data, w);
        free(w);
        iv_sb_free(&b);
        return worst;
    }
    for (int k = 0; k < nw; k++) {
        const cJSON *x = cJSON_GetArrayItem(want, k);
        const iv_token_entity *g = &got->items[k];
        const char *label = iv_json_str(x, got->grouped ? "entity_group" : "entity", NULL);
        const char *word = iv_json_str(x, "word", "");
        CHECK_MSG(label && !strcmp(label, g->label), "%s #%d: label %s, expected %s", what, k, g->label,
                  label ? label : "(none)");
        CHECK_MSG(!strcmp(word, g->word), "%s #%d: word \"%s\", expected \"%s\"", what, k, g->word, word);
        CHECK_MSG(iv_json_int(x, "start", -2) == g->start && iv_json_int(x, "end", -2) == g->end,
                  "%s #%d: [%d, %d), expected [%lld, %lld)", what, k, g->start, g->end,
                  (long long)iv_json_int(x, "start", -2), (long long)iv_json_int(x, "end", -2));
        if (!got->grouped)
            CHECK_MSG(iv_json_int(x, "index", -2) == g->index, "%s #%d: index %d, expected %lld", what, k, g->index,
                      (long long)iv_json_int(x, "index", -2));
        const double d = fabs(iv_json_num(x, "score", NAN) - (double)g->score);
        CHECK_MSG(d <= SCORE_TOL, "%s #%d: score %.7g, expected %.7g", what, k, (double)g->score,
                  iv_json_num(x, "score", NAN));
        if (d > worst) worst = d;
        (*n_checked)++;
    }
    return worst;
}

static void check_fixture(const char *name)
{
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/models/%s", iv_test_fixtures_dir(), name);
    snprintf(path, sizeof path, "%s/token_pipeline.json", dir);
    cJSON *doc = NULL;
    iv_err err = {0};
    if (iv_json_load_file(path, 1 << 24, &doc, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return;
    }
    iv_engine *e;
    if (iv_engine_load(&e, dir, NULL, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s: load failed: %s", name, err.msg);
        cJSON_Delete(doc);
        return;
    }
    const cJSON *texts = cJSON_GetObjectItemCaseSensitive(doc, "texts");
    const int n = cJSON_GetArraySize(texts);
    iv_prepared *prep = calloc((size_t)n, sizeof *prep);
    iv_seq_input *seqs = calloc((size_t)n, sizeof *seqs);
    const iv_input_opts io = iv_input_opts_default();
    for (int i = 0; i < n; i++) {
        const char *t = cJSON_GetArrayItem(texts, i)->valuestring;
        iv_input in = {.text = t, .text_len = strlen(t)};
        if (iv_prepare_input(e, &in, &io, &prep[i], &err)) iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
        seqs[i] = prep[i].seq;
    }
    iv_outputs out = {0};
    if (iv_engine_run(e, IV_TASK_TOKEN_CLASSIFY, seqs, n, &out, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s: run failed: %s", name, err.msg);
        goto done;
    }
    const int before = iv_test_failed();
    int n_checked = 0;
    double worst = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(doc, "cases"))
    {
        iv_tokcls_opts o = {0};
        const char *strategy = iv_json_str(c, "aggregation_strategy", "none");
        if (iv_aggregation_parse(strategy, &o.aggregation)) {
            iv_test_fail(__FILE__, __LINE__, "unknown strategy %s", strategy);
            continue;
        }
        o.raw_scores = iv_json_bool(c, "raw_scores", 0);
        const cJSON *ig = cJSON_GetObjectItemCaseSensitive(c, "ignore_labels");
        const char *ignore[16];
        if (cJSON_IsArray(ig)) {
            o.ignore_labels = ignore;
            const cJSON *x;
            cJSON_ArrayForEach(x, ig) if (o.n_ignore < 16) ignore[o.n_ignore++] = x->valuestring;
        }
        const cJSON *outs = cJSON_GetObjectItemCaseSensitive(c, "outputs");
        for (int i = 0; i < n; i++) {
            char what[512];
            snprintf(what, sizeof what, "%s %s%s%s text %d", name, strategy, o.raw_scores ? " raw" : "",
                     o.ignore_labels ? " ignore=[]" : "", i);
            iv_token_entities ents;
            if (iv_token_entities_build(e, cJSON_GetArrayItem(texts, i)->valuestring,
                                        strlen(cJSON_GetArrayItem(texts, i)->valuestring), &prep[i].enc,
                                        out.data + out.offsets[i], &o, &ents, &err)) {
                iv_test_fail(__FILE__, __LINE__, "%s: %s", what, err.msg);
                continue;
            }
            double d = compare(what, &ents, cJSON_GetArrayItem(outs, i), &n_checked);
            if (d > worst) worst = d;
            iv_token_entities_free(&ents);
        }
    }
    printf("    %-20s %4d entities, max score error %.2e %s\n", name, n_checked, worst,
           iv_test_failed() == before ? "ok" : "FAILED");
    iv_outputs_free(&out);
done:
    for (int i = 0; i < n; i++) iv_prepared_free(&prep[i]);
    free(prep);
    free(seqs);
    iv_engine_free(e);
    cJSON_Delete(doc);
}

TEST(golden_token_entities_pipeline)
{
    for (size_t i = 0; i < sizeof FIXTURES / sizeof FIXTURES[0]; i++) check_fixture(FIXTURES[i]);
}

TEST(token_entities_strategy_names)
{
    iv_aggregation a;
    CHECK(iv_aggregation_parse("AVERAGE", &a) == 0 && a == IV_AGG_AVERAGE);
    CHECK(iv_aggregation_parse("Simple", &a) == 0 && a == IV_AGG_SIMPLE);
    CHECK(iv_aggregation_parse("mean", &a) == -1);
    CHECK_STR(iv_aggregation_name(IV_AGG_MAX), "max");
}
