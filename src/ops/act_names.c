/* HF config hidden_act strings -> iv_act. Only names whose math we compute
 * exactly are accepted (transformers' ACT2FN):
 *   gelu, gelu_python                      0.5 x (1 + erf(x / sqrt2))
 *   gelu_new, gelu_pytorch_tanh,           0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)));
 *   gelu_python_tanh, gelu_accurate,       gelu_fast writes the same polynomial as
 *   gelu_fast                              x * 0.7978845608 * (1 + 0.044715 x^2)
 *   silu, swish                            x * sigmoid(x)
 *   relu, tanh, sigmoid
 *   linear                                 identity
 * Others (quick_gelu, gelu_10, relu6, mish, ...) differ and are refused. */
#include <string.h>

#include "ops/ops.h"

int iv_act_from_name(const char *name)
{
    static const struct {
        const char *name;
        iv_act act;
    } names[] = {
        {"gelu", IV_ACT_GELU},
        {"gelu_python", IV_ACT_GELU},
        {"gelu_new", IV_ACT_GELU_TANH},
        {"gelu_pytorch_tanh", IV_ACT_GELU_TANH},
        {"gelu_python_tanh", IV_ACT_GELU_TANH},
        {"gelu_accurate", IV_ACT_GELU_TANH},
        {"gelu_fast", IV_ACT_GELU_TANH},
        {"silu", IV_ACT_SILU},
        {"swish", IV_ACT_SILU},
        {"relu", IV_ACT_RELU},
        {"tanh", IV_ACT_TANH},
        {"sigmoid", IV_ACT_SIGMOID},
        {"linear", IV_ACT_NONE},
    };
    if (!name) return -1;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i].name) == 0) return (int)names[i].act;
    return -1;
}
