/* conv_cudnn.cu - which cuDNN path runs the UNet's convolutions fastest on this GPU.
 *
 * For the UNet's convolution shapes (SD 1.5 at 512x512, SDXL at 1024x1024) and the two directions a
 * frozen UNet needs (forward and the input gradient), times:
 *   legacy  - the legacy API with its v7 heuristics (what kernels/cuda/conv2d.cu uses), NCHW and NHWC;
 *   graph   - the graph (backend) API, heuristics mode A's first plan that finalizes, NCHW and NHWC;
 *   best    - the fastest of heuristics mode A's first N plans (what a one-time autotune would pick).
 * bf16 data in [-1, 1) from a fixed hash (zeros flatter tensor cores), fp32 accumulation. Prints a table
 * and writes JSON (argv[1], default conv_cudnn.json). A benchmark, not a test: no value is checked. */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cudnn.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cuda_bench/cuda_check.h"

enum { FWD = 0, BWD_DATA = 1 };
enum { NCHW = 0, NHWC = 1 };

typedef struct shape {
    const char *name;
    int n, c, k, h, r; /* output channels k, kernel r x r, stride 1, pad r/2 */
} shape;

static cudnnHandle_t g_dnn;
static cudaStream_t g_stream;
static void *g_ws;
static size_t g_ws_size = (size_t)1 << 30;

/* Uniform values in [-1, 1) from a hash of the index. */
__global__ void fill_random(__nv_bfloat16 *p, size_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
        p[i] = __float2bfloat16((float)(h >> 8) / 8388608.0f - 1.0f);
    }
}

static double flops(const shape *s)
{
    return 2.0 * s->n * s->h * s->h * (double)s->k * s->c * s->r * s->r;
}

/* Times fn over reps launches after 3 warm-ups; ms per launch. */
typedef int (*run_fn)(void *);
static float time_ms(run_fn fn, void *ctx, int reps)
{
    for (int i = 0; i < 3; i++)
        if (fn(ctx)) return -1;
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaEventRecord(a, g_stream));
    for (int i = 0; i < reps; i++)
        if (fn(ctx)) return -1;
    CK(cudaEventRecord(b, g_stream));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms / reps;
}

/* ---- legacy API ---- */
typedef struct legacy_ctx {
    int dir;
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    int algo;
    size_t ws;
    void *px, *pw, *py;
} legacy_ctx;

static int legacy_run(void *p)
{
    legacy_ctx *c = (legacy_ctx *)p;
    float one = 1, zero = 0;
    cudnnStatus_t s;
    if (c->dir == FWD)
        s = cudnnConvolutionForward(g_dnn, &one, c->x, c->px, c->w, c->pw, c->conv, (cudnnConvolutionFwdAlgo_t)c->algo,
                                    g_ws, c->ws, &zero, c->y, c->py);
    else
        s = cudnnConvolutionBackwardData(g_dnn, &one, c->w, c->pw, c->y, c->py, c->conv,
                                         (cudnnConvolutionBwdDataAlgo_t)c->algo, g_ws, c->ws, &zero, c->x, c->px);
    return s != CUDNN_STATUS_SUCCESS;
}

static float time_legacy(const shape *s, int dir, int layout, void *px, void *pw, void *py)
{
    legacy_ctx c;
    memset(&c, 0, sizeof c);
    c.dir = dir;
    c.px = px, c.pw = pw, c.py = py;
    cudnnTensorFormat_t f = layout == NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    DK(cudnnCreateTensorDescriptor(&c.x));
    DK(cudnnCreateTensorDescriptor(&c.y));
    DK(cudnnCreateFilterDescriptor(&c.w));
    DK(cudnnCreateConvolutionDescriptor(&c.conv));
    DK(cudnnSetTensor4dDescriptor(c.x, f, CUDNN_DATA_BFLOAT16, s->n, s->c, s->h, s->h));
    DK(cudnnSetTensor4dDescriptor(c.y, f, CUDNN_DATA_BFLOAT16, s->n, s->k, s->h, s->h));
    DK(cudnnSetFilter4dDescriptor(c.w, CUDNN_DATA_BFLOAT16, f, s->k, s->c, s->r, s->r));
    DK(cudnnSetConvolution2dDescriptor(c.conv, s->r / 2, s->r / 2, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                       CUDNN_DATA_FLOAT));
    DK(cudnnSetConvolutionMathType(c.conv, CUDNN_TENSOR_OP_MATH));
    int found = 0;
    if (dir == FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[8];
        DK(cudnnGetConvolutionForwardAlgorithm_v7(g_dnn, c.x, c.w, c.conv, c.y, 8, &found, perf));
        c.algo = perf[0].algo;
        DK(cudnnGetConvolutionForwardWorkspaceSize(g_dnn, c.x, c.w, c.conv, c.y, perf[0].algo, &c.ws));
    } else {
        cudnnConvolutionBwdDataAlgoPerf_t perf[8];
        DK(cudnnGetConvolutionBackwardDataAlgorithm_v7(g_dnn, c.w, c.y, c.conv, c.x, 8, &found, perf));
        c.algo = perf[0].algo;
        DK(cudnnGetConvolutionBackwardDataWorkspaceSize(g_dnn, c.w, c.y, c.conv, c.x, perf[0].algo, &c.ws));
    }
    float ms = c.ws <= g_ws_size ? time_ms(legacy_run, &c, 20) : -1;
    cudnnDestroyTensorDescriptor(c.x);
    cudnnDestroyTensorDescriptor(c.y);
    cudnnDestroyFilterDescriptor(c.w);
    cudnnDestroyConvolutionDescriptor(c.conv);
    return ms;
}

