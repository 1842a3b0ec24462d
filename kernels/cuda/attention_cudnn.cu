/* attention_cudnn.cu - attention through cuDNN's fused attention where cuDNN has a deterministic plan for
 * the shape: 16-bit q/k/v, no mask, head dim a multiple of 8 up to 128, sm_80+. The forward is cuDNN's
 * single-node SDPA operation (O and the logsumexp statistics, the same natural-log lse attention.cu
 * saves); the backward is the graph cudnn-frontend builds for it (S = QK^T scale, P = exp(S - lse),
 * dV = P^T dO, dS = P (dO V^T - rowsum(dO O)) scale, dK = dS^T Q, dQ = dS K through an fp32
 * accumulator, which it sums in a varying order: only when the backend need not be deterministic,
 * ops.h). On an H100 they run at 1.6-2.3x attention.cu's tensor-core kernels (bench/NOTES.md run 26).
 * Any other case, or a shape cuDNN has no plan for, returns 1 and attention.cu runs it. */
#include "cuda_ops.h"
#include "cudnn_plan.cuh"

enum { SDPA_FWD = 0, SDPA_BWD = 1 };
enum {
    UID_Q = 1,
    UID_K,
    UID_V,
    UID_O,
    UID_STATS,
    UID_SCALE,
    UID_ONE,
    UID_DO,
    UID_DQ,
    UID_DK,
    UID_DV,
    UID_SUM,
    UID_DQ_ACC
};

struct sdpa_plan {
    int dir, dtype;
    int64_t B, H, Tq, Tk, D;
    dnn_desc plan; /* NULL: cuDNN has none for this shape (attention.cu runs it) */
    size_t workspace;
};

void cuda_sdpa_plans_free(cuda_ctx *c)
{
    for (int i = 0; i < c->n_sdpa_plans; i++)
        if (c->sdpa_plans[i].plan) cudnnBackendDestroyDescriptor(c->sdpa_plans[i].plan);
    free(c->sdpa_plans);
    c->sdpa_plans = NULL;
    c->n_sdpa_plans = c->cap_sdpa_plans = 0;
}

/* The [B, T, H*D] rows of q, k, v, o seen as [B, H, T, D]; the statistics [B, H, Tq, 1]. */
typedef struct sdpa_views {
    int64_t q[4], qs[4], k[4], ks[4], kt[4], kts[4], st[4], sts[4];
} sdpa_views;

static sdpa_views views_of(const struct sdpa_plan *s)
{
    const int64_t B = s->B, H = s->H, Tq = s->Tq, Tk = s->Tk, D = s->D, HD = H * D;
    sdpa_views v = {{B, H, Tq, D}, {Tq * HD, D, HD, 1}, {B, H, Tk, D}, {Tk * HD, D, HD, 1},
                    {B, H, D, Tk}, {Tk * HD, D, 1, HD}, {B, H, Tq, 1}, {H * Tq, Tq, 1, 1}};
    return v;
}

static cudnnStatus_t pointwise(dnn_pool *p, dnn_desc *op, cudnnPointwiseMode_t mode, dnn_desc x, dnn_desc b, dnn_desc y)
{
    dnn_desc pw;
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    cudnnStatus_t s = dnn_pool_new(p, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, &pw);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(pw);
    if (s == CUDNN_STATUS_SUCCESS) s = dnn_pool_new(p, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, op);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                     1, &pw);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    if (s == CUDNN_STATUS_SUCCESS && b)
        s = cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(*op);
    return s;
}

static cudnnStatus_t matmul(dnn_pool *p, dnn_desc *op, dnn_desc a, dnn_desc b, dnn_desc c)
{
    dnn_desc mm;
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnStatus_t s = dnn_pool_new(p, CUDNN_BACKEND_MATMUL_DESCRIPTOR, &mm);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(mm);
    if (s == CUDNN_STATUS_SUCCESS) s = dnn_pool_new(p, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, op);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(*op);
    return s;
}

