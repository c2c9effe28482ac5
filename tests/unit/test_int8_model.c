/* The int8 quantization pass (models/quantize.c) on the tiny fixture
 * checkpoints: exactly the large linear weights become IV_I8, everything else
 * stays FP32, a model on the FP32 table is refused, and the int8 engine stays
 * close to the references on a post-norm BERT and on MPNet. */
#include <stdlib.h>

#include "base/file.h"
#include "engine/engine.h"
#include "golden/golden_util.h"
#include "models/quantize.h"
#include "ops/cpu/int8_ops.h"
#include "test.h"

static void fixture_dir(char *dir, size_t cap, const char *name)
{
    char models[4096];
    iv_path_join(models, sizeof models, iv_test_fixtures_dir(), "models");
    iv_path_join(dir, cap, models, name);
}

static int load_fixture_model(iv_model **m, const char *name, const iv_ops *ops)
{
    char dir[4096];
    fixture_dir(dir, sizeof dir, name);
    iv_err err = {0};
    if (iv_model_load(m, dir, ops, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s: %s", name, err.msg);
        return -1;
    }
    return 0;
}

static int is_i8(const iv_tensor *t) { return t && t->dtype == IV_I8 && t->scales; }
static int is_f32_or_null(const iv_tensor *t) { return !t || (t->dtype == IV_F32 && !t->scales); }

TEST(int8_model_pass_replaces_large_linears_only)
{
    iv_model *m;
    if (load_fixture_model(&m, "bert_seqcls3", iv_cpu_int8_ops())) return;
    const iv_tensor *qkv0 = m->layers[0].qkv_w;
    iv_quant_stats st;
    iv_err err = {0};
    REQUIRE(iv_model_quantize_int8(m, &st, &err) == 0);
    /* A cross-encoder reads [CLS]: its last layer's QKV is split in two
     * (iv_model_split_last_qkv), one more linear. */
    const iv_layer *last = &m->layers[m->n_layers - 1];
    REQUIRE(!last->qkv_w && last->q_w && last->kv_w);
    CHECK_EQ_INT(st.tensors, 4 * m->n_layers + 1);
    CHECK_EQ_INT(st.kept_f32, 0);
    CHECK(st.int8_bytes < st.f32_bytes / 2);
    for (int l = 0; l < m->n_layers; l++) {
        const iv_layer *L = &m->layers[l];
        const iv_tensor *in_w = L->qkv_w ? L->qkv_w : L->q_w;
        CHECK(is_i8(in_w) && (L->qkv_w || is_i8(L->kv_w)) && is_i8(L->o_w) && is_i8(L->up_w) && is_i8(L->down_w));
        CHECK(is_f32_or_null(L->qkv_b) && is_f32_or_null(L->q_b) && is_f32_or_null(L->kv_b) &&
              is_f32_or_null(L->o_b) && is_f32_or_null(L->up_b) && is_f32_or_null(L->down_b));
        CHECK(is_f32_or_null(L->attn_norm.w) && is_f32_or_null(L->mlp_norm.w));
        CHECK_EQ_INT(in_w->shape[0], (L->qkv_w ? 3 : 1) * m->block.hidden);
        CHECK_EQ_INT(in_w->shape[1], m->block.hidden);
        if (!L->qkv_w) CHECK_EQ_INT(L->kv_w->shape[0], 2 * m->block.hidden);
    }
    CHECK(m->layers[0].qkv_w != qkv0);
    CHECK(is_f32_or_null(m->embed.word) && is_f32_or_null(m->embed.position));
    for (int s = 0; s < m->seq_head.n_steps; s++) CHECK(is_f32_or_null(m->seq_head.steps[s].w));
    /* A second pass finds nothing left to do. */
    REQUIRE(iv_model_quantize_int8(m, &st, &err) == 0);
    CHECK_EQ_INT(st.tensors, 0);
    iv_model_free(m);
}

/* Layers sharing one weight (ALBERT-style) keep sharing its int8 copy. */
TEST(int8_model_pass_keeps_shared_weights_shared)
{
    iv_model *m;
    if (load_fixture_model(&m, "bert", iv_cpu_int8_ops())) return;
    REQUIRE(m->n_layers >= 2);
    m->layers[1].up_w = m->layers[0].up_w;
    iv_quant_stats st;
    iv_err err = {0};
    REQUIRE(iv_model_quantize_int8(m, &st, &err) == 0);
    /* The last layer's QKV is split in two where the model can compute only
     * a head's rows (iv_model_split_last_qkv). */
    CHECK_EQ_INT(st.tensors, 4 * m->n_layers - 1 + (m->layers[m->n_layers - 1].kv_w != NULL));
    CHECK(m->layers[1].up_w == m->layers[0].up_w && is_i8(m->layers[0].up_w));
    iv_model_free(m);
}

TEST(int8_model_pass_needs_int8_table)
{
    iv_model *m;
    if (load_fixture_model(&m, "bert", iv_cpu_ops())) return;
    iv_err err = {0};
    CHECK(iv_model_quantize_int8(m, NULL, &err) == -1);
    CHECK_CONTAINS(err.msg, "cpu-int8");
    CHECK(m->layers[0].qkv_w->dtype == IV_F32);
    iv_model_free(m);
}

/* IV_INT8_WEIGHT_BITS takes 8 or 7; anything else is a load error, and the
 * two values give those ranges. */
TEST(int8_model_weight_bits_env)
{
    static const char *vals[] = {"8", "7", "6", "eight"};
    for (int v = 0; v < 4; v++) {
        iv_model *m;
        if (load_fixture_model(&m, "bert", iv_cpu_int8_ops())) return;
        iv_err err = {0};
        iv_quant_stats st = {0};
        setenv("IV_INT8_WEIGHT_BITS", vals[v], 1);
        const int rc = iv_model_quantize_int8(m, &st, &err);
        unsetenv("IV_INT8_WEIGHT_BITS");
        if (v < 2) {
            CHECK_EQ_INT(rc, 0);
            CHECK_EQ_INT(st.qmax, v ? IV_INT8_QMAX_7BIT : IV_INT8_QMAX);
            const iv_tensor *w = m->layers[0].qkv_w;
            CHECK_EQ_INT(iv_int8_blob_qmax(w->data, w->shape[0], w->shape[1]), st.qmax);
        } else {
            CHECK_EQ_INT(rc, -1);
            CHECK_CONTAINS(err.msg, "must be 8 or 7");
        }
        iv_model_free(m);
    }
}

/* Random tiny weights are harder on 8 bits than trained ones; still close.
 * bits ("8" or "7") is IV_INT8_WEIGHT_BITS for the load, so the check is the
 * same on every CPU: left unset, an AVX2 CPU without VNNI quantizes weights
 * to 7 bits (its vpmaddubsw kernel's range) and a VNNI CPU to 8. */
static void check_engine_hidden(const char *name, double min_cos, const char *bits)
{
    char dir[4096];
    fixture_dir(dir, sizeof dir, name);
    golden_case g;
    if (golden_load(&g, dir)) return;
    iv_engine *e;
    iv_engine_opts opts = {.dtype = "int8"};
    iv_err err = {0};
    setenv("IV_INT8_WEIGHT_BITS", bits, 1);
    const int rc = iv_engine_load(&e, dir, &opts, &err);
    unsetenv("IV_INT8_WEIGHT_BITS");
    if (rc) {
        iv_test_fail(__FILE__, __LINE__, "%s: %s", name, err.msg);
        golden_free(&g);
        return;
    }
    for (int i = 0; i < g.n; i++) {
        const iv_tensor *want = golden_expected(&g, "hidden", i);
        if (!want) continue;
        iv_seq_input s = {.ids = g.ids[i], .type_ids = g.types[i], .len = g.lens[i]};
        iv_outputs out;
        if (iv_engine_run(e, IV_TASK_EMBED_ALL, &s, 1, &out, &err)) {
            iv_test_fail(__FILE__, __LINE__, "%s: %s", name, err.msg);
            break;
        }
        REQUIRE(iv_tensor_numel(want) == (int64_t)g.lens[i] * out.cols);
        double c = iv_test_cosine(out.data, want->data, iv_tensor_numel(want));
        CHECK_MSG(c >= min_cos, "%s, %s-bit weights, input %d: hidden-state cosine %.6f", name, bits, i, c);

        iv_outputs_free(&out);
    }
    iv_engine_free(e);
    golden_free(&g);
}

/* One fixture per family and block layout: post-norm (BERT, DistilBERT,
 * MPNet's relative bias, Jina ALiBi, Nomic/GTE rotary, ModernBERT), pre-norm
 * gated (Llama, Qwen2/3, Mistral), sandwich (Gemma3), routed experts
 * (Qwen3-MoE).
 * - 8-bit weights: worst cosine seen when written 0.9955 (jina_bert_v2).
 * - 7-bit weights (AVX2 without VNNI): half the weight resolution doubles
 *   the weight error and so about quadruples 1 - cosine where it dominates,
 *   as on these random weights: 0.9955 becomes about 0.982, and 0.9817 is
 *   the worst seen (jina_bert_v2; BERT 0.9991). The real all-MiniLM-L6-v2
 *   keeps its own bounds on 7 bits (test_int8_minilm.c). */
TEST(int8_model_fixtures_close_to_reference)
{
    const char *names[] = {"bert", "distilbert", "mpnet", "jina_bert_v2", "nomic_bert", "gte_new", "modernbert",
                           "llama", "qwen2", "qwen3", "mistral", "gemma3", "qwen3_moe"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        check_engine_hidden(names[i], 0.99, "8");
        check_engine_hidden(names[i], 0.975, "7");
    }
}

TEST(int8_model_pass_quantizes_experts_not_router)
{
    iv_model *m;
    if (load_fixture_model(&m, "qwen3_moe", iv_cpu_int8_ops())) return;
    iv_quant_stats st;
    iv_err err = {0};
    REQUIRE(iv_model_quantize_int8(m, &st, &err) == 0);
    int moe_layers = 0, experts = 0;
    for (int l = 0; l < m->n_layers; l++) {
        const iv_layer *L = &m->layers[l];
        CHECK((L->qkv_w ? is_i8(L->qkv_w) : is_i8(L->q_w) && is_i8(L->kv_w)) && is_i8(L->o_w));
        if (!L->moe) {
            CHECK(is_i8(L->up_w) && is_i8(L->down_w));
            continue;
        }
        moe_layers++;
        CHECK(is_f32_or_null(L->moe->router_w));
        for (int e = 0; e < L->moe->n_experts; e++, experts++)
            CHECK(is_i8(L->moe->up_w[e]) && is_i8(L->moe->down_w[e]));
    }
    CHECK(moe_layers > 0);
    CHECK_EQ_INT(st.tensors, 2 * m->n_layers + 2 * (m->n_layers - moe_layers) + 2 * experts +
                                 (m->layers[m->n_layers - 1].kv_w != NULL));
    iv_model_free(m);
}
