/* test_channels_last - every op that takes channels-last tensors (tensor.h: NHWC memory, the
 * logical shape [N, C, H, W]) gives exactly what it gives on row-major (NCHW) tensors: the
 * same values, read back through this test's own index formula, bit for bit (the CPU backend
 * stages channels-last operands through NCHW copies, moving bytes and rounding nothing):
 * conv2d forward, backward and input gradient in every combination of x, w and output layouts;
 * groupnorm (plain and with the fused SiLU) forward and backward; add_channel, concat_channels
 * and upsample_nearest2x forward and backward; the elementwise add and axpy. Accumulating
 * gradients start from random values. f32 and f16 storage. Mismatched layouts, and
 * channels-last tensors given to ops that read [.., C] rows, fail with a sentence. */
#include "kernel_test.h"

#include "host_convert.h"

static sdt_test_rng rng;

/* The memory index of NCHW element (b, c, y, x) of a [N, C, H, W] tensor in either layout. */
static int64_t at(const int64_t *d, bool cl, int64_t b, int64_t c, int64_t y, int64_t x)
{
    return cl ? ((b * d[2] + y) * d[3] + x) * d[1] + c : ((b * d[1] + c) * d[2] + y) * d[3] + x;
}

/* A CPU tensor of dtype dt (ndim dims) holding the NCHW-ordered values v, laid out channels-last when cl
 * (4-D only). */
static sdt_tensor put(const float *v, sdt_dtype dt, int ndim, const int64_t *d, bool cl)
{
    sdt_tensor t = sdt_tensor_make(NULL, dt, SDT_DEVICE_CPU, ndim, d);
    int64_t n = sdt_tensor_numel(&t);
    float *tmp = kt_alloc((size_t)n * sizeof(float));
    if (ndim == 4) {
        for (int64_t b = 0; b < d[0]; b++)
            for (int64_t c = 0; c < d[1]; c++)
                for (int64_t y = 0; y < d[2]; y++)
                    for (int64_t x = 0; x < d[3]; x++) tmp[at(d, cl, b, c, y, x)] = v[at(d, false, b, c, y, x)];
    } else {
        memcpy(tmp, v, (size_t)n * sizeof(float));
    }
    t.data = kt_alloc(sdt_tensor_nbytes(&t));
    sdt_store_f32(tmp, t.data, dt, n);
    t.channels_last = cl;
    free(tmp);
    return t;
}

/* t's values in NCHW order, as floats. */
static float *get(const sdt_tensor *t)
{
    int64_t n = sdt_tensor_numel(t);
    float *raw = kt_alloc((size_t)n * sizeof(float)), *v = kt_alloc((size_t)n * sizeof(float));
    sdt_load_f32(t->data, t->dtype, raw, n);
    if (t->ndim == 4) {
        const int64_t *d = t->shape;
        for (int64_t b = 0; b < d[0]; b++)
            for (int64_t c = 0; c < d[1]; c++)
                for (int64_t y = 0; y < d[2]; y++)
                    for (int64_t x = 0; x < d[3]; x++)
                        v[at(d, false, b, c, y, x)] = raw[at(d, t->channels_last, b, c, y, x)];
    } else {
        memcpy(v, raw, (size_t)n * sizeof(float));
    }
    free(raw);
    return v;
}

/* A random tensor: the same values in both layouts (ref row-major, cl channels-last when asked). */
typedef struct both {
    sdt_tensor ref, cl;
} both;

static both random_both(sdt_dtype dt, int ndim, const int64_t *d, bool cl, double scale)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= d[i];
    float *v = kt_randn(&rng, n, scale);
    both b = {put(v, dt, ndim, d, false), put(v, dt, ndim, d, cl && ndim == 4)};
    free(v);
    return b;
}
#define RANDOM(dt, cl, scale, ...)                                                                                     \
    random_both(dt, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}, cl, scale)

static void drop(both *b)
{
    free(b->ref.data);
    free(b->cl.data);
}

/* The two layouts' values are the same bits. */
static void same(const both *b, const char *what, const char *which)
{
    int64_t n = sdt_tensor_numel(&b->ref);
    float *x = get(&b->ref), *y = get(&b->cl);
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (memcmp(&x[i], &y[i], sizeof(float))) bad = i;
    CHECK(bad < 0, "%s: %s differs between layouts at NCHW element %lld: %.9g vs %.9g", what, which, (long long)bad,
          bad >= 0 ? x[bad] : 0.0, bad >= 0 ? y[bad] : 0.0);
    free(x);
    free(y);
}

#define RUN(be, call, what) CHECK((call) == 0, "%s: %s", what, be->error.message)

