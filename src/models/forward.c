/* The forward pass shared by every family: embeddings -> block stack ->
 * final norm. Everything family-specific arrives as data in iv_model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/fold.h"
#include "models/model.h"
#include "models/rope.h"
#include "models/taps.h"
#include "models/token_conv.h"

/* Token positions per the family's rule (see iv_pos_mode). */
static void compute_positions(const iv_model *m, const iv_batch *b, int32_t *pos)
{
    for (int s = 0; s < b->n_seqs; s++) {
        int32_t start = b->cu_seqlens[s], end = b->cu_seqlens[s + 1];
        if (m->embed.pos_mode == IV_POS_PADDING_IDX) {
            const int pad = m->embed.padding_idx;
            int32_t count = 0;
            for (int32_t t = start; t < end; t++) {
                if (b->ids[t] != pad) count++;
                pos[t] = b->ids[t] != pad ? pad + count : pad;
            }
        } else {
            for (int32_t t = start; t < end; t++) pos[t] = t - start;
        }
    }
}

static int embed_tokens(const iv_model *m, const iv_batch *b, const int32_t *pos_dev, iv_view xv,
                        const iv_fwd_mem *mem)
{
    const iv_ops *ops = m->ops;
    const int64_t T = b->n_tokens;
    /* Embeddings narrower than hidden are summed at their width, then projected. */
    iv_view ev = xv;
    if (m->embed.proj) {
        const int64_t E = m->embed.word->shape[1];
        ev = iv_act_alloc(ops, mem->dev, T, E, E);
        if (!ev.data) return -1;
    }
    ops->embed(ops, ev, m->embed.word, b->ids_dev, 0);
    if (m->embed.scale != 0 && m->embed.scale != 1) ops->scale(ops, ev, ev, m->embed.scale);
    if (m->embed.position) ops->embed(ops, ev, m->embed.position, pos_dev, 1);
    if (m->embed.token_type) {
        const int32_t *types = b->type_ids_dev;
        if (!types) {
            int32_t *zeros = iv_arena_alloc(mem->host, (size_t)T * sizeof(int32_t));
            if (!zeros) return -1;
            memset(zeros, 0, (size_t)T * sizeof(int32_t));
            if (!(types = iv_dev_upload_new(ops, mem->dev, zeros, (size_t)T * sizeof(int32_t)))) return -1;
        }
        ops->embed(ops, ev, m->embed.token_type, types, 1);
    }
    if (m->embed.proj) ops->linear(ops, xv, ev, m->embed.proj, NULL, IV_ACT_NONE, NULL);
    if (m->embed.norm.present) {
        /* Embedding norms are LayerNorms in every family that has one so far. */
        ops->layer_norm(ops, xv, xv, NULL, m->embed.norm.w, m->embed.norm.b, m->block.norm_eps);
    }
    return 0;
}

/* Layers one at a time while DeepStack features remain: feature k is added
 * to the visual rows after layer k (Qwen3VLTextModel._deepstack_process). */
static int run_layers_deepstack(const iv_model *m, const iv_batch *b, const iv_attn_extras *ex,
                                const iv_visual_inject *vi, iv_view x, const iv_fwd_mem *mem)
{
    if (vi->spec || vi->layers) return -1; /* no mask variant with DeepStack (no family asks for both) */
    const int n = vi->n_deepstack < m->n_layers ? vi->n_deepstack : m->n_layers;
    for (int l = 0; l < n; l++) {
        iv_attn_extras one = *ex;
        one.first_layer = l;
        if (iv_block_stack_forward(m->ops, &m->block, m->layers + l, 1, b, &one, x, mem)) return -1;
        for (int i = 0; i < vi->n_spans; i++) {
            const iv_view dst = iv_view_rows(x, vi->token_row[i], vi->token_row[i] + vi->len[i]);
            m->ops->add(m->ops, dst, dst, iv_view_rows(vi->deepstack[l], vi->feat_row[i], vi->feat_row[i] + vi->len[i]));
        }
    }
    iv_attn_extras rest = *ex;
    rest.first_layer = n;
    return iv_block_stack_forward(m->ops, &m->block, m->layers + n, m->n_layers - n, b, &rest, x, mem);
}

/* The block stack, with the token convolution after layer 0 when the model
 * has one. */
