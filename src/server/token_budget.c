#include "server/token_budget.h"

#include <stdlib.h>
#include <string.h>
#include "base/log.h"

#define PROBE_TOKENS 4096
#define MAX_BUDGET 262144
#define SPEND 0.85

/* "cuda" and "cuda:0" are one device. */
static const char *canonical(const char *label) { return strcmp(label, "cuda") ? label : "cuda:0"; }

/* Replicas of every model on the device named like `label`. */
static int sharing(const iv_server *s, const char *label)
{
    int n = 0;
    for (int i = 0; i < s->n_models; i++)
        for (int r = 0; r < s->models[i].n_replicas; r++)
            n += !strcmp(canonical(iv_engine_device_label(s->models[i].replicas[r])), canonical(label));
    return n;
}

static int on_gpus(const iv_model_slot *m)
{
    size_t f, t;
    for (int r = 0; r < m->n_replicas; r++)
        if (iv_engine_device_memory(m->replicas[r], &f, &t)) return 0;
    return 1;
}

void iv_size_token_budgets(iv_server *s)
{
    for (int i = 0; i < s->n_models; i++) s->models[i].max_batch_tokens = s->o.max_batch_tokens;
    if (s->o.max_batch_tokens_set) return;
    /* Probe first: the probes' own arenas then count as used below. */
    double *per_token = calloc((size_t)s->n_models, sizeof *per_token);
    if (!per_token) return;
    for (int i = 0; i < s->n_models; i++) {
        iv_model_slot *m = &s->models[i];
        per_token[i] = 0;
        if (!on_gpus(m)) continue;
        for (int r = 0; r < m->n_replicas; r++) {
            iv_err err = {0};
            double bpt = 0;
            if (iv_engine_probe_bytes_per_token(m->replicas[r], PROBE_TOKENS, &bpt, &err)) {
                IV_WARN("%s: sizing the token budget: the probe batch on %s failed (%s); keeping %d", m->model_id,
                        iv_engine_device_label(m->replicas[r]), err.msg, m->max_batch_tokens);
                per_token[i] = 0;
                break;
            }
            if (bpt > per_token[i]) per_token[i] = bpt;
        }
    }
    for (int i = 0; i < s->n_models; i++) {
        iv_model_slot *m = &s->models[i];
        if (per_token[i] <= 0) continue;
        double budget = (double)MAX_BUDGET;
        size_t tightest_free = 0;
        const char *tightest = "";
        for (int r = 0; r < m->n_replicas; r++) {
            size_t free_b = 0, total_b = 0;
            if (iv_engine_device_memory(m->replicas[r], &free_b, &total_b)) continue;
            const char *label = iv_engine_device_label(m->replicas[r]);
            const double share = (double)free_b * SPEND / sharing(s, label);
            if (share / per_token[i] < budget) {
                budget = share / per_token[i];
                tightest_free = free_b;
                tightest = label;
            }
        }
        const int floor_tokens = iv_engine_max_input_length(m->engine);
        int tokens = (int)budget;
        if (tokens < floor_tokens) {
            IV_WARN("%s: the free device memory holds only %d tokens of activations per batch; using the input "
                    "limit %d (batches may run out of memory)",
                    m->model_id, tokens, floor_tokens);
            tokens = floor_tokens;
        }
        m->max_batch_tokens = tokens;
        if (*tightest)
            IV_INFO("%s: token budget %d per batch (%.1f GiB free on %s shared by %d replica%s, %.1f KiB of "
                    "activations per token)",
                    m->model_id, tokens, (double)tightest_free / (1 << 30), tightest, sharing(s, tightest),
                    sharing(s, tightest) == 1 ? "" : "s", per_token[i] / 1024);
        else
            IV_INFO("%s: token budget %d per batch (%.1f KiB of activations per token)", m->model_id, tokens,
                    per_token[i] / 1024);
    }
    free(per_token);
}
