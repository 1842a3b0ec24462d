/* attention.c - torch.nn.functional.scaled_dot_product_attention on the CPU
 * (scale 1/sqrt(head_dim), optional causal mask, no dropout).
 *
 * q [B, Tq, H*D], k and v [B, Tk, H*D]. Each (batch, head) is three sgemm calls
 * that read the head's columns in place through a leading dimension of H*D, so
 * nothing is gathered: S = scale q k^T, P = softmax(S) row-wise, out = P v.
 * Tq may differ from Tk (cross-attention); causal needs Tq == Tk.
 */
#include "cpu_check.h"
#include "softmax_row.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct attn_geom {
    int batch, heads, tq, tk, d, hd; /* hd = heads * d, the row stride of q, k, v */
    float scale;
    bool causal;
    int threads; /* OpenMP threads for the softmax rows */
} attn_geom;

static int attn_check(sdt_backend *be, const char *op, const sdt_tensor *q, const sdt_tensor *k,
                      const sdt_tensor *v, const sdt_tensor *probs, int heads, bool causal, attn_geom *g)
{
    const int64_t any3[3] = {-1, -1, -1};
    if (cpu_check_shape(be, op, "q [B, Tq, H*D]", q, 3, any3)) return -1;
    if (heads < 1 || q->shape[2] % heads != 0)
        return cpu_fail(be, "%s: q's last dim %lld is not divisible by heads = %d; pass the model's head count.",
                        op, (long long)q->shape[2], heads);
    const int64_t kdims[3] = {q->shape[0], -1, q->shape[2]};
    if (cpu_check_shape(be, op, "k [B, Tk, H*D]", k, 3, kdims)) return -1;
    if (cpu_check_grad(be, op, "v", v, k) || cpu_check_tensor(be, op, "v", v)) return -1;
    if (causal && q->shape[1] != k->shape[1])
        return cpu_fail(be, "%s: causal attention needs Tq == Tk but q has %lld tokens and k has %lld.", op,
                        (long long)q->shape[1], (long long)k->shape[1]);
    const int64_t pdims[4] = {q->shape[0], heads, q->shape[1], k->shape[1]};
    if (probs && cpu_check_shape(be, op, "probs [B, H, Tq, Tk]", probs, 4, pdims)) return -1;
    *g = (attn_geom){(int)q->shape[0], heads, (int)q->shape[1], (int)k->shape[1],
                     (int)(q->shape[2] / heads), (int)q->shape[2], 0, causal, cpu_threads(be)};
    g->scale = (float)(1.0 / sqrt((double)g->d));
    return 0;
}

/* Offset of head h of batch b's first row in a [B, T, H*D] tensor. */
static int64_t head_offset(const attn_geom *g, int t, int b, int h)
{
    return (int64_t)b * t * g->hd + (int64_t)h * g->d;
}

/* p [Tq, Tk] = softmax(scale * q_bh k_bh^T), masked entries exactly 0. */
static void attn_probs(const attn_geom *g, const float *q, const float *k, int b, int h, float *p)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, g->tq, g->tk, g->d, g->scale,
                q + head_offset(g, g->tq, b, h), g->hd, k + head_offset(g, g->tk, b, h), g->hd, 0.0f, p, g->tk);
#pragma omp parallel for num_threads(g->threads) schedule(static)
    for (int i = 0; i < g->tq; i++) {
        float *row = p + (int64_t)i * g->tk;
        const int valid = g->causal ? i + 1 : g->tk;
        cpu_softmax_row(row, row, valid);
        if (valid < g->tk) memset(row + valid, 0, sizeof(float) * (size_t)(g->tk - valid));
    }
}

int cpu_attention_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *probs, const sdt_tensor *q,
                          const sdt_tensor *k, const sdt_tensor *v, int heads, bool causal)
{
    const char *op = "attention_forward";
    attn_geom g;
    if (attn_check(be, op, q, k, v, probs, heads, causal, &g)) return -1;
    if (cpu_check_grad(be, op, "out", out, q) || cpu_check_tensor(be, op, "out", out)) return -1;
    const float *qf = cpu_read_f32(be, q, 0);
    const float *kf = cpu_read_f32(be, k, 1);
    const float *vf = cpu_read_f32(be, v, 2);
    float *of = cpu_write_begin(be, out, 3, false);
    float *pf = cpu_write_begin(be, probs, 4, false);
    const size_t pbytes = sizeof(float) * (size_t)g.tq * g.tk;
    float *scratch = probs ? NULL : malloc(pbytes);
    if (!qf || !kf || !vf || !of || (probs && !pf) || (!probs && !scratch)) {
        free(scratch);
        return cpu_fail_oom(be, op, pbytes);
    }
    for (int b = 0; b < g.batch; b++)
        for (int h = 0; h < g.heads; h++) {
            float *p = probs ? pf + ((int64_t)b * g.heads + h) * g.tq * g.tk : scratch;
            attn_probs(&g, qf, kf, b, h, p);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g.tq, g.d, g.tk, 1.0f, p, g.tk,
                        vf + head_offset(&g, g.tk, b, h), g.hd, 0.0f, of + head_offset(&g, g.tq, b, h), g.hd);
        }
    free(scratch);
    cpu_write_end(be, out, of);
    cpu_write_end(be, probs, pf);
    return 0;
}

