/* Small-matrix math the decision heads (laya_head.c, clef_head.c) share.
 * The heads run on the host over a few hundred rows, matching their
 * PyTorch references' LayerNorm and erf GELU. */
#ifndef IV_HEADS_HEAD_MATH_H
#define IV_HEADS_HEAD_MATH_H

/* A LayerNorm's weight and bias, [d] each. */
typedef struct iv_head_ln {
    const float *w, *b;
} iv_head_ln;

/* y [n, d] = LayerNorm(x) (eps 1e-5, nn.LayerNorm's default), mean and
 * variance accumulated in double. y may not alias x. */
void iv_head_layer_norm(const iv_head_ln *l, const float *x, int n, int d, float *y);
/* GELU, erf form (nn.GELU()). */
float iv_head_gelu(float x);

#endif
