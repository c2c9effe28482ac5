/* ALiBi head slopes (Press et al.), the scheme BLOOM, MPT and Jina BERT use:
 * for n a power of two, slope_h = start^(h + 1) with start = 2^(-8/n); other
 * n take the n' = 2^floor(log2 n) power-of-two slopes followed by every other
 * slope of the 2n' scheme (indices 0, 2, 4, ...) until n are filled. Computed
 * in double as Python does, then rounded to float as torch.Tensor(list) does. */
#ifndef IV_MODELS_ALIBI_H
#define IV_MODELS_ALIBI_H

void iv_alibi_slopes(int n_heads, float *slopes);

#endif
