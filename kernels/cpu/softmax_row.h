/* softmax_row.h - the one-row softmax shared by softmax.c and attention.c. */
#ifndef SDT_KERNELS_CPU_SOFTMAX_ROW_H
#define SDT_KERNELS_CPU_SOFTMAX_ROW_H

#include <stdbool.h>

/* y = softmax(x) over n entries, max-subtracted so large logits cannot
 * overflow; y may alias x. */
void cpu_softmax_row(float *y, const float *x, int n);

/* Backward of y = softmax(x) given dy: g = y * (dy - sum(dy * y)).
 * dx += g when accumulate, else dx = g (dx may then alias dy). */
void cpu_softmax_row_backward(float *dx, const float *dy, const float *y, int n, bool accumulate);

#endif
