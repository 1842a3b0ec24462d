/* cuda_common.cuh - what every CUDA op file shares: the backend context, error
 * handling that returns a status (never exits), dtype-generic loads and stores,
 * scratch buffers and launch helpers. Internal to kernels/cuda. */
#ifndef SDT_KERNELS_CUDA_COMMON_CUH
#define SDT_KERNELS_CUDA_COMMON_CUH

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdio.h>
#include <string.h>

#include "../ops.h"

#define SDT_CUDA_SCRATCH_SLOTS                                                                                         \
    12 /* 0-5 operands and staging, 6 column sums, 7 groupnorm, 8-9 16-bit attention operands, last: reductions */

/* Sizes of the live cudaMalloc blocks, by pointer (device_memory.cu). */
typedef struct cuda_alloc_table {
    void **keys;
    size_t *sizes;
    size_t cap, count;
} cuda_alloc_table;

typedef struct cuda_ctx {
    int device;
    cudaStream_t stream;
    cublasHandle_t cublas;
    cublasLtHandle_t cublaslt; /* linear.cu's forward with its bias in the GEMM's epilogue */
    cudnnHandle_t cudnn;
    void *scratch[SDT_CUDA_SCRATCH_SLOTS];
    size_t scratch_size[SDT_CUDA_SCRATCH_SLOTS];
    float *reduce; /* small device buffer for reductions */
    double *reduce_d;
    int *flag;
    struct conv_plan *conv_plans; /* conv2d.cu: cuDNN execution plans by shape, grown on demand */
    int n_conv_plans, cap_conv_plans;
    struct sdpa_plan
        *sdpa_plans; /* attention_cudnn.cu: cuDNN fused-attention plans by shape (or none), grown on demand */
    int n_sdpa_plans, cap_sdpa_plans;
    struct lt_plan *lt_plans; /* linear.cu: cuBLASLt plans by shape (or none), grown on demand */
    int n_lt_plans, cap_lt_plans;
    bool attention_tc;                            /* attention.cu's tensor-core kernels have sm_80+ code on this card */
    cuda_alloc_table allocs;                      /* device_memory.cu */
    size_t allocated_bytes, peak_allocated_bytes; /* held by the backend now; most at once */
    void *cublas_workspace;  /* cuBLAS's own workspace, set once at create so a capture never allocates one */
    struct cuda_step_graph { /* step_graph.cu: the captured steps */
        cudaGraphExec_t exec[SDT_CAPTURE_SLOTS]; /* each slot's graph, NULL when none */
        bool capturing;                          /* between capture_begin and capture_end */
        bool spoiled;                            /* something during the capture needed the host */
    } graph;
} cuda_ctx;

static inline cuda_ctx *ctx_of(sdt_backend *be)
{
    return (cuda_ctx *)be->ctx;
}

/* Sets be->error to code and a formatted sentence and returns -1. The code is decided where the
 * failure happens: SDT_ERR_INVALID_ARGUMENT for a bad argument, SDT_ERR_OUT_OF_MEMORY for a failed
 * allocation, SDT_ERR_DEVICE for any other CUDA, cuBLAS or cuDNN failure (the *_code helpers). */
