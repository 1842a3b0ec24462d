/* norm_operands.h - float views of the operands shared by layernorm and groupnorm.
 *
 * Both norms take the same tensors (x, optional gamma/beta [C], saved mean/rstd)
 * and differ only in how rows or groups are walked; this is the common part:
 * mapping every operand to a float buffer and writing the buffers back (the
 * operands are checked before the op runs: kernels/op_checks.c).
 */
#ifndef SDT_KERNELS_CPU_NORM_OPERANDS_H
#define SDT_KERNELS_CPU_NORM_OPERANDS_H

#include "cpu_context.h"

typedef struct cpu_norm_fwd {
    const float *x, *gamma, *beta; /* gamma, beta NULL when the tensor is */
    float *out, *mean, *rstd;
} cpu_norm_fwd;

typedef struct cpu_norm_bwd {
    const float *dout, *x, *gamma, *beta, *mean, *rstd; /* beta: only an activated norm's backward reads it */
    float *dx, *dgamma, *dbeta;                         /* each NULL when its tensor is */
} cpu_norm_bwd;

/* Maps the forward operands. Returns -1 with be->error set (out of memory). */
int cpu_norm_forward_begin(sdt_backend *be, const char *op, cpu_norm_fwd *f, sdt_tensor *out, sdt_tensor *mean,
                           sdt_tensor *rstd, const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *beta);
void cpu_norm_forward_end(sdt_backend *be, const cpu_norm_fwd *f, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd);

/* Maps the backward operands; the gradient buffers hold their current values
 * (backward accumulates). Returns -1 with be->error set (out of memory). */
int cpu_norm_backward_begin(sdt_backend *be, const char *op, cpu_norm_bwd *b, sdt_tensor *dx, sdt_tensor *dgamma,
                            sdt_tensor *dbeta, const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *gamma,
                            const sdt_tensor *beta, const sdt_tensor *mean, const sdt_tensor *rstd);
void cpu_norm_backward_end(sdt_backend *be, const cpu_norm_bwd *b, sdt_tensor *dx, sdt_tensor *dgamma,
                           sdt_tensor *dbeta);

#endif
