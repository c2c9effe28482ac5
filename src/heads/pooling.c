#include "heads/pooling.h"

#include <string.h>

int iv_pool(const iv_ops *ops, const iv_batch *b, iv_view hidden, iv_pool_mode mode, const int *skip_first,
            const iv_fwd_mem *mem, iv_view *out)
{
    if (mode == IV_POOL_NONE) return -1;
    const int32_t *skip_dev = NULL;
    int any_skip = 0;
    for (int s = 0; skip_first && s < b->n_seqs; s++) any_skip |= skip_first[s] != 0;
    if (any_skip) {
        int32_t *skip = iv_arena_alloc(mem->host, (size_t)b->n_seqs * sizeof(int32_t));
        if (!skip) return -1;
        for (int s = 0; s < b->n_seqs; s++) skip[s] = skip_first[s];
        if (!(skip_dev = iv_dev_upload_new(ops, mem->dev, skip, (size_t)b->n_seqs * sizeof(int32_t)))) return -1;
    }
    *out = iv_act_alloc(ops, mem->dev, b->n_seqs, hidden.cols, hidden.cols);
    if (!out->data) return -1;
    const iv_pool_args a = {
        .out = *out, .x = hidden, .cu_seqlens = b->cu_seqlens, .cu_seqlens_dev = b->cu_seqlens_dev,
        .skip = skip_dev, .n_seqs = b->n_seqs, .mode = mode,
    };
    ops->pool(ops, &a);
    return 0;
}
