/* The prefix cache (engine/prefix_cache.h). Blocks form a tree: a block's
 * children are the blocks that continue its token prefix, found by a scan
 * of the (few) children with a per-block hash to skip mismatches, so a
 * lookup costs one short scan per block and the key of a block is its
 * whole token prefix without storing it. Eviction takes the unpinned leaf
 * used longest ago (a scan of every block: eviction is rare next to a
 * forward pass). */
#include "engine/prefix_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct iv_prefix_entry {
    iv_prefix_entry *next;                   /* every block, for eviction scans */
    iv_prefix_entry *parent, *first_child, *next_sibling;
    int n_children;
    int32_t ids[IV_PREFIX_BLOCK];
    int pos0;           /* the position of ids[0] */
    uint64_t hash;      /* of ids */
    uint64_t last_use;  /* the cache's clock when last looked up or filled */
    int pins;
    int committed;
    const void *owner;  /* who fills it, while uncommitted */
    size_t bytes;
    void *mem;          /* device memory: k and v of every layer, then the final rows */
    iv_view *kv;        /* [2 * n_layers]: k of layer l at l, v at n_layers + l */
    iv_fold_prefix states;
};

struct iv_prefix_cache {
    pthread_mutex_t lock;
    const iv_ops *ops;
    size_t capacity;
    int n_layers;
    int64_t kv_cols, out_cols;
    uint64_t clock;
    iv_prefix_entry *all;   /* every block */
    iv_prefix_entry *roots; /* first blocks of sequences */
    iv_prefix_stats stats;
};

/* FNV-1a over a block's tokens. */
static uint64_t hash_block(const int32_t *ids)
{
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < IV_PREFIX_BLOCK; i++) {
        const uint32_t u = (uint32_t)ids[i];
        for (int k = 0; k < 4; k++) {
            h ^= (u >> (8 * k)) & 0xff;
            h *= 1099511628211ULL;
        }
    }
    return h;
}

iv_prefix_cache *iv_prefix_cache_new(const iv_ops *ops, size_t capacity, int n_layers, int64_t kv_cols,
                                     int64_t out_cols)
{
    iv_prefix_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    pthread_mutex_init(&c->lock, NULL);
    c->ops = ops;
    c->capacity = capacity;
    c->n_layers = n_layers;
    c->kv_cols = kv_cols;
    c->out_cols = out_cols;
    c->stats.capacity = capacity;
    return c;
}

static void entry_free(iv_prefix_cache *c, iv_prefix_entry *e)
{
    if (e->mem) c->ops->dev_free(c->ops, e->mem);
    free(e->kv);
    free(e);
}

