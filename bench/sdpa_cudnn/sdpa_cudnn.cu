/* sdpa_cudnn.cu - how fast cuDNN's fused attention (SDPA) runs the UNet's attention on this GPU.
 *
 * Forward (O and the softmax stats, as training needs) and backward (dQ, dK, dV from Q, K, V, O, dO,
 * stats), bf16 in, fp32 accumulation, no mask, no dropout, scale 1/sqrt(d), at the UNet's shapes.
 * Tensors are laid out as sdtrain's attention receives them: Q, K, V, O (and dO, dQ, dK, dV) are
 * [B, S, H*D] token-major rows, so the [B, H, S, D] view has strides {S*H*D, D, H*D, 1}; stats are
 * [B, H, Sq, 1] f32 (natural-log LSE of the scaled scores).
 *
 * Two routes through cuDNN's graph (backend) API, both tried and timed where the runtime accepts them:
 *   native    - the single-node ops CUDNN_BACKEND_OPERATION_SDPA_FWD/BWD_DESCRIPTOR (cuDNN >= 9.13.1 for
 *               the forward, as cudnn-frontend's UnifiedSDPANode builds it);
 *   composite - the graph cudnn-frontend's CompositeSDPANode / CompositeSDPABackwardNode build from
 *               matmul, pointwise, reduction and reshape ops, which cuDNN fuses into flash attention.
 * Heuristics mode A, the first plan that finalizes; workspace from one preallocated buffer.
 * Times 20 back-to-back launches after 3 warm-ups. FLOP count as FlashAttention's: forward
 * 4*B*H*Sq*Skv*D, backward 2.5x that. A benchmark, not a test, but each shape gets one cheap check that
 * the layout is right: O and the stats of two query rows, and dQ, dK, dV rows of (b0, h0), against a
 * double-precision host reference from the downloaded inputs. Prints a table and writes JSON (argv[1],
 * default sdpa_cudnn.json); argv[2], if given, runs only the shapes whose name contains it.
 *
 * Build and run (standalone, or the sdpa_cudnn target when CMake builds the CUDA module):
 *   nvcc -O2 -arch=sm_90 bench/sdpa_cudnn/sdpa_cudnn.cu -lcudnn -o sdpa_cudnn && ./sdpa_cudnn out.json
 * A route the runtime refuses prints its cuDNN status and message on its row; the summary lines at the end
 * say which routes ran on how many shapes. */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cudnn.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cuda_bench/cuda_check.h"

/* Graph building may be refused by the runtime: record why (status, line, call, cuDNN's own message)
 * in g_err and return the status instead of exiting, so the other route still runs. */
static char g_err[2048];
#define TRY(x)                                                                                                         \
    do {                                                                                                               \
        cudnnStatus_t s_ = (x);                                                                                        \
        if (s_ != CUDNN_STATUS_SUCCESS) {                                                                              \
            char last_[512];                                                                                           \
            cudnnGetLastErrorString(last_, sizeof last_);                                                              \
            snprintf(g_err, sizeof g_err, "%s at line %d (%s)%s%s", cudnnGetErrorString(s_), __LINE__, #x,             \
                     last_[0] ? ": " : "", last_);                                                                     \
            return s_;                                                                                                 \
        }                                                                                                              \
    } while (0)

typedef cudnnBackendDescriptor_t bdesc;

typedef struct shape {
    const char *name;
    int64_t b, h, sq, skv, d;
} shape;

enum { ROUTE_NATIVE = 0, ROUTE_COMPOSITE = 1, N_ROUTES = 2 };
static const char *const route_names[N_ROUTES] = {"native", "composite"};

/* Unique ids of the tensors a variant pack names; virtual tensors count up from UID_VIRTUAL. */
enum {
    UID_Q = 1,
    UID_K,
    UID_V,
    UID_O,
    UID_STATS,
    UID_SCALE,
    UID_DO,
    UID_DQ,
    UID_DK,
    UID_DV,
    UID_ONE,
    UID_SOFTMAX_SUM,
    UID_DQ_ACCUM,
    UID_VIRTUAL = 100
};

static cudnnHandle_t g_dnn;
static cudaStream_t g_stream;
static void *g_ws;
static size_t g_ws_size = (size_t)2 << 30;

/* Uniform values in [-1, 1) from a hash of the index, times amp. */
__global__ void fill_random(__nv_bfloat16 *p, size_t n, unsigned seed, float amp)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
        p[i] = __float2bfloat16(amp * ((float)(h >> 8) / 8388608.0f - 1.0f));
    }
}

/* ---- descriptor pool: everything one graph creates, destroyed together ---- */
typedef struct pool {
    bdesc d[160];
    int n;
} pool;

static cudnnStatus_t pool_new(pool *p, cudnnBackendDescriptorType_t type, bdesc *out)
{
    if (p->n == (int)(sizeof p->d / sizeof p->d[0])) {
        snprintf(g_err, sizeof g_err, "descriptor pool full");
        return CUDNN_STATUS_ALLOC_FAILED;
    }
    TRY(cudnnBackendCreateDescriptor(type, out));
    p->d[p->n++] = *out;
    return CUDNN_STATUS_SUCCESS;
}

static void pool_free(pool *p)
{
    while (p->n > 0) cudnnBackendDestroyDescriptor(p->d[--p->n]);
}

/* ---- graph pieces ---- */
typedef struct tdesc {
    int64_t dims[4], strides[4];
} tdesc;

static tdesc td(int64_t d0, int64_t d1, int64_t d2, int64_t d3, int64_t s0, int64_t s1, int64_t s2, int64_t s3)
{
    tdesc t = {{d0, d1, d2, d3}, {s0, s1, s2, s3}};
    return t;
}

/* Swaps the last two axes (a transposed view of the same memory). */
static tdesc td_t(tdesc t)
{
    int64_t x = t.dims[2];
    t.dims[2] = t.dims[3], t.dims[3] = x;
    x = t.strides[2];
    t.strides[2] = t.strides[3], t.strides[3] = x;
    return t;
}

static int64_t g_next_virtual;
static int g_det; /* argv[3] given: skip engines whose numerical notes say nondeterministic */

