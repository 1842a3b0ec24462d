/* backend_cuda.cu - the CUDA backend: context, memory, tensor utilities, GEMM
 * helpers and the dispatch table. Built as the module libsdtrain_cuda.so, which
 * the plugin opens at run time, so hosts without CUDA never load it. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda.h"
#include "cuda_ops.h"

int cuda_fail(sdt_backend *be, sdt_error_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sdt_failv(&be->error, code, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---------------------------------------------------------------- memory */

void *cuda_alloc(sdt_backend *be, size_t bytes)
{
    if (cuda_capture_refuses(be, "an allocation")) return NULL;
    void *p = NULL;
    cudaError_t e = cuda_device_malloc(ctx_of(be), &p, bytes);
    if (e != cudaSuccess) {
        cuda_fail(
            be, cuda_error_code(e),
            "cannot allocate %zu MiB on the GPU (%s); lower the batch size or resolution, or enable gradient checkpointing",
            bytes >> 20, cudaGetErrorString(e));
        return NULL;
    }
    return p;
}

void cuda_free(sdt_backend *be, void *ptr)
{
    if (ptr) cuda_capture_refuses(be, "freeing device memory"); /* the graph would keep its address: spoil it */
    cuda_device_free(ctx_of(be), ptr);
}

int cuda_upload(sdt_backend *be, void *dst, const void *src, size_t bytes)
{
    if (cuda_capture_refuses(be, "an upload")) return -1;
    CUDA_TRY(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx_of(be)->stream));
    CUDA_TRY(be, cudaStreamSynchronize(ctx_of(be)->stream));
    return 0;
}

int cuda_download(sdt_backend *be, void *dst, const void *src, size_t bytes)
{
    if (cuda_capture_refuses(be, "a read-back")) return -1;
    CUDA_TRY(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx_of(be)->stream));
    CUDA_TRY(be, cudaStreamSynchronize(ctx_of(be)->stream));
    return 0;
}

int cuda_zero(sdt_backend *be, sdt_tensor *t)
{
    CUDA_TRY(be, cudaMemsetAsync(t->data, 0, sdt_tensor_nbytes(t), ctx_of(be)->stream));
    return 0;
}

int cuda_synchronize(sdt_backend *be)
{
    if (cuda_capture_refuses(be, "a synchronisation")) return -1;
    CUDA_TRY(be, cudaStreamSynchronize(ctx_of(be)->stream));
    return 0;
}

void cuda_destroy(sdt_backend *be)
{
    if (!be) return;
    cuda_ctx *c = ctx_of(be);
    if (c) {
        cuda_step_graph_free(c); /* ends a capture left running, so the stream can be waited on */
        cudaStreamSynchronize(c->stream);
        for (int i = 0; i < SDT_CUDA_SCRATCH_SLOTS; i++) cuda_device_free(c, c->scratch[i]);
        cuda_device_free(c, c->reduce);
        cuda_device_free(c, c->reduce_d);
        cuda_device_free(c, c->flag);
        cuda_device_memory_release(c);
        cuda_conv_plans_free(c); /* before the handle they were made with */
        cuda_sdpa_plans_free(c);
        cuda_lt_plans_free(c);
        if (c->cudnn) cudnnDestroy(c->cudnn);
        if (c->cublaslt) cublasLtDestroy(c->cublaslt);
        if (c->cublas) cublasDestroy(c->cublas);
        cuda_device_free(c, c->cublas_workspace); /* after the handle that used it */
        if (c->stream) cudaStreamDestroy(c->stream);
        free(c);
    }
    free(be);
}

void cuda_release_scratch(sdt_backend *be)
{
    cuda_ctx *c = ctx_of(be);
    if (cuda_capture_refuses(be, "releasing scratch")) return;
    cudaStreamSynchronize(c->stream); /* queued ops may still read them */
    for (int i = 0; i < SDT_CUDA_SCRATCH_SLOTS; i++) {
        cuda_device_free(c, c->scratch[i]);
        c->scratch[i] = NULL;
        c->scratch_size[i] = 0;
    }
}

