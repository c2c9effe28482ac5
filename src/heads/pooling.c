#include "heads/pooling.h"

#include <string.h>

int iv_pool_concat(const iv_ops *ops, const iv_batch *b, iv_view hidden, const iv_pool_mode *modes, int n_modes,
                   const int *skip_first, const iv_fwd_mem *mem, iv_view *out)
{
    if (n_modes <= 0) return -1;
    for (int k = 0; k < n_modes; k++)
        if (modes[k] == IV_POOL_NONE) return -1;
    const int32_t *skip_dev = NULL;
    int any_skip = 0;
    for (int s = 0; skip_first && s < b->n_seqs; s++) any_skip |= skip_first[s] != 0;
    if (any_skip) {
        int32_t *skip = iv_arena_alloc(mem->host, (size_t)b->n_seqs * sizeof(int32_t));
        if (!skip) return -1;
        for (int s = 0; s < b->n_seqs; s++) skip[s] = skip_first[s];
        if (!(skip_dev = iv_dev_upload_new(ops, mem->dev, skip, (size_t)b->n_seqs * sizeof(int32_t)))) return -1;
    }
    const int64_t H = hidden.cols;
    *out = iv_act_alloc(ops, mem->dev, b->n_seqs, n_modes * H, n_modes * H);
    if (!out->data) return -1;
    /* Each mode writes its column slice of the output (the pool op honours
     * the output's row stride), so combined pooling needs no kernel of its own. */
    for (int k = 0; k < n_modes; k++) {
        const iv_pool_args a = {
            .out = iv_view_cols(*out, k * H, H), .x = hidden, .cu_seqlens = b->cu_seqlens,
            .cu_seqlens_dev = b->cu_seqlens_dev, .skip = skip_dev, .n_seqs = b->n_seqs, .mode = modes[k],
        };
        ops->pool(ops, &a);
    }
    return 0;
}

int iv_pool(const iv_ops *ops, const iv_batch *b, iv_view hidden, iv_pool_mode mode, const int *skip_first,
            const iv_fwd_mem *mem, iv_view *out)
{
    return iv_pool_concat(ops, b, hidden, &mode, 1, skip_first, mem, out);
}
