/* The one row per sequence a task's head reads, when it reads exactly one,
 * so the model's last layer computes only those rows past its keys and
 * values (iv_model_forward_head_rows); and the batch of one row per
 * sequence that the head then pools. */
#ifndef IV_ENGINE_HEAD_ROWS_H
#define IV_ENGINE_HEAD_ROWS_H

#include "base/arena.h"
#include "engine/engine.h"
#include "models/model.h"

/* What decides which rows a task's output reads. */
typedef struct iv_head_reads {
    iv_task task;
    const iv_pool_mode *pool_modes; /* IV_TASK_EMBED: the pooling modes (several: concatenated) */
    int n_pool_modes;
    iv_seq_pool seq_pool;           /* IV_TASK_CLASSIFY: the classifier's token */
    int32_t pad_id;                 /* IV_SEQ_POOL_LAST_NON_PAD's pad */
} iv_head_reads;

/* host [n_seqs] batch rows, one per sequence, that are all the head reads
 * (skip: per sequence, leading rows pooling leaves out, or NULL); NULL when
 * the task reads more (mean, max or weighted pooling, several modes, token
 * outputs, SPLADE, multi-vector) or out of memory. */
const int32_t *iv_head_rows_pick(const iv_head_reads *h, const iv_batch *b, const int *skip, iv_arena *arena);

/* *one: sequence s of b reduced to its row rows[s] (ids and cu_seqlens on
 * the host and the device), the batch a head runs on over the states
 * iv_model_forward_head_rows returns. -1 when out of memory. */
int iv_head_rows_batch(const iv_ops *ops, const iv_batch *b, const int32_t *rows, const iv_fwd_mem *mem,
                       iv_batch *one);

#endif
