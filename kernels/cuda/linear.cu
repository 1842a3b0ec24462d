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
        CUBLAS_TRY(be, cublasGemmEx(ctx_of(be)->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                    N, M, K, &alpha, B, cuda_type(bt), ldb, A, cuda_type(at), lda, &beta, C,
                                    cuda_type(ct), ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        return 0;
    }
    return cuda_fail(be, SDT_ERR_INVALID_ARGUMENT, "gemm: unsupported dtype mix (%s, %s -> %s)",
                     sdt_dtype_name((sdt_dtype)at), sdt_dtype_name((sdt_dtype)bt), sdt_dtype_name((sdt_dtype)ct));
}

/* dout[r, c]: the bias gradient is its column sums (column_sum.cuh). */
struct bias_grad_value {
    const void *d;
    int dt;
    int64_t C;
    __device__ void operator()(int64_t r, int64_t c, float *v) const { v[0] = ld(d, dt, r * C + c); }
};

/* Brings x and w to one dtype: the shared dtype when they agree, else f32 copies. */
static int gemm_operands(sdt_backend *be, const sdt_tensor *x, const sdt_tensor *w, const void **xp, const void **wp,
                         int *dt)
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

/* ---- cuBLASLt: the 16-bit linears ----
 * In cuBLASLt's column-major terms every call is D [n, m] = op(A) [n, k] B [k, m] (+ bias [n]) (+ beta C):
 *   forward      out [M, OC] = x [M, C] w^T: n = OC, k = C, A = w transposed, B = x
 *   input grad   dx [M, C] (+)= dout [M, OC] w: n = C, k = OC, A = w, B = dout
 * One plan (descriptors and chosen algorithm, or none) is kept per shape, transpose, epilogue, C operand and
 * pointer alignment, so a call is one cublasLtMatmul with no heuristics query. The algorithm: heuristics' first
 * on a deterministic backend (a fixed algorithm gives the same bits on every run, cuBLAS's reproducibility rule);
 * otherwise the fastest of heuristics' first LT_CANDIDATES, timed once on the call's own operands, as
 * cudnn.benchmark picks convolutions (which one wins may differ between runs, hence not when determinism is
 * asked for). */
enum lt_c { LT_C_NONE, LT_C_SEPARATE, LT_C_IN_PLACE }; /* beta 0; beta 1 with C another tensor; beta 1 with C = D */

struct lt_plan {
    int64_t n, m, k;
    int dt, bias_dt; /* bias_dt: the bias's dtype (dt or f32), when there is one */
    bool trans_a, bias, tuned;
    int c_mode;     /* enum lt_c */
    unsigned align; /* bytes every operand's address is a multiple of (16 .. 256) */
    bool ok;        /* false: no algorithm; the cuBLAS path runs */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
    size_t workspace;
};

#define LT_WORKSPACE_CAP ((size_t)32 << 20)
#define LT_CANDIDATES 8

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

/* One call's operands. */
typedef struct lt_call {
    const void *a, *b, *c, *bias;
    void *d;
} lt_call;

static cublasStatus_t lt_run(sdt_backend *be, const struct lt_plan *p, const cublasLtMatmulAlgo_t *algo,
                             size_t ws_bytes, void *ws, const lt_call *x, void *d)
{
    const float alpha = 1.0f, beta = p->c_mode == LT_C_NONE ? 0.0f : 1.0f;
    const void *cin = p->c_mode == LT_C_SEPARATE ? x->c : x->d;
    return cublasLtMatmul(ctx_of(be)->cublaslt, p->desc, &alpha, x->a, p->a, x->b, p->b, &beta, cin, p->c, d, p->c,
                          algo, ws, ws_bytes, ctx_of(be)->stream);
}

/* The fastest of the candidates on this call's operands: each runs once to warm, then three times timed.
 * D is the call's own output, or (accumulating in place) a temporary, so no value is changed twice. */
