#include "models/moe_stacked.h"

#include "models/loader.h"

int iv_moe_load_stacked(iv_model *m, const iv_moe_stacked_names *names, const iv_moe *tmpl, iv_moe **out,
                        iv_err *err)
{
    const int64_t H = m->cfg.hidden_size, I = tmpl->intermediate, E = tmpl->n_experts;
    iv_moe *moe = iv_model_alloc(m, sizeof *moe);
    const iv_tensor **up = iv_model_alloc(m, (size_t)E * sizeof *up);
    const iv_tensor **down = iv_model_alloc(m, (size_t)E * sizeof *down);
    iv_tensor *up_views = iv_model_alloc(m, (size_t)E * sizeof *up_views);
    iv_tensor *down_views = iv_model_alloc(m, (size_t)E * sizeof *down_views);
    if (!moe || !up || !down || !up_views || !down_views) return iv_errf(err, IV_E_NOMEM, "out of memory");
    *moe = *tmpl;
    moe->plain_experts = 1;
    moe->up_w = up;
    moe->down_w = down;
    const iv_tensor *w1, *w2;
    if (iv_ld(m, names->router, E, H, &moe->router_w, err) || iv_ld(m, names->w1, E * I, H, &w1, err) ||
        iv_ld(m, names->w2, E * I, H, &w2, err))
        return -1;
    if (names->bias && iv_ld(m, names->bias, H, -1, &moe->out_bias, err)) return -1;
    /* All experts' down projections, each transposed to the [H, I] a linear layer takes. */
    iv_tensor *down_all = iv_model_new_tensor(m, E * H, I);
    if (!down_all) return iv_errf(err, IV_E_NOMEM, "out of memory transposing \"%s\"", names->w2);
    const float *src = iv_f32(w2);
    float *dst = iv_f32(down_all);
    for (int64_t e = 0; e < E; e++) {
        const float *s = src + e * I * H;
        float *d = dst + e * H * I;
        for (int64_t i = 0; i < I; i++)
            for (int64_t h = 0; h < H; h++) d[h * I + i] = s[i * H + h];
        up_views[e] = iv_tensor_2d(iv_f32(w1) + e * I * H, I, H);
        down_views[e] = iv_tensor_2d(d, H, I);
        up[e] = &up_views[e];
        down[e] = &down_views[e];
    }
    *out = moe;
    return 0;
}
