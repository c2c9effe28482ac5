/* Laya's rl_agent_config.json (NandhaKishorM/laya, laya/agent.py): the head
 * depth, the sequence budgets and the fitted temperatures. Every key the
 * public checkpoints and laya's training code write is known; any other key
 * is an error, so a checkpoint that means something we do not implement is
 * refused rather than guessed at. */
#ifndef IV_DECISIONS_LAYA_CONFIG_H
#define IV_DECISIONS_LAYA_CONFIG_H

#include "base/err.h"
#include "decisions/contract.h"

#define IV_LAYA_TEMP_MIN 0.5
#define IV_LAYA_TEMP_MAX 5.0

typedef struct iv_laya_config {
    int head_layers;  /* 2 */
    int max_len;      /* 512 */
    int head_max_len; /* 192 */
    int n_act;        /* len(act_costs) + 1 */
    double temperature[3];    /* per type (choice, score, noul), clamped */
    double by_options[3][4];  /* per type and bucket (2, 3-5, 6-10, 11+), clamped; 0: absent */
} iv_laya_config;

/* Reads dir/rl_agent_config.json. */
int iv_laya_config_load(iv_laya_config *c, const char *dir, iv_err *err);
/* The same from JSON text (the unit tests, the fuzz target). */
int iv_laya_config_parse(iv_laya_config *c, const char *json, size_t len, iv_err *err);

/* The temperature for a question of type t with k options: the bucket's
 * (2, 3-5, 6-10, 11+), else the type's; already clamped to [0.5, 5]. */
double iv_laya_temperature(const iv_laya_config *c, iv_dq_type t, int k);

#endif
