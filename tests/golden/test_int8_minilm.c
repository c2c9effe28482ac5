/* `--dtype int8` (per-row int8 weights, per-token u8 activations) on the
 * real all-MiniLM-L6-v2 and all-mpnet-base-v2 (scripts/fetch-models.sh):
 * against the FP32 sentence-transformers embeddings committed in
 * tests/fixtures/real/all-MiniLM-L6-v2 (24 sentences, measured min 0.993484,
 * asserted >= 0.993), and against our FP32 engine on the varied corpus
 * tests/fixtures/real/int8_corpus.jsonl, where one-character inputs go
 * lower (floors below, as measured). Each check runs with 8-bit weights (the
 * default where VNNI or no vector kernel runs) and with the 7-bit weights of
 * the AVX2 vpmaddubsw kernel (the default on AVX2 CPUs without VNNI; see
 * ops/cpu/int8_ops.h), pinned by IV_INT8_WEIGHT_BITS so that the figures do
 * not depend on the machine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "engine/inputs.h"
#include "golden_util.h"
#include "ops/cpu/int8_ops.h"
#include "test.h"

#define MIN_COS 0.993
/* 7-bit weights: measured min 0.989694 (sentence 3), mean 0.995971. */
#define MIN_COS_7BIT 0.9895

/* Loads model as int8 with weights of `bits` bits. */
static int load_int8(iv_engine **e, const char *model, const char *dtype, int bits, iv_err *err)
{
    iv_engine_opts opts = {.device = "cpu", .dtype = dtype};
    setenv("IV_INT8_WEIGHT_BITS", bits == 7 ? "7" : "8", 1);
    const int rc = iv_engine_load(e, model, &opts, err);
    unsetenv("IV_INT8_WEIGHT_BITS");
    return rc;
}

static int open_int8_minilm(iv_engine **e, golden_case *g, int bits)
{
    char model[4096], fix[4096];
    iv_path_join(model, sizeof model, iv_test_models_dir(), "all-MiniLM-L6-v2");
    iv_path_join(fix, sizeof fix, iv_test_fixtures_dir(), "real/all-MiniLM-L6-v2");
    if (!iv_dir_exists(model)) {
        iv_test_fail(__FILE__, __LINE__, "%s missing: run scripts/fetch-models.sh", model);
        return -1;
    }
    if (golden_load(g, fix)) return -1;
    iv_err err = {0};
    if (load_int8(e, model, "int8", bits, &err)) {
        iv_test_fail(__FILE__, __LINE__, "load: %s", err.msg);
        golden_free(g);
        return -1;
    }
    return 0;
}

static int run_embed(iv_engine *e, const golden_case *g, int first, int n, iv_outputs *out)
{
    iv_seq_input *seqs = calloc((size_t)n, sizeof *seqs);
    for (int i = 0; i < n; i++)
        seqs[i] = (iv_seq_input){.ids = g->ids[first + i], .type_ids = g->types[first + i], .len = g->lens[first + i]};
    iv_err err = {0};
    int rc = iv_engine_run(e, IV_TASK_EMBED, seqs, n, out, &err);
    if (rc) iv_test_fail(__FILE__, __LINE__, "run: %s", err.msg);
    free(seqs);
    return rc;
}

/* Also: activations are quantized per token and integer sums are exact, so
 * a sequence's result does not depend on what it is batched with (alone
 * equals packed, bit for bit). */
static void int8_minilm_cosine_to_fp32(int bits, double min_cos_floor)
{
    iv_engine *e;
    golden_case g;
    if (open_int8_minilm(&e, &g, bits)) return;
    iv_outputs out;
    if (!run_embed(e, &g, 0, g.n, &out)) {
        const int alone[] = {0, 3, 13};
        for (int a = 0; a < 3; a++) {
            iv_outputs one;
            if (run_embed(e, &g, alone[a], 1, &one)) break;
            double d = iv_test_max_abs_diff(one.data, out.data + out.offsets[alone[a]], out.cols);
            CHECK_MSG(d == 0, "sentence %d: alone vs packed differ by %.2e", alone[a], d);
            iv_outputs_free(&one);
        }
        double min_cos = 1.0, sum_cos = 0.0;
        int worst = 0;
        for (int i = 0; i < g.n; i++) {
            const iv_tensor *want = golden_expected(&g, "pooled", i);
            REQUIRE(want != NULL && iv_tensor_numel(want) == out.cols);
            float *got = out.data + out.offsets[i];
            iv_embedding_finish(got, out.cols, 0, 1);
            double c = iv_test_cosine(got, want->data, out.cols);
            CHECK_MSG(c >= min_cos_floor, "sentence %d: cosine %.6f to the FP32 reference", i, c);
            CHECK_MSG(c < 0.9999999, "sentence %d: cosine %.9f, identical to FP32: int8 path not taken?", i, c);
            if (c < min_cos) min_cos = c, worst = i;
            sum_cos += c;
        }
        printf("    int8 (%d-bit weights) MiniLM vs FP32 reference over %d sentences: min cosine %.6f (sentence %d), "
               "mean %.6f\n",
               bits, g.n, min_cos, worst, sum_cos / g.n);
        iv_outputs_free(&out);
    }
    iv_engine_free(e);
    golden_free(&g);
}

