/* linear.cu - linear on the GPU through cuBLAS. GEMMs run in the tensors' own
 * 16-bit dtype with fp32 accumulation when the dtypes agree (dw too: 16-bit dout
 * and x into an f32 gradient), and through fp32 copies otherwise. (Attention has its own fused kernels: attention.cu.)
 * Semantics: kernels/ops.h. */
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

int cuda_linear_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w, const sdt_tensor *b)
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