static cudnnStatus_t mk_tensor(pool *p, bdesc *out, int64_t uid, tdesc t, cudnnDataType_t dt, bool is_virtual,
                               bool by_value)
{
    TRY(pool_new(p, CUDNN_BACKEND_TENSOR_DESCRIPTOR, out));
    int64_t align = 16;
    if (uid == 0) uid = g_next_virtual++;
    TRY(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt));
    TRY(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, t.dims));
    TRY(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, t.strides));
    TRY(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
    TRY(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
    if (is_virtual)
        TRY(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual));
    if (by_value) TRY(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value));
    TRY(cudnnBackendFinalize(*out));
    return CUDNN_STATUS_SUCCESS;
}

/* A virtual fp32 intermediate (what cudnn-frontend's intermediate data type FLOAT gives). */
static cudnnStatus_t mk_virt(pool *p, bdesc *out, tdesc t, cudnnDataType_t dt)
{
    return mk_tensor(p, out, 0, t, dt, true, false);
}

/* A scalar passed by value (the scale, the constant one), as [1, 1, 1, 1] (what cuDNN's own attention
 * samples used) or, with g_scalar_rank 1, as [1] (what cudnn-frontend's Tensor_attributes(float) sends). */
static int g_scalar_rank = 4;

static cudnnStatus_t mk_scalar(pool *p, bdesc *out, int64_t uid)
{
    if (g_scalar_rank == 4) return mk_tensor(p, out, uid, td(1, 1, 1, 1, 1, 1, 1, 1), CUDNN_DATA_FLOAT, false, true);
    bool by_value = true;
    int64_t one = 1, align = 16;
    cudnnDataType_t dt = CUDNN_DATA_FLOAT;
    TRY(pool_new(p, CUDNN_BACKEND_TENSOR_DESCRIPTOR, out));
    TRY(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt));
    TRY(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 1, &one));
    TRY(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 1, &one));
    TRY(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
    TRY(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
    TRY(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value));
    TRY(cudnnBackendFinalize(*out));
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t mk_matmul(pool *p, bdesc *op, bdesc a, bdesc b, bdesc c)
{
    bdesc mm;
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    TRY(pool_new(p, CUDNN_BACKEND_MATMUL_DESCRIPTOR, &mm));
    TRY(cudnnBackendSetAttribute(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp));
    TRY(cudnnBackendFinalize(mm));
    TRY(pool_new(p, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, op));
    TRY(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a));
    TRY(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b));
    TRY(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c));
    TRY(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm));
    TRY(cudnnBackendFinalize(*op));
    return CUDNN_STATUS_SUCCESS;
}

/* y = mode(x) or y = mode(x, b) when b is given. */
static cudnnStatus_t mk_pw(pool *p, bdesc *op, cudnnPointwiseMode_t mode, bdesc x, bdesc b, bdesc y)
{
    bdesc pw;
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    TRY(pool_new(p, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, &pw));
    TRY(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
    TRY(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec));
    TRY(cudnnBackendFinalize(pw));
    TRY(pool_new(p, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, op));
    TRY(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                 &pw));
    TRY(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
    if (b)
        TRY(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b));
    TRY(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
    TRY(cudnnBackendFinalize(*op));
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t mk_reduce(pool *p, bdesc *op, cudnnReduceTensorOp_t mode, bdesc x, bdesc y)
{
    bdesc red;
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    TRY(pool_new(p, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, &red));
    TRY(cudnnBackendSetAttribute(red, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode));
    TRY(cudnnBackendSetAttribute(red, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp));
    TRY(cudnnBackendFinalize(red));
    TRY(pool_new(p, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, op));
    TRY(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
    TRY(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
    TRY(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &red));
    TRY(cudnnBackendFinalize(*op));
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t mk_reshape(pool *p, bdesc *op, bdesc x, bdesc y)
{
    TRY(pool_new(p, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, op));
    TRY(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
    TRY(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
    TRY(cudnnBackendFinalize(*op));
    return CUDNN_STATUS_SUCCESS;
}

/* What a finalized plan is, for the table and the JSON. */
typedef struct plan_info {
    int offered;       /* engine configs heuristics mode A offered */
    int index;         /* which of them finalized first */
    int64_t engine;    /* its engine's global index */
    int64_t workspace; /* bytes */
    char json[768];    /* the plan's JSON representation, quotes replaced, cut short */
    int scale_rank;    /* rank of the by-value scale tensor the plan was built with */
    char notes[64];    /* the engine's numerical notes (cudnnBackendNumericalNote_t values) */
} plan_info;

/* Operation graph -> heuristics mode A -> first plan that finalizes within the workspace. */
static cudnnStatus_t mk_plan(pool *p, bdesc *ops, int n_ops, bdesc *plan, plan_info *info)
{
    bdesc graph, heur;
    memset(info, 0, sizeof *info);
    info->index = -1, info->engine = -1, info->scale_rank = g_scalar_rank;
    TRY(pool_new(p, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph));
    TRY(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n_ops, ops));
    TRY(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &g_dnn));
    TRY(cudnnBackendFinalize(graph));

    cudnnBackendHeurMode_t hm = CUDNN_HEUR_MODE_A;
    TRY(pool_new(p, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur));
    TRY(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                 &graph));
    TRY(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &hm));
    TRY(cudnnBackendFinalize(heur));
    int64_t count = 0;
    TRY(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL));
    if (count > 32) count = 32;
    bdesc cfgs[32];
    for (int64_t i = 0; i < count; i++) TRY(pool_new(p, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[i]));
    int64_t got = 0;
    if (count > 0)
        TRY(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                                     cfgs));
    info->offered = (int)got;

    cudnnStatus_t last = CUDNN_STATUS_NOT_SUPPORTED;
    snprintf(g_err, sizeof g_err, "heuristics mode A offered %d engine configs, none finalized", (int)got);
    for (int64_t i = 0; i < got; i++) {
        TRY(pool_new(p, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, plan));
        TRY(cudnnBackendSetAttribute(*plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &g_dnn));
        TRY(cudnnBackendSetAttribute(*plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                     &cfgs[i]));
        last = cudnnBackendFinalize(*plan);
        if (last != CUDNN_STATUS_SUCCESS) {
            char msg[512];
            cudnnGetLastErrorString(msg, sizeof msg);
            snprintf(g_err, sizeof g_err, "heuristics mode A offered %d engine configs, none finalized; last: %s%s%s",
                     (int)got, cudnnGetErrorString(last), msg[0] ? ": " : "", msg);
            continue;
        }
        int64_t n = 0;
        TRY(cudnnBackendGetAttribute(*plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                     &info->workspace));
        if ((size_t)info->workspace > g_ws_size) {
            last = CUDNN_STATUS_NOT_SUPPORTED;
            snprintf(g_err, sizeof g_err, "plan %d wants %lld bytes of workspace, more than the %zu preallocated",
                     (int)i, (long long)info->workspace, g_ws_size);
            continue;
        }
        info->index = (int)i;
        bdesc eng;
        if (pool_new(p, CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) == CUDNN_STATUS_SUCCESS &&
            cudnnBackendGetAttribute(cfgs[i], CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                     &eng) == CUDNN_STATUS_SUCCESS) {
            cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &info->engine);
            cudnnBackendNumericalNote_t notes[16];
            int64_t nn = 0;
            bool nondet = false;
            info->notes[0] = 0;
            if (cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, 16, &nn,
                                         notes) != CUDNN_STATUS_SUCCESS)
                nn = 0;
            for (int64_t j = 0; j < nn; j++) {
                size_t len = strlen(info->notes);
                snprintf(info->notes + len, sizeof info->notes - len, "%d ", (int)notes[j]);
                nondet |= notes[j] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
            }
            fprintf(stderr, "plan %d of %d: engine %lld, notes [%s]\n", (int)i, (int)got, (long long)info->engine,
                    info->notes);
            if (g_det && nondet) {
                snprintf(g_err, sizeof g_err, "heuristics mode A offered %d engine configs, none deterministic",
                         (int)got);
                last = CUDNN_STATUS_NOT_SUPPORTED;
                continue;
            }
        }
        static char js[1 << 16];
        n = 0;
        if (cudnnBackendGetAttribute(*plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
                                     (int64_t)sizeof js - 1, &n, js) == CUDNN_STATUS_SUCCESS) {
            if (n < 0) n = 0;
            if (n > (int64_t)sizeof js - 1) n = (int64_t)sizeof js - 1;
            js[n] = 0;
            size_t k = 0;
            for (const char *c = js; *c && k + 1 < sizeof info->json; c++)
                if ((unsigned char)*c >= 32 && *c != '\\') info->json[k++] = *c == '"' ? '\'' : *c;
            info->json[k] = 0;
        }
        return CUDNN_STATUS_SUCCESS;
    }
    return last;
}

