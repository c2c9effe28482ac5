/* Rotary frequencies, following transformers' modeling_rope_utils step by
 * step in float32 (torch computes these tables in float32; the scalars that
 * Python keeps in double are noted where they enter). The unit test
 * tests/unit/test_rope_scaling.c compares every variant with numbers
 * transformers printed. */
#include "models/rope.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "base/json.h"

static const char *const k_types[] = {"default", "linear", "dynamic", "llama3", "yarn", "longrope", "ntk", "proportional", NULL};

static int known_type(const char *t)
{
    for (const char *const *k = k_types; *k; k++)
        if (!strcmp(*k, t)) return 1;
    return 0;
}

static int is_type(const iv_rope_params *p, const char *t) { return !strcmp(p->type, t); }

/* longrope's per-frequency factors: a list of exactly rot_dim / 2 numbers. */
static int read_factor_list(const cJSON *src, const char *key, int half, float *out, iv_err *err)
{
    const cJSON *a = iv_json_get(src, key);
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != half)
        return iv_errf(err, IV_E_FORMAT, "rope longrope: \"%s\" must be a list of %d numbers (rotary dims / 2)", key,
                       half);
    for (int i = 0; i < half; i++) {
        const cJSON *v = cJSON_GetArrayItem(a, i);
        if (!cJSON_IsNumber(v)) return iv_errf(err, IV_E_FORMAT, "rope longrope: \"%s\" holds a non-number", key);
        out[i] = (float)v->valuedouble;
    }
    return 0;
}