void *cuda_scratch(sdt_backend *be, int slot, size_t bytes)
{
    cuda_ctx *c = ctx_of(be);
    if (c->scratch_size[slot] >= bytes) return c->scratch[slot];
    /* a captured step keeps its scratch addresses: growing one would free what the graph reads */
    if (cuda_capture_refuses(be, "growing a scratch buffer")) return NULL;
    cudaStreamSynchronize(c->stream);
    cuda_device_free(c, c->scratch[slot]);
    c->scratch[slot] = NULL;
    c->scratch_size[slot] = 0;
    size_t want = bytes + bytes / 4; /* headroom: shapes grow a little across blocks */
    if (cuda_device_malloc(c, &c->scratch[slot], want) != cudaSuccess) {
        cuda_fail(be, SDT_ERR_OUT_OF_MEMORY,
                  "cannot allocate %zu MiB of GPU scratch; lower the batch size or resolution", want >> 20);
        return NULL;
    }
    c->scratch_size[slot] = want;
    return c->scratch[slot];
}

/* ------------------------------------------------------ tensor utilities */

__global__ void convert_kernel(void *dst, int dt, const void *src, int sdt, int64_t n)
{
    GRID_STRIDE(i, n) st(dst, dt, i, ld(src, sdt, i));
}

int cuda_convert_raw(sdt_backend *be, void *dst, int dst_dtype, const void *src, int src_dtype, int64_t n)
{
    if (n == 0) return 0;
    if (dst_dtype == src_dtype) {
        CUDA_TRY(be, cudaMemcpyAsync(dst, src, (size_t)n * sdt_dtype_size((sdt_dtype)src_dtype),
                                     cudaMemcpyDeviceToDevice, ctx_of(be)->stream));
        return 0;
    }
    convert_kernel<<<grid_for(n, 256), 256, 0, ctx_of(be)->stream>>>(dst, dst_dtype, src, src_dtype, n);
    CUDA_LAUNCHED(be);
    return 0;
}

const float *cuda_read_f32(sdt_backend *be, const sdt_tensor *t, int slot)
{
    if (!t) return NULL;
    if (t->dtype == SDT_F32) return (const float *)t->data;
    int64_t n = sdt_tensor_numel(t);
    float *buf = (float *)cuda_scratch(be, slot, (size_t)n * sizeof(float));
    if (!buf || cuda_convert_raw(be, buf, SDT_F32, t->data, t->dtype, n)) return NULL;
    return buf;
}

int cuda_convert(sdt_backend *be, sdt_tensor *dst, const sdt_tensor *src)
{
    return cuda_convert_raw(be, dst->data, dst->dtype, src->data, src->dtype, sdt_tensor_numel(src));
}

__global__ void axpy_kernel(void *dst, int dt, float alpha, const void *src, int sdt, int64_t n)
{
    GRID_STRIDE(i, n) st(dst, dt, i, ld(dst, dt, i) + alpha * ld(src, sdt, i));
}

int cuda_axpy(sdt_backend *be, sdt_tensor *dst, float alpha, const sdt_tensor *src)
{
    int64_t n = sdt_tensor_numel(dst);
    axpy_kernel<<<grid_for(n, 256), 256, 0, ctx_of(be)->stream>>>(dst->data, dst->dtype, alpha, src->data, src->dtype,
                                                                  n);
    CUDA_LAUNCHED(be);
    return 0;
}

__global__ void scale_kernel(void *x, int dt, float alpha, int64_t n)
{
    GRID_STRIDE(i, n) st(x, dt, i, ld(x, dt, i) * alpha);
}

int cuda_scale(sdt_backend *be, sdt_tensor *x, float alpha)
{
    int64_t n = sdt_tensor_numel(x);
    scale_kernel<<<grid_for(n, 256), 256, 0, ctx_of(be)->stream>>>(x->data, x->dtype, alpha, n);
    CUDA_LAUNCHED(be);
    return 0;
}

/* out[b, j, i] (op)= x[b, i, j]; x is [B, M, N]. A 32 x 32 tile goes through shared memory so
 * that both the reads (along j) and the writes (along i) are coalesced; the padded row keeps
 * the column reads free of bank conflicts. Grid: (N tiles, M tiles, B). */
