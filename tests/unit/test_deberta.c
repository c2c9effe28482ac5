/* DeBERTa-v2 pieces the golden fixtures do not reach on their own: the log
 * buckets at the real checkpoints' settings (256 buckets over 512
 * positions), sequence groups of the block's dynamic attention bias, and
 * the config switches and head layouts that must be rejected by name.
 * Checkpoints are built in temp dirs from the tiny DeBERTa fixtures. */
#include <stdio.h>
#include <string.h>

#include "models/deberta_attn.h"
#include "models/model.h"
#include "test.h"
#include "unit/ckpt_test_util.h"

/* Values from transformers' make_log_bucket_position (torch float32). */
TEST(deberta_log_buckets_match_transformers)
{
    static const struct { int buckets, max_pos, rel, want; } cases[] = {
        {256, 512, 0, 0}, {256, 512, 1, 1}, {256, 512, -1, -1}, {256, 512, 127, 127}, {256, 512, 128, 128},
        {256, 512, -128, -128}, {256, 512, 129, 129}, {256, 512, -129, -129}, {256, 512, 200, 169},
        {256, 512, 255, 192}, {256, 512, 300, 207}, {256, 512, -300, -207}, {256, 512, 511, 255},
        {256, 512, -511, -255}, {256, 512, 512, 256}, {256, 512, 1000, 317}, {256, 512, -4000, -444},
        {8, 64, 3, 3}, {8, 64, 4, 4}, {8, 64, 5, 5}, {8, 64, -5, -5}, {8, 64, 6, 5}, {8, 64, 10, 5},
        {8, 64, 31, 7}, {8, 64, 63, 7}, {8, 64, 64, 8}, {8, 64, 99, 8}, {8, 64, -99, -8},
        {16, 128, 8, 8}, {16, 128, 9, 9}, {16, 128, -9, -9}, {16, 128, 20, 11}, {16, 128, 50, 13},
        {16, 128, 100, 15}, {16, 128, 127, 15}, {16, 128, -127, -15},
        {-1, 512, 700, 700}, {0, 512, -3, -3}, /* no buckets: distances as they are */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_MSG(iv_deberta_bucket(cases[i].rel, cases[i].buckets, cases[i].max_pos) == cases[i].want,
                  "bucket(%d; %d, %d) = %d, transformers %d", cases[i].rel, cases[i].buckets, cases[i].max_pos,
                  iv_deberta_bucket(cases[i].rel, cases[i].buckets, cases[i].max_pos), cases[i].want);
}

/* ------------------------------------------------------------------ forward with sequence groups */

static iv_model *deb_load(const char *fixture)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/models/%s", iv_test_fixtures_dir(), fixture);
    iv_model *m = NULL;
    iv_err err = {0};
    if (iv_model_load(&m, dir, iv_cpu_ops(), &err)) iv_test_fail(__FILE__, __LINE__, "%s: %s", fixture, err.msg);
    return m;
}

/* Hidden states of three sequences (5, 90, 7 tokens) packed in one batch. */
static float *deb_forward(const iv_model *m, iv_arena *arena, int64_t *n_values)
{
    int32_t ids[102], cu[4] = {0, 5, 95, 102};
    for (int t = 0; t < 102; t++) ids[t] = 4 + (t * 37 + 11) % 150;
    iv_batch b = {.n_seqs = 3, .n_tokens = 102, .ids = ids, .cu_seqlens = cu};
    iv_view hidden;
    iv_err err = {0};
    const iv_fwd_mem mem = {arena, arena}; /* the CPU: host memory is device memory */
    if (iv_model_check_batch(m, &b, &err) || iv_model_upload_batch(m, &b, arena, &err) ||
        iv_model_forward(m, &b, &mem, &hidden, &err)) {
        iv_test_fail(__FILE__, __LINE__, "forward: %s", err.msg);
        return NULL;
    }
    *n_values = b.n_tokens * m->block.hidden;
    return hidden.data;
}

/* One sequence per group (a tiny group size) gives what one group for the
 * whole batch gives. */
TEST(deberta_bias_groups_match_one_group)
{
    iv_model *m = deb_load("deberta_v3");
    REQUIRE(m);
    iv_arena a1, a2;
    iv_arena_init(&a1);
    iv_arena_init(&a2);
    int64_t n1 = 0, n2 = 0;
    float *whole = deb_forward(m, &a1, &n1);
    m->block.dyn_bias_group_floats = 1;
    float *grouped = deb_forward(m, &a2, &n2);
    REQUIRE(whole && grouped && n1 == n2);
    double d = iv_test_max_abs_diff(whole, grouped, n1);
    CHECK_MSG(d <= 1e-5, "grouped vs whole batch differ by %.2e", d);
    iv_arena_free(&a1);
    iv_arena_free(&a2);
    iv_model_free(m);
}

static int zero_bias(const iv_ops *ops, const void *ctx, const iv_dyn_bias_args *a)
{
    (void)ops;
    (void)ctx;
    const int64_t n = a->offsets[a->seq_end - a->seq_begin];
    memset(a->bias, 0, (size_t)n * sizeof(float));
    return 0;
}

