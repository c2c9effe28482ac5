#include "server/metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SERIES 96
#define MAX_BUCKETS 40

enum { KIND_COUNTER, KIND_GAUGE, KIND_HISTOGRAM };

typedef struct series {
    char key[128]; /* name{labels} */
    int kind;
    double value;
    /* histograms */
    int nb;
    double bounds[MAX_BUCKETS];
    unsigned long long counts[MAX_BUCKETS]; /* cumulative only when rendered */
    unsigned long long count;
    double sum;
} series;

struct iv_metrics {
    pthread_mutex_t lock;
    int max_input_length;
    int n;
    series s[MAX_SERIES];
};

iv_metrics *iv_metrics_new(int max_input_length)
{
    iv_metrics *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    pthread_mutex_init(&m->lock, NULL);
    m->max_input_length = max_input_length;
    return m;
}

void iv_metrics_set_max_input_length(iv_metrics *m, int max_input_length)
{
    pthread_mutex_lock(&m->lock);
    m->max_input_length = max_input_length;
    pthread_mutex_unlock(&m->lock);
}

void iv_metrics_free(iv_metrics *m)
{
    if (!m) return;
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* TEI's bucket matchers (router/src/prometheus.rs). */
static void set_buckets(iv_metrics *m, series *s, const char *name)
{
    s->nb = 0;
    if (ends_with(name, "duration")) {
        double v = 0.00001;
        for (int i = 0; i < 35; i++) {
            v *= 1.5;
            s->bounds[s->nb++] = v;
        }
    } else if (!strcmp(name, "te_request_input_length")) {
        for (int x = 0; x < 20; x++)
            if ((1 << x) <= m->max_input_length) s->bounds[s->nb++] = (double)(1 << x);
    } else if (!strcmp(name, "te_batch_next_size")) {
        for (int x = 0; x < 13; x++) s->bounds[s->nb++] = (double)(1 << x);
    } else if (!strcmp(name, "te_batch_next_tokens")) {
        for (int x = 0; x < 21; x++) s->bounds[s->nb++] = (double)(1 << x);
    }
}

/* Finds or creates a series (lock held). NULL when the table is full. */
static series *lookup(iv_metrics *m, const char *key, int kind)
{
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->s[i].key, key)) return &m->s[i];
    if (m->n == MAX_SERIES) return NULL;
    series *s = &m->s[m->n++];
    memset(s, 0, sizeof *s);
    strncpy(s->key, key, sizeof s->key - 1);
    s->kind = kind;
    if (kind == KIND_HISTOGRAM) set_buckets(m, s, key);
    return s;
}

void iv_metrics_inc(iv_metrics *m, const char *key, double by)
{
    pthread_mutex_lock(&m->lock);
    series *s = lookup(m, key, KIND_COUNTER);
    if (s) s->value += by;
    pthread_mutex_unlock(&m->lock);
}

void iv_metrics_set(iv_metrics *m, const char *key, double value)
{
    pthread_mutex_lock(&m->lock);
    series *s = lookup(m, key, KIND_GAUGE);
    if (s) s->value = value;
    pthread_mutex_unlock(&m->lock);
}

void iv_metrics_observe(iv_metrics *m, const char *name, double value)
{
    pthread_mutex_lock(&m->lock);
    series *s = lookup(m, name, KIND_HISTOGRAM);
    if (s) {
        for (int i = 0; i < s->nb; i++)
            if (value <= s->bounds[i]) {
                s->counts[i]++;
                break;
            }
        s->count++;
        s->sum += value;
    }
    pthread_mutex_unlock(&m->lock);
}

static size_t name_len(const char *key)
{
    const char *brace = strchr(key, '{');
    return brace ? (size_t)(brace - key) : strlen(key);
}

/* Shortest decimal that reads back as the same double. */
static const char *num(char *buf, size_t cap, double v)
{
    if (v == (double)(long long)v && v > -1e15 && v < 1e15) {
        snprintf(buf, cap, "%lld", (long long)v);
        return buf;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    return buf;
}

static void render_one(const series *s, iv_strbuf *out)
{
    char a[32];
    if (s->kind != KIND_HISTOGRAM) {
        iv_sb_printf(out, "%s %s\n", s->key, num(a, sizeof a, s->value));
        return;
    }
    unsigned long long cum = 0;
    for (int i = 0; i < s->nb; i++) {
        cum += s->counts[i];
        iv_sb_printf(out, "%s_bucket{le=\"%s\"} %llu\n", s->key, num(a, sizeof a, s->bounds[i]), cum);
    }
    iv_sb_printf(out, "%s_bucket{le=\"+Inf\"} %llu\n", s->key, s->count);
    iv_sb_printf(out, "%s_sum %s\n%s_count %llu\n", s->key, num(a, sizeof a, s->sum), s->key, s->count);
}

void iv_metrics_render(iv_metrics *m, iv_strbuf *out)
{
    static const char *kinds[] = {"counter", "gauge", "histogram"};
    pthread_mutex_lock(&m->lock);
    char done[MAX_SERIES] = {0};
    for (int i = 0; i < m->n; i++) {
        if (done[i]) continue;
        size_t nl = name_len(m->s[i].key);
        iv_sb_printf(out, "# TYPE %.*s %s\n", (int)nl, m->s[i].key, kinds[m->s[i].kind]);
        /* Every series of this metric name together, as the format requires. */
        for (int j = i; j < m->n; j++)
            if (!done[j] && name_len(m->s[j].key) == nl && !strncmp(m->s[j].key, m->s[i].key, nl)) {
                render_one(&m->s[j], out);
                done[j] = 1;
            }
        iv_sb_putc(out, '\n');
    }
    pthread_mutex_unlock(&m->lock);
}
