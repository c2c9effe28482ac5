#include "decisions/answer.h"

#include <math.h>
#include <string.h>

int iv_dq_argmax(const double *p, int n)
{
    int m = 0;
    for (int i = 1; i < n; i++)
        if (p[i] > p[m]) m = i;
    return m;
}

static double clip01(double v) { return v < 0 ? 0 : v > 1 ? 1 : v; }

double iv_dq_choice_confidence(const double *p, int n)
{
    if (n <= 1) return 1.0;
    const double u = 1.0 / n;
    return clip01((p[iv_dq_argmax(p, n)] - u) / (1.0 - u));
}

double iv_dq_score_confidence(const double *p, int n)
{
    if (n <= 1) return 1.0;
    const int m = iv_dq_argmax(p, n);
    double spread = 0, uniform = 0;
    for (int i = 0; i < n; i++) {
        spread += p[i] * fabs((double)(i - m));
        uniform += fabs(i - (n - 1) / 2.0);
    }
    uniform /= n;
    return clip01(1.0 - spread / uniform);
}

double iv_dq_entropy_confidence(const double *p, int n)
{
    if (n < 2) return 1.0;
    double h = 0;
    for (int i = 0; i < n; i++) {
        const double q = p[i] < 1e-12 ? 1e-12 : p[i] > 1 ? 1 : p[i];
        h -= p[i] * log(q);
    }
    return clip01(1.0 - h / log((double)n));
}

void iv_dq_softmax(const float *logits, int n, double t, double *p)
{
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < n; i++) {
        p[i] = (double)logits[i] / t;
        if (p[i] > mx) mx = p[i];
    }
    for (int i = 0; i < n; i++) sum += p[i] = exp(p[i] - mx);
    for (int i = 0; i < n; i++) p[i] /= sum;
}

static void num(iv_strbuf *b, double v) { iv_sb_printf(b, "%.9g", v); }

static void key(iv_strbuf *b, const char *k)
{
    iv_sb_json_string(b, k, strlen(k));
    iv_sb_putc(b, ':');
}

static void probabilities(iv_strbuf *b, const iv_dq_question *q, const double *p)
{
    iv_sb_puts(b, "\"probabilities\":{");
    for (int i = 0; i < q->n_options; i++) {
        if (i) iv_sb_putc(b, ',');
        key(b, q->options[i].key);
        num(b, p[i]);
    }
    iv_sb_putc(b, '}');
}

static void extended_fields(iv_strbuf *b, const iv_dq_question *q, const double *p, const iv_dq_extras *x)
{
    const int n = q->n_options;
    if (q->type == IV_DQ_NOUL) {
        iv_sb_puts(b, ",");
        probabilities(b, q, p);
    }
    iv_sb_puts(b, ",\"answer_confidence\":");
    num(b, p[iv_dq_argmax(p, n)]);
    iv_sb_puts(b, ",\"entropy_confidence\":");
    num(b, iv_dq_entropy_confidence(p, n));
    if (x) {
        iv_sb_puts(b, ",\"temperature\":");
        num(b, x->temperature);
        iv_sb_printf(b, ",\"tokens\":%d", x->tokens);
        if (x->act_probability >= 0) {
            iv_sb_puts(b, ",\"act_probability\":");
            num(b, x->act_probability);
        }
        if (x->logits) {
            iv_sb_puts(b, ",\"logits\":[");
            for (int i = 0; i < n; i++) {
                if (i) iv_sb_putc(b, ',');
                num(b, x->logits[i]);
            }
            iv_sb_putc(b, ']');
        }
    }
}

void iv_dq_answer_json(iv_strbuf *b, const iv_dq_question *q, const double *p, int extended, const iv_dq_extras *x)
{
    const int n = q->n_options;
    /* Every answer names its type: the official SDK (typesafe-sdk, generated
     * from TypeSafe's OpenAPI) discriminates answers on it. */
    iv_sb_puts(b, "{\"type\":");
    iv_sb_json_string(b, iv_dq_type_name(q->type), strlen(iv_dq_type_name(q->type)));
    iv_sb_putc(b, ',');
    if (q->type == IV_DQ_NOUL) {
        iv_sb_puts(b, "\"noul\":");
        num(b, p[1]);
        if (extended) {
            iv_sb_puts(b, ",\"confidence\":");
            num(b, p[1] > p[0] ? p[1] : p[0]);
        }
    } else if (q->type == IV_DQ_CHOICE) {
        const int m = iv_dq_argmax(p, n);
        iv_sb_puts(b, "\"choice\":");
        iv_sb_json_string(b, q->options[m].key, strlen(q->options[m].key));
        iv_sb_putc(b, ',');
        probabilities(b, q, p);
        iv_sb_puts(b, ",\"confidence\":");
        num(b, iv_dq_choice_confidence(p, n));
    } else {
        double s = 0;
        for (int i = 0; i < n; i++) s += i * p[i];
        iv_sb_puts(b, "\"score\":");
        num(b, s);
        iv_sb_putc(b, ',');
        probabilities(b, q, p);
        iv_sb_puts(b, ",\"confidence\":");
        num(b, iv_dq_score_confidence(p, n));
        iv_sb_puts(b, ",\"legend\":{");
        for (int i = 0; i < n; i++) {
            if (i) iv_sb_putc(b, ',');
            key(b, q->options[i].key);
            char *raw = q->options[i].raw ? cJSON_PrintUnformatted(q->options[i].raw) : NULL;
            iv_sb_puts(b, raw ? raw : "\"\"");
            cJSON_free(raw);
        }
        iv_sb_putc(b, '}');
    }
    if (extended) extended_fields(b, q, p, x);
    iv_sb_putc(b, '}');
}