int iv_rope_params_from_config(const cJSON *cfg, const cJSON *rope_obj, int rot_dim, double default_theta,
                               int max_position_embeddings, iv_rope_params *out, iv_err *err)
{
    memset(out, 0, sizeof *out);
    snprintf(out->type, sizeof out->type, "default");
    out->rot_dim = rot_dim;
    out->factor = 1.0;
    out->max_position_embeddings = max_position_embeddings;
    out->original_max_position_embeddings = max_position_embeddings;
    out->truncate = 1;
    out->partial_rotary_factor = 1.0;
    if (rot_dim <= 0 || rot_dim % 2 || rot_dim / 2 > IV_ROPE_MAX_HALF)
        return iv_errf(err, IV_E_FORMAT, "bad rotary configuration (rotary dims %d)", rot_dim);
    /* v5: rope_parameters {rope_type, rope_theta, factor, ...}; v4: rope_theta + rope_scaling {type|rope_type, ...}. */
    const cJSON *params = rope_obj;
    if (!params) params = iv_json_get(cfg, "rope_parameters");
    if (params && !cJSON_IsObject(params)) params = NULL;
    const cJSON *scaling = iv_json_get(cfg, "rope_scaling");
    if (scaling && !cJSON_IsObject(scaling)) scaling = NULL;
    const cJSON *src = params ? params : scaling;
    out->theta = iv_json_num(params, "rope_theta", iv_json_num(cfg, "rope_theta", default_theta));
    if (src) {
        const char *t = iv_json_str(src, "rope_type", iv_json_str(src, "type", "default"));
        if (!known_type(t))
            return iv_errf(err, IV_E_UNSUPPORTED,
                           "rope type \"%s\" is not supported (supported: default, linear, dynamic, llama3, yarn, "
                           "longrope, ntk, proportional)",
                           t);
        snprintf(out->type, sizeof out->type, "%s", t);
        out->has_factor = cJSON_IsNumber(iv_json_get(src, "factor"));
        out->factor = iv_json_num(src, "factor", 1.0);
        out->low_freq_factor = iv_json_num(src, "low_freq_factor", 1.0);
        out->high_freq_factor = iv_json_num(src, "high_freq_factor", 4.0);
        out->original_max_position_embeddings =
            (int)iv_json_int(src, "original_max_position_embeddings", max_position_embeddings);
        out->beta_fast = iv_json_num(src, "beta_fast", 32.0);
        out->beta_slow = iv_json_num(src, "beta_slow", 1.0);
        out->mscale = iv_json_num(src, "mscale", 0.0);
        out->mscale_all_dim = iv_json_num(src, "mscale_all_dim", 0.0);
        out->attention_factor = iv_json_num(src, "attention_factor", 0.0);
        out->truncate = iv_json_bool(src, "truncate", 1);
        if (is_type(out, "proportional")) out->partial_rotary_factor = iv_json_num(src, "partial_rotary_factor", 1.0);
        const cJSON *mixed_b = iv_json_get(src, "mixed_b");
        if (cJSON_IsNumber(mixed_b)) {
            out->has_mixed_b = 1;
            out->mixed_b = mixed_b->valuedouble;
        }
        if (is_type(out, "longrope") &&
            (read_factor_list(src, "short_factor", rot_dim / 2, out->short_factor, err) ||
             read_factor_list(src, "long_factor", rot_dim / 2, out->long_factor, err)))
            return -1;
    }
    /* transformers' standardize_rope_params: a top-level original_max_position_embeddings
     * (Phi-3 style) wins over the one inside a global rope dict for these types. */
    if (!rope_obj && (is_type(out, "llama3") || is_type(out, "yarn") || is_type(out, "longrope"))) {
        const cJSON *top = iv_json_get(cfg, "original_max_position_embeddings");
        if (iv_json_is_integer(top) && fabs(top->valuedouble) <= INT32_MAX)
            out->original_max_position_embeddings = (int)top->valuedouble; /* <= 0 is refused below */
    }
    if (out->theta <= 0) return iv_errf(err, IV_E_FORMAT, "bad rotary configuration (theta %g)", out->theta);
    if (out->original_max_position_embeddings <= 0 || out->max_position_embeddings <= 0)
        return iv_errf(err, IV_E_FORMAT, "rope type \"%s\" needs positive max_position_embeddings", out->type);
    if (is_type(out, "proportional") && !(out->partial_rotary_factor >= 0 && out->partial_rotary_factor <= 1))
        return iv_errf(err, IV_E_FORMAT, "rope proportional: partial_rotary_factor %g is out of [0, 1]",
                       out->partial_rotary_factor);
    if ((is_type(out, "linear") || is_type(out, "dynamic") || is_type(out, "llama3") || is_type(out, "ntk")) &&
        (!out->has_factor || out->factor <= 0))
        return iv_errf(err, IV_E_FORMAT, "rope type \"%s\" needs a positive \"factor\"", out->type);
    if (is_type(out, "llama3") && out->high_freq_factor == out->low_freq_factor)
        return iv_errf(err, IV_E_FORMAT, "rope llama3: high_freq_factor must differ from low_freq_factor");
    if (is_type(out, "dynamic") && rot_dim <= 2)
        return iv_errf(err, IV_E_FORMAT, "rope dynamic needs more than 2 rotary dims");
    return 0;
}

/* 1 / base^(2i/d): float32 exponent (arange(0, d, 2).float() / d), float32 power. */
static void base_inv_freq(float base, int d, float *inv)
{
    for (int i = 0; i < d / 2; i++) {
        float e = (float)(2 * i) / (float)d;
        inv[i] = 1.0f / powf(base, e);
    }
}

/* Llama 3.1: low frequencies divided by factor, high ones kept, a smooth
 * blend in between (by wavelength against the original context). */
static void llama3_inv_freq(const iv_rope_params *p, float *inv)
{
    const int half = p->rot_dim / 2;
    base_inv_freq((float)p->theta, p->rot_dim, inv);
    const float factor = (float)p->factor, low = (float)p->low_freq_factor;
    const float old_len = (float)p->original_max_position_embeddings;
    /* Python computes the wavelength bounds in double; torch compares them with float32 tensors. */
    const float low_wl = (float)(p->original_max_position_embeddings / p->low_freq_factor);
    const float high_wl = (float)(p->original_max_position_embeddings / p->high_freq_factor);
    const float span = (float)(p->high_freq_factor - p->low_freq_factor);
    const float two_pi = (float)(2.0 * M_PI);
    for (int i = 0; i < half; i++) {
        float wl = two_pi / inv[i];
        float v = wl > low_wl ? inv[i] / factor : inv[i];
        if (!(wl < high_wl) && !(wl > low_wl)) {
            float smooth = (old_len / wl - low) / span;
            v = (1.0f - smooth) * v / factor + smooth * v;
        }
        inv[i] = v;
    }
}

