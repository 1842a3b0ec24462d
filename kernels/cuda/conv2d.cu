/* conv2d.cu - conv2d forward and backward through cuDNN's graph API (one cached execution
 * plan per shape and layout, chosen by cuDNN's heuristics; workspace from scratch). Runs in the
 * tensors' dtype with fp32 compute when x, w and the output agree; otherwise on fp32
 * copies (same layout: a dtype copy moves no element). Each of x, w and y is NCHW or
 * channels-last (tensor.h) on its own: the graph API takes each tensor's strides, so the
 * UNet's conv_in reads NCHW latents into NHWC activations without a transpose.
 * Semantics: kernels/ops.h. */
#include "cuda_ops.h"
#include "cudnn_plan.cuh"

static cudnnDataType_t dnn_type(int dtype)
{
    return dtype == SDT_F16 ? CUDNN_DATA_HALF : dtype == SDT_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

/* One execution plan per convolution (direction, dtype, shapes, stride, pad, beta and the operands'
 * alignment), chosen once by cuDNN's heuristics and remembered in the backend: the graph API's
 * plans launch with a few microseconds of host work, where the legacy API spent 50-100 us a call
 * and picked slow kernels for 1x1 and small convolutions (bench/NOTES.md run 23). */
typedef enum conv_dir { CONV_FWD = 0, CONV_BWD_DATA = 1, CONV_BWD_FILTER = 2 } conv_dir;

struct conv_plan {
    int dir, dtype, stride, pad, accumulate, align;
    int layout; /* CONV_CL_X | CONV_CL_W | CONV_CL_Y: which operands are channels-last */
    int64_t xs[4], ws[4];
    dnn_desc plan; /* NULL when nchw_fallback */
    size_t workspace;
    bool nchw_fallback; /* cuDNN had no plan for this layout mix: conv_run_nchw runs it */
};

/* Larger workspaces are skipped for the next candidate plan: the workspace is scratch held all run. */
#define CONV_WORKSPACE_CAP ((size_t)256 << 20)

enum { UID_X = 'x', UID_W = 'w', UID_Y = 'y' };
enum { CONV_CL_X = 1, CONV_CL_W = 2, CONV_CL_Y = 4 };

/* The layout bits of x, w and y (the forward's names: dx is x, dy is y, dw is w). */
static int conv_layout(const sdt_tensor *x, const sdt_tensor *w, const sdt_tensor *y)
{
    return (x->channels_last ? CONV_CL_X : 0) | (w->channels_last ? CONV_CL_W : 0) | (y->channels_last ? CONV_CL_Y : 0);
}

static struct conv_plan *plan_lookup(cuda_ctx *c, const struct conv_plan *key)
{
    for (int i = 0; i < c->n_conv_plans; i++) {
        struct conv_plan *p = &c->conv_plans[i];
        if (p->dir == key->dir && p->dtype == key->dtype && p->stride == key->stride && p->pad == key->pad &&
            p->accumulate == key->accumulate && p->align == key->align && p->layout == key->layout &&
            !memcmp(p->xs, key->xs, sizeof p->xs) && !memcmp(p->ws, key->ws, sizeof p->ws))
            return p;
    }
    return NULL;
}

void cuda_conv_plans_free(cuda_ctx *c)
{
    for (int i = 0; i < c->n_conv_plans; i++)
        if (c->conv_plans[i].plan) cudnnBackendDestroyDescriptor(c->conv_plans[i].plan);
    free(c->conv_plans);
    c->conv_plans = NULL;
    c->n_conv_plans = c->cap_conv_plans = 0;
}

/* The largest power of two up to 16 dividing every operand's address: plans are made for it. */
static int operands_align(const void *a, const void *b, const void *c)
{
    uintptr_t v = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c;
    int align = 16;
    while (align > 1 && (v & (uintptr_t)(align - 1))) align /= 2;
    return align;
}

/* dims are the logical [N, C, H, W] (a filter's [K, C, R, S]); channels_last: memory N, H, W, C (K, R, S, C). */
static cudnnStatus_t make_tensor(dnn_pool *p, dnn_desc *t, int64_t uid, int dtype, const int64_t *dims,
                                 bool channels_last, int64_t align)
{
    int64_t strides[4] = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
    if (channels_last) {
        strides[1] = 1;
        strides[2] = dims[3] * dims[1];
        strides[3] = dims[1];
    }
    return dnn_tensor(p, t, uid, dnn_type(dtype), 4, dims, strides, align, false, false);
}

static cudnnStatus_t make_conv(dnn_pool *p, dnn_desc *d, int stride, int pad)
{
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    int64_t dims = 2, ones[2] = {1, 1}, strides[2] = {stride, stride}, pads[2] = {pad, pad};
    cudnnStatus_t s = dnn_pool_new(p, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, d);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*d, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*d, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*d, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, ones);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*d, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, strides);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*d, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pads);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*d, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pads);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(*d);
    return s;
}

