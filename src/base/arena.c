#include "base/arena.h"

#include <stdlib.h>

struct iv_arena_block {
    iv_arena_block *next;
    size_t cap, used;
    unsigned char *mem;
};

#define IV_ARENA_ALIGN 64
#define IV_ARENA_MIN_BLOCK (4u << 20)

void iv_arena_init(iv_arena *a)
{
    a->head = NULL;
    a->used_total = 0;
    a->peak = 0;
    a->block_alloc = NULL;
    a->block_free = NULL;
    a->block_ctx = NULL;
    a->align = IV_ARENA_ALIGN;
}

void iv_arena_init_with(iv_arena *a, void *(*alloc)(void *ctx, size_t bytes), void (*free_fn)(void *ctx, void *p),
                        void *ctx)
{
    iv_arena_init(a);
    a->block_alloc = alloc;
    a->block_free = free_fn;
    a->block_ctx = ctx;
    a->align = 256;
}

static iv_arena_block *new_block(const iv_arena *a, size_t cap)
{
    iv_arena_block *b = malloc(sizeof *b);
    if (!b) return NULL;
    b->mem = a->block_alloc ? a->block_alloc(a->block_ctx, cap) : aligned_alloc(IV_ARENA_ALIGN, cap);
    if (!b->mem) {
        free(b);
        return NULL;
    }
    b->cap = cap;
    b->used = 0;
    b->next = NULL;
    return b;
}

void *iv_arena_alloc(iv_arena *a, size_t n)
{
    n = (n + a->align - 1) & ~(a->align - 1);
    if (n == 0) n = a->align;
    iv_arena_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > IV_ARENA_MIN_BLOCK ? n : IV_ARENA_MIN_BLOCK;
        if (b && cap < b->cap * 2 && n <= b->cap * 2) cap = b->cap * 2;
        iv_arena_block *nb = new_block(a, cap);
        if (!nb) return NULL;
        nb->next = b;
        a->head = nb;
        b = nb;
    }
    void *p = b->mem + b->used;
    b->used += n;
    a->used_total += n;
    if (a->used_total > a->peak) a->peak = a->used_total;
    return p;
}

void iv_arena_reset(iv_arena *a)
{
    /* Keep one block big enough for everything the last batch used, so a
     * steady workload allocates nothing after warm-up. */
    size_t want = a->used_total;
    iv_arena_block *b = a->head;
    if (b && !b->next && b->cap >= want) {
        b->used = 0;
        a->used_total = 0;
        return;
    }
    iv_arena_free(a);
    if (want) a->head = new_block(a, want < IV_ARENA_MIN_BLOCK ? IV_ARENA_MIN_BLOCK : want);
}

void iv_arena_free(iv_arena *a)
{
    iv_arena_block *b = a->head;
    while (b) {
        iv_arena_block *next = b->next;
        if (a->block_free) a->block_free(a->block_ctx, b->mem);
        else free(b->mem);
        free(b);
        b = next;
    }
    a->head = NULL;
    a->used_total = 0;
}