static int run_layers(const iv_model *m, const iv_batch *b, const iv_attn_extras *ex, const iv_visual_inject *vi,
                      iv_view x, const iv_fwd_mem *mem)
{
    if (vi && (vi->spec || vi->layers)) {
        if (m->conv.w) return -1; /* no family has both */
        return iv_block_stack_forward(m->ops, vi->spec ? vi->spec : &m->block, vi->layers ? vi->layers : m->layers,
                                      m->n_layers, b, ex, x, mem);
    }
    if (!m->conv.w || m->n_layers == 0)
        return iv_block_stack_forward(m->ops, &m->block, m->layers, m->n_layers, b, ex, x, mem);
    const iv_view emb = iv_act_alloc(m->ops, mem->dev, x.rows, x.cols, x.cols);
    if (!emb.data) return -1;
    m->ops->scale(m->ops, emb, x, 1.0f);
    if (iv_block_stack_forward(m->ops, &m->block, m->layers, 1, b, ex, x, mem) ||
        iv_token_conv_apply(m->ops, &m->conv, m->block.norm_eps, b, emb, x, mem->dev))
        return -1;
    iv_attn_extras rest = *ex;
    rest.first_layer = 1;
    return iv_block_stack_forward(m->ops, &m->block, m->layers + 1, m->n_layers - 1, b, &rest, x, mem);
}

/* T5-style bidirectional bucket of relative position (key - query), in
 * float32 arithmetic exactly as transformers computes it. */
static int rel_bucket(int rel, int num_buckets, int max_distance)
{
    int ret = 0, n = -rel;
    num_buckets /= 2;
    if (n < 0) ret += num_buckets;
    n = n < 0 ? -n : n;
    const int max_exact = num_buckets / 2;
    if (n < max_exact) return ret + n;
    float v = logf((float)n / (float)max_exact) / (float)log((double)max_distance / max_exact) *
              (float)(num_buckets - max_exact);
    int large = max_exact + (int)v;
    if (large > num_buckets - 1) large = num_buckets - 1;
    return ret + large;
}

/* Per-sequence [heads, L, L] bias blocks from the bucket table (kept on the
 * host at load), built on the host and uploaded once per forward. */
static int build_rel_bias(const iv_model *m, const iv_batch *b, const iv_fwd_mem *mem, iv_attn_extras *ex)
{
    const iv_rel_bias_spec *rb = &m->rel_bias;
    const int H = m->block.n_heads;
    iv_arena *arena = mem->host;
    int64_t *offsets = iv_arena_alloc(arena, (size_t)(b->n_seqs + 1) * sizeof(int64_t));
    if (!offsets) return -1;
    int64_t total = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        offsets[s] = total;
        int64_t L = iv_batch_seqlen(b, s);
        total += (int64_t)H * L * L;
    }
    offsets[b->n_seqs] = total;
    float *bias = iv_arena_alloc(arena, (size_t)total * sizeof(float));
    if (!bias) return -1;
    const float *table = rb->table->data; /* [buckets, heads] */
    for (int s = 0; s < b->n_seqs; s++) {
        const int L = iv_batch_seqlen(b, s);
        float *blk = bias + offsets[s];
        for (int i = 0; i < L; i++)
            for (int j = 0; j < L; j++) {
                int bucket = rel_bucket(j - i, rb->num_buckets, rb->max_distance);
                for (int h = 0; h < H; h++) blk[((int64_t)h * L + i) * L + j] = table[bucket * H + h];
            }
    }
    ex->bias = iv_dev_upload_new(m->ops, mem->dev, bias, (size_t)total * sizeof(float));
    ex->bias_offsets = offsets;
    ex->bias_offsets_dev = iv_dev_upload_new(m->ops, mem->dev, offsets, (size_t)(b->n_seqs + 1) * sizeof(int64_t));
    return ex->bias && ex->bias_offsets_dev ? 0 : -1;
}

/* Rotary frequencies per sequence when they depend on its length (dynamic
 * NTK, LongRoPE); ex->seq_inv_freq stays NULL when no sequence needs its own. */
