/* Bump allocator for per-batch activations: one reset per batch, no frees.
 * Blocks are 64-byte aligned so SIMD kernels and BLAS see aligned rows. */
#ifndef IV_BASE_ARENA_H
#define IV_BASE_ARENA_H

#include <stddef.h>

typedef struct iv_arena_block iv_arena_block;
typedef struct iv_arena {
    iv_arena_block *head;
    /* Where blocks come from: malloc for host arenas, a device's memory for
     * device arenas (iv_arena_init_with); align is 64 or 256 bytes. */
    void *(*block_alloc)(void *ctx, size_t bytes);
    void (*block_free)(void *ctx, void *p);
    void *block_ctx;
    size_t align;
    size_t used_total;  /* bytes handed out since the last reset */
    size_t peak;        /* high-water mark across resets */
} iv_arena;

void iv_arena_init(iv_arena *a);
/* An arena whose blocks come from alloc/free (256-byte aligned memory that
 * the host may not be able to read: only pointers are handed out). */
void iv_arena_init_with(iv_arena *a, void *(*alloc)(void *ctx, size_t bytes), void (*free_fn)(void *ctx, void *p),
                        void *ctx);
/* Returns zeroed=0 memory of n bytes (64-byte aligned); NULL on OOM. */
void *iv_arena_alloc(iv_arena *a, size_t n);
/* Keeps the largest block for reuse and frees the rest. */
void iv_arena_reset(iv_arena *a);
void iv_arena_free(iv_arena *a);

#endif
