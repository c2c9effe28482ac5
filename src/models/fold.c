/* Prefix folding: which models may fold, and the trie that folds a batch
 * (models/fold.h). */
#include "models/fold.h"

#include <string.h>

#include "models/model.h"

const char *iv_model_fold_blocker(const iv_model *m)
{
    /* Each condition is a place where a token's state would depend on
     * something other than the tokens before it at their absolute
     * positions, or where the folded path has no equivalent yet. */
    if (!m->block.causal) return "bidirectional attention";
    if (m->embed.pos_mode != IV_POS_INDEX) return "positions derived from the token ids";
    if (m->embed.token_type) return "token type embeddings";
    if (m->seq_rope) return "rotary frequencies that depend on the sequence length (dynamic NTK, LongRoPE)";
    if (m->block.logn_base > 1) return "query scaling by the sequence length";
    if (m->alibi_slopes) return "ALiBi";
    if (m->rel_bias.table) return "a relative position bias";
    if (m->conv.w) return "a token convolution";
    if (m->ple_w) return "per-layer inputs";
    for (int l = 0; l < m->n_layers; l++) {
        const iv_layer *L = &m->layers[l];
        if (L->deltanet) return "recurrent (Gated DeltaNet) layers";
        if (L->dyn_bias) return "a dynamic attention bias";
        if (L->window_right >= 0) return "a right attention window";
        if (L->head_dim || L->n_kv_heads || L->rot_dim) return "layers with their own attention geometry";
        if (L->kv_reuse) return "layers that reuse an earlier layer's keys and values";
    }
    return NULL;
}

/* A trie node: one token at one depth (its position), under its parent. */
typedef struct trie_node {
    int32_t token, depth;
    int parent, first_child, last_child, next_sibling, n_children;
    int prefix;   /* >= 0: the node stands for cached prefix `prefix` (all its tokens) */
    int alone;    /* a node of an IV_FOLD_ALONE sequence: never shared */
    int64_t row;  /* computed rows: the row; prefix nodes: their first row */
    int run;
} trie_node;

typedef struct trie {
    trie_node *n;
    int count;
} trie;

static int trie_add(trie *t, int parent, int32_t token, int32_t depth, int prefix)
{
    const int i = t->count++;
    t->n[i] = (trie_node){.token = token, .depth = depth, .parent = parent, .first_child = -1, .last_child = -1,
                          .next_sibling = -1, .prefix = prefix, .row = -1, .run = -1};
    if (parent >= 0) {
        trie_node *p = &t->n[parent];
        if (p->last_child >= 0) t->n[p->last_child].next_sibling = i;
        else p->first_child = i;
        p->last_child = i;
        p->n_children++;
    }
    return i;
}

/* The child of node `at` holding token (a computed node), or -1. Children
 * are few except at branching points, where a linear scan over them is
 * still cheap next to a forward pass. */
static int trie_child(const trie *t, int at, int32_t token)
{
    for (int c = t->n[at].first_child; c >= 0; c = t->n[c].next_sibling)
        if (t->n[c].prefix < 0 && !t->n[c].alone && t->n[c].token == token) return c;
    return -1;
}

/* The trie node of cached block pi, added with the blocks before it on
 * first use (each block is a node under its parent block's); -1 when the
 * chain does not lead back to position 0 block by block. */
static int prefix_chain_node(trie *t, const iv_fold_prefix *prefixes, int n_prefixes, int *prefix_node, int pi)
{
    if (prefix_node[pi] >= 0) return prefix_node[pi];
    /* Walk up to the first block that has a node (or the root), then add downwards. */
    int top = pi, depth = 0;
    while (prefixes[top].parent >= 0 && prefix_node[prefixes[top].parent] < 0) {
        top = prefixes[top].parent;
        if (top >= n_prefixes || ++depth > n_prefixes) return -1;
    }
    for (;;) {
        /* The highest block on pi's chain still without a node. */
        int i = pi;
        while (prefixes[i].parent >= 0 && prefix_node[prefixes[i].parent] < 0) i = prefixes[i].parent;
        const int par = prefixes[i].parent;
        const int want0 = par >= 0 ? prefixes[par].pos0 + prefixes[par].len : 0;
        if (prefixes[i].pos0 != want0 || prefixes[i].len < 1) return -1;
        prefix_node[i] = trie_add(t, par >= 0 ? prefix_node[par] : 0, -1, prefixes[i].pos0 + prefixes[i].len - 1, i);
        if (i == pi) return prefix_node[pi];
    }
}

