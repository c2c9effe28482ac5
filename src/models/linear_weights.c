/* The walk over a model's layer linear weights (see linear_weights.h). */
#include "models/linear_weights.h"

#include <stdio.h>
#include <stdlib.h>

#include "models/loader.h"
#include "models/vision_gemma4.h"
#include "models/vision_gemma4_unified.h"
#include "models/vision_pixtral.h"
#include "models/vision_qwen3vl.h"
#include "tensor/safetensors.h"

/* Original -> replacement, so weights shared between layers stay shared. */
typedef struct swap_map {
    const iv_tensor **from, **to;
    int n, cap;
} swap_map;

static int map_add(swap_map *sm, const iv_tensor *from, const iv_tensor *to)
{
    if (sm->n == sm->cap) {
        int cap = sm->cap ? 2 * sm->cap : 64;
        const iv_tensor **f = realloc(sm->from, (size_t)cap * sizeof *f);
        if (f) sm->from = f;
        const iv_tensor **t = realloc(sm->to, (size_t)cap * sizeof *t);
        if (t) sm->to = t;
        if (!f || !t) return -1;
        sm->cap = cap;
    }
    sm->from[sm->n] = from;
    sm->to[sm->n++] = to;
    return 0;
}

static const iv_tensor *map_find(const swap_map *sm, const iv_tensor *w)
{
    for (int i = 0; i < sm->n; i++)
        if (sm->from[i] == w) return sm->to[i];
    return NULL;
}

/* Gives back the memory of w's values once nothing will read them: the data
 * of a loader-made tensor (kept as a header/data pair in m->owned; the
 * header stays, freed with the model, so that no new allocation can reuse
 * its address while the walk still compares tensors by address), or the
 * file pages of a mapped one. */
typedef struct walk {
    iv_model *m;
    int vectors; /* 1-D tensors too (IV_LW_VECTORS) */
    swap_map map;
    iv_linear_weight_fn fn;
    void *ctx;
} walk;

static int swap(walk *wk, const iv_tensor **slot, int layer, const char *what, iv_err *err)
{
    const iv_tensor *w = *slot;
    if (!w || w->dtype != IV_F32 || (w->ndim != 2 && !wk->vectors) || w->layout != IV_LAYOUT_ROWS) return 0;
    const iv_tensor *r = map_find(&wk->map, w);
    if (!r) {
        char name[96];
        if (layer >= 0) snprintf(name, sizeof name, "layer %d %s", layer, what);
        else snprintf(name, sizeof name, "%s", what);
        if (!(r = wk->fn(wk->m, w, name, wk->ctx, err))) return -1;
        if (map_add(&wk->map, w, r)) return iv_errf(err, IV_E_NOMEM, "out of memory");
        /* Right away, so the model is never resident twice while the walk
         * runs; later slots holding w find r in the map by address alone. */
        if (r != w) iv_model_release_data(wk->m, w);
    }
    *slot = r;
    return 0;
}

static int swap_norm(walk *wk, iv_norm *n, int layer, const char *what, iv_err *err)
{
    return swap(wk, &n->w, layer, what, err) || swap(wk, &n->b, layer, what, err);
}

/* A layer's norms, biases and per-head norm weights. */
static int swap_deltanet(walk *wk, iv_layer *L, int l, iv_err *err)
{
    iv_deltanet *dn = (iv_deltanet *)L->deltanet; /* the model's own, allocated at load */
    return dn && (swap(wk, &dn->conv_w, l, "DeltaNet convolution", err) ||
                  swap(wk, &dn->conv_b, l, "DeltaNet convolution bias", err) ||
                  swap(wk, &dn->a_log, l, "DeltaNet A_log", err) || swap(wk, &dn->dt_bias, l, "DeltaNet dt_bias", err) ||
                  swap(wk, &dn->norm_w, l, "DeltaNet norm", err));
}

