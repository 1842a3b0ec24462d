/* conv2d.cu - conv2d forward and backward through cuDNN (legacy convolution API,
 * heuristic algorithm choice, workspace from scratch). Runs in the tensors'
 * dtype with fp32 compute when x, w and the output agree; otherwise on fp32
 * copies. Semantics: kernels/ops.h. */
#include "cuda_ops.h"

static cudnnDataType_t dnn_type(int dtype)
{
    return dtype == SDT_F16 ? CUDNN_DATA_HALF : dtype == SDT_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

typedef struct conv_desc {
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
} conv_desc;

static void conv_desc_free(conv_desc *d)
{
    if (d->x) cudnnDestroyTensorDescriptor(d->x);
    if (d->y) cudnnDestroyTensorDescriptor(d->y);
    if (d->w) cudnnDestroyFilterDescriptor(d->w);
    if (d->conv) cudnnDestroyConvolutionDescriptor(d->conv);
}

static int conv_desc_make(sdt_backend *be, conv_desc *d, int dtype, const int64_t *xs, const int64_t *ws, const int64_t *ys,
                          int stride, int pad)
{
    memset(d, 0, sizeof(*d));
    cudnnDataType_t t = dnn_type(dtype);
    CUDNN_TRY(be, cudnnCreateTensorDescriptor(&d->x));
    CUDNN_TRY(be, cudnnCreateTensorDescriptor(&d->y));
    CUDNN_TRY(be, cudnnCreateFilterDescriptor(&d->w));
    CUDNN_TRY(be, cudnnCreateConvolutionDescriptor(&d->conv));
    CUDNN_TRY(be, cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW, t, (int)xs[0], (int)xs[1], (int)xs[2], (int)xs[3]));
    CUDNN_TRY(be, cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NCHW, t, (int)ys[0], (int)ys[1], (int)ys[2], (int)ys[3]));
    CUDNN_TRY(be, cudnnSetFilter4dDescriptor(d->w, t, CUDNN_TENSOR_NCHW, (int)ws[0], (int)ws[1], (int)ws[2], (int)ws[3]));
    CUDNN_TRY(be, cudnnSetConvolution2dDescriptor(d->conv, pad, pad, stride, stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                                  CUDNN_DATA_FLOAT));
    /* Tensor cores for 16-bit data; exact fp32 math for f32 (parity with the CPU reference). */
    CUDNN_TRY(be, cudnnSetConvolutionMathType(d->conv, dtype == SDT_F32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
    return 0;
}

/* cuDNN's algorithm heuristics cost far more than a small convolution, so the choice is
 * made once per (direction, dtype, shapes, stride, pad) and remembered in the backend. */
typedef enum conv_dir { CONV_FWD = 0, CONV_BWD_DATA = 1, CONV_BWD_FILTER = 2 } conv_dir;

struct conv_plan {
    int dir, dtype, stride, pad;
    int64_t xs[4], ws[4];
    int algo;
    size_t workspace;
};

static struct conv_plan *plan_lookup(cuda_ctx *c, const struct conv_plan *key)
{
    for (int i = 0; i < c->n_conv_plans; i++) {
        struct conv_plan *p = &c->conv_plans[i];
        if (p->dir == key->dir && p->dtype == key->dtype && p->stride == key->stride && p->pad == key->pad &&
            !memcmp(p->xs, key->xs, sizeof p->xs) && !memcmp(p->ws, key->ws, sizeof p->ws))
            return p;
    }
    return NULL;
}

/* Asks cuDNN's heuristics for the best algorithm of one direction and its workspace size.
 * (Timing every algorithm with cudnnFind* instead was measured on an H100: no faster at batch 8
 * and 16, 30% slower at batch 1; bench/NOTES.md run 3.) */
static cudnnStatus_t plan_choose(cudnnHandle_t h, const conv_desc *d, struct conv_plan *p)
{
    int found = 0;
    if (p->dir == CONV_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[8];
        cudnnGetConvolutionForwardAlgorithm_v7(h, d->x, d->w, d->conv, d->y, 8, &found, perf);
        cudnnConvolutionFwdAlgo_t a = found ? perf[0].algo : CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
        p->algo = (int)a;
        return cudnnGetConvolutionForwardWorkspaceSize(h, d->x, d->w, d->conv, d->y, a, &p->workspace);
    }
    if (p->dir == CONV_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[8];
        cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d->w, d->y, d->conv, d->x, 8, &found, perf);
        cudnnConvolutionBwdDataAlgo_t a = found ? perf[0].algo : CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
        p->algo = (int)a;
        return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d->w, d->y, d->conv, d->x, a, &p->workspace);
    }
    cudnnConvolutionBwdFilterAlgoPerf_t perf[8];
    cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d->x, d->y, d->conv, d->w, 8, &found, perf);
    cudnnConvolutionBwdFilterAlgo_t a = found ? perf[0].algo : CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
    p->algo = (int)a;
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d->x, d->y, d->conv, d->w, a, &p->workspace);
}


