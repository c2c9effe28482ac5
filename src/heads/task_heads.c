#include "heads/task_heads.h"

#include <math.h>
#include <string.h>
#include "heads/pooling.h"

int iv_head_classify(const iv_model *m, const iv_batch *b, const float *hidden, float *out, iv_arena *arena)
{
    const int H = m->block.hidden;
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
    return iv_head_apply(m->ops, &m->token_head, hidden, b->n_tokens, m->block.hidden, out, arena);
}

/* Tokens per MLM chunk: bounds the [chunk, vocab] logits buffer. */
#define IV_SPLADE_CHUNK 256

int iv_head_splade(const iv_model *m, const iv_batch *b, const float *hidden, float *out, iv_arena *arena)
{
    const int64_t V = m->mlm_head.out_dim, H = m->block.hidden;
    float *logits = iv_arena_alloc(arena, (size_t)IV_SPLADE_CHUNK * V * sizeof(float));
    if (!logits) return -1;
    for (int s = 0; s < b->n_seqs; s++) {
        float *o = out + (int64_t)s * V;
        /* log1p(relu(x)) >= 0, so 0 is the identity for the max. */
        memset(o, 0, (size_t)V * sizeof(float));
        for (int t0 = b->cu_seqlens[s]; t0 < b->cu_seqlens[s + 1]; t0 += IV_SPLADE_CHUNK) {
            int n = b->cu_seqlens[s + 1] - t0;
            if (n > IV_SPLADE_CHUNK) n = IV_SPLADE_CHUNK;
            if (iv_head_apply(m->ops, &m->mlm_head, hidden + (int64_t)t0 * H, n, H, logits, arena)) return -1;
            for (int t = 0; t < n; t++) {
                const float *row = logits + (int64_t)t * V;
                for (int64_t v = 0; v < V; v++) {
                    const float val = row[v] > 0 ? log1pf(row[v]) : 0.0f;
                    if (val > o[v]) o[v] = val;
                }
            }
        }
    }
    return 0;
}
