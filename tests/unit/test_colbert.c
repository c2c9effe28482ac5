/* Multi-vector (ColBERT) models beyond the golden values: what the engine
 * reports and refuses, the query/document rules on hand-made inputs, and
 * checkpoints whose settings contradict each other. Built from the
 * colbert_bert / pylate_bert fixtures (copied to temp dirs when edited). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cJSON.h>

#include "base/file.h"
#include "engine/engine.h"
#include "heads/colbert.h"
#include "test.h"

/* REQUIRE with a message (test.h has only CHECK_MSG). */
#define REQUIRE_MSG(cond, ...)                                                  \
    do {                                                                        \
        if (!(cond)) {                                                          \
            iv_test_fail(__FILE__, __LINE__, __VA_ARGS__);                      \
            return;                                                             \
        }                                                                       \
    } while (0)

/* colbert_bert ids: [CLS] 101, [SEP] 102, [MASK] 103, [PAD] 0, [UNK] 100,
 * [unused0] 1 (query marker), [unused1] 2 (document marker), "." 140,
 * "," 141, "!" 142, "a" 104, "b" 105. */
enum { CLS = 101, SEP = 102, MASK = 103, PAD = 0, UNK = 100, QM = 1, DM = 2, DOT = 140, COMMA = 141, A = 104, B = 105 };

static iv_engine *load_fixture(const char *name, const iv_engine_opts *opts, iv_err *err)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/models/%s", iv_test_fixtures_dir(), name);
    iv_engine *e = NULL;
    if (iv_engine_load(&e, dir, opts, err)) return NULL;
    return e;
}

static void sh(const char *fmt, const char *a, const char *b)
{
    char cmd[8400];
    snprintf(cmd, sizeof cmd, fmt, a, b);
    if (system(cmd)) iv_test_fail(__FILE__, __LINE__, "command failed: %s", cmd);
}

/* A temp copy of a fixture directory. */
static int copy_fixture(const char *name, char *dir, size_t cap)
{
    snprintf(dir, cap, "/tmp/iv_colbert_XXXXXX");
    if (!mkdtemp(dir)) return -1;
    char src[4096];
    snprintf(src, sizeof src, "%s/models/%s", iv_test_fixtures_dir(), name);
    sh("cp -r '%s'/. '%s'/", src, dir);
    return 0;
}

static void put(const char *dir, const char *rel, const char *text)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    FILE *f = fopen(path, "wb");
    if (!f) {
        iv_test_fail(__FILE__, __LINE__, "cannot write %s", path);
        return;
    }
    fputs(text, f);
    fclose(f);
}

static void expect_load_error(const char *dir, const char *needle, int code)
{
    iv_engine *e = NULL;
    iv_err err = {0};
    int rc = iv_engine_load(&e, dir, NULL, &err);
    CHECK_MSG(rc != 0, "%s loaded but should fail with \"%s\"", dir, needle);
    if (rc == 0) {
        iv_engine_free(e);
        return;
    }
    CHECK_CONTAINS(err.msg, needle);
    CHECK_EQ_INT(err.code, code);
}

