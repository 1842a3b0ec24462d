/* linear.cu - linear on the GPU through cuBLAS. GEMMs run in the tensors' own
 * 16-bit dtype with fp32 accumulation when the dtypes agree (dw too: 16-bit dout
 * and x into an f32 gradient), and through fp32 copies otherwise. A 16-bit forward runs
 * through cuBLASLt with the bias (and a residual) added in the GEMM's epilogue: no pass of
 * its own over the output. (Attention has its own fused kernels: attention.cu.)
 * Semantics: kernels/ops.h. */
#include <cublasLt.h>
#include <stdint.h>
#include <stdlib.h>

#include "column_sum.cuh"
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
    return cuda_fail(be, SDT_ERR_INVALID_ARGUMENT, "gemm: unsupported dtype mix (%s, %s -> %s)", sdt_dtype_name((sdt_dtype)at),
                     sdt_dtype_name((sdt_dtype)bt), sdt_dtype_name((sdt_dtype)ct));
}

/* dout[r, c]: the bias gradient is its column sums (column_sum.cuh). */
struct bias_grad_value {
    const void *d;
    int dt;
    int64_t C;
    __device__ void operator()(int64_t r, int64_t c, float *v) const { v[0] = ld(d, dt, r * C + c); }
};

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

/* ---- cuBLASLt forward: out [M, N] = x [M, K] w [N, K]^T (+ bias [N]) (+ residual [M, N]) ---- */

/* cuBLASLt's heuristics pick per shape; one plan (its descriptors and the chosen algorithm, or none)
 * is kept per shape, dtype, epilogue and pointer alignment, so a call is one cublasLtMatmul. A fixed
 * algorithm gives the same bits on every run (cuBLAS's reproducibility rule), so this holds under
 * the deterministic backend too. */
struct lt_plan {
    int64_t M, N, K;
    int dt;
    bool bias, residual;
    unsigned align; /* bytes every operand's address is a multiple of (16 .. 256) */
    bool ok;        /* false: no algorithm; the cuBLAS path runs */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
    size_t workspace;
};

#define LT_WORKSPACE_CAP ((size_t)32 << 20)

static void lt_plan_destroy(struct lt_plan *p)
{
    if (p->desc) cublasLtMatmulDescDestroy(p->desc);
    if (p->a) cublasLtMatrixLayoutDestroy(p->a);
    if (p->b) cublasLtMatrixLayoutDestroy(p->b);
    if (p->c) cublasLtMatrixLayoutDestroy(p->c);
}

void cuda_lt_plans_free(cuda_ctx *c)
{
    for (int i = 0; i < c->n_lt_plans; i++) lt_plan_destroy(&c->lt_plans[i]);
    free(c->lt_plans);
    c->lt_plans = NULL;
    c->n_lt_plans = c->cap_lt_plans = 0;
}

/* The largest power of two (at most 256) that divides every address. */
static unsigned common_alignment(const void *const *ptrs, int n)
{
    uintptr_t bits = 256;
    for (int i = 0; i < n; i++)
        if (ptrs[i]) bits |= (uintptr_t)ptrs[i];
    return (unsigned)(bits & (~bits + 1));
}

/* Fills p's descriptors and asks the heuristics for one algorithm; a status other than success
 * means cuBLASLt could not be asked (p->ok says whether an algorithm was found). */
