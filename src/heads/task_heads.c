#include "heads/task_heads.h"

#include <math.h>
#include <string.h>
#include "heads/pooling.h"

/* IV_SEQ_POOL_LAST_NON_PAD: per sequence, the index of its rightmost token
 * that is not the pad id (0 when all are; transformers' argmax of
 * index * non_pad). Read from the host ids; the pool op's CLS mode with that
 * many leading rows skipped then picks exactly that row on any device. */
static int *last_non_pad(const iv_batch *b, int32_t pad, const iv_fwd_mem *mem)
{
    int *skip = iv_arena_alloc(mem->host, (size_t)b->n_seqs * sizeof(int));
    if (!skip) return NULL;
    for (int s = 0; s < b->n_seqs; s++) {
        skip[s] = 0;
        for (int32_t t = b->cu_seqlens[s + 1] - 1; t >= b->cu_seqlens[s]; t--)
            if (b->ids[t] != pad) {
                skip[s] = t - b->cu_seqlens[s];
                break;
            }
    }
    return skip;
}

int iv_head_classify(const iv_model *m, const iv_batch *b, iv_view hidden, float *out, const iv_fwd_mem *mem)
{
    static const iv_pool_mode modes[] = {[IV_SEQ_POOL_FIRST] = IV_POOL_CLS, [IV_SEQ_POOL_MEAN] = IV_POOL_MEAN,
                                         [IV_SEQ_POOL_LAST] = IV_POOL_LAST, [IV_SEQ_POOL_LAST_NON_PAD] = IV_POOL_CLS};
    const int *skip = NULL;
    if (m->seq_head_pool == IV_SEQ_POOL_LAST_NON_PAD && !(skip = last_non_pad(b, m->cfg.pad_token_id, mem)))
        return -1;
    iv_view pooled, logits = {0};
    if (iv_pool(m->ops, b, hidden, modes[m->seq_head_pool], skip, mem, &pooled) ||
        iv_head_apply(m->ops, &m->seq_head, pooled, mem->dev, &logits))
        return -1;
    iv_ops_download_f32(m->ops, logits, out);
    return 0;
}

int iv_head_token_classify(const iv_model *m, const iv_batch *b, iv_view hidden, float *out, const iv_fwd_mem *mem)
{
    iv_view logits = {0};
    if (iv_head_apply(m->ops, &m->token_head, hidden, mem->dev, &logits)) return -1;
    iv_ops_download_f32(m->ops, logits, out);
    return 0;
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
int iv_head_splade(const iv_model *m, const iv_batch *b, iv_view hidden, float *out, const iv_fwd_mem *mem)
{
    const iv_ops *ops = m->ops;
    const int64_t V = m->mlm_head.out_dim, T = b->n_tokens;
    const iv_view chunk = iv_act_alloc(ops, mem->dev, IV_SPLADE_CHUNK, V, V);
    /* The running max reads the logits on the host: in place on the CPU, a
     * downloaded copy on other devices (iv_ops_read_f32). */
    const int in_place = ops->host_visible && ops->act_dtype == IV_F32;
    float *host = in_place ? NULL : iv_arena_alloc(mem->host, (size_t)IV_SPLADE_CHUNK * V * sizeof(float));
    if (!chunk.data || (!in_place && !host)) return -1;
    memset(out, 0, (size_t)b->n_seqs * V * sizeof(float));
    int s = 0;
    for (int64_t t0 = 0; t0 < T; t0 += IV_SPLADE_CHUNK) {
        const int64_t n = T - t0 < IV_SPLADE_CHUNK ? T - t0 : IV_SPLADE_CHUNK;
        iv_view logits = iv_view_rows(chunk, 0, n);
        if (iv_head_apply(ops, &m->mlm_head, iv_view_rows(hidden, t0, t0 + n), mem->dev, &logits)) return -1;
        int64_t ld;
        const float *rows = iv_ops_read_f32(ops, logits, host, &ld);
        for (int64_t t = 0; t < n; t++) {
            while (t0 + t >= b->cu_seqlens[s + 1]) s++;
            float *o = out + (int64_t)s * V;
            const float *row = rows + t * ld;
#pragma omp simd
            for (int64_t v = 0; v < V; v++) o[v] = row[v] > o[v] ? row[v] : o[v];
        }
    }
    const int64_t total = (int64_t)b->n_seqs * V;
#pragma omp parallel for schedule(static) if (total >= (1 << 16))
    for (int64_t i = 0; i < total; i++) out[i] = log1pf(out[i]);
    return 0;
}