static cudnnStatus_t reduce_sum(dnn_pool *p, dnn_desc *op, dnn_desc x, dnn_desc y)
{
    dnn_desc red;
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnReduceTensorOp_t mode = CUDNN_REDUCE_TENSOR_ADD;
    cudnnStatus_t s = dnn_pool_new(p, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, &red);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(red, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(red, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(red);
    if (s == CUDNN_STATUS_SUCCESS) s = dnn_pool_new(p, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, op);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &red);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(*op);
    return s;
}

static cudnnStatus_t reshape(dnn_pool *p, dnn_desc *op, dnn_desc x, dnn_desc y)
{
    cudnnStatus_t s = dnn_pool_new(p, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, op);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(*op);
    return s;
}

#define TRY_DNN(call)                                                                                                  \
    do {                                                                                                               \
        cudnnStatus_t s_ = (call);                                                                                     \
        if (s_ != CUDNN_STATUS_SUCCESS) return s_;                                                                     \
    } while (0)

static const int64_t SCALAR_1D[1] = {1}, SCALAR_4D[4] = {1, 1, 1, 1};

/* The forward: cuDNN's SDPA operation (its scale a one-element by-value tensor, as cudnn-frontend sends it). */
static cudnnStatus_t build_forward(dnn_pool *p, cudnnHandle_t h, struct sdpa_plan *s)
{
    sdpa_views w = views_of(s);
    cudnnDataType_t dt = s->dtype == SDT_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
    dnn_desc q, k, v, o, st, sc, op;
    TRY_DNN(dnn_tensor(p, &q, UID_Q, dt, 4, w.q, w.qs, 16, false, false));
    TRY_DNN(dnn_tensor(p, &k, UID_K, dt, 4, w.k, w.ks, 16, false, false));
    TRY_DNN(dnn_tensor(p, &v, UID_V, dt, 4, w.k, w.ks, 16, false, false));
    TRY_DNN(dnn_tensor(p, &o, UID_O, dt, 4, w.q, w.qs, 16, false, false));
    TRY_DNN(dnn_tensor(p, &st, UID_STATS, CUDNN_DATA_FLOAT, 4, w.st, w.sts, 16, false, false));
    TRY_DNN(dnn_tensor(p, &sc, UID_SCALE, CUDNN_DATA_FLOAT, 1, SCALAR_1D, SCALAR_1D, 16, false, true));
    TRY_DNN(dnn_pool_new(p, CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, &op));
    TRY_DNN(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &q));
    TRY_DNN(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k));
    TRY_DNN(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v));
    TRY_DNN(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o));
    TRY_DNN(
        cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &st));
    TRY_DNN(
        cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &sc));
    TRY_DNN(cudnnBackendFinalize(op));
    return dnn_plan_for_ops(p, h, &op, 1, false, (size_t)256 << 20, &s->plan, &s->workspace);
}

/* The backward as cudnn-frontend's composite graph (header comment). dQ, dK, dV are written, not
 * accumulated, straight into the op's gradients (ops.h: attention_backward writes them), whose
 * [B, T, H*D] rows these views describe. */
