/* channels_last.c - the CPU backend's channels-last operands (tensor.h): the convolutional ops
 * (conv2d, groupnorm, add_channel, concat_channels, upsample_nearest2x) stage every channels-last
 * tensor through a row-major (NCHW) copy in its own dtype, run the NCHW kernel, and move what it
 * wrote back. Bytes move and nothing is rounded, so a channels-last call gives exactly the NCHW
 * call's values: the CPU is the reference the CUDA backend's NHWC kernels are tested against
 * (tests/gpu), and speed here matters only for tests (the CPU prefers NCHW). The elementwise ops
 * need nothing: their operands share one layout (kernels/op_checks.c). */
#include "cpu_context.h"

#include <stdlib.h>

#include "host_convert.h"

/* A tensor as the NCHW kernel sees it: the tensor itself, or a row-major copy of a channels-last one. */
typedef struct staged {
    sdt_tensor t;
    void *mem; /* the copy, when one was made */
} staged;

static void permute(const sdt_tensor *t, const void *src, void *dst, bool to_channels_last)
{
    sdt_host_permute_channels(src, dst, sdt_dtype_size(t->dtype), t->shape[0], t->shape[1], t->shape[2] * t->shape[3],
                              to_channels_last);
}

/* s stands for t (NULL stays NULL: an optional operand). read: the kernel reads t's values (an
 * input, or a gradient it accumulates into), so the copy starts from them. */
static int stage(sdt_backend *be, const char *op, const sdt_tensor *t, bool read, staged *s)
{
    s->mem = NULL;
    if (!t) return 0;
    s->t = *t;
    if (!t->channels_last) return 0;
    s->t.channels_last = false;
    if (!t->data) return 0; /* a shape only (a frozen layer's input in backward) */
    size_t bytes = sdt_tensor_nbytes(t);
    s->mem = malloc(bytes ? bytes : 1);
    if (!s->mem) return cpu_fail_oom(be, op, bytes);
    if (read) permute(t, t->data, s->mem, false);
    s->t.data = s->mem;
    return 0;
}

/* Moves what the kernel wrote (when it succeeded) back into the channels-last tensor t and frees
 * the copy; for an input (t NULL) only frees it. */
static void unstage(sdt_tensor *t, staged *s, bool written)
{
    if (s->mem && t && written) permute(t, s->mem, t->data, true);
    free(s->mem);
    s->mem = NULL;
}

#define STAGES 5

/* Stages n operands in order; on failure frees what was staged. */
static int stage_all(sdt_backend *be, const char *op, staged *s, const sdt_tensor *const *t, const bool *read, int n)
{
    for (int i = 0; i < STAGES; i++) s[i].mem = NULL;
    for (int i = 0; i < n; i++)
        if (stage(be, op, t[i], read[i], &s[i])) {
            for (int j = 0; j < i; j++) unstage(NULL, &s[j], false);
            return -1;
        }
    return 0;
}

/* Unstages n operands: out[i] (NULL for inputs) receives its copy when rc is 0. Returns rc. */
static int unstage_all(staged *s, sdt_tensor *const *out, int n, int rc)
{
    for (int i = 0; i < n; i++) unstage(out[i], &s[i], rc == 0);
    return rc;
}

static int cl_conv2d_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w,
                             const sdt_tensor *b, int stride, int pad)
{
    staged s[STAGES];
    const sdt_tensor *t[3] = {out, x, w};
    const bool read[3] = {false, true, true};
    if (stage_all(be, "conv2d_forward", s, t, read, 3)) return -1;
    int rc = cpu_conv2d_forward(be, &s[0].t, &s[1].t, &s[2].t, b, stride, pad);
    sdt_tensor *const written[3] = {out, NULL, NULL};
    return unstage_all(s, written, 3, rc);
}

static int cl_conv2d_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dw, sdt_tensor *db, const sdt_tensor *dout,
                              const sdt_tensor *x, const sdt_tensor *w, int stride, int pad)
{
    staged s[STAGES];
    const sdt_tensor *t[5] = {dx, dw, dout, x, w};
    const bool read[5] = {true, true, true, true, true};
    if (stage_all(be, "conv2d_backward", s, t, read, 5)) return -1;
    int rc = cpu_conv2d_backward(be, (dx ? &s[0].t : NULL), (dw ? &s[1].t : NULL), db, &s[2].t, &s[3].t, &s[4].t,
                                 stride, pad);
    sdt_tensor *const written[5] = {dx, dw, NULL, NULL, NULL};
    return unstage_all(s, written, 5, rc);
}

static int cl_conv2d_input_grad(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *w,
                                int stride, int pad)
{
    staged s[STAGES];
    const sdt_tensor *t[3] = {dx, dout, w};
    const bool read[3] = {false, true, true};
    if (stage_all(be, "conv2d_input_grad", s, t, read, 3)) return -1;
    int rc = cpu_conv2d_input_grad(be, &s[0].t, &s[1].t, &s[2].t, stride, pad);
    sdt_tensor *const written[3] = {dx, NULL, NULL};
    return unstage_all(s, written, 3, rc);
}