static int lt_pick_fastest(sdt_backend *be, struct lt_plan *p, const cublasLtMatmulHeuristicResult_t *cand, int n,
                           const lt_call *x)
{
    cuda_ctx *c = ctx_of(be);
    size_t ws_max = 0;
    for (int i = 0; i < n; i++)
        if (cand[i].workspaceSize > ws_max) ws_max = cand[i].workspaceSize;
    void *ws = ws_max ? cuda_scratch(be, CUDA_CONV_WORKSPACE_SLOT, ws_max) : NULL;
    if (ws_max && !ws) return -1;
    void *d = x->d, *tmp = NULL;
    struct lt_plan timing = *p;
    lt_call tx = *x;
    if (p->c_mode == LT_C_IN_PLACE) { /* C = the real gradient, D = the temporary */
        CUDA_TRY(be, cuda_device_malloc(c, &tmp, (size_t)(p->n * p->m) * sdt_dtype_size((sdt_dtype)p->dt)));
        d = tmp;
        timing.c_mode = LT_C_SEPARATE;
        tx.c = x->d;
    }
    cudaEvent_t e0 = NULL, e1 = NULL;
    int best = -1, rc = 0;
    float best_ms = 0;
    if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess) {
        rc = cuda_fail(be, SDT_ERR_DEVICE, "linear: cannot create CUDA events to time cuBLASLt's algorithms");
        n = 0;
    }
    for (int i = 0; i < n; i++) {
        if (lt_run(be, &timing, &cand[i].algo, cand[i].workspaceSize, ws, &tx, d) != CUBLAS_STATUS_SUCCESS) continue;
        cudaEventRecord(e0, c->stream);
        bool ran = true;
        for (int r = 0; r < 3 && ran; r++)
            ran = lt_run(be, &timing, &cand[i].algo, cand[i].workspaceSize, ws, &tx, d) == CUBLAS_STATUS_SUCCESS;
        cudaEventRecord(e1, c->stream);
        float ms = 0;
        if (!ran || cudaEventSynchronize(e1) != cudaSuccess || cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess)
            continue;
        if (best < 0 || ms < best_ms) best = i, best_ms = ms;
    }
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (tmp) {
        cudaStreamSynchronize(c->stream);
        cuda_device_free(c, tmp);
    }
    cudaGetLastError(); /* a candidate that failed to launch is skipped, not the call's error */
    if (rc) return rc;
    p->ok = best >= 0;
    if (p->ok) {
        p->algo = cand[best].algo;
        p->workspace = cand[best].workspaceSize;
    }
    return 0;
}

/* Fills p's descriptors and chooses its algorithm (p->ok: one was found). -1 with be->error set when cuBLASLt
 * could not be asked. */
static int lt_plan_make(sdt_backend *be, struct lt_plan *p, const lt_call *x)
{
    const cudaDataType_t t = cuda_type(p->dt);
    const cublasOperation_t ta = p->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
    const cublasLtEpilogue_t epi = p->bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    cublasStatus_t s = cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    const cudaDataType_t bias_t = cuda_type(p->bias_dt);
    if (s == CUBLAS_STATUS_SUCCESS && p->bias)
        s = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_t, sizeof bias_t);
    if (s == CUBLAS_STATUS_SUCCESS && p->bias)
        s = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &x->bias, sizeof x->bias);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = p->trans_a ? cublasLtMatrixLayoutCreate(&p->a, t, (uint64_t)p->k, (uint64_t)p->n, p->k)
                       : cublasLtMatrixLayoutCreate(&p->a, t, (uint64_t)p->n, (uint64_t)p->k, p->n);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&p->b, t, (uint64_t)p->k, (uint64_t)p->m, p->k);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&p->c, t, (uint64_t)p->n, (uint64_t)p->m, p->n);
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
    cublasLtMatmulHeuristicResult_t cand[LT_CANDIDATES];
    int found = 0;
    /* "no algorithm" is an answer, not a failure: the plan says so and the cuBLAS path runs */
    if (s == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulAlgoGetHeuristic(ctx_of(be)->cublaslt, p->desc, p->a, p->b, p->c, p->c, pref,
                                       p->tuned ? LT_CANDIDATES : 1, cand, &found) != CUBLAS_STATUS_SUCCESS)
        found = 0;
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (s != CUBLAS_STATUS_SUCCESS)
        return cuda_fail(be, cublas_error_code(s),
                         "linear: cuBLASLt error %d describing a [%lld, %lld] x [%lld, %lld] product", (int)s,
                         (long long)p->m, (long long)p->k, (long long)p->k, (long long)p->n);
    int usable = 0;
    for (int i = 0; i < found; i++)
        if (cand[i].state == CUBLAS_STATUS_SUCCESS) cand[usable++] = cand[i];
    if (usable > 1) return lt_pick_fastest(be, p, cand, usable, x);
    p->ok = usable == 1;
    if (p->ok) {
        p->algo = cand[0].algo;
        p->workspace = cand[0].workspaceSize;
    }
    return 0;
}

