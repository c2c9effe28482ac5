/* Attention over packed sequences against a double-precision reference,
 * for every mask and bias feature alone and combined, with q/k/v as column
 * windows of a fused QKV buffer whose other columns are NaN. Also checks
 * sequence isolation (a packed batch equals each sequence run alone) and a
 * single 8192-token sequence. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"
#include "ops_test_util.h"
#include "test.h"

typedef struct {
    const char *name;
    int n_heads, n_kv_heads, head_dim;
    int causal, window_left, window_right;
    int alibi, bias, key_mask;
    float softcap;
    float q_range; /* q values uniform in [-q_range, q_range] */
} att_case;

typedef struct {
    int n_seqs;
    int32_t *cu;
    int64_t T;
    float *qkv_buf, *out_buf, *slopes, *bias;
    int64_t *bias_off;
    uint8_t *key_mask;
    iv_attn_args args;
} att_problem;

static void free_problem(att_problem *p)
{
    free(p->cu);
    free(p->qkv_buf);
    free(p->out_buf);
    free(p->slopes);
    free(p->bias);
    free(p->bias_off);
    free(p->key_mask);
}

/* Views into a fused [q | k | v] buffer of `rows` rows starting `pad_rows`
 * rows in (rows before and after are NaN), plus an output window. */
static void make_views(att_problem *p, const att_case *c, ops_rng *r, int64_t rows, int64_t pad_rows)
{
    int64_t d = c->head_dim, qw = c->n_heads * d, kw = c->n_kv_heads * d;
    int64_t ld = qw + 2 * kw + 3, total = rows + 2 * pad_rows;
    p->qkv_buf = malloc((size_t)(total * ld) * sizeof(float));
    for (int64_t i = 0; i < total * ld; i++) p->qkv_buf[i] = NAN;
    float *base = p->qkv_buf + pad_rows * ld + 1;
    for (int64_t t = 0; t < rows; t++) {
        for (int64_t k = 0; k < qw; k++) base[t * ld + k] = ops_rng_uniform(r, -c->q_range, c->q_range);
        for (int64_t k = qw; k < qw + 2 * kw; k++) base[t * ld + k] = ops_rng_uniform(r, -1.0f, 1.0f);
    }
    p->args.q = (iv_view){base, rows, qw, ld, IV_F32};
    p->args.k = (iv_view){base + qw, rows, kw, ld, IV_F32};
    p->args.v = (iv_view){base + qw + kw, rows, kw, ld, IV_F32};
    int64_t old = qw + 2;
    p->out_buf = malloc((size_t)(total * old) * sizeof(float));
    for (int64_t i = 0; i < total * old; i++) p->out_buf[i] = NAN;
    p->args.out = (iv_view){p->out_buf + pad_rows * old + 1, rows, qw, old, IV_F32};
}

static void fill_common_args(att_problem *p, const att_case *c)
{
    p->args.cu_seqlens = p->cu;
    p->args.n_seqs = p->n_seqs;
    p->args.n_heads = c->n_heads;
    p->args.n_kv_heads = c->n_kv_heads;
    p->args.head_dim = c->head_dim;
    p->args.scale = 1.0f / sqrtf((float)c->head_dim);
    p->args.causal = c->causal;
    p->args.window_left = c->window_left;
    p->args.window_right = c->window_right;
    p->args.softcap = c->softcap;
}

static void build_problem(att_problem *p, const att_case *c, ops_rng *r, const int *lens, int n)
{
    memset(p, 0, sizeof *p);
    p->n_seqs = n;
    p->cu = malloc((size_t)(n + 1) * sizeof(int32_t));
    p->cu[0] = 0;
    for (int s = 0; s < n; s++) p->cu[s + 1] = p->cu[s] + lens[s];
    p->T = p->cu[n];
    make_views(p, c, r, p->T, 0);
    fill_common_args(p, c);
    if (c->alibi) {
        p->slopes = malloc((size_t)c->n_heads * sizeof(float));
        for (int h = 0; h < c->n_heads; h++) p->slopes[h] = powf(2.0f, -8.0f * (float)(h + 1) / (float)c->n_heads);
        p->args.alibi_slopes = p->slopes;
    }
    if (c->bias) {
        p->bias_off = malloc((size_t)n * sizeof(int64_t));
        int64_t total = 0;
        for (int s = 0; s < n; s++) {
            p->bias_off[s] = total;
            total += (int64_t)c->n_heads * lens[s] * lens[s];
        }
        p->bias = ops_rand(r, total, -2.0f, 2.0f);
        p->args.bias = p->bias;
        p->args.bias_offsets = p->bias_off;
    }
    if (c->key_mask) {
        /* First token of every sequence masked (so a causal first query, and
         * a 1-token sequence, see no key at all), others masked 1 in 5. */
        p->key_mask = malloc((size_t)(p->T > 0 ? p->T : 1));
        for (int s = 0; s < n; s++)
            for (int32_t t = p->cu[s]; t < p->cu[s + 1]; t++)
                p->key_mask[t] = t == p->cu[s] ? 0 : (ops_rng_next(r) % 5 != 0);
        p->args.key_mask = p->key_mask;
    }
}

