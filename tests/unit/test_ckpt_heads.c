/* Checkpoints whose config.json declares a head architecture (*ForMaskedLM,
 * *ForSequenceClassification, ...) but whose weights hold only the base
 * model, as many published sentence-transformers checkpoints do: they load,
 * give the base model's outputs, and refuse the head's task with a message
 * saying why. A head with only some of its tensors, or one of the wrong
 * shape, is still a malformed checkpoint. Built in temp dirs from the tiny
 * fixtures, with their weights rewritten (ckpt_write_weights). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "test.h"
#include "unit/ckpt_test_util.h"

static const int32_t k_ids_a[] = {2, 17, 41, 9, 3};
static const int32_t k_ids_b[] = {2, 5, 3};

/* A dir from fixture: config edited, weights without the tensors under drop. */
static int make_without(char *dir, size_t cap, const char *fixture, ckpt_edit_fn edit, const char *const *drop)
{
    if (ckpt_make(dir, cap, fixture, edit, 0)) return -1;
    if (ckpt_write_weights(dir, fixture, drop, NULL, NULL, 0)) {
        tmp_rmtree(dir);
        return -1;
    }
    return 0;
}

static iv_engine *load_or_fail(const char *dir)
{
    iv_engine *e = NULL;
    iv_err err = {0};
    if (iv_engine_load(&e, dir, NULL, &err)) iv_test_fail(__FILE__, __LINE__, "load %s: %s", dir, err.msg);
    return e;
}

static iv_engine *load_fixture(const char *fixture)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/models/%s", iv_test_fixtures_dir(), fixture);
    return load_or_fail(dir);
}

/* The two engines give identical outputs for task (same base weights, same code). */
static void expect_same(iv_engine *got, iv_engine *want, iv_task task)
{
    const iv_seq_input seqs[2] = {{.ids = k_ids_a, .len = 5}, {.ids = k_ids_b, .len = 3}};
    iv_outputs a, b;
    iv_err err = {0};
    REQUIRE(iv_engine_run(got, task, seqs, 2, &a, &err) == 0);
    REQUIRE(iv_engine_run(want, task, seqs, 2, &b, &err) == 0);
    CHECK_EQ_INT(a.cols, b.cols);
    CHECK(a.offsets[2] == b.offsets[2]);
    if (a.cols == b.cols && a.offsets[2] == b.offsets[2]) {
        float max_diff = 0;
        for (int64_t i = 0; i < a.offsets[2]; i++) max_diff = fmaxf(max_diff, fabsf(a.data[i] - b.data[i]));
        CHECK(max_diff == 0.0f);
    }
    iv_outputs_free(&a);
    iv_outputs_free(&b);
}

/* task is refused, the message naming the missing head. */
static void expect_refused(iv_engine *e, iv_task task, const char *head_words)
{
    const iv_seq_input s = {.ids = k_ids_a, .len = 5};
    iv_outputs out;
    iv_err err = {0};
    CHECK(!(iv_engine_capabilities(e) & IV_CAN(task)));
    CHECK(iv_engine_run(e, task, &s, 1, &out, &err) == -1);
    CHECK_EQ_INT(err.code, IV_E_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "does not support");
    CHECK_CONTAINS(err.msg, "holds only the base model");
    CHECK_CONTAINS(err.msg, head_words);
    CHECK_CONTAINS(iv_engine_missing_head(e), head_words);
}

/* Loads dir (built from fixture without its head), compares task_same with
 * base_fixture's outputs and expects refused to be refused naming head_words. */
static void check_base_only(const char *dir, const char *base_fixture, iv_task task_same, iv_task refused,
                            const char *head_words)
{
    iv_engine *e = load_or_fail(dir), *base = load_fixture(base_fixture);
    if (e && base) {
        CHECK(iv_engine_capabilities(e) & IV_CAN(task_same));
        expect_same(e, base, task_same);
        expect_refused(e, refused, head_words);
    }
    if (e) iv_engine_free(e);
    if (base) iv_engine_free(base);
}

