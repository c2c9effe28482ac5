/* Gated DeltaNet (Qwen3.5's linear_attention layers), as transformers'
 * Qwen3_5GatedDeltaNet computes it without a cache, on packed sequences:
 * the convolution and the recurrence both restart at each sequence's first
 * token (the ops take cu_seqlens), which is what a batch of one sequence
 * per row, unpadded, gives. */
#include "models/block_deltanet.h"

void iv_block_deltanet(const iv_ops *ops, const iv_deltanet *d, const iv_batch *b, iv_view in, iv_view proj,
                       iv_view conv, iv_view out)
{
    const int64_t T = in.rows, Hv = d->n_v_heads;
    const int64_t key = (int64_t)d->n_k_heads * d->k_head_dim, value = Hv * d->v_head_dim;
    const int64_t cc = iv_deltanet_conv_cols(d), pc = iv_deltanet_proj_cols(d);
    const iv_view p = iv_view_make(proj.data, proj.dtype, T, pc, pc);
    ops->linear(ops, p, in, d->in_w, NULL, IV_ACT_NONE, NULL);

    const iv_view c = iv_view_make(conv.data, conv.dtype, T, cc, cc);
    const iv_causal_conv_args ca = {
        .y = c, .x = iv_view_cols(p, 0, cc), .w = d->conv_w, .b = d->conv_b, .act = d->conv_act,
        .cu_seqlens = b->cu_seqlens, .cu_seqlens_dev = b->cu_seqlens_dev, .n_seqs = b->n_seqs,
    };
    ops->causal_conv1d(ops, &ca);

    const iv_view o = iv_view_cols(out, 0, value), z = iv_view_cols(p, cc, value);
    const iv_delta_rule_args da = {
        .out = o,
        .q = iv_view_cols(c, 0, key), .k = iv_view_cols(c, key, key), .v = iv_view_cols(c, 2 * key, value),
        .b = iv_view_cols(p, cc + value, Hv), .a = iv_view_cols(p, cc + value + Hv, Hv),
        .a_log = d->a_log, .dt_bias = d->dt_bias,
        .n_k_heads = d->n_k_heads, .n_v_heads = d->n_v_heads, .k_head_dim = d->k_head_dim, .v_head_dim = d->v_head_dim,
        .cu_seqlens = b->cu_seqlens, .cu_seqlens_dev = b->cu_seqlens_dev, .n_seqs = b->n_seqs, .chunk = 64, /* transformers' chunk_size */
    };
    /* The chunked form wherever the table has it: it is the reference's own
     * prefill path (transformers' chunk of 64), and on the CPU it pays at
     * every length (bench/bench_deltanet.c, Qwen3.5-0.8B's heads): a first
     * chunk reads no state and a last one writes none, so sequences up to
     * 64 tokens run 2-5x faster than token by token, and longer ones turn
     * the state traffic into small matrix products (about 1.1x at 1-4k
     * tokens). Decided per table, never per batch, so a sequence's bits do
     * not depend on its batch mates. */
    if (ops->delta_chunk)
        ops->delta_chunk(ops, &da);
    else
        ops->delta_rule(ops, &da);
    /* Qwen3_5RMSNormGated: w * rms_norm(core) per value head, times silu(z). */
    ops->head_rms_norm(ops, o, d->n_v_heads, d->v_head_dim, d->norm_w, d->norm_eps, 0.0f);
    ops->gate_mul(ops, o, o, z, IV_ACT_SILU);
}