static cudnnStatus_t build_backward(dnn_pool *p, cudnnHandle_t h, struct sdpa_plan *s)
{
    sdpa_views w = views_of(s);
    cudnnDataType_t dt = s->dtype == SDT_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
    const int64_t B = s->B, H = s->H, Tq = s->Tq, Tk = s->Tk, D = s->D;
    const int64_t sc_d[4] = {B, H, Tq, Tk}, sc_s[4] = {H * Tq * Tk, Tq * Tk, Tk, 1};
    const int64_t pt_d[4] = {B, H, Tk, Tq}, pt_s[4] = {H * Tq * Tk, Tq * Tk, 1, Tk};
    const int64_t acc_s[4] = {H * Tq * D, Tq * D, D, 1}, doo_s[4] = {H * Tq * D, Tq * D, H * D, 1};
    dnn_desc q, kt, vt, o, st, sc, one, d_o, dq, dk, dv, sum, dqacc;
    TRY_DNN(dnn_tensor(p, &q, UID_Q, dt, 4, w.q, w.qs, 16, false, false));
    TRY_DNN(dnn_tensor(p, &kt, UID_K, dt, 4, w.kt, w.kts, 16, false, false));
    TRY_DNN(dnn_tensor(p, &vt, UID_V, dt, 4, w.kt, w.kts, 16, false, false));
    TRY_DNN(dnn_tensor(p, &o, UID_O, dt, 4, w.q, w.qs, 16, false, false));
    TRY_DNN(dnn_tensor(p, &st, UID_STATS, f32, 4, w.st, w.sts, 16, false, false));
    TRY_DNN(dnn_tensor(p, &sc, UID_SCALE, f32, 4, SCALAR_4D, SCALAR_4D, 16, false, true));
    TRY_DNN(dnn_tensor(p, &one, UID_ONE, f32, 4, SCALAR_4D, SCALAR_4D, 16, false, true));
    TRY_DNN(dnn_tensor(p, &d_o, UID_DO, dt, 4, w.q, w.qs, 16, false, false));
    TRY_DNN(dnn_tensor(p, &dq, UID_DQ, dt, 4, w.q, w.qs, 16, false, false));
    TRY_DNN(dnn_tensor(p, &dk, UID_DK, dt, 4, w.k, w.ks, 16, false, false));
    TRY_DNN(dnn_tensor(p, &dv, UID_DV, dt, 4, w.k, w.ks, 16, false, false));
    TRY_DNN(dnn_tensor(p, &sum, UID_SUM, f32, 4, w.st, w.sts, 16, false, false));
    TRY_DNN(dnn_tensor(p, &dqacc, UID_DQ_ACC, f32, 4, w.q, acc_s, 16, false, false));
    dnn_desc ops[20];
    int n = 0;
    /* sum = rowsum(dO * O) * 1 */
    dnn_desc doo, red;
    TRY_DNN(dnn_tensor(p, &doo, 0, f32, 4, w.q, doo_s, 16, true, false));
    TRY_DNN(dnn_tensor(p, &red, 0, f32, 4, w.st, w.sts, 16, true, false));
    TRY_DNN(pointwise(p, &ops[n++], CUDNN_POINTWISE_MUL, d_o, o, doo));
    TRY_DNN(reduce_sum(p, &ops[n++], doo, red));
    TRY_DNN(pointwise(p, &ops[n++], CUDNN_POINTWISE_MUL, red, one, sum));
    /* P = exp(Q K^T scale - lse); dV = P^T dO */
    dnn_desc s0, s1, s2, pexp, pt;
    TRY_DNN(dnn_tensor(p, &s0, 0, f32, 4, sc_d, sc_s, 16, true, false));
    TRY_DNN(dnn_tensor(p, &s1, 0, f32, 4, sc_d, sc_s, 16, true, false));
    TRY_DNN(dnn_tensor(p, &s2, 0, f32, 4, sc_d, sc_s, 16, true, false));
    TRY_DNN(dnn_tensor(p, &pexp, 0, f32, 4, sc_d, sc_s, 16, true, false));
    TRY_DNN(dnn_tensor(p, &pt, 0, dt, 4, pt_d, pt_s, 16, true, false));
    TRY_DNN(matmul(p, &ops[n++], q, kt, s0));
    TRY_DNN(pointwise(p, &ops[n++], CUDNN_POINTWISE_MUL, s0, sc, s1));
    TRY_DNN(pointwise(p, &ops[n++], CUDNN_POINTWISE_SUB, s1, st, s2));
    TRY_DNN(pointwise(p, &ops[n++], CUDNN_POINTWISE_EXP, s2, NULL, pexp));
    TRY_DNN(reshape(p, &ops[n++], pexp, pt));
    TRY_DNN(matmul(p, &ops[n++], pt, d_o, dv));
    /* dS = (dO V^T - sum) P scale; dK = dS^T Q */
    dnn_desc dp, dp1, dp2, ds, dst;
    TRY_DNN(dnn_tensor(p, &dp, 0, f32, 4, sc_d, sc_s, 16, true, false));
    TRY_DNN(dnn_tensor(p, &dp1, 0, f32, 4, sc_d, sc_s, 16, true, false));
    TRY_DNN(dnn_tensor(p, &dp2, 0, f32, 4, sc_d, sc_s, 16, true, false));
    TRY_DNN(dnn_tensor(p, &ds, 0, f32, 4, sc_d, sc_s, 16, true, false));
    TRY_DNN(dnn_tensor(p, &dst, 0, dt, 4, pt_d, pt_s, 16, true, false));
    TRY_DNN(matmul(p, &ops[n++], d_o, vt, dp));
    TRY_DNN(pointwise(p, &ops[n++], CUDNN_POINTWISE_SUB, dp, sum, dp1));
    TRY_DNN(pointwise(p, &ops[n++], CUDNN_POINTWISE_MUL, dp1, pexp, dp2));
    TRY_DNN(pointwise(p, &ops[n++], CUDNN_POINTWISE_MUL, dp2, sc, ds));
    TRY_DNN(reshape(p, &ops[n++], ds, dst));
    TRY_DNN(matmul(p, &ops[n++], dst, q, dk));
    /* dQ = dS K (K untransposed through a reshape), accumulated in fp32, then rounded */
    dnn_desc k_plain;
    TRY_DNN(dnn_tensor(p, &k_plain, 0, dt, 4, w.k, w.ks, 16, true, false));
    TRY_DNN(reshape(p, &ops[n++], kt, k_plain));
    TRY_DNN(matmul(p, &ops[n++], ds, k_plain, dqacc));
    TRY_DNN(pointwise(p, &ops[n++], CUDNN_POINTWISE_IDENTITY, dqacc, NULL, dq));
    return dnn_plan_for_ops(p, h, ops, n, false, (size_t)256 << 20, &s->plan, &s->workspace);
}

