/* Prefix folding (RadixMLP-style): for a causal model the states of a
 * token depend only on the tokens before it, so sequences of a packed
 * batch that share a prefix need those states once. A trie over the
 * batch's tokens (keyed by token and, implicitly, absolute position: the
 * depth) gives the unique tokens; runs of the trie (edges of the
 * compressed trie) become the "sequences" of a smaller packed batch, and
 * each run's attention reads its ancestors' keys and values plus its own
 * (iv_attn_rows_args). Prefixes computed by an earlier batch (the engine's
 * prefix cache) enter the trie as ready-made rows whose keys, values and
 * final states are copied in.
 *
 * Row space of a folded forward: rows [0, n_cached) are the cached
 * prefixes' tokens, rows [n_cached, n_cached + U) the computed trie nodes
 * in depth-first order (each run contiguous). The forward's result is
 * gathered back to the original batch's rows (out_row), so heads never
 * know the batch was folded. docs/prefix-folding.md. */
#ifndef IV_MODELS_FOLD_H
#define IV_MODELS_FOLD_H

#include "base/arena.h"
#include "base/err.h"
#include "models/batch.h"
#include "models/block.h"

struct iv_model;

/* Why a model can never fold (NULL: it can): computed once at load from the
 * model's data, stored in iv_model.no_fold_reason. */
const char *iv_model_fold_blocker(const struct iv_model *m);

/* A block of tokens whose states an earlier forward computed (the
 * engine's prefix cache): positions [pos0, pos0 + len) of the sequences
 * that use it, after the block `parent` (an index in the same prefixes
 * array; -1: pos0 is 0). Its keys and values at every layer (the model's
 * layer index) and its final hidden rows. */
typedef struct iv_fold_prefix {
    int len, pos0, parent;
    const iv_view *k, *v; /* [n_layers] of [len, kv cols] */
    iv_view final;        /* [len, out width] */
} iv_fold_prefix;

typedef struct iv_fold_plan {
    /* The computed rows as a packed batch, one sequence per run (ids,
     * cu_seqlens, max_seqlen; no type ids). */
    iv_batch batch;
    int64_t n_cached;   /* cached rows before the computed ones */
    int32_t *pos;       /* [n_cached + U] absolute position of every row */
    int32_t *kv_cu;     /* [runs + 1] */
    int32_t *kv_rows;   /* [kv_cu[runs]] */
    int max_keys;
    int32_t *out_row;   /* [T] the row of each token of the original batch */
    /* Cached blocks used, in row order (prefix index and first row). */
    int n_load;
    int *load_prefix;
    int64_t *load_row0;
} iv_fold_plan;

/* Builds the plan for batch b (host arrays). seq_prefix[s] is the index in
 * prefixes of the last cached block of the chain (parent links back to
 * position 0) that sequence s starts with (covering at most its length),
 * -1, or IV_FOLD_ALONE for a sequence that shares nothing (its rows are its
 * own, as unfolded); seq_prefix may be NULL. Blocks used by several
 * sequences are loaded once. Host memory from arena. */
#define IV_FOLD_ALONE (-2)
int iv_fold_build(const iv_batch *b, const int *seq_prefix, const iv_fold_prefix *prefixes, int n_prefixes,
                  iv_arena *arena, iv_fold_plan *plan, iv_err *err);

/* Tokens the plan does not compute (shared or cached) out of b's. */
static inline int64_t iv_fold_saved_tokens(const iv_fold_plan *p, const iv_batch *b)
{
    return b->n_tokens - p->batch.n_tokens;
}

/* Whether folding pays for itself: at least IV_FOLD_MIN_SAVED tokens and
 * an eighth of the batch left out. Below that the unfolded path runs (the
 * gather and the per-run attention would cost more than they save). */
#define IV_FOLD_MIN_SAVED 32
static inline int iv_fold_worthwhile(const iv_fold_plan *p, const iv_batch *b)
{
    const int64_t saved = iv_fold_saved_tokens(p, b);
    return saved >= IV_FOLD_MIN_SAVED && saved * 8 >= b->n_tokens;
}

/* Runs the model's backbone over the folded plan of batch b (b uploaded or
 * not: only its sizes are read) and returns [T, out width] final states in
 * the original batch's row order, as iv_model_forward does. prefixes: the
 * array seq_prefix indexed. store (n_store entries, or NULL): computed rows
 * whose keys, values and final states are copied into the views given
 * (a new cache entry); their final views in store_final. */
int iv_model_forward_folded(const struct iv_model *m, const iv_batch *b, const iv_fold_plan *plan,
                            const iv_fold_prefix *prefixes, const iv_fold_kv *store, const iv_view *store_final,
                            int n_store, const iv_fwd_mem *mem, iv_view *hidden, iv_err *err);

#endif
