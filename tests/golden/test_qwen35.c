/* Qwen3.5 (Gated DeltaNet + gated full attention) against transformers: the
 * three fixtures from tools/fixtures/synthetic_qwen35.py, each input alone
 * and all inputs as one packed batch in two orders (lengths 3, 17, 2, 150, 9,
 * 70: the 150-token input crosses transformers' DeltaNet chunk of 64 twice),
 * with the worst figures printed; FP32 tolerances as every fixture's. Also
 * the DeltaNet ops against a double-precision token-by-token reference, with
 * their states starting afresh at each packed sequence. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "engine/engine.h"
#include "golden_util.h"
#include "ops/ops.h"
#include "test.h"

#define MIN_COS 0.99999
#define MAX_ABS 1e-4

typedef struct figures {
    double max_abs, min_cos;
} figures;

static void account(figures *f, const float *got, const float *want, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++) {
        const double c = iv_test_cosine(got + r * cols, want + r * cols, cols);
        const double d = iv_test_max_abs_diff(got + r * cols, want + r * cols, cols);
        if (c < f->min_cos) f->min_cos = c;
        if (d > f->max_abs) f->max_abs = d;
    }
}

/* Runs inputs order[0..n) as one batch; compares each with its expected
 * hidden states, and with its states run alone (alone[i], kept when n is 1):
 * the same bits, whatever the batch. */
