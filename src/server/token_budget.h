/* The token budget of each model's batches. With --max-batch-tokens the
 * operator's number holds for every model. Without it, a model whose
 * replicas all run on GPUs gets what their free memory holds after every
 * model's weights are loaded: a probe batch measures the activation bytes
 * per token (engine.h), the free memory of each device is shared equally by
 * the replicas (of every model) on it, 85% of a replica's share is spent,
 * and the budget is clamped to [the model's input limit, 262144]. Devices
 * that cannot report their memory (the CPU, the emulated device) keep the
 * default 16384. */
#ifndef IV_SERVER_TOKEN_BUDGET_H
#define IV_SERVER_TOKEN_BUDGET_H

#include "server/server.h"

/* Sets every model's max_batch_tokens (and logs how a sized one was found). */
void iv_size_token_budgets(iv_server *s);

#endif