/* 0.05 * key index: not constant along a row, so it moves the softmax. */
static int ramp_bias(const iv_ops *ops, const void *ctx, const iv_dyn_bias_args *a)
{
    (void)ops;
    (void)ctx;
    for (int s = a->seq_begin; s < a->seq_end; s++) {
        const int64_t L = iv_batch_seqlen(a->batch, s);
        float *blk = a->bias + a->offsets[s - a->seq_begin];
        for (int64_t r = 0; r < a->n_heads * L; r++)
            for (int64_t j = 0; j < L; j++) blk[r * L + j] = 0.05f * (float)j;
    }
    return 0;
}

/* A dynamic bias that adds nothing leaves a model with a static relative
 * bias (MPNet) unchanged: the block adds the static bias to the dynamic
 * one, group by group. */
TEST(block_dyn_bias_keeps_static_bias)
{
    iv_model *m = deb_load("mpnet");
    REQUIRE(m);
    iv_arena a1, a2;
    iv_arena_init(&a1);
    iv_arena_init(&a2);
    int64_t n1 = 0, n2 = 0;
    float *plain = deb_forward(m, &a1, &n1);
    for (int l = 0; l < m->n_layers; l++) m->layers[l].dyn_bias = zero_bias;
    m->block.dyn_bias_group_floats = 1;
    float *hooked = deb_forward(m, &a2, &n2);
    REQUIRE(plain && hooked && n1 == n2);
    double d = iv_test_max_abs_diff(plain, hooked, n1);
    CHECK_MSG(d <= 1e-6, "zero dynamic bias changed the output by %.2e", d);
    /* And the hook is live: one that is not zero changes the output. */
    iv_arena_reset(&a2);
    m->layers[0].dyn_bias = ramp_bias;
    float *ramped = deb_forward(m, &a2, &n2);
    REQUIRE(ramped);
    d = iv_test_max_abs_diff(plain, ramped, n1);
    CHECK_MSG(d > 1e-3, "a non-zero dynamic bias changed the output by only %.2e", d);
    iv_model_free(m);
    iv_arena_free(&a1);
    iv_arena_free(&a2);
}

/* ------------------------------------------------------------------ rejected checkpoints */

static void edit_v1(cJSON *c) { ckpt_set(c, "model_type", cJSON_CreateString("deberta")); }
static void edit_p2p(cJSON *c) { ckpt_set(c, "pos_att_type", cJSON_CreateString("c2p|p2p")); }
static void edit_norm(cJSON *c) { ckpt_set(c, "norm_rel_ebd", cJSON_CreateString("batch_norm")); }
static void edit_head_size(cJSON *c) { ckpt_set(c, "attention_head_size", cJSON_CreateNumber(16)); }
static void edit_pooler(cJSON *c) { ckpt_set(c, "pooler_hidden_size", cJSON_CreateNumber(64)); }
static void edit_buckets(cJSON *c) { ckpt_set(c, "position_buckets", cJSON_CreateNumber(200)); }
static void edit_legacy_true(cJSON *c) { ckpt_set(c, "legacy", cJSON_CreateTrue()); }
static void edit_conv_groups(cJSON *c) { ckpt_set(c, "conv_groups", cJSON_CreateNumber(3)); }
static void edit_qa(cJSON *c)
{
    cJSON *a = cJSON_CreateArray();
    cJSON_AddItemToArray(a, cJSON_CreateString("DebertaV2ForQuestionAnswering"));
    ckpt_set(c, "architectures", a);
}
static void edit_conv_act(cJSON *c) { ckpt_set(c, "conv_act", cJSON_CreateString("swishish")); }

TEST(deberta_rejects_unsupported_switches)
{
    CKPT_REJECT("deberta_v3", edit_v1, "DeBERTa v1", IV_E_UNSUPPORTED);
    CKPT_REJECT("deberta_v3", edit_p2p, "pos_att_type \"p2p\"", IV_E_UNSUPPORTED);
    CKPT_REJECT("deberta_v3", edit_norm, "norm_rel_ebd \"batch_norm\"", IV_E_UNSUPPORTED);
    CKPT_REJECT("deberta_v3", edit_head_size, "attention_head_size", IV_E_UNSUPPORTED);
    CKPT_REJECT("deberta_v3_seqcls", edit_pooler, "pooler_hidden_size", IV_E_UNSUPPORTED);
    CKPT_REJECT("deberta_v3", edit_buckets, "position_buckets 200", IV_E_UNSUPPORTED);
    CKPT_REJECT("deberta_v3", edit_qa, "DebertaV2ForQuestionAnswering", IV_E_UNSUPPORTED);
    CKPT_REJECT("deberta_v2_conv", edit_conv_groups, "conv_groups 3", IV_E_FORMAT);
    CKPT_REJECT("deberta_v2_conv", edit_conv_act, "conv_act", IV_E_UNSUPPORTED);
    /* transformers would read cls.predictions.* (and initialise it at random). */
    CKPT_REJECT("deberta_splade_v3", edit_legacy_true, "\"legacy\": false", IV_E_UNSUPPORTED);
}