static int build_seq_rope(const iv_model *m, const iv_batch *b, iv_arena *arena, iv_attn_extras *ex, iv_err *err)
{
    const iv_rope_params *p = m->seq_rope;
    int any = 0;
    for (int s = 0; s < b->n_seqs; s++) any |= iv_rope_length_dependent(p, iv_batch_seqlen(b, s));
    if (!any) return 0;
    const int half = p->rot_dim / 2;
    float *f = iv_arena_alloc(arena, (size_t)b->n_seqs * half * sizeof(float));
    if (!f) return iv_errf(err, IV_E_NOMEM, "out of memory for rotary frequencies");
    for (int s = 0; s < b->n_seqs; s++) {
        float attn_factor; /* the same for every length: the layers carry it */
        if (iv_rope_inv_freq_for_length(p, iv_batch_seqlen(b, s), f + (int64_t)s * half, &attn_factor, err))
            return -1;
    }
    ex->seq_inv_freq = f;
    return 0;
}

/* The per-layer inputs from the scaled embeddings x (see iv_model.ple_w). */
static int build_ple(const iv_model *m, const iv_batch *b, iv_view xv, iv_arena *dev, iv_attn_extras *ex)
{
    const int64_t W = (int64_t)m->n_layers * m->block.ple_dim;
    const iv_view pv = iv_act_alloc(m->ops, dev, xv.rows, W, W);
    if (!pv.data) return -1;
    m->ops->linear(m->ops, pv, xv, m->ple_w, NULL, IV_ACT_NONE, NULL);
    m->ops->scale(m->ops, pv, pv, m->ple_scale);
    m->ops->head_rms_norm(m->ops, pv, m->n_layers, m->block.ple_dim, m->ple_norm_w, m->block.norm_eps, 0.0f);
    if (m->ple_tok) {
        /* (projection + table[id] * scale) * mix, each step rounded as torch does */
        const iv_view tv = iv_act_alloc(m->ops, dev, xv.rows, W, W);
        if (!tv.data) return -1;
        m->ops->embed(m->ops, tv, m->ple_tok, b->ids_dev, 0);
        m->ops->scale(m->ops, tv, tv, m->ple_tok_scale);
        m->ops->add(m->ops, pv, pv, tv);
        m->ops->scale(m->ops, pv, pv, m->ple_mix_scale);
    }
    ex->ple = pv;
    return 0;
}

int iv_model_out_width(const iv_model *m) { return m->out_proj ? (int)m->out_proj->shape[0] : m->block.hidden; }

/* The ids the embedding tables read: the batch's, or a copy with the
 * model's as-pad ids replaced (uploaded from a temporary and synced, only
 * for batches that hold such an id). */
static int upload_embed_ids(const iv_model *m, iv_batch *b, iv_arena *dev, iv_err *err)
{
    const size_t T = (size_t)b->n_tokens;
    const iv_embed_spec *es = &m->embed;
    int64_t first = -1;
    for (size_t t = 0; es->n_as_pad && t < T && first < 0; t++)
        for (int k = 0; k < es->n_as_pad; k++)
            if (b->ids[t] == es->as_pad[k]) first = (int64_t)t;
    if (first < 0) {
        b->ids_dev = iv_dev_upload_new(m->ops, dev, b->ids, T * sizeof(int32_t));
        return 0;
    }
    int32_t *ids = malloc(T * sizeof *ids);
    if (!ids) return iv_errf(err, IV_E_NOMEM, "out of memory for a batch of %lld tokens", (long long)T);
    for (size_t t = 0; t < T; t++) {
        ids[t] = b->ids[t];
        for (int k = 0; k < es->n_as_pad; k++)
            if (ids[t] == es->as_pad[k]) ids[t] = es->as_pad_id;
    }
    b->ids_dev = iv_dev_upload_new(m->ops, dev, ids, T * sizeof *ids);
    const int rc = b->ids_dev ? m->ops->sync(m->ops, err) : 0; /* the copy may still read ids */
    free(ids);
    return rc ? -1 : 0;
}

int iv_model_upload_batch(const iv_model *m, iv_batch *b, iv_arena *dev, iv_err *err)
{
    const iv_ops *ops = m->ops;
    const size_t T = (size_t)b->n_tokens, n = (size_t)b->n_seqs;
    b->max_seqlen = 0;
    for (int s = 0; s < b->n_seqs; s++)
        if (iv_batch_seqlen(b, s) > b->max_seqlen) b->max_seqlen = iv_batch_seqlen(b, s);
    if (upload_embed_ids(m, b, dev, err)) return -1;
    b->cu_seqlens_dev = iv_dev_upload_new(ops, dev, b->cu_seqlens, (n + 1) * sizeof(int32_t));
    b->type_ids_dev = b->type_ids ? iv_dev_upload_new(ops, dev, b->type_ids, T * sizeof(int32_t)) : NULL;
    b->key_mask_dev = b->key_mask ? iv_dev_upload_new(ops, dev, b->key_mask, T) : NULL;
    if (!b->ids_dev || !b->cu_seqlens_dev || (b->type_ids && !b->type_ids_dev) || (b->key_mask && !b->key_mask_dev))
        return iv_errf(err, IV_E_NOMEM, "out of device memory for a batch of %lld tokens", (long long)T);
    return 0;
}

