#include "models/bias_rules.h"

#include <stdio.h>

#include "base/log.h"

int iv_bias_check(iv_bias_audit *a, const iv_tensor **b, iv_bias_rule rule, const char *what, iv_err *err)
{
    if (rule.has && !*b)
        return iv_errf(err, IV_E_NOTFOUND, "%s: the checkpoint has no %s bias, which %s requires", a->family, what,
                       rule.why);
    if (!rule.has && *b) {
        *b = NULL;
        a->dropped++;
    }
    return 0;
}

int iv_bias_check_norm(iv_bias_audit *a, iv_norm *n, iv_bias_rule rule, const char *what, iv_err *err)
{
    if (!n->present) return 0;
    return iv_bias_check(a, &n->b, rule, what, err);
}

int iv_bias_check_layers(iv_bias_audit *a, iv_model *m, const iv_layer_bias_rules *r, iv_err *err)
{
    for (int l = 0; l < m->n_layers; l++) {
        iv_layer *L = &m->layers[l];
        char what[96];
#define CHECK(ptr, rule, name)                                                     \
    do {                                                                           \
        snprintf(what, sizeof what, "layer %d %s", l, name);                       \
        if (iv_bias_check(a, &(ptr), rule, what, err)) return -1;                  \
    } while (0)
        CHECK(L->qkv_b, r->qkv, "attention projection");
        CHECK(L->o_b, r->o, "attention output");
        if (L->up_w) CHECK(L->up_b, r->up, "MLP up projection"); /* routed layers have experts instead */
        if (L->down_w) CHECK(L->down_b, r->down, "MLP down projection");
#undef CHECK
        snprintf(what, sizeof what, "layer %d attention norm", l);
        if (iv_bias_check_norm(a, &L->attn_norm, r->norms, what, err)) return -1;
        snprintf(what, sizeof what, "layer %d MLP norm", l);
        if (iv_bias_check_norm(a, &L->mlp_norm, r->norms, what, err)) return -1;
    }
    return 0;
}

void iv_bias_audit_report(const iv_bias_audit *a)
{
    if (a->dropped)
        IV_WARN("%s: %d bias tensors in the checkpoint are left unused: the reference module has no such biases "
                "(transformers does not read them either)",
                a->family, a->dropped);
}