/* A node starts a run unless its parent is a computed node with only it as a child. */
static int starts_run(const trie *t, int i)
{
    const trie_node *p = &t->n[t->n[i].parent];
    return t->n[i].parent == 0 || p->prefix >= 0 || p->n_children > 1;
}

int iv_fold_build(const iv_batch *b, const int *seq_prefix, const iv_fold_prefix *prefixes, int n_prefixes,
                  iv_arena *arena, iv_fold_plan *plan, iv_err *err)
{
    memset(plan, 0, sizeof *plan);
    const int64_t T = b->n_tokens;
    trie t = {.n = iv_arena_alloc(arena, (size_t)(T + n_prefixes + 1) * sizeof(trie_node))};
    int32_t *token_node = iv_arena_alloc(arena, (size_t)(T > 0 ? T : 1) * sizeof(int32_t));
    int *prefix_node = iv_arena_alloc(arena, (size_t)(n_prefixes > 0 ? n_prefixes : 1) * sizeof(int));
    plan->out_row = iv_arena_alloc(arena, (size_t)(T > 0 ? T : 1) * sizeof(int32_t));
    if (!t.n || !token_node || !prefix_node || !plan->out_row) goto oom;
    for (int i = 0; i < n_prefixes; i++) prefix_node[i] = -1;
    trie_add(&t, -1, -1, -1, -1);

    /* Insert every sequence, below its chain of cached blocks when it has one. */
    for (int s = 0; s < b->n_seqs; s++) {
        const int32_t start = b->cu_seqlens[s], len = iv_batch_seqlen(b, s);
        const int pi = seq_prefix ? seq_prefix[s] : -1;
        const int alone = pi == IV_FOLD_ALONE;
        int at = 0, t0 = 0;
        if (pi >= 0) {
            if (pi >= n_prefixes || !prefixes || prefixes[pi].pos0 + prefixes[pi].len > len)
                return iv_errf(err, IV_E_INTERNAL, "sequence %d: cached block %d does not fit", s, pi);
            at = prefix_chain_node(&t, prefixes, n_prefixes, prefix_node, pi);
            if (at < 0) return iv_errf(err, IV_E_INTERNAL, "sequence %d: a broken chain of cached blocks", s);
            t0 = prefixes[pi].pos0 + prefixes[pi].len;
            for (int32_t k = 0; k < t0; k++) token_node[start + k] = -1 - k; /* resolved with the blocks' rows */
        }
        for (int32_t k = t0; k < len; k++) {
            const int32_t tok = b->ids[start + k];
            int c = alone ? -1 : trie_child(&t, at, tok);
            if (c < 0) {
                c = trie_add(&t, at, tok, k, -1);
                t.n[c].alone = alone;
            }
            token_node[start + k] = c;
            at = c;
        }
    }

    /* Rows: cached prefixes first, in the order first used. */
    plan->load_prefix = iv_arena_alloc(arena, (size_t)(n_prefixes > 0 ? n_prefixes : 1) * sizeof(int));
    plan->load_row0 = iv_arena_alloc(arena, (size_t)(n_prefixes > 0 ? n_prefixes : 1) * sizeof(int64_t));
    if (!plan->load_prefix || !plan->load_row0) goto oom;
    int64_t row = 0;
    for (int i = 1; i < t.count; i++)
        if (t.n[i].prefix >= 0) {
            t.n[i].row = row;
            plan->load_prefix[plan->n_load] = t.n[i].prefix;
            plan->load_row0[plan->n_load++] = row;
            row += prefixes[t.n[i].prefix].len;
        }
    plan->n_cached = row;
    const int64_t U = t.count - 1 - plan->n_load;

    /* Computed nodes in depth-first order: a run's nodes (a chain of only
     * children) come out consecutively. */
    int *stack = iv_arena_alloc(arena, (size_t)t.count * sizeof(int));
    int32_t *ids = iv_arena_alloc(arena, (size_t)(U > 0 ? U : 1) * sizeof(int32_t));
    int32_t *cu = iv_arena_alloc(arena, (size_t)(U + 1) * sizeof(int32_t));
    int *run_first = iv_arena_alloc(arena, (size_t)(U > 0 ? U : 1) * sizeof(int));
    plan->pos = iv_arena_alloc(arena, (size_t)(plan->n_cached + U > 0 ? plan->n_cached + U : 1) * sizeof(int32_t));
    if (!stack || !ids || !cu || !run_first || !plan->pos) goto oom;
    for (int l = 0; l < plan->n_load; l++)
        for (int k = 0; k < prefixes[plan->load_prefix[l]].len; k++)
            plan->pos[plan->load_row0[l] + k] = prefixes[plan->load_prefix[l]].pos0 + k;
    int sp = 0, n_runs = 0, max_run = 0;
    int64_t u = 0;
    stack[sp++] = 0;
    while (sp > 0) {
        const int i = stack[--sp];
        if (i > 0 && t.n[i].prefix < 0) {
            if (starts_run(&t, i)) {
                if (n_runs > 0 && u - cu[n_runs - 1] > max_run) max_run = (int)(u - cu[n_runs - 1]);
                cu[n_runs] = (int32_t)u;
                run_first[n_runs++] = i;
            }
            t.n[i].run = n_runs - 1;
            t.n[i].row = plan->n_cached + u;
            ids[u] = t.n[i].token;
            plan->pos[plan->n_cached + u] = t.n[i].depth;
            u++;
        }
        /* Children pushed in reverse so the first child is visited first. */
        int n_ch = 0;
        for (int c = t.n[i].first_child; c >= 0; c = t.n[c].next_sibling) n_ch++;
        sp += n_ch;
        int k = sp - 1;
        for (int c = t.n[i].first_child; c >= 0; c = t.n[c].next_sibling) stack[k--] = c;
    }
    cu[n_runs] = (int32_t)u;
    if (n_runs > 0 && u - cu[n_runs - 1] > max_run) max_run = (int)(u - cu[n_runs - 1]);

    /* Key rows of each run: its ancestors (positions 0 .. depth - 1), then its own rows. */
    plan->kv_cu = iv_arena_alloc(arena, (size_t)(n_runs + 1) * sizeof(int32_t));
    if (!plan->kv_cu) goto oom;
    plan->kv_cu[0] = 0;
    for (int r = 0; r < n_runs; r++) {
        const int64_t n = t.n[run_first[r]].depth + (cu[r + 1] - cu[r]);
        plan->kv_cu[r + 1] = plan->kv_cu[r] + (int32_t)n;
        if (n > plan->max_keys) plan->max_keys = (int)n;
    }
    plan->kv_rows = iv_arena_alloc(arena, (size_t)(plan->kv_cu[n_runs] > 0 ? plan->kv_cu[n_runs] : 1) * sizeof(int32_t));
    if (!plan->kv_rows) goto oom;
    for (int r = 0; r < n_runs; r++) {
        int32_t *dst = plan->kv_rows + plan->kv_cu[r];
        int32_t k = t.n[run_first[r]].depth; /* ancestors fill [0, depth) from the back */
        for (int p = t.n[run_first[r]].parent; p > 0; p = t.n[p].parent) {
            if (t.n[p].prefix >= 0) {
                for (int32_t j = prefixes[t.n[p].prefix].len - 1; j >= 0; j--) dst[--k] = (int32_t)(t.n[p].row + j);
            } else {
                dst[--k] = (int32_t)t.n[p].row;
            }
        }
        const int32_t d = t.n[run_first[r]].depth;
        for (int32_t j = 0; j < cu[r + 1] - cu[r]; j++) dst[d + j] = (int32_t)(plan->n_cached + cu[r] + j);
    }

    /* Each original token's row: cached tokens from their block's rows. */
    for (int s = 0; s < b->n_seqs; s++) {
        const int32_t start = b->cu_seqlens[s];
        for (int32_t k = 0; k < iv_batch_seqlen(b, s); k++) {
            const int32_t nd = token_node[start + k];
            if (nd >= 0) plan->out_row[start + k] = (int32_t)t.n[nd].row;
        }
        for (int pi = seq_prefix && seq_prefix[s] >= 0 ? seq_prefix[s] : -1; pi >= 0; pi = prefixes[pi].parent)
            for (int32_t j = 0; j < prefixes[pi].len; j++)
                plan->out_row[start + prefixes[pi].pos0 + j] = (int32_t)(t.n[prefix_node[pi]].row + j);
    }

    plan->batch = (iv_batch){.n_seqs = n_runs, .n_tokens = U, .ids = ids, .cu_seqlens = cu, .max_seqlen = max_run};
    return 0;
oom:
    return iv_errf(err, IV_E_NOMEM, "out of memory folding a batch of %lld tokens", (long long)T);
}