/* The one operation of the plan's graph: its x, w and y attributes by direction. */
static cudnnStatus_t make_operation(dnn_pool *p, dnn_desc *op, conv_dir dir, dnn_desc x, dnn_desc w, dnn_desc y,
                                    dnn_desc conv, float beta)
{
    static const cudnnBackendDescriptorType_t type[3] = {
        CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
        CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
        CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR};
    static const cudnnBackendAttributeName_t attr[3][6] = {
        {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
        {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
        {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA}};
    const cudnnBackendAttributeName_t *a = attr[dir];
    float alpha = 1.0f;
    cudnnStatus_t s = dnn_pool_new(p, type[dir], op);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendSetAttribute(*op, a[0], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendSetAttribute(*op, a[1], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendSetAttribute(*op, a[2], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendSetAttribute(*op, a[3], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendSetAttribute(*op, a[4], CUDNN_TYPE_FLOAT, 1, &alpha);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendSetAttribute(*op, a[5], CUDNN_TYPE_FLOAT, 1, &beta);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(*op);
    return s;
}

/* Builds the one-operation graph of key and its plan (cudnn_plan.cuh: deterministic engines, exact
 * fp32 math for f32 data as the CPU reference computes it). */
static cudnnStatus_t plan_build(cudnnHandle_t h, struct conv_plan *key, const int64_t *ys)
{
    dnn_pool pool;
    memset(&pool, 0, sizeof pool);
    dnn_desc x, w, y, conv, op;
    cudnnStatus_t s = make_tensor(&pool, &x, UID_X, key->dtype, key->xs, key->layout & CONV_CL_X, key->align);
    if (s == CUDNN_STATUS_SUCCESS)
        s = make_tensor(&pool, &w, UID_W, key->dtype, key->ws, key->layout & CONV_CL_W, key->align);
    if (s == CUDNN_STATUS_SUCCESS)
        s = make_tensor(&pool, &y, UID_Y, key->dtype, ys, key->layout & CONV_CL_Y, key->align);
    if (s == CUDNN_STATUS_SUCCESS) s = make_conv(&pool, &conv, key->stride, key->pad);
    if (s == CUDNN_STATUS_SUCCESS)
        s = make_operation(&pool, &op, (conv_dir)key->dir, x, w, y, conv, key->accumulate ? 1.0f : 0.0f);
    if (s == CUDNN_STATUS_SUCCESS)
        s = dnn_plan_for_ops(&pool, h, &op, 1, key->dtype == SDT_F32, CONV_WORKSPACE_CAP, &key->plan, &key->workspace);
    dnn_pool_free(&pool);
    return s;
}

static int conv_run(sdt_backend *be, conv_dir dir, int dtype, const int64_t *xs, const int64_t *ws, const int64_t *ys,
                    int layout, int stride, int pad, bool accumulate, const void *x, const void *w, const void *y,
                    const char *what);

/* A convolution whose layout mix cuDNN offers no plan for (an engine list without NHWC kernels for
 * this dtype or channel count, say) runs NCHW on row-major copies of its channels-last operands, in
 * scratch slots 8-10 (attention's, free during a convolution): correct everywhere, at NCHW's speed
 * plus the transposes. The operand the direction writes (y, dx or dw) is copied in only when it
 * accumulates, and moved back after. */
static int conv_run_nchw(sdt_backend *be, conv_dir dir, int dtype, const int64_t *xs, const int64_t *ws,
                         const int64_t *ys, int layout, int stride, int pad, bool accumulate, const void *x,
                         const void *w, const void *y, const char *what)
{
    const int64_t *dims[3] = {xs, ws, ys};
    const void *ptr[3] = {x, w, y};
    const int bit[3] = {CONV_CL_X, CONV_CL_W, CONV_CL_Y};
    const int out = dir == CONV_FWD ? 2 : dir == CONV_BWD_DATA ? 0 : 1;
    const void *copy[3];
    for (int i = 0; i < 3; i++) {
        copy[i] = ptr[i];
        if (!(layout & bit[i])) continue;
        const int64_t n = dims[i][0], C = dims[i][1], S = dims[i][2] * dims[i][3];
        void *buf = cuda_scratch(be, 8 + i, (size_t)(n * C * S) * sdt_dtype_size((sdt_dtype)dtype));
        if (!buf) return -1;
        /* channels-last [n, S, C] -> row-major [n, C, S] */
        if ((i != out || accumulate) && cuda_transpose_raw(be, buf, dtype, ptr[i], dtype, n, S, C, 0)) return -1;
        copy[i] = buf;
    }
    if (conv_run(be, dir, dtype, xs, ws, ys, 0, stride, pad, accumulate, copy[0], copy[1], copy[2], what)) return -1;
    if (!(layout & bit[out])) return 0;
    const int64_t n = dims[out][0], C = dims[out][1], S = dims[out][2] * dims[out][3];
    return cuda_transpose_raw(be, (void *)ptr[out], dtype, copy[out], dtype, n, C, S, 0);
}

/* Runs one convolution of direction dir: x, w and y are the forward's names (for backward data x
 * is dx and y is dy; for backward filter w is dw), layout their conv_layout bits. accumulate: y
 * (dx, dw) += instead of =. */
static int conv_run(sdt_backend *be, conv_dir dir, int dtype, const int64_t *xs, const int64_t *ws, const int64_t *ys,
                    int layout, int stride, int pad, bool accumulate, const void *x, const void *w, const void *y,
                    const char *what)
{
    cuda_ctx *c = ctx_of(be);
    struct conv_plan key;
    memset(&key, 0, sizeof key);
    key.dir = dir;
    key.dtype = dtype;
    key.stride = stride;
    key.pad = pad;
    key.accumulate = accumulate;
    key.align = operands_align(x, w, y);
    key.layout = layout;
    memcpy(key.xs, xs, sizeof key.xs);
    memcpy(key.ws, ws, sizeof key.ws);
    struct conv_plan *p = plan_lookup(c, &key);
    if (!p && cuda_capture_refuses(be, "building a cuDNN convolution plan")) return -1;
    if (!p) {
        if (c->n_conv_plans == c->cap_conv_plans) {
            int cap = c->cap_conv_plans ? 2 * c->cap_conv_plans : 64;
            struct conv_plan *np = (struct conv_plan *)realloc(c->conv_plans, (size_t)cap * sizeof(*np));
            if (!np) return cuda_fail(be, SDT_ERR_OUT_OF_MEMORY, "%s: out of host memory", what);
            c->conv_plans = np;
            c->cap_conv_plans = cap;
        }
        cudnnStatus_t s = plan_build(c->cudnn, &key, ys);
        key.nchw_fallback = s != CUDNN_STATUS_SUCCESS && layout != 0;
        if (s != CUDNN_STATUS_SUCCESS && !key.nchw_fallback)
            return cuda_fail(
                be, cudnn_error_code(s),
                "%s: cuDNN has no plan for a %lldx%lldx%lldx%lld %s input and a %lldx%lldx%lldx%lld %s filter (%s)",
                what, (long long)xs[0], (long long)xs[1], (long long)xs[2], (long long)xs[3],
                layout & CONV_CL_X ? "NHWC" : "NCHW", (long long)ws[0], (long long)ws[1], (long long)ws[2],
                (long long)ws[3], layout & CONV_CL_W ? "KRSC" : "KCRS", cudnnGetErrorString(s));
        if (key.nchw_fallback) key.plan = NULL;
        p = &c->conv_plans[c->n_conv_plans++];
        *p = key;
    }
    if (p->nchw_fallback)
        return conv_run_nchw(be, dir, dtype, xs, ws, ys, layout, stride, pad, accumulate, x, w, y, what);
    void *workspace = p->workspace ? cuda_scratch(be, CUDA_CONV_WORKSPACE_SLOT, p->workspace) : NULL;
    if (p->workspace && !workspace) return -1;
    const int64_t uids[3] = {UID_X, UID_W, UID_Y};
    void *const ptrs[3] = {(void *)x, (void *)w, (void *)y};
    cudnnStatus_t s = dnn_execute(c->cudnn, p->plan, 3, uids, ptrs, workspace);
    if (s != CUDNN_STATUS_SUCCESS)
        return cuda_fail(be, cudnn_error_code(s), "%s: cuDNN failed (%s)", what, cudnnGetErrorString(s));
    return 0;
}

/* Operands in one dtype: the tensors' own when x, w and y agree, else f32 copies in scratch. */
typedef struct conv_ops {
    const void *x, *w;
    void *y;
    int dtype;
    bool y_copied;
} conv_ops;

static int conv_operands(sdt_backend *be, const sdt_tensor *x, const sdt_tensor *w, sdt_tensor *y, bool load_y,
                         conv_ops *o)
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
        if (y->dtype == SDT_F32)
            o->y = y->data;
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
static int conv_backward_data(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *w, int stride,
                              int pad, bool overwrite)
{
    float beta = 1.0f;
    bool native = dx->dtype == w->dtype && dout->dtype == dx->dtype;
    int dt = native ? dx->dtype : SDT_F32;
    const void *wp = native ? w->data : cuda_read_f32(be, w, 1);
    const void *dyp = native ? dout->data : cuda_read_f32(be, dout, 3);
    if (!wp || !dyp) return -1;
    if (native && overwrite)
        beta = 0.0f;
    else if (overwrite && cuda_zero(be, dx))
        return -1;
    float *dx32 = NULL;
    void *dxp = dx->data;
    if (!native && dx->dtype != SDT_F32) {
        int64_t n = sdt_tensor_numel(dx);
        dx32 = (float *)cuda_scratch(be, 4, (size_t)n * sizeof(float));
        if (!dx32 || cuda_convert_raw(be, dx32, SDT_F32, dx->data, dx->dtype, n)) return -1;
        dxp = dx32;
    }
    if (conv_run(be, CONV_BWD_DATA, dt, dx->shape, w->shape, dout->shape, conv_layout(dx, w, dout), stride, pad,
                 beta != 0.0f, dxp, wp, dyp, "conv2d backward (data)"))
        return -1;
    if (dx32 && cuda_convert_raw(be, dx->data, dx->dtype, dx32, SDT_F32, sdt_tensor_numel(dx))) return -1;
    return 0;
}

int cuda_conv2d_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w, const sdt_tensor *b,
                        int stride, int pad)
{
    conv_ops o;
    if (conv_operands(be, x, w, out, false, &o)) return -1;
    if (conv_run(be, CONV_FWD, o.dtype, x->shape, w->shape, out->shape, conv_layout(x, w, out), stride, pad, false, o.x,
                 o.w, o.y, "conv2d forward"))
        return -1;
    int64_t n = sdt_tensor_numel(out), C = out->shape[1], S = out->shape[2] * out->shape[3];
    if (b) { /* over channels of S values, or (channels-last) over rows of C values */
        if (out->channels_last ? cuda_add_bias(be, o.y, o.dtype, b->data, b->dtype, out->shape[0] * S, C, 1)
                               : cuda_add_bias(be, o.y, o.dtype, b->data, b->dtype, out->shape[0], C, S))
            return -1;
    }
    if (o.y_copied) return cuda_convert_raw(be, out->data, out->dtype, o.y, SDT_F32, n);
    return 0;
}

int cuda_conv2d_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dw, sdt_tensor *db, const sdt_tensor *dout,
                         const sdt_tensor *x, const sdt_tensor *w, int stride, int pad)
{
    if (db) {
        /* db[c] += sum over b, s of dy[b, c, s] (channels-last: one image of B*S rows) */
        int64_t B = dout->shape[0], C = dout->shape[1], S = dout->shape[2] * dout->shape[3];
        if (dout->channels_last ? cuda_channel_sums_nhwc(be, db->data, db->dtype, dout->data, dout->dtype, 1, C, B * S)
                                : cuda_channel_sums(be, db->data, db->dtype, dout->data, dout->dtype, B, C, S))
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
        if (conv_run(be, CONV_BWD_FILTER, SDT_F32, x->shape, w->shape, dout->shape, conv_layout(x, dw, dout), stride,
                     pad, true, x32, dw32, dy32, "conv2d backward (filter)"))
            return -1;
        if (dw32 != dw->data && cuda_convert_raw(be, dw->data, dw->dtype, dw32, SDT_F32, sdt_tensor_numel(dw)))
            return -1;
    }
    return 0;
}

int cuda_conv2d_input_grad(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *w, int stride,
                           int pad)
{
    return conv_backward_data(be, dx, dout, w, stride, pad, true);
}