const char *iv_model_head_rows_blocker(const iv_model *m)
{
    if (m->n_layers < 1) return "no layers";
    if (m->conv.w) return "a token convolution";
    if (m->alibi_slopes) return "ALiBi";
    if (m->rel_bias.table) return "a relative position bias";
    if (m->ple_w) return "per-layer inputs";
    return iv_block_head_rows_blocker(&m->block, &m->layers[m->n_layers - 1]);
}

static int forward_text(const iv_model *m, const iv_batch *b, const iv_visual_inject *vi, const int32_t *head_rows,
                        const iv_fwd_mem *mem, iv_view *hidden, iv_err *err);

int iv_model_head_rows_apply(const iv_model *m, const iv_batch *b)
{
    if (m->no_head_rows_reason || b->key_mask || !m->ops->attention_rows) return 0;
    const iv_layer *L = &m->layers[m->n_layers - 1];
    const int d = L->head_dim ? L->head_dim : m->block.head_dim, cap = m->ops->attention_rows_max_head_dim;
    return cap <= 0 || d <= cap;
}

int iv_model_forward(const iv_model *m, const iv_batch *b, const iv_fwd_mem *mem, iv_view *hidden, iv_err *err)
{
    return forward_text(m, b, NULL, NULL, mem, hidden, err);
}

int iv_model_forward_visual(const iv_model *m, const iv_batch *b, const iv_visual_inject *vi, const iv_fwd_mem *mem,
                            iv_view *hidden, iv_err *err)
{
    return forward_text(m, b, vi, NULL, mem, hidden, err);
}

int iv_model_forward_head_rows(const iv_model *m, const iv_batch *b, const int32_t *rows, const iv_fwd_mem *mem,
                               iv_view *hidden, iv_err *err)
{
    return forward_text(m, b, NULL, rows, mem, hidden, err);
}

/* The text stack over the batch, with visual rows when vi is set; with
 * head_rows, only those rows' final states, computed past the last layer's
 * keys and values for them alone when the model allows it, else gathered
 * from the full pass. */