void iv_prefix_cache_free(iv_prefix_cache *c)
{
    if (!c) return;
    for (iv_prefix_entry *e = c->all, *next; e; e = next) {
        next = e->next;
        entry_free(c, e);
    }
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* The child of parent (NULL: the roots) holding these tokens, or NULL. */
static iv_prefix_entry *find_child(iv_prefix_cache *c, const iv_prefix_entry *parent, const int32_t *ids,
                                   uint64_t h)
{
    for (iv_prefix_entry *x = parent ? parent->first_child : c->roots; x; x = x->next_sibling)
        if (x->hash == h && !memcmp(x->ids, ids, sizeof x->ids)) return x;
    return NULL;
}

/* Takes a childless block out of the tree and the block list and frees it
 * (lock held). */
static void remove_entry(iv_prefix_cache *c, iv_prefix_entry *e)
{
    iv_prefix_entry **p = e->parent ? &e->parent->first_child : &c->roots;
    while (*p && *p != e) p = &(*p)->next_sibling;
    if (*p) *p = e->next_sibling;
    if (e->parent) e->parent->n_children--;
    for (p = &c->all; *p && *p != e; p = &(*p)->next) {}
    if (*p) *p = e->next;
    c->stats.bytes -= e->bytes;
    c->stats.entries--;
    entry_free(c, e);
}

int iv_prefix_cache_lookup(iv_prefix_cache *c, const int32_t *ids, int len, iv_prefix_entry **chain)
{
    const int n = len / IV_PREFIX_BLOCK;
    int k = 0;
    pthread_mutex_lock(&c->lock);
    for (iv_prefix_entry *at = NULL; k < n; k++) {
        const int32_t *blk = ids + (int64_t)k * IV_PREFIX_BLOCK;
        iv_prefix_entry *e = find_child(c, at, blk, hash_block(blk));
        if (!e || !e->committed) break;
        e->pins++;
        e->last_use = ++c->clock;
        chain[k] = at = e;
    }
    pthread_mutex_unlock(&c->lock);
    return k;
}

iv_fold_prefix iv_prefix_entry_states(const iv_prefix_entry *e) { return e->states; }

/* Drops unpinned leaves, least recently used first, until `need` more
 * bytes fit (lock held). 0 when they do. Pinned blocks (read or being
 * filled) and blocks other blocks continue are never taken. */
static int make_room(iv_prefix_cache *c, size_t need)
{
    while (c->stats.bytes + need > c->capacity) {
        iv_prefix_entry *victim = NULL;
        for (iv_prefix_entry *e = c->all; e; e = e->next)
            if (e->pins == 0 && e->n_children == 0 && (!victim || e->last_use < victim->last_use)) victim = e;
        if (!victim) return -1;
        c->stats.evictions++;
        remove_entry(c, victim);
    }
    return 0;
}

iv_prefix_entry *iv_prefix_cache_reserve(iv_prefix_cache *c, iv_prefix_entry *parent, const int32_t *ids,
                                         const void *owner, int *fresh, iv_fold_prefix *states)
{
    const iv_dtype dt = c->ops->act_dtype;
    const size_t esz = iv_dtype_size(dt);
    /* Each block of rows rounded to 256 bytes, as device allocations are aligned. */
    const size_t kv_bytes = ((size_t)IV_PREFIX_BLOCK * (size_t)c->kv_cols * esz + 255) & ~(size_t)255;
    const size_t bytes = 2 * (size_t)c->n_layers * kv_bytes + (size_t)IV_PREFIX_BLOCK * (size_t)c->out_cols * esz;
    const uint64_t h = hash_block(ids);
    *fresh = 0;
    pthread_mutex_lock(&c->lock);
    iv_prefix_entry *e = find_child(c, parent, ids, h);
    if (e) {
        if (e->committed || e->owner != owner) e = NULL; /* not this batch's to fill */
        goto out;
    }
    if (bytes > c->capacity || make_room(c, bytes)) goto out;
    e = calloc(1, sizeof *e);
    if (!e) goto out;
    e->kv = malloc(2 * (size_t)c->n_layers * sizeof(iv_view));
    e->mem = c->ops->dev_alloc(c->ops, bytes);
    if (!e->kv || !e->mem) {
        entry_free(c, e);
        e = NULL;
        goto out;
    }
    memcpy(e->ids, ids, sizeof e->ids);
    e->pos0 = parent ? parent->pos0 + IV_PREFIX_BLOCK : 0;
    e->hash = h;
    e->bytes = bytes;
    e->pins = 1;
    e->owner = owner;
    e->last_use = ++c->clock;
    char *p = e->mem;
    for (int i = 0; i < 2 * c->n_layers; i++, p += kv_bytes)
        e->kv[i] = iv_view_make(p, dt, IV_PREFIX_BLOCK, c->kv_cols, c->kv_cols);
    e->states = (iv_fold_prefix){.len = IV_PREFIX_BLOCK, .pos0 = e->pos0, .parent = -1, .k = e->kv,
                                 .v = e->kv + c->n_layers,
                                 .final = iv_view_make(p, dt, IV_PREFIX_BLOCK, c->out_cols, c->out_cols)};
    e->parent = parent;
    iv_prefix_entry **sib = parent ? &parent->first_child : &c->roots;
    e->next_sibling = *sib;
    *sib = e;
    if (parent) parent->n_children++;
    e->next = c->all;
    c->all = e;
    c->stats.bytes += bytes;
    c->stats.entries++;
    *fresh = 1;
out:
    if (e) *states = e->states;
    pthread_mutex_unlock(&c->lock);
    return e;
}

void iv_prefix_cache_finish(iv_prefix_cache *c, iv_prefix_entry *e, int commit)
{
    pthread_mutex_lock(&c->lock);
    e->pins--;
    if (commit) {
        e->committed = 1;
        e->owner = NULL;
        c->stats.inserts++;
    } else if (e->n_children == 0) {
        remove_entry(c, e);
    } else {
        /* Not reachable when blocks are finished children first, as the
         * header asks; kept invisible (uncommitted, ownerless) until its
         * children are gone, never read. */
        e->owner = NULL;
    }
    pthread_mutex_unlock(&c->lock);
}

void iv_prefix_cache_release(iv_prefix_cache *c, iv_prefix_entry *const *e, int n)
{
    if (n <= 0) return;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < n; i++) e[i]->pins--;
    pthread_mutex_unlock(&c->lock);
}

void iv_prefix_cache_count(iv_prefix_cache *c, int hits, int misses, uint64_t tokens_reused)
{
    pthread_mutex_lock(&c->lock);
    c->stats.hits += (uint64_t)hits;
    c->stats.misses += (uint64_t)misses;
    c->stats.tokens_reused += tokens_reused;
    pthread_mutex_unlock(&c->lock);
}

void iv_prefix_cache_stats(iv_prefix_cache *c, iv_prefix_stats *out)
{
    pthread_mutex_lock(&c->lock);
    *out = c->stats;
    pthread_mutex_unlock(&c->lock);
}
