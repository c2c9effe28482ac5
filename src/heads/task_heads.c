#include "heads/task_heads.h"

#include <math.h>
#include <string.h>
#include "heads/pooling.h"

int iv_head_classify(const iv_model *m, const iv_batch *b, const float *hidden, float *out, iv_arena *arena)
{
    const int H = iv_model_out_width(m);
    float *pooled = iv_arena_alloc(arena, (size_t)b->n_seqs * H * sizeof(float));
    if (!pooled) return -1;
    static const iv_pool_mode modes[] = {[IV_SEQ_POOL_FIRST] = IV_POOL_CLS, [IV_SEQ_POOL_MEAN] = IV_POOL_MEAN,
                                         [IV_SEQ_POOL_LAST] = IV_POOL_LAST};
    if (iv_pool(b, hidden, H, modes[m->seq_head_pool], NULL, pooled)) return -1;
    return iv_head_apply(m->ops, &m->seq_head, pooled, b->n_seqs, H, out, arena);
}

int iv_head_token_classify(const iv_model *m, const iv_batch *b, const float *hidden, float *out,
                           iv_arena *arena)
{
    return iv_head_apply(m->ops, &m->token_head, hidden, b->n_tokens, iv_model_out_width(m), out, arena);
}

/* Tokens per MLM chunk: bounds the [chunk, vocab] logits buffer. */
#define IV_SPLADE_CHUNK 256

/* max over a sequence's tokens of log1p(relu(x)) is log1p(relu(max x)),
 * log1p being increasing: the chunks keep a running max of the raw logits
 * (0 stands for the relu) and log1p runs once per sequence and vocabulary
 * entry, not once per token and entry. The chunks cut across sequences, so
 * the decoder weight is streamed once per 256 tokens however short the
 * sequences are; every row of the head is computed alone (packed weights,
 * row-wise norms), so a sequence's vector does not depend on its neighbours. */
int iv_head_splade(const iv_model *m, const iv_batch *b, const float *hidden, float *out, iv_arena *arena)
{
    const int64_t V = m->mlm_head.out_dim, H = iv_model_out_width(m), T = b->n_tokens;
    float *logits = iv_arena_alloc(arena, (size_t)IV_SPLADE_CHUNK * V * sizeof(float));
    if (!logits) return -1;
    memset(out, 0, (size_t)b->n_seqs * V * sizeof(float));
    int s = 0;
    for (int64_t t0 = 0; t0 < T; t0 += IV_SPLADE_CHUNK) {
        const int64_t n = T - t0 < IV_SPLADE_CHUNK ? T - t0 : IV_SPLADE_CHUNK;
        if (iv_head_apply(m->ops, &m->mlm_head, hidden + t0 * H, n, H, logits, arena)) return -1;
        for (int64_t t = 0; t < n; t++) {
            while (t0 + t >= b->cu_seqlens[s + 1]) s++;
            float *o = out + (int64_t)s * V;
            const float *row = logits + t * V;
#pragma omp simd
            for (int64_t v = 0; v < V; v++) o[v] = row[v] > o[v] ? row[v] : o[v];
        }
    }
    const int64_t total = (int64_t)b->n_seqs * V;
#pragma omp parallel for schedule(static) if (total >= (1 << 16))
    for (int64_t i = 0; i < total; i++) out[i] = log1pf(out[i]);
    return 0;
}