static int forward_text(const iv_model *m, const iv_batch *b, const iv_visual_inject *vi, const int32_t *head_rows,
                        const iv_fwd_mem *mem, iv_view *hidden, iv_err *err)
{
    const iv_ops *ops = m->ops;
    const int64_t T = b->n_tokens, H = m->block.hidden;
    iv_view x = iv_act_alloc(ops, mem->dev, T, H, H);
    int32_t *pos = iv_arena_alloc(mem->host, (size_t)T * sizeof(int32_t));
    if (!x.data || !pos) return iv_errf(err, IV_E_NOMEM, "out of memory for activations of %lld tokens", (long long)T);
    compute_positions(m, b, pos);
    const int32_t *pos_dev = iv_dev_upload_new(ops, mem->dev, pos, (size_t)T * sizeof(int32_t));
    if (!pos_dev || embed_tokens(m, b, pos_dev, x, mem))
        return iv_errf(err, IV_E_NOMEM, "out of memory for embeddings of %lld tokens", (long long)T);

    if (vi && (m->conv.w || m->seq_rope || m->rel_bias.table))
        return iv_errf(err, IV_E_INTERNAL, "visual rows with a token convolution, length-dependent rotary or a "
                                           "relative bias");
    /* Visual rows replace their tokens' embeddings before the per-layer
     * inputs are computed: Gemma4's PLE projection reads the merged rows,
     * its token table the placeholder ids embedded as pad (as_pad); audio soft
     * tokens alike (models/audio_gemma4.c). */
    for (int i = 0; vi && i < vi->n_spans; i++)
        ops->scale(ops, iv_view_rows(x, vi->token_row[i], vi->token_row[i] + vi->len[i]),
                   iv_view_rows(vi->embeds, vi->feat_row[i], vi->feat_row[i] + vi->len[i]), 1.0f);
    iv_tap(ops, "embeddings", -1, x);
    iv_attn_extras ex = {.positions = pos, .positions_dev = pos_dev, .alibi_slopes = m->alibi_slopes};
    if (vi && vi->positions) {
        ex.positions = vi->positions;
        ex.positions_dev = vi->positions_dev;
        ex.pos_axis_stride = vi->pos_axis_stride;
    }
    if (vi && vi->bias) {
        ex.bias = vi->bias;
        ex.bias_offsets = vi->bias_offsets;
        ex.bias_offsets_dev = vi->bias_offsets_dev;
    }
    if (m->rel_bias.table && build_rel_bias(m, b, mem, &ex))
        return iv_errf(err, IV_E_NOMEM, "out of memory for relative position bias");
    if (m->seq_rope && build_seq_rope(m, b, mem->host, &ex, err)) return -1;
    if (m->ple_w && build_ple(m, b, x, mem->dev, &ex))
        return iv_errf(err, IV_E_NOMEM, "out of memory for per-layer inputs of %lld tokens", (long long)T);
    const int32_t *rows_dev = NULL;
    if (head_rows) {
        if (!(rows_dev = iv_dev_upload_new(ops, mem->dev, head_rows, (size_t)b->n_seqs * sizeof(int32_t))))
            return iv_errf(err, IV_E_NOMEM, "out of memory for the head's rows");
        if (!vi && iv_model_head_rows_apply(m, b)) {
            ex.head_rows = head_rows;
            ex.head_rows_dev = rows_dev;
        }
    }
    if (vi && vi->n_deepstack > 0 ? run_layers_deepstack(m, b, &ex, vi, x, mem) : run_layers(m, b, &ex, vi, x, mem))
        return iv_errf(err, IV_E_NOMEM, "out of memory for activations of %lld tokens", (long long)T);
    if (ex.head_rows) {
        x = iv_view_rows(x, 0, b->n_seqs); /* the last layer left the head's rows there */
    } else if (head_rows) {
        const iv_view kept = iv_act_alloc(ops, mem->dev, b->n_seqs, H, H);
        if (!kept.data) return iv_errf(err, IV_E_NOMEM, "out of memory for the head's rows");
        ops->moe_gather(ops, kept, x, rows_dev, 1);
        x = kept;
    }
    if (m->final_norm.present) iv_block_norm(ops, &m->block, &m->final_norm, x, x, NULL);
    if (m->out_proj) {
        const int64_t E = m->out_proj->shape[0];
        const iv_view y = iv_act_alloc(ops, mem->dev, x.rows, E, E);
        if (!y.data) return iv_errf(err, IV_E_NOMEM, "out of memory for activations of %lld tokens", (long long)T);
        ops->linear(ops, y, x, m->out_proj, NULL, IV_ACT_NONE, NULL);
        x = y;
    }
    iv_tap(ops, "final", -1, x);
    *hidden = x;
    return 0;
}

int iv_head_apply(const iv_ops *ops, const iv_head *h, iv_view in, iv_arena *dev, iv_view *out)
{
    iv_view cur = in;
    for (int i = 0; i < h->n_steps; i++) {
        const iv_head_step *st = &h->steps[i];
        const int64_t oc = st->w->shape[0];
        const int last = i == h->n_steps - 1;
        const iv_view y = last && out->data ? *out : iv_act_alloc(ops, dev, in.rows, oc, oc);
        if (!y.data) return -1;
        ops->linear(ops, y, cur, st->w, st->b, st->act, NULL);
        if (st->ln_w) ops->layer_norm(ops, y, y, NULL, st->ln_w, st->ln_b, st->ln_eps);
        cur = y;
    }
    if (h->softcap > 0) { /* transformers: logits / cap, tanh, * cap */
        ops->scale(ops, cur, cur, 1.0f / h->softcap);
        ops->act(ops, cur, cur, IV_ACT_TANH);
        ops->scale(ops, cur, cur, h->softcap);
    }
    *out = cur;
    return 0;
}

/* The folded forward (models/fold.h): the backbone over the plan's computed
 * rows, cached prefixes' keys and values copied into each layer, then the
 * final states of every row gathered back into the original batch's order. */
