/* IV_CUDA_PROFILE=1: GPU time per op, to find where a forward pass spends
 * it without a profiler on the machine. Each op call is bracketed by two
 * CUDA events on the instance's stream under a key naming the op and, for
 * linear and attention, its shape; the elapsed times are read at each sync
 * and a table sorted by total time goes to stderr when the table closes.
 * The original ops are kept in the profile and called through.
 * Without synchronisation an interval also holds any time the GPU waited
 * for the host to queue the op; IV_CUDA_PROFILE=sync drains the stream
 * before each op, so each interval is the op's own launch and run (slower
 * overall, but every op is measured alone). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/cuda_internal.h"

typedef struct prof_key_total {
    char key[96];
    long calls;
    double ms;
} prof_key_total;

typedef struct prof_pending {
    cudaEvent_t start, end;
    int key; /* index into totals */
} prof_pending;

struct cuda_profile {
    iv_ops inner; /* the ops being timed */
    int sync;     /* drain the stream before each op */
    prof_key_total *totals;
    int n_totals, cap_totals;
    prof_pending *pending;
    int n_pending, cap_pending;
};

static int key_index(cuda_profile *p, const char *key)
{
    for (int i = 0; i < p->n_totals; i++)
        if (!strcmp(p->totals[i].key, key)) return i;
    if (p->n_totals == p->cap_totals) {
        const int cap = p->cap_totals ? 2 * p->cap_totals : 64;
        prof_key_total *t = (prof_key_total *)realloc(p->totals, (size_t)cap * sizeof *t);
        if (!t) return -1;
        p->totals = t;
        p->cap_totals = cap;
    }
    prof_key_total *t = &p->totals[p->n_totals];
    snprintf(t->key, sizeof t->key, "%s", key);
    t->calls = 0;
    t->ms = 0;
    return p->n_totals++;
}

/* Reads the finished pairs (all of them once the stream is synchronised). */
static void collect(cuda_profile *p)
{
    for (int i = 0; i < p->n_pending; i++) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, p->pending[i].start, p->pending[i].end) == cudaSuccess &&
            p->pending[i].key >= 0) {
            p->totals[p->pending[i].key].ms += ms;
            p->totals[p->pending[i].key].calls++;
        }
        cudaEventDestroy(p->pending[i].start);
        cudaEventDestroy(p->pending[i].end);
    }
    (void)cudaGetLastError();
    p->n_pending = 0;
}

typedef struct prof_span {
    cuda_profile *p;
    cudaEvent_t start;
    int key;
} prof_span;

static prof_span span_begin(const iv_ops *ops, const char *key)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    prof_span s = {c->profile, NULL, key_index(c->profile, key)};
    if (s.p->sync) cudaStreamSynchronize(c->stream);
    if (cudaEventCreate(&s.start) == cudaSuccess) cudaEventRecord(s.start, c->stream);
    return s;
}