/* The cached plan of this shape, built on first use; NULL with *rc 1 when cuDNN has none, -1 on failure. */
static const struct sdpa_plan *plan_for(sdt_backend *be, int dir, int dtype, int64_t B, int64_t H, int64_t Tq,
                                        int64_t Tk, int64_t D, int *rc)
{
    cuda_ctx *c = ctx_of(be);
    for (int i = 0; i < c->n_sdpa_plans; i++) {
        const struct sdpa_plan *p = &c->sdpa_plans[i];
        if (p->dir == dir && p->dtype == dtype && p->B == B && p->H == H && p->Tq == Tq && p->Tk == Tk && p->D == D) {
            *rc = p->plan ? 0 : 1;
            return p->plan ? p : NULL;
        }
    }
    if (cuda_capture_refuses(be, "building a cuDNN attention plan")) {
        *rc = -1;
        return NULL;
    }
    if (c->n_sdpa_plans == c->cap_sdpa_plans) {
        int cap = c->cap_sdpa_plans ? 2 * c->cap_sdpa_plans : 32;
        struct sdpa_plan *np = (struct sdpa_plan *)realloc(c->sdpa_plans, (size_t)cap * sizeof(*np));
        if (!np) {
            *rc = cuda_fail(be, SDT_ERR_OUT_OF_MEMORY, "attention: out of host memory");
            return NULL;
        }
        c->sdpa_plans = np;
        c->cap_sdpa_plans = cap;
    }
    struct sdpa_plan key = {dir, dtype, B, H, Tq, Tk, D, NULL, 0};
    dnn_pool pool;
    memset(&pool, 0, sizeof pool);
    cudnnStatus_t s = dir == SDPA_FWD ? build_forward(&pool, c->cudnn, &key) : build_backward(&pool, c->cudnn, &key);
    dnn_pool_free(&pool);
    if (s != CUDNN_STATUS_SUCCESS) key.plan = NULL; /* no plan: remembered, so the heuristics are not asked again */
    c->sdpa_plans[c->n_sdpa_plans++] = key;
    *rc = key.plan ? 0 : 1;
    return key.plan ? &c->sdpa_plans[c->n_sdpa_plans - 1] : NULL;
}

static bool aligned16(const void *p)
{
    return ((uintptr_t)p & 15) == 0;
}

/* The cases cuDNN's fused attention takes (header comment); the dtype of them all in *dtype. */
static bool sdpa_applies(sdt_backend *be, const sdt_tensor *const *t, int n, int64_t D, bool causal, int *dtype)
{
    if (causal || !ctx_of(be)->attention_tc || D % 8 != 0 || D > 128) return false;
    int dt = t[0]->dtype;
    if (dt != SDT_F16 && dt != SDT_BF16) return false;
    for (int i = 0; i < n; i++)
        if (t[i]->dtype != dt || !aligned16(t[i]->data)) return false;
    *dtype = dt;
    return true;
}

