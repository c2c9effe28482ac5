/* Memory for the tokenizer: the per-call arena and the load-time hash maps
 * (string -> id for vocabularies, uint64 -> uint64 for BPE merges and the
 * Unigram trie). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

/* ---------------------------------------------------------------- arena */

struct tok_blk {
    tok_blk *next;
    size_t cap, used;
    _Alignas(16) unsigned char mem[];
};

#define TOK_ARENA_FIRST (32u << 10)

void tok_arena_init(tok_arena *a, jmp_buf *oom)
{
    a->head = NULL;
    a->oom = oom;
}

void *tok_alloc(tok_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    tok_blk *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = b ? b->cap * 2 : TOK_ARENA_FIRST;
        if (cap < n) cap = n;
        tok_blk *nb = malloc(sizeof *nb + cap);
        if (!nb) longjmp(*a->oom, 1);
        nb->cap = cap;
        nb->used = 0;
        nb->next = b;
        a->head = nb;
        b = nb;
    }
    void *p = b->mem + b->used;
    b->used += n;
    return p;
}

void *tok_grow(tok_arena *a, void *p, int *cap, int need, size_t elem)
{
    if (need <= *cap) return p;
    int nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *np = tok_alloc(a, (size_t)nc * elem);
    if (p && *cap) memcpy(np, p, (size_t)*cap * elem);
    *cap = nc;
    return np;
}

char *tok_strdup_arena(tok_arena *a, const char *s, int32_t len)
{
    char *p = tok_alloc(a, (size_t)len + 1);
    memcpy(p, s, (size_t)len);
    p[len] = 0;
    return p;
}

void tok_arena_free(tok_arena *a)
{
    tok_blk *b = a->head;
    while (b) {
        tok_blk *n = b->next;
        free(b);
        b = n;
    }
    a->head = NULL;
}

/* ------------------------------------------------------------- hashing */

uint64_t tok_hash_bytes(const void *p, size_t n)
{
    /* 64-bit multiply-mix over 8-byte words: fast for short vocabulary
     * keys, good enough spread for open addressing. */
    const unsigned char *s = p;
    uint64_t h = 0x243F6A8885A308D3ull ^ (n * 0x9E3779B97F4A7C15ull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++) w |= (uint64_t)s[i] << (8 * i);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    h *= 0x9E3779B97F4A7C15ull;
    h ^= h >> 32;
    return h;
}

/* ---------------------------------------------------------- string pool */

struct tok_pool_chunk {
    tok_pool_chunk *next;
    size_t cap, used;
    char mem[];
};

static const char *pool_copy(tok_pool_chunk **pool, const char *s, int32_t len)
{
    size_t need = (size_t)len + 1;
    tok_pool_chunk *c = *pool;
    if (!c || c->cap - c->used < need) {
        size_t cap = need > (256u << 10) ? need : (256u << 10);
        tok_pool_chunk *nc = malloc(sizeof *nc + cap);
        if (!nc) return NULL;
        nc->cap = cap;
        nc->used = 0;
        nc->next = c;
        *pool = nc;
        c = nc;
    }
    char *p = c->mem + c->used;
    memcpy(p, s, (size_t)len);
    p[len] = 0;
    c->used += need;
    return p;
}

/* ----------------------------------------------------------- string map */

/* A slot packs the entry index (low 32 bits, all ones when empty) with the
 * high half of the key's hash, so that a probe that misses (the common case
 * in WordPiece and BPE lookups) rarely touches the entry array. */
#define SLOT_EMPTY UINT64_MAX
#define SLOT_TAG(h) ((h) >> 32)

static int strmap_rehash(tok_strmap *m, uint32_t nslots)
{
    uint64_t *slots = malloc(sizeof *slots * nslots);
    if (!slots) return -1;
    memset(slots, 0xFF, sizeof *slots * nslots);
    for (int i = 0; i < m->n; i++) {
        uint64_t h = m->ents[i].hash;
        uint32_t j = (uint32_t)h & (nslots - 1);
        while (slots[j] != SLOT_EMPTY) j = (j + 1) & (nslots - 1);
        slots[j] = SLOT_TAG(h) << 32 | (uint32_t)i;
    }
    free(m->slots);
    m->slots = slots;
    m->mask = nslots - 1;
    return 0;
}

/* Slots for `expected` keys: a power of two (masks replace modulo) at
 * least twice the count, so probe runs stay short. */
static uint32_t initial_slots(int expected)
{
    uint32_t ns = 16;
    while (ns < (uint32_t)expected * 2u) ns <<= 1;
    return ns;
}

