/* attention.c - torch.nn.functional.scaled_dot_product_attention on the CPU
 * (scale 1/sqrt(head_dim), optional causal mask, no dropout).
 *
 * q [B, Tq, H*D], k and v [B, Tk, H*D]. Each (batch, head) is three sgemm calls
 * that read the head's columns in place through a leading dimension of H*D, so
 * nothing is gathered: S = scale q k^T, P = softmax(S) row-wise, out = P v.
 * Tq may differ from Tk (cross-attention); causal needs Tq == Tk.
 * With at least as many (batch, head) pairs as threads, each thread takes whole
 * pairs (their GEMMs are small); otherwise pairs run in turn and the GEMMs and
 * softmax rows inside are split across the threads instead.
 */
#include "cpu_check.h"
#include "cpu_gemm.h"
#include "softmax_row.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

typedef struct attn_geom {
    int batch, heads, tq, tk, d, hd; /* hd = heads * d, the row stride of q, k, v */
    float scale;
    bool causal;
    int threads; /* OpenMP threads for the softmax rows when not already inside a parallel region */
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
    if (cpu_check_like(be, op, "v", v, "k", k) || cpu_check_tensor(be, op, "v", v)) return -1;
    if (causal && q->shape[1] != k->shape[1])
        return cpu_fail(be, "%s: causal attention needs Tq == Tk but q has %lld tokens and k has %lld.", op,
                        (long long)q->shape[1], (long long)k->shape[1]);
    const int64_t pdims[4] = {q->shape[0], heads, q->shape[1], k->shape[1]};
    if (probs && cpu_check_shape(be, op, "probs [B, H, Tq, Tk]", probs, 4, pdims)) return -1;
    *g = (attn_geom){(int)q->shape[0], heads, (int)q->shape[1], (int)k->shape[1],
                     (int)(q->shape[2] / heads), (int)q->shape[2], 0, causal, 1};
    g->threads = cpu_threads_for(be, (int64_t)g->tq * g->tk);
    g->scale = (float)(1.0 / sqrt((double)g->d));
    return 0;
}

/* Offset of head h of batch b's first row in a [B, T, H*D] tensor. */
static int64_t head_offset(const attn_geom *g, int t, int b, int h)
{
    return (int64_t)b * t * g->hd + (int64_t)h * g->d;
}