/* conv2d with x, w and the output each row-major or channels-last (layout bits 1, 2, 4). */
static void check_conv(sdt_backend *be, sdt_dtype dt, int layout, int k, int stride, int64_t C, int64_t OC)
{
    const bool xl = layout & 1, wl = layout & 2, yl = layout & 4;
    const int pad = k / 2;
    const int64_t B = 2, H = 7, W = 6, OH = (H + 2 * pad - k) / stride + 1, OW = (W + 2 * pad - k) / stride + 1;
    char what[96];
    snprintf(what, sizeof what, "conv2d %dx%d stride %d layout x%d w%d y%d %s", k, k, stride, xl, wl, yl,
             sdt_dtype_name(dt));
    both x = RANDOM(dt, xl, 1, B, C, H, W), w = RANDOM(dt, wl, 0.3, OC, C, k, k), bias = RANDOM(SDT_F32, false, 1, OC);
    both y = RANDOM(dt, yl, 1, B, OC, OH, OW);
    RUN(be, be->conv2d_forward(be, &y.ref, &x.ref, &w.ref, &bias.ref, stride, pad), what);
    RUN(be, be->conv2d_forward(be, &y.cl, &x.cl, &w.cl, &bias.ref, stride, pad), what);
    same(&y, what, "the output");
    both dy = RANDOM(dt, yl, 1, B, OC, OH, OW), dx = RANDOM(dt, xl, 1, B, C, H, W),
         dw = RANDOM(SDT_F32, wl, 1, OC, C, k, k);
    both db = RANDOM(SDT_F32, false, 1, OC);
    RUN(be, be->conv2d_backward(be, &dx.ref, &dw.ref, &db.ref, &dy.ref, &x.ref, &w.ref, stride, pad), what);
    RUN(be, be->conv2d_backward(be, &dx.cl, &dw.cl, &db.cl, &dy.cl, &x.cl, &w.cl, stride, pad), what);
    same(&dx, what, "dx (accumulated)");
    same(&dw, what, "dw (accumulated)");
    same(&db, what, "db (accumulated)");
    both gx = RANDOM(dt, xl, 1, B, C, H, W);
    RUN(be, be->conv2d_input_grad(be, &gx.ref, &dy.ref, &w.ref, stride, pad), what);
    RUN(be, be->conv2d_input_grad(be, &gx.cl, &dy.cl, &w.cl, stride, pad), what);
    same(&gx, what, "the input gradient");
    drop(&x), drop(&w), drop(&bias), drop(&y), drop(&dy), drop(&dx), drop(&dw), drop(&db), drop(&gx);
}

static void check_groupnorm(sdt_backend *be, sdt_dtype dt, sdt_activation act, int64_t B, int64_t C, int64_t H,
                            int64_t W, int G)
{
    char what[96];
    snprintf(what, sizeof what, "groupnorm %lldx%lldx%lldx%lld G%d%s %s", (long long)B, (long long)C, (long long)H,
             (long long)W, G, act == SDT_ACT_SILU ? " + silu" : "", sdt_dtype_name(dt));
    both x = RANDOM(dt, true, 2, B, C, H, W), out = RANDOM(dt, true, 1, B, C, H, W);
    both gamma = RANDOM(dt, false, 1, C), beta = RANDOM(dt, false, 1, C);
    both mean = RANDOM(SDT_F32, false, 1, B, G), rstd = RANDOM(SDT_F32, false, 1, B, G);
    RUN(be, be->groupnorm_forward(be, &out.ref, &mean.ref, &rstd.ref, &x.ref, &gamma.ref, &beta.ref, G, 1e-5f, act),
        what);
    RUN(be, be->groupnorm_forward(be, &out.cl, &mean.cl, &rstd.cl, &x.cl, &gamma.ref, &beta.ref, G, 1e-5f, act), what);
    same(&out, what, "the output");
    same(&mean, what, "mean");
    same(&rstd, what, "rstd");
    both dy = RANDOM(dt, true, 1, B, C, H, W), dx = RANDOM(dt, true, 1, B, C, H, W);
    both dg = RANDOM(SDT_F32, false, 1, C), dbeta = RANDOM(SDT_F32, false, 1, C);
    RUN(be,
        be->groupnorm_backward(be, &dx.ref, &dg.ref, &dbeta.ref, &dy.ref, &x.ref, &gamma.ref, &beta.ref, &mean.ref,
                               &rstd.ref, G, act),
        what);
    RUN(be,
        be->groupnorm_backward(be, &dx.cl, &dg.cl, &dbeta.cl, &dy.cl, &x.cl, &gamma.ref, &beta.ref, &mean.ref,
                               &rstd.ref, G, act),
        what);
    same(&dx, what, "dx (accumulated)");
    same(&dg, what, "dgamma");
    same(&dbeta, what, "dbeta");
    drop(&x), drop(&out), drop(&gamma), drop(&beta), drop(&mean), drop(&rstd), drop(&dy), drop(&dx), drop(&dg),
        drop(&dbeta);
}