int cpu_attention_backward(sdt_backend *be, sdt_tensor *dq, sdt_tensor *dk, sdt_tensor *dv,
                           const sdt_tensor *dout, const sdt_tensor *q, const sdt_tensor *k,
                           const sdt_tensor *v, const sdt_tensor *probs, int heads, bool causal)
{
    const char *op = "attention_backward";
    attn_geom g;
    if (attn_check(be, op, q, k, v, probs, heads, causal, &g)) return -1;
    if (cpu_check_tensor(be, op, "dout", dout) || cpu_check_grad(be, op, "dout", dout, q) ||
        cpu_check_grad(be, op, "dq", dq, q) || cpu_check_grad(be, op, "dk", dk, k) ||
        cpu_check_grad(be, op, "dv", dv, v))
        return -1;
    if (!dq && !dk && !dv) return 0;
    const float *dof = cpu_read_f32(be, dout, 0);
    const float *qf = cpu_read_f32(be, q, 1);
    const float *kf = cpu_read_f32(be, k, 2);
    const float *vf = cpu_read_f32(be, v, 3);
    const float *pf = cpu_read_f32(be, probs, 4);
    float *dqf = cpu_write_begin(be, dq, 5, true);
    float *dkf = cpu_write_begin(be, dk, 6, true);
    float *dvf = cpu_write_begin(be, dv, 7, true);
    const size_t pbytes = sizeof(float) * (size_t)g.tq * g.tk;
    /* ds holds dP then dS in place; p is needed only when probs were not saved. */
    float *ds = malloc(pbytes);
    float *scratch = probs ? NULL : malloc(pbytes);
    if (!dof || !qf || !kf || !vf || (probs && !pf) || (dq && !dqf) || (dk && !dkf) || (dv && !dvf) || !ds ||
        (!probs && !scratch)) {
        free(ds);
        free(scratch);
        return cpu_fail_oom(be, op, 2 * pbytes);
    }
    for (int b = 0; b < g.batch; b++)
        for (int h = 0; h < g.heads; h++) {
            const int64_t qo = head_offset(&g, g.tq, b, h), ko = head_offset(&g, g.tk, b, h);
            const float *p = pf ? pf + ((int64_t)b * g.heads + h) * g.tq * g.tk : scratch;
            if (!pf) attn_probs(&g, qf, kf, b, h, scratch);
            if (dv) /* dv += p^T dout */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, g.tk, g.d, g.tq, 1.0f, p, g.tk,
                            dof + qo, g.hd, 1.0f, dvf + ko, g.hd);
            if (!dq && !dk) continue;
            /* dP = dout v^T, then dS = softmax backward (masked entries stay 0 since p is 0 there). */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, g.tq, g.tk, g.d, 1.0f, dof + qo, g.hd,
                        vf + ko, g.hd, 0.0f, ds, g.tk);
#pragma omp parallel for num_threads(g.threads) schedule(static)
            for (int i = 0; i < g.tq; i++)
                cpu_softmax_row_backward(ds + (int64_t)i * g.tk, ds + (int64_t)i * g.tk, p + (int64_t)i * g.tk,
                                         g.tk, false);
            if (dq) /* dq += scale dS k */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g.tq, g.d, g.tk, g.scale, ds, g.tk,
                            kf + ko, g.hd, 1.0f, dqf + qo, g.hd);
            if (dk) /* dk += scale dS^T q */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, g.tk, g.d, g.tq, g.scale, ds, g.tk,
                            qf + qo, g.hd, 1.0f, dkf + ko, g.hd);
        }
    free(ds);
    free(scratch);
    cpu_write_end(be, dq, dqf);
    cpu_write_end(be, dk, dkf);
    cpu_write_end(be, dv, dvf);
    return 0;
}
