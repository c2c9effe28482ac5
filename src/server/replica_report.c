#include "server/replica_report.h"

#include <string.h>

#include "engine/prefix_cache.h"

void iv_replicas_json(iv_strbuf *b, const iv_model_slot *m)
{
    iv_sb_puts(b, "\"replicas\":[");
    const int n = iv_batcher_replica_count(m->batcher);
    for (int i = 0; i < n; i++) {
        iv_replica_stats st;
        iv_batcher_replica_stats(m->batcher, i, &st);
        iv_sb_printf(b, "%s{\"index\":%d,\"device\":", i ? "," : "", i);
        iv_sb_json_string(b, st.device, strlen(st.device));
        iv_sb_printf(b, ",\"in_service\":%s,\"busy\":%s,\"batches\":%lld,\"tokens\":%lld,\"failures\":%lld,"
                        "\"busy_seconds\":%.6f}",
                     st.in_service ? "true" : "false", st.busy ? "true" : "false", (long long)st.batches,
                     (long long)st.tokens, (long long)st.failures, (double)st.busy_ns * 1e-9);
    }
    iv_sb_putc(b, ']');
}

/* A Prometheus label value: backslash, quote and newline escaped. */
static void label_value(iv_strbuf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"') iv_sb_putc(b, '\\');
        if (*s == '\n') {
            iv_sb_puts(b, "\\n");
            continue;
        }
        iv_sb_putc(b, *s);
    }
}

static void series(iv_strbuf *b, const iv_server *s, const char *name, const char *type, const char *help, int which)
{
    iv_sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    for (int mi = 0; mi < s->n_models; mi++) {
        const iv_model_slot *m = &s->models[mi];
        const int n = iv_batcher_replica_count(m->batcher);
        for (int i = 0; i < n; i++) {
            iv_replica_stats st;
            iv_batcher_replica_stats(m->batcher, i, &st);
            const double v[] = {st.in_service, st.busy, (double)st.batches, (double)st.tokens, (double)st.failures,
                                (double)st.busy_ns * 1e-9};
            iv_sb_printf(b, "%s{model=\"", name);
            label_value(b, m->served_name);
            iv_sb_printf(b, "\",replica=\"%d\",device=\"", i);
            label_value(b, st.device);
            iv_sb_printf(b, "\"} %.9g\n", v[which]);
        }
    }
}

void iv_replicas_prometheus(iv_strbuf *b, const iv_server *s)
{
    series(b, s, "te_replica_in_service", "gauge", "1 while the replica serves batches", 0);
    series(b, s, "te_replica_busy", "gauge", "1 while the replica runs a batch", 1);
    series(b, s, "te_replica_batches_total", "counter", "Batches the replica completed", 2);
    series(b, s, "te_replica_tokens_total", "counter", "Tokens of the batches the replica completed", 3);
    series(b, s, "te_replica_failures_total", "counter", "Batches that failed on the replica", 4);
    series(b, s, "te_replica_busy_seconds_total", "counter", "Time the replica spent running batches", 5);
}

/* Prefix folding and the prefix cache, per model and replica
 * (docs/prefix-folding.md). */
static void prefix_series(iv_strbuf *b, const iv_server *s, const char *name, const char *type, const char *help,
                          int which)
{
    iv_sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    for (int mi = 0; mi < s->n_models; mi++) {
        const iv_model_slot *m = &s->models[mi];
        for (int i = 0; i < m->n_replicas; i++) {
            iv_prefix_stats c;
            uint64_t batches, tokens_in, computed;
            iv_engine_prefix_stats(m->replicas[i], &c, &batches, &tokens_in, &computed);
            const double v[] = {(double)c.hits, (double)c.misses, (double)c.evictions, (double)c.inserts,
                                (double)c.bytes, (double)c.capacity, (double)c.entries, (double)c.tokens_reused,
                                (double)batches, (double)tokens_in, (double)computed};
            iv_sb_printf(b, "%s{model=\"", name);
            label_value(b, m->served_name);
            iv_sb_printf(b, "\",replica=\"%d\"} %.17g\n", i, v[which]);
        }
    }
}

void iv_prefix_prometheus(iv_strbuf *b, const iv_server *s)
{
    static const struct {
        const char *name, *type, *help;
    } k[] = {
        {"te_prefix_cache_hits_total", "counter", "Sequences that started from a cached prefix"},
        {"te_prefix_cache_misses_total", "counter", "Sequences that found no cached prefix"},
        {"te_prefix_cache_evictions_total", "counter", "Cached prefixes evicted to make room"},
        {"te_prefix_cache_inserts_total", "counter", "Prefixes added to the cache"},
        {"te_prefix_cache_bytes", "gauge", "Device bytes the cached prefixes hold"},
        {"te_prefix_cache_capacity_bytes", "gauge", "The prefix cache's bound (--prefix-cache-mb)"},
        {"te_prefix_cache_entries", "gauge", "Cached prefixes"},
        {"te_prefix_cache_reused_tokens_total", "counter", "Prefix tokens served from the cache"},
        {"te_prefix_fold_batches_total", "counter", "Batches run with shared prefixes folded"},
        {"te_prefix_fold_tokens_total", "counter", "Tokens of the folded batches"},
        {"te_prefix_fold_computed_tokens_total", "counter", "Tokens the folded batches actually computed"},
    };
    for (int i = 0; i < (int)(sizeof k / sizeof *k); i++) prefix_series(b, s, k[i].name, k[i].type, k[i].help, i);
}
