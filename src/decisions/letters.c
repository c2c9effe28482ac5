#include "decisions/letters.h"

#include <stdlib.h>
#include "base/strbuf.h"
#include "decisions/answer.h"
#include "decisions/state_images.h"

static char letter(int i) { return (char)(i < 26 ? 'A' + i : 'a' + i - 26); }

/* Option j of the prompt: noul shows true first. */
static int option_at(const iv_dq_question *q, int j) { return q->type == IV_DQ_NOUL ? 1 - j : j; }

cJSON *iv_letters_messages(const iv_dq_request *r, const iv_dq_question *q)
{
    /* What follows the state; a state with images becomes content parts. */
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_puts(&b, "\n\nQuestion: ");
    iv_sb_puts(&b, q->instructions);
    iv_sb_puts(&b, "\n\nOptions:\n");
    for (int j = 0; j < q->n_options; j++) {
        const iv_dq_option *o = &q->options[option_at(q, j)];
        iv_sb_printf(&b, "%c. %s", letter(j), o->key);
        if (o->desc && o->desc[0]) iv_sb_printf(&b, ": %s", o->desc);
        iv_sb_putc(&b, '\n');
    }
    iv_sb_puts(&b, "Answer with one letter.");
    cJSON *msgs = b.oom ? NULL : iv_dq_messages(r, "You answer one question about a state. Reply with the letter of exactly one option.", b.data);
    iv_sb_free(&b);
    return msgs;
}

void iv_letters_probabilities(const iv_dq_question *q, const float *letter_logits, double *p)
{
    const int k = q->n_options;
    double tmp[IV_LETTERS_MAX];
    iv_dq_softmax(letter_logits, k, 1.0, tmp);
    for (int j = 0; j < k; j++) p[option_at(q, j)] = tmp[j];
}
