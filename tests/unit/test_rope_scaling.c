/* Rotary scaling variants (src/models/rope.c) against the inverse
 * frequencies and attention factors transformers computed for the same
 * configs (tests/unit/rope_reference.h, from tools/gen_rope_reference.py).
 * Tolerance: 2 float ulps (torch's vectorised pow is not glibc's powf). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "models/rope.h"
#include "rope_reference.h"
#include "test.h"

#define ROPE_REL_TOL 2.4e-7 /* 2 ulps of float */

static cJSON *config_with(const char *rope_json, int max_pos)
{
    char buf[2048];
    snprintf(buf, sizeof buf, "{\"max_position_embeddings\": %d, \"rope_parameters\": %s}", max_pos, rope_json);
    return cJSON_Parse(buf);
}

TEST(rope_scaling_matches_transformers)
{
    const int n = (int)(sizeof k_rope_ref / sizeof k_rope_ref[0]);
    for (int c = 0; c < n; c++) {
        const rope_ref_case *rc = &k_rope_ref[c];
        cJSON *cfg = config_with(rc->rope_parameters, rc->max_position_embeddings);
        REQUIRE(cfg != NULL);
        iv_rope_params p;
        iv_err err = {0};
        int rc_parse = iv_rope_params_from_config(cfg, NULL, rc->head_dim, 10000.0, rc->max_position_embeddings, &p,
                                                  &err);
        CHECK_MSG(rc_parse == 0, "%s: %s", rc->name, err.msg);
        float inv[IV_ROPE_MAX_HALF], af = 0;
        CHECK(iv_rope_inv_freq_for_length(&p, rc->seq_len, inv, &af, &err) == 0);
        CHECK_MSG(fabsf(af - rc->attn_factor) <= ROPE_REL_TOL * rc->attn_factor, "%s: attention factor %.9g vs %.9g",
                  rc->name, af, rc->attn_factor);
        double worst = 0;
        int worst_i = 0;
        for (int i = 0; i < rc->head_dim / 2; i++) {
            double rel = fabs((double)inv[i] - rc->inv_freq[i]) / rc->inv_freq[i];
            if (rel > worst) {
                worst = rel;
                worst_i = i;
            }
        }
        CHECK_MSG(worst <= ROPE_REL_TOL, "%s: inv_freq[%d] = %.9g, transformers %.9g (rel %.2e)", rc->name, worst_i,
                  inv[worst_i], rc->inv_freq[worst_i], worst);
        /* The init table is the one for a sequence that needs no length-specific frequencies. */
        if (!iv_rope_length_dependent(&p, rc->seq_len)) {
            float init[IV_ROPE_MAX_HALF], af0;
            CHECK(iv_rope_inv_freq(&p, init, &af0, &err) == 0);
            CHECK_MSG(!memcmp(init, inv, sizeof(float) * (size_t)(rc->head_dim / 2)), "%s: init table differs",
                      rc->name);
        }
        cJSON_Delete(cfg);
    }
}

TEST(rope_scaling_length_dependence)
{
    iv_rope_params p;
    iv_err err = {0};
    cJSON *cfg = config_with("{\"rope_type\": \"dynamic\", \"factor\": 2.0}", 64);
    REQUIRE(iv_rope_params_from_config(cfg, NULL, 16, 10000.0, 64, &p, &err) == 0);
    CHECK(!iv_rope_length_dependent(&p, 64));
    CHECK(iv_rope_length_dependent(&p, 65));
    cJSON_Delete(cfg);
    cfg = config_with("{\"rope_type\": \"yarn\", \"factor\": 4.0, \"original_max_position_embeddings\": 32}", 128);
    REQUIRE(iv_rope_params_from_config(cfg, NULL, 16, 10000.0, 128, &p, &err) == 0);
    CHECK(!iv_rope_length_dependent(&p, 1000));
    cJSON_Delete(cfg);
}

/* v4 layout (rope_theta + rope_scaling {type}) and Phi-3's top-level
 * original_max_position_embeddings, which wins over the one in the dict. */