/* add_channel, concat_channels (both parts; one part), upsample_nearest2x, add and axpy. */
static void check_rest(sdt_backend *be, sdt_dtype dt, int64_t H, int64_t W)
{
    char what[64];
    snprintf(what, sizeof what, "%lldx%lld %s", (long long)H, (long long)W, sdt_dtype_name(dt));
    both h = RANDOM(dt, true, 1, 2, 6, H, W), v = RANDOM(dt, false, 1, 2, 6), dv = RANDOM(SDT_F32, false, 1, 2, 6);
    RUN(be, be->add_channel_forward(be, &h.ref, &v.ref), what);
    RUN(be, be->add_channel_forward(be, &h.cl, &v.ref), what);
    same(&h, what, "add_channel's output");
    RUN(be, be->add_channel_backward(be, &dv.ref, &h.ref), what);
    RUN(be, be->add_channel_backward(be, &dv.cl, &h.cl), what);
    same(&dv, what, "add_channel's dv");

    both a = RANDOM(dt, true, 1, 2, 4, H, W), cat = RANDOM(dt, true, 1, 2, 10, H, W),
         da = RANDOM(dt, true, 1, 2, 4, H, W);
    both dh = RANDOM(dt, true, 1, 2, 6, H, W);
    RUN(be, be->concat_channels_forward(be, &cat.ref, &a.ref, &h.ref), what);
    RUN(be, be->concat_channels_forward(be, &cat.cl, &a.cl, &h.cl), what);
    same(&cat, what, "concat's output");
    RUN(be, be->concat_channels_backward(be, &da.ref, &dh.ref, &cat.ref), what);
    RUN(be, be->concat_channels_backward(be, &da.cl, &dh.cl, &cat.cl), what);
    same(&da, what, "concat's da");
    same(&dh, what, "concat's db");
    RUN(be, be->concat_channels_backward(be, NULL, &dh.ref, &cat.ref), what);
    RUN(be, be->concat_channels_backward(be, NULL, &dh.cl, &cat.cl), what);
    same(&dh, what, "concat's db alone");

    both up = RANDOM(dt, true, 1, 2, 6, 2 * H, 2 * W), dup = RANDOM(dt, true, 1, 2, 6, H, W);
    RUN(be, be->upsample_nearest2x_forward(be, &up.ref, &h.ref), what);
    RUN(be, be->upsample_nearest2x_forward(be, &up.cl, &h.cl), what);
    same(&up, what, "upsample's output");
    RUN(be, be->upsample_nearest2x_backward(be, &dup.ref, &up.ref), what);
    RUN(be, be->upsample_nearest2x_backward(be, &dup.cl, &up.cl), what);
    same(&dup, what, "upsample's dx");

    RUN(be, be->add_forward(be, &dh.ref, &dh.ref, &h.ref), what);
    RUN(be, be->add_forward(be, &dh.cl, &dh.cl, &h.cl), what);
    same(&dh, what, "add");
    RUN(be, be->axpy(be, &dh.ref, 0.5f, &h.ref), what);
    RUN(be, be->axpy(be, &dh.cl, 0.5f, &h.cl), what);
    same(&dh, what, "axpy");
    drop(&h), drop(&v), drop(&dv), drop(&a), drop(&cat), drop(&da), drop(&dh), drop(&up), drop(&dup);
}

/* The op fails (nonzero) with a sentence containing want. */
static void refused(sdt_backend *be, int rc, const char *want, const char *what)
{
    CHECK(rc != 0, "%s: accepted", what);
    CHECK(rc == 0 || strstr(be->error.message, want) != NULL, "%s: sentence '%s' lacks '%s'", what, be->error.message,
          want);
}