TEST(ckpt_bert_maskedlm_without_mlm_head_loads_base)
{
    char dir[256];
    REQUIRE(make_without(dir, sizeof dir, "bert_splade", NULL, (const char *const[]){"cls.", NULL}) == 0);
    /* bert_splade with its head is the reference for the base model's states. */
    check_base_only(dir, "bert_splade", IV_TASK_EMBED_ALL, IV_TASK_SPARSE, "masked-LM (SPLADE) head");
    tmp_rmtree(dir);
}

static void set_xlmr_mlm(cJSON *c)
{
    ckpt_set(c, "architectures", cJSON_CreateStringArray((const char *[]){"XLMRobertaForMaskedLM"}, 1));
    ckpt_set(c, "model_type", cJSON_CreateString("xlm-roberta"));
}

/* The sentence-transformers RoBERTa fixture (weights without a prefix, a
 * Pooling module) declared XLMRobertaForMaskedLM: pooled embeddings equal
 * the plain checkpoint's. */
TEST(ckpt_xlmr_maskedlm_without_lm_head_embeds)
{
    char dir[256];
    REQUIRE(ckpt_make(dir, sizeof dir, "roberta", set_xlmr_mlm, 1) == 0);
    CHECK(ckpt_link(dir, "roberta", "modules.json") == 0);
    CHECK(ckpt_link(dir, "roberta", "1_Pooling") == 0);
    check_base_only(dir, "roberta", IV_TASK_EMBED, IV_TASK_SPARSE, "no weights for the masked-LM (SPLADE) head");
    tmp_rmtree(dir);
}

TEST(ckpt_roberta_seqcls_without_classifier_loads_base)
{
    char dir[256];
    REQUIRE(make_without(dir, sizeof dir, "roberta_seqcls", NULL, (const char *const[]){"classifier.", NULL}) == 0);
    check_base_only(dir, "roberta_seqcls", IV_TASK_EMBED_ALL, IV_TASK_CLASSIFY, "sequence classification head");
    tmp_rmtree(dir);
}

TEST(ckpt_bert_seqcls_pooler_without_classifier_loads_base)
{
    /* The pooler is BertModel's own: kept, and no head without the classifier. */
    char dir[256];
    REQUIRE(make_without(dir, sizeof dir, "bert_seqcls1", NULL, (const char *const[]){"classifier.", NULL}) == 0);
    check_base_only(dir, "bert_seqcls1", IV_TASK_EMBED_ALL, IV_TASK_CLASSIFY, "sequence classification head");
    tmp_rmtree(dir);
}

TEST(ckpt_bert_tokcls_without_classifier_loads_base)
{
    char dir[256];
    REQUIRE(make_without(dir, sizeof dir, "bert_tokcls", NULL, (const char *const[]){"classifier.", NULL}) == 0);
    check_base_only(dir, "bert_tokcls", IV_TASK_EMBED_ALL, IV_TASK_TOKEN_CLASSIFY, "token classification head");
    tmp_rmtree(dir);
}

TEST(ckpt_modernbert_seqcls_without_head_loads_base)
{
    char dir[256];
    REQUIRE(make_without(dir, sizeof dir, "modernbert_seqcls", NULL,
                         (const char *const[]){"classifier.", "head.", NULL}) == 0);
    check_base_only(dir, "modernbert_seqcls", IV_TASK_EMBED_ALL, IV_TASK_CLASSIFY, "sequence classification head");
    tmp_rmtree(dir);
}

TEST(ckpt_decoder_seqcls_without_score_loads_base)
{
    const char *fixtures[] = {"qwen3_seqcls", "llama_seqcls"};
    for (int i = 0; i < 2; i++) {
        char dir[256];
        REQUIRE(make_without(dir, sizeof dir, fixtures[i], NULL, (const char *const[]){"score.", NULL}) == 0);
        check_base_only(dir, fixtures[i], IV_TASK_EMBED_ALL, IV_TASK_CLASSIFY, "sequence classification head (score.*)");
        tmp_rmtree(dir);
    }
}

TEST(ckpt_ultrabert_maskedlm_without_head_loads_base)
{
    char dir[256];
    REQUIRE(make_without(dir, sizeof dir, "ultrabert_splade", NULL, (const char *const[]){"head.", "cls.", NULL}) ==
            0);
    check_base_only(dir, "ultrabert_splade", IV_TASK_EMBED_ALL, IV_TASK_SPARSE, "masked-LM (SPLADE) head");
    tmp_rmtree(dir);
}