/* out[t][h*d + c] in double for the rows listed (all when rows == NULL). */
static double *ref_attention(const iv_attn_args *a, const int64_t *rows, int n_rows)
{
    int64_t T = a->cu_seqlens[a->n_seqs], d = a->head_dim, qw = a->n_heads * d;
    double *out = calloc((size_t)(T * qw > 0 ? T * qw : 1), sizeof(double));
    int group = a->n_heads / a->n_kv_heads;
    for (int s = 0; s < a->n_seqs; s++) {
        int64_t base = a->cu_seqlens[s], len = a->cu_seqlens[s + 1] - base;
        double *sc = malloc((size_t)(len > 0 ? len : 1) * sizeof(double));
        char *vis = malloc((size_t)(len > 0 ? len : 1));
        for (int64_t i = 0; i < len; i++) {
            if (rows) {
                int wanted = 0;
                for (int k = 0; k < n_rows; k++) wanted |= rows[k] == base + i;
                if (!wanted) continue;
            }
            for (int h = 0; h < a->n_heads; h++) {
                int kvh = h / group;
                const float *q = ((float *)a->q.data) + (base + i) * a->q.ld + h * d;
                double mx = -INFINITY;
                for (int64_t j = 0; j < len; j++) {
                    vis[j] = (!a->causal || j <= i) && (a->window_left < 0 || i - j <= a->window_left) &&
                             (a->window_right < 0 || j - i <= a->window_right) &&
                             (!a->key_mask || a->key_mask[base + j]);
                    if (!vis[j]) continue;
                    const float *k = ((float *)a->k.data) + (base + j) * a->k.ld + kvh * d;
                    double dot = 0;
                    for (int64_t c = 0; c < d; c++) dot += (double)q[c] * k[c];
                    double v = dot * a->scale;
                    if (a->softcap != 0) v = a->softcap * tanh(v / a->softcap);
                    if (a->bias) v += a->bias[a->bias_offsets[s] + (h * len + i) * len + j];
                    if (a->alibi_slopes) v -= a->alibi_slopes[h] * fabs((double)(i - j));
                    sc[j] = v;
                    if (v > mx) mx = v;
                }
                double sum = 0;
                for (int64_t j = 0; j < len; j++)
                    if (vis[j]) sum += (sc[j] = exp(sc[j] - mx));
                double *o = out + (base + i) * qw + h * d;
                for (int64_t j = 0; j < len; j++) {
                    if (!vis[j]) continue;
                    const float *v = ((float *)a->v.data) + (base + j) * a->v.ld + kvh * d;
                    for (int64_t c = 0; c < d; c++) o[c] += sc[j] / sum * v[c];
                }
            }
        }
        free(sc);
        free(vis);
    }
    return out;
}

