/* `infinity_v3 classify-tokens` end to end: the fixture texts as JSON lines
 * in, one entity list per line out, equal to transformers' pipeline
 * (token_pipeline.json) for every aggregation strategy; token ids give an
 * {"error"} line and exit 1; a bad strategy exits 2. Runs IV_BIN. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/file.h"
#include "base/json.h"
#include "test.h"

static int run(const char *args, const char *in_path, const char *out_path)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' classify-tokens %s < '%s' > '%s' 2>/dev/null", iv_test_binary(), args, in_path,
             out_path);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void check_fixture(const char *tmp, const char *name, int *n_checked)
{
    char dir[4096], path[4300], in_path[512], out_path[512];
    snprintf(dir, sizeof dir, "%s/models/%s", iv_test_fixtures_dir(), name);
    snprintf(path, sizeof path, "%s/token_pipeline.json", dir);
    snprintf(in_path, sizeof in_path, "%s/in.jsonl", tmp);
    snprintf(out_path, sizeof out_path, "%s/out.jsonl", tmp);
    cJSON *doc = NULL;
    iv_err err = {0};
    REQUIRE(iv_json_load_file(path, 1 << 24, &doc, &err) == 0);
    const cJSON *texts = cJSON_GetObjectItemCaseSensitive(doc, "texts");
    FILE *f = fopen(in_path, "wb");
    REQUIRE(f);
    const cJSON *t;
    cJSON_ArrayForEach(t, texts)
    {
        char *line = cJSON_PrintUnformatted(t);
        fprintf(f, "%s\n", line);
        free(line);
    }
    fclose(f);
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(doc, "cases"))
    {
        const char *strategy = iv_json_str(c, "aggregation_strategy", "none");
        const int raw = iv_json_bool(c, "raw_scores", 0);
        const int keep_all = cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(c, "ignore_labels"));
        char args[4400];
        snprintf(args, sizeof args, "--model-id '%s' --aggregation-strategy %s%s%s", dir, strategy,
                 raw ? " --raw-scores" : "", keep_all ? " --ignore-labels ''" : "");
        CHECK_EQ_INT(run(args, in_path, out_path), 0);
        char *out = NULL;
        size_t len = 0;
        if (iv_file_read_all(out_path, 1 << 24, &out, &len, &err)) {
            iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
            continue;
        }
        const cJSON *outs = cJSON_GetObjectItemCaseSensitive(c, "outputs");
        const char *key = strcmp(strategy, "none") ? "entity_group" : "entity";
        char *line = out, *save = NULL;
        for (int i = 0; i < cJSON_GetArraySize(texts); i++) {
            line = strtok_r(i ? NULL : out, "\n", &save);
            cJSON *got = line ? cJSON_Parse(line) : NULL;
            const cJSON *want = cJSON_GetArrayItem(outs, i);
            if (!got || cJSON_GetArraySize(got) != cJSON_GetArraySize(want)) {
                iv_test_fail(__FILE__, __LINE__, "%s %s text %d: %s", name, strategy, i, line ? line : "(no line)");
                cJSON_Delete(got);
                continue;
            }
            for (int k = 0; k < cJSON_GetArraySize(want); k++) {
                const cJSON *g = cJSON_GetArrayItem(got, k), *w = cJSON_GetArrayItem(want, k);
                CHECK_MSG(!strcmp(iv_json_str(g, key, "?"), iv_json_str(w, key, "!")) &&
                              !strcmp(iv_json_str(g, "word", "?"), iv_json_str(w, "word", "!")) &&
                              iv_json_int(g, "start", -1) == iv_json_int(w, "start", -2) &&
                              iv_json_int(g, "end", -1) == iv_json_int(w, "end", -2) &&
                              fabs(iv_json_num(g, "score", 1e9) - iv_json_num(w, "score", -1e9)) <= 1e-4,
                          "%s %s text %d entity %d differs: %s", name, strategy, i, k, line);
                (*n_checked)++;
            }
            cJSON_Delete(got);
        }
        free(out);
    }
    cJSON_Delete(doc);
}

TEST(cli_classify_tokens)
{
    if (access(iv_test_binary(), X_OK) != 0) {
        iv_test_skip("infinity_v3 binary not built");
        return;
    }
    char tmp[] = "/tmp/iv_tokcls_cli_XXXXXX";
    REQUIRE(mkdtemp(tmp));
    int n_checked = 0;
    check_fixture(tmp, "deberta_v2_tokcls", &n_checked);
    check_fixture(tmp, "llama_tokcls", &n_checked);
    printf("    %d entities checked\n", n_checked);

    /* Token ids: an error line, exit 1; a bad strategy: exit 2. */
    char in_path[512], out_path[512], args[4400], dir[4096];
    snprintf(in_path, sizeof in_path, "%s/in.jsonl", tmp);
    snprintf(out_path, sizeof out_path, "%s/out.jsonl", tmp);
    snprintf(dir, sizeof dir, "%s/models/bert_tokcls", iv_test_fixtures_dir());
    FILE *f = fopen(in_path, "wb");
    REQUIRE(f);
    fputs("a b\n[101, 102]\n", f);
    fclose(f);
    snprintf(args, sizeof args, "--model-id '%s'", dir);
    CHECK_EQ_INT(run(args, in_path, out_path), 1);
    char *out = NULL;
    size_t len = 0;
    iv_err err = {0};
    if (!iv_file_read_all(out_path, 1 << 20, &out, &len, &err)) {
        CHECK_CONTAINS(out, "\n{\"error\":\"token classification takes one text per line");
        free(out);
    }
    snprintf(args, sizeof args, "--model-id '%s' --aggregation-strategy mean", dir);
    CHECK_EQ_INT(run(args, in_path, out_path), 2);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK(system(cmd) == 0);
}
