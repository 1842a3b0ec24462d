/* norm_operands.h - operand checks and float views shared by layernorm and groupnorm.
 *
 * Both norms take the same tensors (x, optional gamma/beta [C], saved mean/rstd)
 * and differ only in how rows or groups are walked; this is the common part:
 * checking the outputs against x, mapping every operand to a float buffer, and
 * writing the buffers back.
 */
#ifndef SDT_KERNELS_CPU_NORM_OPERANDS_H
#define SDT_KERNELS_CPU_NORM_OPERANDS_H

#include "cpu_check.h"

typedef struct cpu_norm_fwd {
    const float *x, *gamma, *beta; /* gamma, beta NULL when the tensor is */
    float *out, *mean, *rstd;
} cpu_norm_fwd;

typedef struct cpu_norm_bwd {
    const float *dout, *x, *gamma, *mean, *rstd;
    float *dx, *dgamma, *dbeta; /* each NULL when its tensor is */
} cpu_norm_bwd;

/* Checks out against x and maps the forward operands (the op's own checks of
 * x, gamma, beta, mean and rstd come first). Returns -1 with be->error set. */
int cpu_norm_forward_begin(sdt_backend *be, const char *op, cpu_norm_fwd *f, sdt_tensor *out, sdt_tensor *mean,
                           sdt_tensor *rstd, const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *beta);
void cpu_norm_forward_end(sdt_backend *be, const cpu_norm_fwd *f, sdt_tensor *out, sdt_tensor *mean,
                          sdt_tensor *rstd);

/* Checks dout and dx against x and dgamma/dbeta against [channels], then maps
 * the operands; the gradient buffers hold their current values (backward
 * accumulates). Returns -1 with be->error set. */
int cpu_norm_backward_begin(sdt_backend *be, const char *op, cpu_norm_bwd *b, sdt_tensor *dx, sdt_tensor *dgamma,
                            sdt_tensor *dbeta, const sdt_tensor *dout, const sdt_tensor *x,
                            const sdt_tensor *gamma, const sdt_tensor *mean, const sdt_tensor *rstd,
                            int64_t channels);
void cpu_norm_backward_end(sdt_backend *be, const cpu_norm_bwd *b, sdt_tensor *dx, sdt_tensor *dgamma,
                           sdt_tensor *dbeta);

#endif
