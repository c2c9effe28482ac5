/* From one question's probabilities to its answer: the confidence formulas
 * and the reply's JSON (strict Jev shape, or the extended one).
 *
 * Confidence (reference/systemone-decisions.md 1.5, Jev as llama.cpp's
 * server-decision and kime reimplement it):
 *   choice: clip((p_max - 1/N) / (1 - 1/N), 0, 1); 1 when N = 1
 *   score:  m = argmax; 1 - sum_i p_i |i - m| / (sum_i |i - (N-1)/2| / N), floored at 0; 1 when N = 1
 *   noul:   none in the strict reply
 * The strict reply is TypeSafe's wire schema (as typesafe-sdk 0.7.5 carries
 * it): noul {type, noul}; choice {type, choice, probabilities, confidence};
 * score {type, score, probabilities, confidence, legend}.
 * The extended reply adds Laya's: entropy 1 - H(p)/ln N (choice, score),
 * max(p) as answer_confidence, and max(p, 1-p) for noul. */
#ifndef IV_DECISIONS_ANSWER_H
#define IV_DECISIONS_ANSWER_H

#include "base/strbuf.h"
#include "decisions/contract.h"

double iv_dq_choice_confidence(const double *p, int n);
double iv_dq_score_confidence(const double *p, int n);
double iv_dq_entropy_confidence(const double *p, int n);
int iv_dq_argmax(const double *p, int n); /* first of equal maxima (option order) */

/* p = softmax(logits / t) in float64 (Laya's decode). */
void iv_dq_softmax(const float *logits, int n, double t, double *p);

/* What the extended reply reports besides the probabilities. */
typedef struct iv_dq_extras {
    double temperature; /* applied (after the clamp) */
    int tokens;         /* tokens of the question's sequence */
    const float *logits; /* raw option logits, or NULL */
    double act_probability; /* Laya's act-vs-escalate head, P(act); < 0: none */
} iv_dq_extras;

/* Appends the answer object of q ({...}). */
void iv_dq_answer_json(iv_strbuf *b, const iv_dq_question *q, const double *p, int extended, const iv_dq_extras *x);

#endif
