/* Prefix folding (models/fold.h): the folded forward must give the
 * unfolded one's final states (max abs <= 1e-5, FP32) on the causal
 * fixtures (GQA, sliding windows, sandwich norms, q/k norms, YaRN with
 * Llama-4 query scaling, MoE) for batches with heavy, partial and no
 * sharing, exact prefixes, identical sequences and random trees; models
 * that cannot fold say why. */
#include <stdlib.h>

#include "models/fold.h"
#include "models/model.h"
#include "ops/ops.h"
#include "test.h"

#define FOLD_MAX_ABS 1e-5

typedef struct fold_case {
    int n;
    int32_t *ids[64];
    int len[64];
} fold_case;

static uint64_t rng_state;
static uint32_t rng_next(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng_state >> 33);
}

static iv_model *load_fixture(const char *name, const iv_ops *ops)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/models/%s", iv_test_fixtures_dir(), name);
    iv_model *m = NULL;
    iv_err err = {0};
    if (iv_model_load(&m, dir, iv_cpu_ops(), &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s: %s", name, err.msg);
        return NULL;
    }
    if (ops != iv_cpu_ops() && iv_model_to_device(m, ops, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s to %s: %s", name, ops->name, err.msg);
        iv_model_free(m);
        return NULL;
    }
    return m;
}

/* The batch of a case, host arrays from arena. */
static iv_batch case_batch(const fold_case *c, iv_arena *a)
{
    int64_t T = 0;
    for (int s = 0; s < c->n; s++) T += c->len[s];
    int32_t *ids = iv_arena_alloc(a, (size_t)T * sizeof(int32_t));
    int32_t *cu = iv_arena_alloc(a, (size_t)(c->n + 1) * sizeof(int32_t));
    cu[0] = 0;
    for (int s = 0; s < c->n; s++) {
        memcpy(ids + cu[s], c->ids[s], (size_t)c->len[s] * sizeof(int32_t));
        cu[s + 1] = cu[s] + c->len[s];
    }
    return (iv_batch){.n_seqs = c->n, .n_tokens = T, .ids = ids, .cu_seqlens = cu};
}

/* Runs a case unfolded and folded on ops; returns the largest difference
 * (or -1 on failure), the tokens folding saved and the smallest row cosine. */
static double fold_diff(const iv_model *m, const fold_case *c, int64_t *saved, double *min_cos)
{
    const iv_ops *ops = m->ops;
    iv_arena host, dev;
    iv_arena_init(&host);
    iv_ops_arena_init(&dev, ops);
    const iv_fwd_mem mem = {&host, &dev};
    iv_err err = {0};
    double worst = -1;
    iv_batch b = case_batch(c, &host);
    const int64_t T = b.n_tokens, W = iv_model_out_width(m);
    float *want = malloc((size_t)(T * W) * sizeof(float)), *got = malloc((size_t)(T * W) * sizeof(float));
    iv_view h;
    iv_fold_plan plan;
    if (iv_model_upload_batch(m, &b, &dev, &err) || iv_model_forward(m, &b, &mem, &h, &err)) goto done;
    iv_ops_download_f32(ops, h, want);
    if (iv_fold_build(&b, NULL, NULL, 0, &host, &plan, &err) ||
        iv_model_forward_folded(m, &b, &plan, NULL, NULL, NULL, 0, &mem, &h, &err))
        goto done;
    iv_ops_download_f32(ops, h, got);
    *saved = iv_fold_saved_tokens(&plan, &b);
    worst = iv_test_max_abs_diff(want, got, T * W);
    *min_cos = 1;
    for (int64_t t = 0; t < T; t++) {
        const double cs = iv_test_cosine(want + t * W, got + t * W, W);
        if (cs < *min_cos) *min_cos = cs;
    }
done:
    if (worst < 0) iv_test_fail(__FILE__, __LINE__, "forward: %s", err.msg);
    free(want);
    free(got);
    iv_arena_free(&host);
    iv_arena_free(&dev);
    return worst;
}

static void free_case(fold_case *c)
{
    for (int s = 0; s < c->n; s++) free(c->ids[s]);
    c->n = 0;
}

/* A sequence: the first plen tokens of sequence `from` (-1: none), then
 * fresh random tokens, the first of which differs from `from`'s next token
 * so the shared length is exactly plen. */
static void add_seq(fold_case *c, int from, int plen, int len, int vocab)
{
    int32_t *ids = malloc((size_t)len * sizeof(int32_t));
    for (int k = 0; k < len; k++) {
        ids[k] = k < plen && from >= 0 ? c->ids[from][k] : 1 + (int32_t)(rng_next() % (uint32_t)(vocab - 1));
        if (k == plen && from >= 0 && plen < c->len[from] && ids[k] == c->ids[from][k])
            ids[k] = 1 + ids[k] % (vocab - 1);
    }
    c->ids[c->n] = ids;
    c->len[c->n++] = len;
}

static int model_vocab(const iv_model *m)
{
    const int v = (int)m->embed.word->shape[0];
    return v < 64 ? v : 64; /* few distinct tokens: random sequences share more */
}

/* The hand-made shapes of sharing. */
static void check_shapes(const iv_model *m, const char *name)
{
    const int V = model_vocab(m);
    fold_case c = {0};
    int64_t saved = 0;
    double cs = 1, d;
#define RUN_CASE(label, expect_saved)                                                                      \
    do {                                                                                                   \
        d = fold_diff(m, &c, &saved, &cs);                                                                 \
        CHECK_MSG(d >= 0 && d <= FOLD_MAX_ABS, "%s %s: max abs %.3g (cos %.8f)", name, label, d, cs);      \
        if (expect_saved >= 0) CHECK_MSG(saved == expect_saved, "%s %s: saved %lld, want %d", name, label, \
                                         (long long)saved, expect_saved);                                  \
        free_case(&c);                                                                                     \
    } while (0)

    /* Heavy: one 24-token instruction + query before 6 documents of 5..10 tokens. */
    add_seq(&c, -1, 0, 24, V);
    for (int i = 0; i < 6; i++) {
        add_seq(&c, 0, 24, 29 + i, V);
        c.ids[c.n - 1][24] = 1 + i; /* the documents differ from their first token */
    }
    RUN_CASE("heavy", 24 * 6);
    /* Partial: a tree with branches at 6 and 12 and unshared sequences. */
    add_seq(&c, -1, 0, 20, V);
    add_seq(&c, 0, 6, 18, V);
    add_seq(&c, 0, 12, 21, V);
    add_seq(&c, 1, 15, 19, V);
    add_seq(&c, -1, 0, 9, V);
    add_seq(&c, -1, 0, 13, V);
    c.ids[4][0] = 1 + c.ids[0][0] % (V - 1); /* nothing shared with the others */
    c.ids[5][0] = 1 + c.ids[4][0] % (V - 1);
    RUN_CASE("partial", 6 + 12 + 15);
    /* None shared (distinct first tokens). */
    for (int i = 0; i < 4; i++) {
        add_seq(&c, -1, 0, 7 + 3 * i, V);
        c.ids[i][0] = 1 + i;
    }
    RUN_CASE("unshared", 0);
    /* Exact prefixes of others, down to one token, and a sequence that is
     * a prefix ending inside a shared run. */
    add_seq(&c, -1, 0, 30, V);
    add_seq(&c, 0, 10, 10, V);
    add_seq(&c, 0, 1, 1, V);
    add_seq(&c, 0, 20, 26, V);
    add_seq(&c, 0, 25, 25, V);
    RUN_CASE("exact prefixes", 10 + 1 + 20 + 25);
    /* Identical sequences. */
    add_seq(&c, -1, 0, 17, V);
    for (int i = 0; i < 3; i++) add_seq(&c, 0, 17, 17, V);
    RUN_CASE("identical", 17 * 3);
#undef RUN_CASE
}

/* Random trees: each sequence copies a random prefix of an earlier one. */
static void check_random(const iv_model *m, const char *name, int n_batches)
{
    const int V = model_vocab(m);
    double worst = 0, worst_cos = 1;
    int64_t total_saved = 0;
    for (int bi = 0; bi < n_batches; bi++) {
        fold_case c = {0};
        const int n = 1 + (int)(rng_next() % 12);
        for (int s = 0; s < n; s++) {
            const int len = 1 + (int)(rng_next() % 40);
            if (s > 0 && rng_next() % 4 != 0) {
                const int from = (int)(rng_next() % (uint32_t)s);
                int plen = (int)(rng_next() % (uint32_t)(c.len[from] + 1));
                if (plen > len) plen = len;
                add_seq(&c, from, plen, len, V);
            } else {
                add_seq(&c, -1, 0, len, V);
            }
        }
        int64_t saved = 0;
        double cs = 1;
        const double d = fold_diff(m, &c, &saved, &cs);
        free_case(&c);
        if (d < 0) return;
        if (d > worst) worst = d;
        if (cs < worst_cos) worst_cos = cs;
        total_saved += saved;
    }
    CHECK_MSG(worst <= FOLD_MAX_ABS, "%s random: max abs %.3g", name, worst);
    CHECK_MSG(total_saved > 0, "%s random: nothing was shared", name);
    printf("  %s: %d random batches, max abs %.3g, min cos %.9f, %lld tokens folded away\n", name, n_batches, worst,
           worst_cos, (long long)total_saved);
}

static const char *const causal_fixtures[] = {"llama", "qwen3", "mistral", "gemma3", "ministral3", "llama_yarn",
                                              "qwen3_moe", "qwen2"};

TEST(prefix_fold_matches_unfolded)
{
    rng_state = 20;
    for (size_t i = 0; i < sizeof causal_fixtures / sizeof *causal_fixtures; i++) {
        iv_model *m = load_fixture(causal_fixtures[i], iv_cpu_ops());
        if (!m) continue;
        CHECK_MSG(m->no_fold_reason == NULL, "%s: cannot fold: %s", causal_fixtures[i], m->no_fold_reason);
        check_shapes(m, causal_fixtures[i]);
        check_random(m, causal_fixtures[i], IV_TEST_SANITIZED ? 8 : 40);
        iv_model_free(m);
    }
}

/* A device table in BF16 storage: the same comparison at its precision. */
static void check_device_fold(const iv_ops *ops, const char *label)
{
    for (int i = 0; i < 2; i++) {
        const char *name = i ? "mistral" : "qwen3";
        iv_model *m = load_fixture(name, ops);
        if (!m) continue;
        fold_case c = {0};
        const int V = model_vocab(m);
        add_seq(&c, -1, 0, 20, V);
        for (int k = 0; k < 4; k++) add_seq(&c, 0, 20 - 3 * k, 26, V);
        int64_t saved = 0;
        double cs = 1;
        const double d = fold_diff(m, &c, &saved, &cs);
        free_case(&c);
        CHECK_MSG(d >= 0 && cs >= 0.999, "%s %s: max abs %.3g, min cos %.6f", name, label, d, cs);
        CHECK(saved > 0);
        iv_model_free(m);
    }
}

TEST(prefix_fold_emulated)
{
    rng_state = 21;
    iv_err err = {0};
    const iv_ops *emu = iv_ops_open("emulated", "bfloat16", &err);
    REQUIRE(emu);
    check_device_fold(emu, "emulated");
    iv_ops_close(emu);
}

/* The CUDA table's attention_rows kernel inside a folded forward (skipped
 * without a GPU; scripts/gpu-check runs it). */
TEST(prefix_fold_cuda)
{
    rng_state = 21;
    iv_err err = {0};
    const iv_ops *cuda = iv_ops_open("cuda", "bfloat16", &err);
    if (!cuda) {
        iv_test_skip(err.msg);
        return;
    }
    REQUIRE(cuda->attention_rows);
    check_device_fold(cuda, "cuda");
    iv_ops_close(cuda);
}

/* Models whose token states depend on more than the tokens before them
 * report it, and the reason names the switch. */
TEST(prefix_fold_capability)
{
    static const struct {
        const char *name, *reason;
    } no[] = {
        {"llama_bidirec", "bidirectional"},
        {"qwen2_seqcls_bidir", "bidirectional"},
        {"mistral_seqcls_bidir", "bidirectional"},
        {"llama_dynamic", "sequence length"},
        {"qwen35", "DeltaNet"},
        {"qwen3_next", "DeltaNet"},
        {"bert", "bidirectional"},
    };
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
        iv_model *m = load_fixture(no[i].name, iv_cpu_ops());
        if (!m) continue;
        CHECK_MSG(m->no_fold_reason != NULL, "%s reports folding", no[i].name);
        if (m->no_fold_reason) CHECK_CONTAINS(m->no_fold_reason, no[i].reason);
        iv_model_free(m);
    }
}
