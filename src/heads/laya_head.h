/* Laya's decision head (laya/common.py DecisionModel after the encoder):
 *
 *   h = last_hidden_state + type_emb[qtype]
 *   head_layers x nn.TransformerEncoderLayer(d, nhead = d/64, ff = 4d,
 *                                            norm_first, ReLU, LayerNorm eps 1e-5)
 *   logit_i = scorer(h[marker_i]),  scorer = LayerNorm -> Linear(d,d) -> GELU -> Linear(d,1)
 *   act = act_head([h[0], top1, top1 - top2, H(p)/ln max(k,2), k/255]),
 *         act_head = Linear(d+4, 256) -> GELU -> Linear(256, n_act), p = softmax(logits)
 *
 * Weights: type_emb.weight, head.layers.N.{self_attn.in_proj_*, self_attn.out_proj.*,
 * linear1.*, linear2.*, norm1.*, norm2.*}, scorer.{0,1,3}.*, act_head.{0,2}.*
 * in the checkpoint's model.safetensors. One sequence at a time (no
 * padding), float32 on the host; the last layer is computed only at the
 * rows read afterwards (the markers and [CLS]). */
#ifndef IV_HEADS_LAYA_HEAD_H
#define IV_HEADS_LAYA_HEAD_H

#include "base/err.h"
#include "tensor/safetensors.h"

typedef struct iv_laya_head iv_laya_head;

/* Loads the head for hidden size d with n_layers layers and n_act actions
 * from w (kept open by the head). */
int iv_laya_head_load(iv_laya_head **out, iv_weights *w, int d, int n_layers, int n_act, iv_err *err);
void iv_laya_head_free(iv_laya_head *h);

/* hidden: [len, d] encoder output; markers[k] rows; qtype 0 choice, 1 score, 2 noul.
 * Fills logits[k] and act_probs[n_act] (softmax of the act head; may be NULL). */
int iv_laya_head_run(const iv_laya_head *h, const float *hidden, int len, int qtype, const int *markers, int k,
                     float *logits, float *act_probs, iv_err *err);
int iv_laya_head_n_act(const iv_laya_head *h);

#endif
