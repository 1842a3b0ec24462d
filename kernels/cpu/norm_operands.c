/* norm_operands.c - float views of the operands shared by layernorm and groupnorm. */
#include "norm_operands.h"

int cpu_norm_forward_begin(sdt_backend *be, const char *op, cpu_norm_fwd *f, sdt_tensor *out, sdt_tensor *mean,
                           sdt_tensor *rstd, const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *beta)
{
    f->x = cpu_read_f32(be, x, 0);
    f->gamma = cpu_read_f32(be, gamma, 1);
    f->beta = cpu_read_f32(be, beta, 2);
    f->out = cpu_write_begin(be, out, 3, false);
    f->mean = cpu_write_begin(be, mean, 4, false);
    f->rstd = cpu_write_begin(be, rstd, 5, false);
    if (!f->x || (gamma && !f->gamma) || (beta && !f->beta) || !f->out || !f->mean || !f->rstd)
        return cpu_fail_oom(be, op, sdt_tensor_nbytes(out));
    return 0;
}

void cpu_norm_forward_end(sdt_backend *be, const cpu_norm_fwd *f, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd)
{
    cpu_write_end(be, out, f->out);
    cpu_write_end(be, mean, f->mean);
    cpu_write_end(be, rstd, f->rstd);
}

int cpu_norm_backward_begin(sdt_backend *be, const char *op, cpu_norm_bwd *b, sdt_tensor *dx, sdt_tensor *dgamma,
                            sdt_tensor *dbeta, const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *gamma,
                            const sdt_tensor *beta, const sdt_tensor *mean, const sdt_tensor *rstd)
{
    b->dout = cpu_read_f32(be, dout, 0);
    b->x = cpu_read_f32(be, x, 1);
    b->gamma = cpu_read_f32(be, gamma, 2);
    b->beta = cpu_read_f32(be, beta, 8);
    b->mean = cpu_read_f32(be, mean, 3);
    b->rstd = cpu_read_f32(be, rstd, 4);
    b->dx = cpu_write_begin(be, dx, 5, true);
    b->dgamma = cpu_write_begin(be, dgamma, 6, true);
    b->dbeta = cpu_write_begin(be, dbeta, 7, true);
    if (!b->dout || !b->x || (gamma && !b->gamma) || (beta && !b->beta) || !b->mean || !b->rstd || (dx && !b->dx) ||
        (dgamma && !b->dgamma) || (dbeta && !b->dbeta))
        return cpu_fail_oom(be, op, sdt_tensor_nbytes(x));
    return 0;
}

void cpu_norm_backward_end(sdt_backend *be, const cpu_norm_bwd *b, sdt_tensor *dx, sdt_tensor *dgamma,
                           sdt_tensor *dbeta)
{
    cpu_write_end(be, dx, b->dx);
    cpu_write_end(be, dgamma, b->dgamma);
    cpu_write_end(be, dbeta, b->dbeta);
}
