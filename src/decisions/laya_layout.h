/* Laya's question sequence (laya/common.py build_sequence at 8ef5b2dd):
 *
 *   [CLS] "<type> question: <instructions>" [SEP] ([MASK] " "+option_0) ... [SEP] <state> [SEP]
 *
 * Options: choice "label" or "label: description"; score "level i: text";
 * noul "false: <text | no, the statement does not hold>" then "true: <text |
 * yes, the statement holds>". Each option is cut to 48 tokens; when the
 * options leave fewer than 16 of head_max_len, each is cut to
 * max(4, (head_max_len - 16) / k). The question text is cut to max(8,
 * head_max_len - option tokens); the state fills what remains of max_len - 1
 * (cut at its end, or at its start for a list state). Any mask-token text in
 * the inputs becomes a space. The option logits are read at the [MASK]
 * markers. */
#ifndef IV_DECISIONS_LAYA_LAYOUT_H
#define IV_DECISIONS_LAYA_LAYOUT_H

#include <stdint.h>
#include "decisions/contract.h"
#include "decisions/laya_config.h"
#include "tokenizer/tokenizer.h"

typedef struct iv_laya_specials {
    int32_t cls, sep, mask;
    char mask_text[64];
} iv_laya_specials;

/* The [CLS]/[SEP]/[MASK] tokens named by dir/tokenizer_config.json
 * (cls_token, sep_token, mask_token; ModernBERT's by default). */
int iv_laya_specials_load(iv_laya_specials *s, const iv_tokenizer *tok, const char *dir, iv_err *err);

/* Tokens of text with the mask text replaced by a space, no specials. */
int iv_laya_encode(const iv_tokenizer *tok, const iv_laya_specials *s, const char *text, int32_t **ids, int *n,
                   iv_err *err);

/* One question's sequence: *ids (malloc'd, *len tokens) and markers[k]
 * (k = q->n_options; the caller's array). Markers past max_len are -1
 * (the caller refuses the question: its options do not fit). */
int iv_laya_build(const iv_tokenizer *tok, const iv_laya_specials *s, const iv_laya_config *c, const iv_dq_question *q,
                  const int32_t *state_ids, int n_state, int truncate_left, int32_t **ids, int *len, int *markers,
                  iv_err *err);

#endif
