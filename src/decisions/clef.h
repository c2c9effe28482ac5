/* Clef / Clef-flash (Cloudflare/clef, Cloudflare/clef-flash): a Qwen3.5
 * backbone (Qwen3_5ForConditionalGeneration, its text model) and the
 * JointSchemaHead (heads/clef_head.h) over ONE sequence holding the state
 * and every question of the request (joint execution: an answer can depend
 * on the other questions, and on their ids, which the prompt shows).
 *
 * Sidecars: joint_head_config.json {hidden_size, width, routing_layers,
 * layers, heads, feedforward} (also "dropout", which inference ignores; any
 * other key is refused), joint_head.safetensors. No temperature: a plain
 * softmax per question.
 *
 * The sequence is encode_record's (joint_schema_model.py): pieces
 * tokenized separately, without special tokens, and concatenated, so BPE
 * merges never cross a piece boundary:
 *   "<|im_start|>system\n<SYSTEM><|im_end|>\n<|im_start|>user\nSTATE:\n"
 *   render(state)                      (cut at its end to fit max_length)
 *   "\n\nSCHEMA FIELDS:\n"
 *   per question i: "\nFIELD i+1\nID: <id>\nTYPE: <type>\nINSTRUCTION: "
 *                   render(instructions, or the id when null or "")   <- question span
 *                   "\nALLOWED OPTIONS:\n"
 *                   per option j: "OPTION j+1: " render({"option_id": key,
 *                                 "description": d}) <- option span, "\n"
 *                   "END FIELD\n"
 *   "\n<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nJOINT SCHEMA DECISIONS:"
 * render: a string as is, else json.dumps(ensure_ascii=False,
 * separators=(",", ":"), sort_keys=True). Options: noul true then false
 * (descriptions "The proposition is true or the answer is yes." / "...
 * false or the answer is no." unless the criteria give one; a null one is
 * left out), choice sorted by label (a list of labels: no descriptions),
 * score by level. */
#ifndef IV_DECISIONS_CLEF_H
#define IV_DECISIONS_CLEF_H

#include "base/err.h"
#include "decisions/contract.h"
#include "heads/clef_head.h"
#include "tokenizer/tokenizer.h"

#define IV_CLEF_MAX_LENGTH 16384 /* encode_record's default max_length */

typedef struct iv_clef {
    iv_clef_head_config cfg;
    iv_weights *w;
    iv_clef_head *head;
    const float *out_emb; /* the backbone's LM head rows [n_vocab, hidden] */
    int64_t n_vocab;
} iv_clef;

/* One request laid out as the joint sequence. */
typedef struct iv_clef_record {
    int32_t *ids;
    int len;
    int n_questions;
    iv_clef_question *qs; /* request order; spans into ids */
    int *spans;           /* o0 then o1 storage of every option */
    int *option_of;       /* per option in prompt order: its index in the question's options */
    int state_tokens;     /* the state's tokens before any cut */
} iv_clef_record;

/* 1 when dir holds joint_head_config.json. */
int iv_clef_is_checkpoint(const char *dir);
/* Reads the sidecars for a backbone of hidden size `hidden` whose LM head
 * rows are out_emb [n_vocab, hidden]. */
int iv_clef_load(iv_clef **out, const char *dir, int hidden, const float *out_emb, int64_t n_vocab, iv_err *err);
int iv_clef_parse_config(const cJSON *j, iv_clef_head_config *c, iv_err *err);
void iv_clef_free(iv_clef *c);

/* Lays out r (max_length: the whole sequence, the state cut to fit;
 * IV_E_TOO_LARGE when the schema alone does not fit). */
int iv_clef_encode(const iv_tokenizer *tok, const iv_dq_request *r, int max_length, iv_clef_record *out, iv_err *err);
void iv_clef_record_free(iv_clef_record *rec);

/* Runs the head on the backbone's states [rec->len, hidden]; logits and
 * p (softmax per question, float64) in each question's option order
 * (contract order: noul [false, true]), questions concatenated. */
int iv_clef_answer(const iv_clef *c, const iv_clef_record *rec, const float *hidden,
                   float *logits, double *p, iv_err *err);

#endif
