/* The option-token ("letters") decision contract on a causal chat LM, in
 * the manner of OpenJev: each question becomes one conversation rendered by
 * the checkpoint's chat template (generation prompt on, enable_thinking
 * false), its options are labelled with single-token letters A..Z, a..z
 * (52 at most), and the answer is the softmax of the LM logits of those
 * letters at the next position. A noul lists true first (A = true).
 *
 * OpenJev's own prompt text is not public (llama.cpp keeps it in a GGUF
 * key); the prompt below is ours, stated in docs/decisions.md:
 *
 *   system: "You answer one question about a state. Reply with the letter of exactly one option."
 *   user:   "State:\n<state>\n\nQuestion: <instructions>\n\nOptions:\nA. <option>\nB. <option>\n...\nAnswer with one letter."
 *
 * Options: choice "label" or "label: description"; score "i" or
 * "i: description"; noul "true[: description]" then "false[: description]". */
#ifndef IV_DECISIONS_LETTERS_H
#define IV_DECISIONS_LETTERS_H

#include <cJSON.h>
#include "decisions/contract.h"

#define IV_LETTERS_MAX 52

/* The conversation of question q (a cJSON array the caller deletes). */
cJSON *iv_letters_messages(const iv_dq_request *r, const iv_dq_question *q);

/* p[q->n_options] in the question's option order from the letters' logits. */
void iv_letters_probabilities(const iv_dq_question *q, const float *letter_logits, double *p);

#endif
