/* The chunked delta rule (delta_chunk) against the token-by-token recurrence
 * (delta_rule, the reference) on the CPU, FP32: outputs, and the recurrent
 * state itself, read back by probe tokens. A probe token has q = e_i (so
 * out = S^T e_i / sqrt(Dk), row i of the state), beta ~ 0 (b = -100: it
 * writes nothing measurable) and decay 1 (a = -100: softplus ~ 0), so the
 * last Dk tokens of a probed sequence read out its whole final state.
 * Sequences shorter than a chunk, exactly one, one more, several and not a
 * multiple; chunk sizes 1, 16, 64 (transformers') and 100; strong and weak
 * decay (weak decay keeps old chunks alive, so the inter-chunk path counts).
 * And each sequence's outputs are the same bits alone or in any batch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"
#include "ops_test_util.h"
#include "test.h"

enum { HK = 2, HV = 4, DK = 16, DV = 12 };

typedef struct dn_inputs {
    int n_seqs, T;
    int32_t cu[16];
    float *q, *k, *v, *a, *b;
    float a_log[HV], dt[HV];
    iv_tensor alt, dtt;
} dn_inputs;

/* Sequences of lens[]; each followed by DK probe tokens when probes. a in
 * [a_lo, a_hi) sets the decay: about -softplus(a) per token. */
static void dn_make(dn_inputs *in, const int *lens, int n, int probes, float a_lo, float a_hi, uint64_t seed)
{
    ops_rng r = {seed};
    in->n_seqs = n;
    in->cu[0] = 0;
    for (int s = 0; s < n; s++) in->cu[s + 1] = in->cu[s] + lens[s] + (probes ? DK : 0);
    const int T = in->T = in->cu[n];
    in->q = ops_rand(&r, (int64_t)T * HK * DK, -1, 1);
    in->k = ops_rand(&r, (int64_t)T * HK * DK, -1, 1);
    in->v = ops_rand(&r, (int64_t)T * HV * DV, -2, 2);
    in->a = ops_rand(&r, (int64_t)T * HV, a_lo, a_hi);
    in->b = ops_rand(&r, (int64_t)T * HV, -2, 2);
    for (int h = 0; h < HV; h++) in->a_log[h] = ops_rng_uniform(&r, -0.5f, 0.5f), in->dt[h] = ops_rng_uniform(&r, -0.5f, 0.5f);
    in->alt = iv_tensor_1d(in->a_log, HV);
    in->dtt = iv_tensor_1d(in->dt, HV);
    if (!probes) return;
    for (int s = 0; s < n; s++)
        for (int i = 0; i < DK; i++) {
            const int t = in->cu[s + 1] - DK + i;
            for (int hk = 0; hk < HK; hk++)
                for (int j = 0; j < DK; j++) in->q[((int64_t)t * HK + hk) * DK + j] = j == i ? 1.0f : 0.0f;
            for (int h = 0; h < HV; h++) in->a[(int64_t)t * HV + h] = in->b[(int64_t)t * HV + h] = -100.0f;
        }
}

static void dn_free(dn_inputs *in)
{
    free(in->q), free(in->k), free(in->v), free(in->a), free(in->b);
}

/* out [T, HV * DV] = the rule over rows [r0, r0 + sum lens) given as n sequences from cu. */
static void dn_run(const dn_inputs *in, int chunked, int chunk, float *out)
{
    const iv_ops *ops = iv_cpu_ops();
    const int T = in->T;
    const iv_delta_rule_args da = {
        .out = iv_view_make(out, IV_F32, T, HV * DV, HV * DV),
        .q = iv_view_make(in->q, IV_F32, T, HK * DK, HK * DK), .k = iv_view_make(in->k, IV_F32, T, HK * DK, HK * DK),
        .v = iv_view_make(in->v, IV_F32, T, HV * DV, HV * DV),
        .a = iv_view_make(in->a, IV_F32, T, HV, HV), .b = iv_view_make(in->b, IV_F32, T, HV, HV),
        .a_log = &in->alt, .dt_bias = &in->dtt, .n_k_heads = HK, .n_v_heads = HV, .k_head_dim = DK, .v_head_dim = DV,
        .cu_seqlens = in->cu, .cu_seqlens_dev = in->cu, .n_seqs = in->n_seqs, .chunk = chunk,
    };
    if (chunked)
        ops->delta_chunk(ops, &da);
    else
        ops->delta_rule(ops, &da);
}

