/* The MLP half of the shared block (internal to block.c): a dense MLP, plain
 * or gated, or a mixture of experts. Scratch is sized once per forward for
 * the widest layer, so no layer allocates. */
#ifndef IV_MODELS_BLOCK_MLP_H
#define IV_MODELS_BLOCK_MLP_H

#include "models/block.h"

typedef struct iv_mlp_scratch {
    iv_view up;    /* [T, I or 2I] dense up projection */
    iv_view gated; /* [T, I] GLU output */
    /* Mixture of experts (data NULL when no layer routes); see iv_moe_route_args. */
    iv_view logits;        /* [T, E] router logits */
    int32_t *choice;       /* dev [T * k] chosen experts per token */
    float *weight;         /* dev [T * k] their weights */
    int32_t *offsets;      /* dev [E + 1] each expert's run of slots */
    int32_t *offsets_host; /* host copy of offsets: the per-expert linears' row counts */
    int32_t *slots;        /* dev [T * k] (token, choice) slots grouped by expert */
    iv_view xe, upe, ge;   /* [T, H], [T, 2I_moe], [T, I_moe]: rows of one expert */
} iv_mlp_scratch;

int iv_mlp_scratch_alloc(iv_mlp_scratch *sc, const iv_ops *ops, const iv_block_spec *s, const iv_layer *layers,
                         int n_layers, int64_t n_tokens, const iv_fwd_mem *mem);

/* out = MLP(in) (+ residual when non-NULL, same layout as out). out must not
 * alias in. */
void iv_block_mlp(const iv_ops *ops, const iv_block_spec *s, const iv_layer *L, iv_view in, iv_view out,
                  const void *residual, iv_mlp_scratch *sc);

/* out = the routed experts of m over in, routed on router_in's rows (the
 * same tokens; often in itself), + residual when non-NULL. */
void iv_block_moe(const iv_ops *ops, const iv_block_spec *s, const iv_moe *m, iv_view router_in, iv_view in,
                  iv_view out, const void *residual, iv_mlp_scratch *sc);

#endif
