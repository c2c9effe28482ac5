/* A packed batch: the tokens of every sequence concatenated, no padding.
 * Sequence s owns tokens [cu_seqlens[s], cu_seqlens[s+1]). Positions are
 * derived by the model (families differ: RoBERTa offsets them by pad+1). */
#ifndef IV_MODELS_BATCH_H
#define IV_MODELS_BATCH_H

#include <stdint.h>

typedef struct iv_batch {
    int n_seqs;
    int64_t n_tokens;
    const int32_t *ids;        /* [n_tokens] */
    const int32_t *type_ids;   /* [n_tokens] or NULL (all 0) */
    const int32_t *cu_seqlens; /* [n_seqs + 1], cu_seqlens[0] = 0 */
    const uint8_t *key_mask;   /* [n_tokens] or NULL: 0 = never attended as a key */
    /* The same arrays in the device's memory, filled by the model's forward
     * once per batch (NULL before; type ids are only read by the embedding). */
    const int32_t *ids_dev, *type_ids_dev, *cu_seqlens_dev;
    const uint8_t *key_mask_dev;
    int max_seqlen;
} iv_batch;

static inline int iv_batch_seqlen(const iv_batch *b, int s) { return b->cu_seqlens[s + 1] - b->cu_seqlens[s]; }

#endif