static double yarn_mscale(double scale, double m)
{
    return scale <= 1 ? 1.0 : 0.1 * m * log(scale) + 1.0;
}

static double yarn_correction_dim(double rotations, int d, double base, int max_pos)
{
    return (d * log(max_pos / (rotations * 2 * M_PI))) / (2 * log(base));
}

/* YaRN: interpolate low frequencies by factor, keep high ones, linear ramp
 * between the dims that make beta_slow and beta_fast rotations over the
 * original context; cos/sin scaled by the attention factor. */
static void yarn_inv_freq(const iv_rope_params *p, float *inv, float *attn_factor)
{
    const int d = p->rot_dim, half = d / 2;
    const int orig = p->original_max_position_embeddings;
    const double factor = p->has_factor ? p->factor : (double)p->max_position_embeddings / orig;
    double af = p->attention_factor;
    if (af == 0) {
        if (p->mscale != 0 && p->mscale_all_dim != 0)
            af = yarn_mscale(factor, p->mscale) / yarn_mscale(factor, p->mscale_all_dim);
        else
            af = yarn_mscale(factor, 1.0);
    }
    *attn_factor = (float)af;
    const double beta_fast = p->beta_fast != 0 ? p->beta_fast : 32, beta_slow = p->beta_slow != 0 ? p->beta_slow : 1;
    double low = yarn_correction_dim(beta_fast, d, p->theta, orig);
    double high = yarn_correction_dim(beta_slow, d, p->theta, orig);
    if (p->truncate) {
        low = floor(low);
        high = ceil(high);
    }
    if (low < 0) low = 0;
    if (high > d - 1) high = d - 1;
    if (low == high) high += 0.001; /* transformers' guard against a zero-width ramp */
    const float ramp_lo = (float)low, ramp_span = (float)(high - low), f = (float)factor;
    for (int i = 0; i < half; i++) {
        float pos_freq = powf((float)p->theta, (float)(2 * i) / (float)d);
        float extrapolation = 1.0f / pos_freq, interpolation = 1.0f / (f * pos_freq);
        float ramp = ((float)i - ramp_lo) / ramp_span;
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        float extra_w = 1.0f - ramp;
        inv[i] = interpolation * (1.0f - extra_w) + extrapolation * extra_w;
    }
}

static void longrope_inv_freq(const iv_rope_params *p, int seq_len, float *inv, float *attn_factor)
{
    const int d = p->rot_dim, orig = p->original_max_position_embeddings;
    const double factor = p->has_factor ? p->factor : (double)p->max_position_embeddings / orig;
    double af = p->attention_factor;
    if (af == 0) af = factor <= 1.0 ? 1.0 : sqrt(1 + log(factor) / log((double)orig));
    *attn_factor = (float)af;
    const float *ext = seq_len > orig ? p->long_factor : p->short_factor;
    for (int i = 0; i < d / 2; i++) {
        float shape = (float)(2 * i) / (float)d;
        inv[i] = 1.0f / (ext[i] * powf((float)p->theta, shape));
    }
}

/* Dynamic NTK: past max_position_embeddings the base grows with the length;
 * transformers computes the new base from a 0-d tensor, i.e. in float32. */
static void dynamic_inv_freq(const iv_rope_params *p, int seq_len, float *inv)
{
    const int d = p->rot_dim, max_pos = p->max_position_embeddings;
    if (seq_len <= max_pos) {
        base_inv_freq((float)p->theta, d, inv);
        return;
    }
    float grow = (float)p->factor * (float)seq_len / (float)max_pos - (float)(p->factor - 1.0);
    float base = (float)p->theta * powf(grow, (float)((double)d / (d - 2)));
    base_inv_freq(base, d, inv);
}

