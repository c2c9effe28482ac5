#include "heads/scores.h"

#include <math.h>

float iv_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

void iv_scores_activate(float *s, int n)
{
    if (n == 1) {
        s[0] = iv_sigmoid(s[0]);
        return;
    }
    float mx = s[0];
    for (int i = 1; i < n; i++)
        if (s[i] > mx) mx = s[i];
    float sum = 0;
    for (int i = 0; i < n; i++) {
        s[i] = expf(s[i] - mx);
        sum += s[i];
    }
    for (int i = 0; i < n; i++) s[i] /= sum;
}

void iv_scores_order(const float *s, int n, int *order)
{
    /* Insertion sort: label counts are small, and it is stable. */
    for (int i = 0; i < n; i++) {
        int j = i;
        while (j > 0 && s[order[j - 1]] < s[i]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
}