#define TRANSPOSE_TILE 32
#define TRANSPOSE_ROWS 8
template <typename TI, typename TO>
__global__ void transpose_kernel(TO *out, const TI *x, int64_t M, int64_t N, int accumulate)
{
    __shared__ float tile[TRANSPOSE_TILE][TRANSPOSE_TILE + 1];
    const TI *xb = x + (int64_t)blockIdx.z * M * N;
    TO *ob = out + (int64_t)blockIdx.z * M * N;
    int64_t j = (int64_t)blockIdx.x * TRANSPOSE_TILE + threadIdx.x;
    for (int r = threadIdx.y; r < TRANSPOSE_TILE; r += TRANSPOSE_ROWS) {
        int64_t i = (int64_t)blockIdx.y * TRANSPOSE_TILE + r;
        if (i < M && j < N) tile[r][threadIdx.x] = to_f32(xb[i * N + j]);
    }
    __syncthreads();
    int64_t i = (int64_t)blockIdx.y * TRANSPOSE_TILE + threadIdx.x;
    for (int r = threadIdx.y; r < TRANSPOSE_TILE; r += TRANSPOSE_ROWS) {
        int64_t jj = (int64_t)blockIdx.x * TRANSPOSE_TILE + r;
        if (i < M && jj < N) {
            float v = tile[threadIdx.x][r];
            if (accumulate) v += to_f32(ob[jj * M + i]);
            ob[jj * M + i] = from_f32<TO>(v);
        }
    }
}

int cuda_transpose_raw(sdt_backend *be, void *out, int odt, const void *x, int xdt, int64_t B, int64_t M, int64_t N,
                       int accumulate)
{
    if (B * M * N == 0) return 0;
    if (B > 65535)
        return cuda_fail(be, SDT_ERR_INVALID_ARGUMENT, "transpose: %lld matrices exceed one launch", (long long)B);
    dim3 grid((unsigned)((N + TRANSPOSE_TILE - 1) / TRANSPOSE_TILE),
              (unsigned)((M + TRANSPOSE_TILE - 1) / TRANSPOSE_TILE), (unsigned)B);
    dim3 block(TRANSPOSE_TILE, TRANSPOSE_ROWS);
    SDT_DTYPE_SWITCH(xdt, TI,
                     SDT_DTYPE_SWITCH(odt, TO,
                                      transpose_kernel<TI, TO><<<grid, block, 0, ctx_of(be)->stream>>>(
                                          (TO *)out, (const TI *)x, M, N, accumulate)));
    CUDA_LAUNCHED(be);
    return 0;
}

static void last2(const sdt_tensor *t, int64_t *B, int64_t *M, int64_t *N)
{
    *M = t->shape[t->ndim - 2];
    *N = t->shape[t->ndim - 1];
    *B = sdt_tensor_numel(t) / (*M * *N);
}

int cuda_transpose_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x)
{
    int64_t B, M, N;
    last2(x, &B, &M, &N);
    return cuda_transpose_raw(be, out->data, out->dtype, x->data, x->dtype, B, M, N, 0);
}

int cuda_transpose_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout)
{
    int64_t B, M, N;
    last2(dout, &B, &M, &N);
    return cuda_transpose_raw(be, dx->data, dx->dtype, dout->data, dout->dtype, B, M, N, 1);
}

__global__ void count_nonfinite_kernel(const void *x, int dt, int64_t n, unsigned long long *count)
{
    unsigned long long local = 0;
    GRID_STRIDE(i, n) local += !isfinite(ld(x, dt, i));
    if (local) atomicAdd(count, local);
}

int cuda_count_nonfinite(sdt_backend *be, const sdt_tensor *x, int64_t *count)
{
    cuda_ctx *c = ctx_of(be);
    unsigned long long *d = (unsigned long long *)c->reduce_d, h = 0;
    CUDA_TRY(be, cudaMemsetAsync(d, 0, sizeof(*d), c->stream));
    int64_t n = sdt_tensor_numel(x);
    count_nonfinite_kernel<<<grid_for(n, 256), 256, 0, c->stream>>>(x->data, x->dtype, n, d);
    CUDA_LAUNCHED(be);
    if (cuda_download(be, &h, d, sizeof(h))) return -1;
    *count = (int64_t)h;
    return 0;
}

