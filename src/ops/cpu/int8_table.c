/* The CPU op table of `--dtype int8`: the FP32 table with a linear that
 * dispatches on the weight's dtype, so model code runs unchanged whether a
 * layer was quantized (IV_I8) or kept in FP32 (embeddings' neighbours, small
 * heads, sentence-transformers Dense layers). */
#include <pthread.h>

#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/int8_ops.h"

static void linear_by_dtype(const iv_ops *ops, iv_view y, iv_view x, const iv_tensor *w, const iv_tensor *b,
                            iv_act act, const void *residual)
{
    if (w->dtype == IV_I8)
        iv_cpu_linear_int8(ops, y, x, w, b, act, residual);
    else
        iv_cpu_linear(ops, y, x, w, b, act, residual);
}

static iv_ops int8_ops;
static pthread_once_t int8_once = PTHREAD_ONCE_INIT;

/* Copied from the FP32 table at first use, so ops added there appear here. */
static void init_int8_ops(void)
{
    int8_ops = *iv_cpu_ops();
    int8_ops.name = "cpu-int8";
    int8_ops.linear = linear_by_dtype;
}

const iv_ops *iv_cpu_int8_ops(void)
{
    pthread_once(&int8_once, init_int8_ops);
    return &int8_ops;
}