TEST(ops_delta_chunk_matches_recurrence)
{
    static const int lens[] = {1, 5, 63, 64, 65, 130, 300};
    const int n = (int)(sizeof lens / sizeof lens[0]);
    static const int chunks[] = {1, 16, 64, 100};
    static const float a_range[2][2] = {{-1.0f, 1.0f}, {-6.0f, -2.0f}}; /* strong, weak decay */
    for (int dr = 0; dr < 2; dr++) {
        dn_inputs in;
        dn_make(&in, lens, n, 1, a_range[dr][0], a_range[dr][1], 100 + (uint64_t)dr);
        const size_t bytes = (size_t)in.T * HV * DV * sizeof(float);
        float *ref = malloc(bytes), *got = malloc(bytes);
        dn_run(&in, 0, 0, ref);
        for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
            dn_run(&in, 1, chunks[c], got);
            double out_abs = 0, state_abs = 0, out_max = 0;
            for (int s = 0; s < n; s++)
                for (int t = in.cu[s]; t < in.cu[s + 1]; t++) {
                    const int probe = t >= in.cu[s + 1] - DK;
                    for (int j = 0; j < HV * DV; j++) {
                        const int64_t i = (int64_t)t * HV * DV + j;
                        /* a probe's output is a state row over sqrt(Dk) */
                        const double d = fabs((double)got[i] - ref[i]) * (probe ? sqrt(DK) : 1.0);
                        if (probe) {
                            if (d > state_abs) state_abs = d;
                        } else {
                            if (d > out_abs) out_abs = d;
                            if (fabs(ref[i]) > out_max) out_max = fabs(ref[i]);
                        }
                    }
                }
            printf("    delta_chunk vs delta_rule (%s decay, chunk %3d, lengths 1..300): output max abs %.2e "
                   "(of |out| <= %.2f), state max abs %.2e\n",
                   dr ? "weak" : "strong", chunks[c], out_abs, out_max, state_abs);
            CHECK_MSG(out_abs < 5e-6, "chunk %d: outputs differ from the recurrence by %.2e", chunks[c], out_abs);
            CHECK_MSG(state_abs < 5e-6, "chunk %d: states differ from the recurrence by %.2e", chunks[c], state_abs);
        }
        free(ref);
        free(got);
        dn_free(&in);
    }
}

/* One sequence alone and as the middle of a batch: the same bits. */
TEST(ops_delta_chunk_same_bits_in_any_batch)
{
    static const int batch[] = {70, 129, 3}, lens_alone[] = {129};
    dn_inputs all, one;
    dn_make(&all, batch, 3, 0, -4.0f, 0.0f, 7);
    dn_make(&one, lens_alone, 1, 0, -4.0f, 0.0f, 8);
    /* the lone sequence's inputs are the batch's middle rows */
    const int r0 = all.cu[1];
    memcpy(one.q, all.q + (int64_t)r0 * HK * DK, sizeof(float) * 129 * HK * DK);
    memcpy(one.k, all.k + (int64_t)r0 * HK * DK, sizeof(float) * 129 * HK * DK);
    memcpy(one.v, all.v + (int64_t)r0 * HV * DV, sizeof(float) * 129 * HV * DV);
    memcpy(one.a, all.a + (int64_t)r0 * HV, sizeof(float) * 129 * HV);
    memcpy(one.b, all.b + (int64_t)r0 * HV, sizeof(float) * 129 * HV);
    memcpy(one.a_log, all.a_log, sizeof one.a_log);
    memcpy(one.dt, all.dt, sizeof one.dt);
    float *ga = malloc(sizeof(float) * all.T * HV * DV), *go = malloc(sizeof(float) * one.T * HV * DV);
    dn_run(&all, 1, 64, ga);
    dn_run(&one, 1, 64, go);
    CHECK(memcmp(ga + (int64_t)r0 * HV * DV, go, sizeof(float) * 129 * HV * DV) == 0);
    free(ga);
    free(go);
    dn_free(&all);
    dn_free(&one);
}