int tok_strmap_init(tok_strmap *m, int expected)
{
    memset(m, 0, sizeof *m);
    m->cap = expected > 8 ? expected : 8;
    m->ents = malloc(sizeof *m->ents * (size_t)m->cap);
    if (!m->ents) return -1;
    return strmap_rehash(m, initial_slots(expected));
}

const tok_strmap_ent *tok_strmap_find(const tok_strmap *m, const char *key, int32_t len)
{
    if (!m->slots) return NULL;
    uint64_t h = tok_hash_bytes(key, (size_t)len);
    uint32_t j = (uint32_t)h & m->mask;
    uint64_t tag = SLOT_TAG(h);
    for (;;) {
        uint64_t sl = m->slots[j];
        if (sl == SLOT_EMPTY) return NULL;
        if ((sl >> 32) == tag) {
            const tok_strmap_ent *e = &m->ents[(uint32_t)sl];
            if (e->len == len && memcmp(e->key, key, (size_t)len) == 0) return e;
        }
        j = (j + 1) & m->mask;
    }
}

int32_t tok_strmap_get(const tok_strmap *m, const char *key, int32_t len)
{
    const tok_strmap_ent *e = tok_strmap_find(m, key, len);
    return e ? e->val : -1;
}

const char *tok_strmap_put(tok_strmap *m, const char *key, int32_t len, int32_t val)
{
    tok_strmap_ent *found = (tok_strmap_ent *)tok_strmap_find(m, key, len);
    if (found) {
        found->val = val;
        return found->key;
    }
    if ((uint32_t)(m->n + 1) * 2 > m->mask + 1 && strmap_rehash(m, (m->mask + 1) * 2)) return NULL;
    if (m->n == m->cap) {
        int nc = m->cap * 2;
        tok_strmap_ent *ne = realloc(m->ents, sizeof *ne * (size_t)nc);
        if (!ne) return NULL;
        m->ents = ne;
        m->cap = nc;
    }
    const char *k = pool_copy(&m->pool, key, len);
    if (!k) return NULL;
    uint64_t h = tok_hash_bytes(key, (size_t)len);
    m->ents[m->n] = (tok_strmap_ent){h, k, len, val};
    uint32_t j = (uint32_t)h & m->mask;
    while (m->slots[j] != SLOT_EMPTY) j = (j + 1) & m->mask;
    m->slots[j] = SLOT_TAG(h) << 32 | (uint32_t)m->n++;
    return k;
}

void tok_strmap_free(tok_strmap *m)
{
    free(m->ents);
    free(m->slots);
    tok_pool_chunk *c = m->pool;
    while (c) {
        tok_pool_chunk *n = c->next;
        free(c);
        c = n;
    }
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------- u64 map */

static int u64map_alloc(tok_u64map *m, uint32_t nslots)
{
    m->keys = malloc(sizeof *m->keys * nslots);
    m->vals = malloc(sizeof *m->vals * nslots);
    if (!m->keys || !m->vals) {
        free(m->keys);
        free(m->vals);
        m->keys = m->vals = NULL;
        return -1;
    }
    memset(m->keys, 0xFF, sizeof *m->keys * nslots);
    m->mask = nslots - 1;
    return 0;
}

int tok_u64map_init(tok_u64map *m, int expected)
{
    memset(m, 0, sizeof *m);
    return u64map_alloc(m, initial_slots(expected));
}

static void u64_insert(tok_u64map *m, uint64_t key, uint64_t val)
{
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    uint32_t i = (uint32_t)(h >> 32) & m->mask;
    for (;;) {
        if (m->keys[i] == key) {
            m->vals[i] = val;
            return;
        }
        if (m->keys[i] == UINT64_MAX) {
            m->keys[i] = key;
            m->vals[i] = val;
            m->n++;
            return;
        }
        i = (i + 1) & m->mask;
    }
}

int tok_u64map_put(tok_u64map *m, uint64_t key, uint64_t val)
{
    if (!m->keys && tok_u64map_init(m, 16)) return -1;
    if ((uint32_t)(m->n + 1) * 2 > m->mask + 1) {
        tok_u64map old = *m;
        if (u64map_alloc(m, (old.mask + 1) * 2)) {
            *m = old;
            return -1;
        }
        m->n = 0;
        for (uint32_t i = 0; i <= old.mask; i++)
            if (old.keys[i] != UINT64_MAX) u64_insert(m, old.keys[i], old.vals[i]);
        free(old.keys);
        free(old.vals);
    }
    u64_insert(m, key, val);
    return 0;
}

void tok_u64map_free(tok_u64map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}
