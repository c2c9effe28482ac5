/* The relative-position bias gather (ops.h iv_rel_bias_args): DeBERTa's
 * c2p / p2c terms, in the arithmetic the host hook used before, so FP32
 * results are unchanged bit for bit. */
#include "ops/cpu/cpu_ops.h"

/* The sequence holding row t: the last s with cu[s] <= t. */
static int seq_of(const int32_t *cu, int n_seqs, int64_t t)
{
    int lo = 0, hi = n_seqs - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (cu[mid] <= t) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

void iv_cpu_rel_bias(const iv_ops *ops, const iv_rel_bias_args *a)
{
    if (a->n_seqs <= 0) return;
    const int32_t *cu = a->cu_seqlens;
    const float *c2p = a->c2p.data, *p2c = a->p2c.data;
    const int64_t ldc = a->c2p.ld, ldp = a->p2c.ld;
    int64_t longest = 0;
    for (int s = 0; s < a->n_seqs; s++)
        if (cu[s + 1] - cu[s] > longest) longest = cu[s + 1] - cu[s];
    const float scale = a->scale;
#pragma omp parallel for schedule(static) if ((cu[a->n_seqs] - cu[0]) * longest >= IV_CPU_PAR_MIN)
    for (int64_t t = cu[0]; t < cu[a->n_seqs]; t++) {
        const int s = seq_of(cu, a->n_seqs, t);
        const int64_t first = cu[s], i = t - first, L = cu[s + 1] - first;
        float *row = a->bias + a->offsets[s] + ((int64_t)a->head * L + i) * L;
        const int32_t *c2p_col = a->c2p_idx + a->idx_mid + i; /* c2p_col[-j]: distance i - j */
        const int32_t *p2c_col = a->p2c_idx + a->idx_mid + i;
        const float *cq = c2p ? c2p + t * ldc : NULL;     /* query i's row */
        const float *pk = p2c ? p2c + first * ldp : NULL; /* key 0's row */
        for (int64_t j = 0; j < L; j++) {
            float v = 0.0f;
            if (cq) v += cq[c2p_col[-j]] / scale;
            if (pk) v += pk[j * ldp + p2c_col[-j]] / scale;
            row[j] = v;
        }
    }
}