static const att_case cases[] = {
    {"bidirectional", 2, 2, 16, 0, -1, -1, 0, 0, 0, 0.0f, 1.0f},
    {"causal", 3, 3, 32, 1, -1, -1, 0, 0, 0, 0.0f, 1.0f},
    {"causal gqa, odd head_dim", 4, 2, 12, 1, -1, -1, 0, 0, 0, 0.0f, 1.0f},
    {"mqa", 4, 1, 8, 0, -1, -1, 0, 0, 0, 0.0f, 1.0f},
    {"sliding window", 2, 2, 16, 0, 5, 3, 0, 0, 0, 0.0f, 1.0f},
    {"causal sliding window", 2, 1, 24, 1, 4, -1, 0, 0, 0, 0.0f, 1.0f},
    {"wide symmetric window", 1, 1, 64, 0, 100, 100, 0, 0, 0, 0.0f, 1.0f},
    {"alibi", 4, 4, 8, 0, -1, -1, 1, 0, 0, 0.0f, 1.0f},
    {"bias", 2, 2, 16, 0, -1, -1, 0, 1, 0, 0.0f, 1.0f},
    {"key mask", 2, 2, 20, 0, -1, -1, 0, 0, 1, 0.0f, 1.0f},
    {"causal key mask", 2, 2, 16, 1, -1, -1, 0, 0, 1, 0.0f, 1.0f},
    {"softcap", 2, 2, 16, 0, -1, -1, 0, 0, 0, 5.0f, 4.0f},
    {"everything", 4, 2, 17, 1, 40, -1, 1, 1, 1, 8.0f, 3.0f},
    {"everything bidirectional", 6, 3, 33, 0, 50, 20, 1, 1, 1, 8.0f, 3.0f},
};
#define N_CASES (int)(sizeof cases / sizeof cases[0])

/* Outputs are convex combinations of values in [-1, 1]. Score errors are
 * float dot products (d terms) and the softcap/bias/exp steps; scores grow
 * with q_range, so the bound does too. */
static double att_tol(const att_case *c) { return 1e-6 * c->q_range; }

/* Every case against the double-precision reference. An empty sequence, a
 * 1-token one, several query blocks (300 > 64) and several key tiles
 * (300 > 256). */
static void check_reference_cases(const iv_ops *ops)
{
    const int lens[] = {1, 7, 0, 33, 300, 70};
    for (int ci = 0; ci < N_CASES; ci++) {
        ops_rng r = {50 + (uint64_t)ci};
        att_problem p;
        build_problem(&p, &cases[ci], &r, lens, 6);
        double *want = ref_attention(&p.args, NULL, 0);
        ops->attention(ops, &p.args);
        char what[96];
        snprintf(what, sizeof what, "attention %s", cases[ci].name);
        ops_check_close(what, p.args.out, want, att_tol(&cases[ci]), 0);
        CHECK_EQ_INT(ops_gap_writes(p.out_buf, p.args.out), 0);
        if (cases[ci].key_mask) {
            /* The 1-token sequence's only key is masked: a zero row. */
            int zero = 1;
            for (int64_t c = 0; c < p.args.out.cols; c++) zero &= ((float *)p.args.out.data)[c] == 0.0f;
            CHECK_MSG(zero, "%s: query with no visible key must give zeros", cases[ci].name);
        }
        free(want);
        free_problem(&p);
    }
}

/* Run twice: with 2 threads, the 12-36 (sequence, head) pairs of the
 * multi-head cases make one task each (from 4 pairs per thread up); with
 * 16 threads they are too few, and each query block is a task. */
TEST(ops_attention_reference)
{
    const int threads = omp_get_max_threads();
    check_reference_cases(iv_cpu_ops());
    omp_set_num_threads(16);
    check_reference_cases(iv_cpu_ops());
    omp_set_num_threads(threads);
}

/* Packing must not leak between sequences: each sequence of a packed batch
 * (lengths 1, 7, 33) is the same bits as that sequence run alone from its
 * own buffer, whose neighbouring rows are NaN so any read outside it would
 * show. With 3 heads or more the batch runs one task per (sequence, head)
 * and the lone sequence one per query block: both shapes, same bits. */