/* ------------------------------------------------------------------ GEMM */

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap operands. */
int cuda_gemm_f32(sdt_backend *be, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    CUBLAS_TRY(be, cublasSgemm(ctx_of(be)->cublas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                               trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc));
    return 0;
}

int cuda_gemm_f32_batched(sdt_backend *be, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                          int lda, long long sa, const float *B, int ldb, long long sb, float beta, float *C, int ldc,
                          long long sc, int batch)
{
    CUBLAS_TRY(be, cublasSgemmStridedBatched(ctx_of(be)->cublas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                             trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, ldb, sb, A, lda,
                                             sa, &beta, C, ldc, sc, batch));
    return 0;
}

/* ----------------------------------------------------------------- table */

static void fill_table(sdt_backend *be)
{
    be->alloc = cuda_alloc;
    be->free = cuda_free;
    be->destroy = cuda_destroy;
    be->release_scratch = cuda_release_scratch;
    be->capture_begin = cuda_capture_begin;
    be->capture_end = cuda_capture_end;
    be->replay = cuda_replay;
    be->drop_capture = cuda_drop_capture;
    sdt_backend_ops cuda_ops;
#define SDT_CUDA_OP_ENTRY(name, params, args) cuda_ops.name = cuda_##name;
    SDT_BACKEND_OPS(SDT_CUDA_OP_ENTRY)
#undef SDT_CUDA_OP_ENTRY
    sdt_backend_set_ops(be, &cuda_ops);
}

#ifndef SDT_CUDA_ARCHS
#define SDT_CUDA_ARCHS "an unrecorded list"
#endif

/* Launched never: cudaFuncGetAttributes on it says whether the module holds code this device runs
 * (its machine code, or PTX the driver compiles for it). Every kernel is built for the same list. */
__global__ void capability_probe_kernel(int *flag)
{
    if (flag) *flag = 1;
}

/* Refuses a device the module has no code for, before anything is created on it. */
static bool check_device_code(int device, char *err, size_t err_size)
{
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess || cudaSetDevice(device) != cudaSuccess) {
        cudaGetLastError();
        snprintf(err, err_size, "CUDA device %d cannot be queried; training runs on the CPU instead", device);
        return false;
    }
    cudaFuncAttributes attr;
    cudaError_t e = cudaFuncGetAttributes(&attr, capability_probe_kernel);
    if (e == cudaSuccess) return true;
    cudaGetLastError(); /* a non-sticky error: clear it so the next CUDA call starts clean */
    snprintf(err, err_size,
             "the CUDA module has no code for this GPU (%s, compute capability %d.%d; the module was "
             "built for CUDA architectures %s: %s); rebuild sdtrain with -DCMAKE_CUDA_ARCHITECTURES=%d%d, or with a "
             "PTX architecture (for example 90 rather than 90-real) that newer cards compile",
             prop.name, prop.major, prop.minor, SDT_CUDA_ARCHS, cudaGetErrorString(e), prop.major, prop.minor);
    return false;
}

/* cuBLAS's workspace owned by the backend, for its life: a captured step records the workspace's
 * address, so it must not be one cuBLAS could allocate during a capture or move. The size is what
 * cuBLAS itself recommends: 32 MiB on Hopper and later, 4 MiB before. */
static bool cublas_own_workspace(cuda_ctx *c)
{
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, c->device) != cudaSuccess) return false;
    size_t bytes = (size_t)(prop.major >= 9 ? 32 : 4) << 20;
    if (cuda_device_malloc(c, &c->cublas_workspace, bytes) != cudaSuccess) return false;
    return cublasSetWorkspace(c->cublas, c->cublas_workspace, bytes) == CUBLAS_STATUS_SUCCESS;
}