/* GTE "new" fixed NTK (see rope.h), transcribed from NTKScalingRotaryEmbedding:
 * base * factor ** 1 (or 1 with mixed_b) in Python double, the power and the
 * divisions on float32 tensors; factor ** (2 / dim) and (dim / 2) ** mixed_b
 * are Python doubles, rounded to float by the tensor ops. */
static void ntk_inv_freq(const iv_rope_params *p, float *inv)
{
    const int d = p->rot_dim;
    if (p->factor <= 1.0) { /* the cache never outgrows max_position_embeddings */
        base_inv_freq((float)p->theta, d, inv);
        return;
    }
    if (!p->has_mixed_b) {
        base_inv_freq((float)(p->theta * p->factor), d, inv);
        const float s = (float)pow(p->factor, 2.0 / d);
        for (int i = 0; i < d / 2; i++) inv[i] /= s;
        return;
    }
    base_inv_freq((float)p->theta, d, inv);
    const float a = logf((float)p->factor) / (float)pow(d / 2.0, p->mixed_b);
    for (int i = 0; i < d / 2; i++) inv[i] /= expf(a * powf((float)(i + 1), (float)p->mixed_b));
}

/* Gemma4's proportional RoPE (_compute_proportional_rope_parameters): the
 * whole head's table, with frequencies only for its first
 * int(partial * d // 2) pairs (exponents over the whole head) and zeros,
 * which leave the other dims unrotated, for the rest; all / factor. */
static void proportional_inv_freq(const iv_rope_params *p, float *inv)
{
    const int d = p->rot_dim, angles = (int)floor(p->partial_rotary_factor * d / 2);
    for (int i = 0; i < d / 2; i++) {
        inv[i] = i < angles ? 1.0f / powf((float)p->theta, (float)(2 * i) / (float)d) : 0.0f;
        inv[i] /= (float)p->factor;
    }
}

int iv_rope_length_dependent(const iv_rope_params *p, int seq_len)
{
    if (is_type(p, "dynamic")) return seq_len > p->max_position_embeddings;
    if (is_type(p, "longrope")) return seq_len > p->original_max_position_embeddings;
    return 0;
}

int iv_rope_inv_freq_for_length(const iv_rope_params *p, int seq_len, float *inv, float *attn_factor, iv_err *err)
{
    *attn_factor = 1.0f;
    const int d = p->rot_dim;
    if (is_type(p, "default")) {
        base_inv_freq((float)p->theta, d, inv);
    } else if (is_type(p, "linear")) {
        base_inv_freq((float)p->theta, d, inv);
        for (int i = 0; i < d / 2; i++) inv[i] /= (float)p->factor;
    } else if (is_type(p, "dynamic")) {
        dynamic_inv_freq(p, seq_len, inv);
    } else if (is_type(p, "llama3")) {
        llama3_inv_freq(p, inv);
    } else if (is_type(p, "yarn")) {
        yarn_inv_freq(p, inv, attn_factor);
    } else if (is_type(p, "longrope")) {
        longrope_inv_freq(p, seq_len, inv, attn_factor);
    } else if (is_type(p, "ntk")) {
        ntk_inv_freq(p, inv);
    } else if (is_type(p, "proportional")) {
        proportional_inv_freq(p, inv);
    } else {
        return iv_errf(err, IV_E_UNSUPPORTED, "rope type \"%s\" is not supported", p->type);
    }
    return 0;
}

int iv_rope_inv_freq(const iv_rope_params *p, float *inv, float *attn_factor, iv_err *err)
{
    /* At init transformers builds dynamic tables for max_position_embeddings
     * (the plain ones) and longrope tables with the short factors. */
    return iv_rope_inv_freq_for_length(p, 0, inv, attn_factor, err);
}
