#include "heads/st_dense.h"

#include <stdlib.h>
#include <string.h>

#include "models/pack_weights.h"
#include "ops/cpu/gemm_panel.h"

static int load_level(iv_st_dense_stack *d, const iv_st_meta *meta, int in_dim, int token_level, iv_err *err)
{
    memset(d, 0, sizeof *d);
    int width = in_dim;
    for (int i = 0; i < meta->n_dense; i++) {
        const iv_st_dense *m = &meta->dense[i];
        if (m->token_level != token_level) {
            if (token_level) continue;
            return iv_errf(err, IV_E_UNSUPPORTED,
                           "Dense module %s projects token embeddings before pooling; not supported yet", m->dir);
        }
        if (m->in_features != width)
            return iv_errf(err, IV_E_FORMAT, "Dense module %s expects %d inputs but receives %d", m->dir,
                           m->in_features, width);
        const int k = d->n;
        if (iv_weights_open_dir(&d->weights[k], m->dir, err)) return iv_err_prefix(err, "Dense module: ");
        d->n = k + 1;
        int64_t ws[2] = {m->out_features, m->in_features}, bs[1] = {m->out_features};
        if (iv_weights_f32(d->weights[k], "linear.weight", 2, ws, &d->w[k], err))
            return iv_err_prefix(err, "Dense module %s: ", m->dir);
        if (m->bias && iv_weights_f32(d->weights[k], "linear.bias", 1, bs, &d->b[k], err))
            return iv_err_prefix(err, "Dense module %s: ", m->dir);
        d->act[k] = m->act;
        width = m->out_features;
    }
    d->out_dim = d->n ? width : 0;
    return 0;
}

int iv_st_dense_load(iv_st_dense_stack *d, const iv_st_meta *meta, int in_dim, iv_err *err)
{
    return load_level(d, meta, in_dim, 0, err);
}

int iv_st_dense_load_token_level(iv_st_dense_stack *d, const iv_st_meta *meta, int in_dim, iv_err *err)
{
    return load_level(d, meta, in_dim, 1, err);
}

int iv_st_dense_pack_cpu(iv_st_dense_stack *d, iv_err *err)
{
    for (int i = 0; i < d->n; i++) {
        const iv_tensor *w = d->w[i];
        if (w->layout != IV_LAYOUT_ROWS) continue;
        const int64_t out = w->shape[0], in = w->shape[1];
        /* A whole number of 128-byte panel rows: a valid aligned_alloc size. */
        if (!(d->packed_mem[i] = aligned_alloc(64, iv_cpu_panel_floats(out, in) * sizeof(float))))
            return iv_errf(err, IV_E_NOMEM, "out of memory packing Dense module %d", i);
        iv_pack_panels_releasing(d->packed_mem[i], w, d->weights[i]);
        d->packed[i] = iv_cpu_panel_tensor(d->packed_mem[i], out, in);
        d->w[i] = &d->packed[i];
    }
    return 0;
}

int iv_st_dense_to_device(iv_st_dense_stack *d, const iv_ops *ops, iv_err *err)
{
    for (int i = 0; i < d->n; i++) {
        if (!(d->w[i] = ops->prepare_weight(ops, d->w[i], 1, err))) return iv_err_prefix(err, "Dense module %d: ", i);
        if (d->b[i] && !(d->b[i] = ops->prepare_weight(ops, d->b[i], 0, err)))
            return iv_err_prefix(err, "Dense module %d: ", i);
    }
    return 0;
}

int iv_st_dense_own_mapped(iv_st_dense_stack *d, iv_err *err)
{
    for (int i = 0; i < d->n; i++)
        if (iv_weights_own_mapped(d->weights[i], err)) return -1;
    return 0;
}

void iv_st_dense_free(iv_st_dense_stack *d)
{
    for (int i = 0; i < d->n; i++) {
        if (d->weights[i]) iv_weights_close(d->weights[i]);
        free(d->packed_mem[i]);
    }
    memset(d, 0, sizeof *d);
}

int iv_st_dense_apply(const iv_ops *ops, const iv_st_dense_stack *d, iv_view x, iv_arena *dev, iv_view *out)
{
    iv_view cur = x;
    for (int i = 0; i < d->n; i++) {
        const int64_t oc = d->w[i]->shape[0];
        const iv_view y = iv_act_alloc(ops, dev, x.rows, oc, oc);
        if (!y.data) return -1;
        ops->linear(ops, y, cur, d->w[i], d->b[i], d->act[i], NULL);
        cur = y;
    }
    *out = cur;
    return 0;
}