/* Malformed heads stay errors. */
static void expect_bad(const char *fixture, const char *const *drop, const char *extra, const long long *shape,
                       int ndim, const char *needle, int code)
{
    char dir[256];
    REQUIRE(ckpt_make(dir, sizeof dir, fixture, NULL, 0) == 0);
    if (!ckpt_write_weights(dir, fixture, drop, extra, shape, ndim)) CKPT_LOAD_ERROR(dir, fixture, needle, code);
    tmp_rmtree(dir);
}

TEST(ckpt_rejects_partial_heads)
{
    /* The MLM transform gone, its norm and bias kept. */
    expect_bad("bert_splade", (const char *const[]){"cls.predictions.transform.dense.", NULL}, NULL, NULL, 0,
               "partial head", IV_E_NOTFOUND);
    /* The norm gone, the transform kept. */
    expect_bad("bert_splade", (const char *const[]){"cls.predictions.transform.LayerNorm.", NULL}, NULL, NULL, 0,
               "missing tensor \"cls.predictions.transform.LayerNorm.gamma\"", IV_E_NOTFOUND);
    /* Only the bias of the MLM decoder left. */
    expect_bad("bert_splade", (const char *const[]){"cls.predictions.transform.", NULL}, NULL, NULL, 0,
               "partial head", IV_E_NOTFOUND);
    expect_bad("roberta_seqcls", (const char *const[]){"classifier.out_proj.", NULL}, NULL, NULL, 0,
               "classifier.out_proj.weight", IV_E_NOTFOUND);
    expect_bad("roberta_seqcls", (const char *const[]){"classifier.dense.", NULL}, NULL, NULL, 0,
               "classifier.dense.weight", IV_E_NOTFOUND);
    /* A classifier without BERT's pooler. */
    expect_bad("bert_seqcls1", (const char *const[]){"bert.pooler.", NULL}, NULL, NULL, 0,
               "bert.pooler.dense.weight", IV_E_NOTFOUND);
    /* A bias without its weight. */
    expect_bad("qwen3_seqcls", (const char *const[]){"score.", NULL}, "score.bias", (const long long[]){1}, 1,
               "score.weight", IV_E_NOTFOUND);
}

TEST(ckpt_rejects_head_of_wrong_shape)
{
    expect_bad("qwen3_seqcls", (const char *const[]){"score.", NULL}, "score.weight", (const long long[]){1, 7}, 2,
               "does not take", IV_E_FORMAT);
    expect_bad("bert_tokcls", (const char *const[]){"classifier.weight", NULL}, "classifier.weight",
               (const long long[]){3, 5}, 2, "does not take", IV_E_FORMAT);
    expect_bad("bert_splade", (const char *const[]){"cls.predictions.bias", NULL}, "cls.predictions.bias",
               (const long long[]){7}, 1, "shape", IV_E_FORMAT);
}

/* The weights writer itself: everything kept reloads to identical outputs. */
TEST(ckpt_write_weights_roundtrip)
{
    char dir[256];
    REQUIRE(make_without(dir, sizeof dir, "bert_splade", NULL, NULL) == 0);
    iv_engine *e = load_or_fail(dir), *ref = load_fixture("bert_splade");
    if (e && ref) {
        CHECK(iv_engine_capabilities(e) & IV_CAN(IV_TASK_SPARSE));
        CHECK(iv_engine_missing_head(e)[0] == 0);
        expect_same(e, ref, IV_TASK_SPARSE);
    }
    if (e) iv_engine_free(e);
    if (ref) iv_engine_free(ref);
    tmp_rmtree(dir);
}

/* ColBERT's projection is the model itself, not an optional head. */
TEST(ckpt_colbert_projection_stays_required)
{
    expect_bad("colbert_bert", (const char *const[]){"linear.", NULL}, NULL, NULL, 0,
               "checkpoint is missing head tensor \"linear.weight\"", IV_E_NOTFOUND);
}

/* Issue 22: a BERT, DistilBERT or MPNet checkpoint missing a bias or
 * token_type_embeddings loaded silently (zeros, no token types) and
 * embedded differently; transformers would run such a checkpoint with
 * randomly initialised tensors (with a warning), so it is an error naming
 * the tensor. */