static cublasStatus_t lt_plan_make(cublasLtHandle_t lt, struct lt_plan *p)
{
    const cudaDataType_t t = cuda_type(p->dt);
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const cublasLtEpilogue_t epi = p->bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    /* column-major: w [N, K] row-major is [K, N] with ld K (transposed: [N, K]); x is [K, M]; out is [N, M] */
    cublasStatus_t s = cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&p->a, t, (uint64_t)p->K, (uint64_t)p->N, p->K);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&p->b, t, (uint64_t)p->K, (uint64_t)p->M, p->K);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&p->c, t, (uint64_t)p->N, (uint64_t)p->M, p->N);
    cublasLtMatmulPreference_t pref = NULL;
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulPreferenceCreate(&pref);
    const size_t cap = LT_WORKSPACE_CAP;
    const uint32_t align = p->align;
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &cap, sizeof cap);
    const cublasLtMatmulPreferenceAttributes_t aligns[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4 && s == CUBLAS_STATUS_SUCCESS; i++)
        s = cublasLtMatmulPreferenceSetAttribute(pref, aligns[i], &align, sizeof align);
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    if (s == CUBLAS_STATUS_SUCCESS) {
        /* "no algorithm" is an answer, not a failure: the plan says so and the cuBLAS path runs */
        if (cublasLtMatmulAlgoGetHeuristic(lt, p->desc, p->a, p->b, p->c, p->c, pref, 1, &result, &found) !=
                CUBLAS_STATUS_SUCCESS ||
            result.state != CUBLAS_STATUS_SUCCESS)
            found = 0;
    }
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    p->ok = s == CUBLAS_STATUS_SUCCESS && found > 0;
    if (p->ok) {
        p->algo = result.algo;
        p->workspace = result.workspaceSize;
    }
    return s;
}

/* The cached plan for this call (made on first use), NULL on failure (be->error set). */
static const struct lt_plan *lt_plan_for(sdt_backend *be, const struct lt_plan *key)
{
    cuda_ctx *c = ctx_of(be);
    for (int i = 0; i < c->n_lt_plans; i++) {
        const struct lt_plan *p = &c->lt_plans[i];
        if (p->M == key->M && p->N == key->N && p->K == key->K && p->dt == key->dt && p->bias == key->bias &&
            p->residual == key->residual && p->align == key->align)
            return p;
    }
    if (c->n_lt_plans == c->cap_lt_plans) {
        int cap = c->cap_lt_plans ? 2 * c->cap_lt_plans : 64;
        struct lt_plan *np = (struct lt_plan *)realloc(c->lt_plans, (size_t)cap * sizeof(*np));
        if (!np) {
            cuda_fail(be, SDT_ERR_OUT_OF_MEMORY, "linear_forward: out of host memory for a cuBLASLt plan");
            return NULL;
        }
        c->lt_plans = np;
        c->cap_lt_plans = cap;
    }
    struct lt_plan *p = &c->lt_plans[c->n_lt_plans];
    *p = *key;
    p->desc = NULL, p->a = p->b = p->c = NULL;
    cublasStatus_t s = lt_plan_make(c->cublaslt, p);
    if (s != CUBLAS_STATUS_SUCCESS) {
        lt_plan_destroy(p);
        cuda_fail(be, cublas_error_code(s), "linear_forward: cuBLASLt error %d describing a [%lld, %lld] x [%lld, %lld]^T product",
                  (int)s, (long long)key->M, (long long)key->K, (long long)key->N, (long long)key->K);
        return NULL;
    }
    c->n_lt_plans++;
    return p;
}

/* 0 done, -1 failed (be->error set), 1 not taken: dtypes or alignment cuBLASLt is not given here, or
 * no algorithm for the shape; the caller runs the cuBLAS path. */