TEST(colbert_engine_reports_settings)
{
    iv_err err = {0};
    iv_engine *e = load_fixture("colbert_bert", NULL, &err);
    REQUIRE_MSG(e, "%s", err.msg);
    const unsigned caps = iv_engine_capabilities(e);
    CHECK(caps & IV_CAN(IV_TASK_MULTIVECTOR));
    CHECK(caps & IV_CAN(IV_TASK_EMBED_ALL));
    CHECK(!(caps & IV_CAN(IV_TASK_EMBED)));
    const iv_multivector_info *mv = iv_engine_multivector(e);
    REQUIRE(mv);
    CHECK_EQ_INT(mv->dim, 16);
    CHECK_EQ_INT(iv_engine_embedding_dim(e), 16);
    CHECK_EQ_INT(mv->query_maxlen, 16);
    CHECK_EQ_INT(mv->doc_maxlen, 48);
    CHECK_EQ_INT(mv->query_marker, QM);
    CHECK_EQ_INT(mv->doc_marker, DM);
    CHECK_EQ_INT(mv->mask_id, MASK);
    CHECK_EQ_INT(mv->query_expansion, 1);
    CHECK_EQ_INT(mv->attend_to_mask, 0);
    /* Single-vector embeddings are refused with a message naming the task. */
    const int32_t ids[] = {CLS, A, SEP};
    iv_seq_input in = {.ids = ids, .len = 3};
    iv_outputs out;
    CHECK(iv_engine_run(e, IV_TASK_EMBED, &in, 1, &out, &err) != 0);
    CHECK_EQ_INT(err.code, IV_E_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "does not support embeddings");
    iv_engine_free(e);

    e = load_fixture("pylate_bert", NULL, &err);
    REQUIRE_MSG(e, "%s", err.msg);
    mv = iv_engine_multivector(e);
    REQUIRE(mv);
    CHECK_EQ_INT(mv->dim, 16);
    CHECK_EQ_INT(mv->query_marker, 160); /* the added "[Q] " token */
    CHECK_EQ_INT(mv->doc_marker, 161);
    CHECK_EQ_INT(mv->mask_id, MASK);
    CHECK_EQ_INT(mv->query_maxlen, 16);
    CHECK_EQ_INT(mv->doc_maxlen, 48);
    CHECK(!(iv_engine_capabilities(e) & IV_CAN(IV_TASK_EMBED)));
    CHECK_EQ_INT(iv_engine_max_input_length(e), 128);
    iv_engine_free(e);

    e = load_fixture("bert", NULL, &err);
    REQUIRE_MSG(e, "%s", err.msg);
    CHECK(iv_engine_multivector(e) == NULL);
    CHECK(!(iv_engine_capabilities(e) & IV_CAN(IV_TASK_MULTIVECTOR)));
    iv_engine_free(e);
}

TEST(colbert_rejects_pooling_override)
{
    iv_err err = {0};
    iv_engine_opts opts = {.pooling_override = IV_POOL_MEAN};
    iv_engine *e = load_fixture("pylate_bert", &opts, &err);
    CHECK(e == NULL);
    if (e) iv_engine_free(e);
    CHECK_EQ_INT(err.code, IV_E_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "multi-vector");
}

