/* The generic continuation log-prob decision contract on any causal chat
 * LM (`--decision-continuation`; colibri's recipe for "any chat LM"):
 * each question becomes one conversation rendered by the checkpoint's chat
 * template (generation prompt on, enable_thinking false) - the prefix - and
 * each option is scored by the log-probability the LM gives its
 * continuation tokens after that prefix:
 *
 *   lp(o) = sum_t log softmax(LM(prefix + cont_o[:t]))[cont_o[t]]
 *   score(o) = lp(o)             ("sum", the default)
 *            = lp(o) / |cont_o|  ("mean", --decision-normalize mean)
 *   p = softmax(score) over the question's options (float64, no temperature)
 *
 * The prefix and every continuation are tokenized separately without
 * special tokens and concatenated (merges never cross the boundary; the
 * reference does the same). Continuations: choice the label, score the
 * level number "i", noul "yes" (true) / "no" (false).
 *
 * The prompt text is ours (colibri's is not public), stated in
 * docs/decisions.md:
 *   system: "You answer one question about a state. Reply with exactly one of the options, and nothing else."
 *   user:   "State:\n<state>\n\nQuestion: <instructions>\n\nOptions:\n- <cont>[: <description>]\n...\nAnswer with one option."
 * (options in the question's order; noul lists yes first, then no).
 *
 * Execution: the LM's logits over the whole vocabulary at the last token of
 * a sequence are the engine's classify output (the LM head as the sequence
 * head). A question needs the sequence prefix + cont_o[:t] for every
 * t < |cont_o|; the sequences of a question are deduplicated (t = 0 is the
 * prefix alone, shared by every option), and the engine's prefix folding
 * computes the shared prefix (state and question) once per batch. */
#ifndef IV_DECISIONS_CONTINUATION_H
#define IV_DECISIONS_CONTINUATION_H

#include <stdint.h>

#include "base/err.h"
#include "decisions/contract.h"
#include "tokenizer/tokenizer.h"

struct iv_chat_template;

/* A request's sequences each bring back vocab floats: at most this many
 * sequences, and at most this many bytes of logits (413 beyond). */
#define IV_CONT_MAX_SEQUENCES 1024
#define IV_CONT_MAX_LOGIT_BYTES ((int64_t)256 << 20)

typedef enum iv_cont_norm { IV_CONT_SUM = 1, IV_CONT_MEAN = 2 } iv_cont_norm;

/* One token read: the log-prob of token at the end of sequence seq. */
typedef struct iv_cont_read {
    int seq;
    int32_t token;
} iv_cont_read;

/* One question's plan: sequences [first_seq, first_seq + n_seqs) of the
 * request's list; option j reads reads[opt_off[j] .. opt_off[j + 1]). */
typedef struct iv_cont_question {
    int first_seq, n_seqs;
    int prefix_len; /* the rendered prompt's tokens */
    int tokens;     /* prefix + every option's continuation: what the question reads */
    int *opt_off;   /* [n_options + 1] */
} iv_cont_question;

/* A request's plan: the sequences to run (each owned by the plan until
 * taken) and the reads. */
typedef struct iv_cont_plan {
    int n_seqs, cap_seqs;
    int32_t **seq_ids;
    int *seq_len;
    int n_reads, cap_reads;
    iv_cont_read *reads;
    int n_questions;
    iv_cont_question *q;
} iv_cont_plan;

/* The conversation of question q (a cJSON array the caller deletes). */
struct cJSON *iv_cont_messages(const iv_dq_request *r, const iv_dq_question *q);
/* The continuation text of option j of q. */
const char *iv_cont_text(const iv_dq_question *q, int j);

/* A question's prompt already rendered and tokenized by the caller (a
 * state with images: its placeholders expanded to the images' runs). */
typedef struct iv_cont_prefix {
    const int32_t *ids;
    int len;
} iv_cont_prefix;

/* Builds the plan of request r: each question rendered by ct, tokenized
 * with tok, or its prompt given[qi] (given NULL: rendered here). vocab: the
 * LM head's rows (a token id at or past it is IV_E_FORMAT). Errors:
 * IV_E_INVALID (a template error, an option whose continuation has no
 * tokens; err names the question in *bad_q, else -1). */
int iv_cont_plan_build(const iv_dq_request *r, const struct iv_chat_template *ct, const iv_cont_prefix *given,
                       const iv_tokenizer *tok, int vocab, iv_cont_plan *plan, int *bad_q, iv_err *err);
void iv_cont_plan_free(iv_cont_plan *plan);
/* The most sequences a request may run on an LM head of vocab rows. */
int iv_cont_max_sequences(int vocab);

/* log sum_v exp(logits[v]) in float64: the log-softmax's normaliser. */
double iv_cont_logsumexp(const float *logits, int vocab);

/* Question qi's probabilities p[n_options] (question order) and option
 * scores (sum or mean log-probs) from the sequences' vocabulary logits
 * (logits[s]: the LM logits at sequence s's last token; lse[s] their
 * iv_cont_logsumexp). */
void iv_cont_probabilities(const iv_cont_plan *plan, int qi, const iv_dq_question *q, const float *const *logits,
                           const double *lse, iv_cont_norm norm, double *scores, double *p);

#endif