static int swap_layer_vectors(walk *wk, iv_layer *L, int l, iv_err *err)
{
    iv_moe *moe = (iv_moe *)L->moe; /* the model's own, allocated at load */
    return swap(wk, &L->qkv_b, l, "attention QKV bias", err) || swap(wk, &L->q_b, l, "attention Q bias", err) ||
             swap(wk, &L->kv_b, l, "attention KV bias", err) || swap(wk, &L->o_b, l, "attention output bias", err) ||
             swap(wk, &L->up_b, l, "MLP up bias", err) || swap(wk, &L->down_b, l, "MLP down bias", err) ||
             swap(wk, &L->q_norm_w, l, "q norm", err) || swap(wk, &L->k_norm_w, l, "k norm", err) ||
             swap_norm(wk, &L->q_full_norm, l, "q norm", err) || swap_norm(wk, &L->k_full_norm, l, "k norm", err) ||
             swap_norm(wk, &L->attn_norm, l, "attention norm", err) || swap_norm(wk, &L->mlp_norm, l, "MLP norm", err) ||
             swap_norm(wk, &L->post_attn_norm, l, "post-attention norm", err) ||
             swap_norm(wk, &L->post_mlp_norm, l, "post-MLP norm", err) ||
             swap_norm(wk, &L->attn_outer_norm, l, "outer attention norm", err) ||
             swap_norm(wk, &L->ple_norm, l, "per-layer input norm", err) ||
             (moe && swap(wk, &moe->out_bias, l, "expert output bias", err)) ||
             swap_norm(wk, &L->post_mlp_norm_1, l, "post-MLP norm", err) ||
             swap_norm(wk, &L->pre_moe_norm, l, "expert input norm", err) ||
             swap_norm(wk, &L->post_moe_norm, l, "expert output norm", err) ||
             /* Row-major on purpose: the hooks slice rows out of them. */
             swap(wk, &L->dyn_bias_w[0], l, "dynamic attention bias weight", err) ||
             swap(wk, &L->dyn_bias_w[1], l, "dynamic attention bias weight", err) || swap_deltanet(wk, L, l, err);
}

/* Embedding tables, norms, biases and per-head norm weights: everything an
 * op reads that is not a linear weight. */
static int swap_vectors(walk *wk, iv_err *err)
{
    iv_model *m = wk->m;
    int rc = swap(wk, &m->embed.word, -1, "word embeddings", err) ||
             swap(wk, &m->embed.position, -1, "position embeddings", err) ||
             swap(wk, &m->embed.token_type, -1, "token type embeddings", err) ||
             swap_norm(wk, &m->embed.norm, -1, "embedding norm", err) ||
             swap_norm(wk, &m->final_norm, -1, "final norm", err) ||
             swap(wk, &m->ple_norm_w, -1, "per-layer input norm", err) ||
             swap(wk, &m->ple_tok, -1, "per-layer input embeddings", err) ||
             swap(wk, &m->conv.b, -1, "token convolution bias", err) ||
             swap_norm(wk, &m->conv.norm, -1, "token convolution norm", err);
    for (int l = 0; l < m->n_layers && !rc; l++) rc = swap_layer_vectors(wk, &m->layers[l], l, err);
    iv_head *heads[] = {&m->seq_head, &m->token_head, &m->mlm_head, &m->token_proj};
    for (int h = 0; h < 4 && !rc; h++)
        for (int i = 0; i < heads[h]->n_steps && !rc; i++) {
            iv_head_step *st = &heads[h]->steps[i];
            rc = swap(wk, &st->b, -1, "head bias", err) || swap(wk, &st->ln_w, -1, "head norm", err) ||
                 swap(wk, &st->ln_b, -1, "head norm", err);
        }
    return rc;
}

static int swap_merger(walk *wk, iv_vision_merger *mg, int matmuls, const char *what, iv_err *err)
{
    if (matmuls) return swap(wk, &mg->fc1_w, -1, what, err) || swap(wk, &mg->fc2_w, -1, what, err);
    return swap_norm(wk, &mg->norm, -1, what, err) || swap(wk, &mg->fc1_b, -1, what, err) ||
           swap(wk, &mg->fc2_b, -1, what, err);
}

/* A vision tower's blocks (Qwen3-VL, Pixtral, Gemma4): their four linears
 * with the layer matmuls, their norms and biases with the vectors. */
static int swap_vision_blocks(walk *wk, iv_layer *layers, int depth, unsigned kinds, iv_err *err)
{
    int rc = 0;
    for (int l = 0; l < depth && !rc; l++) {
        iv_layer *L = &layers[l];
        if (kinds & IV_LW_LAYER_MATMULS)
            rc = swap(wk, &L->qkv_w, l, "vision attention QKV", err) ||
                 swap(wk, &L->o_w, l, "vision attention output", err) || swap(wk, &L->up_w, l, "vision MLP up", err) ||
                 swap(wk, &L->down_w, l, "vision MLP down", err);
        if ((kinds & IV_LW_VECTORS) && !rc) {
            wk->vectors = 1;
            rc = swap_layer_vectors(wk, L, l, err);
            wk->vectors = 0;
        }
    }
    return rc;
}