/* Runs one batch and returns the kept row counts. */
static int run_rows(iv_engine *e, const iv_seq_input *in, int n, int *rows, iv_outputs *keep)
{
    iv_outputs out;
    iv_err err = {0};
    if (iv_engine_run(e, IV_TASK_MULTIVECTOR, in, n, &out, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return -1;
    }
    for (int i = 0; i < n; i++) rows[i] = out.rows[i];
    if (keep) *keep = out;
    else iv_outputs_free(&out);
    return 0;
}

TEST(colbert_query_and_document_rows)
{
    iv_err err = {0};
    iv_engine *e = load_fixture("colbert_bert", NULL, &err);
    REQUIRE_MSG(e, "%s", err.msg);
    /* Document: punctuation, [UNK] ("#" encodes to it) and [PAD] rows go;
     * [CLS], the [D] marker, letters and [SEP] stay. */
    const int32_t doc[] = {CLS, DM, A, COMMA, UNK, B, DOT, PAD, SEP};
    /* The same tokens behind the query marker keep every row, MASKs included. */
    const int32_t query[] = {CLS, QM, A, COMMA, UNK, B, DOT, PAD, SEP, MASK, MASK};
    /* Nothing but punctuation: no rows at all. */
    const int32_t dots[] = {DOT, COMMA, DOT};
    iv_seq_input in[3] = {{.ids = doc, .len = 9}, {.ids = query, .len = 11}, {.ids = dots, .len = 3}};
    int rows[3];
    iv_outputs out;
    REQUIRE(run_rows(e, in, 3, rows, &out) == 0);
    CHECK_EQ_INT(rows[0], 5);
    CHECK_EQ_INT(rows[1], 11);
    CHECK_EQ_INT(rows[2], 0);
    CHECK_EQ_INT(out.cols, 16);
    CHECK(out.offsets[3] == out.offsets[2] && out.offsets[2] == (int64_t)(5 + 11) * 16);
    for (int r = 0; r < 16; r++) { /* unit rows */
        double ss = 0;
        for (int k = 0; k < 16; k++) ss += (double)out.data[r * 16 + k] * out.data[r * 16 + k];
        CHECK_MSG(ss > 0.99999 && ss < 1.00001, "row %d has squared norm %.7f", r, ss);
    }
    /* The document's kept rows are its tokens 0, 1, 2, 5, 8 run alone. */
    iv_outputs alone;
    const int32_t cls_d_a[] = {CLS, DM, A, COMMA, UNK, B, DOT, PAD, SEP};
    iv_seq_input one = {.ids = cls_d_a, .len = 9};
    REQUIRE(run_rows(e, &one, 1, rows, &alone) == 0);
    CHECK(iv_test_max_abs_diff(alone.data, out.data, 5 * 16) <= 1e-6);
    iv_outputs_free(&alone);
    iv_outputs_free(&out);
    iv_engine_free(e);
}

TEST(colbert_expansion_tokens_are_not_keys)
{
    iv_err err = {0};
    iv_engine *e = load_fixture("colbert_bert", NULL, &err);
    REQUIRE_MSG(e, "%s", err.msg);
    const int32_t q[] = {CLS, QM, A, B, SEP, MASK, MASK, MASK};
    static const uint8_t derived[] = {1, 1, 1, 1, 1, 0, 0, 0}, all_keys[] = {1, 1, 1, 1, 1, 1, 1, 1};
    iv_seq_input in[3] = {{.ids = q, .len = 8}, {.ids = q, .len = 8, .key_mask = derived},
                          {.ids = q, .len = 8, .key_mask = all_keys}};
    int rows[3];
    iv_outputs out;
    REQUIRE(run_rows(e, in, 3, rows, &out) == 0);
    CHECK_EQ_INT(rows[0], 8);
    /* Derived mask == the explicit one; a caller's mask is used as given. */
    CHECK(iv_test_max_abs_diff(out.data + out.offsets[0], out.data + out.offsets[1], 8 * 16) <= 1e-6);
    CHECK(iv_test_max_abs_diff(out.data + out.offsets[0], out.data + out.offsets[2], 8 * 16) > 1e-3);
    iv_outputs_free(&out);
    iv_engine_free(e);
}

TEST(colbert_key_mask_rule)
{
    iv_colbert c;
    memset(&c, 0, sizeof c);
    c.info.query_marker = QM;
    c.info.mask_id = MASK;
    uint8_t m[8];
    const int32_t q[] = {CLS, QM, A, MASK, SEP, MASK, MASK};
    CHECK_EQ_INT(iv_colbert_key_mask(&c, q, 7, m), 1);
    static const uint8_t want[] = {1, 1, 1, 1, 1, 0, 0}; /* only the trailing run: a [MASK] in the text attends */
    CHECK(memcmp(m, want, 7) == 0);
    const int32_t no_exp[] = {CLS, QM, A, SEP};
    CHECK_EQ_INT(iv_colbert_key_mask(&c, no_exp, 4, m), 0);
    const int32_t doc[] = {CLS, DM, A, SEP, MASK};
    CHECK_EQ_INT(iv_colbert_key_mask(&c, doc, 5, m), 0);
    CHECK(!iv_colbert_is_query(&c, doc, 5));
    const int32_t bare[] = {CLS, QM, MASK, MASK};
    CHECK_EQ_INT(iv_colbert_key_mask(&c, bare, 4, m), 1);
    CHECK(m[0] == 1 && m[1] == 1 && m[2] == 0 && m[3] == 0);
    c.info.attend_to_mask = 1;
    CHECK_EQ_INT(iv_colbert_key_mask(&c, q, 7, m), 0);
    c.info.attend_to_mask = 0;
    c.info.query_marker = -1; /* no marker: every input is a document */
    CHECK_EQ_INT(iv_colbert_key_mask(&c, q, 7, m), 0);
    CHECK(!iv_colbert_is_query(&c, q, 7));
}

TEST(colbert_rejects_contradictions)
{
    char dir[64];
    REQUIRE(copy_fixture("colbert_bert", dir, sizeof dir) == 0);
    put(dir, "artifact.metadata", "{\"dim\": 8}");
    expect_load_error(dir, "dim 8 but linear.weight projects to 16", IV_E_FORMAT);
    put(dir, "artifact.metadata", "{\"query_token_id\": \"[unused1]\"}");
    expect_load_error(dir, "same token", IV_E_UNSUPPORTED);
    put(dir, "artifact.metadata", "{\"mask_punctuation\": \"yes\"}");
    expect_load_error(dir, "mask_punctuation", IV_E_FORMAT);
    put(dir, "artifact.metadata", "[1]");
    expect_load_error(dir, "must be a JSON object", IV_E_FORMAT);
    /* Without artifact.metadata: colbert-ai's defaults. */
    sh("rm -f '%s/artifact.metadata'%s", dir, "");
    iv_engine *e = NULL;
    iv_err err = {0};
    REQUIRE_MSG(iv_engine_load(&e, dir, NULL, &err) == 0, "%s", err.msg);
    CHECK_EQ_INT(iv_engine_multivector(e)->query_maxlen, 32);
    CHECK_EQ_INT(iv_engine_multivector(e)->doc_maxlen, 220);
    iv_engine_free(e);
    /* The skiplist and markers are tokens: no tokenizer, no model. */
    sh("rm -f '%s/tokenizer.json'%s", dir, "");
    expect_load_error(dir, "without tokenizer.json", IV_E_UNSUPPORTED);
    sh("rm -rf '%s'%s", dir, "");
}

/* A checkpoint saved for both libraries holds one projection twice. */
TEST(colbert_both_layouts_must_agree)
{
    char dir[64];
    REQUIRE(copy_fixture("colbert_bert", dir, sizeof dir) == 0);
    char dense[128];
    snprintf(dense, sizeof dense, "%s/1_Dense", dir);
    sh("mkdir -p '%s'%s", dense, "");
    put(dir, "modules.json",
        "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"},"
        "{\"idx\":1,\"name\":\"1\",\"path\":\"1_Dense\",\"type\":\"pylate.models.Dense.Dense\"}]");
    put(dir, "1_Dense/config.json",
        "{\"in_features\": 32, \"out_features\": 16, \"bias\": false, "
        "\"activation_function\": \"torch.nn.modules.linear.Identity\", \"use_residual\": false}");
    /* The pylate_bert fixture's Dense: another projection. */
    char src[4096];
    snprintf(src, sizeof src, "%s/models/pylate_bert/1_Dense/model.safetensors", iv_test_fixtures_dir());
    sh("cp '%s' '%s'/", src, dense);
    expect_load_error(dir, "ambiguous projection", IV_E_UNSUPPORTED);
    sh("rm -rf '%s'%s", dir, "");
}