/* ---- the two routes' graphs ---- */
typedef struct views {
    tdesc q, k, v, o, stats, bhsd_sq, bhsd_skv;
} views;

/* [B, S, H*D] token-major rows seen as [B, H, S, D]. */
static views make_views(const shape *s)
{
    int64_t hd = s->h * s->d;
    views v;
    v.q = td(s->b, s->h, s->sq, s->d, s->sq * hd, s->d, hd, 1);
    v.k = td(s->b, s->h, s->skv, s->d, s->skv * hd, s->d, hd, 1);
    v.v = v.k;
    v.o = v.q;
    v.stats = td(s->b, s->h, s->sq, 1, s->h * s->sq, s->sq, 1, 1);
    v.bhsd_sq = td(s->b, s->h, s->sq, s->d, s->h * s->sq * s->d, s->sq * s->d, s->d, 1);
    v.bhsd_skv = td(s->b, s->h, s->skv, s->d, s->h * s->skv * s->d, s->skv * s->d, s->d, 1);
    return v;
}

static tdesc scores(const shape *s)
{
    return td(s->b, s->h, s->sq, s->skv, s->h * s->sq * s->skv, s->sq * s->skv, s->skv, 1);
}

static tdesc rowvec(const shape *s)
{
    return td(s->b, s->h, s->sq, 1, s->h * s->sq, s->sq, 1, 1);
}

static const cudnnDataType_t BF16 = CUDNN_DATA_BFLOAT16, F32 = CUDNN_DATA_FLOAT;

static cudnnStatus_t native_fwd_once(pool *p, const shape *s, bdesc *plan, plan_info *info)
{
    views w = make_views(s);
    bdesc q, k, v, o, st, sc, op;
    TRY(mk_tensor(p, &q, UID_Q, w.q, BF16, false, false));
    TRY(mk_tensor(p, &k, UID_K, w.k, BF16, false, false));
    TRY(mk_tensor(p, &v, UID_V, w.v, BF16, false, false));
    TRY(mk_tensor(p, &o, UID_O, w.o, BF16, false, false));
    TRY(mk_tensor(p, &st, UID_STATS, w.stats, F32, false, false));
    TRY(mk_scalar(p, &sc, UID_SCALE));
    TRY(pool_new(p, CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, &op));
    TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &q));
    TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k));
    TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v));
    TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o));
    TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &st));
    TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &sc));
    TRY(cudnnBackendFinalize(op));
    return mk_plan(p, &op, 1, plan, info);
}

static cudnnStatus_t native_bwd_once(pool *p, const shape *s, bdesc *plan, plan_info *info)
{
    views w = make_views(s);
    bdesc q, k, v, o, st, sc, d_o, dq, dk, dv, op;
    TRY(mk_tensor(p, &q, UID_Q, w.q, BF16, false, false));
    TRY(mk_tensor(p, &k, UID_K, w.k, BF16, false, false));
    TRY(mk_tensor(p, &v, UID_V, w.v, BF16, false, false));
    TRY(mk_tensor(p, &o, UID_O, w.o, BF16, false, false));
    TRY(mk_tensor(p, &st, UID_STATS, w.stats, F32, false, false));
    TRY(mk_scalar(p, &sc, UID_SCALE));
    TRY(mk_tensor(p, &d_o, UID_DO, w.o, BF16, false, false));
    TRY(mk_tensor(p, &dq, UID_DQ, w.q, BF16, false, false));
    TRY(mk_tensor(p, &dk, UID_DK, w.k, BF16, false, false));
    TRY(mk_tensor(p, &dv, UID_DV, w.v, BF16, false, false));
    TRY(pool_new(p, CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR, &op));
    TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_BWD_QDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &q));
    TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_BWD_KDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k));
    TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_BWD_VDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v));
    TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_BWD_ODESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o));
    TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_BWD_STATSDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &st));
    TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_BWD_SCALEDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &sc));
    TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_BWD_DODDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d_o));
    TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_BWD_DQDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &dq));
    TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_BWD_DKDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &dk));
    TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_BWD_DVDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &dv));
    TRY(cudnnBackendFinalize(op));
    return mk_plan(p, &op, 1, plan, info);
}

