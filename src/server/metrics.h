/* Prometheus metrics with TEI's names (te_request_count, te_request_failure,
 * te_embed_*, te_predict_*, te_queue_size, te_request_input_length,
 * te_batch_next_size, te_batch_next_tokens, *_duration histograms) and its
 * bucket layouts: durations 1e-5 * 1.5^k s (k = 1..35), input lengths
 * powers of two up to the model's limit, batch sizes 2^0..2^12 and batch
 * tokens 2^0..2^20. Thread-safe. */
#ifndef IV_SERVER_METRICS_H
#define IV_SERVER_METRICS_H

#include "base/strbuf.h"

typedef struct iv_metrics iv_metrics;

iv_metrics *iv_metrics_new(int max_input_length);
void iv_metrics_free(iv_metrics *m);
/* Sets the top of the te_request_input_length buckets (before the first request). */
void iv_metrics_set_max_input_length(iv_metrics *m, int max_input_length);

/* series: a metric name with optional labels, e.g. te_request_count{method="single"}. */
void iv_metrics_inc(iv_metrics *m, const char *series, double by);
void iv_metrics_set(iv_metrics *m, const char *series, double value);
/* Histogram observation; the buckets follow from the name. */
void iv_metrics_observe(iv_metrics *m, const char *name, double value);

/* Prometheus text exposition format. */
void iv_metrics_render(iv_metrics *m, iv_strbuf *out);

#endif