/* The plan for this convolution (cached) and its workspace in *wsp; NULL + be->error on failure. */
static const struct conv_plan *conv_plan(sdt_backend *be, conv_dir dir, int dtype, const int64_t *xs, const int64_t *ws,
                                         int stride, int pad, const conv_desc *d, void **wsp)
{
    cuda_ctx *c = ctx_of(be);
    struct conv_plan key;
    memset(&key, 0, sizeof key);
    key.dir = dir;
    key.dtype = dtype;
    key.stride = stride;
    key.pad = pad;
    memcpy(key.xs, xs, sizeof key.xs);
    memcpy(key.ws, ws, sizeof key.ws);
    struct conv_plan *p = plan_lookup(c, &key);
    if (!p) {
        cudnnStatus_t s = plan_choose(c->cudnn, d, &key);
        if (s != CUDNN_STATUS_SUCCESS) {
            cuda_fail(be, cudnn_error_code(s), "conv2d: cuDNN found no algorithm (%s)", cudnnGetErrorString(s));
            return NULL;
        }
        if (c->n_conv_plans == c->cap_conv_plans) {
            int cap = c->cap_conv_plans ? 2 * c->cap_conv_plans : 64;
            struct conv_plan *np = (struct conv_plan *)realloc(c->conv_plans, (size_t)cap * sizeof(*np));
            if (!np) {
                cuda_fail(be, SDT_ERR_OUT_OF_MEMORY, "conv2d: out of host memory");
                return NULL;
            }
            c->conv_plans = np;
            c->cap_conv_plans = cap;
        }
        p = &c->conv_plans[c->n_conv_plans++];
        *p = key;
    }
    *wsp = p->workspace ? cuda_scratch(be, CUDA_CONV_WORKSPACE_SLOT, p->workspace) : NULL;
    if (p->workspace && !*wsp) return NULL;
    return p;
}

/* Operands in one dtype: the tensors' own when x, w and y agree, else f32 copies in scratch. */
typedef struct conv_ops {
    const void *x, *w;
    void *y;
    int dtype;
    bool y_copied;
} conv_ops;

static int conv_operands(sdt_backend *be, const sdt_tensor *x, const sdt_tensor *w, sdt_tensor *y, bool load_y, conv_ops *o)
{
    if (x->dtype == w->dtype && (!y || y->dtype == x->dtype)) {
        *o = (conv_ops){x->data, w->data, y ? y->data : NULL, x->dtype, false};
        return 0;
    }
    o->dtype = SDT_F32;
    o->x = cuda_read_f32(be, x, 0);
    o->w = cuda_read_f32(be, w, 1);
    o->y = NULL;
    o->y_copied = false;
    if (y) {
        if (y->dtype == SDT_F32) o->y = y->data;
        else {
            int64_t n = sdt_tensor_numel(y);
            o->y = cuda_scratch(be, 2, (size_t)n * sizeof(float));
            o->y_copied = true;
            if (o->y && load_y && cuda_convert_raw(be, o->y, SDT_F32, y->data, y->dtype, n)) return -1;
        }
    }
    return (o->x && o->w && (!y || o->y)) ? 0 : -1;
}

/* dx = (overwrite ? 0 : dx) + the transposed convolution of dout (cuDNN's backward data with beta 0 or 1;
 * the f32 fallback for mixed dtypes accumulates into a zeroed dx). dx has x's shape. */
static int conv_backward_data(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *w, int stride, int pad,
                              bool overwrite)
{
    cudnnHandle_t h = ctx_of(be)->cudnn;
    float one = 1.0f, beta = 1.0f;
    bool native = dx->dtype == w->dtype && dout->dtype == dx->dtype;
    int dt = native ? dx->dtype : SDT_F32;
    const void *wp = native ? w->data : cuda_read_f32(be, w, 1);
    const void *dyp = native ? dout->data : cuda_read_f32(be, dout, 3);
    if (!wp || !dyp) return -1;
    if (native && overwrite) beta = 0.0f;
    else if (overwrite && cuda_zero(be, dx)) return -1;
    float *dx32 = NULL;
    void *dxp = dx->data;
    if (!native && dx->dtype != SDT_F32) {
        int64_t n = sdt_tensor_numel(dx);
        dx32 = (float *)cuda_scratch(be, 4, (size_t)n * sizeof(float));
        if (!dx32 || cuda_convert_raw(be, dx32, SDT_F32, dx->data, dx->dtype, n)) return -1;
        dxp = dx32;
    }
    conv_desc d;
    int rc = conv_desc_make(be, &d, dt, dx->shape, w->shape, dout->shape, stride, pad);
    if (!rc) {
        void *wsp = NULL;
        const struct conv_plan *p = conv_plan(be, CONV_BWD_DATA, dt, dx->shape, w->shape, stride, pad, &d, &wsp);
        cudnnStatus_t s = !p ? CUDNN_STATUS_ALLOC_FAILED
                             : cudnnConvolutionBackwardData(h, &one, d.w, wp, d.y, dyp, d.conv,
                                                            (cudnnConvolutionBwdDataAlgo_t)p->algo, wsp, p->workspace, &beta,
                                                            d.x, dxp);
        if (s != CUDNN_STATUS_SUCCESS)
            rc = cuda_fail(be, cudnn_error_code(s), "conv2d backward (data): cuDNN failed (%s)", cudnnGetErrorString(s));
    }
    conv_desc_free(&d);
    if (rc) return rc;
    if (dx32 && cuda_convert_raw(be, dx->data, dx->dtype, dx32, SDT_F32, sdt_tensor_numel(dx))) return -1;
    return 0;
}