/* ---- graph API ---- */
typedef cudnnBackendDescriptor_t bdesc;

static bdesc make_tensor(int64_t uid, int64_t n, int64_t c, int64_t h, int64_t w, int layout)
{
    bdesc t;
    DK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &t));
    int64_t dims[4] = {n, c, h, w};
    int64_t strides[4];
    if (layout == NHWC) {
        strides[0] = h * w * c, strides[1] = 1, strides[2] = w * c, strides[3] = c;
    } else {
        strides[0] = c * h * w, strides[1] = h * w, strides[2] = w, strides[3] = 1;
    }
    cudnnDataType_t dt = CUDNN_DATA_BFLOAT16;
    int64_t align = 16;
    DK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt));
    DK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims));
    DK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides));
    DK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
    DK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
    DK(cudnnBackendFinalize(t));
    return t;
}

typedef struct graph_ctx {
    bdesc plan, pack;
} graph_ctx;

static int graph_run(void *p)
{
    graph_ctx *c = (graph_ctx *)p;
    return cudnnBackendExecute(g_dnn, c->plan, c->pack) != CUDNN_STATUS_SUCCESS;
}

/* Heuristics mode A for one convolution; times the first `tries` plans that finalize.
 * *first gets the first finalizable plan's time, the return value the best. */
static float time_graph(const shape *s, int dir, int layout, void *px, void *pw, void *py, int tries, float *first,
                        int *n_plans)
{
    bdesc x = make_tensor('x', s->n, s->c, s->h, s->h, layout);
    bdesc w = make_tensor('w', s->k, s->c, s->r, s->r, layout);
    bdesc y = make_tensor('y', s->n, s->k, s->h, s->h, layout);
    bdesc conv;
    DK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &conv));
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    int64_t nd = 2, one2[2] = {1, 1}, pad[2] = {s->r / 2, s->r / 2};
    DK(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp));
    DK(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
    DK(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &nd));
    DK(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, one2));
    DK(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, one2));
    DK(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad));
    DK(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad));
    DK(cudnnBackendFinalize(conv));

    bdesc op;
    float alpha = 1, beta = 0;
    if (dir == FWD) {
        DK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, &op));
        DK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                    &x));
        DK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                    &w));
        DK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                    &y));
        DK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                                    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv));
        DK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha));
        DK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta));
    } else {
        DK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR, &op));
        DK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                    &x));
        DK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                    &w));
        DK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                    &y));
        DK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
                                    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv));
        DK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha));
        DK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, CUDNN_TYPE_FLOAT, 1, &beta));
    }
    DK(cudnnBackendFinalize(op));

    bdesc graph;
    DK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph));
    DK(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op));
    DK(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &g_dnn));
    DK(cudnnBackendFinalize(graph));

    bdesc heur;
    DK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur));
    cudnnBackendHeurMode_t hm = CUDNN_HEUR_MODE_A;
    DK(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph));
    DK(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &hm));
    DK(cudnnBackendFinalize(heur));
    int64_t count = 0;
    DK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL));
    if (count > 64) count = 64;
    bdesc cfgs[64];
    for (int64_t i = 0; i < count; i++) DK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[i]));
    int64_t got = 0;
    DK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, cfgs));

    float best = -1;
    *first = -1;
    int timed = 0;
    for (int64_t i = 0; i < got && timed < tries; i++) {
        bdesc plan;
        DK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan));
        DK(cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &g_dnn));
        DK(cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                    &cfgs[i]));
        if (cudnnBackendFinalize(plan) != CUDNN_STATUS_SUCCESS) {
            cudnnBackendDestroyDescriptor(plan);
            continue;
        }
        int64_t ws = 0, nws = 0;
        DK(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &nws, &ws));
        if ((size_t)ws > g_ws_size) {
            cudnnBackendDestroyDescriptor(plan);
            continue;
        }
        bdesc pack;
        DK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack));
        int64_t uids[3] = {'x', 'w', 'y'};
        void *ptrs[3] = {px, pw, py};
        DK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids));
        DK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs));
        DK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &g_ws));
        DK(cudnnBackendFinalize(pack));
        graph_ctx c = {plan, pack};
        float ms = time_ms(graph_run, &c, 20);
        cudnnBackendDestroyDescriptor(pack);
        cudnnBackendDestroyDescriptor(plan);
        if (ms < 0) continue;
        if (*first < 0) *first = ms;
        if (best < 0 || ms < best) best = ms;
        timed++;
    }
    *n_plans = (int)got;
    for (int64_t i = 0; i < count; i++) cudnnBackendDestroyDescriptor(cfgs[i]);
    cudnnBackendDestroyDescriptor(heur);
    cudnnBackendDestroyDescriptor(graph);
    cudnnBackendDestroyDescriptor(op);
    cudnnBackendDestroyDescriptor(conv);
    cudnnBackendDestroyDescriptor(x);
    cudnnBackendDestroyDescriptor(w);
    cudnnBackendDestroyDescriptor(y);
    return best;
}