/* The cached plan for this key (made, and its algorithm chosen, on first use), NULL on failure (be->error set). */
static const struct lt_plan *lt_plan_for(sdt_backend *be, const struct lt_plan *key, const lt_call *x)
{
    cuda_ctx *c = ctx_of(be);
    for (int i = 0; i < c->n_lt_plans; i++) {
        const struct lt_plan *p = &c->lt_plans[i];
        if (p->n == key->n && p->m == key->m && p->k == key->k && p->dt == key->dt && p->trans_a == key->trans_a &&
            p->bias == key->bias && p->bias_dt == key->bias_dt && p->tuned == key->tuned && p->c_mode == key->c_mode &&
            p->align == key->align)
            return p;
    }
    /* choosing a plan times candidates and allocates: never inside a captured step */
    if (cuda_capture_refuses(be, "choosing a cuBLASLt plan")) return NULL;
    if (c->n_lt_plans == c->cap_lt_plans) {
        int cap = c->cap_lt_plans ? 2 * c->cap_lt_plans : 64;
        struct lt_plan *np = (struct lt_plan *)realloc(c->lt_plans, (size_t)cap * sizeof(*np));
        if (!np) {
            cuda_fail(be, SDT_ERR_OUT_OF_MEMORY, "linear: out of host memory for a cuBLASLt plan");
            return NULL;
        }
        c->lt_plans = np;
        c->cap_lt_plans = cap;
    }
    struct lt_plan *p = &c->lt_plans[c->n_lt_plans];
    *p = *key;
    p->desc = NULL, p->a = p->b = p->c = NULL;
    if (lt_plan_make(be, p, x)) {
        lt_plan_destroy(p);
        return NULL;
    }
    c->n_lt_plans++;
    return p;
}

/* 0 done, -1 failed (be->error set), 1 not taken (dtypes or alignment not given to cuBLASLt here, or no
 * algorithm for the shape): the caller runs the cuBLAS path. All operands share the 16-bit dtype dt. */
static int lt_gemm(sdt_backend *be, int dt, int bias_dt, bool trans_a, int64_t n, int64_t m, int64_t k, int c_mode,
                   const lt_call *x)
{
    if (!ctx_of(be)->cublaslt || (dt != SDT_BF16 && dt != SDT_F16)) return 1;
    if (n <= 0 || m <= 0 || k <= 0 || n > INT32_MAX || m > INT32_MAX || k > INT32_MAX) return 1;
    const void *ptrs[5] = {x->a, x->b, x->c, x->d, x->bias};
    struct lt_plan key = {};
    key.n = n, key.m = m, key.k = k, key.dt = dt, key.trans_a = trans_a, key.bias = x->bias != NULL;
    key.c_mode = c_mode, key.tuned = !be->deterministic, key.bias_dt = x->bias ? bias_dt : 0;
    key.align = common_alignment(ptrs, 5);
    if (key.align < 16) return 1;
    const struct lt_plan *p = lt_plan_for(be, &key, x);
    if (!p) return -1;
    if (!p->ok) return 1;
    if (x->bias)
        CUBLAS_TRY(
            be, cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &x->bias, sizeof x->bias));
    void *ws = p->workspace ? cuda_scratch(be, CUDA_CONV_WORKSPACE_SLOT, p->workspace) : NULL;
    if (p->workspace && !ws) return -1;
    CUBLAS_TRY(be, lt_run(be, p, &p->algo, p->workspace, ws, x, x->d));
    return 0;
}

/* out [M, OC] = x [M, C] w [OC, C]^T (+ b) (+ residual), all in one 16-bit dtype but the bias, which may be f32
 * (a hypernetwork's, kept in f32 by its optimizer) */
static int lt_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w, const sdt_tensor *b,
                      const sdt_tensor *residual)
{
    const int dt = x->dtype;
    if (w->dtype != dt || out->dtype != dt || (b && b->dtype != dt && b->dtype != SDT_F32) ||
        (residual && residual->dtype != dt))
        return 1;
    const int64_t K = x->shape[x->ndim - 1], N = w->shape[0], M = K ? sdt_tensor_numel(x) / K : 0;
    lt_call c = {w->data, x->data, residual ? residual->data : NULL, b ? b->data : NULL, out->data};
    return lt_gemm(be, dt, b ? b->dtype : 0, true, N, M, K, residual ? LT_C_SEPARATE : LT_C_NONE, &c);
}

