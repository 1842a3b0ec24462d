/* pending_ops_a.c - TEMPORARY stand-ins for kern-a's elementwise/optimizer ops (phase 1 only). */
#include "cpu_ops.h"

int cpu_convert(sdt_backend *be, sdt_tensor *dst, const sdt_tensor *src)
{
    (void)dst;
    (void)src;
    return cpu_fail(be, "convert is not implemented yet");
}

int cpu_axpy(sdt_backend *be, sdt_tensor *dst, float alpha, const sdt_tensor *src)
{
    (void)dst;
    (void)alpha;
    (void)src;
    return cpu_fail(be, "axpy is not implemented yet");
}

int cpu_scale(sdt_backend *be, sdt_tensor *x, float alpha)
{
    (void)x;
    (void)alpha;
    return cpu_fail(be, "scale is not implemented yet");
}

int cpu_transpose_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x)
{
    (void)out;
    (void)x;
    return cpu_fail(be, "transpose_forward is not implemented yet");
}

int cpu_transpose_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout)
{
    (void)dx;
    (void)dout;
    return cpu_fail(be, "transpose_backward is not implemented yet");
}

int cpu_count_nonfinite(sdt_backend *be, const sdt_tensor *x, int64_t *count)
{
    (void)x;
    (void)count;
    return cpu_fail(be, "count_nonfinite is not implemented yet");
}

int cpu_activation_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, sdt_activation act)
{
    (void)out;
    (void)x;
    (void)act;
    return cpu_fail(be, "activation_forward is not implemented yet");
}

int cpu_activation_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *x, sdt_activation act)
{
    (void)dx;
    (void)dout;
    (void)x;
    (void)act;
    return cpu_fail(be, "activation_backward is not implemented yet");
}

int cpu_geglu_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x)
{
    (void)out;
    (void)x;
    return cpu_fail(be, "geglu_forward is not implemented yet");
}

int cpu_geglu_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *x)
{
    (void)dx;
    (void)dout;
    (void)x;
    return cpu_fail(be, "geglu_backward is not implemented yet");
}

int cpu_add_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *a, const sdt_tensor *b)
{
    (void)out;
    (void)a;
    (void)b;
    return cpu_fail(be, "add_forward is not implemented yet");
}

int cpu_add_channel_forward(sdt_backend *be, sdt_tensor *x, const sdt_tensor *v)
{
    (void)x;
    (void)v;
    return cpu_fail(be, "add_channel_forward is not implemented yet");
}

int cpu_add_channel_backward(sdt_backend *be, sdt_tensor *dv, const sdt_tensor *dout)
{
    (void)dv;
    (void)dout;
    return cpu_fail(be, "add_channel_backward is not implemented yet");
}

int cpu_concat_channels_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *a, const sdt_tensor *b)
{
    (void)out;
    (void)a;
    (void)b;
    return cpu_fail(be, "concat_channels_forward is not implemented yet");
}

int cpu_concat_channels_backward(sdt_backend *be, sdt_tensor *da, sdt_tensor *db, const sdt_tensor *dout)
{
    (void)da;
    (void)db;
    (void)dout;
    return cpu_fail(be, "concat_channels_backward is not implemented yet");
}

int cpu_upsample_nearest2x_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x)
{
    (void)out;
    (void)x;
    return cpu_fail(be, "upsample_nearest2x_forward is not implemented yet");
}

int cpu_upsample_nearest2x_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout)
{
    (void)dx;
    (void)dout;
    return cpu_fail(be, "upsample_nearest2x_backward is not implemented yet");
}

int cpu_dropout_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mask, const sdt_tensor *x, float p, uint64_t seed)
{
    (void)out;
    (void)mask;
    (void)x;
    (void)p;
    (void)seed;
    return cpu_fail(be, "dropout_forward is not implemented yet");
}

int cpu_dropout_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *mask)
{
    (void)dx;
    (void)dout;
    (void)mask;
    return cpu_fail(be, "dropout_backward is not implemented yet");
}

int cpu_timestep_embedding(sdt_backend *be, sdt_tensor *out, const sdt_tensor *t, bool flip_sin_to_cos, float downscale_freq_shift, float max_period)
{
    (void)out;
    (void)t;
    (void)flip_sin_to_cos;
    (void)downscale_freq_shift;
    (void)max_period;
    return cpu_fail(be, "timestep_embedding is not implemented yet");
}

int cpu_mse_loss_forward(sdt_backend *be, double *loss, const sdt_tensor *pred, const sdt_tensor *target, const sdt_tensor *weight)
{
    (void)loss;
    (void)pred;
    (void)target;
    (void)weight;
    return cpu_fail(be, "mse_loss_forward is not implemented yet");
}

int cpu_mse_loss_backward(sdt_backend *be, sdt_tensor *dpred, float dloss, const sdt_tensor *pred, const sdt_tensor *target, const sdt_tensor *weight)
{
    (void)dpred;
    (void)dloss;
    (void)pred;
    (void)target;
    (void)weight;
    return cpu_fail(be, "mse_loss_backward is not implemented yet");
}

int cpu_sum_squares(sdt_backend *be, double *sumsq, const sdt_tensor *const *tensors, int count)
{
    (void)sumsq;
    (void)tensors;
    (void)count;
    return cpu_fail(be, "sum_squares is not implemented yet");
}

int cpu_unscale_check(sdt_backend *be, sdt_tensor *const *grads, int count, float inv_scale, bool *found_inf)
{
    (void)grads;
    (void)count;
    (void)inv_scale;
    (void)found_inf;
    return cpu_fail(be, "unscale_check is not implemented yet");
}

int cpu_adamw_update(sdt_backend *be, sdt_tensor *param, const sdt_tensor *grad, sdt_tensor *m, sdt_tensor *v, float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step, float grad_scale)
{
    (void)param;
    (void)grad;
    (void)m;
    (void)v;
    (void)lr;
    (void)beta1;
    (void)beta2;
    (void)eps;
    (void)weight_decay;
    (void)step;
    (void)grad_scale;
    return cpu_fail(be, "adamw_update is not implemented yet");
}