static int cl_groupnorm_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd,
                                const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *beta, int groups,
                                float eps, sdt_activation act)
{
    staged s[STAGES];
    const sdt_tensor *t[2] = {out, x};
    const bool read[2] = {false, true};
    if (stage_all(be, "groupnorm_forward", s, t, read, 2)) return -1;
    int rc = cpu_groupnorm_forward(be, &s[0].t, mean, rstd, &s[1].t, gamma, beta, groups, eps, act);
    sdt_tensor *const written[2] = {out, NULL};
    return unstage_all(s, written, 2, rc);
}

static int cl_groupnorm_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, sdt_tensor *dbeta,
                                 const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *gamma,
                                 const sdt_tensor *beta, const sdt_tensor *mean, const sdt_tensor *rstd, int groups,
                                 sdt_activation act)
{
    staged s[STAGES];
    const sdt_tensor *t[3] = {dx, dout, x};
    const bool read[3] = {true, true, true};
    if (stage_all(be, "groupnorm_backward", s, t, read, 3)) return -1;
    int rc = cpu_groupnorm_backward(be, (dx ? &s[0].t : NULL), dgamma, dbeta, &s[1].t, &s[2].t, gamma, beta, mean, rstd,
                                    groups, act);
    sdt_tensor *const written[3] = {dx, NULL, NULL};
    return unstage_all(s, written, 3, rc);
}

static int cl_add_channel_forward(sdt_backend *be, sdt_tensor *x, const sdt_tensor *v)
{
    staged s[STAGES];
    const sdt_tensor *t[1] = {x};
    const bool read[1] = {true};
    if (stage_all(be, "add_channel_forward", s, t, read, 1)) return -1;
    int rc = cpu_add_channel_forward(be, &s[0].t, v);
    sdt_tensor *const written[1] = {x};
    return unstage_all(s, written, 1, rc);
}

static int cl_add_channel_backward(sdt_backend *be, sdt_tensor *dv, const sdt_tensor *dout)
{
    staged s[STAGES];
    const sdt_tensor *t[1] = {dout};
    const bool read[1] = {true};
    if (stage_all(be, "add_channel_backward", s, t, read, 1)) return -1;
    int rc = cpu_add_channel_backward(be, dv, &s[0].t);
    sdt_tensor *const written[1] = {NULL};
    return unstage_all(s, written, 1, rc);
}

static int cl_concat_channels_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *a, const sdt_tensor *b)
{
    staged s[STAGES];
    const sdt_tensor *t[3] = {out, a, b};
    const bool read[3] = {false, true, true};
    if (stage_all(be, "concat_channels_forward", s, t, read, 3)) return -1;
    int rc = cpu_concat_channels_forward(be, &s[0].t, &s[1].t, &s[2].t);
    sdt_tensor *const written[3] = {out, NULL, NULL};
    return unstage_all(s, written, 3, rc);
}

static int cl_concat_channels_backward(sdt_backend *be, sdt_tensor *da, sdt_tensor *db, const sdt_tensor *dout)
{
    staged s[STAGES];
    const sdt_tensor *t[3] = {da, db, dout};
    const bool read[3] = {true, true, true};
    if (stage_all(be, "concat_channels_backward", s, t, read, 3)) return -1;
    int rc = cpu_concat_channels_backward(be, (da ? &s[0].t : NULL), (db ? &s[1].t : NULL), &s[2].t);
    sdt_tensor *const written[3] = {da, db, NULL};
    return unstage_all(s, written, 3, rc);
}

static int cl_upsample_nearest2x_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x)
{
    staged s[STAGES];
    const sdt_tensor *t[2] = {out, x};
    const bool read[2] = {false, true};
    if (stage_all(be, "upsample_nearest2x_forward", s, t, read, 2)) return -1;
    int rc = cpu_upsample_nearest2x_forward(be, &s[0].t, &s[1].t);
    sdt_tensor *const written[2] = {out, NULL};
    return unstage_all(s, written, 2, rc);
}

static int cl_upsample_nearest2x_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout)
{
    staged s[STAGES];
    const sdt_tensor *t[2] = {dx, dout};
    const bool read[2] = {true, true};
    if (stage_all(be, "upsample_nearest2x_backward", s, t, read, 2)) return -1;
    int rc = cpu_upsample_nearest2x_backward(be, (dx ? &s[0].t : NULL), &s[1].t);
    sdt_tensor *const written[2] = {dx, NULL};
    return unstage_all(s, written, 2, rc);
}

void cpu_channels_last_ops(sdt_backend_ops *ops)
{
    ops->conv2d_forward = cl_conv2d_forward;
    ops->conv2d_backward = cl_conv2d_backward;
    ops->conv2d_input_grad = cl_conv2d_input_grad;
    ops->groupnorm_forward = cl_groupnorm_forward;
    ops->groupnorm_backward = cl_groupnorm_backward;
    ops->add_channel_forward = cl_add_channel_forward;
    ops->add_channel_backward = cl_add_channel_backward;
    ops->concat_channels_forward = cl_concat_channels_forward;
    ops->concat_channels_backward = cl_concat_channels_backward;
    ops->upsample_nearest2x_forward = cl_upsample_nearest2x_forward;
    ops->upsample_nearest2x_backward = cl_upsample_nearest2x_backward;
}