/* p [Tq, Tk] = softmax(scale * q_bh k_bh^T), masked entries exactly 0. */
static void attn_probs(sdt_backend *be, const attn_geom *g, const float *q, const float *k, int b, int h, float *p)
{
    cpu_sgemm(be, false, true, g->tq, g->tk, g->d, g->scale,
                q + head_offset(g, g->tq, b, h), g->hd, k + head_offset(g, g->tk, b, h), g->hd, 0.0f, p, g->tk);
#pragma omp parallel for num_threads(omp_in_parallel() ? 1 : g->threads) schedule(static)
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
    if (cpu_check_like(be, op, "out", out, "q", q) || cpu_check_tensor(be, op, "out", out)) return -1;
    const float *qf = cpu_read_f32(be, q, 0);
    const float *kf = cpu_read_f32(be, k, 1);
    const float *vf = cpu_read_f32(be, v, 2);
    float *of = cpu_write_begin(be, out, 3, false);
    float *pf = cpu_write_begin(be, probs, 4, false);
    const int64_t psize = (int64_t)g.tq * g.tk;
    const int pairs = g.batch * g.heads, threads = cpu_threads(be);
    const size_t pbytes = sizeof(float) * (size_t)psize * threads;
    float *scratch = probs ? NULL : malloc(pbytes); /* one [Tq, Tk] per thread */
    if (!qf || !kf || !vf || !of || (probs && !pf) || (!probs && !scratch)) {
        free(scratch);
        return cpu_fail_oom(be, op, pbytes);
    }
#pragma omp parallel for num_threads(threads) schedule(dynamic) if (pairs >= threads)
    for (int bh = 0; bh < pairs; bh++) {
        const int b = bh / g.heads, h = bh % g.heads;
        float *p = probs ? pf + (int64_t)bh * psize : scratch + omp_get_thread_num() * psize;
        attn_probs(be, &g, qf, kf, b, h, p);
        cpu_sgemm(be, false, false, g.tq, g.d, g.tk, 1.0f, p, g.tk, vf + head_offset(&g, g.tk, b, h), g.hd, 0.0f,
                  of + head_offset(&g, g.tq, b, h), g.hd);
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
    if (cpu_check_tensor(be, op, "dout", dout) || cpu_check_like(be, op, "dout", dout, "q", q) ||
        cpu_check_like(be, op, "dq", dq, "q", q) || cpu_check_like(be, op, "dk", dk, "k", k) ||
        cpu_check_like(be, op, "dv", dv, "v", v))
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
    const int64_t psize = (int64_t)g.tq * g.tk;
    const int pairs = g.batch * g.heads, threads = cpu_threads(be);
    const size_t pbytes = sizeof(float) * (size_t)psize * threads;
    /* Per thread: ds holds dP then dS in place; p is needed only when probs were not saved. */
    float *ds = malloc(pbytes);
    float *scratch = probs ? NULL : malloc(pbytes);
    if (!dof || !qf || !kf || !vf || (probs && !pf) || (dq && !dqf) || (dk && !dkf) || (dv && !dvf) || !ds ||
        (!probs && !scratch)) {
        free(ds);
        free(scratch);
        return cpu_fail_oom(be, op, 2 * pbytes);
    }
    /* Each pair writes only its own head's columns of dq, dk and dv, so pairs never race. */
#pragma omp parallel for num_threads(threads) schedule(dynamic) if (pairs >= threads)
    for (int bh = 0; bh < pairs; bh++) {
        const int b = bh / g.heads, h = bh % g.heads;
        const int64_t qo = head_offset(&g, g.tq, b, h), ko = head_offset(&g, g.tk, b, h);
        float *dsp = ds + omp_get_thread_num() * psize;
        const float *p = pf ? pf + (int64_t)bh * psize : scratch + omp_get_thread_num() * psize;
        if (!pf) attn_probs(be, &g, qf, kf, b, h, scratch + omp_get_thread_num() * psize);
        if (dv) /* dv += p^T dout */
            cpu_sgemm(be, true, false, g.tk, g.d, g.tq, 1.0f, p, g.tk, dof + qo, g.hd, 1.0f, dvf + ko, g.hd);
        if (!dq && !dk) continue;
        /* dP = dout v^T, then dS = softmax backward (masked entries stay 0 since p is 0 there). */
        cpu_sgemm(be, false, true, g.tq, g.tk, g.d, 1.0f, dof + qo, g.hd, vf + ko, g.hd, 0.0f, dsp, g.tk);
#pragma omp parallel for num_threads(omp_in_parallel() ? 1 : g.threads) schedule(static)
        for (int i = 0; i < g.tq; i++)
            cpu_softmax_row_backward(dsp + (int64_t)i * g.tk, dsp + (int64_t)i * g.tk, p + (int64_t)i * g.tk, g.tk,
                                     false);
        if (dq) /* dq += scale dS k */
            cpu_sgemm(be, false, false, g.tq, g.d, g.tk, g.scale, dsp, g.tk, kf + ko, g.hd, 1.0f, dqf + qo, g.hd);
        if (dk) /* dk += scale dS^T q */
            cpu_sgemm(be, true, false, g.tk, g.d, g.tq, g.scale, dsp, g.tk, qf + qo, g.hd, 1.0f, dkf + ko, g.hd);
    }
    free(ds);
    free(scratch);
    cpu_write_end(be, dq, dqf);
    cpu_write_end(be, dk, dkf);
    cpu_write_end(be, dv, dvf);
    return 0;
}
