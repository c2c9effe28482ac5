/* EmbeddingGemma2's Gemma4 audio tower against transformers
 * (tests/fixtures/models/embedding_gemma2_audio, written by
 * tools/fixtures/synthetic_gemma4_audio.py): from the fixture's log-mel
 * features, stage by stage (subsampler, each conformer layer, tower output,
 * projected soft tokens), each clip alone and both packed in one batch;
 * refusals of audio configs we do not implement and of bad clips. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/file.h"
#include "base/json.h"
#include "engine/engine.h"
#include "golden/golden_util.h"
#include "models/audio_gemma4.h"
#include "models/model.h"
#include "ops/ops.h"
#include "test.h"
#include "unit/ckpt_test_util.h"

#define MIN_COS 0.99999
#define MAX_ABS 1e-4
#define N_CLIPS 2

typedef struct afix {
    iv_model *m;
    iv_weights *expected;
    const iv_tensor *features[N_CLIPS];
    int frames[N_CLIPS], tokens[N_CLIPS];
    /* the clips of the current run: expected rows come from clip ids[i] */
    int ids[N_CLIPS], n;
    int checked;
    double min_cos, max_abs;           /* the tolerance of this run */
    double worst_abs[8], worst_cos[8]; /* per stage index */
} afix;

static const char *const k_stages[] = {"subsample", "layer0", "layer1", "tower", "soft_tokens"};
#define N_STAGES 5

static void tap(void *ctx, const char *stage, iv_view v)
{
    afix *f = ctx;
    int si = -1;
    for (int i = 0; i < N_STAGES; i++)
        if (!strcmp(stage, k_stages[i])) si = i;
    if (si < 0) {
        iv_test_fail(__FILE__, __LINE__, "unexpected stage %s", stage);
        return;
    }
    float *got = malloc((size_t)(v.rows * v.cols) * sizeof(float));
    iv_ops_download_f32(f->m->ops, v, got);
    int64_t r0 = 0;
    for (int i = 0; i < f->n; i++) {
        char name[64], what[96];
        snprintf(name, sizeof name, "clip%d.%s", f->ids[i], stage);
        const iv_tensor *want = NULL;
        iv_err err = {0};
        if (iv_weights_f32(f->expected, name, 0, NULL, &want, &err)) {
            iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
            break;
        }
        const int64_t rows = want->shape[0], cols = want->shape[1];
        if (cols != v.cols || r0 + rows > v.rows) {
            iv_test_fail(__FILE__, __LINE__, "%s: %lld x %lld expected, stage is %lld x %lld", name,
                         (long long)rows, (long long)cols, (long long)v.rows, (long long)v.cols);
            break;
        }
        snprintf(what, sizeof what, "%s (%d clips in the batch)", name, f->n);
        golden_compare(what, got + r0 * cols, iv_f32(want), rows, cols, f->min_cos, f->max_abs);
        for (int64_t r = 0; r < rows; r++) {
            const double c = iv_test_cosine(got + (r0 + r) * cols, iv_f32(want) + r * cols, cols);
            const double d = iv_test_max_abs_diff(got + (r0 + r) * cols, iv_f32(want) + r * cols, cols);
            if (c < f->worst_cos[si]) f->worst_cos[si] = c;
            if (d > f->worst_abs[si]) f->worst_abs[si] = d;
        }
        r0 += rows;
        f->checked++;
    }
    if (r0 != v.rows) iv_test_fail(__FILE__, __LINE__, "%s: %lld rows, expected %lld", stage, (long long)v.rows,
                                   (long long)r0);
    free(got);
}

static int afix_load(afix *f)
{
    memset(f, 0, sizeof *f);
    f->min_cos = MIN_COS;
    f->max_abs = MAX_ABS;
    for (int i = 0; i < 8; i++) f->worst_cos[i] = 1.0;
    char dir[4096], path[4400];
    snprintf(dir, sizeof dir, "%s/models/embedding_gemma2_audio", iv_test_fixtures_dir());
    iv_err err = {0};
    if (iv_model_load(&f->m, dir, iv_cpu_ops(), &err)) return iv_test_fail(__FILE__, __LINE__, "load: %s", err.msg);
    if (!f->m->audio) return iv_test_fail(__FILE__, __LINE__, "the fixture's audio tower was not loaded");
    snprintf(path, sizeof path, "%s/audio_expected.safetensors", dir);
    if (iv_weights_open_file(&f->expected, path, &err)) return iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
    for (int i = 0; i < N_CLIPS; i++) {
        char name[64];
        snprintf(name, sizeof name, "clip%d.features", i);
        if (iv_weights_f32(f->expected, name, 0, NULL, &f->features[i], &err))
            return iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
        f->frames[i] = (int)f->features[i]->shape[0];
        snprintf(name, sizeof name, "clip%d.soft_tokens", i);
        const iv_tensor *t;
        if (iv_weights_f32(f->expected, name, 0, NULL, &t, &err)) return iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
        f->tokens[i] = (int)t->shape[0];
    }
    return 0;
}