TEST(rope_scaling_config_layouts)
{
    iv_rope_params p;
    iv_err err = {0};
    cJSON *cfg = cJSON_Parse("{\"rope_theta\": 500.0, \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}}");
    REQUIRE(iv_rope_params_from_config(cfg, NULL, 8, 10000.0, 128, &p, &err) == 0);
    CHECK_STR(p.type, "linear");
    CHECK(p.theta == 500.0 && p.factor == 2.0);
    cJSON_Delete(cfg);
    cfg = cJSON_Parse("{\"original_max_position_embeddings\": 4096, \"rope_parameters\": {\"rope_type\": \"yarn\", "
                      "\"factor\": 4.0, \"original_max_position_embeddings\": 1024}}");
    REQUIRE(iv_rope_params_from_config(cfg, NULL, 8, 10000.0, 16384, &p, &err) == 0);
    CHECK_EQ_INT(p.original_max_position_embeddings, 4096);
    cJSON_Delete(cfg);
}

TEST(rope_scaling_rejects_unknown_and_malformed)
{
    static const struct {
        const char *rope, *needle;
        int code;
    } bad[] = {
        {"{\"rope_type\": \"axial\"}", "rope type \"axial\" is not supported", IV_E_UNSUPPORTED},
        {"{\"type\": \"su\", \"factor\": 2.0}", "rope type \"su\"", IV_E_UNSUPPORTED},
        {"{\"type\": \"ntk\"}", "needs a positive \"factor\"", IV_E_FORMAT},
        {"{\"rope_type\": \"longrope\", \"short_factor\": [1, 1], \"long_factor\": [1, 1, 1, 1]}", "short_factor",
         IV_E_FORMAT},
        {"{\"rope_type\": \"linear\"}", "needs a positive \"factor\"", IV_E_FORMAT},
        {"{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 2.0, \"high_freq_factor\": 2.0}",
         "high_freq_factor", IV_E_FORMAT},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cJSON *cfg = config_with(bad[i].rope, 128);
        iv_rope_params p;
        iv_err err = {0};
        CHECK(iv_rope_params_from_config(cfg, NULL, 8, 10000.0, 128, &p, &err) == -1);
        CHECK_CONTAINS(err.msg, bad[i].needle);
        CHECK_EQ_INT(err.code, bad[i].code);
        cJSON_Delete(cfg);
    }
}

/* Gemma4's proportional RoPE: the whole head's table, the first
 * int(partial * d // 2) frequencies with exponents over the whole head,
 * zeros after (those dims stay unrotated), all / factor. Expected values
 * printed by transformers 5.25 (_compute_proportional_rope_parameters). */
TEST(rope_proportional_matches_transformers)
{
    static const struct {
        const char *rope;
        int head_dim;
        float want[10];
    } cases[] = {
        {"{\"rope_type\": \"proportional\", \"partial_rotary_factor\": 0.25, \"rope_theta\": 1000000.0}", 16,
         {1.0f, 0.177827939f}},
        {"{\"rope_type\": \"proportional\", \"partial_rotary_factor\": 0.5, \"rope_theta\": 1000000.0, \"factor\": 2.0}",
         16, {0.5f, 0.0889139697f, 0.0158113893f, 0.00281170662f}},
        {"{\"rope_type\": \"proportional\", \"partial_rotary_factor\": 0.3, \"rope_theta\": 10000.0}", 20,
         {1.0f, 0.398107171f, 0.158489317f}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        cJSON *cfg = config_with(cases[c].rope, 128);
        REQUIRE(cfg != NULL);
        iv_rope_params p;
        iv_err err = {0};
        CHECK_MSG(iv_rope_params_from_config(cfg, NULL, cases[c].head_dim, 10000.0, 128, &p, &err) == 0, "%s",
                  err.msg);
        float inv[IV_ROPE_MAX_HALF], af = 0;
        CHECK(iv_rope_inv_freq(&p, inv, &af, &err) == 0);
        CHECK(af == 1.0f);
        for (int i = 0; i < cases[c].head_dim / 2; i++) {
            const float w = cases[c].want[i];
            CHECK_MSG(w == 0 ? inv[i] == 0 : fabsf(inv[i] - w) <= ROPE_REL_TOL * w, "case %zu inv_freq[%d] = %.9g, "
                      "transformers %.9g", c, i, inv[i], w);
        }
        cJSON_Delete(cfg);
    }
}
