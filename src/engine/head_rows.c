/* Which rows a head reads (engine/head_rows.h). Each rule below mirrors the
 * pool op's (ops/ops.h, iv_pool_args) or the classifier's (heads/
 * task_heads.c) choice of row, so the row kept is the row read. */
#include "engine/head_rows.h"

#include <string.h>

/* The row CLS pooling takes: the first kept, or the first when the skip
 * would leave nothing. */
static int32_t first_kept(const iv_batch *b, int s, int skip)
{
    return b->cu_seqlens[s] + (skip < iv_batch_seqlen(b, s) ? skip : 0);
}

/* The rightmost row that is not the pad id (the first when all are). */
static int32_t last_non_pad(const iv_batch *b, int s, int32_t pad)
{
    for (int32_t t = b->cu_seqlens[s + 1] - 1; t >= b->cu_seqlens[s]; t--)
        if (b->ids[t] != pad) return t;
    return b->cu_seqlens[s];
}

const int32_t *iv_head_rows_pick(const iv_head_reads *h, const iv_batch *b, const int *skip, iv_arena *arena)
{
    int rule; /* 0 first kept, 1 last, 2 last non-pad */
    if (h->task == IV_TASK_EMBED && h->n_pool_modes == 1 && h->pool_modes[0] == IV_POOL_CLS) rule = 0;
    else if (h->task == IV_TASK_EMBED && h->n_pool_modes == 1 && h->pool_modes[0] == IV_POOL_LAST) rule = 1;
    else if (h->task == IV_TASK_CLASSIFY && h->seq_pool == IV_SEQ_POOL_FIRST) rule = 0, skip = NULL;
    else if (h->task == IV_TASK_CLASSIFY && h->seq_pool == IV_SEQ_POOL_LAST) rule = 1;
    else if (h->task == IV_TASK_CLASSIFY && h->seq_pool == IV_SEQ_POOL_LAST_NON_PAD) rule = 2;
    else return NULL;
    int32_t *rows = iv_arena_alloc(arena, (size_t)b->n_seqs * sizeof *rows);
    if (!rows) return NULL;
    for (int s = 0; s < b->n_seqs; s++)
        rows[s] = rule == 0 ? first_kept(b, s, skip ? skip[s] : 0)
                  : rule == 1 ? b->cu_seqlens[s + 1] - 1
                              : last_non_pad(b, s, h->pad_id);
    return rows;
}

int iv_head_rows_batch(const iv_ops *ops, const iv_batch *b, const int32_t *rows, const iv_fwd_mem *mem,
                       iv_batch *one)
{
    const int n = b->n_seqs;
    int32_t *ids = iv_arena_alloc(mem->host, (size_t)n * sizeof *ids);
    int32_t *cu = iv_arena_alloc(mem->host, (size_t)(n + 1) * sizeof *cu);
    if (!ids || !cu) return -1;
    for (int s = 0; s <= n; s++) cu[s] = s;
    for (int s = 0; s < n; s++) ids[s] = b->ids[rows[s]];
    *one = (iv_batch){.n_seqs = n, .n_tokens = n, .ids = ids, .cu_seqlens = cu, .max_seqlen = n > 0 ? 1 : 0};
    one->ids_dev = iv_dev_upload_new(ops, mem->dev, ids, (size_t)n * sizeof *ids);
    one->cu_seqlens_dev = iv_dev_upload_new(ops, mem->dev, cu, (size_t)(n + 1) * sizeof *cu);
    return one->ids_dev && one->cu_seqlens_dev ? 0 : -1;
}