typedef cudnnStatus_t (*build_fn)(pool *, const shape *, bdesc *, plan_info *);

/* The native ops' contract for the scale is cudnn-frontend's (a rank-1 by-value tensor); if the runtime
 * refuses that, try [1, 1, 1, 1] before giving up, and keep both refusals in g_err. */
static cudnnStatus_t native_either_rank(build_fn once, pool *p, const shape *s, bdesc *plan, plan_info *info)
{
    static char first[sizeof g_err];
    g_scalar_rank = 1;
    cudnnStatus_t st = once(p, s, plan, info);
    if (st == CUDNN_STATUS_SUCCESS) {
        return st;
    }
    snprintf(first, sizeof first, "%s", g_err);
    g_scalar_rank = 4;
    st = once(p, s, plan, info);
    if (st == CUDNN_STATUS_SUCCESS) {
        return st;
    }
    char second[sizeof g_err];
    snprintf(second, sizeof second, "%s", g_err);
    if (strcmp(first, second) == 0) return st;
    snprintf(g_err, sizeof g_err, "scale as [1]: %.900s; as [1,1,1,1]: %.900s", first, second);
    return st;
}

static cudnnStatus_t native_fwd(pool *p, const shape *s, bdesc *plan, plan_info *info)
{
    return native_either_rank(native_fwd_once, p, s, plan, info);
}

static cudnnStatus_t native_bwd(pool *p, const shape *s, bdesc *plan, plan_info *info)
{
    return native_either_rank(native_bwd_once, p, s, plan, info);
}

/* cudnn-frontend's CompositeSDPANode with stats: S = Q KT * scale; softmax with stats = max + log(sum exp);
 * O = P V. K enters transposed ([B, H, D, Skv], the same memory). */
static cudnnStatus_t composite_fwd(pool *p, const shape *s, bdesc *plan, plan_info *info)
{
    views w = make_views(s);
    g_scalar_rank = 4;
    bdesc q, kt, v, o, st, sc;
    bdesc t_s, t_ss, t_max, t_sub, t_exp, t_sum, t_log, t_p;
    bdesc ops[10];
    TRY(mk_tensor(p, &q, UID_Q, w.q, BF16, false, false));
    TRY(mk_tensor(p, &kt, UID_K, td_t(w.k), BF16, false, false));
    TRY(mk_tensor(p, &v, UID_V, w.v, BF16, false, false));
    TRY(mk_tensor(p, &o, UID_O, w.o, BF16, false, false));
    TRY(mk_tensor(p, &st, UID_STATS, w.stats, F32, false, false));
    TRY(mk_scalar(p, &sc, UID_SCALE));
    TRY(mk_virt(p, &t_s, scores(s), F32));
    TRY(mk_virt(p, &t_ss, scores(s), F32));
    TRY(mk_virt(p, &t_max, rowvec(s), F32));
    TRY(mk_virt(p, &t_sub, scores(s), F32));
    TRY(mk_virt(p, &t_exp, scores(s), F32));
    TRY(mk_virt(p, &t_sum, rowvec(s), F32));
    TRY(mk_virt(p, &t_log, rowvec(s), F32));
    TRY(mk_virt(p, &t_p, scores(s), F32));
    TRY(mk_matmul(p, &ops[0], q, kt, t_s));
    TRY(mk_pw(p, &ops[1], CUDNN_POINTWISE_MUL, t_s, sc, t_ss));
    TRY(mk_reduce(p, &ops[2], CUDNN_REDUCE_TENSOR_MAX, t_ss, t_max));
    TRY(mk_pw(p, &ops[3], CUDNN_POINTWISE_SUB, t_ss, t_max, t_sub));
    TRY(mk_pw(p, &ops[4], CUDNN_POINTWISE_EXP, t_sub, NULL, t_exp));
    TRY(mk_reduce(p, &ops[5], CUDNN_REDUCE_TENSOR_ADD, t_exp, t_sum));
    TRY(mk_pw(p, &ops[6], CUDNN_POINTWISE_LOG, t_sum, NULL, t_log));
    TRY(mk_pw(p, &ops[7], CUDNN_POINTWISE_ADD, t_max, t_log, st));
    TRY(mk_pw(p, &ops[8], CUDNN_POINTWISE_DIV, t_exp, t_sum, t_p));
    TRY(mk_matmul(p, &ops[9], t_p, v, o));
    return mk_plan(p, ops, 10, plan, info);
}

/* cudnn-frontend's CompositeSDPABackwardNode (MHA, no dropout, cuDNN >= 9): softmax_sum = rowsum(dO * O)
 * and dQ_accum (f32) are non-virtual tensors the caller provides; K and V enter transposed. */