TEST(ckpt_rejects_missing_biases_and_token_types)
{
    expect_bad("bert", (const char *const[]){"encoder.layer.1.attention.self.query.bias", NULL}, NULL, NULL, 0,
               "checkpoint is missing tensor \"encoder.layer.1.attention.self.query.bias\"", IV_E_NOTFOUND);
    expect_bad("bert", (const char *const[]){"encoder.layer.0.output.dense.bias", NULL}, NULL, NULL, 0,
               "checkpoint is missing tensor \"encoder.layer.0.output.dense.bias\"", IV_E_NOTFOUND);
    expect_bad("bert", (const char *const[]){"encoder.layer.0.output.LayerNorm.bias", NULL}, NULL, NULL, 0,
               "checkpoint is missing tensor \"encoder.layer.0.output.LayerNorm.bias\"", IV_E_NOTFOUND);
    expect_bad("bert", (const char *const[]){"embeddings.LayerNorm.bias", NULL}, NULL, NULL, 0,
               "checkpoint is missing tensor \"embeddings.LayerNorm.bias\"", IV_E_NOTFOUND);
    expect_bad("bert", (const char *const[]){"embeddings.token_type_embeddings.", NULL}, NULL, NULL, 0,
               "checkpoint is missing tensor \"embeddings.token_type_embeddings.weight\"", IV_E_NOTFOUND);
    expect_bad("bert_oldnames", (const char *const[]){"encoder.layer.0.attention.output.LayerNorm.beta", NULL}, NULL,
               NULL, 0, "checkpoint is missing tensor \"encoder.layer.0.attention.output.LayerNorm.beta\"",
               IV_E_NOTFOUND);
    expect_bad("roberta_seqcls", (const char *const[]){"roberta.embeddings.token_type_embeddings.", NULL}, NULL, NULL,
               0, "checkpoint is missing tensor \"roberta.embeddings.token_type_embeddings.weight\"", IV_E_NOTFOUND);
    expect_bad("distilbert", (const char *const[]){"transformer.layer.0.ffn.lin1.bias", NULL}, NULL, NULL, 0,
               "checkpoint is missing tensor \"transformer.layer.0.ffn.lin1.bias\"", IV_E_NOTFOUND);
    expect_bad("mpnet", (const char *const[]){"encoder.layer.0.attention.attn.v.bias", NULL}, NULL, NULL, 0,
               "checkpoint is missing tensor \"encoder.layer.0.attention.attn.v.bias\"", IV_E_NOTFOUND);
    /* The heads' biases too (ColBERT's bias-free projection still loads: test_colbert). */
    expect_bad("bert_seqcls1", (const char *const[]){"classifier.bias", NULL}, NULL, NULL, 0,
               "checkpoint is missing tensor \"classifier.bias\"", IV_E_NOTFOUND);
    expect_bad("bert_tokcls", (const char *const[]){"classifier.bias", NULL}, NULL, NULL, 0,
               "checkpoint is missing tensor \"classifier.bias\"", IV_E_NOTFOUND);
    expect_bad("distilbert_seqcls", (const char *const[]){"pre_classifier.bias", NULL}, NULL, NULL, 0,
               "checkpoint is missing tensor \"pre_classifier.bias\"", IV_E_NOTFOUND);
    expect_bad("mpnet_seqcls", (const char *const[]){"classifier.out_proj.bias", NULL}, NULL, NULL, 0,
               "checkpoint is missing tensor \"classifier.out_proj.bias\"", IV_E_NOTFOUND);
    expect_bad("bert_splade", (const char *const[]){"cls.predictions.bias", NULL}, NULL, NULL, 0,
               "checkpoint is missing tensor \"cls.predictions.bias\"", IV_E_NOTFOUND);
    expect_bad("bert_splade", (const char *const[]){"cls.predictions.transform.LayerNorm.bias", NULL}, NULL, NULL, 0,
               "checkpoint is missing tensor \"cls.predictions.transform.LayerNorm.bias\"", IV_E_NOTFOUND);
}

/* Issue 22, the other encoder families: each bias as the reference module
 * has it (models/bias_rules.h). A bias the reference has is required. */