static int lt_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w, const sdt_tensor *b,
                      const sdt_tensor *residual)
{
    const int dt = x->dtype;
    if (!ctx_of(be)->cublaslt || (dt != SDT_BF16 && dt != SDT_F16) || w->dtype != dt || out->dtype != dt ||
        (b && b->dtype != dt) || (residual && residual->dtype != dt))
        return 1;
    const int64_t K = x->shape[x->ndim - 1], N = w->shape[0], M = sdt_tensor_numel(x) / (K ? K : 1);
    if (M <= 0 || N <= 0 || K <= 0 || M > INT32_MAX || N > INT32_MAX || K > INT32_MAX) return 1;
    const void *ptrs[5] = {x->data, w->data, out->data, residual ? residual->data : NULL, b ? b->data : NULL};
    struct lt_plan key = {};
    key.M = M, key.N = N, key.K = K, key.dt = dt, key.bias = b != NULL, key.residual = residual != NULL;
    key.align = common_alignment(ptrs, 5);
    if (key.align < 16) return 1;
    const struct lt_plan *p = lt_plan_for(be, &key);
    if (!p) return -1;
    if (!p->ok) return 1;
    if (b) {
        const void *bias = b->data;
        CUBLAS_TRY(be, cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    void *ws = p->workspace ? cuda_scratch(be, CUDA_CONV_WORKSPACE_SLOT, p->workspace) : NULL;
    if (p->workspace && !ws) return -1;
    const float alpha = 1.0f, beta = residual ? 1.0f : 0.0f;
    const void *cin = residual ? residual->data : out->data;
    CUBLAS_TRY(be, cublasLtMatmul(ctx_of(be)->cublaslt, p->desc, &alpha, w->data, p->a, x->data, p->b, &beta, cin, p->c,
                                  out->data, p->c, &p->algo, ws, p->workspace, ctx_of(be)->stream));
    return 0;
}

/* The cuBLAS path: the GEMM, then the bias in a pass of its own. */
static int gemm_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w, const sdt_tensor *b)
{
    int64_t C = x->shape[x->ndim - 1], OC = w->shape[0], M = sdt_tensor_numel(x) / C;
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
        if (cuda_add_bias(be, op, odt, b->data, b->dtype, M, OC, 1)) return -1;
    }
    if (op != out->data) return cuda_convert_raw(be, out->data, out->dtype, op, SDT_F32, M * OC);
    return 0;
}

int cuda_linear_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w, const sdt_tensor *b)
{
    int rc = lt_forward(be, out, x, w, b, NULL);
    return rc <= 0 ? rc : gemm_forward(be, out, x, w, b);
}

int cuda_linear_residual_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w,
                                 const sdt_tensor *b, const sdt_tensor *residual)
{
    int rc = lt_forward(be, out, x, w, b, residual);
    if (rc <= 0) return rc;
    if (gemm_forward(be, out, x, w, b)) return -1;
    return cuda_add_forward(be, out, out, residual);
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
    if (dw && dout->dtype == x->dtype && dout->dtype != SDT_F32 && (dw->dtype == SDT_F32 || dw->dtype == x->dtype)) {
        /* 16-bit operands straight into the (f32) gradient: tensor cores, f32 accumulation */
        if (gemm_ex(be, true, false, (int)OC, (int)C, (int)M, 1.0f, dout->data, dout->dtype, (int)OC, x->data, x->dtype, (int)C,
                    1.0f, dw->data, dw->dtype, (int)C))
            return -1;
    } else if (dw) { /* dw [OC, C] += dout^T [OC, M] x [M, C], accumulated in f32 */
        const float *d32 = cuda_read_f32(be, dout, 0), *x32 = cuda_read_f32(be, x, 1);
        float *acc32 = accum_begin(be, dw, 3);
        if (!d32 || !x32 || !acc32) return -1;
        if (cuda_gemm_f32(be, true, false, (int)OC, (int)C, (int)M, 1.0f, d32, (int)OC, x32, (int)C, 1.0f, acc32, (int)C) ||
            accum_end(be, dw, acc32))
            return -1;
    }
    if (db) {
        if (column_sums<1>(be, db->data, db->dtype, NULL, 0, bias_grad_value{dout->data, dout->dtype, OC}, M, OC)) return -1;
    }
    return 0;
}

/* dx = dout w with beta 0: no zeroing pass and no read of dx. Mixed dtypes take the accumulating
 * path on a zeroed dx (the same values). */
int cuda_linear_input_grad(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *w)
{
    int64_t C = dx->shape[dx->ndim - 1], OC = w->shape[0], M = sdt_tensor_numel(dx) / C;
    if (dout->dtype == w->dtype && (dx->dtype == dout->dtype || dx->dtype == SDT_F32))
        return gemm_ex(be, false, false, (int)M, (int)C, (int)OC, 1.0f, dout->data, dout->dtype, (int)OC, w->data, w->dtype,
                       (int)C, 0.0f, dx->data, dx->dtype, (int)C);
    sdt_tensor x_shape = *dx;
    x_shape.data = NULL;
    if (cuda_zero(be, dx)) return -1;
    return cuda_linear_backward(be, dx, NULL, NULL, dout, &x_shape, w);
}
