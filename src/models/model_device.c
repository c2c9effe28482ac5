/* Moving a loaded model onto a device table: every weight an op reads is
 * replaced by the table's prepared copy (prepare_weight). Every mechanism of
 * the forward pass and the heads runs through ops, so any model the CPU
 * loads runs on every device; a mechanism added later that reads
 * activations on the host would have to be refused here, by name, for
 * tables that are not host_visible. */
#include <stdlib.h>

#include "models/audio_gemma4.h"
#include "models/linear_weights.h"
#include "models/model.h"

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
    for (int l = 0; l < m->n_layers; l++)
        if ((m->layers[l].deltanet && (!ops->causal_conv1d || (!ops->delta_rule && !ops->delta_chunk) || !ops->gate_mul)) ||
            (m->layers[l].attn_out_gate && !ops->gate_mul))
            return iv_errf(err, IV_E_UNSUPPORTED,
                           "model_type \"%s\": the %s device has no Gated DeltaNet / gated attention kernels yet "
                           "(causal_conv1d, delta_rule or delta_chunk, gate_mul); run it with --device cpu",
                           m->cfg.model_type, ops->name);
    const unsigned kinds = IV_LW_LAYER_MATMULS | IV_LW_AUX | IV_LW_HEADS | IV_LW_VECTORS;
    if (iv_model_replace_linear_weights(m, kinds, prepare, (void *)ops, err)) return -1;
    if (m->audio && iv_gemma4_audio_to_device(m->audio, ops, err)) return -1;
    m->ops = ops;
    return 0;
}