static void span_end(const iv_ops *ops, prof_span s)
{
    cuda_ctx *c = iv_cuda_ctx(ops);
    cuda_profile *p = s.p;
    cudaEvent_t end = NULL;
    if (!s.start || cudaEventCreate(&end) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    cudaEventRecord(end, c->stream);
    if (p->n_pending == p->cap_pending) {
        const int cap = p->cap_pending ? 2 * p->cap_pending : 1024;
        prof_pending *q = (prof_pending *)realloc(p->pending, (size_t)cap * sizeof *q);
        if (!q) return;
        p->pending = q;
        p->cap_pending = cap;
    }
    p->pending[p->n_pending++] = (prof_pending){s.start, end, s.key};
}

static const char *act_name(iv_act a)
{
    static const char *names[] = {"", " gelu", " gelu_tanh", " silu", " relu", " tanh", " sigmoid"};
    return (unsigned)a < sizeof names / sizeof names[0] ? names[a] : " ?";
}

#define INNER(ops) (iv_cuda_ctx(ops)->profile->inner)

static void p_linear(const iv_ops *ops, iv_view y, iv_view x, const iv_tensor *w, const iv_tensor *b, iv_act act,
                     const void *r)
{
    char key[96];
    snprintf(key, sizeof key, "linear %lldx%lldx%lld%s%s%s", (long long)x.rows, (long long)y.cols, (long long)x.cols,
             b ? " +b" : "", act_name(act), r ? " +res" : "");
    prof_span s = span_begin(ops, key);
    INNER(ops).linear(ops, y, x, w, b, act, r);
    span_end(ops, s);
}

static void p_attention(const iv_ops *ops, const iv_attn_args *a)
{
    char key[96];
    snprintf(key, sizeof key, "attention d%d h%d/%d%s", a->head_dim, a->n_heads, a->n_kv_heads,
             a->causal ? " causal" : "");
    prof_span s = span_begin(ops, key);
    INNER(ops).attention(ops, a);
    span_end(ops, s);
}

/* The other ops, keyed by name alone. */
#define TIMED(name, params, args)                          \
    static void p_##name params                            \
    {                                                      \
        prof_span s = span_begin(ops, #name);              \
        INNER(ops).name args;                              \
        span_end(ops, s);                                  \
    }
TIMED(layer_norm, (const iv_ops *ops, iv_view y, iv_view x, const void *r, const iv_tensor *w, const iv_tensor *b,
                   float eps),
      (ops, y, x, r, w, b, eps))
TIMED(rms_norm, (const iv_ops *ops, iv_view y, iv_view x, const void *r, const iv_tensor *w, float eps, float off),
      (ops, y, x, r, w, eps, off))
TIMED(head_rms_norm, (const iv_ops *ops, iv_view x, int nh, int hd, const iv_tensor *w, float eps, float off),
      (ops, x, nh, hd, w, eps, off))
TIMED(act, (const iv_ops *ops, iv_view y, iv_view x, iv_act a), (ops, y, x, a))
TIMED(glu, (const iv_ops *ops, iv_view y, iv_view x, iv_act a, int first), (ops, y, x, a, first))
TIMED(add, (const iv_ops *ops, iv_view y, iv_view a, iv_view b), (ops, y, a, b))
TIMED(scale, (const iv_ops *ops, iv_view y, iv_view x, float sc), (ops, y, x, sc))
TIMED(embed, (const iv_ops *ops, iv_view y, const iv_tensor *t, const int32_t *ids, int acc), (ops, y, t, ids, acc))
TIMED(rope, (const iv_ops *ops, const iv_rope_args *a), (ops, a))
TIMED(softmax, (const iv_ops *ops, iv_view x), (ops, x))
TIMED(l2_normalize, (const iv_ops *ops, iv_view x), (ops, x))
TIMED(pool, (const iv_ops *ops, const iv_pool_args *a), (ops, a))
TIMED(attention_rows, (const iv_ops *ops, const iv_attn_rows_args *a), (ops, a))

static int p_sync(const iv_ops *ops, iv_err *err)
{
    const int rc = INNER(ops).sync(ops, err);
    collect(iv_cuda_ctx(ops)->profile);
    return rc;
}

void iv_cuda_profile_install(cuda_ctx *c, int sync)
{
    cuda_profile *p = (cuda_profile *)calloc(1, sizeof *p);
    if (!p) return;
    p->inner = c->ops;
    p->sync = sync;
    c->profile = p;
    iv_ops *o = &c->ops;
    o->linear = p_linear;
    o->attention = p_attention;
    if (o->attention_rows) o->attention_rows = p_attention_rows;
    o->layer_norm = p_layer_norm;
    o->rms_norm = p_rms_norm;
    o->head_rms_norm = p_head_rms_norm;
    o->act = p_act;
    o->glu = p_glu;
    o->add = p_add;
    o->scale = p_scale;
    o->embed = p_embed;
    o->rope = p_rope;
    o->softmax = p_softmax;
    o->l2_normalize = p_l2_normalize;
    o->pool = p_pool;
    o->sync = p_sync;
}

static int by_total(const void *a, const void *b)
{
    const double x = ((const prof_key_total *)a)->ms, y = ((const prof_key_total *)b)->ms;
    return x < y ? 1 : x > y ? -1 : 0;
}

void iv_cuda_profile_finish(cuda_ctx *c)
{
    cuda_profile *p = c->profile;
    if (!p) return;
    cudaStreamSynchronize(c->stream);
    collect(p);
    double total = 0;
    for (int i = 0; i < p->n_totals; i++) total += p->totals[i].ms;
    qsort(p->totals, (size_t)p->n_totals, sizeof *p->totals, by_total);
    fprintf(stderr, "IV_CUDA_PROFILE cuda:%d, %.3f ms of GPU time in ops:\n", c->device, total);
    for (int i = 0; i < p->n_totals; i++)
        fprintf(stderr, "  %-48s %8ld calls %10.3f ms %5.1f%% %9.1f us/call\n", p->totals[i].key, p->totals[i].calls,
                p->totals[i].ms, total > 0 ? 100.0 * p->totals[i].ms / total : 0.0,
                p->totals[i].calls ? 1000.0 * p->totals[i].ms / (double)p->totals[i].calls : 0.0);
    free(p->totals);
    free(p->pending);
    free(p);
    c->profile = NULL;
}