static void afix_free(afix *f)
{
    if (f->expected) iv_weights_close(f->expected);
    if (f->m) iv_model_free(f->m);
}

static void run(afix *f, const int *ids, int n)
{
    iv_audio_input in[N_CLIPS];
    for (int i = 0; i < n; i++) {
        f->ids[i] = ids[i];
        in[i] = (iv_audio_input){.features = iv_f32(f->features[ids[i]]), .n_frames = f->frames[ids[i]],
                                 .n_mels = (int)f->features[ids[i]]->shape[1]};
    }
    f->n = n;
    iv_arena a, h;
    iv_ops_arena_init(&a, f->m->ops);
    iv_arena_init(&h);
    const iv_fwd_mem mem = {&h, &a};
    iv_view tokens;
    iv_err err = {0};
    const int before = f->checked;
    if (iv_gemma4_audio_forward(f->m, f->m->audio, in, n, &mem, &tokens, tap, f, &err))
        iv_test_fail(__FILE__, __LINE__, "forward: %s", err.msg);
    else {
        int want_rows = 0;
        for (int i = 0; i < n; i++) want_rows += f->tokens[ids[i]];
        CHECK_EQ_INT((int)tokens.rows, want_rows);
        CHECK_EQ_INT(f->checked - before, N_STAGES * n); /* every stage of every clip was compared */
    }
    iv_arena_free(&a);
    iv_arena_free(&h);
}

TEST(gemma4_audio_tower_matches_transformers)
{
    afix f;
    if (afix_load(&f) == 0) {
        static const int alone0[] = {0}, alone1[] = {1}, both[] = {0, 1}, swapped[] = {1, 0};
        run(&f, alone0, 1);
        run(&f, alone1, 1);
        run(&f, both, 2);
        run(&f, swapped, 2);
        for (int s = 0; s < N_STAGES; s++)
            printf("    gemma4 audio %-11s worst max abs %.2e, min cosine %.9f\n", k_stages[s], f.worst_abs[s],
                   f.worst_cos[s]);
    }
    afix_free(&f);
}

TEST(gemma4_audio_rejects_bad_clips)
{
    afix f;
    if (afix_load(&f) == 0) {
        iv_arena a;
        iv_arena_init(&a);
        const iv_fwd_mem mem = {&a, &a};
        iv_view tokens;
        iv_err err = {0};
        iv_audio_input in = {.features = iv_f32(f.features[0]), .n_frames = f.frames[0], .n_mels = 64};
        CHECK(iv_gemma4_audio_forward(f.m, f.m->audio, &in, 1, &mem, &tokens, NULL, NULL, &err) == -1);
        CHECK_EQ_INT(err.code, IV_E_INVALID);
        CHECK(strstr(err.msg, "mel bins") != NULL);
        in.n_mels = 128;
        in.n_frames = 0;
        CHECK(iv_gemma4_audio_forward(f.m, f.m->audio, &in, 1, &mem, &tokens, NULL, NULL, &err) == -1);
        CHECK_EQ_INT(err.code, IV_E_INVALID);
        CHECK(iv_gemma4_audio_forward(f.m, f.m->audio, &in, 0, &mem, &tokens, NULL, NULL, &err) == -1);
        iv_arena_free(&a);
    }
    afix_free(&f);
}

static cJSON *audio_cfg(cJSON *cfg) { return cJSON_GetObjectItemCaseSensitive(cfg, "audio_config"); }
static void right_context(cJSON *cfg) { ckpt_set(audio_cfg(cfg), "attention_context_right", cJSON_CreateNumber(2)); }
static void gelu_act(cJSON *cfg) { ckpt_set(audio_cfg(cfg), "hidden_act", cJSON_CreateString("gelu")); }
static void narrow_channels(cJSON *cfg)
{
    cJSON *ch = cJSON_CreateArray();
    cJSON_AddItemToArray(ch, cJSON_CreateNumber(64));
    cJSON_AddItemToArray(ch, cJSON_CreateNumber(4));
    ckpt_set(audio_cfg(cfg), "subsampling_conv_channels", ch);
}
static void other_tower(cJSON *cfg) { ckpt_set(audio_cfg(cfg), "model_type", cJSON_CreateString("whisper")); }