static void check_refusals(sdt_backend *be)
{
    both x = RANDOM(SDT_F32, true, 1, 2, 8, 4, 4), y = RANDOM(SDT_F32, true, 1, 2, 8, 4, 4);
    both w = RANDOM(SDT_F32, false, 1, 5, 4), mean = RANDOM(SDT_F32, false, 1, 2, 2),
         rstd = RANDOM(SDT_F32, false, 1, 2, 2);
    both f = RANDOM(SDT_F32, true, 1, 8, 8, 1, 1);
    sdt_tensor o2 = y.cl;
    o2.shape[3] = 5; /* linear's output for w [5, 4] */
    refused(be, be->linear_forward(be, &o2, &x.cl, &w.ref, NULL),
            "is channels-last (NHWC memory), which this op does not read", "linear on a channels-last x");
    refused(be, be->groupnorm_forward(be, &y.ref, &mean.ref, &rstd.ref, &x.cl, NULL, NULL, 2, 1e-5f, SDT_ACT_IDENTITY),
            "is row-major (NCHW) but 'x' is channels-last (NHWC)", "groupnorm out and x in different layouts");
    refused(be, be->add_forward(be, &y.ref, &x.cl, &x.cl), "pass both in one layout", "add of two layouts");
    both big = RANDOM(SDT_F32, true, 1, 2, 8, 8, 8);
    refused(be, be->upsample_nearest2x_backward(be, &x.ref, &big.cl), "pass both in one layout",
            "upsample of two layouts");
    drop(&big);
    sdt_tensor t3 = x.cl;
    t3.ndim = 3;
    t3.shape[2] = 16;
    refused(be, be->scale(be, &t3, 2.0f), "only a 4-D [N, C, H, W] tensor can be", "a 3-D channels-last tensor");
    both d = RANDOM(SDT_F32, true, 1, 2, 8, 4, 4);
    refused(be, be->conv2d_backward(be, &d.ref, NULL, NULL, &y.cl, &x.cl, &f.cl, 1, 0), "pass both in one layout",
            "conv2d dx and x in different layouts");
    drop(&x), drop(&y), drop(&w), drop(&mean), drop(&rstd), drop(&d), drop(&f);
}

/* The host permutation (host_convert.h) against this test's index formula, both ways, 2- and 4-byte elements. */
static void check_permute(void)
{
    const int64_t d[4] = {3, 5, 2, 7};
    int64_t n = 3 * 5 * 2 * 7;
    uint32_t *src = kt_alloc((size_t)n * 4), *cl = kt_alloc((size_t)n * 4), *back = kt_alloc((size_t)n * 4);
    uint16_t *s16 = kt_alloc((size_t)n * 2), *c16 = kt_alloc((size_t)n * 2);
    for (int64_t i = 0; i < n; i++) src[i] = (uint32_t)(i * 2654435761u), s16[i] = (uint16_t)(i * 40503u);
    sdt_host_permute_channels(src, cl, 4, d[0], d[1], d[2] * d[3], true);
    sdt_host_permute_channels(s16, c16, 2, d[0], d[1], d[2] * d[3], true);
    int bad = 0;
    for (int64_t b = 0; b < d[0]; b++)
        for (int64_t c = 0; c < d[1]; c++)
            for (int64_t y = 0; y < d[2]; y++)
                for (int64_t x = 0; x < d[3]; x++) {
                    bad += cl[at(d, true, b, c, y, x)] != src[at(d, false, b, c, y, x)];
                    bad += c16[at(d, true, b, c, y, x)] != s16[at(d, false, b, c, y, x)];
                }
    CHECK(bad == 0, "sdt_host_permute_channels: %d elements misplaced", bad);
    sdt_host_permute_channels(cl, back, 4, d[0], d[1], d[2] * d[3], false);
    CHECK(!memcmp(back, src, (size_t)n * 4), "sdt_host_permute_channels: the way back is not the inverse");
    free(src), free(cl), free(back), free(s16), free(c16);
}

int main(void)
{
    rng = sdt_test_rng_from_env("channels_last");
    sdt_backend *be = kt_backend();
    check_permute();
    const sdt_dtype dts[2] = {SDT_F32, SDT_F16};
    for (int i = 0; i < 2; i++) {
        for (int layout = 0; layout < 8; layout++) check_conv(be, dts[i], layout, 3, 1, 5, 6);
        check_conv(be, dts[i], 7, 3, 2, 5, 6);
        check_conv(be, dts[i], 7, 1, 1, 8, 4);
        check_conv(be, dts[i], 3, 3, 1, 9, 8); /* conv_out's form: channels-last x and filter, NCHW output */
        for (int a = 0; a < 2; a++) {
            sdt_activation act = a ? SDT_ACT_SILU : SDT_ACT_IDENTITY;
            check_groupnorm(be, dts[i], act, 2, 12, 5, 3, 4);
            check_groupnorm(be, dts[i], act, 1, 20, 4, 4, 2);
        }
        check_rest(be, dts[i], 3, 5);
    }
    check_refusals(be);
    be->destroy(be);
    return sdt_test_finish("channels_last");
}
