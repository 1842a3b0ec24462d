/* norm_operands.c - operand checks and float views shared by layernorm and groupnorm. */
#include "norm_operands.h"

int cpu_norm_forward_begin(sdt_backend *be, const char *op, cpu_norm_fwd *f, sdt_tensor *out, sdt_tensor *mean,
                           sdt_tensor *rstd, const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *beta)
{
    if (cpu_check_tensor(be, op, "out", out) || cpu_check_like(be, op, "out", out, "x", x)) return -1;
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

void cpu_norm_forward_end(sdt_backend *be, const cpu_norm_fwd *f, sdt_tensor *out, sdt_tensor *mean,
                          sdt_tensor *rstd)
{
    cpu_write_end(be, out, f->out);
    cpu_write_end(be, mean, f->mean);
    cpu_write_end(be, rstd, f->rstd);
}

static int norm_backward_check(sdt_backend *be, const char *op, const sdt_tensor *dx, const sdt_tensor *dgamma,
                               const sdt_tensor *dbeta, const sdt_tensor *dout, const sdt_tensor *x,
                               int64_t channels)
{
    if (cpu_check_tensor(be, op, "dout", dout) || cpu_check_like(be, op, "dout", dout, "x", x) ||
        cpu_check_like(be, op, "dx", dx, "x", x))
        return -1;
    const int64_t cdims[1] = {channels};
    if ((dgamma && cpu_check_shape(be, op, "dgamma [C]", dgamma, 1, cdims)) ||
        (dbeta && cpu_check_shape(be, op, "dbeta [C]", dbeta, 1, cdims)))
        return -1;
    return 0;
}

int cpu_norm_backward_begin(sdt_backend *be, const char *op, cpu_norm_bwd *b, sdt_tensor *dx, sdt_tensor *dgamma,
                            sdt_tensor *dbeta, const sdt_tensor *dout, const sdt_tensor *x,
                            const sdt_tensor *gamma, const sdt_tensor *mean, const sdt_tensor *rstd,
                            int64_t channels)
{
    if (norm_backward_check(be, op, dx, dgamma, dbeta, dout, x, channels)) return -1;
    b->dout = cpu_read_f32(be, dout, 0);
    b->x = cpu_read_f32(be, x, 1);
    b->gamma = cpu_read_f32(be, gamma, 2);
    b->mean = cpu_read_f32(be, mean, 3);
    b->rstd = cpu_read_f32(be, rstd, 4);
    b->dx = cpu_write_begin(be, dx, 5, true);
    b->dgamma = cpu_write_begin(be, dgamma, 6, true);
    b->dbeta = cpu_write_begin(be, dbeta, 7, true);
    if (!b->dout || !b->x || (gamma && !b->gamma) || !b->mean || !b->rstd || (dx && !b->dx) ||
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