static void run_hidden(iv_engine *e, golden_case *g, const int *order, int n, figures *f, const char *what,
                       const char *fixture, float **alone)
{
    iv_seq_input *seqs = calloc((size_t)n, sizeof *seqs);
    for (int j = 0; j < n; j++) {
        const int i = order[j];
        seqs[j] = (iv_seq_input){.ids = g->ids[i], .type_ids = g->types[i], .len = g->lens[i]};
    }
    iv_outputs out;
    iv_err err = {0};
    if (iv_engine_run(e, IV_TASK_EMBED_ALL, seqs, n, &out, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s %s: %s", fixture, what, err.msg);
        free(seqs);
        return;
    }
    for (int j = 0; j < n; j++) {
        const iv_tensor *want = golden_expected(g, "hidden", order[j]);
        if (!want || iv_tensor_numel(want) != out.rows[j] * out.cols) {
            iv_test_fail(__FILE__, __LINE__, "%s %s: hidden.%d has the wrong size", fixture, what, order[j]);
            continue;
        }
        char name[160];
        snprintf(name, sizeof name, "%s %s hidden.%d (%d tokens)", fixture, what, order[j], g->lens[order[j]]);
        golden_compare(name, out.data + out.offsets[j], want->data, out.rows[j], out.cols, MIN_COS, MAX_ABS);
        account(f, out.data + out.offsets[j], want->data, out.rows[j], out.cols);
        const size_t bytes = (size_t)(out.rows[j] * out.cols) * sizeof(float);
        if (n == 1) {
            alone[order[j]] = malloc(bytes);
            memcpy(alone[order[j]], out.data + out.offsets[j], bytes);
        } else if (alone[order[j]]) {
            CHECK_MSG(memcmp(alone[order[j]], out.data + out.offsets[j], bytes) == 0,
                      "%s %s: input %d is not the same bits as alone", fixture, what, order[j]);
        }
    }
    iv_outputs_free(&out);
    free(seqs);
}

TEST(golden_qwen35_packed_batches)
{
    static const char *const names[] = {"qwen35", "qwen35_seqcls", "qwen35_cond", "qwen35_moe", "qwen3_next"};
    for (int k = 0; k < 5; k++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/models/%s", iv_test_fixtures_dir(), names[k]);
        golden_case g;
        if (golden_load(&g, dir)) continue;
        iv_engine *e;
        iv_err err = {0};
        if (iv_engine_load(&e, dir, NULL, &err)) {
            iv_test_fail(__FILE__, __LINE__, "%s: load failed: %s", names[k], err.msg);
            golden_free(&g);
            continue;
        }
        int longest = 0, *fwd = malloc((size_t)g.n * sizeof *fwd), *rev = malloc((size_t)g.n * sizeof *rev);
        for (int i = 0; i < g.n; i++) {
            fwd[i] = i;
            rev[i] = g.n - 1 - i;
            if (g.lens[i] > longest) longest = g.lens[i];
        }
        CHECK_MSG(longest > 128, "%s: no input crosses two DeltaNet chunks of 64", names[k]);
        figures alone = {0, 1}, packed = {0, 1};
        float **bits = calloc((size_t)g.n, sizeof *bits);
        for (int i = 0; i < g.n; i++) run_hidden(e, &g, &i, 1, &alone, "alone", names[k], bits);
        run_hidden(e, &g, fwd, g.n, &packed, "packed", names[k], bits);
        run_hidden(e, &g, rev, g.n, &packed, "packed reversed", names[k], bits);
        printf("    %-14s hidden alone: max abs %.2e, 1 - min cos %.1e; packed (%d seqs, %d..%d tokens, same bits as "
               "alone): max abs %.2e, 1 - min cos %.1e\n",
               names[k], alone.max_abs, 1 - alone.min_cos, g.n, 2, longest, packed.max_abs, 1 - packed.min_cos);
        for (int i = 0; i < g.n; i++) free(bits[i]);
        free(bits);
        free(fwd);
        free(rev);
        iv_engine_free(e);
        golden_free(&g);
    }
}

/* ---- the ops against a double-precision recurrence ---- */

static float frand(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return ((float)(*s >> 8) / (float)(1u << 24)) * 2.0f - 1.0f;
}

static double softplus_d(double x) { return x > 20 ? x : log1p(exp(x)); }

/* transformers' torch_recurrent_gated_delta_rule for one sequence, in double. */
static void delta_rule_ref(const float *q, const float *k, const float *v, const float *a, const float *b,
                           const float *a_log, const float *dt_bias, int L, int Hk, int Hv, int Dk, int Dv, double *out)
{
    double *S = calloc((size_t)Dk * Dv, sizeof *S), *qn = malloc(sizeof(double) * Dk), *kn = malloc(sizeof(double) * Dk);
    for (int h = 0; h < Hv; h++) {
        const int hk = h / (Hv / Hk);
        memset(S, 0, sizeof(double) * Dk * Dv);
        for (int t = 0; t < L; t++) {
            double sq = 0, sk = 0;
            for (int i = 0; i < Dk; i++) {
                sq += (double)q[(t * Hk + hk) * Dk + i] * q[(t * Hk + hk) * Dk + i];
                sk += (double)k[(t * Hk + hk) * Dk + i] * k[(t * Hk + hk) * Dk + i];
            }
            for (int i = 0; i < Dk; i++) {
                qn[i] = q[(t * Hk + hk) * Dk + i] / sqrt(sq + 1e-6) / sqrt((double)Dk);
                kn[i] = k[(t * Hk + hk) * Dk + i] / sqrt(sk + 1e-6);
            }
            const double g = -exp(a_log[h]) * softplus_d(a[t * Hv + h] + dt_bias[h]);
            const double beta = 1 / (1 + exp(-b[t * Hv + h]));
            for (int i = 0; i < Dk * Dv; i++) S[i] *= exp(g);
            for (int j = 0; j < Dv; j++) {
                double mem = 0;
                for (int i = 0; i < Dk; i++) mem += S[i * Dv + j] * kn[i];
                const double delta = (v[(t * Hv + h) * Dv + j] - mem) * beta;
                for (int i = 0; i < Dk; i++) S[i * Dv + j] += kn[i] * delta;
            }
            for (int j = 0; j < Dv; j++) {
                double o = 0;
                for (int i = 0; i < Dk; i++) o += S[i * Dv + j] * qn[i];
                out[(t * Hv + h) * Dv + j] = o;
            }
        }
    }
    free(S);
    free(qn);
    free(kn);
}

TEST(qwen35_deltanet_ops_match_recurrence_per_sequence)
{
    const iv_ops *ops = iv_cpu_ops();
    enum { Hk = 2, Hv = 4, Dk = 8, Dv = 6, K = 4, S = 3 };
    const int32_t cu[S + 1] = {0, 5, 6, 206}; /* lengths 5, 1, 200 */
    const int T = cu[S];
    unsigned seed = 7;
    float *q = malloc(sizeof(float) * T * Hk * Dk), *k = malloc(sizeof(float) * T * Hk * Dk);
    float *v = malloc(sizeof(float) * T * Hv * Dv), *a = malloc(sizeof(float) * T * Hv), *b = malloc(sizeof(float) * T * Hv);
    float a_log[Hv], dt[Hv];
    for (int i = 0; i < T * Hk * Dk; i++) q[i] = frand(&seed), k[i] = frand(&seed);
    for (int i = 0; i < T * Hv * Dv; i++) v[i] = 2 * frand(&seed);
    for (int i = 0; i < T * Hv; i++) a[i] = frand(&seed), b[i] = 2 * frand(&seed);
    for (int h = 0; h < Hv; h++) a_log[h] = 0.5f * frand(&seed), dt[h] = 0.5f * frand(&seed);
    iv_tensor alt = iv_tensor_1d(a_log, Hv), dtt = iv_tensor_1d(dt, Hv);
    float *out = malloc(sizeof(float) * T * Hv * Dv);
    iv_delta_rule_args da = {
        .out = iv_view_make(out, IV_F32, T, Hv * Dv, Hv * Dv),
        .q = iv_view_make(q, IV_F32, T, Hk * Dk, Hk * Dk), .k = iv_view_make(k, IV_F32, T, Hk * Dk, Hk * Dk),
        .v = iv_view_make(v, IV_F32, T, Hv * Dv, Hv * Dv),
        .a = iv_view_make(a, IV_F32, T, Hv, Hv), .b = iv_view_make(b, IV_F32, T, Hv, Hv),
        .a_log = &alt, .dt_bias = &dtt, .n_k_heads = Hk, .n_v_heads = Hv, .k_head_dim = Dk, .v_head_dim = Dv,
        .cu_seqlens = cu, .cu_seqlens_dev = cu, .n_seqs = S,
    };
    ops->delta_rule(ops, &da);
    double worst = 0;
    for (int s = 0; s < S; s++) {
        const int t0 = cu[s], L = cu[s + 1] - cu[s];
        double *ref = malloc(sizeof(double) * L * Hv * Dv);
        delta_rule_ref(q + t0 * Hk * Dk, k + t0 * Hk * Dk, v + t0 * Hv * Dv, a + t0 * Hv, b + t0 * Hv, a_log, dt, L,
                       Hk, Hv, Dk, Dv, ref);
        for (int i = 0; i < L * Hv * Dv; i++) {
            const double d = fabs(ref[i] - out[t0 * Hv * Dv + i]);
            if (d > worst) worst = d;
        }
        free(ref);
    }
    CHECK_MSG(worst < 1e-5, "delta_rule vs double recurrence: max abs %.2e", worst);
    printf("    delta_rule vs double recurrence (lengths 5, 1, 200): max abs %.2e\n", worst);

    /* Causal conv: each sequence reads zeros before its first row. */
    const int C = 3;
    float x[8 * C], y[8 * C], w[C * K];
    const int32_t cu2[3] = {0, 2, 8};
    for (int i = 0; i < 8 * C; i++) x[i] = frand(&seed);
    for (int i = 0; i < C * K; i++) w[i] = frand(&seed);
    iv_tensor wt = iv_tensor_2d(w, C, K);
    iv_causal_conv_args ca = {
        .y = iv_view_make(y, IV_F32, 8, C, C), .x = iv_view_make(x, IV_F32, 8, C, C), .w = &wt, .act = IV_ACT_NONE,
        .cu_seqlens = cu2, .cu_seqlens_dev = cu2, .n_seqs = 2,
    };
    ops->causal_conv1d(ops, &ca);
    double cw = 0;
    for (int s = 0; s < 2; s++)
        for (int t = cu2[s]; t < cu2[s + 1]; t++)
            for (int c = 0; c < C; c++) {
                double want = 0;
                for (int j = 0; j < K; j++) {
                    const int src = t - (K - 1) + j;
                    if (src >= cu2[s]) want += (double)w[c * K + j] * x[src * C + c];
                }
                if (fabs(want - y[t * C + c]) > cw) cw = fabs(want - y[t * C + c]);
            }
    CHECK_MSG(cw < 1e-6, "causal_conv1d: max abs %.2e", cw);
    free(q), free(k), free(v), free(a), free(b), free(out);
}

/* Tables without the DeltaNet kernels refuse the model at load, by name. */
TEST(qwen35_device_without_deltanet_ops_refuses)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/models/qwen35", iv_test_fixtures_dir());
    iv_model *m;
    iv_err err = {0};
    REQUIRE(iv_model_load(&m, dir, iv_cpu_ops(), &err) == 0);
    iv_ops fake = *iv_cpu_ops();
    fake.host_visible = 0;
    fake.name = "nodeltanet";
    fake.delta_rule = NULL;
    fake.delta_chunk = NULL;
    CHECK(iv_model_to_device(m, &fake, &err) != 0);
    CHECK_CONTAINS(err.msg, "Gated DeltaNet");
    CHECK_CONTAINS(err.msg, "nodeltanet");
    iv_model_free(m);
}
