/* The prefix cache (engine/prefix_cache.h). Entries are few (each holds
 * every layer's keys and values for its tokens), so they sit in a plain
 * list: lookups compare a sequence's running hash at each entry's length,
 * then its tokens; eviction takes the unpinned entry used longest ago. */
#include "engine/prefix_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct iv_prefix_entry {
    iv_prefix_entry *next;
    int32_t *ids;
    int len;
    uint64_t hash;      /* of ids[0, len) */
    uint64_t last_use;  /* the cache's clock when last looked up or filled */
    int pins;
    int committed;
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
    iv_prefix_entry *head;
    iv_prefix_stats stats;
};

/* FNV-1a over the tokens, one step per token so a sequence's hash at every
 * length comes from one pass. */
#define HASH_SEED 1469598103934665603ULL
static uint64_t hash_step(uint64_t h, int32_t tok)
{
    uint32_t u = (uint32_t)tok;
    for (int i = 0; i < 4; i++) {
        h ^= (u >> (8 * i)) & 0xff;
        h *= 1099511628211ULL;
    }
    return h;
}

static uint64_t hash_tokens(const int32_t *ids, int len)
{
    uint64_t h = HASH_SEED;
    for (int i = 0; i < len; i++) h = hash_step(h, ids[i]);
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
    free(e->ids);
    free(e->kv);
    free(e);
}

void iv_prefix_cache_free(iv_prefix_cache *c)
{
    if (!c) return;
    for (iv_prefix_entry *e = c->head, *next; e; e = next) {
        next = e->next;
        entry_free(c, e);
    }
    pthread_mutex_destroy(&c->lock);
    free(c);
}

iv_prefix_entry *iv_prefix_cache_lookup(iv_prefix_cache *c, const int32_t *ids, int len)
{
    /* The sequence's hash at every length, outside the lock. */
    uint64_t *h = len > 0 ? malloc((size_t)(len + 1) * sizeof(uint64_t)) : NULL;
    if (h) {
        h[0] = HASH_SEED;
        for (int i = 0; i < len; i++) h[i + 1] = hash_step(h[i], ids[i]);
    }
    pthread_mutex_lock(&c->lock);
    iv_prefix_entry *best = NULL;
    for (iv_prefix_entry *e = h ? c->head : NULL; e; e = e->next)
        if (e->committed && e->len <= len && e->hash == h[e->len] && (!best || e->len > best->len) &&
            !memcmp(e->ids, ids, (size_t)e->len * sizeof(int32_t)))
            best = e;
    if (best) {
        best->pins++;
        best->last_use = ++c->clock;
    }
    pthread_mutex_unlock(&c->lock);
    free(h);
    return best;
}

const iv_fold_prefix *iv_prefix_entry_states(const iv_prefix_entry *e) { return &e->states; }

/* Drops unpinned entries, least recently used first, until `need` more
 * bytes fit (lock held). 0 when they do. */
static int make_room(iv_prefix_cache *c, size_t need)
{
    while (c->stats.bytes + need > c->capacity) {
        iv_prefix_entry **victim = NULL;
        for (iv_prefix_entry **p = &c->head; *p; p = &(*p)->next)
            if ((*p)->pins == 0 && (!victim || (*p)->last_use < (*victim)->last_use)) victim = p;
        if (!victim) return -1;
        iv_prefix_entry *e = *victim;
        *victim = e->next;
        c->stats.bytes -= e->bytes;
        c->stats.entries--;
        c->stats.evictions++;
        entry_free(c, e);
    }
    return 0;
}

iv_prefix_entry *iv_prefix_cache_reserve(iv_prefix_cache *c, const int32_t *ids, int len, iv_fold_kv *store,
                                         iv_view *store_final)
{
    const iv_dtype dt = c->ops->act_dtype;
    const size_t esz = iv_dtype_size(dt);
    const int64_t kv_elems = (int64_t)len * c->kv_cols, final_elems = (int64_t)len * c->out_cols;
    /* Each block rounded to 256 bytes, as device allocations are aligned. */
    const size_t kv_bytes = ((size_t)kv_elems * esz + 255) & ~(size_t)255;
    const size_t bytes = 2 * (size_t)c->n_layers * kv_bytes + (size_t)final_elems * esz;
    const uint64_t h = hash_tokens(ids, len);
    pthread_mutex_lock(&c->lock);
    iv_prefix_entry *e = NULL;
    for (iv_prefix_entry *x = c->head; x; x = x->next)
        if (x->len == len && x->hash == h && !memcmp(x->ids, ids, (size_t)len * sizeof(int32_t))) goto out;
    if (bytes > c->capacity || make_room(c, bytes)) goto out;
    e = calloc(1, sizeof *e);
    if (!e) goto out;
    e->ids = malloc((size_t)len * sizeof(int32_t));
    e->kv = malloc(2 * (size_t)c->n_layers * sizeof(iv_view));
    e->mem = c->ops->dev_alloc(c->ops, bytes);
    if (!e->ids || !e->kv || !e->mem) {
        entry_free(c, e);
        e = NULL;
        goto out;
    }
    memcpy(e->ids, ids, (size_t)len * sizeof(int32_t));
    e->len = len;
    e->hash = h;
    e->bytes = bytes;
    e->pins = 1;
    e->last_use = ++c->clock;
    char *p = e->mem;
    for (int i = 0; i < 2 * c->n_layers; i++, p += kv_bytes) e->kv[i] = iv_view_make(p, dt, len, c->kv_cols, c->kv_cols);
    e->states = (iv_fold_prefix){.len = len, .k = e->kv, .v = e->kv + c->n_layers,
                                 .final = iv_view_make(p, dt, len, c->out_cols, c->out_cols)};
    *store = (iv_fold_kv){.len = len, .k = e->states.k, .v = e->states.v};
    *store_final = e->states.final;
    e->next = c->head;
    c->head = e;
    c->stats.bytes += bytes;
    c->stats.entries++;
out:
    pthread_mutex_unlock(&c->lock);
    return e;
}

void iv_prefix_cache_finish(iv_prefix_cache *c, iv_prefix_entry *e, int commit)
{
    pthread_mutex_lock(&c->lock);
    e->pins--;
    if (commit) {
        e->committed = 1;
        c->stats.inserts++;
    } else {
        for (iv_prefix_entry **p = &c->head; *p; p = &(*p)->next)
            if (*p == e) {
                *p = e->next;
                break;
            }
        c->stats.bytes -= e->bytes;
        c->stats.entries--;
        entry_free(c, e);
    }
    pthread_mutex_unlock(&c->lock);
}

void iv_prefix_cache_release(iv_prefix_cache *c, iv_prefix_entry *e)
{
    pthread_mutex_lock(&c->lock);
    e->pins--;
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