static cudnnStatus_t composite_bwd(pool *p, const shape *s, bdesc *plan, plan_info *info)
{
    views w = make_views(s);
    g_scalar_rank = 4;
    int64_t b = s->b, h = s->h, sq = s->sq, skv = s->skv, d = s->d;
    bdesc q, kt, vt, o, st, sc, one, d_o, dq, dk, dv, ssum, dqacc;
    TRY(mk_tensor(p, &q, UID_Q, w.q, BF16, false, false));
    TRY(mk_tensor(p, &kt, UID_K, td_t(w.k), BF16, false, false));
    TRY(mk_tensor(p, &vt, UID_V, td_t(w.v), BF16, false, false));
    TRY(mk_tensor(p, &o, UID_O, w.o, BF16, false, false));
    TRY(mk_tensor(p, &st, UID_STATS, w.stats, F32, false, false));
    TRY(mk_scalar(p, &sc, UID_SCALE));
    TRY(mk_scalar(p, &one, UID_ONE));
    TRY(mk_tensor(p, &d_o, UID_DO, w.o, BF16, false, false));
    TRY(mk_tensor(p, &dq, UID_DQ, w.q, BF16, false, false));
    TRY(mk_tensor(p, &dk, UID_DK, w.k, BF16, false, false));
    TRY(mk_tensor(p, &dv, UID_DV, w.v, BF16, false, false));
    TRY(mk_tensor(p, &ssum, UID_SOFTMAX_SUM, rowvec(s), F32, false, false));
    TRY(mk_tensor(p, &dqacc, UID_DQ_ACCUM, w.bhsd_sq, F32, false, false));

    bdesc ops[20];
    int n = 0;
    /* softmax_sum = rowsum(dO * O) * 1 */
    bdesc t_doo, t_red;
    TRY(mk_virt(p, &t_doo, td(b, h, sq, d, h * sq * d, sq * d, h * d, 1), F32));
    TRY(mk_virt(p, &t_red, rowvec(s), F32));
    TRY(mk_pw(p, &ops[n++], CUDNN_POINTWISE_MUL, d_o, o, t_doo));
    TRY(mk_reduce(p, &ops[n++], CUDNN_REDUCE_TENSOR_ADD, t_doo, t_red));
    TRY(mk_pw(p, &ops[n++], CUDNN_POINTWISE_MUL, t_red, one, ssum));
    /* P = exp(Q KT * scale - stats); dV = PT dO */
    bdesc t_s, t_ss, t_sub, t_exp, t_pt;
    TRY(mk_virt(p, &t_s, scores(s), F32));
    TRY(mk_virt(p, &t_ss, scores(s), F32));
    TRY(mk_virt(p, &t_sub, scores(s), F32));
    TRY(mk_virt(p, &t_exp, scores(s), F32));
    TRY(mk_virt(p, &t_pt, td(b, h, skv, sq, h * sq * skv, sq * skv, 1, skv), BF16));
    TRY(mk_matmul(p, &ops[n++], q, kt, t_s));
    TRY(mk_pw(p, &ops[n++], CUDNN_POINTWISE_MUL, t_s, sc, t_ss));
    TRY(mk_pw(p, &ops[n++], CUDNN_POINTWISE_SUB, t_ss, st, t_sub));
    TRY(mk_pw(p, &ops[n++], CUDNN_POINTWISE_EXP, t_sub, NULL, t_exp));
    TRY(mk_reshape(p, &ops[n++], t_exp, t_pt));
    TRY(mk_matmul(p, &ops[n++], t_pt, d_o, dv));
    /* dS = (dO VT - softmax_sum) * P * scale; dK = dST Q */
    bdesc t_dp, t_dps, t_dpp, t_ds, t_dst;
    TRY(mk_virt(p, &t_dp, scores(s), F32));
    TRY(mk_virt(p, &t_dps, scores(s), F32));
    TRY(mk_virt(p, &t_dpp, scores(s), F32));
    TRY(mk_virt(p, &t_ds, scores(s), F32));
    TRY(mk_virt(p, &t_dst, td(b, h, skv, sq, h * sq * skv, sq * skv, 1, skv), BF16));
    TRY(mk_matmul(p, &ops[n++], d_o, vt, t_dp));
    TRY(mk_pw(p, &ops[n++], CUDNN_POINTWISE_SUB, t_dp, ssum, t_dps));
    TRY(mk_pw(p, &ops[n++], CUDNN_POINTWISE_MUL, t_dps, t_exp, t_dpp));
    TRY(mk_pw(p, &ops[n++], CUDNN_POINTWISE_MUL, t_dpp, sc, t_ds));
    TRY(mk_reshape(p, &ops[n++], t_ds, t_dst));
    TRY(mk_matmul(p, &ops[n++], t_dst, q, dk));
    /* dQ = dS K (K seen again untransposed through a reshape), accumulated in f32, then converted */
    bdesc t_k;
    TRY(mk_virt(p, &t_k, w.k, BF16));
    TRY(mk_reshape(p, &ops[n++], kt, t_k));
    TRY(mk_matmul(p, &ops[n++], t_ds, t_k, dqacc));
    TRY(mk_pw(p, &ops[n++], CUDNN_POINTWISE_IDENTITY, dqacc, NULL, dq));
    return mk_plan(p, ops, n, plan, info);
}

/* ---- running ---- */
typedef struct bufs {
    void *q, *k, *v, *o, *stats, *d_o, *dq, *dk, *dv, *ssum, *dqacc;
} bufs;

typedef struct exec_ctx {
    bdesc plan, pack;
} exec_ctx;

static float g_scale, g_one = 1.0f;

static cudnnStatus_t mk_pack(pool *p, const bufs *m, bdesc *pack, int n_uids)
{
    int64_t uids[] = {UID_Q,  UID_K,  UID_V,  UID_O,   UID_STATS,       UID_SCALE,   UID_DO,
                      UID_DQ, UID_DK, UID_DV, UID_ONE, UID_SOFTMAX_SUM, UID_DQ_ACCUM};
    void *ptrs[] = {m->q, m->k, m->v, m->o, m->stats, &g_scale, m->d_o, m->dq, m->dk, m->dv, &g_one, m->ssum, m->dqacc};
    TRY(pool_new(p, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, pack));
    TRY(cudnnBackendSetAttribute(*pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n_uids, uids));
    TRY(cudnnBackendSetAttribute(*pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n_uids, ptrs));
    TRY(cudnnBackendSetAttribute(*pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &g_ws));
    TRY(cudnnBackendFinalize(*pack));
    return CUDNN_STATUS_SUCCESS;
}

