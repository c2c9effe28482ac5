/* Which biases a family's reference module has, checked after loading.
 *
 * The layer loaders take every bias a checkpoint holds. The reference
 * (transformers, or the hub's remote code) builds each nn.Linear and
 * LayerNorm with or without a bias from its own code or a config switch,
 * then loads the file into it: a bias it has that the file lacks runs with
 * random values there, and one it lacks that the file holds is never read.
 * So after loading, each bias is held against the rule: missing where the
 * reference has one is a load error naming the tensor and what requires it;
 * present where the reference has none is dropped, counted, and reported in
 * one warning, as transformers reports unused weights. */
#ifndef IV_MODELS_BIAS_RULES_H
#define IV_MODELS_BIAS_RULES_H

#include "models/model.h"

/* Whether the reference has one bias, and what says so (for messages):
 * a config key ("config.json's attention_bias") or the module. */
typedef struct iv_bias_rule {
    int has;
    const char *why;
} iv_bias_rule;

/* The rules for every layer's linears and LayerNorms (attn_norm, mlp_norm). */
typedef struct iv_layer_bias_rules {
    iv_bias_rule qkv, o, up, down, norms;
} iv_layer_bias_rules;

typedef struct iv_bias_audit {
    const char *family; /* for the warning */
    int dropped;
} iv_bias_audit;

/* One bias (`what` names it for messages): see the header comment. */
int iv_bias_check(iv_bias_audit *a, const iv_tensor **b, iv_bias_rule rule, const char *what, iv_err *err);
/* The same for one norm's bias; a norm the layer skips passes (RMSNorms
 * have no bias: give them a rule without one). */
int iv_bias_check_norm(iv_bias_audit *a, iv_norm *n, iv_bias_rule rule, const char *what, iv_err *err);
/* Every layer of m against the rules. */
int iv_bias_check_layers(iv_bias_audit *a, iv_model *m, const iv_layer_bias_rules *r, iv_err *err);
/* One warning naming how many biases were left unused, if any were. */
void iv_bias_audit_report(const iv_bias_audit *a);

#endif