TEST(ops_attention_isolation)
{
    const iv_ops *ops = iv_cpu_ops();
    const int lens[] = {1, 7, 33};
    for (int ci = 0; ci < N_CASES; ci++) {
        const att_case *c = &cases[ci];
        ops_rng r = {70 + (uint64_t)ci};
        att_problem packed;
        build_problem(&packed, c, &r, lens, 3);
        ops->attention(ops, &packed.args);
        for (int s = 0; s < 3; s++) {
            int32_t base = packed.cu[s], len = lens[s];
            att_problem one;
            memset(&one, 0, sizeof one);
            one.n_seqs = 1;
            one.cu = malloc(2 * sizeof(int32_t));
            one.cu[0] = 0;
            one.cu[1] = len;
            one.T = len;
            make_views(&one, c, &r, len, 2);
            fill_common_args(&one, c);
            for (int32_t t = 0; t < len; t++) {
                memcpy(((float *)one.args.q.data) + t * one.args.q.ld, ((float *)packed.args.q.data) + (base + t) * packed.args.q.ld,
                       (size_t)one.args.q.cols * sizeof(float));
                memcpy(((float *)one.args.k.data) + t * one.args.k.ld, ((float *)packed.args.k.data) + (base + t) * packed.args.k.ld,
                       (size_t)one.args.k.cols * sizeof(float));
                memcpy(((float *)one.args.v.data) + t * one.args.v.ld, ((float *)packed.args.v.data) + (base + t) * packed.args.v.ld,
                       (size_t)one.args.v.cols * sizeof(float));
            }
            one.args.alibi_slopes = packed.slopes;
            if (c->bias) {
                size_t n = (size_t)c->n_heads * len * len;
                one.bias = malloc(n * sizeof(float));
                memcpy(one.bias, packed.bias + packed.bias_off[s], n * sizeof(float));
                one.bias_off = calloc(1, sizeof(int64_t));
                one.args.bias = one.bias;
                one.args.bias_offsets = one.bias_off;
            }
            if (c->key_mask) {
                one.key_mask = malloc((size_t)len);
                memcpy(one.key_mask, packed.key_mask + base, (size_t)len);
                one.args.key_mask = one.key_mask;
            }
            ops->attention(ops, &one.args);
            iv_view got = {((float *)packed.args.out.data) + base * packed.args.out.ld, len, packed.args.out.cols,
                           packed.args.out.ld, IV_F32};
            double *want = ops_view_to_double(one.args.out);
            char what[96];
            snprintf(what, sizeof what, "isolation %s seq %d", c->name, s);
            ops_check_close(what, got, want, 0.0, 0);
            free(want);
            free_problem(&one);
        }
        free_problem(&packed);
    }
}

/* Plain blocks (every query sees every key, nothing added) keep their score
 * maxima in the score tiles and skip the softmax's masking sweep; an
 * all-ones key mask sends the same problem down the general sweep. Both
 * must give the same bits, for full, windowed-but-wide and GQA cases. */
TEST(ops_attention_plain_blocks_match_general_sweep)
{
    const iv_ops *ops = iv_cpu_ops();
    const int lens[] = {1, 7, 33, 300, 70};
    const int plain_cases[] = {0, 3, 6}; /* bidirectional, mqa, wide symmetric window */
    for (int k = 0; k < 3; k++) {
        const att_case *c = &cases[plain_cases[k]];
        ops_rng r = {110 + (uint64_t)k};
        att_problem p;
        build_problem(&p, c, &r, lens, 5);
        ops->attention(ops, &p.args);
        double *plain = ops_view_to_double(p.args.out);
        uint8_t *ones = malloc((size_t)p.T);
        memset(ones, 1, (size_t)p.T);
        p.args.key_mask = ones;
        ops->attention(ops, &p.args);
        char what[96];
        snprintf(what, sizeof what, "plain vs general sweep, %s", c->name);
        ops_check_close(what, p.args.out, plain, 0, 0);
        free(ones);
        free(plain);
        free_problem(&p);
    }
}

/* One 8192-token sequence: blocking keeps scratch small and the result
 * right. Sampled query rows (block edges, window edges) against the
 * reference. */
TEST(ops_attention_long)
{
    const iv_ops *ops = iv_cpu_ops();
    const att_case c = {"long", 2, 1, 8, 1, 3000, -1, 0, 0, 0, 0.0f, 1.0f};
    const int lens[] = {8192};
    ops_rng r = {90};
    att_problem p;
    build_problem(&p, &c, &r, lens, 1);
    ops->attention(ops, &p.args);
    const int64_t rows[] = {0, 1, 63, 64, 255, 256, 257, 2999, 3000, 3001, 4095, 5000, 8000, 8190, 8191};
    const int n_rows = (int)(sizeof rows / sizeof rows[0]);
    double *want = ref_attention(&p.args, rows, n_rows);
    for (int k = 0; k < n_rows; k++) {
        iv_view got = {((float *)p.args.out.data) + rows[k] * p.args.out.ld, 1, p.args.out.cols, p.args.out.ld, IV_F32};
        char what[64];
        snprintf(what, sizeof what, "long attention row %lld", (long long)rows[k]);
        ops_check_close(what, got, want + rows[k] * p.args.out.cols, 3e-6, 0);
    }
    free(want);
    free_problem(&p);
}
