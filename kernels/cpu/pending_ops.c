/* pending_ops.c - TEMPORARY stand-ins for the ops another branch (kern-b) implements.
 * Each fails with a clear error so the table is complete and everything links.
 * Delete this file when the real implementations land. */
#include "cpu_ops.h"

int cpu_linear_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w, const sdt_tensor *b)
{
    (void)out;
    (void)x;
    (void)w;
    (void)b;
    return cpu_fail(be, "linear_forward is not implemented yet");
}

int cpu_linear_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dw, sdt_tensor *db, const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *w)
{
    (void)dx;
    (void)dw;
    (void)db;
    (void)dout;
    (void)x;
    (void)w;
    return cpu_fail(be, "linear_backward is not implemented yet");
}

int cpu_conv2d_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w, const sdt_tensor *b, int stride, int pad)
{
    (void)out;
    (void)x;
    (void)w;
    (void)b;
    (void)stride;
    (void)pad;
    return cpu_fail(be, "conv2d_forward is not implemented yet");
}

int cpu_conv2d_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dw, sdt_tensor *db, const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *w, int stride, int pad)
{
    (void)dx;
    (void)dw;
    (void)db;
    (void)dout;
    (void)x;
    (void)w;
    (void)stride;
    (void)pad;
    return cpu_fail(be, "conv2d_backward is not implemented yet");
}

int cpu_attention_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *probs, const sdt_tensor *q, const sdt_tensor *k, const sdt_tensor *v, int heads, bool causal)
{
    (void)out;
    (void)probs;
    (void)q;
    (void)k;
    (void)v;
    (void)heads;
    (void)causal;
    return cpu_fail(be, "attention_forward is not implemented yet");
}

int cpu_attention_backward(sdt_backend *be, sdt_tensor *dq, sdt_tensor *dk, sdt_tensor *dv, const sdt_tensor *dout, const sdt_tensor *q, const sdt_tensor *k, const sdt_tensor *v, const sdt_tensor *probs, int heads, bool causal)
{
    (void)dq;
    (void)dk;
    (void)dv;
    (void)dout;
    (void)q;
    (void)k;
    (void)v;
    (void)probs;
    (void)heads;
    (void)causal;
    return cpu_fail(be, "attention_backward is not implemented yet");
}

int cpu_softmax_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x)
{
    (void)out;
    (void)x;
    return cpu_fail(be, "softmax_forward is not implemented yet");
}

int cpu_softmax_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *out)
{
    (void)dx;
    (void)dout;
    (void)out;
    return cpu_fail(be, "softmax_backward is not implemented yet");
}

int cpu_layernorm_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd, const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *beta, float eps)
{
    (void)out;
    (void)mean;
    (void)rstd;
    (void)x;
    (void)gamma;
    (void)beta;
    (void)eps;
    return cpu_fail(be, "layernorm_forward is not implemented yet");
}

int cpu_layernorm_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, sdt_tensor *dbeta, const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *mean, const sdt_tensor *rstd)
{
    (void)dx;
    (void)dgamma;
    (void)dbeta;
    (void)dout;
    (void)x;
    (void)gamma;
    (void)mean;
    (void)rstd;
    return cpu_fail(be, "layernorm_backward is not implemented yet");
}

int cpu_groupnorm_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd, const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *beta, int groups, float eps)
{
    (void)out;
    (void)mean;
    (void)rstd;
    (void)x;
    (void)gamma;
    (void)beta;
    (void)groups;
    (void)eps;
    return cpu_fail(be, "groupnorm_forward is not implemented yet");
}

int cpu_groupnorm_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, sdt_tensor *dbeta, const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *mean, const sdt_tensor *rstd, int groups)
{
    (void)dx;
    (void)dgamma;
    (void)dbeta;
    (void)dout;
    (void)x;
    (void)gamma;
    (void)mean;
    (void)rstd;
    (void)groups;
    return cpu_fail(be, "groupnorm_backward is not implemented yet");
}

int cpu_embedding_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *tokens, const sdt_tensor *table, const sdt_tensor *pos)
{
    (void)out;
    (void)tokens;
    (void)table;
    (void)pos;
    return cpu_fail(be, "embedding_forward is not implemented yet");
}

int cpu_embedding_backward(sdt_backend *be, sdt_tensor *dtable, sdt_tensor *dpos, const sdt_tensor *dout, const sdt_tensor *tokens)
{
    (void)dtable;
    (void)dpos;
    (void)dout;
    (void)tokens;
    return cpu_fail(be, "embedding_backward is not implemented yet");
}
