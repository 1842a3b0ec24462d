/* matmul.cu - linear and attention on the GPU through cuBLAS. GEMMs run in the
 * tensors' own 16-bit dtype with fp32 accumulation when the dtypes agree, and
 * through fp32 copies otherwise. Attention is the textbook three-step
 * (QK^T, softmax, PV) with the probabilities saved or recomputed.
 * Semantics: kernels/ops.h. */
#include "cuda_ops.h"

static cudaDataType_t cuda_type(int dtype)
{
    return dtype == SDT_F16 ? CUDA_R_16F : dtype == SDT_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* A float buffer holding t's values for accumulation: t itself when f32, else a converted copy. */
static float *accum_begin(sdt_backend *be, sdt_tensor *t, int slot)
{
    if (!t) return NULL;
    if (t->dtype == SDT_F32) return (float *)t->data;
    int64_t n = sdt_tensor_numel(t);
    float *buf = (float *)cuda_scratch(be, slot, (size_t)n * sizeof(float));
    if (!buf || cuda_convert_raw(be, buf, SDT_F32, t->data, t->dtype, n)) return NULL;
    return buf;
}
static int accum_end(sdt_backend *be, sdt_tensor *t, float *buf)
{
    if (!t || t->dtype == SDT_F32) return 0;
    return cuda_convert_raw(be, t->data, t->dtype, buf, SDT_F32, sdt_tensor_numel(t));
}

/* Row-major C = alpha op(A) op(B) + beta C with per-operand dtypes. */
static int gemm_ex(sdt_backend *be, bool ta, bool tb, int M, int N, int K, float alpha, const void *A, int at, int lda,
                   const void *B, int bt, int ldb, float beta, void *C, int ct, int ldc)
{
    if (at == bt && (ct == at || ct == SDT_F32)) {
        CUBLAS_TRY(be, cublasGemmEx(ctx_of(be)->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K,
                                    &alpha, B, cuda_type(bt), ldb, A, cuda_type(at), lda, &beta, C, cuda_type(ct), ldc,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        return 0;
    }
    return cuda_fail(be, "gemm: unsupported dtype mix (%s, %s -> %s)", sdt_dtype_name((sdt_dtype)at),
                     sdt_dtype_name((sdt_dtype)bt), sdt_dtype_name((sdt_dtype)ct));
}

/* out[r, c] += b[c] */
__global__ void bias_rows_k(void *out, int odt, const void *b, int bdt, int64_t rows, int64_t C)
{
    GRID_STRIDE(i, rows * C) st(out, odt, i, ld(out, odt, i) + ld(b, bdt, i % C));
}
/* db[c] += sum_r dout[r, c], rows in order. */
__global__ void colsum_k(void *db, int dbt, const void *d, int dt, int64_t rows, int64_t C)
{
    GRID_STRIDE(c, C)
    {
        float s = 0;
        for (int64_t r = 0; r < rows; r++) s += ld(d, dt, r * C + c);
        acc(db, dbt, c, s);
    }
}

/* Brings x and w to one dtype: the shared dtype when they agree, else f32 copies. */
static int gemm_operands(sdt_backend *be, const sdt_tensor *x, const sdt_tensor *w, const void **xp, const void **wp, int *dt)
{
    if (x->dtype == w->dtype) {
        *xp = x->data;
        *wp = w->data;
        *dt = x->dtype;
        return 0;
    }
    *xp = cuda_read_f32(be, x, 0);
    *wp = cuda_read_f32(be, w, 1);
    *dt = SDT_F32;
    return (*xp && *wp) ? 0 : -1;
}

int cuda_linear_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w, const sdt_tensor *b)
{
    int64_t C = x->shape[x->ndim - 1], OC = w->shape[0], M = sdt_tensor_numel(x) / C;
    if (w->shape[1] != C || out->shape[out->ndim - 1] != OC || sdt_tensor_numel(out) != M * OC)
        return cuda_fail(be, "linear: input [.., %lld], weight [%lld, %lld] and output [.., %lld] do not fit", (long long)C,
                         (long long)OC, (long long)w->shape[1], (long long)out->shape[out->ndim - 1]);
    const void *xp, *wp;
    int dt;
    if (gemm_operands(be, x, w, &xp, &wp, &dt)) return -1;
    void *op = out->data;
    int odt = out->dtype;
    if (!(odt == dt || odt == SDT_F32)) {
        op = cuda_scratch(be, 2, (size_t)(M * OC) * sizeof(float));
        if (!op) return -1;
        odt = SDT_F32;
    }
    if (gemm_ex(be, false, true, (int)M, (int)OC, (int)C, 1.0f, xp, dt, (int)C, wp, dt, (int)C, 0.0f, op, odt, (int)OC)) return -1;
    if (b) {
        bias_rows_k<<<grid_for(M * OC, 256), 256, 0, ctx_of(be)->stream>>>(op, odt, b->data, b->dtype, M, OC);
        CUDA_LAUNCHED(be);
    }
    if (op != out->data) return cuda_convert_raw(be, out->data, out->dtype, op, SDT_F32, M * OC);
    return 0;
}

int cuda_linear_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dw, sdt_tensor *db, const sdt_tensor *dout,
                         const sdt_tensor *x, const sdt_tensor *w)
{
    int64_t C = x->shape[x->ndim - 1], OC = w->shape[0], M = sdt_tensor_numel(x) / C;
    if (dx) { /* dx [M, C] += dout [M, OC] w [OC, C] */
        const void *dp, *wp;
        int dt;
        if (gemm_operands(be, dout, w, &dp, &wp, &dt)) return -1;
        if (dx->dtype == dt || dx->dtype == SDT_F32) {
            if (gemm_ex(be, false, false, (int)M, (int)C, (int)OC, 1.0f, dp, dt, (int)OC, wp, dt, (int)C, 1.0f, dx->data, dx->dtype,
                        (int)C))
                return -1;
        } else {
            const float *d32 = cuda_read_f32(be, dout, 0), *w32 = cuda_read_f32(be, w, 1);
            float *acc32 = accum_begin(be, dx, 3);
            if (!d32 || !w32 || !acc32) return -1;
            if (cuda_gemm_f32(be, false, false, (int)M, (int)C, (int)OC, 1.0f, d32, (int)OC, w32, (int)C, 1.0f, acc32, (int)C) ||
                accum_end(be, dx, acc32))
                return -1;
        }
    }
    if (dw) { /* dw [OC, C] += dout^T [OC, M] x [M, C], accumulated in f32 */
        const float *d32 = cuda_read_f32(be, dout, 0), *x32 = cuda_read_f32(be, x, 1);
        float *acc32 = accum_begin(be, dw, 3);
        if (!d32 || !x32 || !acc32) return -1;
        if (cuda_gemm_f32(be, true, false, (int)OC, (int)C, (int)M, 1.0f, d32, (int)OC, x32, (int)C, 1.0f, acc32, (int)C) ||
            accum_end(be, dw, acc32))
            return -1;
    }
    if (db) {
        colsum_k<<<grid_for(OC, 128), 128, 0, ctx_of(be)->stream>>>(db->data, db->dtype, dout->data, dout->dtype, M, OC);
        CUDA_LAUNCHED(be);
    }
    return 0;
}

/* ------------------------------------------------------------- attention */
/* Per batch item, GEMMs batched over heads (a head is a column block of width D in the
 * [T, H*D] rows). With 16-bit q/k/v the GEMMs run on tensor cores in that dtype with fp32
 * accumulation, the probabilities kept in fp32 for the softmax and rounded to the operand
 * dtype only as a GEMM input (as fused attention kernels do); otherwise everything is fp32. */

typedef struct attn_dims {
    int64_t B, Tq, Tk, H, D, HD;
} attn_dims;

static int attn_shape(sdt_backend *be, const sdt_tensor *q, const sdt_tensor *k, const sdt_tensor *v, int heads, bool causal,
                      attn_dims *a)
{
    a->B = q->shape[0];
    a->Tq = q->shape[1];
    a->Tk = k->shape[1];
    a->HD = q->shape[2];
    a->H = heads;
    if (heads <= 0 || a->HD % heads) return cuda_fail(be, "attention: width %lld does not split into %d heads", (long long)a->HD, heads);
    a->D = a->HD / heads;
    if (k->shape[2] != a->HD || v->shape[2] != a->HD || v->shape[1] != a->Tk || k->shape[0] != a->B)
        return cuda_fail(be, "attention: q, k and v shapes do not agree");
    if (causal && a->Tq != a->Tk) return cuda_fail(be, "attention: causal masking needs equal query and key lengths");
    return 0;
}

/* Device data in some dtype, with element offsets. */
typedef struct dview {
    const void *p;
    int dt;
} dview;

static const void *at_elem(dview v, int64_t i) { return (const char *)v.p + i * (int64_t)sdt_dtype_size((sdt_dtype)v.dt); }

/* Row-major C_h = alpha op(A_h) op(B_h) + beta C_h for h < batch (strides in elements); A and B share a dtype. */
static int gemm_heads(sdt_backend *be, bool ta, bool tb, int M, int N, int K, dview A, int lda, long long sa, dview B, int ldb,
                      long long sb, float beta, dview C, int ldc, long long sc, int batch)
{
    float alpha = 1.0f;
    CUBLAS_TRY(be, cublasGemmStridedBatchedEx(ctx_of(be)->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                              N, M, K, &alpha, B.p, cuda_type(B.dt), ldb, sb, A.p, cuda_type(A.dt), lda, sa, &beta,
                                              (void *)C.p, cuda_type(C.dt), ldc, sc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return 0;
}

/* The operand dtype: the tensors' own 16-bit dtype when they all share it, else f32. */
static int attn_operand_dtype(const sdt_tensor *const *ts, int n)
{
    int dt = -1;
    for (int i = 0; i < n; i++) {
        if (!ts[i]) continue;
        if (dt < 0) dt = ts[i]->dtype;
        else if (ts[i]->dtype != dt) return SDT_F32;
    }
    return dt < 0 ? SDT_F32 : dt;
}

/* t as an operand of dtype od: itself, or an f32 copy in scratch slot. */
static dview attn_operand(sdt_backend *be, const sdt_tensor *t, int od, int slot)
{
    dview v = {t->data, t->dtype};
    if (t->dtype != od) v = (dview){cuda_read_f32(be, t, slot), SDT_F32};
    return v;
}

/* P (f32) as a GEMM operand of dtype od: itself, or rounded into scratch slot. */
static dview probs_operand(sdt_backend *be, const float *P, int64_t n, int od, int slot)
{
    if (od == SDT_F32) return (dview){P, SDT_F32};
    void *buf = cuda_scratch(be, slot, (size_t)n * sdt_dtype_size((sdt_dtype)od));
    if (!buf || cuda_convert_raw(be, buf, od, P, SDT_F32, n)) return (dview){NULL, od};
    return (dview){buf, od};
}

/* The probabilities softmax(scale Q K^T) (causal-masked) as a GEMM operand of dtype od: fp32
 * in place when od is f32, else rounded into scratch slot 8 straight from the fp32 logits. When
 * save ([B, H, Tq, Tk] f32) is given, the fp32 probabilities are kept there too. */
static dview attn_probs(sdt_backend *be, const attn_dims *a, dview q, dview k, int od, float *save, bool causal)
{
    int64_t sP = a->Tq * a->Tk, n = a->B * a->H * sP;
    float *S = save ? save : (float *)cuda_scratch(be, 3, (size_t)n * sizeof(float));
    if (!S) return (dview){NULL, od};
    for (int64_t b = 0; b < a->B; b++)
        if (gemm_heads(be, false, true, (int)a->Tq, (int)a->Tk, (int)a->D, (dview){at_elem(q, b * a->Tq * a->HD), q.dt},
                       (int)a->HD, a->D, (dview){at_elem(k, b * a->Tk * a->HD), k.dt}, (int)a->HD, a->D, 0.0f,
                       (dview){S + b * a->H * sP, SDT_F32}, (int)a->Tk, sP, (int)a->H))
            return (dview){NULL, od};
    float scale = 1.0f / sqrtf((float)a->D);
    int64_t rows = a->B * a->H * a->Tq, causal_T = causal ? a->Tq : 0;
    if (od == SDT_F32)
        return cuda_softmax_rows(be, S, SDT_F32, NULL, 0, S, SDT_F32, rows, a->Tk, causal_T, scale) ? (dview){NULL, od}
                                                                                                 : (dview){S, SDT_F32};
    void *P = cuda_scratch(be, 8, (size_t)n * sdt_dtype_size((sdt_dtype)od));
    if (!P || cuda_softmax_rows(be, P, od, save, SDT_F32, S, SDT_F32, rows, a->Tk, causal_T, scale)) return (dview){NULL, od};
    return (dview){P, od};
}

/* Where a GEMM may write (or accumulate into) t: t itself when its dtype is od or f32, else an f32 buffer. */
typedef struct gemm_target {
    sdt_tensor *t;
    float *buf; /* non-NULL when staged through f32 */
    dview c;
} gemm_target;

static bool target_begin(sdt_backend *be, gemm_target *g, sdt_tensor *t, int od, int slot, bool accumulate)
{
    g->t = t;
    g->buf = NULL;
    if (t->dtype == od || t->dtype == SDT_F32) {
        g->c = (dview){t->data, t->dtype};
        return true;
    }
    int64_t n = sdt_tensor_numel(t);
    g->buf = accumulate ? accum_begin(be, t, slot) : (float *)cuda_scratch(be, slot, (size_t)n * sizeof(float));
    g->c = (dview){g->buf, SDT_F32};
    return g->buf != NULL;
}

static int target_end(sdt_backend *be, gemm_target *g)
{
    if (!g->buf) return 0;
    return cuda_convert_raw(be, g->t->data, g->t->dtype, g->buf, SDT_F32, sdt_tensor_numel(g->t));
}

int cuda_attention_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *probs, const sdt_tensor *q, const sdt_tensor *k,
                           const sdt_tensor *v, int heads, bool causal)
{
    attn_dims a;
    if (attn_shape(be, q, k, v, heads, causal, &a)) return -1;
    const sdt_tensor *all[3] = {q, k, v};
    int od = attn_operand_dtype(all, 3);
    int64_t sP = a.Tq * a.Tk;
    dview qv = attn_operand(be, q, od, 0), kv = attn_operand(be, k, od, 1), vv = attn_operand(be, v, od, 2);
    gemm_target o;
    if (!qv.p || !kv.p || !vv.p || !target_begin(be, &o, out, od, 4, false)) return -1;
    dview pv = attn_probs(be, &a, qv, kv, od, probs ? (float *)probs->data : NULL, causal);
    if (!pv.p) return -1;
    for (int64_t b = 0; b < a.B; b++) /* O_h = P_h V_h */
        if (gemm_heads(be, false, false, (int)a.Tq, (int)a.D, (int)a.Tk, (dview){at_elem(pv, b * a.H * sP), pv.dt}, (int)a.Tk, sP,
                       (dview){at_elem(vv, b * a.Tk * a.HD), vv.dt}, (int)a.HD, a.D, 0.0f,
                       (dview){at_elem(o.c, b * a.Tq * a.HD), o.c.dt}, (int)a.HD, a.D, (int)a.H))
            return -1;
    return target_end(be, &o);
}

int cuda_attention_backward(sdt_backend *be, sdt_tensor *dq, sdt_tensor *dk, sdt_tensor *dv, const sdt_tensor *dout,
                            const sdt_tensor *q, const sdt_tensor *k, const sdt_tensor *v, const sdt_tensor *probs, int heads,
                            bool causal)
{
    attn_dims a;
    if (attn_shape(be, q, k, v, heads, causal, &a)) return -1;
    const sdt_tensor *all[4] = {q, k, v, dout};
    int od = attn_operand_dtype(all, 4);
    int64_t sP = a.Tq * a.Tk, nP = a.B * a.H * sP;
    dview qv = attn_operand(be, q, od, 0), kv = attn_operand(be, k, od, 1), vv = attn_operand(be, v, od, 2);
    dview dov = attn_operand(be, dout, od, 5);
    if (!qv.p || !kv.p || !vv.p || !dov.p) return -1;
    /* The probabilities as an operand: the saved fp32 ones (rounded for 16-bit GEMMs), or recomputed. */
    dview pv = probs ? probs_operand(be, (const float *)probs->data, nP, od, 8) : attn_probs(be, &a, qv, kv, od, NULL, causal);
    dview p32 = probs ? (dview){probs->data, SDT_F32} : pv; /* the most exact copy, for dS */
    float *dP = (float *)cuda_scratch(be, 6, (size_t)nP * sizeof(float));
    if (!pv.p || !dP) return -1;
    gemm_target g;
    if (dv) { /* dV_h += P_h^T dO_h */
        if (!target_begin(be, &g, dv, od, 4, true)) return -1;
        for (int64_t b = 0; b < a.B; b++)
            if (gemm_heads(be, true, false, (int)a.Tk, (int)a.D, (int)a.Tq, (dview){at_elem(pv, b * a.H * sP), pv.dt}, (int)a.Tk,
                           sP, (dview){at_elem(dov, b * a.Tq * a.HD), dov.dt}, (int)a.HD, a.D, 1.0f,
                           (dview){at_elem(g.c, b * a.Tk * a.HD), g.c.dt}, (int)a.HD, a.D, (int)a.H))
                return -1;
        if (target_end(be, &g)) return -1;
    }
    for (int64_t b = 0; b < a.B; b++) /* dP_h = dO_h V_h^T, in f32 */
        if (gemm_heads(be, false, true, (int)a.Tq, (int)a.Tk, (int)a.D, (dview){at_elem(dov, b * a.Tq * a.HD), dov.dt}, (int)a.HD,
                       a.D, (dview){at_elem(vv, b * a.Tk * a.HD), vv.dt}, (int)a.HD, a.D, 0.0f,
                       (dview){dP + b * a.H * sP, SDT_F32}, (int)a.Tk, sP, (int)a.H))
            return -1;
    /* dS = scale * P (dP - rowsum(dP P)), written in the operand dtype (in place over dP for f32) */
    void *dS = od == SDT_F32 ? (void *)dP : cuda_scratch(be, 9, (size_t)nP * sdt_dtype_size((sdt_dtype)od));
    if (!dS || cuda_softmax_rows_backward(be, dS, od, dP, SDT_F32, p32.p, p32.dt, a.B * a.H * a.Tq, a.Tk,
                                          1.0f / sqrtf((float)a.D), false))
        return -1;
    dview ds = {dS, od};
    if (dq) { /* dQ_h += dS_h K_h */
        if (!target_begin(be, &g, dq, od, 4, true)) return -1;
        for (int64_t b = 0; b < a.B; b++)
            if (gemm_heads(be, false, false, (int)a.Tq, (int)a.D, (int)a.Tk, (dview){at_elem(ds, b * a.H * sP), ds.dt}, (int)a.Tk,
                           sP, (dview){at_elem(kv, b * a.Tk * a.HD), kv.dt}, (int)a.HD, a.D, 1.0f,
                           (dview){at_elem(g.c, b * a.Tq * a.HD), g.c.dt}, (int)a.HD, a.D, (int)a.H))
                return -1;
        if (target_end(be, &g)) return -1;
    }
    if (dk) { /* dK_h += dS_h^T Q_h */
        if (!target_begin(be, &g, dk, od, 4, true)) return -1;
        for (int64_t b = 0; b < a.B; b++)
            if (gemm_heads(be, true, false, (int)a.Tk, (int)a.D, (int)a.Tq, (dview){at_elem(ds, b * a.H * sP), ds.dt}, (int)a.Tk,
                           sP, (dview){at_elem(qv, b * a.Tq * a.HD), qv.dt}, (int)a.HD, a.D, 1.0f,
                           (dview){at_elem(g.c, b * a.Tk * a.HD), g.c.dt}, (int)a.HD, a.D, (int)a.H))
                return -1;
        if (target_end(be, &g)) return -1;
    }
    return 0;
}