int cuda_conv2d_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w, const sdt_tensor *b,
                        int stride, int pad)
{
    conv_ops o;
    if (conv_operands(be, x, w, out, false, &o)) return -1;
    conv_desc d;
    int rc = conv_desc_make(be, &d, o.dtype, x->shape, w->shape, out->shape, stride, pad);
    cudnnHandle_t h = ctx_of(be)->cudnn;
    if (!rc) {
        void *wsp = NULL;
        const struct conv_plan *p = conv_plan(be, CONV_FWD, o.dtype, x->shape, w->shape, stride, pad, &d, &wsp);
        float one = 1.0f, zero = 0.0f;
        cudnnStatus_t s = !p ? CUDNN_STATUS_ALLOC_FAILED
                             : cudnnConvolutionForward(h, &one, d.x, o.x, d.w, o.w, d.conv, (cudnnConvolutionFwdAlgo_t)p->algo, wsp,
                                                       p->workspace, &zero, d.y, o.y);
        if (s != CUDNN_STATUS_SUCCESS) rc = cuda_fail(be, cudnn_error_code(s), "conv2d forward: cuDNN failed (%s)", cudnnGetErrorString(s));
    }
    conv_desc_free(&d);
    if (rc) return rc;
    int64_t n = sdt_tensor_numel(out), C = out->shape[1], S = out->shape[2] * out->shape[3];
    if (b) {
        if (cuda_add_bias(be, o.y, o.dtype, b->data, b->dtype, out->shape[0], C, S)) return -1;
    }
    if (o.y_copied) return cuda_convert_raw(be, out->data, out->dtype, o.y, SDT_F32, n);
    return 0;
}

int cuda_conv2d_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dw, sdt_tensor *db, const sdt_tensor *dout,
                         const sdt_tensor *x, const sdt_tensor *w, int stride, int pad)
{
    cudnnHandle_t h = ctx_of(be)->cudnn;
    float one = 1.0f;
    if (db) {
        /* db[c] += sum over b, s of dy[b, c, s] */
        if (cuda_channel_sums(be, db->data, db->dtype, dout->data, dout->dtype, dout->shape[0], dout->shape[1],
                              dout->shape[2] * dout->shape[3]))
            return -1;
    }
    if (dx && conv_backward_data(be, dx, dout, w, stride, pad, false)) return -1;
    if (dw) { /* weight gradients accumulate in f32 */
        const float *x32 = cuda_read_f32(be, x, 0), *dy32 = cuda_read_f32(be, dout, 3);
        float *dw32 = (float *)dw->data;
        if (dw->dtype != SDT_F32) {
            int64_t n = sdt_tensor_numel(dw);
            dw32 = (float *)cuda_scratch(be, 5, (size_t)n * sizeof(float));
            if (!dw32 || cuda_convert_raw(be, dw32, SDT_F32, dw->data, dw->dtype, n)) return -1;
        }
        if (!x32 || !dy32) return -1;
        conv_desc d;
        int rc = conv_desc_make(be, &d, SDT_F32, x->shape, w->shape, dout->shape, stride, pad);
        if (!rc) {
            void *wsp = NULL;
            const struct conv_plan *p = conv_plan(be, CONV_BWD_FILTER, SDT_F32, x->shape, w->shape, stride, pad, &d, &wsp);
            cudnnStatus_t s = !p ? CUDNN_STATUS_ALLOC_FAILED
                                 : cudnnConvolutionBackwardFilter(h, &one, d.x, x32, d.y, dy32, d.conv,
                                                                  (cudnnConvolutionBwdFilterAlgo_t)p->algo, wsp, p->workspace,
                                                                  &one, d.w, dw32);
            if (s != CUDNN_STATUS_SUCCESS) rc = cuda_fail(be, cudnn_error_code(s), "conv2d backward (filter): cuDNN failed (%s)", cudnnGetErrorString(s));
        }
        conv_desc_free(&d);
        if (rc) return rc;
        if (dw32 != dw->data && cuda_convert_raw(be, dw->data, dw->dtype, dw32, SDT_F32, sdt_tensor_numel(dw))) return -1;
    }
    return 0;
}

int cuda_conv2d_input_grad(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *w, int stride, int pad)
{
    return conv_backward_data(be, dx, dout, w, stride, pad, true);
}
