/* libFuzzer target for the typed-decision contract (`make fuzz`):
 *   build/fuzz/fuzz_decisions -max_total_time=60 tests/fuzz/seeds/decisions
 * The first byte picks the parser: odd, a sidecar (bits 1-2: 0 Laya's
 * rl_agent_config.json, 1 pplx-decider's decision_config.json, 2 Clef's
 * joint_head_config.json); even, a /v1/systemone body (bit 1: lenient),
 * then every answer of a valid request written in both reply shapes and
 * each letters, continuation and pplx-decider prompt built (a state with
 * image parts cut at them). Any input must parse or fail
 * with detail items, never crash or leak. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "decisions/answer.h"
#include "decisions/clef.h"
#include "decisions/continuation.h"
#include "decisions/contract.h"
#include "decisions/laya_config.h"
#include "decisions/letters.h"
#include "decisions/pplx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const int mode = data[0];
    const char *text = (const char *)data + 1;
    size--;
    if ((mode & 1) && (mode >> 1) % 4 != 0) {
        cJSON *j = cJSON_ParseWithLength(text, size);
        iv_err err;
        if ((mode >> 1) % 4 == 1) {
            iv_pplx *p = calloc(1, sizeof *p);
            if (p) (void)iv_pplx_parse(p, j, NULL, &err);
            iv_pplx_free(p);
        } else {
            iv_clef_head_config c;
            (void)iv_clef_parse_config(j, &c, &err);
        }
        cJSON_Delete(j);
        return 0;
    }
    if (mode & 1) {
        iv_laya_config c;
        iv_err err;
        if (iv_laya_config_parse(&c, text, size, &err) == 0)
            for (int t = 0; t < 3; t++)
                for (int k = 1; k < 20; k++) (void)iv_laya_temperature(&c, (iv_dq_type)t, k);
        return 0;
    }
    cJSON *j = cJSON_ParseWithLength(text, size);
    if (!j) return 0;
    iv_dq_limits lim;
    iv_dq_limits_default(&lim);
    lim.lenient = (mode >> 1) & 1;
    iv_dq_request req;
    iv_dq_errors e;
    iv_dq_errors_init(&e);
    /* Codes A..Z, AA..ZZ as pplx-decider lists them (no tokenizer check). */
    static iv_pplx pplx;
    static char codes[IV_PPLX_MAX_CODES][3];
    if (!pplx.n_codes) {
        for (int i = 0; i < IV_PPLX_MAX_CODES; i++) {
            if (i < 26) codes[i][0] = (char)('A' + i);
            else codes[i][0] = (char)('A' + (i - 26) / 26), codes[i][1] = (char)('A' + (i - 26) % 26);
            pplx.codes[i] = codes[i];
        }
        pplx.n_codes = IV_PPLX_MAX_CODES;
        pplx.temperature = 1.3;
    }
    if (iv_dq_parse(j, &lim, &req, &e) == 0) {
        iv_strbuf b;
        iv_sb_init(&b);
        for (int i = 0; i < req.n_questions; i++) {
            const iv_dq_question *q = &req.questions[i];
            double *p = malloc(sizeof(double) * (size_t)q->n_options);
            float *l = malloc(sizeof(float) * (size_t)q->n_options);
            if (!p || !l) {
                free(p), free(l);
                continue;
            }
            for (int k = 0; k < q->n_options; k++) l[k] = (float)(k % 7) - 3.0f;
            iv_dq_softmax(l, q->n_options, 1.5, p);
            iv_dq_extras x = {.temperature = 1.5, .tokens = 3, .logits = l, .act_probability = 0.5};
            iv_dq_answer_json(&b, q, p, 0, &x);
            iv_dq_answer_json(&b, q, p, 1, &x);
            if (q->n_options <= IV_LETTERS_MAX) {
                cJSON *m = iv_letters_messages(&req, q);
                cJSON_Delete(m);
                iv_letters_probabilities(q, l, p);
            }
            cJSON_Delete(iv_cont_messages(&req, q)); /* a state with images: content parts */
            cJSON *m = iv_pplx_messages(&pplx, &req, q);
            cJSON_Delete(m);
            iv_pplx_probabilities(&pplx, q, l, p);
            free(p), free(l);
        }
        iv_sb_free(&b);
        iv_dq_request_free(&req);
    } else {
        iv_strbuf b;
        iv_sb_init(&b);
        iv_dq_errors_json(&e, &b);
        iv_sb_free(&b);
    }
    iv_dq_errors_free(&e);
    cJSON_Delete(j);
    return 0;
}