TEST(golden_int8_minilm_cosine_to_fp32) { int8_minilm_cosine_to_fp32(8, MIN_COS); }
TEST(golden_int8_minilm_7bit_cosine_to_fp32) { int8_minilm_cosine_to_fp32(7, MIN_COS_7BIT); }

TEST(golden_int8_unknown_dtype_rejected)
{
    char model[4096];
    iv_path_join(model, sizeof model, iv_test_models_dir(), "all-MiniLM-L6-v2");
    iv_engine *e = NULL;
    iv_engine_opts opts = {.device = "cpu", .dtype = "int4"};
    iv_err err = {0};
    CHECK(iv_engine_load(&e, model, &opts, &err) == -1);
    CHECK(e == NULL);
    CHECK_CONTAINS(err.msg, "float32 or int8");
}

/* ---- the int8 floor on a varied corpus ----
 * tests/fixtures/real/int8_corpus.jsonl (one JSON string a line, 113 texts):
 * single characters and symbols ("?", "a", "中", "😀"), short queries,
 * punctuation runs, code, 15 languages, paragraphs and one long input. The
 * FP32 engine is the reference here (it matches sentence-transformers to
 * ~4e-7 on these models: test_real_minilm.c, test_real_models.c). */

#define CORPUS_MAX 256

/* Sanitizer builds run mpnet (110M parameters) ~15x slower: there its corpus
 * check takes the first SANITIZED_TEXTS texts (the short ones, the worst
 * case) and the minimum floor only; memory checking is the point there. So
 * do CPUs without AVX2 (or IV_CPU_ISA=baseline), whose portable FP32 and
 * scalar int8 kernels took 284 and 289 s over the whole corpus on a 2-core
 * Ice Lake, near the 300 s test limit; int8_kernels_agree_bitwise holds the
 * scalar kernel to the others' integer sums. */
#define SANITIZED_TEXTS 40

static int mpnet_texts(void)
{
    return IV_TEST_SANITIZED || iv_int8_kernel_active() == IV_INT8_KERNEL_SCALAR ? SANITIZED_TEXTS : CORPUS_MAX;
}

static int load_corpus(char **texts)
{
    char path[4096];
    iv_path_join(path, sizeof path, iv_test_fixtures_dir(), "real/int8_corpus.jsonl");
    FILE *f = fopen(path, "r");
    if (!f) {
        iv_test_fail(__FILE__, __LINE__, "cannot open %s", path);
        return 0;
    }
    int n = 0;
    char line[8192];
    while (n < CORPUS_MAX && fgets(line, sizeof line, f)) {
        cJSON *s = cJSON_Parse(line);
        if (cJSON_IsString(s)) texts[n++] = strdup(s->valuestring);
        cJSON_Delete(s);
    }
    fclose(f);
    return n;
}

/* Pooled, normalised embeddings of the corpus on dtype; NULL on failure. */
static float *embed_corpus(const char *model, const char *dtype, int bits, char **texts, int n, int *dim)
{
    iv_engine *e;
    iv_err err = {0};
    if (load_int8(&e, model, dtype, bits, &err)) {
        iv_test_fail(__FILE__, __LINE__, "load %s (%s): %s", model, dtype, err.msg);
        return NULL;
    }
    iv_prepared *prep = calloc((size_t)n, sizeof *prep);
    iv_seq_input *seqs = calloc((size_t)n, sizeof *seqs);
    iv_input_opts o = iv_input_opts_default();
    o.truncate = 1;
    float *vecs = NULL;
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        iv_input in = {.text = texts[i], .text_len = strlen(texts[i])};
        if (iv_prepare_input(e, &in, &o, &prep[i], &err)) {
            iv_test_fail(__FILE__, __LINE__, "text %d: %s", i, err.msg);
            ok = 0;
        }
        seqs[i] = prep[i].seq;
    }
    iv_outputs out;
    if (ok && iv_engine_run(e, IV_TASK_EMBED, seqs, n, &out, &err) == 0) {
        *dim = out.cols;
        vecs = malloc((size_t)n * out.cols * sizeof(float));
        for (int i = 0; i < n; i++) {
            float *v = out.data + out.offsets[i];
            iv_embedding_finish(v, out.cols, 0, 1);
            memcpy(vecs + (size_t)i * out.cols, v, (size_t)out.cols * sizeof(float));
        }
        iv_outputs_free(&out);
    } else if (ok) {
        iv_test_fail(__FILE__, __LINE__, "run %s (%s): %s", model, dtype, err.msg);
    }
    for (int i = 0; i < n; i++) iv_prepared_free(&prep[i]);
    free(prep);
    free(seqs);
    iv_engine_free(e);
    return vecs;
}