/* dx [M, C] = (or +=, accumulate) dout [M, OC] w [OC, C], all in one 16-bit dtype */
static int lt_input_grad(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *w, bool accumulate)
{
    const int dt = dout->dtype;
    if (w->dtype != dt || dx->dtype != dt) return 1;
    const int64_t C = dx->shape[dx->ndim - 1], OC = w->shape[0], M = C ? sdt_tensor_numel(dx) / C : 0;
    lt_call c = {w->data, dout->data, NULL, NULL, dx->data};
    return lt_gemm(be, dt, 0, false, C, M, OC, accumulate ? LT_C_IN_PLACE : LT_C_NONE, &c);
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
    if (gemm_ex(be, false, true, (int)M, (int)OC, (int)C, 1.0f, xp, dt, (int)C, wp, dt, (int)C, 0.0f, op, odt, (int)OC))
        return -1;
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
    int lt = dx ? lt_input_grad(be, dx, dout, w, true) : 0;
    if (lt < 0) return -1;
    if (lt > 0) { /* dx [M, C] += dout [M, OC] w [OC, C] */
        const void *dp, *wp;
        int dt;
        if (gemm_operands(be, dout, w, &dp, &wp, &dt)) return -1;
        if (dx->dtype == dt || dx->dtype == SDT_F32) {
            if (gemm_ex(be, false, false, (int)M, (int)C, (int)OC, 1.0f, dp, dt, (int)OC, wp, dt, (int)C, 1.0f,
                        dx->data, dx->dtype, (int)C))
                return -1;
        } else {
            const float *d32 = cuda_read_f32(be, dout, 0), *w32 = cuda_read_f32(be, w, 1);
            float *acc32 = accum_begin(be, dx, 3);
            if (!d32 || !w32 || !acc32) return -1;
            if (cuda_gemm_f32(be, false, false, (int)M, (int)C, (int)OC, 1.0f, d32, (int)OC, w32, (int)C, 1.0f, acc32,
                              (int)C) ||
                accum_end(be, dx, acc32))
                return -1;
        }
    }
    if (dw && dout->dtype == x->dtype && dout->dtype != SDT_F32 && (dw->dtype == SDT_F32 || dw->dtype == x->dtype)) {
        /* 16-bit operands straight into the (f32) gradient: tensor cores, f32 accumulation */
        if (gemm_ex(be, true, false, (int)OC, (int)C, (int)M, 1.0f, dout->data, dout->dtype, (int)OC, x->data, x->dtype,
                    (int)C, 1.0f, dw->data, dw->dtype, (int)C))
            return -1;
    } else if (dw) { /* dw [OC, C] += dout^T [OC, M] x [M, C], accumulated in f32 */
        const float *d32 = cuda_read_f32(be, dout, 0), *x32 = cuda_read_f32(be, x, 1);
        float *acc32 = accum_begin(be, dw, 3);
        if (!d32 || !x32 || !acc32) return -1;
        if (cuda_gemm_f32(be, true, false, (int)OC, (int)C, (int)M, 1.0f, d32, (int)OC, x32, (int)C, 1.0f, acc32,
                          (int)C) ||
            accum_end(be, dw, acc32))
            return -1;
    }
    if (db) {
        if (column_sums<1>(be, db->data, db->dtype, NULL, 0, bias_grad_value{dout->data, dout->dtype, OC}, M, OC))
            return -1;
    }
    return 0;
}

/* dx = dout w with beta 0: no zeroing pass and no read of dx. Mixed dtypes take the accumulating
 * path on a zeroed dx (the same values). */
int cuda_linear_input_grad(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *w)
{
    int64_t C = dx->shape[dx->ndim - 1], OC = w->shape[0], M = sdt_tensor_numel(dx) / C;
    int lt = lt_input_grad(be, dx, dout, w, false);
    if (lt <= 0) return lt;
    if (dout->dtype == w->dtype && (dx->dtype == dout->dtype || dx->dtype == SDT_F32))
        return gemm_ex(be, false, false, (int)M, (int)C, (int)OC, 1.0f, dout->data, dout->dtype, (int)OC, w->data,
                       w->dtype, (int)C, 0.0f, dx->data, dx->dtype, (int)C);
    sdt_tensor x_shape = *dx;
    x_shape.data = NULL;
    if (cuda_zero(be, dx)) return -1;
    return cuda_linear_backward(be, dx, NULL, NULL, dout, &x_shape, w);
}