TEST(gemma4_audio_rejects_unsupported_configs)
{
    CKPT_REJECT("embedding_gemma2_audio", right_context, "attention_context_right", IV_E_UNSUPPORTED);
    CKPT_REJECT("embedding_gemma2_audio", gelu_act, "hidden_act", IV_E_UNSUPPORTED);
    CKPT_REJECT("embedding_gemma2_audio", other_tower, "audio_config.model_type", IV_E_UNSUPPORTED);
    /* channels[0] 64 with 128-bin conv weights: the weights' shape is wrong */
    CKPT_REJECT("embedding_gemma2_audio", narrow_channels, "layer0.conv.weight", IV_E_FORMAT);
}

/* ---- the mixed forward: audio soft tokens in the text model ---- */

#define N_SEQS 2
typedef struct seqfix {
    int32_t ids[N_SEQS][64];
    int lens[N_SEQS], clip[N_SEQS], offset[N_SEQS];
    const iv_tensor *want[N_SEQS];
} seqfix;

static int seqfix_load(afix *f, seqfix *q)
{
    memset(q, 0, sizeof *q);
    char path[4400];
    snprintf(path, sizeof path, "%s/models/embedding_gemma2_audio/audio_cases.json", iv_test_fixtures_dir());
    cJSON *cases = NULL;
    iv_err err = {0};
    if (iv_json_load_file(path, 1 << 20, &cases, &err)) return iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
    const cJSON *c;
    int n = 0, rc = 0;
    cJSON_ArrayForEach(c, iv_json_get(cases, "sequences"))
    {
        if (n == N_SEQS) break;
        const cJSON *id;
        int L = 0;
        q->offset[n] = -1;
        cJSON_ArrayForEach(id, iv_json_get(c, "input_ids"))
        {
            if (L == 64) break;
            q->ids[n][L] = id->valueint;
            if (id->valueint == f->m->audio->audio_token_id && q->offset[n] < 0) q->offset[n] = L;
            L++;
        }
        q->lens[n] = L;
        q->clip[n] = (int)iv_json_int(c, "clip", -1);
        char name[96];
        snprintf(name, sizeof name, "%s.last_hidden_state", iv_json_str(c, "name", ""));
        if (iv_weights_f32(f->expected, name, 0, NULL, &q->want[n], &err) || q->clip[n] < 0 ||
            q->clip[n] >= N_CLIPS || q->offset[n] < 0) {
            rc = iv_test_fail(__FILE__, __LINE__, "sequence %s: %s", name, err.msg);
            break;
        }
        n++;
    }
    cJSON_Delete(cases);
    if (!rc && n != N_SEQS) rc = iv_test_fail(__FILE__, __LINE__, "%d sequences in audio_cases.json", n);
    return rc;
}

/* Sequences `which` packed into one batch; returns the worst max abs. */
static double check_mixed(afix *f, seqfix *q, const int *which, int n, double *worst_cos)
{
    iv_arena a;
    iv_arena_init(&a);
    const iv_fwd_mem mem = {&a, &a};
    int32_t cu[N_SEQS + 1] = {0}, ids[2 * 64];
    iv_audio_input clips[N_SEQS];
    iv_seq_audios au[N_SEQS];
    for (int i = 0; i < n; i++) {
        const int s = which[i], c = q->clip[s];
        cu[i + 1] = cu[i] + q->lens[s];
        memcpy(ids + cu[i], q->ids[s], (size_t)q->lens[s] * sizeof(int32_t));
        clips[i] = (iv_audio_input){.features = iv_f32(f->features[c]), .n_frames = f->frames[c],
                                    .n_mels = (int)f->features[c]->shape[1], .token_offset = q->offset[s]};
        au[i] = (iv_seq_audios){1, &clips[i]};
    }
    iv_batch b = {.n_seqs = n, .n_tokens = cu[n], .ids = ids, .cu_seqlens = cu};
    iv_view hidden;
    iv_err err = {0};
    double worst = 0;
    if (iv_model_check_batch(f->m, &b, &err) || iv_model_upload_batch(f->m, &b, &a, &err) ||
        iv_model_forward_audio(f->m, &b, au, &mem, &hidden, &err)) {
        iv_test_fail(__FILE__, __LINE__, "mixed forward: %s", err.msg);
    } else {
        for (int i = 0; i < n; i++) {
            const iv_tensor *want = q->want[which[i]];
            const int64_t rows = want->shape[0], cols = want->shape[1];
            CHECK_EQ_INT((int)hidden.cols, (int)cols);
            if (hidden.cols != cols || rows != q->lens[which[i]]) continue;
            const float *got = (const float *)hidden.data + (int64_t)cu[i] * hidden.ld;
            char what[96];
            snprintf(what, sizeof what, "sequence %d of %d (fixture sequence %d)", i, n, which[i]);
            for (int64_t r = 0; r < rows; r++) {
                const double c = iv_test_cosine(got + r * hidden.ld, iv_f32(want) + r * cols, cols);
                const double d = iv_test_max_abs_diff(got + r * hidden.ld, iv_f32(want) + r * cols, cols);
                CHECK_MSG(c >= MIN_COS && d <= MAX_ABS, "%s row %lld: cosine %.9f, max abs %.3g", what, (long long)r,
                          c, d);
                if (d > worst) worst = d;
                if (c < *worst_cos) *worst_cos = c;
            }
        }
    }
    iv_arena_free(&a);
    return worst;
}