/* Qwen3-VL's vision tower: its blocks' matmuls, the patch embedding and the
 * mergers' linears as layer matmuls; the rest with the vectors. */
static int swap_vision(walk *wk, iv_qwen3vl_vision *v, unsigned kinds, iv_err *err)
{
    int rc = swap_vision_blocks(wk, v->layers, v->depth, kinds, err);
    for (int k = -1; k < v->n_deepstack && !rc; k++) {
        iv_vision_merger *mg = k < 0 ? &v->merger : &v->deepstack[k];
        const char *what = k < 0 ? "vision merger" : "vision DeepStack merger";
        if (kinds & IV_LW_LAYER_MATMULS) rc = swap_merger(wk, mg, 1, what, err);
        if ((kinds & IV_LW_VECTORS) && !rc) {
            wk->vectors = 1;
            rc = swap_merger(wk, mg, 0, what, err);
            wk->vectors = 0;
        }
    }
    if ((kinds & IV_LW_LAYER_MATMULS) && !rc) rc = swap(wk, &v->patch_w, -1, "vision patch embedding", err);
    if ((kinds & IV_LW_VECTORS) && !rc) {
        wk->vectors = 1;
        rc = swap(wk, &v->patch_b, -1, "vision patch embedding bias", err) ||
             swap(wk, &v->pos_embed, -1, "vision position embeddings", err);
        wk->vectors = 0;
    }
    return rc;
}

/* Mistral3's Pixtral tower and projector, as Qwen3-VL's: linears with the
 * layer matmuls, norms and biases with the vectors. */
static int swap_pixtral(walk *wk, iv_pixtral_vision *v, unsigned kinds, iv_err *err)
{
    int rc = swap_vision_blocks(wk, v->layers, v->depth, kinds, err);
    if ((kinds & IV_LW_LAYER_MATMULS) && !rc)
        rc = swap(wk, &v->patch_w, -1, "vision patch embedding", err) ||
             swap(wk, &v->merge_w, -1, "vision patch merger", err) ||
             swap(wk, &v->l1_w, -1, "vision projector linear_1", err) ||
             swap(wk, &v->l2_w, -1, "vision projector linear_2", err);
    if ((kinds & IV_LW_VECTORS) && !rc) {
        wk->vectors = 1;
        rc = swap_norm(wk, &v->ln_pre, -1, "vision ln_pre", err) ||
             swap_norm(wk, &v->proj_norm, -1, "vision projector norm", err) ||
             swap(wk, &v->l1_b, -1, "vision projector linear_1 bias", err) ||
             swap(wk, &v->l2_b, -1, "vision projector linear_2 bias", err);
        wk->vectors = 0;
    }
    return rc;
}

/* Gemma4 unified's encoder-free embedder: the patch projection with the
 * layer matmuls, its bias, LayerNorms and position table with the vectors. */
static int swap_gemma4_unified(walk *wk, iv_gemma4_unified_embedder *u, unsigned kinds, iv_err *err)
{
    int rc = 0;
    if (kinds & IV_LW_LAYER_MATMULS) rc = swap(wk, &u->dense_w, -1, "vision patch projection", err);
    if ((kinds & IV_LW_VECTORS) && !rc) {
        wk->vectors = 1;
        rc = swap(wk, &u->dense_b, -1, "vision patch projection bias", err) ||
             swap(wk, &u->pos_table, -1, "vision position embeddings", err) ||
             swap_norm(wk, &u->ln1, -1, "vision patch_ln1", err) ||
             swap_norm(wk, &u->ln2, -1, "vision patch_ln2", err) ||
             swap_norm(wk, &u->pos_norm, -1, "vision pos_norm", err);
        wk->vectors = 0;
    }
    return rc;
}

/* Gemma4's vision tower and embedder, as Qwen3-VL's: linears with the layer
 * matmuls, norms and the position tables with the vectors. */