/* Runs once, then 3 warm-ups and reps timed launches; ms per launch, -1 (and g_err) if execution fails. */
static float time_ms(const exec_ctx *c, int reps)
{
    for (int i = 0; i < 4; i++) {
        cudnnStatus_t s = cudnnBackendExecute(g_dnn, c->plan, c->pack);
        if (s != CUDNN_STATUS_SUCCESS) {
            char msg[512];
            cudnnGetLastErrorString(msg, sizeof msg);
            snprintf(g_err, sizeof g_err, "execute: %s%s%s", cudnnGetErrorString(s), msg[0] ? ": " : "", msg);
            return -1;
        }
    }
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaEventRecord(a, g_stream));
    for (int i = 0; i < reps; i++) DK(cudnnBackendExecute(g_dnn, c->plan, c->pack));
    CK(cudaEventRecord(b, g_stream));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms / reps;
}

/* ---- sanity check against a double-precision host reference ---- */
static double bf(const uint16_t *p, size_t i)
{
    uint32_t u = (uint32_t)p[i] << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Downloads rows [b, :, h, :] of a [B, S, H*D] bf16 tensor into a (S x D) host array of doubles. */
static double *head_rows(const void *dev, int64_t b, int64_t h, int64_t S, const shape *s)
{
    int64_t hd = s->h * s->d;
    size_t n = (size_t)S * hd;
    uint16_t *raw = (uint16_t *)malloc(n * 2);
    double *out = (double *)malloc((size_t)S * s->d * sizeof(double));
    CK(cudaMemcpy(raw, (const char *)dev + (size_t)b * S * hd * 2, n * 2, cudaMemcpyDeviceToHost));
    for (int64_t t = 0; t < S; t++)
        for (int64_t j = 0; j < s->d; j++) out[t * s->d + j] = bf(raw, (size_t)(t * hd + h * s->d + j));
    free(raw);
    return out;
}

static double *stats_row(const void *dev, int64_t b, int64_t h, const shape *s)
{
    float *raw = (float *)malloc((size_t)s->sq * 4);
    double *out = (double *)malloc((size_t)s->sq * sizeof(double));
    CK(cudaMemcpy(raw, (const float *)dev + (size_t)(b * s->h + h) * s->sq, (size_t)s->sq * 4, cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < s->sq; i++) out[i] = raw[i];
    free(raw);
    return out;
}

static double dot(const double *a, const double *b, int64_t n)
{
    double r = 0;
    for (int64_t i = 0; i < n; i++) r += a[i] * b[i];
    return r;
}

static double maxabs(const double *a, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fabs(a[i]) > m ? fabs(a[i]) : m;
    return m;
}

/* Forward: O row and stats of query row qi of (b, h). Returns the largest error relative to the row's
 * largest |O| (stats: absolute), NAN if anything is not finite. */
static double check_fwd_row(const bufs *m, const shape *s, int64_t b, int64_t h, int64_t qi, double *stats_err)
{
    int64_t D = s->d;
    double *Q = head_rows(m->q, b, h, s->sq, s), *K = head_rows(m->k, b, h, s->skv, s);
    double *V = head_rows(m->v, b, h, s->skv, s), *O = head_rows(m->o, b, h, s->sq, s);
    double *L = stats_row(m->stats, b, h, s);
    double *p = (double *)malloc((size_t)s->skv * sizeof(double)), *ref = (double *)calloc((size_t)D, sizeof(double));
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < s->skv; j++) {
        p[j] = dot(Q + qi * D, K + j * D, D) * g_scale;
        mx = p[j] > mx ? p[j] : mx;
    }
    for (int64_t j = 0; j < s->skv; j++) sum += p[j] = exp(p[j] - mx);
    for (int64_t j = 0; j < s->skv; j++)
        for (int64_t e = 0; e < D; e++) ref[e] += p[j] / sum * V[j * D + e];
    double err = 0, scale = maxabs(ref, D) > 1e-6 ? maxabs(ref, D) : 1e-6;
    for (int64_t e = 0; e < D; e++) {
        double x = O[qi * D + e];
        if (!isfinite(x))
            err = NAN;
        else if (fabs(x - ref[e]) / scale > err)
            err = fabs(x - ref[e]) / scale;
    }
    *stats_err = isfinite(L[qi]) ? fabs(L[qi] - (mx + log(sum))) : NAN;
    free(Q), free(K), free(V), free(O), free(L), free(p), free(ref);
    return err;
}

/* Backward, (b0, h0): dQ row 0, dK row 0 and dV row 0 from the downloaded Q, K, V, O, dO and stats. */
static double check_bwd(const bufs *m, const shape *s, double errs[3])
{
    int64_t D = s->d, Sq = s->sq, Skv = s->skv;
    double *Q = head_rows(m->q, 0, 0, Sq, s), *K = head_rows(m->k, 0, 0, Skv, s), *V = head_rows(m->v, 0, 0, Skv, s);
    double *O = head_rows(m->o, 0, 0, Sq, s), *dO = head_rows(m->d_o, 0, 0, Sq, s);
    double *dQ = head_rows(m->dq, 0, 0, Sq, s), *dK = head_rows(m->dk, 0, 0, Skv, s),
           *dV = head_rows(m->dv, 0, 0, Skv, s);
    double *L = stats_row(m->stats, 0, 0, s);
    double *rq = (double *)calloc((size_t)D, sizeof(double)), *rk = (double *)calloc((size_t)D, sizeof(double));
    double *rv = (double *)calloc((size_t)D, sizeof(double));
    /* dQ[0] = scale * sum_j P[0,j] (dO[0].V[j] - delta[0]) K[j] */
    double delta0 = dot(dO, O, D);
    for (int64_t j = 0; j < Skv; j++) {
        double pj = exp(dot(Q, K + j * D, D) * g_scale - L[0]);
        double ds = pj * (dot(dO, V + j * D, D) - delta0) * g_scale;
        for (int64_t e = 0; e < D; e++) rq[e] += ds * K[j * D + e];
    }
    /* dK[0] = scale * sum_i P[i,0] (dO[i].V[0] - delta[i]) Q[i];  dV[0] = sum_i P[i,0] dO[i] */
    for (int64_t i = 0; i < Sq; i++) {
        double pi = exp(dot(Q + i * D, K, D) * g_scale - L[i]);
        double ds = pi * (dot(dO + i * D, V, D) - dot(dO + i * D, O + i * D, D)) * g_scale;
        for (int64_t e = 0; e < D; e++) rk[e] += ds * Q[i * D + e], rv[e] += pi * dO[i * D + e];
    }
    const double *got[3] = {dQ, dK, dV}, *ref[3] = {rq, rk, rv};
    double worst = 0;
    for (int t = 0; t < 3; t++) {
        double sc = maxabs(ref[t], D) > 1e-6 ? maxabs(ref[t], D) : 1e-6;
        errs[t] = 0;
        for (int64_t e = 0; e < D; e++) {
            if (!isfinite(got[t][e]))
                errs[t] = NAN;
            else if (fabs(got[t][e] - ref[t][e]) / sc > errs[t])
                errs[t] = fabs(got[t][e] - ref[t][e]) / sc;
        }
        worst = isnan(errs[t]) || errs[t] > worst ? errs[t] : worst;
    }
    free(Q), free(K), free(V), free(O), free(dO), free(dQ), free(dK), free(dV), free(L), free(rq), free(rk), free(rv);
    return worst;
}

/* ---- driver ---- */

typedef struct result {
    float ms;
    plan_info info;
    char err[2048];
    double check; /* relative error of the sanity check; NAN when not finite, -1 when not run */
    double check_parts[3];
} result;

static void run_one(build_fn build, const shape *s, const bufs *m, int dir, result *r)
{
    pool p;
    p.n = 0;
    g_next_virtual = UID_VIRTUAL;
    r->ms = -1, r->check = -1, r->err[0] = 0;
    bdesc plan, pack;
    g_err[0] = 0;
    cudnnStatus_t st = build(&p, s, &plan, &r->info);
    /* the native ops take exactly their tensors: Q K V O Stats Scale (+ dO dQ dK dV) */
    if (st == CUDNN_STATUS_SUCCESS) st = mk_pack(&p, m, &pack, build == native_fwd ? 6 : build == native_bwd ? 10 : 13);
    if (st != CUDNN_STATUS_SUCCESS) {
        snprintf(r->err, sizeof r->err, "%s", g_err);
        pool_free(&p);
        return;
    }
    if (dir == 1) { /* fill the outputs with NaN so a plan that writes nothing shows up in the check */
        size_t q = (size_t)s->b * s->sq * s->h * s->d * 2, kv = (size_t)s->b * s->skv * s->h * s->d * 2;
        CK(cudaMemset(m->dq, 0xff, q));
        CK(cudaMemset(m->dk, 0xff, kv));
        CK(cudaMemset(m->dv, 0xff, kv));
    } else {
        CK(cudaMemset(m->o, 0xff, (size_t)s->b * s->sq * s->h * s->d * 2));
        CK(cudaMemset(m->stats, 0xff, (size_t)s->b * s->h * s->sq * 4));
    }
    exec_ctx c = {plan, pack};
    r->ms = time_ms(&c, 20);
    if (r->ms < 0)
        snprintf(r->err, sizeof r->err, "%s", g_err);
    else if (dir == 0) {
        double se0, se1;
        double e0 = check_fwd_row(m, s, 0, 0, 0, &se0);
        double e1 = check_fwd_row(m, s, s->b - 1, s->h - 1, s->sq - 1, &se1);
        r->check_parts[0] = isnan(e0) || e0 > e1 ? e0 : e1;
        r->check_parts[1] = isnan(se0) || se0 > se1 ? se0 : se1;
        r->check_parts[2] = 0;
        r->check = isnan(r->check_parts[0]) || isnan(r->check_parts[1]) ? NAN : r->check_parts[0];
    } else
        r->check = check_bwd(m, s, r->check_parts);
    pool_free(&p);
}

int main(int argc, char **argv)
{
    const char *out = argc > 1 ? argv[1] : "sdpa_cudnn.json";
    const char *only =
        argc > 2 && argv[2][0] ? argv[2] : NULL; /* run only shapes whose name contains this ("" for all) */
    g_det = argc > 3;
    static const shape shapes[] = {
        {"sd15 self 64x64 b1", 1, 8, 4096, 4096, 40},  {"sd15 self 64x64 b8", 8, 8, 4096, 4096, 40},
        {"sd15 self 32x32 b8", 8, 8, 1024, 1024, 80},  {"sd15 self 16x16 b8", 8, 8, 256, 256, 160},
        {"sd15 cross 64x64 b8", 8, 8, 4096, 77, 40},   {"sdxl self 64x64 b1", 1, 10, 4096, 4096, 64},
        {"sdxl self 64x64 b4", 4, 10, 4096, 4096, 64}, {"sdxl self 32x32 b4", 4, 20, 1024, 1024, 64},
        {"sdxl cross 64x64 b4", 4, 10, 4096, 77, 64},
    };
    const int n_shapes = (int)(sizeof shapes / sizeof shapes[0]);
    size_t ver = cudnnGetVersion();
    int dev = 0;
    cudaDeviceProp prop;
    CK(cudaGetDevice(&dev));
    CK(cudaGetDeviceProperties(&prop, dev));
    printf("cuDNN runtime %zu (headers %d), %s sm_%d%d\n", ver, CUDNN_VERSION, prop.name, prop.major, prop.minor);
    CK(cudaStreamCreate(&g_stream));
    DK(cudnnCreate(&g_dnn));
    DK(cudnnSetStream(g_dnn, g_stream));
    CK(cudaMalloc(&g_ws, g_ws_size));

    size_t big = 0, rows = 0;
    for (int i = 0; i < n_shapes; i++) {
        size_t e = (size_t)shapes[i].b * shapes[i].h * shapes[i].d *
                   (shapes[i].sq > shapes[i].skv ? shapes[i].sq : shapes[i].skv);
        size_t r = (size_t)shapes[i].b * shapes[i].h * shapes[i].sq;
        big = e > big ? e : big;
        rows = r > rows ? r : rows;
    }
    bufs m;
    void **bf16s[] = {&m.q, &m.k, &m.v, &m.o, &m.d_o, &m.dq, &m.dk, &m.dv};
    for (int i = 0; i < 8; i++) CK(cudaMalloc(bf16s[i], big * 2));
    CK(cudaMalloc(&m.stats, rows * 4));
    CK(cudaMalloc(&m.ssum, rows * 4));
    CK(cudaMalloc(&m.dqacc, big * 4));
    /* Q, K in [-2, 2) give softmax rows that are neither flat nor one-hot at d = 40..160 */
    fill_random<<<1024, 256>>>((__nv_bfloat16 *)m.q, big, 1u, 2.0f);
    fill_random<<<1024, 256>>>((__nv_bfloat16 *)m.k, big, 2u, 2.0f);
    fill_random<<<1024, 256>>>((__nv_bfloat16 *)m.v, big, 3u, 1.0f);
    fill_random<<<1024, 256>>>((__nv_bfloat16 *)m.d_o, big, 4u, 1.0f);
    CK(cudaDeviceSynchronize());

    FILE *js = fopen(out, "w");
    if (!js) {
        perror(out);
        return 1;
    }
    fprintf(js, "{\"cudnn\": %zu, \"cudnn_headers\": %d, \"device\": \"%s\", \"rows\": [\n", ver, CUDNN_VERSION,
            prop.name);
    printf("%-22s %-3s %-9s | %9s %7s | %4s %4s %6s %9s | %s\n", "shape", "dir", "route", "ms", "TFLOP/s", "plns",
           "pick", "engine", "check", "note");
    int first_row = 1;
    int worked[2][N_ROUTES] = {{0}}, tried = 0;
    for (int i = 0; i < n_shapes; i++) {
        const shape *s = &shapes[i];
        if (only && !strstr(s->name, only)) continue;
        tried++;
        g_scale = (float)(1.0 / sqrt((double)s->d));
        double fwd_flop = 4.0 * s->b * s->h * (double)s->sq * s->skv * s->d;
        int have_fwd = 0;
        for (int dir = 0; dir < 2; dir++)
            for (int route = 0; route < N_ROUTES; route++) {
                static const build_fn builders[2][N_ROUTES] = {{native_fwd, composite_fwd},
                                                               {native_bwd, composite_bwd}};
                result r;
                memset(&r, 0, sizeof r);
                if (dir == 1 && !have_fwd) {
                    /* the backward needs O and stats from a forward that worked */
                    snprintf(r.err, sizeof r.err, "skipped: no forward route worked for this shape");
                    r.ms = -1, r.check = -1, r.info.offered = 0, r.info.index = -1, r.info.engine = -1;
                } else {
                    /* the backward reads O and stats: rerun a working forward so they are this shape's */
                    if (dir == 1) {
                        result f;
                        run_one(builders[0][have_fwd - 1], s, &m, 0, &f);
                    }
                    run_one(builders[dir][route], s, &m, dir, &r);
                    if (dir == 0 && r.ms > 0 && !have_fwd) have_fwd = route + 1;
                }
                double flop = dir == 0 ? fwd_flop : 2.5 * fwd_flop;
                const char *dn = dir == 0 ? "fwd" : "bwd";
                if (r.ms > 0) worked[dir][route]++;
                char chk[32];
                if (r.check < 0)
                    snprintf(chk, sizeof chk, "-");
                else
                    snprintf(chk, sizeof chk, "%.2e", r.check);
                if (r.ms > 0)
                    printf("%-22s %-3s %-9s | %9.4f %7.1f | %4d %4d %6lld %9s | ws %lld B, scale rank %d%s\n", s->name,
                           dn, route_names[route], r.ms, flop / r.ms / 1e9, r.info.offered, r.info.index,
                           (long long)r.info.engine, chk, (long long)r.info.workspace, r.info.scale_rank,
                           (dir == 0 && r.check_parts[1] > 1e-2) || isnan(r.check) || r.check > 2e-2 ? "  CHECK FAILED"
                                                                                                     : "");
                else
                    printf("%-22s %-3s %-9s | %9s %7s | %4d %4s %6s %9s | %s\n", s->name, dn, route_names[route], "-",
                           "-", r.info.offered, "-", "-", chk, r.err);
                fflush(stdout);
                for (char *c = r.err; *c; c++)
                    if (*c == '"' || *c == '\\' || (unsigned char)*c < 32) *c = '\'';
                fprintf(
                    js,
                    "%s  {\"shape\": \"%s\", \"b\": %lld, \"h\": %lld, \"sq\": %lld, \"skv\": %lld, \"d\": %lld, "
                    "\"dir\": \"%s\", \"route\": \"%s\", \"ms\": %.5f, \"tflops\": %.2f, \"plans_offered\": %d, "
                    "\"plan_index\": %d, \"engine\": %lld, \"workspace\": %lld, \"scale_rank\": %d, \"check_rel_err\": %.3e, "
                    "\"check_parts\": [%.3e, %.3e, %.3e], \"error\": \"%s\", \"plan_json\": \"%s\"}",
                    first_row ? "" : ",\n", s->name, (long long)s->b, (long long)s->h, (long long)s->sq,
                    (long long)s->skv, (long long)s->d, dn, route_names[route], r.ms,
                    r.ms > 0 ? flop / r.ms / 1e9 : 0.0, r.info.offered, r.info.index, (long long)r.info.engine,
                    (long long)r.info.workspace, r.info.scale_rank, isnan(r.check) ? 99.0 : r.check,
                    isnan(r.check_parts[0]) ? 99.0 : r.check_parts[0],
                    isnan(r.check_parts[1]) ? 99.0 : r.check_parts[1],
                    isnan(r.check_parts[2]) ? 99.0 : r.check_parts[2], r.err, r.ms > 0 ? r.info.json : "");
                first_row = 0;
            }
    }
    fprintf(js, "\n]}\n");
    fclose(js);
    for (int dir = 0; dir < 2; dir++)
        for (int route = 0; route < N_ROUTES; route++)
            printf("summary: %s %-9s ran on %d of %d shapes (cuDNN runtime %zu)\n", dir == 0 ? "fwd" : "bwd",
                   route_names[route], worked[dir][route], tried, ver);
    printf("check: forward = max |O - ref| / max |ref| over query rows (b0,h0,q0) and (B-1,H-1,Sq-1), stats "
           "error printed in the JSON; backward = worst of dQ row 0, dK row 0, dV row 0 of (b0,h0), same measure\n");
    printf("wrote %s\n", out);
    return 0;
}