TEST(gemma4_audio_mixed_forward_matches_transformers)
{
    afix f;
    seqfix q;
    if (afix_load(&f) == 0 && seqfix_load(&f, &q) == 0) {
        static const int alone0[] = {0}, alone1[] = {1}, both[] = {0, 1}, swapped[] = {1, 0};
        double cos = 1.0, d = 0;
        d = fmax(d, check_mixed(&f, &q, alone0, 1, &cos));
        d = fmax(d, check_mixed(&f, &q, alone1, 1, &cos));
        d = fmax(d, check_mixed(&f, &q, both, 2, &cos));
        d = fmax(d, check_mixed(&f, &q, swapped, 2, &cos));
        printf("    embedding_gemma2 audio-only and mixed last_hidden_state: worst max abs %.2e, min cosine %.9f\n", d,
               cos);
    }
    afix_free(&f);
}

TEST(gemma4_audio_mixed_forward_rejects_bad_spans)
{
    afix f;
    seqfix q;
    if (afix_load(&f) == 0 && seqfix_load(&f, &q) == 0) {
        iv_arena a;
        iv_arena_init(&a);
        const iv_fwd_mem mem = {&a, &a};
        int32_t cu[2] = {0, q.lens[1]};
        iv_batch b = {.n_seqs = 1, .n_tokens = cu[1], .ids = q.ids[1], .cu_seqlens = cu};
        iv_err err = {0};
        iv_view hidden;
        REQUIRE(iv_model_upload_batch(f.m, &b, &a, &err) == 0);
        iv_audio_input clip = {.features = iv_f32(f.features[1]), .n_frames = f.frames[1], .n_mels = 128,
                               .token_offset = q.offset[1] + 1};
        iv_seq_audios au = {1, &clip};
        /* shifted by one: the run ends on <eoa> */
        CHECK(iv_model_forward_audio(f.m, &b, &au, &mem, &hidden, &err) == -1);
        CHECK_EQ_INT(err.code, IV_E_INVALID);
        /* the longer clip: more soft tokens than placeholders */
        clip = (iv_audio_input){.features = iv_f32(f.features[0]), .n_frames = f.frames[0], .n_mels = 128,
                                .token_offset = q.offset[1]};
        CHECK(iv_model_forward_audio(f.m, &b, &au, &mem, &hidden, &err) == -1);
        CHECK_EQ_INT(err.code, IV_E_INVALID);
        /* a shorter clip: placeholders left over */
        clip.n_frames = 8;
        CHECK(iv_model_forward_audio(f.m, &b, &au, &mem, &hidden, &err) == -1);
        CHECK_EQ_INT(err.code, IV_E_INVALID);
        CHECK(strstr(err.msg, "audio tokens") != NULL);
        iv_arena_free(&a);
    }
    afix_free(&f);
}

