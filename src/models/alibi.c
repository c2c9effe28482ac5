#include "models/alibi.h"

#include <math.h>

/* start * start^i for i < n, start = 2^(-2^-(log2(n) - 3)) = 2^(-8/n). */
static double power_of_two_slope(int n, int i)
{
    const double start = pow(2.0, -pow(2.0, -(log2((double)n) - 3.0)));
    return start * pow(start, i);
}

void iv_alibi_slopes(int n_heads, float *slopes)
{
    int p = 1;
    while (p * 2 <= n_heads) p *= 2;
    for (int h = 0; h < p && h < n_heads; h++) slopes[h] = (float)power_of_two_slope(p, h);
    for (int h = p; h < n_heads; h++) slopes[h] = (float)power_of_two_slope(2 * p, 2 * (h - p));
}
