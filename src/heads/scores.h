/* Turning classifier logits into the scores the APIs return. */
#ifndef IV_HEADS_SCORES_H
#define IV_HEADS_SCORES_H

/* In place: softmax over n > 1 labels, sigmoid when n == 1 (as TEI). */
void iv_scores_activate(float *s, int n);
/* order[] = label indices by descending score (stable). */
void iv_scores_order(const float *s, int n, int *order);
float iv_sigmoid(float x);

#endif