int main(int argc, char **argv)
{
    const char *out = argc > 1 ? argv[1] : "conv_cudnn.json";
    static const shape shapes[] = {
        {"sd15 b1 320 64x64 3x3", 1, 320, 320, 64, 3},     {"sd15 b8 320 64x64 3x3", 8, 320, 320, 64, 3},
        {"sd15 b8 960>320 64x64 3x3", 8, 960, 320, 64, 3}, {"sd15 b8 640 32x32 3x3", 8, 640, 640, 32, 3},
        {"sd15 b8 1280 16x16 3x3", 8, 1280, 1280, 16, 3},  {"sd15 b8 1280 8x8 3x3", 8, 1280, 1280, 8, 3},
        {"sd15 b8 320 64x64 1x1", 8, 320, 320, 64, 1},     {"sd15 b8 960>320 64x64 1x1", 8, 960, 320, 64, 1},
        {"sdxl b1 320 128x128 3x3", 1, 320, 320, 128, 3},  {"sdxl b4 320 128x128 3x3", 4, 320, 320, 128, 3},
        {"sdxl b4 640 64x64 3x3", 4, 640, 640, 64, 3},     {"sdxl b4 1280 32x32 3x3", 4, 1280, 1280, 32, 3},
    };
    const int n_shapes = (int)(sizeof shapes / sizeof shapes[0]);
    CK(cudaStreamCreate(&g_stream));
    DK(cudnnCreate(&g_dnn));
    DK(cudnnSetStream(g_dnn, g_stream));
    CK(cudaMalloc(&g_ws, g_ws_size));
    size_t big = (size_t)8 * 960 * 64 * 64 * 2 * 2;
    void *px, *pw, *py;
    CK(cudaMalloc(&px, big));
    CK(cudaMalloc(&pw, (size_t)1280 * 1280 * 9 * 2));
    CK(cudaMalloc(&py, big));
    fill_random<<<1024, 256>>>((__nv_bfloat16 *)px, big / 2, 1u);
    fill_random<<<1024, 256>>>((__nv_bfloat16 *)pw, (size_t)1280 * 1280 * 9, 2u);
    fill_random<<<1024, 256>>>((__nv_bfloat16 *)py, big / 2, 3u);
    CK(cudaDeviceSynchronize());

    FILE *js = fopen(out, "w");
    if (!js) {
        perror(out);
        return 1;
    }
    fprintf(js, "{\"cudnn\": %zu, \"rows\": [\n", cudnnGetVersion());
    printf("%-28s %-4s %-4s | %8s %8s %8s %8s | TFLOP/s legacy/graph/best\n", "shape", "dir", "lay", "legacy", "graph",
           "best", "plans");
    int first_row = 1;
    for (int i = 0; i < n_shapes; i++)
        for (int dir = 0; dir < 2; dir++)
            for (int lay = 0; lay < 2; lay++) {
                const shape *s = &shapes[i];
                float leg = time_legacy(s, dir, lay, px, pw, py);
                float first = -1;
                int n_plans = 0;
                float best = time_graph(s, dir, lay, px, pw, py, 8, &first, &n_plans);
                double f = flops(s) / 1e9;
                const char *dn = dir == FWD ? "fwd" : "dgrad";
                const char *ln = lay == NHWC ? "nhwc" : "nchw";
                printf("%-28s %-5s %-4s | %8.4f %8.4f %8.4f %8d | %5.0f %5.0f %5.0f\n", s->name, dn, ln, leg, first,
                       best, n_plans, leg > 0 ? f / leg : 0, first > 0 ? f / first : 0, best > 0 ? f / best : 0);
                fflush(stdout);
                fprintf(
                    js,
                    "%s  {\"shape\": \"%s\", \"dir\": \"%s\", \"layout\": \"%s\", \"legacy_ms\": %.5f, \"graph_ms\": %.5f, "
                    "\"best_ms\": %.5f, \"gflop\": %.3f}",
                    first_row ? "" : ",\n", s->name, dn, ln, leg, first, best, f);
                first_row = 0;
            }
    fprintf(js, "\n]}\n");
    fclose(js);
    printf("wrote %s\n", out);
    return 0;
}
