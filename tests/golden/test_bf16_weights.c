/* BF16 checkpoints (how most current models are published) load into the
 * same model as their values widened to F32: every output the same bits.
 * Loading converts each tensor to F32 and, once the model has its own copy
 * (fused Q/K/V, concatenated gate/up halves, packed panels), frees the
 * conversion and drops the file's pages; these tests catch a copy freed
 * while something still reads it (under AddressSanitizer, a use after
 * free; otherwise wrong bits). Fixtures cover the paths that release:
 * BERT (Q, K, V fused), Qwen3 (grouped-query fusion, SwiGLU halves
 * concatenated), ModernBERT (stored fused), BERT SPLADE (the tied MLM
 * decoder replaces the embedding table after packing), DeBERTa v3 (relative
 * positions projected through rows of the fused QKV), Gemma 3 and a Nomic
 * mixture of experts (experts' halves concatenated). */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "engine/engine.h"
#include "test.h"
#include "unit/ckpt_test_util.h"

/* Round to nearest even, as torch's .to(torch.bfloat16). */
static uint16_t f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* The fixture's model.safetensors (all F32) rewritten twice: as BF16 into
 * bf16_dir and, widened back to F32, into f32_dir. 0 on success. */
static int write_twins(const char *fixture, const char *bf16_dir, const char *f32_dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/models/%s/model.safetensors", iv_test_fixtures_dir(), fixture);
    char *file = NULL;
    size_t size = 0;
    iv_err err = {0};
    if (iv_file_read_all(path, 1u << 30, &file, &size, &err)) return -1;
    uint64_t hlen;
    memcpy(&hlen, file, 8);
    cJSON *head = cJSON_ParseWithLength(file + 8, (size_t)hlen);
    const char *data = file + 8 + hlen;
    const size_t n_data = size - 8 - (size_t)hlen;
    uint16_t *half = malloc(n_data / 2 + 2);
    float *wide = malloc(n_data + 4);
    cJSON *hb = cJSON_Duplicate(head, 1), *hw = cJSON_Duplicate(head, 1);
    int rc = head && half && wide && hb && hw ? 0 : -1;
    size_t at = 0; /* floats so far, in both files */
    for (cJSON *t = head ? head->child : NULL; t && !rc; t = t->next) {
        if (!strcmp(t->string, "__metadata__")) continue;
        const cJSON *off = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
        if (strcmp(cJSON_GetObjectItemCaseSensitive(t, "dtype")->valuestring, "F32")) {
            rc = -1; /* the fixtures are F32 throughout */
            break;
        }
        const size_t b = (size_t)cJSON_GetArrayItem(off, 0)->valuedouble, e = (size_t)cJSON_GetArrayItem(off, 1)->valuedouble;
        const size_t n = (e - b) / 4;
        for (size_t i = 0; i < n; i++) {
            float f;
            memcpy(&f, data + b + 4 * i, 4);
            half[at + i] = f32_to_bf16(f);
            const uint32_t u = (uint32_t)half[at + i] << 16;
            memcpy(&wide[at + i], &u, 4);
        }
        cJSON *tb = cJSON_GetObjectItemCaseSensitive(hb, t->string), *tw = cJSON_GetObjectItemCaseSensitive(hw, t->string);
        cJSON_ReplaceItemInObjectCaseSensitive(tb, "dtype", cJSON_CreateString("BF16"));
        const double ob[2] = {(double)(2 * at), (double)(2 * (at + n))}, ow[2] = {(double)(4 * at), (double)(4 * (at + n))};
        cJSON_ReplaceItemInObjectCaseSensitive(tb, "data_offsets", cJSON_CreateDoubleArray(ob, 2));
        cJSON_ReplaceItemInObjectCaseSensitive(tw, "data_offsets", cJSON_CreateDoubleArray(ow, 2));
        at += n;
    }
    const char *dirs[2] = {bf16_dir, f32_dir};
    cJSON *heads[2] = {hb, hw};
    const void *bodies[2] = {half, wide};
    const size_t body_len[2] = {2 * at, 4 * at};
    for (int k = 0; k < 2 && !rc; k++) {
        char *text = cJSON_PrintUnformatted(heads[k]);
        const uint64_t tl = text ? strlen(text) : 0;
        char *img = text ? malloc(8 + tl + body_len[k]) : NULL;
        if (img) {
            memcpy(img, &tl, 8);
            memcpy(img + 8, text, tl);
            memcpy(img + 8 + tl, bodies[k], body_len[k]);
            rc = ckpt_write(dirs[k], "model.safetensors", img, 8 + tl + body_len[k]);
        } else {
            rc = -1;
        }
        free(img);
        free(text);
    }
    cJSON_Delete(head);
    cJSON_Delete(hb);
    cJSON_Delete(hw);
    free(half);
    free(wide);
    free(file);
    return rc;
}

static int run(const char *dir, iv_task task, iv_outputs *out)
{
    /* Three sequences, packed, ids inside every fixture's vocabulary. */
    static const int32_t a[] = {2, 17, 45, 9, 88, 3}, b[] = {2, 60, 61, 62, 3}, c[] = {2, 99, 5, 7, 11, 13, 17, 3};
    const iv_seq_input seqs[3] = {{.ids = a, .len = 6}, {.ids = b, .len = 5}, {.ids = c, .len = 8}};
    iv_engine *e = NULL;
    iv_err err = {0};
    int rc = iv_engine_load(&e, dir, NULL, &err) || iv_engine_run(e, task, seqs, 3, out, &err);
    if (rc) iv_test_fail(__FILE__, __LINE__, "%s: %s", dir, err.msg);
    iv_engine_free(e);
    return rc;
}

static void check_fixture(const char *fixture, iv_task task)
{
    char bf16[512], f32[512];
    REQUIRE(ckpt_make(bf16, sizeof bf16, fixture, NULL, 0) == 0);
    REQUIRE(ckpt_make(f32, sizeof f32, fixture, NULL, 0) == 0);
    CHECK(write_twins(fixture, bf16, f32) == 0);
    iv_outputs x = {0}, y = {0};
    if (!run(bf16, task, &x) && !run(f32, task, &y)) {
        CHECK_EQ_INT(x.cols, y.cols);
        CHECK(x.offsets[3] == y.offsets[3]);
        if (x.cols == y.cols && x.offsets[3] == y.offsets[3])
            CHECK(memcmp(x.data, y.data, (size_t)x.offsets[3] * sizeof(float)) == 0);
        iv_outputs_free(&x);
        iv_outputs_free(&y);
    }
    tmp_rmtree(bf16);
    tmp_rmtree(f32);
}

TEST(bf16_weights_bert_same_bits) { check_fixture("bert", IV_TASK_EMBED_ALL); }
TEST(bf16_weights_qwen3_same_bits) { check_fixture("qwen3", IV_TASK_EMBED_ALL); }
TEST(bf16_weights_modernbert_same_bits) { check_fixture("modernbert", IV_TASK_EMBED_ALL); }
TEST(bf16_weights_splade_tied_decoder_same_bits) { check_fixture("bert_splade", IV_TASK_SPARSE); }
TEST(bf16_weights_deberta_v3_same_bits) { check_fixture("deberta_v3", IV_TASK_EMBED_ALL); }
TEST(bf16_weights_gemma3_same_bits) { check_fixture("gemma3", IV_TASK_EMBED_ALL); }
TEST(bf16_weights_nomic_moe_same_bits) { check_fixture("nomic_bert_moe", IV_TASK_EMBED_ALL); }
