/* DeBERTa-v2/v3 disentangled attention, as a per-layer dynamic attention
 * bias (iv_dyn_bias_fn in models/block.h). With i the query and j the key of
 * one sequence, transformers' DisentangledSelfAttention scores
 *
 *   s(i, j) = q_i . k_j / c + q_i . Pk[c2p(i - j)] / c + k_j . Pq[p2c(i - j)] / c
 *
 * with c = sqrt(head_dim * (1 + #{c2p, p2c} enabled)), Pk / Pq the (normalised)
 * relative embeddings through the key / query projections of this layer,
 * and the row indices
 *   c2p(d) = clamp( bucket(d) + span, 0, 2 span - 1)
 *   p2c(d) = clamp(-bucket(-d) + span, 0, 2 span - 1)
 * (bucket = make_log_bucket_position, or the identity without buckets).
 * The first term is the block's attention (scale 1 / c); the others are the
 * bias computed here, through ops: per head, one linear of the queries
 * (keys) against the rows of Pk (Pq) any index of the batch reaches, then
 * the rel_bias gather into the bias blocks. */
#ifndef IV_MODELS_DEBERTA_ATTN_H
#define IV_MODELS_DEBERTA_ATTN_H

#include "models/model.h"

/* Settings every layer shares. */
typedef struct iv_deberta_rel {
    int span;          /* att_span: position_buckets if > 0, else max_relative_positions */
    int buckets;       /* position_buckets; <= 0: relative distances are used as they are */
    int max_relative;  /* max_relative_positions (>= 1) */
    int c2p, p2c;      /* enabled terms */
    float scale;       /* c = sqrt(head_dim * scale_factor); both terms are divided by it */
} iv_deberta_rel;

/* One layer's hook context. The layer's dyn_bias_w hold its projections,
 * [n_heads * 2 span, head_dim] (head h's rows from h * 2 span): Pk in w[0]
 * (NULL without c2p), Pq in w[1] (NULL without p2c). */
typedef struct iv_deberta_layer {
    const iv_deberta_rel *rel;
} iv_deberta_layer;

/* transformers' make_log_bucket_position for one distance, in the same
 * float32 arithmetic; the identity when buckets <= 0. */
int iv_deberta_bucket(int rel, int buckets, int max_position);

/* The iv_dyn_bias_fn; ctx is an iv_deberta_layer. */
int iv_deberta_attn_bias(const iv_ops *ops, const void *ctx, const iv_dyn_bias_args *a);

/* Projects the relative embeddings rel [2 span, H] through w [n_heads *
 * head_dim, H] (+ b) and stores the result per head, a model-owned
 * [n_heads * 2 span, head_dim] tensor: the projections depend only on
 * weights, so each layer's Pk / Pq is computed once at load. */
int iv_deberta_project_rel(iv_model *m, const iv_tensor *rel, const iv_tensor *w, const iv_tensor *b, int n_heads,
                           int head_dim, const iv_tensor **out, iv_err *err);

#endif
