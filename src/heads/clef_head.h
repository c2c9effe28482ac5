/* Clef's JointSchemaHead (Cloudflare/clef joint_schema_model.py, revision
 * 2f3de3dd), over the backbone's final-norm hidden states of one joint
 * sequence (the state, then every question with its options):
 *
 *   seq     = LayerNorm(hidden)                        hidden_norm
 *   memory  = W_mem seq                                [L, width]
 *   global  = seq[L-1]; q_i = mean of seq over question i's instruction span
 *   ctx_o   = mean of seq over option o's span; lex_o = mean of the LM-head
 *             (output embedding) rows of option o's tokens
 *   r_o     = W_oc ctx_o + W_ol lex_o + W_oq q_owner(o)
 *   routing_layers x EvidenceRoutingLayer:  r += MHA(LN_q r, LN_m memory, LN_m memory);
 *                                           r += W2 gelu(W1 LN_ff r)
 *   base_i  = W_q q_i; s_i = sum_o softmax_o(r_o . base_i / sqrt(width)) r_o
 *   f_i     = base_i + LN_sum(s_i) + W_g global + type_emb[type]   (noul 0, choice 1, score 2)
 *   layers x nn.TransformerDecoderLayer (norm_first, GELU) over the fields against memory
 *   f_i     = LN_field(f_i)
 *   logit_o = exp(min(prior_scale, ln 100)) cos(lex_o, q_i + global)
 *           + sigmoid(gate) (exp(min(joint_scale, ln 100)) cos(f_i, LN_opt r_o)
 *                            + W_b gelu(W_a [f, o, f*o, |f-o|]))
 *
 * Weights (joint_head.safetensors, strict: exactly these names) as the
 * published module names them: hidden_norm, {memory, question,
 * option_question, global, option_context, option_lexical}_projection,
 * type_embedding, evidence_layers.N.{query_norm, memory_norm, attention
 * (in_proj_weight/bias, out_proj), feedforward_norm, feedforward.{0,3}},
 * option_summary_norm, layers.N.{self_attn, multihead_attn, linear1,
 * linear2, norm1..3}, field_norm, option_norm, residual_scorer.{0,3},
 * prior_logit_scale, joint_logit_scale, residual_gate. LayerNorm eps 1e-5,
 * GELU erf. Float32 on the host, one record at a time. */
#ifndef IV_HEADS_CLEF_HEAD_H
#define IV_HEADS_CLEF_HEAD_H

#include "base/err.h"
#include "tensor/safetensors.h"

typedef struct iv_clef_head_config {
    int hidden_size, width, routing_layers, layers, heads, feedforward;
} iv_clef_head_config;

typedef struct iv_clef_head iv_clef_head;

/* One question of the record: its type (0 noul, 1 choice, 2 score), its
 * instruction span [q0, q1) and its options' spans [o0, o1) in the sequence. */
typedef struct iv_clef_question {
    int type;
    int q0, q1;
    int n_options;
    const int *o0, *o1;
} iv_clef_question;

/* Loads the head from w (kept open by the head). */
int iv_clef_head_load(iv_clef_head **out, iv_weights *w, const iv_clef_head_config *cfg, iv_err *err);
void iv_clef_head_free(iv_clef_head *h);

/* hidden [len, hidden_size]: the backbone's final-norm states; ids[len] the
 * sequence; out_emb [vocab, hidden_size] the LM head rows (n_vocab rows).
 * Fills logits with every question's options in order. */
int iv_clef_head_run(const iv_clef_head *h, const float *hidden, const int32_t *ids, int len, const float *out_emb,
                     int64_t n_vocab, const iv_clef_question *qs, int n_questions, float *logits, iv_err *err);

#endif