TEST(colbert_pylate_settings)
{
    char dir[64];
    REQUIRE(copy_fixture("pylate_bert", dir, sizeof dir) == 0);
    /* No query prefix: every input is a document. */
    put(dir, "config_sentence_transformers.json",
        "{\"model_type\": \"ColBERT\", \"query_prefix\": \"\", \"document_prefix\": \"[D] \", "
        "\"do_query_expansion\": false, \"attend_to_expansion_tokens\": true, \"skiplist_words\": [\"a\"]}");
    iv_engine *e = NULL;
    iv_err err = {0};
    REQUIRE_MSG(iv_engine_load(&e, dir, NULL, &err) == 0, "%s", err.msg);
    const iv_multivector_info *mv = iv_engine_multivector(e);
    CHECK_EQ_INT(mv->query_marker, -1);
    CHECK_EQ_INT(mv->doc_marker, 161);
    CHECK_EQ_INT(mv->query_expansion, 0);
    CHECK_EQ_INT(mv->attend_to_mask, 0); /* PyLate: no expansion, no attending to it */
    CHECK_EQ_INT(mv->query_maxlen, 32);
    CHECK_EQ_INT(mv->doc_maxlen, 180);
    const int32_t ids[] = {CLS, 160, A, COMMA, SEP};
    iv_seq_input in = {.ids = ids, .len = 5};
    int rows[1];
    REQUIRE(run_rows(e, &in, 1, rows, NULL) == 0);
    CHECK_EQ_INT(rows[0], 4); /* only "a" is in this skiplist */
    iv_engine_free(e);
    put(dir, "config_sentence_transformers.json",
        "{\"model_type\": \"ColBERT\", \"query_prefix\": \"[D] \", \"document_prefix\": \"[D] \"}");
    expect_load_error(dir, "same token", IV_E_UNSUPPORTED);
    sh("rm -rf '%s'%s", dir, "");
}

