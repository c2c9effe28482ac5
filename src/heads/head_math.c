#include "heads/head_math.h"

#include <math.h>
#include <stddef.h>

void iv_head_layer_norm(const iv_head_ln *l, const float *x, int n, int d, float *y)
{
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * d;
        double mean = 0, var = 0;
        for (int i = 0; i < d; i++) mean += xr[i];
        mean /= d;
        for (int i = 0; i < d; i++) var += (xr[i] - mean) * (xr[i] - mean);
        const float inv = (float)(1.0 / sqrt(var / d + 1e-5));
        for (int i = 0; i < d; i++) y[(size_t)r * d + i] = (float)(xr[i] - mean) * inv * l->w[i] + l->b[i];
    }
}

float iv_head_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
