/* Rotary frequencies of the scaling types the encoder families add (models/rope.c),
 * against numbers printed by torch 2.x (float32) from transcriptions of the
 * reference code:
 *   ntk:     NTKScalingRotaryEmbedding._set_cos_sin_cache of Alibaba-NLP/new-impl
 *            modeling.py (GTE "new"), the seq_len > max_position branch;
 *   dynamic: NomicBertDynamicNTKRotaryEmbedding of nomic-ai/contrastors
 *            (modeling_hf_nomic_bert.py), base recomputed for one sequence.
 * Tolerance: 1 float32 ulp (relative 1.2e-7), for libm powf/expf vs torch's
 * vectorised kernels. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "models/rope.h"
#include "test.h"

static void check_freqs(const char *what, const float *got, const double *want, int n)
{
    for (int i = 0; i < n; i++) {
        double rel = fabs(got[i] - want[i]) / fabs(want[i]);
        CHECK_MSG(rel <= 1.2e-7, "%s[%d]: %.9e, torch %.9e", what, i, got[i], want[i]);
    }
}

/* rope_scaling {type: ntk, factor, mixed_b?} through the config reader, as family_gte passes it. */
static int ntk_from_config(const char *json, int dim, double theta, float *inv)
{
    cJSON *cfg = cJSON_Parse(json);
    iv_rope_params p;
    iv_err err = {0};
    float af;
    int rc = iv_rope_params_from_config(cfg, NULL, dim, theta, 512, &p, &err);
    if (!rc) rc = iv_rope_inv_freq(&p, inv, &af, &err);
    if (rc) iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
    else CHECK(af == 1.0f);
    cJSON_Delete(cfg);
    return rc;
}

TEST(models_rope_ntk_matches_new_impl)
{
    static const double want16[] = {9.170040488e-01, 1.630689353e-01, 2.899821475e-02, 5.156692583e-03,
                                    9.170040721e-04, 1.630689367e-04, 2.899821084e-05, 5.156692623e-06};
    float inv[32];
    REQUIRE(ntk_from_config("{\"rope_theta\": 500000, \"rope_scaling\": {\"type\": \"ntk\", \"factor\": 2.0}}", 16,
                            10000.0, inv) == 0);
    check_freqs("ntk d16 theta 5e5 f2", inv, want16, 8);

    static const double want64[] = {
        9.370837808e-01, 6.038486958e-01, 3.891148269e-01, 2.507422268e-01, 1.615761220e-01, 1.041182503e-01,
        6.709289551e-02, 4.323408008e-02, 2.785966732e-02, 1.795252785e-02, 1.156845409e-02, 7.454611361e-03,
        4.803686868e-03, 3.095454304e-03, 1.994683873e-03, 1.285356819e-03, 8.282728959e-04, 5.337318289e-04,
        3.439321881e-04, 2.216268913e-04, 1.428144460e-04, 9.202840010e-05, 5.930230327e-05, 3.821388964e-05,
        2.462469820e-05, 1.586794315e-05, 1.022516426e-05, 6.589007171e-06, 4.245899163e-06, 2.736020633e-06,
        1.763067985e-06, 1.136105766e-06};
    REQUIRE(ntk_from_config("{\"rope_theta\": 160000, \"rope_scaling\": {\"rope_type\": \"ntk\", \"factor\": 8}}", 64,
                            10000.0, inv) == 0);
    check_freqs("ntk d64 theta 1.6e5 f8", inv, want64, 32);
}

TEST(models_rope_ntk_mixed_b_matches_new_impl)
{
    static const double want[] = {7.471924424e-01, 1.937044561e-01, 5.146220699e-02, 1.386797335e-02,
                                  3.773948411e-03, 1.034625922e-03, 2.853083715e-04, 7.905694656e-05};
    float inv[8];
    REQUIRE(ntk_from_config("{\"rope_scaling\": {\"type\": \"ntk\", \"factor\": 4.0, \"mixed_b\": 0.75}}", 16,
                            10000.0, inv) == 0);
    check_freqs("ntk mixed_b", inv, want, 8);
}

TEST(models_rope_ntk_factor_one_is_plain)
{
    float ntk[8], plain[8];
    REQUIRE(ntk_from_config("{\"rope_scaling\": {\"type\": \"ntk\", \"factor\": 1.0}}", 16, 10000.0, ntk) == 0);
    REQUIRE(ntk_from_config("{}", 16, 10000.0, plain) == 0);
    CHECK(memcmp(ntk, plain, sizeof ntk) == 0);
    CHECK(plain[0] == 1.0f);
}

/* contrastors computes the grown base in Python double, transformers' "dynamic" (which rope.c
 * follows) in float32 tensors: up to 3 float ulps apart in the frequencies. */
static void check_dynamic(int dim, double theta, double factor, int max_pos, int seq_len, const double *want)
{
    char json[256];
    snprintf(json, sizeof json, "{\"rope_parameters\": {\"rope_type\": \"dynamic\", \"rope_theta\": %g, \"factor\": %g}}",
             theta, factor);
    cJSON *cfg = cJSON_Parse(json);
    iv_rope_params p;
    iv_err err = {0};
    float inv[32], af;
    if (iv_rope_params_from_config(cfg, NULL, dim, 10000.0, max_pos, &p, &err) ||
        iv_rope_inv_freq_for_length(&p, seq_len, inv, &af, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
    } else {
        for (int i = 0; i < dim / 2; i++)
            CHECK_MSG(fabs(inv[i] - want[i]) <= 3.6e-7 * fabs(want[i]), "dynamic d%d L%d [%d]: %.9e, contrastors %.9e",
                      dim, seq_len, i, inv[i], want[i]);
    }
    cJSON_Delete(cfg);
}

TEST(models_rope_dynamic_matches_contrastors)
{
    static const double want40[] = {1.000000000e+00, 3.459325731e-01, 1.196693256e-01, 4.139751568e-02,
                                    1.432074886e-02, 4.954013042e-03, 1.713754260e-03, 5.928434548e-04};
    check_dynamic(16, 1000.0, 2.0, 16, 40, want40);
    static const double want5000[] = {1.000000000e+00, 1.018391401e-01, 1.037120912e-02, 1.056195004e-03};
    check_dynamic(8, 1000.0, 3.0, 2048, 5000, want5000);
    /* At or below max_pos the base is theta itself: 1000^(-2i/8). */
    static const double plain[] = {1.0, 1.778279410e-01, 3.162277660e-02, 5.623413252e-03};
    check_dynamic(8, 1000.0, 3.0, 2048, 2048, plain);
}

TEST(models_rope_rejects_unknown_type)
{
    cJSON *cfg = cJSON_Parse("{\"rope_scaling\": {\"type\": \"frobnicate\", \"factor\": 2}}");
    iv_rope_params p;
    iv_err err = {0};
    CHECK(iv_rope_params_from_config(cfg, NULL, 16, 10000.0, 512, &p, &err) == -1);
    CHECK_CONTAINS(err.msg, "frobnicate");
    CHECK_EQ_INT(err.code, IV_E_UNSUPPORTED);
    cJSON_Delete(cfg);
}