/* Every text's int8 embedding keeps cosine >= min_floor to FP32 and the
 * mean stays >= mean_floor; prints the figures and the worst texts. */
static void int8_corpus(const char *name, int bits, double min_floor, double mean_floor, int max_texts)
{
    char model[4096];
    iv_path_join(model, sizeof model, iv_test_models_dir(), name);
    if (!iv_dir_exists(model)) {
        iv_test_fail(__FILE__, __LINE__, "%s missing: run scripts/fetch-models.sh", model);
        return;
    }
    char *texts[CORPUS_MAX];
    const int all = load_corpus(texts);
    REQUIRE(all > 100);
    const int n = max_texts < all ? max_texts : all;
    int d32 = 0, d8 = 0;
    float *ref = embed_corpus(model, "float32", 8, texts, n, &d32), *q = embed_corpus(model, "int8", bits, texts, n, &d8);
    if (ref && q && d32 == d8) {
        double cos[CORPUS_MAX], min = 1, sum = 0, min_long = 1;
        for (int i = 0; i < n; i++) {
            cos[i] = iv_test_cosine(q + (size_t)i * d8, ref + (size_t)i * d8, d8);
            sum += cos[i];
            if (cos[i] < min) min = cos[i];
            if (strlen(texts[i]) > 20 && cos[i] < min_long) min_long = cos[i];
            CHECK_MSG(cos[i] >= min_floor, "%s text %d (%s): int8 cosine %.6f < %.4f", name, i, texts[i], cos[i],
                      min_floor);
        }
        const double mean = sum / n;
        if (n == all) CHECK_MSG(mean >= mean_floor, "%s: mean int8 cosine %.6f < %.4f", name, mean, mean_floor);
        printf("    int8 (%d-bit weights) %s vs FP32 over %d corpus texts: min cosine %.6f, mean %.6f", bits, name, n, min,
               mean);
        if (min_long < 1) printf(", min over texts > 20 bytes %.6f", min_long);
        printf("; worst (text, cosine):");
        /* The three worst texts, with their cosines. */
        int shown[3] = {-1, -1, -1};
        for (int k = 0; k < 3; k++) {
            for (int i = 0; i < n; i++)
                if (i != shown[0] && i != shown[1] && (shown[k] < 0 || cos[i] < cos[shown[k]])) shown[k] = i;
            printf(" %d %.6f%s", shown[k], cos[shown[k]], k < 2 ? "," : "\n");
        }
    }
    free(ref);
    free(q);
    for (int i = 0; i < all; i++) free(texts[i]);
}

/* Measured (AVX-512 VNNI and AVX2 kernels give the same integer sums):
 * MiniLM min 0.991126 (":)"; "Thanks a lot." 0.991240, "yes!" 0.992112),
 * mean 0.997416, min over texts longer than 20 bytes 0.996024; mpnet min
 * 0.988179 ("."), mean 0.996959, longer texts 0.991255. Short inputs of one
 * or two tokens between [CLS] and [SEP] are the worst: per-token activation
 * scales there are set by a few outlier channels. Keeping one kind of layer
 * in FP32 (QKV, or MLP down) lifts the floor by at most ~0.003 and not on
 * both models, so the quantizer is unchanged and the floors are what it
 * gives. */
TEST(golden_int8_corpus_minilm) { int8_corpus("all-MiniLM-L6-v2", 8, 0.991, 0.997, CORPUS_MAX); }
TEST(golden_int8_corpus_mpnet)
{
    int8_corpus("all-mpnet-base-v2", 8, 0.988, 0.9965, mpnet_texts());
}

/* 7-bit weights (the vpmaddubsw kernel's) double the weights' rounding
 * error. Measured: MiniLM min 0.982292 ("!"; ":)" 0.982648), mean 0.994859,
 * longer texts 0.989789; mpnet min 0.978980 ("Thanks a lot."), mean
 * 0.994479, longer texts 0.982499. */
TEST(golden_int8_7bit_corpus_minilm) { int8_corpus("all-MiniLM-L6-v2", 7, 0.982, 0.9945, CORPUS_MAX); }
TEST(golden_int8_7bit_corpus_mpnet)
{
    int8_corpus("all-mpnet-base-v2", 7, 0.9785, 0.994, mpnet_texts());
}