int cuda_sdpa_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *lse, const sdt_tensor *q, const sdt_tensor *k,
                      const sdt_tensor *v, int heads, bool causal)
{
    const int64_t B = q->shape[0], Tq = q->shape[1], Tk = k->shape[1], D = q->shape[2] / heads;
    const sdt_tensor *all[4] = {q, k, v, out};
    int dtype, rc = 1;
    if (!lse || !aligned16(lse->data) || !sdpa_applies(be, all, 4, D, causal, &dtype)) return 1;
    const struct sdpa_plan *p = plan_for(be, SDPA_FWD, dtype, B, heads, Tq, Tk, D, &rc);
    if (!p) return rc;
    void *ws = p->workspace ? cuda_scratch(be, CUDA_CONV_WORKSPACE_SLOT, p->workspace) : NULL;
    if (p->workspace && !ws) return -1;
    float scale = 1.0f / sqrtf((float)D);
    const int64_t uids[6] = {UID_Q, UID_K, UID_V, UID_O, UID_STATS, UID_SCALE};
    void *const ptrs[6] = {q->data, k->data, v->data, out->data, lse->data, &scale};
    cudnnStatus_t s = dnn_execute(ctx_of(be)->cudnn, p->plan, 6, uids, ptrs, ws);
    if (s != CUDNN_STATUS_SUCCESS)
        return cuda_fail(be, cudnn_error_code(s), "attention_forward: cuDNN's fused attention failed (%s)",
                         cudnnGetErrorString(s));
    return 0;
}

/* 256-byte aligned offsets into one scratch block. */
static size_t carve(size_t *at, size_t bytes)
{
    size_t o = *at;
    *at += (bytes + 255) & ~(size_t)255;
    return o;
}

int cuda_sdpa_backward(sdt_backend *be, sdt_tensor *dq, sdt_tensor *dk, sdt_tensor *dv, const sdt_tensor *dout,
                       const sdt_tensor *q, const sdt_tensor *k, const sdt_tensor *v, const sdt_tensor *out,
                       const sdt_tensor *lse, int heads, bool causal)
{
    /* cuDNN's dQ accumulates in a varying order (run 26's replay test): a deterministic backend keeps attention.cu.
     * A gradient that is not wanted (NULL; no training caller passes one) leaves the call to attention.cu too,
     * which then skips its work instead of writing it to scratch. */
    if (be->deterministic || !dq || !dk || !dv || !out || !lse || !aligned16(lse->data)) return 1;
    const int64_t B = q->shape[0], Tq = q->shape[1], Tk = k->shape[1], D = q->shape[2] / heads;
    const sdt_tensor *all[8] = {q, k, v, out, dout, dq, dk, dv};
    int dtype, rc = 1;
    if (!sdpa_applies(be, all, 8, D, causal, &dtype)) return 1;
    const struct sdpa_plan *p = plan_for(be, SDPA_BWD, dtype, B, heads, Tq, Tk, D, &rc);
    if (!p) return rc;
    /* cuDNN writes dQ, dK, dV straight into the op's gradients (same dtype, 16-byte aligned: sdpa_applies);
     * its fp32 dQ accumulator and row sums take one scratch block */
    const int64_t nq = sdt_tensor_numel(q);
    size_t at = 0;
    const size_t o_acc = carve(&at, (size_t)nq * sizeof(float)),
                 o_sum = carve(&at, (size_t)(B * heads * Tq) * sizeof(float));
    char *blk = (char *)cuda_scratch(be, CUDA_ATTENTION_SCRATCH_SLOT, at);
    void *ws = p->workspace ? cuda_scratch(be, CUDA_CONV_WORKSPACE_SLOT, p->workspace) : NULL;
    if (!blk || (p->workspace && !ws)) return -1;
    float scale = 1.0f / sqrtf((float)D), one = 1.0f;
    const int64_t uids[13] = {UID_Q,  UID_K,  UID_V,  UID_O,  UID_STATS, UID_SCALE, UID_ONE,
                              UID_DO, UID_DQ, UID_DK, UID_DV, UID_SUM,   UID_DQ_ACC};
    void *const ptrs[13] = {q->data,    k->data,  v->data,  out->data, lse->data,   &scale,     &one,
                            dout->data, dq->data, dk->data, dv->data,  blk + o_sum, blk + o_acc};
    cudnnStatus_t s = dnn_execute(ctx_of(be)->cudnn, p->plan, 13, uids, ptrs, ws);
    if (s != CUDNN_STATUS_SUCCESS)
        return cuda_fail(be, cudnn_error_code(s), "attention_backward: cuDNN's fused attention failed (%s)",
                         cudnnGetErrorString(s));
    return 0;
}
