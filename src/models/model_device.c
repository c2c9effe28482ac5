/* Moving a loaded model onto a device table: every weight an op reads is
 * replaced by the table's prepared copy (prepare_weight), and mechanisms
 * that still run on the host are refused by name for tables whose memory
 * the host cannot read. */
#include <stdlib.h>

#include "models/linear_weights.h"
#include "models/model.h"

/* The first mechanism of m that still computes on the host, or NULL. None
 * does today (mixture-of-experts routing, DeBERTa's disentangled bias and
 * ConvLayer moved behind ops); a new one that reads activations on the host
 * is named here until it has ops of its own. */
static const char *host_only_mechanism(const iv_model *m)
{
    (void)m;
    return NULL;
}

static const iv_tensor *prepare(iv_model *m, const iv_tensor *w, const char *what, void *ctx, iv_err *err)
{
    const iv_ops *ops = ctx;
    const iv_tensor *r = ops->prepare_weight(ops, w, w->ndim == 2, err);
    if (!r) iv_err_prefix(err, "%s: ", what);
    return r;
}

int iv_model_to_device(iv_model *m, const iv_ops *ops, iv_err *err)
{
    if (ops->host_visible) {
        m->ops = ops;
        return 0;
    }
    const char *mech = host_only_mechanism(m);
    if (mech)
        return iv_errf(err, IV_E_UNSUPPORTED, "%s (%s) uses %s, which runs on the cpu device only so far", m->cfg.model_type,
                       m->cfg.architecture[0] ? m->cfg.architecture : "no architecture", mech);
    const unsigned kinds = IV_LW_LAYER_MATMULS | IV_LW_AUX | IV_LW_HEADS | IV_LW_VECTORS;
    if (iv_model_replace_linear_weights(m, kinds, prepare, (void *)ops, err)) return -1;
    m->ops = ops;
    return 0;
}