static void nomic_qkv_bias_on(cJSON *c) { ckpt_set(c, "qkv_proj_bias", cJSON_CreateTrue()); }
static void modernbert_mlp_bias_on(cJSON *c) { ckpt_set(c, "mlp_bias", cJSON_CreateTrue()); }

TEST(ckpt_rejects_biases_the_reference_has)
{
    expect_bad("deberta_v3", (const char *const[]){"encoder.layer.0.attention.self.query_proj.bias", NULL}, NULL, NULL,
               0, "missing tensor \"encoder.layer.0.attention.self.query_proj.bias\"", IV_E_NOTFOUND);
    expect_bad("deberta_v3", (const char *const[]){"embeddings.LayerNorm.bias", NULL}, NULL, NULL, 0,
               "missing tensor \"embeddings.LayerNorm.bias\"", IV_E_NOTFOUND);
    expect_bad("deberta_v2_conv", (const char *const[]){"encoder.conv.conv.bias", NULL}, NULL, NULL, 0,
               "missing tensor \"encoder.conv.conv.bias\"", IV_E_NOTFOUND);
    expect_bad("jina_bert_v2", (const char *const[]){"encoder.layer.0.mlp.wo.bias", NULL}, NULL, NULL, 0,
               "Jina BERT: the checkpoint has no layer 0 MLP down projection bias, which the remote code's module "
               "requires",
               IV_E_NOTFOUND);
    expect_bad("jina_code", (const char *const[]){"encoder.layer.0.attention.self.layer_norm_q.bias", NULL}, NULL,
               NULL, 0, "missing tensor \"encoder.layer.0.attention.self.layer_norm_q.bias\"", IV_E_NOTFOUND);
    expect_bad("gte_new", (const char *const[]){"encoder.layer.1.attention.qkv_proj.bias", NULL}, NULL, NULL, 0,
               "GTE: the checkpoint has no layer 1 attention projection bias", IV_E_NOTFOUND);
    expect_bad("gte_native", (const char *const[]){"encoder.layer.0.mlp.down_proj.bias", NULL}, NULL, NULL, 0,
               "GTE: the checkpoint has no layer 0 MLP down projection bias", IV_E_NOTFOUND);
    expect_bad("gte_new", (const char *const[]){"embeddings.LayerNorm.bias", NULL}, NULL, NULL, 0,
               "missing tensor \"embeddings.LayerNorm.bias\"", IV_E_NOTFOUND);
    CKPT_REJECT("nomic_bert_hub", nomic_qkv_bias_on,
                "Nomic BERT: the checkpoint has no layer 0 attention projection bias, which config.json's "
                "qkv_proj_bias requires",
                IV_E_NOTFOUND);
    CKPT_REJECT("modernbert", modernbert_mlp_bias_on,
                "ModernBERT: the checkpoint has no layer 0 MLP up projection bias, which config.json's mlp_bias "
                "requires",
                IV_E_NOTFOUND);
}

/* A bias the reference lacks is never read there: one added to the file
 * (0.5 everywhere, so using it would show) leaves the outputs unchanged. */
static void expect_unused_bias(const char *fixture, const char *name, long long n)
{
    char dir[256];
    REQUIRE(ckpt_make(dir, sizeof dir, fixture, NULL, 0) == 0);
    if (!ckpt_write_weights_filled(dir, fixture, NULL, name, (const long long[]){n}, 1, 0.5f)) {
        iv_engine *e = load_or_fail(dir), *ref = load_fixture(fixture);
        if (e && ref) expect_same(e, ref, IV_TASK_EMBED_ALL);
        if (e) iv_engine_free(e);
        if (ref) iv_engine_free(ref);
    }
    tmp_rmtree(dir);
}

TEST(ckpt_leaves_biases_the_reference_lacks_unused)
{
    expect_unused_bias("gte_new", "encoder.layer.0.mlp.up_gate_proj.bias", 96);
    expect_unused_bias("jina_bert_v2", "encoder.layer.0.mlp.gated_layers.bias", 96);
    expect_unused_bias("nomic_bert_hub", "encoder.layers.0.attn.Wqkv.bias", 96);
    expect_unused_bias("nomic_bert_v5names", "layers.0.mlp.down_proj.bias", 32);
    expect_unused_bias("modernbert", "layers.0.mlp.Wo.bias", 32);
}