/* Through the engine: both sequences packed in one iv_engine_run. */
TEST(gemma4_audio_engine_run)
{
    afix f;
    seqfix q;
    if (afix_load(&f) == 0 && seqfix_load(&f, &q) == 0) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/models/embedding_gemma2_audio", iv_test_fixtures_dir());
        iv_engine *e = NULL;
        iv_err err = {0};
        if (iv_engine_load(&e, dir, NULL, &err)) {
            iv_test_fail(__FILE__, __LINE__, "engine load: %s", err.msg);
        } else {
            iv_audio_input clips[N_SEQS];
            iv_seq_input in[N_SEQS];
            for (int s = 0; s < N_SEQS; s++) {
                const int c = q.clip[s];
                clips[s] = (iv_audio_input){.features = iv_f32(f.features[c]), .n_frames = f.frames[c],
                                            .n_mels = (int)f.features[c]->shape[1], .token_offset = q.offset[s]};
                in[s] = (iv_seq_input){.ids = q.ids[s], .len = q.lens[s], .audios = &clips[s], .n_audios = 1};
            }
            iv_outputs out;
            double worst = 0, cos = 1.0;
            if (iv_engine_run(e, IV_TASK_EMBED_ALL, in, N_SEQS, &out, &err)) {
                iv_test_fail(__FILE__, __LINE__, "engine run: %s", err.msg);
            } else {
                for (int s = 0; s < N_SEQS; s++) {
                    const iv_tensor *want = q.want[s];
                    CHECK_EQ_INT(out.rows[s], q.lens[s]);
                    CHECK_EQ_INT(out.cols, (int)want->shape[1]);
                    if (out.rows[s] != q.lens[s] || out.cols != want->shape[1]) continue;
                    for (int r = 0; r < q.lens[s]; r++) {
                        const float *got = out.data + out.offsets[s] + (int64_t)r * out.cols;
                        const double c = iv_test_cosine(got, iv_f32(want) + r * out.cols, out.cols);
                        const double d = iv_test_max_abs_diff(got, iv_f32(want) + r * out.cols, out.cols);
                        CHECK_MSG(c >= MIN_COS && d <= MAX_ABS, "engine sequence %d row %d: cosine %.9f, max abs %.3g",
                                  s, r, c, d);
                        worst = fmax(worst, d);
                        cos = fmin(cos, c);
                    }
                }
                iv_outputs_free(&out);
            }
            printf("    embedding_gemma2 audio through iv_engine_run: worst max abs %.2e, min cosine %.9f\n", worst,
                   cos);
            iv_engine_free(e);
        }
    }
    afix_free(&f);
}

/* The emulated device (16-bit storage, memory the host cannot touch): the
 * tower runs unchanged through its op table, stage by stage against the
 * same FP32 reference; storage rounding bounds the agreement. Measured
 * worst row cosines: FP16 0.999987 (tower output), BF16 (8-bit mantissa,
 * about 8x FP16's rounding) 0.99867; held to 0.9999 and 0.998. */
static void check_device(const char *device, const char *dtype, double min_cos)
{
    iv_err err = {0};
    const iv_ops *ops = iv_ops_open(device, dtype, &err);
    CHECK_MSG(ops != NULL, "%s %s: %s", device, dtype, err.msg);
    if (!ops) return;
    afix f;
    if (afix_load(&f) == 0) {
        if (iv_model_to_device(f.m, ops, &err)) {
            iv_test_fail(__FILE__, __LINE__, "to %s %s: %s", device, dtype, err.msg);
        } else {
            f.min_cos = min_cos;
            f.max_abs = 1e30; /* cosine only: 16-bit storage */
            static const int both[] = {0, 1};
            run(&f, both, 2);
            for (int s = 0; s < N_STAGES; s++)
                printf("    %s %s: gemma4 audio %-11s min cosine %.6f\n", device, dtype, k_stages[s], f.worst_cos[s]);
        }
    }
    afix_free(&f);
    iv_ops_close(ops);
}

TEST(gemma4_audio_emulated_bf16) { check_device("emulated", "bfloat16", 0.998); }
TEST(gemma4_audio_emulated_fp16) { check_device("emulated", "float16", 0.9999); }

/* The same on a GPU (cuda_audio_ops.cu), to the same bounds; skipped where there is none. */
TEST(gemma4_audio_cuda_16bit)
{
    if (!golden_cuda_present()) return;
    check_device("cuda", "bfloat16", 0.998);
    check_device("cuda", "float16", 0.9999);
}

/* A table without the tower's ops is refused by name. */
TEST(gemma4_audio_refused_without_ops)
{
    afix f;
    if (afix_load(&f) == 0) {
        iv_ops no_conv = *iv_cpu_ops();
        no_conv.conv2d = NULL;
        no_conv.name = "no-conv2d";
        const iv_ops *saved = f.m->ops;
        f.m->ops = &no_conv;
        iv_arena a;
        iv_arena_init(&a);
        const iv_fwd_mem mem = {&a, &a};
        iv_audio_input in = {.features = iv_f32(f.features[0]), .n_frames = f.frames[0], .n_mels = 128};
        iv_view tokens;
        iv_err err = {0};
        CHECK(iv_gemma4_audio_forward(f.m, f.m->audio, &in, 1, &mem, &tokens, NULL, NULL, &err) == -1);
        CHECK_EQ_INT(err.code, IV_E_UNSUPPORTED);
        CHECK(strstr(err.msg, "no-conv2d") != NULL && strstr(err.msg, "conv2d") != NULL);
        iv_arena_free(&a);
        f.m->ops = saved;
    }
    afix_free(&f);
}