extern "C" SDT_CUDA_EXPORT sdt_backend *sdt_backend_cuda_create(int device, char *err, size_t err_size)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        snprintf(err, err_size, "no CUDA device is usable (%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "no device found");
        return NULL;
    }
    if (device < 0 || device >= count) {
        snprintf(err, err_size, "CUDA device %d does not exist (this machine has %d); choose 0..%d", device, count,
                 count - 1);
        return NULL;
    }
    if (!check_device_code(device, err, err_size)) return NULL;
    sdt_backend *be = (sdt_backend *)calloc(1, sizeof(*be));
    cuda_ctx *c = (cuda_ctx *)calloc(1, sizeof(*c));
    if (!be || !c) {
        free(be);
        free(c);
        snprintf(err, err_size, "out of host memory creating the CUDA backend");
        return NULL;
    }
    be->name = "cuda";
    be->device = SDT_DEVICE_CUDA;
    be->ctx = c;
    c->device = device;
    fill_table(be);
    const char *what = NULL;
    if (cudaSetDevice(device) != cudaSuccess ||
        cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking) != cudaSuccess)
        what = "a CUDA stream";
    else if (cublasCreate(&c->cublas) != CUBLAS_STATUS_SUCCESS ||
             cublasSetStream(c->cublas, c->stream) != CUBLAS_STATUS_SUCCESS)
        what = "a cuBLAS handle";
    else if (!cublas_own_workspace(c))
        what = "cuBLAS's workspace";
    else if (cublasLtCreate(&c->cublaslt) != CUBLAS_STATUS_SUCCESS)
        what = "a cuBLASLt handle";
    else if (cudnnCreate(&c->cudnn) != CUDNN_STATUS_SUCCESS ||
             cudnnSetStream(c->cudnn, c->stream) != CUDNN_STATUS_SUCCESS)
        what = "a cuDNN handle (is libcudnn.so.9 installed?)";
    else if (cuda_device_malloc(c, (void **)&c->reduce, 64 * sizeof(float)) != cudaSuccess ||
             cuda_device_malloc(c, (void **)&c->reduce_d, 64 * sizeof(double)) != cudaSuccess ||
             cuda_device_malloc(c, (void **)&c->flag, 64 * sizeof(int)) != cudaSuccess)
        what = "reduction buffers";
    if (what) {
        snprintf(err, err_size, "cannot create %s on CUDA device %d", what, device);
        cuda_destroy(be);
        return NULL;
    }
    cudaDeviceProp prop;
    be->native_bf16 = cudaGetDeviceProperties(&prop, device) == cudaSuccess && prop.major >= 8;
    be->deterministic = true; /* until the job says otherwise (ops.h) */
    c->attention_tc = be->native_bf16 && cuda_attention_tc_available(prop.major);
    be->prefers_channels_last =
        true; /* cuDNN runs the UNet's 3x3 convolutions 1.5-2x faster in NHWC (bench/NOTES.md run 23) */
    /* Exact fp32 GEMMs by default: parity with the CPU reference matters more than TF32 speed here. */
    cublasSetMathMode(c->cublas, CUBLAS_DEFAULT_MATH);
    return be;
}

/* The driver's current context of the calling thread, through libcuda.so.1 as already loaded (the
 * runtime loads it): cudaGetDevice says 0 for a thread without any context, and putting device 0
 * back there would create a context the host never made. */
typedef int (*ctx_get_fn)(void **ctx);
typedef int (*ctx_set_fn)(void *ctx);
static void *driver_symbol(const char *name)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *symbol = lib ? dlsym(lib, name) : NULL;
    if (lib) dlclose(lib); /* still loaded: the runtime holds it */
    return symbol;
}

extern "C" SDT_CUDA_EXPORT int sdt_cuda_thread_device(int device)
{
    ctx_get_fn get_current = (ctx_get_fn)driver_symbol("cuCtxGetCurrent");
    void *ctx = NULL;
    bool has_context = !get_current || (get_current(&ctx) == 0 && ctx != NULL);
    int current = -1;
    if (has_context && cudaGetDevice(&current) != cudaSuccess) {
        cudaGetLastError();
        current = -1;
    }
    if (device >= 0 && device != current) {
        if (cudaSetDevice(device) != cudaSuccess) cudaGetLastError();
    } else if (device == -1 && has_context && get_current) {
        ctx_set_fn set_current = (ctx_set_fn)driver_symbol("cuCtxSetCurrent");
        if (set_current) set_current(NULL); /* back to no context, as the thread had */
    }
    return current;
}
