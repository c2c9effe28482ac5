/* Where a model's load-time weight copies go (the CPU kernel's FP32 panels,
 * pack_weights.c; int8 blobs, quantize.c): one model-owned region for all
 * of a pass's copies, 2 MiB-aligned and on transparent huge pages, so that
 * every copy, small ones too, lies on 2 MiB pages. A short request streams
 * every weight from memory once, and on 4 KiB pages that is a TLB miss
 * every 4 KiB. */
#ifndef IV_MODELS_WEIGHT_REGION_H
#define IV_MODELS_WEIGHT_REGION_H

#include <stddef.h>

#include "models/model.h"

typedef struct iv_weight_region {
    char *next, *end; /* the unused part (NULL: no region) */
} iv_weight_region;

/* Bytes a piece of n bytes takes in a region (64-byte aligned pieces). */
size_t iv_weight_region_piece(size_t n);

/* Reserves a region of `bytes` (the sum of iv_weight_region_piece of every
 * piece to come) for m. Without memory for it in one piece, *r stays
 * empty and every take gets its own allocation. */
void iv_weight_region_reserve(iv_weight_region *r, iv_model *m, size_t bytes);

/* A 64-byte aligned, model-owned piece of n bytes: from the region while it
 * lasts, else an allocation of its own (on huge pages too when large);
 * NULL when out of memory. */
void *iv_weight_region_take(iv_weight_region *r, iv_model *m, size_t n);

#endif