int iv_model_forward_folded(const iv_model *m, const iv_batch *b, const iv_fold_plan *plan,
                            const iv_fold_prefix *prefixes, const iv_fold_kv *store, const iv_view *store_final,
                            int n_store, const iv_fwd_mem *mem, iv_view *hidden, iv_err *err)
{
    const iv_ops *ops = m->ops;
    const int64_t T = b->n_tokens, U = plan->batch.n_tokens, C = plan->n_cached, W = iv_model_out_width(m);
    if (!ops->attention_rows)
        return iv_errf(err, IV_E_INTERNAL, "prefix folding on the %s table, which has no attention_rows", ops->name);
    /* Every row's final state: cached ones copied in, computed ones below. */
    const iv_view all = iv_act_alloc(ops, mem->dev, C + U, W, W);
    iv_fold_kv *load = iv_arena_alloc(mem->host, (size_t)(plan->n_load > 0 ? plan->n_load : 1) * sizeof *load);
    const int32_t *out_row_dev = iv_dev_upload_new(ops, mem->dev, plan->out_row, (size_t)T * sizeof(int32_t));
    if (!all.data || !load || !out_row_dev) goto oom;
    for (int i = 0; i < plan->n_load; i++) {
        const iv_fold_prefix *p = &prefixes[plan->load_prefix[i]];
        load[i] = (iv_fold_kv){plan->load_row0[i], p->len, p->k, p->v};
        ops->scale(ops, iv_view_rows(all, plan->load_row0[i], plan->load_row0[i] + p->len), p->final, 1.0f);
    }
    if (U > 0) {
        iv_batch fb = plan->batch;
        if (iv_model_upload_batch(m, &fb, mem->dev, err)) return -1;
        const iv_view x = iv_act_alloc(ops, mem->dev, U, m->block.hidden, m->block.hidden);
        const int32_t *pos_dev = iv_dev_upload_new(ops, mem->dev, plan->pos, (size_t)(C + U) * sizeof(int32_t));
        const int32_t *kv_cu_dev = iv_dev_upload_new(ops, mem->dev, plan->kv_cu, (size_t)(fb.n_seqs + 1) * sizeof(int32_t));
        const int32_t *kv_rows_dev = iv_dev_upload_new(ops, mem->dev, plan->kv_rows,
                                                       (size_t)(plan->kv_cu[fb.n_seqs] > 0 ? plan->kv_cu[fb.n_seqs] : 1) *
                                                           sizeof(int32_t));
        if (!x.data || !pos_dev || !kv_cu_dev || !kv_rows_dev || embed_tokens(m, &fb, pos_dev + C, x, mem)) goto oom;
        iv_tap(ops, "embeddings", -1, x);
        const iv_fold_attn fold = {
            .n_cached = C, .kv_cu = plan->kv_cu, .kv_cu_dev = kv_cu_dev, .kv_rows_dev = kv_rows_dev,
            .pos_dev = pos_dev, .max_keys = plan->max_keys,
            .n_load = plan->n_load, .load = load, .n_store = n_store, .store = store,
        };
        const iv_attn_extras ex = {.positions = plan->pos + C, .positions_dev = pos_dev + C, .fold = &fold};
        if (run_layers(m, &fb, &ex, NULL, x, mem)) goto oom;
        iv_view y = x;
        if (m->final_norm.present) iv_block_norm(ops, &m->block, &m->final_norm, x, x, NULL);
        if (m->out_proj) {
            y = iv_act_alloc(ops, mem->dev, U, W, W);
            if (!y.data) goto oom;
            ops->linear(ops, y, x, m->out_proj, NULL, IV_ACT_NONE, NULL);
        }
        iv_tap(ops, "final", -1, y);
        ops->scale(ops, iv_view_rows(all, C, C + U), y, 1.0f);
        for (int i = 0; i < n_store; i++)
            ops->scale(ops, store_final[i], iv_view_rows(all, store[i].row0, store[i].row0 + store[i].len), 1.0f);
    }
    /* Heads read the original rows: a row gather (the MoE gather with one
     * choice per token is exactly that). */
    const iv_view out = iv_act_alloc(ops, mem->dev, T, W, W);
    if (!out.data) goto oom;
    ops->moe_gather(ops, out, all, out_row_dev, 1);
    *hidden = out;
    return 0;
oom:
    return iv_errf(err, IV_E_NOMEM, "out of memory for a folded batch of %lld tokens", (long long)T);
}