int cuda_fail(sdt_backend *be, sdt_error_code code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A failed runtime, cuBLAS or cuDNN call's code: out of (device or host) memory is
 * OUT_OF_MEMORY, so a host can tell "use a smaller batch" from a broken device. */
static inline sdt_error_code cuda_error_code(cudaError_t e)
{
    return e == cudaErrorMemoryAllocation ? SDT_ERR_OUT_OF_MEMORY : SDT_ERR_DEVICE;
}
static inline sdt_error_code cublas_error_code(cublasStatus_t s)
{
    return s == CUBLAS_STATUS_ALLOC_FAILED ? SDT_ERR_OUT_OF_MEMORY : SDT_ERR_DEVICE;
}
static inline sdt_error_code cudnn_error_code(cudnnStatus_t s)
{
    return s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
                   s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED
               ? SDT_ERR_OUT_OF_MEMORY
               : SDT_ERR_DEVICE;
}

#define CUDA_TRY(be, call)                                                                                             \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess)                                                                                         \
            return cuda_fail(be, cuda_error_code(e_), "CUDA error in %s: %s", #call, cudaGetErrorString(e_));          \
    } while (0)
#define CUBLAS_TRY(be, call)                                                                                           \
    do {                                                                                                               \
        cublasStatus_t s_ = (call);                                                                                    \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                                               \
            return cuda_fail(be, cublas_error_code(s_), "cuBLAS error %d in %s", (int)s_, #call);                      \
    } while (0)
#define CUDNN_TRY(be, call)                                                                                            \
    do {                                                                                                               \
        cudnnStatus_t s_ = (call);                                                                                     \
        if (s_ != CUDNN_STATUS_SUCCESS)                                                                                \
            return cuda_fail(be, cudnn_error_code(s_), "cuDNN error in %s: %s", #call, cudnnGetErrorString(s_));       \
    } while (0)
/* After a kernel launch: launch errors become a status. */
#define CUDA_LAUNCHED(be) CUDA_TRY(be, cudaGetLastError())

/* Dtype-generic element access: compute is always float. */
__device__ __forceinline__ float ld(const void *p, int dtype, int64_t i)
{
    switch (dtype) {
        case SDT_F16:
            return __half2float(((const __half *)p)[i]);
        case SDT_BF16:
            return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
        default:
            return ((const float *)p)[i];
    }
}
__device__ __forceinline__ void st(void *p, int dtype, int64_t i, float v)
{
    switch (dtype) {
        case SDT_F16:
            ((__half *)p)[i] = __float2half_rn(v);
            break;
        case SDT_BF16:
            ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
            break;
        default:
            ((float *)p)[i] = v;
            break;
    }
}
/* Typed element access, for kernels whose dtype is a template parameter (no switch per
 * element): SDT_DTYPE_SWITCH(dtype, T, ...) runs the body with T the storage type. */
__device__ __forceinline__ float to_f32(float v)
{
    return v;
}
__device__ __forceinline__ float to_f32(__half v)
{
    return __half2float(v);
}
__device__ __forceinline__ float to_f32(__nv_bfloat16 v)
{
    return __bfloat162float(v);
}
template <typename T> __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ float from_f32<float>(float v)
{
    return v;
}
template <> __device__ __forceinline__ __half from_f32<__half>(float v)
{
    return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}
#define SDT_DTYPE_SWITCH(dtype, T, ...)                                                                                \
    do {                                                                                                               \
        if ((dtype) == SDT_F16) {                                                                                      \
            typedef __half T;                                                                                          \
            __VA_ARGS__;                                                                                               \
        } else if ((dtype) == SDT_BF16) {                                                                              \
            typedef __nv_bfloat16 T;                                                                                   \
            __VA_ARGS__;                                                                                               \
        } else {                                                                                                       \
            typedef float T;                                                                                           \
            __VA_ARGS__;                                                                                               \
        }                                                                                                              \
    } while (0)

/* y[r, c, s] += bias[c] for y [R, C, S] (S = 1: a linear layer's rows; R = batch, S = spatial:
 * a convolution's channels). One launch per call, no division per element: blockIdx.y is
 * (r, c), blockIdx.x a span of s. */
int cuda_add_bias(sdt_backend *be, void *y, int ydt, const void *bias, int bdt, int64_t R, int64_t C, int64_t S);
/* dst[c] += sum over b < B and s < S of src[(b * C + c) * S + s] (add.cu): a bias's gradient
 * over [B, C, S] (a convolution's), or with B = 1 per-(batch, channel) sums. Deterministic. */
int cuda_channel_sums(sdt_backend *be, void *dst, int dst_dtype, const void *src, int src_dtype, int64_t B, int64_t C,
                      int64_t S);
/* The same for channels-last src [B, S, C] (tensor.h): dst[b * C + c] += sum over s < S of
 * src[(b * S + s) * C + c] (add.cu): per-(batch, channel) sums, or with B = 1 and S the batch's
 * pixels a convolution's bias gradient. Deterministic (column_sum.cuh). */
int cuda_channel_sums_nhwc(sdt_backend *be, void *dst, int dst_dtype, const void *src, int src_dtype, int64_t B,
                           int64_t C, int64_t S);

/* out[b, j, i] (+)= x[b, i, j] for x [B, M, N], any dtypes (backend_cuda.cu's tiled transpose). */
int cuda_transpose_raw(sdt_backend *be, void *out, int odt, const void *x, int xdt, int64_t B, int64_t M, int64_t N,
                       int accumulate);

/* Accumulating store: p[i] += v, rounded to p's dtype. */
__device__ __forceinline__ void acc(void *p, int dtype, int64_t i, float v)
{
    st(p, dtype, i, ld(p, dtype, i) + v);
}

static inline unsigned grid_for(int64_t n, int block)
{
    int64_t g = (n + block - 1) / block;
    return (unsigned)(g > 65535LL * 32 ? 65535LL * 32 : (g < 1 ? 1 : g));
}
/* A one-dimensional launch over n elements on the backend's stream: kernel LAUNCH(be, n)(args). */
#define STREAM(be) ctx_of(be)->stream
#define LAUNCH(be, n) <<<grid_for((n), 256), 256, 0, STREAM(be)>>>
#define GRID_STRIDE(i, n)                                                                                              \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* cudaMalloc / cudaFree that keep the backend's count of held bytes (device_memory.cu). */
cudaError_t cuda_device_malloc(cuda_ctx *c, void **p, size_t bytes);
void cuda_device_free(cuda_ctx *c, void *p);
void cuda_device_memory_release(cuda_ctx *c);
/* Destroy conv2d.cu's and attention_cudnn.cu's cached cuDNN execution plans (before the cuDNN handle goes). */
void cuda_conv_plans_free(cuda_ctx *c);
void cuda_sdpa_plans_free(cuda_ctx *c);
/* Destroy linear.cu's cached cuBLASLt plans (before the cuBLASLt handle goes). */
void cuda_lt_plans_free(cuda_ctx *c);
/* cuDNN's convolution and attention workspace, and cuBLASLt's (memory_stats reports it apart from the other slots). */
#define CUDA_CONV_WORKSPACE_SLOT 6
/* attention's backward: its dK/dV partial sums (attention.cu) or cuDNN's fp32 dQ accumulator and row sums (attention_cudnn.cu) */
#define CUDA_ATTENTION_SCRATCH_SLOT 10
/* While a step is being captured (step_graph.cu): true, the capture is marked spoiled and be->error says
 * that `what` cannot be recorded; the caller fails its op. False when no capture is running. */
bool cuda_capture_refuses(sdt_backend *be, const char *what);
/* Frees every kept graph: device memory one may read is being freed (cuda_device_free). */
void cuda_step_graph_forget(cuda_ctx *c);
/* Ends any capture and frees the kept graphs (cuda_destroy). */
void cuda_step_graph_free(cuda_ctx *c);
int cuda_capture_begin(sdt_backend *be);
int cuda_capture_end(sdt_backend *be, int slot, bool *captured);
int cuda_replay(sdt_backend *be, int slot);
void cuda_drop_capture(sdt_backend *be, int slot);
/* A device scratch buffer of at least bytes in the given slot (grown on demand). */
void *cuda_scratch(sdt_backend *be, int slot, size_t bytes);
/* A float32 view of t: t's data when f32, else converted into scratch slot. */
const float *cuda_read_f32(sdt_backend *be, const sdt_tensor *t, int slot);
/* Converts n elements between dtypes on the device. */
int cuda_convert_raw(sdt_backend *be, void *dst, int dst_dtype, const void *src, int src_dtype, int64_t n);
/* Row-major C[M,N] = alpha * op(A) op(B) + beta * C, f32 data, lda/ldb/ldc are row lengths. */
int cuda_gemm_f32(sdt_backend *be, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc);
/* Strided-batched version: batch i uses A + i*sa, B + i*sb, C + i*sc. */
int cuda_gemm_f32_batched(sdt_backend *be, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                          int lda, long long sa, const float *B, int ldb, long long sb, float beta, float *C, int ldc,
                          long long sc, int batch);

#endif