/* `infinity_v3 embed` on a multi-vector model: one matrix per line (text is
 * a document, id arrays may be queries), the same values as the engine; the
 * options that do not apply are refused with exit code 2. */
static int run_embed(const char *model, const char *args, const char *input, char *out, size_t cap)
{
    char dir[] = "/tmp/iv_colbert_cli_XXXXXX";
    if (!mkdtemp(dir)) return -1;
    char in_path[128], out_path[128], cmd[8192];
    snprintf(in_path, sizeof in_path, "%s/in", dir);
    snprintf(out_path, sizeof out_path, "%s/out", dir);
    FILE *f = fopen(in_path, "wb");
    if (!f) return -1;
    fputs(input, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' embed --model-id '%s/models/%s' %s < '%s' > '%s' 2>/dev/null", iv_test_binary(),
             iv_test_fixtures_dir(), model, args, in_path, out_path);
    int st = system(cmd);
    out[0] = 0;
    f = fopen(out_path, "rb");
    if (f) {
        size_t n = fread(out, 1, cap - 1, f);
        out[n] = 0;
        fclose(f);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(colbert_cli_embed_matrices)
{
    if (access(iv_test_binary(), X_OK) != 0) {
        iv_test_skip("infinity_v3 binary not built");
        return;
    }
    static char out[1 << 16];
    int rc = run_embed("colbert_bert", "", "a, b!\n[101, 1, 104, 141, 105, 142, 102, 103, 103]\n", out, sizeof out);
    CHECK_EQ_INT(rc, 0);
    cJSON *lines[2] = {NULL, NULL};
    char *nl = strchr(out, '\n');
    REQUIRE(nl);
    *nl = 0;
    lines[0] = cJSON_Parse(out);
    lines[1] = cJSON_Parse(nl + 1);
    REQUIRE(lines[0] && lines[1]);
    CHECK_EQ_INT(cJSON_GetArraySize(lines[0]), 4);  /* [CLS] a b [SEP]: the punctuation rows are gone */
    CHECK_EQ_INT(cJSON_GetArraySize(lines[1]), 9);  /* a query keeps every row */
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetArrayItem(lines[0], 0)), 16);

    iv_err err = {0};
    iv_engine *e = load_fixture("colbert_bert", NULL, &err);
    REQUIRE_MSG(e, "%s", err.msg);
    const int32_t q[] = {CLS, QM, A, COMMA, B, 142, SEP, MASK, MASK};
    iv_seq_input in = {.ids = q, .len = 9};
    int rows[1];
    iv_outputs res;
    REQUIRE(run_rows(e, &in, 1, rows, &res) == 0);
    double worst = 0;
    for (int r = 0; r < 9; r++)
        for (int k = 0; k < 16; k++) {
            double d = cJSON_GetArrayItem(cJSON_GetArrayItem(lines[1], r), k)->valuedouble - res.data[r * 16 + k];
            worst = d > worst ? d : -d > worst ? -d : worst;
        }
    CHECK_MSG(worst <= 1e-6, "CLI and engine differ by %.2e", worst);
    iv_outputs_free(&res);
    iv_engine_free(e);
    cJSON_Delete(lines[0]);
    cJSON_Delete(lines[1]);

    CHECK_EQ_INT(run_embed("colbert_bert", "--dimensions 8", "a\n", out, sizeof out), 2);
    CHECK_EQ_INT(run_embed("colbert_bert", "--no-normalize", "a\n", out, sizeof out), 2);
    CHECK_EQ_INT(run_embed("colbert_bert", "--sparse", "a\n", out, sizeof out), 2);
    CHECK_EQ_INT(run_embed("bert", "--multi-vector", "a\n", out, sizeof out), 2);
    /* --all on a multi-vector model gives the same matrices. */
    CHECK_EQ_INT(run_embed("pylate_bert", "--all", "a, b!\n", out, sizeof out), 0);
    cJSON *m = cJSON_Parse(out);
    REQUIRE(m);
    CHECK_EQ_INT(cJSON_GetArraySize(m), 4);
    cJSON_Delete(m);
}