static int swap_gemma4_vision(walk *wk, iv_gemma4_vision *v, unsigned kinds, iv_err *err)
{
    int rc = swap_vision_blocks(wk, v->layers, v->depth, kinds, err);
    if ((kinds & IV_LW_LAYER_MATMULS) && !rc)
        rc = swap(wk, &v->patch_w, -1, "vision patch embedding", err) ||
             swap(wk, &v->proj_w, -1, "vision embedding projection", err);
    if ((kinds & IV_LW_VECTORS) && !rc) {
        wk->vectors = 1;
        rc = swap(wk, &v->pos_table, -1, "vision position embeddings", err);
        wk->vectors = 0;
    }
    return rc || !v->unified ? rc : swap_gemma4_unified(wk, v->unified, kinds, err);
}

int iv_model_replace_linear_weights(iv_model *m, unsigned kinds, iv_linear_weight_fn fn, void *ctx, iv_err *err)
{
    walk wk = {.m = m, .fn = fn, .ctx = ctx};
    int rc = 0;
    for (int l = 0; l < m->n_layers && !rc; l++) {
        iv_layer *L = &m->layers[l];
        /* Routed experts instead of the dense MLP, or beside it (Gemma4): the model's own, allocated at load. */
        iv_moe *moe = (iv_moe *)(L->moe ? L->moe : L->moe_beside);
        if (kinds & IV_LW_LAYER_MATMULS) {
            rc = swap(&wk, &L->qkv_w, l, "attention QKV", err) || swap(&wk, &L->q_w, l, "attention Q", err) ||
                 swap(&wk, &L->kv_w, l, "attention KV", err) || swap(&wk, &L->o_w, l, "attention output", err) ||
                 swap(&wk, &L->up_w, l, "MLP up", err) || swap(&wk, &L->down_w, l, "MLP down", err) ||
                 swap(&wk, &L->ple_gate_w, l, "per-layer input gate", err) ||
                 swap(&wk, &L->ple_proj_w, l, "per-layer input projection", err) ||
                 (L->deltanet && swap(&wk, &((iv_deltanet *)L->deltanet)->in_w, l, "DeltaNet input projection", err));
            for (int e = 0; moe && e < moe->n_experts && !rc; e++)
                rc = swap(&wk, &moe->up_w[e], l, "expert up", err) || swap(&wk, &moe->down_w[e], l, "expert down", err);
            if (moe && !rc)
                rc = swap(&wk, &moe->shared_up_w, l, "shared expert up", err) ||
                     swap(&wk, &moe->shared_down_w, l, "shared expert down", err);
        }
        if ((kinds & IV_LW_AUX) && moe && !rc)
            rc = swap(&wk, &moe->router_w, l, "MoE router", err) ||
                 swap(&wk, &moe->shared_gate_w, l, "shared expert gate", err);
    }
    if ((kinds & IV_LW_AUX) && !rc)
        rc = swap(&wk, &m->embed.proj, -1, "embedding projection", err) ||
             swap(&wk, &m->conv.w, -1, "token convolution", err) ||
             swap(&wk, &m->ple_w, -1, "per-layer input model projection", err) ||
             swap(&wk, &m->out_proj, -1, "output projection", err);
    if ((kinds & IV_LW_HEADS) && !rc) {
        iv_head *heads[] = {&m->seq_head, &m->token_head, &m->mlm_head, &m->token_proj};
        static const char *names[] = {"sequence head", "token head", "MLM head", "token projection"};
        for (int h = 0; h < 4 && !rc; h++)
            for (int i = 0; i < heads[h]->n_steps && !rc; i++) rc = swap(&wk, &heads[h]->steps[i].w, -1, names[h], err);
        /* A tied decoder was the table itself; its data is gone from the old tensor. */
        const iv_tensor *tied = map_find(&wk.map, m->embed.word);
        if (tied) m->embed.word = tied;
    }
    if (m->vision && !rc) rc = swap_vision(&wk, m->vision, kinds, err);
    if (m->pixtral && !rc) rc = swap_pixtral(&wk, m->pixtral, kinds, err);
    if (m->gemma4_vision && !rc) rc = swap_gemma4_vision(&wk, m->gemma4_vision, kinds, err);
    if ((kinds & IV_LW_VECTORS) && !rc) {
        wk.vectors = 1;
        rc = swap_vectors(&wk, err);
    }
    free(wk.map.from);
    free(wk.map.to);
    return rc ? -1 : 0;
}
