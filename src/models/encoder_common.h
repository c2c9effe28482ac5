/* What BERT-like post-norm encoders (BERT, RoBERTa, DistilBERT, MPNet, ...)
 * share: the layer layout with family-specific tensor names, and the usual
 * task heads. Family files pass their names as data. */
#ifndef IV_MODELS_ENCODER_COMMON_H
#define IV_MODELS_ENCODER_COMMON_H

#include "models/model.h"

typedef struct iv_encoder_names {
    const char *layer_fmt;            /* e.g. "encoder.layer.%d." */
    const char *q, *k, *v, *o;        /* linear layers (".weight"/".bias" appended) */
    const char *qkv;                  /* fused [3H, H] projection instead of q, k, v (NULL: separate) */
    const char *attn_norm;            /* norm N1 (after attention, or before it in pre-norm) */
    const char *up, *down;            /* MLP; up is [2I, H] when m->block.gated */
    const char *up2;                  /* gated MLPs stored as two [I, H] halves: up first, up2 second */
    const char *mlp_norm;             /* norm N2 */
    int first_attn_norm_absent;       /* layer 0 has no attn_norm (ModernBERT) */
    /* Every linear layer and LayerNorm has a bias: the reference module
     * (BERT, DistilBERT, MPNet in transformers) creates them all, so a
     * checkpoint without one would run there with a random bias. Absent ones
     * are then an error naming the tensor, not a silent zero. */
    int biases_required;
} iv_encoder_names;

/* A LayerNorm (base.weight/.bias or .gamma/.beta under m->prefix) whose
 * bias the reference module always has: absent is an error naming it. */
int iv_ld_biased_layer_norm(iv_model *m, const char *base, int64_t dim, iv_norm *out, iv_err *err);

/* Which of the optional tables iv_load_bert_embeddings reads. */
enum { IV_EMBED_POSITIONS = 1, IV_EMBED_TOKEN_TYPES = 2 };
/* BERT-style embeddings (under m->prefix): embeddings.word_embeddings
 * [V, H]; with IV_EMBED_POSITIONS embeddings.position_embeddings [P, H];
 * with IV_EMBED_TOKEN_TYPES embeddings.token_type_embeddings [T, H], required
 * unless config.json's type_vocab_size is 0 (the reference creates the
 * table whenever it is positive); then embeddings.LayerNorm with its bias. Positions stay 0..L-1 (the
 * default pos_mode) for the family to change. */
int iv_load_bert_embeddings(iv_model *m, unsigned tables, iv_err *err);

/* Fills m->block (post-norm LayerNorm, non-gated MLP, act from config) and
 * m->layers from the names. Requires m->cfg fields and m->prefix. */
int iv_load_encoder_layers(iv_model *m, const iv_encoder_names *names, iv_err *err);
/* The two halves of iv_load_encoder_layers, for families with their own block
 * spec: m->block from m->cfg as BERT has it; then the layers' weights by name
 * for whatever m->block says (gated decides the up projection's shape). */
int iv_encoder_block_spec(iv_model *m, iv_err *err);
int iv_load_encoder_layer_weights(iv_model *m, const iv_encoder_names *names, iv_err *err);
/* The same, leaving the MLP of each layer l with routed[l] != 0 to the family
 * (a mixture of experts in iv_layer.moe); routed may be NULL. */
int iv_load_encoder_layer_weights_routed(iv_model *m, const iv_encoder_names *names, const unsigned char *routed,
                                         iv_err *err);

/* Heads. A checkpoint whose config declares a head architecture may hold
 * only the base model (as many sentence-transformers checkpoints do): when
 * none of a head's own tensors are present, each loader below returns 0 with
 * the head empty and m->missing_head saying why, so the task is refused at
 * request time; a head with some of its tensors, or one of the wrong shape,
 * is an error. ColBERT's projection (m->token_proj) is always required.
 * `base` names are taken as is (no backbone prefix) unless under_prefix is
 * set. */
/* 1 (h emptied, m->missing_head set) when no module of the NULL-terminated
 * list (top-level names; .weight/.bias/.gamma/.beta) is in the checkpoint. */
int iv_head_absent(iv_model *m, iv_head *h, const char *const *modules);
/* dense(+tanh) then out_proj: RoBERTa/MPNet "classifier.dense" + "classifier.out_proj";
 * BERT: pooler.dense + classifier; DistilBERT: pre_classifier (+relu) + classifier. */
int iv_load_two_step_head(iv_model *m, iv_head *h, const char *first, int first_under_prefix, iv_act first_act,
                          const char *second, iv_err *err);
/* One linear: token classifiers. */
int iv_load_linear_head(iv_model *m, iv_head *h, const char *name, int64_t in_dim, iv_err *err);
/* dense -> act -> LayerNorm `norm` (eps m->block.norm_eps) -> `out` linear, all
 * taken as is: ModernBERT's head.dense/head.norm + classifier. */
int iv_load_transform_head(iv_model *m, iv_head *h, const char *dense, iv_act act, const char *norm,
                           const char *out, iv_err *err);
/* MLM: transform dense -> act -> LayerNorm -> decoder (tied to word
 * embeddings when its weight is absent) + bias (`bias`, else decoder.bias).
 * The transform maps hidden to the embedding width (word->shape[1]). */
int iv_load_mlm_head(iv_model *m, const char *dense, iv_act act, const char *norm, const char *decoder,
                     const char *bias, iv_err *err);

#endif
