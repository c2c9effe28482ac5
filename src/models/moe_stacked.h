/* Mixture-of-experts weights stored stacked, as megablocks saves them
 * (Nomic BERT v2-MoE): a router [E, H] and two [E * I, H] blocks w1, w2 in
 * which expert e owns rows [e * I, (e + 1) * I). Expert e computes
 * act(x W1_e^T) W2_e: w1 rows are its up projection as is, w2 rows are its
 * down projection transposed (viewing w2 as [E, H, I] also type-checks and
 * silently gives noise). */
#ifndef IV_MODELS_MOE_STACKED_H
#define IV_MODELS_MOE_STACKED_H

#include "models/model.h"

/* Tensor names of one routed layer, relative to the backbone prefix. */
typedef struct iv_moe_stacked_names {
    const char *router; /* [E, H] */
    const char *w1;     /* [E * I, H] */
    const char *w2;     /* [E * I, H] */
    const char *bias;   /* [H] added to every token's output, or NULL when the layout has none */
} iv_moe_stacked_names;

/* Loads plain (ungated) experts with tmpl's n_experts, top_k, intermediate
 * and norm_topk_prob into a model-owned iv_moe: up projections are views of
 * w1, down projections a transposed model-owned copy of w2. */
int iv_moe_load_stacked(iv_model *m, const iv_moe_stacked_names *names, const iv_moe *tmpl, iv_moe **out,
                        iv_err *err);

#endif
