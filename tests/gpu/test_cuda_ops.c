/* test_cuda_ops.c - every CUDA op against the CPU reference backend, forward and
 * backward (gradients pre-filled, so accumulation is checked too; an op that writes its gradient,
 * attention_backward and geglu_backward, gets NaN there, so a kernel that reads it fails), in f32 and
 * with f16/bf16 storage; the fused attention at every head dim the models use;
 * the convolutional ops again on channels-last tensors (tensor.h: the NHWC kernels
 * against the CPU's, which stage through NCHW copies: tests/kernels/test_channels_last.c),
 * and conv2d in every mix of x, filter and output layouts.
 * Skips (77) when the CUDA module or a GPU is absent. */
#include <math.h>
#include <string.h>

#include "gpu_module.h"
#include "ops.h"
#include "sdt_test.h"

static sdt_backend *cpu, *gpu;
static sdt_test_rng rng;
/* When set, make_at marks every 4-D tensor channels-last on both backends: the tests written for
 * NCHW then run the channels-last kernels on the same values. */
static bool g_channels_last;

/* One logical tensor held on both backends; base: the allocations (data may be a view into them). */
typedef struct pair {
    sdt_tensor c, g;
    void *cbase, *gbase;
} pair;

/* offset > 0: the tensor starts offset elements into its allocation, a view whose data is not
 * 16-byte aligned when offset * element size is not a multiple of 16 (the kernels' scalar path). */
static pair make_at(sdt_dtype dt, int ndim, const int64_t *shape, double scale, int64_t offset)
{
    pair p;
    p.c = sdt_tensor_make(NULL, dt, SDT_DEVICE_CPU, ndim, shape);
    p.g = sdt_tensor_make(NULL, dt, SDT_DEVICE_CUDA, ndim, shape);
    size_t bytes = sdt_tensor_nbytes(&p.c), skip = (size_t)offset * sdt_dtype_size(dt);
    int64_t n = sdt_tensor_numel(&p.c);
    p.cbase = cpu->alloc(cpu, bytes + skip);
    p.gbase = gpu->alloc(gpu, bytes + skip);
    p.c.data = (char *)p.cbase + skip;
    p.g.data = (char *)p.gbase + skip;
    float *tmp = malloc((size_t)n * sizeof(float));
    sdt_test_fill_normal(&rng, tmp, n, scale);
    if (dt == SDT_I32) {
        for (int64_t i = 0; i < n; i++) ((int32_t *)p.c.data)[i] = (int32_t)(fabsf(tmp[i]) * 1000) % (int32_t)scale;
    } else {
        sdt_store_f32(tmp, p.c.data, dt, n);
    }
    gpu->upload(gpu, p.g.data, p.c.data, bytes);
    free(tmp);
    p.c.channels_last = p.g.channels_last = g_channels_last && ndim == 4;
    return p;
}
static pair make(sdt_dtype dt, int ndim, const int64_t *shape, double scale)
{
    return make_at(dt, ndim, shape, scale, 0);
}
#define MAKE(dt, scale, ...)                                                                                           \
    make(dt, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}, scale)
/* A view offset elements into its allocation (see make_at). */
#define MAKE_AT(offset, dt, scale, ...)                                                                                \
    make_at(dt, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}, scale, offset)

static void drop(pair *p)
{
    cpu->free(cpu, p->cbase);
    gpu->free(gpu, p->gbase);
}

/* Fills both copies with NaN: the gradient of an op that WRITES it (ops.h), so a kernel that reads
 * it, or leaves an element unwritten, shows NaN in the comparison. */
static void fill_garbage(pair *p)
{
    int64_t n = sdt_tensor_numel(&p->c);
    float *tmp = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) tmp[i] = NAN;
    sdt_store_f32(tmp, p->c.data, p->c.dtype, n);
    gpu->upload(gpu, p->g.data, p->c.data, sdt_tensor_nbytes(&p->c));
    free(tmp);
}

/* Whether the GPU copies of two tensors of one shape hold the same bytes (run-to-run determinism). */
static bool same_bits(const pair *a, const pair *b)
{
    size_t bytes = sdt_tensor_nbytes(&a->g);
    char *x = malloc(bytes), *y = malloc(bytes);
    gpu->synchronize(gpu);
    gpu->download(gpu, x, a->g.data, bytes);
    gpu->download(gpu, y, b->g.data, bytes);
    bool same = memcmp(x, y, bytes) == 0;
    free(x);
    free(y);
    return same;
}

/* Max error of the GPU copy against the CPU copy, relative to the larger of the reference's largest magnitude and
 * scale (returned too). A nonzero scale serves a gradient that vanishes analytically (attention's dQ and dK over one
 * key), where the reference holds only rounding and the error is judged against the gradients' own size. */
static double compare_scaled(const pair *p, double tol, double scale, const char *what)
{
    int64_t n = sdt_tensor_numel(&p->c);
    float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
    void *raw = malloc(sdt_tensor_nbytes(&p->g));
    gpu->synchronize(gpu);
    gpu->download(gpu, raw, p->g.data, sdt_tensor_nbytes(&p->g));
    sdt_load_f32(raw, p->g.dtype, a, n);
    sdt_load_f32(p->c.data, p->c.dtype, b, n);
    double num = 0, den = scale > 1e-20 ? scale : 1e-20;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > num || d != d) num = d;
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    CHECK(num / den <= tol, "%s%s: GPU vs CPU relative error %.3g > %.3g", what,
          p->g.channels_last ? " (channels-last)" : "", num / den, tol);
    free(a);
    free(b);
    free(raw);
    return num / den;
}

/* Relative max error of the GPU copy against the CPU copy (returned too). */
static double compare(const pair *p, double tol, const char *what)
{
    return compare_scaled(p, tol, 0, what);
}

/* Largest magnitude of the CPU copy. */
static double max_abs_cpu(const pair *p)
{
    int64_t n = sdt_tensor_numel(&p->c);
    float *b = malloc((size_t)n * sizeof(float));
    sdt_load_f32(p->c.data, p->c.dtype, b, n);
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        if (fabs(b[i]) > m) m = fabs(b[i]);
    free(b);
    return m;
}

#define RUN2(call_c, call_g, what)                                                                                     \
    do {                                                                                                               \
        int rc_c = (call_c), rc_g = (call_g);                                                                          \
        CHECK(rc_c == 0, "%s: CPU failed: %s", what, cpu->error.message);                                              \
        CHECK(rc_g == 0, "%s: GPU failed: %s", what, gpu->error.message);                                              \
    } while (0)

static double tol_for(sdt_dtype dt)
{
    return dt == SDT_F32 ? 2e-4 : dt == SDT_F16 ? 4e-3 : 3e-2;
}

/* x [rows, 45] (as [3, rows / 3, 45]) through OC outputs. */
static void test_linear_rows(sdt_dtype dt, int64_t rows, int64_t OC)
{
    pair x = MAKE(dt, 1, 3, rows / 3, 45), w = MAKE(dt, 0.2, OC, 45), b = MAKE(SDT_F32, 1, OC),
         out = MAKE(dt, 1, 3, rows / 3, OC);
    RUN2(cpu->linear_forward(cpu, &out.c, &x.c, &w.c, &b.c), gpu->linear_forward(gpu, &out.g, &x.g, &w.g, &b.g),
         "linear fwd");
    compare(&out, tol_for(dt), "linear forward");
    pair dout = MAKE(dt, 1, 3, rows / 3, OC), dx = MAKE(dt, 1, 3, rows / 3, 45), dw = MAKE(SDT_F32, 1, OC, 45),
         db = MAKE(SDT_F32, 1, OC);
    RUN2(cpu->linear_backward(cpu, &dx.c, &dw.c, &db.c, &dout.c, &x.c, &w.c),
         gpu->linear_backward(gpu, &dx.g, &dw.g, &db.g, &dout.g, &x.g, &w.g), "linear bwd");
    compare(&dx, tol_for(dt), "linear dx");
    compare(&dw, tol_for(dt), "linear dw");
    compare(&db, tol_for(dt), "linear db");
    drop(&x), drop(&w), drop(&b), drop(&out), drop(&dout), drop(&dx), drop(&dw), drop(&db);
}

static void test_linear(sdt_dtype dt)
{
    test_linear_rows(dt, 111, 29);
    /* the bias gradient's column sums over several 1024-row chunks, the last one partial, and a
     * partial 32-column tile (kernels/cuda/column_sum.cuh) */
    test_linear_rows(dt, 5100, 70);
    test_linear_rows(dt, 111, 64); /* 64 outputs: the bias pass in 16-byte vectors */
}

/* The forward with its bias in the operands' dtype (the cuBLASLt epilogue path), without a bias, and
 * with a residual added (linear_residual_forward); twice, for the same bits. C = 64 and 1280 rows are
 * 16-byte aligned (Lt's kernels); C = 45 leaves Lt a shape it may refuse (then the cuBLAS path). */
static void test_linear_epilogues(sdt_dtype dt, int64_t rows, int64_t C, int64_t OC)
{
    pair x = MAKE(dt, 1, 2, rows / 2, C), w = MAKE(dt, 0.1, OC, C), b = MAKE(dt, 1, OC),
         r = MAKE(dt, 1, 2, rows / 2, OC);
    pair out = MAKE(dt, 1, 2, rows / 2, OC), again = MAKE(dt, 1, 2, rows / 2, OC);
    RUN2(cpu->linear_forward(cpu, &out.c, &x.c, &w.c, &b.c), gpu->linear_forward(gpu, &out.g, &x.g, &w.g, &b.g),
         "linear fwd (bias in the operands' dtype)");
    compare(&out, tol_for(dt), "linear forward, bias in the operands' dtype");
    pair b32 = MAKE(SDT_F32, 1, OC); /* a hypernetwork's bias: f32 beside 16-bit operands */
    RUN2(cpu->linear_forward(cpu, &out.c, &x.c, &w.c, &b32.c), gpu->linear_forward(gpu, &out.g, &x.g, &w.g, &b32.g),
         "linear fwd (f32 bias)");
    compare(&out, tol_for(dt), "linear forward, f32 bias");
    drop(&b32);
    RUN2(cpu->linear_forward(cpu, &out.c, &x.c, &w.c, NULL), gpu->linear_forward(gpu, &out.g, &x.g, &w.g, NULL),
         "linear fwd (no bias)");
    compare(&out, tol_for(dt), "linear forward, no bias");
    RUN2(cpu->linear_residual_forward(cpu, &out.c, &x.c, &w.c, &b.c, &r.c),
         gpu->linear_residual_forward(gpu, &out.g, &x.g, &w.g, &b.g, &r.g), "linear + residual");
    compare(&out, tol_for(dt), "linear + residual");
    CHECK(gpu->linear_residual_forward(gpu, &again.g, &x.g, &w.g, &b.g, &r.g) == 0, "linear + residual again: %s",
          gpu->error.message);
    CHECK(same_bits(&out, &again), "linear + residual %s [%lld, %lld] x [%lld]: two identical runs differ",
          sdt_dtype_name(dt), (long long)rows, (long long)C, (long long)OC);
    RUN2(cpu->linear_residual_forward(cpu, &out.c, &x.c, &w.c, NULL, &r.c),
         gpu->linear_residual_forward(gpu, &out.g, &x.g, &w.g, NULL, &r.g), "linear + residual, no bias");
    compare(&out, tol_for(dt), "linear + residual, no bias");
    drop(&x), drop(&w), drop(&b), drop(&r), drop(&out), drop(&again);
}

/* A frozen layer's input gradient, written over a dx full of other values (the CPU's, the reference,
 * zeroes first): dx in the operands' dtype (cuBLAS / cuDNN with beta 0) and in f32 (cuBLAS's f32
 * output; cuDNN's mixed-dtype path, which accumulates into a zeroed dx). */
static void test_input_grads(sdt_dtype dt)
{
    for (int f32_dx = 0; f32_dx < 2; f32_dx++) {
        sdt_dtype dxt = f32_dx ? SDT_F32 : dt;
        pair w = MAKE(dt, 0.2, 29, 45), dout = MAKE(dt, 1, 3, 37, 29), dx = MAKE(dxt, 3, 3, 37, 45);
        RUN2(cpu->linear_input_grad(cpu, &dx.c, &dout.c, &w.c), gpu->linear_input_grad(gpu, &dx.g, &dout.g, &w.g),
             "linear input grad");
        compare(&dx, tol_for(dt), f32_dx ? "linear input grad (f32 dx)" : "linear input grad");
        drop(&w), drop(&dout), drop(&dx);
        for (int stride = 1; stride <= 2; stride++) {
            int64_t H = 13, W = 10, OH = (H + 2 - 3) / stride + 1, OW = (W + 2 - 3) / stride + 1;
            pair cw = MAKE(dt, 0.2, 11, 7, 3, 3), cd = MAKE(dt, 1, 2, 11, OH, OW), cdx = MAKE(dxt, 3, 2, 7, H, W);
            RUN2(cpu->conv2d_input_grad(cpu, &cdx.c, &cd.c, &cw.c, stride, 1),
                 gpu->conv2d_input_grad(gpu, &cdx.g, &cd.g, &cw.g, stride, 1), "conv input grad");
            compare(&cdx, tol_for(dt), f32_dx ? "conv input grad (f32 dx)" : "conv input grad");
            drop(&cw), drop(&cd), drop(&cdx);
        }
    }
}

/* H x W = 13 x 10 leaves the bias passes' scalar path; 16 x 16 (outputs of 256 or 64 values) their 16-byte vectors. */
static void test_conv(sdt_dtype dt, int k, int stride, int64_t H, int64_t W)
{
    int pad = k / 2;
    int64_t OH = (H + 2 * pad - k) / stride + 1, OW = (W + 2 * pad - k) / stride + 1;
    pair x = MAKE(dt, 1, 2, 7, H, W), w = MAKE(dt, 0.2, 11, 7, k, k), b = MAKE(SDT_F32, 1, 11),
         out = MAKE(dt, 1, 2, 11, OH, OW);
    char name[96];
    snprintf(name, sizeof name, "conv2d %dx%d stride %d %lldx%lld %s", k, k, stride, (long long)H, (long long)W,
             sdt_dtype_name(dt));
    RUN2(cpu->conv2d_forward(cpu, &out.c, &x.c, &w.c, &b.c, stride, pad),
         gpu->conv2d_forward(gpu, &out.g, &x.g, &w.g, &b.g, stride, pad), name);
    compare(&out, tol_for(dt), name);
    pair dout = MAKE(dt, 1, 2, 11, OH, OW), dx = MAKE(dt, 1, 2, 7, H, W), dw = MAKE(SDT_F32, 1, 11, 7, k, k),
         db = MAKE(SDT_F32, 1, 11);
    RUN2(cpu->conv2d_backward(cpu, &dx.c, &dw.c, &db.c, &dout.c, &x.c, &w.c, stride, pad),
         gpu->conv2d_backward(gpu, &dx.g, &dw.g, &db.g, &dout.g, &x.g, &w.g, stride, pad), name);
    compare(&dx, tol_for(dt), "conv dx");
    compare(&dw, tol_for(dt), "conv dw");
    compare(&db, tol_for(dt), "conv db");
    drop(&x), drop(&w), drop(&b), drop(&out), drop(&dout), drop(&dx), drop(&dw), drop(&db);
}

/* Attention of B x H heads of width D, GPU against the CPU reference, forward (out, lse) and
 * backward (gradients filled with NaN: backward writes them, ops.h, so a kernel that reads one or
 * leaves an element unwritten fails), with forward's statistics saved or everything recomputed in
 * backward. Prints the errors it measured. */
static void test_attention(sdt_dtype dt, int64_t B, int H, int64_t D, int64_t Tq, int64_t Tk, bool causal, bool save)
{
    const int64_t HD = H * D;
    /* 16-bit storage: the fused kernels round P and dS to the operand dtype, as every flash kernel does */
    const double tol = dt == SDT_F32 ? 2e-4 : dt == SDT_F16 ? 1e-2 : 3e-2;
    pair q = MAKE(dt, 1, B, Tq, HD), k = MAKE(dt, 1, B, Tk, HD), v = MAKE(dt, 1, B, Tk, HD),
         out = MAKE(dt, 1, B, Tq, HD);
    pair lse = MAKE(SDT_F32, 1, B, H, Tq);
    sdt_tensor *lc = save ? &lse.c : NULL, *lg = save ? &lse.g : NULL;
    char what[160];
    snprintf(what, sizeof what, "attention %s B%lld H%d D%lld Tq%lld Tk%lld%s%s", sdt_dtype_name(dt), (long long)B, H,
             (long long)D, (long long)Tq, (long long)Tk, causal ? " causal" : "", save ? " saved-lse" : " recomputed");
    RUN2(cpu->attention_forward(cpu, &out.c, lc, &q.c, &k.c, &v.c, H, causal),
         gpu->attention_forward(gpu, &out.g, lg, &q.g, &k.g, &v.g, H, causal), what);
    double e_out = compare(&out, tol, what), e_lse = save ? compare(&lse, 1e-4, what) : 0;
    pair dout = MAKE(dt, 1, B, Tq, HD), dq = MAKE(dt, 1, B, Tq, HD), dk = MAKE(dt, 1, B, Tk, HD),
         dv = MAKE(dt, 1, B, Tk, HD);
    fill_garbage(&dq), fill_garbage(&dk), fill_garbage(&dv);
    RUN2(cpu->attention_backward(cpu, &dq.c, &dk.c, &dv.c, &dout.c, &q.c, &k.c, &v.c, save ? &out.c : NULL, lc, H,
                                 causal),
         gpu->attention_backward(gpu, &dq.g, &dk.g, &dv.g, &dout.g, &q.g, &k.g, &v.g, save ? &out.g : NULL, lg, H,
                                 causal),
         what);
    /* Over one key the softmax is the constant 1: dQ and dK are zero but for rounding, judged against the size of
     * dQ's and dK's terms, |dO| |V| |K| and |dO| |V| |Q| (scale 1/sqrt(D) aside). */
    double grad_scale = Tk == 1 ? max_abs_cpu(&dout) * max_abs_cpu(&v) * fmax(max_abs_cpu(&k), max_abs_cpu(&q)) : 0;
    double e_dq = compare_scaled(&dq, tol, grad_scale, what), e_dk = compare_scaled(&dk, tol, grad_scale, what),
           e_dv = compare(&dv, tol, what);
    printf("%s: rel err out %.2g lse %.2g dq %.2g dk %.2g dv %.2g (tol %.0e)\n", what, e_out, e_lse, e_dq, e_dk, e_dv,
           tol);
    drop(&q), drop(&k), drop(&v), drop(&out), drop(&lse), drop(&dout), drop(&dq), drop(&dk), drop(&dv);
}

/* The tensor-core kernels' tile edges at every head dim they take (blocks of 128 query rows, two
 * 16-row m-tiles per warp, in forward and dQ up to head dim 80; 128 keys per dK/dV block up to
 * 64; 64 elsewhere): token counts at, just over and just under those multiples, a warp whose
 * second m-tile lies past Tq, a single query row, fewer keys than one tile, causal masks across
 * several key tiles, cross-attention's 77 keys, and dK/dV query splits of which some are empty. */
static void test_attention_tile_edges(sdt_dtype dt)
{
    static const int64_t dims[4] = {40, 64, 80, 160};
    for (int i = 0; i < 4; i++) {
        const int64_t D = dims[i];
        test_attention(dt, 2, 2, D, 128, 128, false, true);
        test_attention(dt, 1, 2, D, 129, 191, false, false);
        test_attention(dt, 1, 1, D, 20, 150, false, true);
        test_attention(dt, 1, 2, D, 200, 200, true, true);
        test_attention(dt, 2, 1, D, 256, 77, false, true);
    }
    test_attention(dt, 1, 2, 40, 1, 70, false, true);
    test_attention(dt, 1, 2, 64, 150, 13, false, true);  /* fewer keys than one tile */
    test_attention(dt, 1, 1, 64, 1280, 77, false, true); /* 20 query tiles over 16 splits */
    test_attention(dt, 2, 3, 64, 300, 300, true, false);
}

/* Cross-attention at the UNets' real token counts, where the short-key kernels (attention_short_keys.cu:
 * Tk <= 128, head dims 40/64/80) take the call: SD 1.5's d40 levels (64x64 .. 8x8: Tq 4096, 1024, 256, 64),
 * its d80 32x32 level, SDXL's d64 levels (Tq 4096, 1024), with few heads so the CPU reference stays quick.
 * Also keys just over 80 and up to 128 (their second instantiation), a query count off the 16-row tiles
 * and the 128-row chunks, and a single key. */
static void test_attention_cross_shapes(sdt_dtype dt)
{
    test_attention(dt, 1, 2, 40, 4096, 77, false, true);
    test_attention(dt, 2, 2, 40, 1024, 77, false, true);
    test_attention(dt, 2, 4, 40, 256, 77, false, true);
    test_attention(dt, 2, 8, 40, 64, 77, false, true);
    test_attention(dt, 1, 2, 80, 1024, 77, false, true);
    test_attention(dt, 1, 2, 64, 4096, 77, false, true);
    test_attention(dt, 1, 4, 64, 1024, 77, false, true);
    test_attention(dt, 1, 2, 64, 1000, 81, false, true);
    test_attention(dt, 1, 2, 80, 333, 128, false, true);
    test_attention(dt, 2, 1, 40, 77, 1, false, true);
}

/* attention_backward with some gradients not wanted (NULL, ops.h) at a cross-attention shape (the short-key
 * kernels: dQ alone skips phase 2 and the partials, dK or dV alone sums only its own): each wanted gradient
 * matches the CPU's full backward. */
static void test_attention_some_grads(sdt_dtype dt)
{
    const int64_t B = 2, H = 2, D = 64, Tq = 1000, Tk = 77, HD = H * D;
    const double tol = dt == SDT_F32 ? 2e-4 : dt == SDT_F16 ? 1e-2 : 3e-2;
    pair q = MAKE(dt, 1, B, Tq, HD), k = MAKE(dt, 1, B, Tk, HD), v = MAKE(dt, 1, B, Tk, HD),
         out = MAKE(dt, 1, B, Tq, HD), dout = MAKE(dt, 1, B, Tq, HD), lse = MAKE(SDT_F32, 1, B, H, Tq);
    pair dq = MAKE(dt, 1, B, Tq, HD), dk = MAKE(dt, 1, B, Tk, HD), dv = MAKE(dt, 1, B, Tk, HD);
    char what[96];
    snprintf(what, sizeof what, "attention %s some gradients D64 Tq1000 Tk77", sdt_dtype_name(dt));
    RUN2(cpu->attention_forward(cpu, &out.c, &lse.c, &q.c, &k.c, &v.c, (int)H, false),
         gpu->attention_forward(gpu, &out.g, &lse.g, &q.g, &k.g, &v.g, (int)H, false), what);
    const bool want[3][3] = {{true, false, false}, {false, true, false}, {false, false, true}};
    for (int w = 0; w < 3; w++) {
        fill_garbage(&dq), fill_garbage(&dk), fill_garbage(&dv); /* both copies: the CPU's full backward again */
        CHECK(cpu->attention_backward(cpu, &dq.c, &dk.c, &dv.c, &dout.c, &q.c, &k.c, &v.c, &out.c, &lse.c, (int)H,
                                      false) == 0,
              "%s: CPU failed: %s", what, cpu->error.message);
        CHECK(gpu->attention_backward(gpu, want[w][0] ? &dq.g : NULL, want[w][1] ? &dk.g : NULL,
                                      want[w][2] ? &dv.g : NULL, &dout.g, &q.g, &k.g, &v.g, &out.g, &lse.g, (int)H,
                                      false) == 0,
              "%s: GPU failed: %s", what, gpu->error.message);
        if (want[w][0]) compare(&dq, tol, what);
        if (want[w][1]) compare(&dk, tol, what);
        if (want[w][2]) compare(&dv, tol, what);
    }
    drop(&q), drop(&k), drop(&v), drop(&out), drop(&dout), drop(&lse), drop(&dq), drop(&dk), drop(&dv);
}

/* The GPU copy's bytes (malloc'd). */
static void *gpu_bytes(const pair *p)
{
    void *raw = malloc(sdt_tensor_nbytes(&p->g));
    gpu->synchronize(gpu);
    gpu->download(gpu, raw, p->g.data, sdt_tensor_nbytes(&p->g));
    return raw;
}

/* The fused attention twice on the same inputs gives the same bits, as replayed runs must: no
 * atomics, dK/dV's query splits summed in a fixed order (Tq 1280 over 77 keys splits). */
static void test_attention_replay(sdt_dtype dt, int64_t B, int H, int64_t D, int64_t Tq, int64_t Tk)
{
    const int64_t HD = H * D;
    pair q = MAKE(dt, 1, B, Tq, HD), k = MAKE(dt, 1, B, Tk, HD), v = MAKE(dt, 1, B, Tk, HD),
         dout = MAKE(dt, 1, B, Tq, HD);
    void *first[5] = {NULL};
    for (int run = 0; run < 2; run++) {
        pair out = MAKE(dt, 1, B, Tq, HD), lse = MAKE(SDT_F32, 1, B, H, Tq);
        pair dq = MAKE(dt, 1, B, Tq, HD), dk = MAKE(dt, 1, B, Tk, HD), dv = MAKE(dt, 1, B, Tk, HD);
        pair *res[5] = {&out, &lse, &dq, &dk, &dv};
        for (int i = 2; i < 5; i++) fill_garbage(res[i]);
        CHECK(gpu->attention_forward(gpu, &out.g, &lse.g, &q.g, &k.g, &v.g, H, false) == 0, "replay forward: %s",
              gpu->error.message);
        CHECK(gpu->attention_backward(gpu, &dq.g, &dk.g, &dv.g, &dout.g, &q.g, &k.g, &v.g, &out.g, &lse.g, H, false) ==
                  0,
              "replay backward: %s", gpu->error.message);
        for (int i = 0; i < 5; i++) {
            void *bytes = gpu_bytes(res[i]);
            if (run == 0) {
                first[i] = bytes;
            } else {
                CHECK(memcmp(first[i], bytes, sdt_tensor_nbytes(&res[i]->g)) == 0,
                      "attention %s D%lld Tq%lld Tk%lld: output %d differs between two identical runs",
                      sdt_dtype_name(dt), (long long)D, (long long)Tq, (long long)Tk, i);
                free(first[i]);
                free(bytes);
            }
            drop(res[i]);
        }
    }
    drop(&q), drop(&k), drop(&v), drop(&dout);
}

/* The shapes the models run, at shorter sequences (partial 64-row tiles included). */
static void test_attention_model_shapes(sdt_dtype dt)
{
    test_attention(dt, 2, 2, 40, 300, 300, false, true); /* SD 1.x UNet 64x64 level */
    test_attention(dt, 2, 2, 40, 300, 77, false, true);  /* its cross-attention to the 77 text tokens */
    test_attention(dt, 1, 2, 80, 200, 200, false, true); /* 32x32 level */
    test_attention(dt, 1, 2, 80, 200, 77, false, false);
    test_attention(dt, 1, 2, 160, 130, 130, false, true); /* 16x16 and 8x8 levels */
    test_attention(dt, 1, 2, 160, 64, 77, false, true);
    test_attention(dt, 2, 2, 64, 250, 250, false, true); /* SD 2.x UNet */
    test_attention(dt, 2, 2, 64, 250, 77, false, false);
    test_attention(dt, 2, 12, 64, 77, 77, true, true);     /* CLIP ViT-L text encoder, causal */
    test_attention(dt, 1, 1, 512, 150, 150, false, false); /* VAE mid-block: one 512-wide head */
}

/* The tolerance of a result computed from dtype a inputs and stored as dtype b: the coarser one. */
static double tol_for2(sdt_dtype a, sdt_dtype b)
{
    return tol_for(a) > tol_for(b) ? tol_for(a) : tol_for(b);
}

/* LayerNorm over the last dim of x [N, C], forward (output, mean, rstd) and backward. io_dt: the
 * dtype of out, dout and dx (x's dtype for the common case, another one for the mixed-dtype
 * path); offset: x, out, dout and dx start offset elements into their allocations (an unaligned
 * view takes the scalar path). */
static void test_layernorm_at(sdt_dtype dt, sdt_dtype param_dt, int64_t N, int64_t C, sdt_dtype io_dt, int64_t offset)
{
    char what[96];
    snprintf(what, sizeof what, "layernorm %lldx%lld %s%s%s offset %lld", (long long)N, (long long)C,
             sdt_dtype_name(dt), io_dt != dt ? " io " : "", io_dt != dt ? sdt_dtype_name(io_dt) : "",
             (long long)offset);
    const double tol = tol_for2(dt, io_dt);
    pair x = MAKE_AT(offset, dt, 2, N, C), g = MAKE(param_dt, 1, C), b = MAKE(param_dt, 1, C),
         out = MAKE_AT(offset, io_dt, 1, N, C);
    pair mean = MAKE(SDT_F32, 1, N), rstd = MAKE(SDT_F32, 1, N);
    RUN2(cpu->layernorm_forward(cpu, &out.c, &mean.c, &rstd.c, &x.c, &g.c, &b.c, 1e-5f),
         gpu->layernorm_forward(gpu, &out.g, &mean.g, &rstd.g, &x.g, &g.g, &b.g, 1e-5f), what);
    compare(&out, tol, what);
    compare(&mean, 1e-4, what);
    compare(&rstd, 1e-4, what);
    pair dout = MAKE_AT(offset, io_dt, 1, N, C), dx = MAKE_AT(offset, io_dt, 1, N, C), dg = MAKE(SDT_F32, 1, C),
         dbb = MAKE(SDT_F32, 1, C);
    RUN2(cpu->layernorm_backward(cpu, &dx.c, &dg.c, &dbb.c, &dout.c, &x.c, &g.c, &mean.c, &rstd.c),
         gpu->layernorm_backward(gpu, &dx.g, &dg.g, &dbb.g, &dout.g, &x.g, &g.g, &mean.g, &rstd.g), what);
    compare(&dx, tol, what);
    compare(&dg, tol, what);
    compare(&dbb, tol, what);
    drop(&x), drop(&g), drop(&b), drop(&out), drop(&mean), drop(&rstd), drop(&dout), drop(&dx), drop(&dg), drop(&dbb);
}
static void test_layernorm(sdt_dtype dt, sdt_dtype param_dt, int64_t N, int64_t C)
{
    test_layernorm_at(dt, param_dt, N, C, dt, 0);
}

/* act(GroupNorm(x)), x [B, C, H, W] in G groups, forward (output, mean, rstd) and backward;
 * io_dt and offset as for test_layernorm_at. The backward runs twice into two gradients that
 * start equal: the GPU's must be bit-identical (no atomics, a fixed order). */
static void test_groupnorm_at(sdt_dtype dt, sdt_dtype param_dt, int64_t B, int64_t C, int64_t H, int64_t W, int G,
                              sdt_activation act, sdt_dtype io_dt, int64_t offset)
{
    char what[160];
    snprintf(what, sizeof what, "groupnorm %lldx%lldx%lldx%lld G%d%s %s%s%s offset %lld", (long long)B, (long long)C,
             (long long)H, (long long)W, G, act == SDT_ACT_SILU ? " + silu" : "", sdt_dtype_name(dt),
             io_dt != dt ? " io " : "", io_dt != dt ? sdt_dtype_name(io_dt) : "", (long long)offset);
    const double tol = tol_for2(dt, io_dt);
    pair gx = MAKE_AT(offset, dt, 2, B, C, H, W), gg = MAKE(param_dt, 1, C), gb = MAKE(param_dt, 1, C),
         gout = MAKE_AT(offset, io_dt, 1, B, C, H, W);
    pair gm = MAKE(SDT_F32, 1, B, G), gr = MAKE(SDT_F32, 1, B, G);
    RUN2(cpu->groupnorm_forward(cpu, &gout.c, &gm.c, &gr.c, &gx.c, &gg.c, &gb.c, G, 1e-6f, act),
         gpu->groupnorm_forward(gpu, &gout.g, &gm.g, &gr.g, &gx.g, &gg.g, &gb.g, G, 1e-6f, act), what);
    compare(&gout, tol, what);
    compare(&gm, 1e-4, what);
    compare(&gr, 1e-4, what);
    pair out2 = MAKE_AT(offset, io_dt, 1, B, C, H, W), gm2 = MAKE(SDT_F32, 1, B, G), gr2 = MAKE(SDT_F32, 1, B, G);
    RUN2(0, gpu->groupnorm_forward(gpu, &out2.g, &gm2.g, &gr2.g, &gx.g, &gg.g, &gb.g, G, 1e-6f, act), what);
    CHECK(same_bits(&gout, &out2) && same_bits(&gm, &gm2) && same_bits(&gr, &gr2), "%s: two forward runs differ", what);
    drop(&out2), drop(&gm2), drop(&gr2);
    pair gdo = MAKE_AT(offset, io_dt, 1, B, C, H, W), gdx = MAKE_AT(offset, io_dt, 1, B, C, H, W),
         gdg = MAKE(SDT_F32, 1, C), gdb = MAKE(SDT_F32, 1, C);
    pair again = MAKE_AT(offset, io_dt, 1, B, C, H, W);
    gpu->upload(gpu, again.g.data, gdx.c.data, sdt_tensor_nbytes(&gdx.c)); /* gdx's values, before either backward */
    RUN2(cpu->groupnorm_backward(cpu, &gdx.c, &gdg.c, &gdb.c, &gdo.c, &gx.c, &gg.c, &gb.c, &gm.c, &gr.c, G, act),
         gpu->groupnorm_backward(gpu, &gdx.g, &gdg.g, &gdb.g, &gdo.g, &gx.g, &gg.g, &gb.g, &gm.g, &gr.g, G, act), what);
    compare(&gdx, tol, what);
    compare(&gdg, tol, what);
    compare(&gdb, tol, what);
    RUN2(0, gpu->groupnorm_backward(gpu, &again.g, NULL, NULL, &gdo.g, &gx.g, &gg.g, &gb.g, &gm.g, &gr.g, G, act),
         what);
    CHECK(same_bits(&gdx, &again), "%s: two backward runs differ", what);
    drop(&gx), drop(&gg), drop(&gb), drop(&gout), drop(&gm), drop(&gr), drop(&gdo), drop(&gdx), drop(&gdg), drop(&gdb),
        drop(&again);
}
static void test_groupnorm(sdt_dtype dt, sdt_dtype param_dt, int64_t B, int64_t C, int64_t H, int64_t W, int G,
                           sdt_activation act)
{
    test_groupnorm_at(dt, param_dt, B, C, H, W, G, act, dt, 0);
}

static void test_norms(sdt_dtype dt)
{
    /* the other storage dtype for the mixed-dtype (generic) path */
    const sdt_dtype other = dt == SDT_F32 ? SDT_BF16 : SDT_F32;
    test_layernorm(dt, SDT_F32, 5, 33); /* 33 values: no 16-byte vectors, the scalar path */
    test_layernorm(dt, dt, 37, 320);    /* the model's widths, gamma and beta in the storage dtype: 16-byte vectors */
    test_layernorm(dt, dt, 11, 1280);
    test_layernorm(dt, SDT_F32, 37, 320);         /* x in vectors, f32 gamma and beta (16-bit x) element by element */
    test_layernorm(dt, dt, 9, 40);                /* fewer vectors than lanes */
    test_layernorm(dt, dt, 6, 2568);              /* several vectors per lane, the last lanes with one fewer */
    test_layernorm(dt, SDT_F32, 4100, 70);        /* gamma's and beta's column sums over 5 chunks, partial tiles */
    test_layernorm(dt, dt, 3000, 320);            /* tall: many blocks of 8 rows, the last one partial */
    test_layernorm_at(dt, dt, 37, 320, other, 0); /* mixed dtypes: the generic path */
    test_layernorm_at(dt, dt, 37, 320, dt, 1);    /* an unaligned view: the scalar path */
}

/* The UNets' GroupNorm levels, with and without SiLU (32 groups, batch 1; run in both layouts by
 * test_groupnorms' callers): SD 1.5 at 512x512 (320 channels at 64x64 down to 1280 at 8x8) and SDXL at
 * 1024x1024 (320 at 128x128 down to 1280 at 32x32); gamma and beta in the storage dtype, as the models
 * hold them. Batch 1 and no concatenated widths (960-2560 are above at small maps): the CPU reference's
 * channels-last pass is the cost (~11.6M values a dtype, layout and activation). */
static void test_groupnorm_model_shapes(sdt_dtype dt)
{
    static const int shapes[][2] = {
        {320, 64},  {640, 32}, {1280, 16}, {1280, 8}, /* SD 1.5 */
        {320, 128}, {640, 64}, {1280, 32},            /* SDXL */
    };
    for (int a = 0; a < 2; a++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            test_groupnorm(dt, dt, 1, shapes[i][0], shapes[i][1], shapes[i][1], 32,
                           a ? SDT_ACT_SILU : SDT_ACT_IDENTITY);
}

static void test_groupnorms(sdt_dtype dt)
{
    const sdt_dtype other = dt == SDT_F32 ? SDT_BF16 : SDT_F32;
    for (int a = 0; a < 2; a++) {
        sdt_activation act = a ? SDT_ACT_SILU : SDT_ACT_IDENTITY; /* SiLU: the UNet's fused GroupNorm + SiLU */
        test_groupnorm(dt, SDT_F32, 2, 12, 5, 7, 4, act);         /* 35 values a channel: the scalar path */
        test_groupnorm(dt, dt, 2, 64, 16, 16, 32, act); /* the model's form: gamma and beta in the storage dtype */
        test_groupnorm(dt, dt, 1, 40, 3, 1, 4, act);
        test_groupnorm(dt, dt, 2, 320, 8, 8, 32, act);  /* SD's 8x8 level: 64 values, a 32-thread block */
        test_groupnorm(dt, dt, 1, 8, 128, 128, 2, act); /* batch 1, 16384 values a channel: 8-16 chunks per channel */
        test_groupnorm(dt, dt, 1, 4, 80, 103, 2, act);  /* chunks of unequal length (the last is shorter) */
        test_groupnorm(dt, dt, 3, 96, 24, 24, 32, act); /* 3 channels a group, blocks of 96-160 threads */
        test_groupnorm(dt, dt, 1, 96, 64, 72, 32, act); /* 3 channels a group of 2 chunks each (16-bit) */
        test_groupnorm_at(dt, dt, 2, 64, 16, 16, 32, act, other, 0);   /* mixed dtypes: the generic path */
        test_groupnorm_at(dt, SDT_F32, 2, 64, 16, 16, 32, act, dt, 3); /* an unaligned view: the scalar path */
        /* SD's channel counts: groups of 10, 20 and 30 channels (16-bit vectors of 8 span two groups) */
        test_groupnorm(dt, dt, 2, 320, 16, 16, 32, act);
        test_groupnorm(dt, dt, 1, 640, 24, 20, 32, act);
        test_groupnorm(dt, dt, 2, 960, 8, 8, 32, act);
        /* channels-last chunking (groupnorm_nhwc.cu): 597 chunks of 64 pixels, the last of 46 (a partial batch of
         * unrolled loads); a pixel row of 320 16-byte vectors, wider than one block */
        test_groupnorm(dt, dt, 1, 64, 190, 201, 32, act);
        test_groupnorm(dt, dt, 1, 2560, 9, 11, 32, act);
    }
    test_groupnorm_model_shapes(dt);
}

/* GEGLU x [rows, 2C] -> [rows, C]; io_dt: out's, dout's and dx's dtype; offset as in make_at. */
static void test_geglu(sdt_dtype dt, int64_t rows, int64_t C, sdt_dtype io_dt, int64_t offset)
{
    char what[96];
    snprintf(what, sizeof what, "geglu %lldx%lld %s io %s offset %lld", (long long)rows, (long long)C,
             sdt_dtype_name(dt), sdt_dtype_name(io_dt), (long long)offset);
    pair x = MAKE_AT(offset, dt, 1, rows, 2 * C), out = MAKE_AT(offset, io_dt, 1, rows, C),
         dout = MAKE_AT(offset, io_dt, 1, rows, C), dx = MAKE_AT(offset, io_dt, 1, rows, 2 * C);
    fill_garbage(&dx); /* backward writes dx (ops.h) */
    RUN2(cpu->geglu_forward(cpu, &out.c, &x.c), gpu->geglu_forward(gpu, &out.g, &x.g), what);
    compare(&out, tol_for2(dt, io_dt), what);
    RUN2(cpu->geglu_backward(cpu, &dx.c, &dout.c, &x.c), gpu->geglu_backward(gpu, &dx.g, &dout.g, &x.g), what);
    compare(&dx, tol_for2(dt, io_dt), what);
    drop(&x), drop(&out), drop(&dout), drop(&dx);
}

/* T5's ops (rmsnorm, gated_activation with GELU tanh, attention_bias with a shared bias, a per-batch bias
 * holding -inf padding masks and a fully masked row, and the backward that recomputes forward). */
static void test_t5_ops(sdt_dtype dt)
{
    char what[96];
    const double tol = tol_for(dt);
    snprintf(what, sizeof what, "rmsnorm %s", sdt_dtype_name(dt));
    for (int with_gamma = 0; with_gamma < 2; with_gamma++) {
        pair x = MAKE(dt, 2, 37, 300), g = MAKE(dt, 1, 300), out = MAKE(dt, 1, 37, 300), rstd = MAKE(SDT_F32, 1, 37);
        RUN2(cpu->rmsnorm_forward(cpu, &out.c, &rstd.c, &x.c, with_gamma ? &g.c : NULL, 1e-6f),
             gpu->rmsnorm_forward(gpu, &out.g, &rstd.g, &x.g, with_gamma ? &g.g : NULL, 1e-6f), what);
        compare(&out, tol, what);
        compare(&rstd, 1e-4, what);
        pair dout = MAKE(dt, 1, 37, 300), dx = MAKE(dt, 1, 37, 300), dg = MAKE(SDT_F32, 1, 300);
        RUN2(cpu->rmsnorm_backward(cpu, &dx.c, with_gamma ? &dg.c : NULL, &dout.c, &x.c, with_gamma ? &g.c : NULL,
                                   &rstd.c),
             gpu->rmsnorm_backward(gpu, &dx.g, with_gamma ? &dg.g : NULL, &dout.g, &x.g, with_gamma ? &g.g : NULL,
                                   &rstd.g),
             what);
        compare(&dx, tol, what);
        if (with_gamma) compare(&dg, tol, what);
        drop(&x), drop(&g), drop(&out), drop(&rstd), drop(&dout), drop(&dx), drop(&dg);
    }
    snprintf(what, sizeof what, "rope %s", sdt_dtype_name(dt));
    { /* Flux's rotary embedding: [B, S, heads*D] with tables [S, D], forward in place, backward accumulated */
        pair x = MAKE(dt, 1, 2, 37, 96), cosv = MAKE(SDT_F32, 1, 37, 32), sinv = MAKE(SDT_F32, 1, 37, 32),
             out = MAKE(dt, 1, 2, 37, 96), dout = MAKE(dt, 1, 2, 37, 96), dx = MAKE(dt, 1, 2, 37, 96);
        RUN2(cpu->rope_forward(cpu, &out.c, &x.c, &cosv.c, &sinv.c),
             gpu->rope_forward(gpu, &out.g, &x.g, &cosv.g, &sinv.g), what);
        compare(&out, tol, what);
        RUN2(cpu->rope_forward(cpu, &x.c, &x.c, &cosv.c, &sinv.c), gpu->rope_forward(gpu, &x.g, &x.g, &cosv.g, &sinv.g),
             what);
        compare(&x, tol, what);
        RUN2(cpu->rope_backward(cpu, &dx.c, &dout.c, &cosv.c, &sinv.c),
             gpu->rope_backward(gpu, &dx.g, &dout.g, &cosv.g, &sinv.g), what);
        compare(&dx, tol, what);
        drop(&x), drop(&cosv), drop(&sinv), drop(&out), drop(&dout), drop(&dx);
    }
    snprintf(what, sizeof what, "gated_activation %s", sdt_dtype_name(dt));
    pair gate = MAKE(dt, 1.5, 29, 130), up = MAKE(dt, 1, 29, 130), prod = MAKE(dt, 1, 29, 130),
         dprod = MAKE(dt, 1, 29, 130);
    pair dgate = MAKE(dt, 1, 29, 130), dup = MAKE(dt, 1, 29, 130);
    fill_garbage(&dgate), fill_garbage(&dup); /* written (ops.h) */
    RUN2(cpu->gated_activation_forward(cpu, &prod.c, &gate.c, &up.c, SDT_ACT_GELU_TANH),
         gpu->gated_activation_forward(gpu, &prod.g, &gate.g, &up.g, SDT_ACT_GELU_TANH), what);
    compare(&prod, tol, what);
    RUN2(cpu->gated_activation_backward(cpu, &dgate.c, &dup.c, &dprod.c, &gate.c, &up.c, SDT_ACT_GELU_TANH),
         gpu->gated_activation_backward(gpu, &dgate.g, &dup.g, &dprod.g, &gate.g, &up.g, SDT_ACT_GELU_TANH), what);
    compare(&dgate, tol, what), compare(&dup, tol, what);
    drop(&gate), drop(&up), drop(&prod), drop(&dprod), drop(&dgate), drop(&dup);

    const int64_t B = 2, H = 4, D = 16, T = 77, HD = H * D;
    const double atol = dt == SDT_F32 ? 2e-4 : dt == SDT_F16 ? 1e-2 : 3e-2;
    for (int per_batch = 0; per_batch < 2; per_batch++) {
        snprintf(what, sizeof what, "attention_bias %s %s", sdt_dtype_name(dt),
                 per_batch ? "masked per batch" : "shared");
        pair q = MAKE(dt, 1, B, T, HD), k = MAKE(dt, 1, B, T, HD), v = MAKE(dt, 1, B, T, HD),
             out = MAKE(dt, 1, B, T, HD);
        pair lse = MAKE(SDT_F32, 1, B, H, T), bias = MAKE(SDT_F32, 2, per_batch ? B : 1, H, T, T);
        if (per_batch) { /* batch 1 masks its keys from 60 on, and head 0's query 0 sees nothing */
            size_t n = (size_t)(B * H * T * T);
            float *hb = malloc(n * sizeof(float));
            memcpy(hb, bias.c.data, n * sizeof(float));
            for (int64_t h = 0; h < H; h++)
                for (int64_t i = 0; i < T; i++)
                    for (int64_t j = 0; j < T; j++)
                        if (j >= 60 || (h == 0 && i == 0)) hb[((H + h) * T + i) * T + j] = -INFINITY;
            memcpy(bias.c.data, hb, n * sizeof(float));
            gpu->upload(gpu, bias.g.data, hb, n * sizeof(float));
            free(hb);
        }
        RUN2(cpu->attention_bias_forward(cpu, &out.c, &lse.c, &q.c, &k.c, &v.c, &bias.c, (int)H, 1.0f),
             gpu->attention_bias_forward(gpu, &out.g, &lse.g, &q.g, &k.g, &v.g, &bias.g, (int)H, 1.0f), what);
        compare(&out, atol, what);
        pair dout = MAKE(dt, 1, B, T, HD), dq = MAKE(dt, 1, B, T, HD), dk = MAKE(dt, 1, B, T, HD),
             dv = MAKE(dt, 1, B, T, HD);
        for (int save = 0; save < 2; save++) {
            fill_garbage(&dq), fill_garbage(&dk), fill_garbage(&dv);
            RUN2(cpu->attention_bias_backward(cpu, &dq.c, &dk.c, &dv.c, &dout.c, &q.c, &k.c, &v.c, save ? &out.c : NULL,
                                              save ? &lse.c : NULL, &bias.c, (int)H, 1.0f),
                 gpu->attention_bias_backward(gpu, &dq.g, &dk.g, &dv.g, &dout.g, &q.g, &k.g, &v.g, save ? &out.g : NULL,
                                              save ? &lse.g : NULL, &bias.g, (int)H, 1.0f),
                 what);
            compare(&dq, atol, what), compare(&dk, atol, what), compare(&dv, atol, what);
        }
        drop(&q), drop(&k), drop(&v), drop(&out), drop(&lse), drop(&bias), drop(&dout), drop(&dq), drop(&dk), drop(&dv);
    }
}

/* out = a + b over n values; b_dt: b's dtype (mixed when not dt); alias: out is a. */
static void test_add(sdt_dtype dt, int64_t n, sdt_dtype b_dt, int64_t offset, bool alias)
{
    char what[96];
    snprintf(what, sizeof what, "add %lld %s + %s offset %lld%s", (long long)n, sdt_dtype_name(dt),
             sdt_dtype_name(b_dt), (long long)offset, alias ? " in place" : "");
    pair a = MAKE_AT(offset, dt, 1, n), b = MAKE_AT(offset, b_dt, 1, n), out = MAKE_AT(offset, dt, 1, n);
    pair *o = alias ? &a : &out;
    RUN2(cpu->add_forward(cpu, &o->c, &a.c, &b.c), gpu->add_forward(gpu, &o->g, &a.g, &b.g), what);
    compare(o, tol_for2(dt, b_dt), what);
    drop(&a), drop(&b), drop(&out);
}

/* add_channel (forward and its per-(batch, channel) sums) and concat_channels (forward, and the
 * backward with both parts and with one) on [2, C, H, W]; offset as in make_at. */
static void test_add_channel_concat_ch(sdt_dtype dt, int64_t H, int64_t W, int64_t offset, int64_t ca, int64_t cb)
{
    char what[96];
    snprintf(what, sizeof what, "add_channel/concat %lldx%lld %lld+%lld %s offset %lld%s", (long long)H, (long long)W,
             (long long)ca, (long long)cb, sdt_dtype_name(dt), (long long)offset,
             g_channels_last ? " channels-last" : "");
    pair h = MAKE_AT(offset, dt, 1, 2, cb, H, W), v = MAKE(dt, 1, 2, cb), dv = MAKE(SDT_F32, 1, 2, cb);
    RUN2(cpu->add_channel_forward(cpu, &h.c, &v.c), gpu->add_channel_forward(gpu, &h.g, &v.g), what);
    compare(&h, tol_for(dt), what);
    RUN2(cpu->add_channel_backward(cpu, &dv.c, &h.c), gpu->add_channel_backward(gpu, &dv.g, &h.g), what);
    compare(&dv, tol_for(dt), what);
    pair a = MAKE_AT(offset, dt, 1, 2, ca, H, W), cat = MAKE_AT(offset, dt, 1, 2, ca + cb, H, W),
         da = MAKE_AT(offset, dt, 1, 2, ca, H, W), dh = MAKE_AT(offset, dt, 1, 2, cb, H, W);
    RUN2(cpu->concat_channels_forward(cpu, &cat.c, &a.c, &h.c), gpu->concat_channels_forward(gpu, &cat.g, &a.g, &h.g),
         what);
    compare(&cat, tol_for(dt), what);
    RUN2(cpu->concat_channels_backward(cpu, &da.c, &dh.c, &cat.c),
         gpu->concat_channels_backward(gpu, &da.g, &dh.g, &cat.g), what);
    compare(&da, tol_for(dt), what);
    compare(&dh, tol_for(dt), what);
    RUN2(cpu->concat_channels_backward(cpu, NULL, &dh.c, &cat.c),
         gpu->concat_channels_backward(gpu, NULL, &dh.g, &cat.g), what);
    compare(&dh, tol_for(dt), what);
    drop(&h), drop(&v), drop(&dv), drop(&a), drop(&cat), drop(&da), drop(&dh);
}

static void test_add_channel_concat(sdt_dtype dt, int64_t H, int64_t W, int64_t offset)
{
    test_add_channel_concat_ch(dt, H, W, offset, 4, 6);
}

static void test_upsample(sdt_dtype dt)
{
    pair h = MAKE(dt, 1, 2, 6, 3, 5);
    pair up = MAKE(dt, 1, 2, 6, 6, 10), dup = MAKE(dt, 1, 2, 6, 3, 5);
    RUN2(cpu->upsample_nearest2x_forward(cpu, &up.c, &h.c), gpu->upsample_nearest2x_forward(gpu, &up.g, &h.g),
         "upsample");
    compare(&up, tol_for(dt), "upsample forward");
    RUN2(cpu->upsample_nearest2x_backward(cpu, &dup.c, &up.c), gpu->upsample_nearest2x_backward(gpu, &dup.g, &up.g),
         "upsample bwd");
    compare(&dup, tol_for(dt), "upsample backward");
    drop(&h), drop(&up), drop(&dup);
}

static void test_elementwise(sdt_dtype dt)
{
    for (int act = 0; act < SDT_ACT_COUNT; act++) {
        pair x = MAKE(dt, 2, 7, 19), out = MAKE(dt, 1, 7, 19), dout = MAKE(dt, 1, 7, 19), dx = MAKE(dt, 1, 7, 19);
        char name[48];
        snprintf(name, sizeof name, "activation %d", act);
        RUN2(cpu->activation_forward(cpu, &out.c, &x.c, act), gpu->activation_forward(gpu, &out.g, &x.g, act), name);
        compare(&out, tol_for(dt), name);
        RUN2(cpu->activation_backward(cpu, &dx.c, &dout.c, &x.c, act),
             gpu->activation_backward(gpu, &dx.g, &dout.g, &x.g, act), name);
        compare(&dx, tol_for(dt), name);
        drop(&x), drop(&out), drop(&dout), drop(&dx);
    }
    for (int k = 0; k < 3; k++) { /* SiLU (the UNet's) long enough for many vectors: aligned, mixed, unaligned */
        sdt_dtype io = k == 1 ? (dt == SDT_F32 ? SDT_BF16 : SDT_F32) : dt;
        int64_t off = k == 2 ? 1 : 0;
        pair x = MAKE_AT(off, dt, 2, 4, 1003), out = MAKE_AT(off, io, 1, 4, 1003), dout = MAKE_AT(off, io, 1, 4, 1003),
             dx = MAKE_AT(off, io, 1, 4, 1003);
        const char *name = k == 0 ? "silu 4x1003" : k == 1 ? "silu 4x1003 mixed" : "silu 4x1003 unaligned";
        RUN2(cpu->activation_forward(cpu, &out.c, &x.c, SDT_ACT_SILU),
             gpu->activation_forward(gpu, &out.g, &x.g, SDT_ACT_SILU), name);
        compare(&out, tol_for2(dt, io), name);
        RUN2(cpu->activation_backward(cpu, &dx.c, &dout.c, &x.c, SDT_ACT_SILU),
             gpu->activation_backward(gpu, &dx.g, &dout.g, &x.g, SDT_ACT_SILU), name);
        compare(&dx, tol_for2(dt, io), name);
        drop(&x), drop(&out), drop(&dout), drop(&dx);
    }
    test_geglu(dt, 3, 5, dt, 0);                                    /* 5 columns: the scalar path */
    test_geglu(dt, 37, 328, dt, 0);                                 /* 16-byte vectors */
    test_geglu(dt, 5, 5120, dt, 0);                                 /* SDXL's widest GEGLU (1280 * 4) */
    test_geglu(dt, 37, 328, dt == SDT_F32 ? SDT_BF16 : SDT_F32, 0); /* mixed dtypes: the generic path */
    test_geglu(dt, 37, 328, dt, 1);                                 /* an unaligned view */
    /* 8 * 131 + 3 values: vectors, then a tail of 3 */
    test_add(dt, 1051, dt, 0, false);
    test_add(dt, 1051, dt, 0, true);                                 /* out is a */
    test_add(dt, 1051, dt == SDT_F32 ? SDT_F16 : SDT_F32, 0, false); /* mixed dtypes */
    test_add(dt, 1051, dt, 1, false);                                /* an unaligned view */
    test_add_channel_concat(dt, 3, 5, 0);                            /* 15 values a channel: the scalar path */
    test_add_channel_concat(dt, 8, 8, 0);                            /* 64: 16-byte vectors */
    test_add_channel_concat(dt, 8, 8, 1);                            /* an unaligned view */
    test_upsample(dt);

    pair t = MAKE(SDT_F32, 300, 4), emb = MAKE(dt, 1, 4, 31);
    RUN2(cpu->timestep_embedding(cpu, &emb.c, &t.c, true, 0, 10000),
         gpu->timestep_embedding(gpu, &emb.g, &t.g, true, 0, 10000), "timestep");
    /* one definition in double on both backends (shared_math.h): float args ~1e3 were 2e-3 apart */
    compare(&emb, dt == SDT_F32 ? 1e-6 : tol_for(dt), "timestep embedding");
    drop(&t), drop(&emb);

    pair tok = MAKE(SDT_I32, 50, 2, 7), table = MAKE(dt, 1, 50, 12), pos = MAKE(dt, 1, 7, 12),
         eo = MAKE(dt, 1, 2, 7, 12);
    RUN2(cpu->embedding_forward(cpu, &eo.c, &tok.c, &table.c, &pos.c),
         gpu->embedding_forward(gpu, &eo.g, &tok.g, &table.g, &pos.g), "embedding");
    compare(&eo, tol_for(dt), "embedding forward");
    pair dtab = MAKE(SDT_F32, 1, 50, 12), dpos = MAKE(SDT_F32, 1, 7, 12);
    RUN2(cpu->embedding_backward(cpu, &dtab.c, &dpos.c, &eo.c, &tok.c),
         gpu->embedding_backward(gpu, &dtab.g, &dpos.g, &eo.g, &tok.g), "embedding bwd");
    compare(&dtab, tol_for(dt), "embedding dtable");
    compare(&dpos, tol_for(dt), "embedding dpos");
    drop(&tok), drop(&table), drop(&pos), drop(&eo), drop(&dtab), drop(&dpos);
}

/* The tiled transpose at shapes that are not multiples of its 32 x 32 tile, into its own
 * dtype and into f32, forward (written) and backward (accumulated onto what is there). */
static void test_transpose(sdt_dtype dt)
{
    const int64_t shapes[3][3] = {{2, 37, 70}, {3, 320, 64}, {1, 5, 1}};
    for (int k = 0; k < 3; k++) {
        int64_t B = shapes[k][0], M = shapes[k][1], N = shapes[k][2];
        sdt_dtype outs[2] = {dt, SDT_F32};
        for (int o = 0; o < 2; o++) {
            pair x = MAKE(dt, 1, B, M, N), out = MAKE(outs[o], 1, B, N, M), dx = MAKE(outs[o], 1, B, M, N);
            char name[64];
            snprintf(name, sizeof name, "transpose %lldx%lldx%lld -> %s", (long long)B, (long long)M, (long long)N,
                     sdt_dtype_name(outs[o]));
            RUN2(cpu->transpose_forward(cpu, &out.c, &x.c), gpu->transpose_forward(gpu, &out.g, &x.g), name);
            compare(&out, outs[o] == SDT_F32 ? 1e-7 : tol_for(dt), name);
            RUN2(cpu->transpose_backward(cpu, &dx.c, &out.c), gpu->transpose_backward(gpu, &dx.g, &out.g), name);
            compare(&dx, tol_for(outs[o]), name);
            drop(&x), drop(&out), drop(&dx);
        }
    }
}

/* The backend counts what it holds: an allocation raises the count and the peak by its
 * size, a free lowers the count, a reset brings the peak down to the count. */
static void test_memory_stats(void)
{
    sdt_memory_stats a, b, c, d;
    CHECK(gpu->memory_stats(gpu, &a, true) == 0 && a.tracked, "memory_stats: %s", gpu->error);
    size_t bytes = (size_t)(3 << 20) + 4096 * (size_t)(sdt_test_next(&rng) % 64);
    void *p = gpu->alloc(gpu, bytes);
    CHECK(p != NULL, "memory_stats: alloc failed: %s", gpu->error);
    CHECK(gpu->memory_stats(gpu, &b, false) == 0, "memory_stats: %s", gpu->error);
    CHECK(b.allocated_bytes == a.allocated_bytes + bytes, "memory_stats: %zu held after allocating %zu on %zu",
          b.allocated_bytes, bytes, a.allocated_bytes);
    CHECK(b.peak_allocated_bytes == b.allocated_bytes, "memory_stats: peak %zu, held %zu", b.peak_allocated_bytes,
          b.allocated_bytes);
    CHECK(b.device_total_bytes > 0 && b.device_free_bytes < b.device_total_bytes,
          "memory_stats: device %zu free of %zu", b.device_free_bytes, b.device_total_bytes);
    gpu->free(gpu, p);
    CHECK(gpu->memory_stats(gpu, &c, true) == 0 && c.allocated_bytes == a.allocated_bytes &&
              c.peak_allocated_bytes == b.peak_allocated_bytes,
          "memory_stats after free: held %zu (want %zu), peak %zu (want %zu)", c.allocated_bytes, a.allocated_bytes,
          c.peak_allocated_bytes, b.peak_allocated_bytes);
    CHECK(gpu->memory_stats(gpu, &d, false) == 0 && d.peak_allocated_bytes == a.allocated_bytes,
          "memory_stats after reset: peak %zu, want %zu", d.peak_allocated_bytes, a.allocated_bytes);
}

static void test_loss_and_optim(void)
{
    pair p = MAKE(SDT_F32, 1, 3, 4, 8, 8), t = MAKE(SDT_F32, 1, 3, 4, 8, 8), w = MAKE(SDT_F32, 1, 3, 4, 8, 8),
         dp = MAKE(SDT_F32, 1, 3, 4, 8, 8);
    double lc = 0, lg = 0;
    RUN2(cpu->mse_loss_forward(cpu, &lc, &p.c, &t.c, &w.c), gpu->mse_loss_forward(gpu, &lg, &p.g, &t.g, &w.g), "mse");
    CHECK(fabs(lc - lg) <= 1e-5 * fabs(lc), "mse loss GPU %.9g vs CPU %.9g", lg, lc);
    RUN2(cpu->mse_loss_backward(cpu, &dp.c, 0.5f, &p.c, &t.c, &w.c),
         gpu->mse_loss_backward(gpu, &dp.g, 0.5f, &p.g, &t.g, &w.g), "mse bwd");
    compare(&dp, 1e-5, "mse backward");
    for (int k = 0; k < SDT_ROBUST_LOSS_COUNT; k++) { /* L1 and Huber: shared_math.h's rho on both sides */
        sdt_robust_loss kind = (sdt_robust_loss)k;
        RUN2(cpu->robust_loss_forward(cpu, &lc, &p.c, &t.c, &w.c, kind, 0.7f),
             gpu->robust_loss_forward(gpu, &lg, &p.g, &t.g, &w.g, kind, 0.7f), "robust loss");
        CHECK(fabs(lc - lg) <= 1e-5 * fabs(lc), "robust loss %d GPU %.9g vs CPU %.9g", k, lg, lc);
        RUN2(cpu->robust_loss_backward(cpu, &dp.c, 0.5f, &p.c, &t.c, &w.c, kind, 0.7f),
             gpu->robust_loss_backward(gpu, &dp.g, 0.5f, &p.g, &t.g, &w.g, kind, 0.7f), "robust loss bwd");
        compare(&dp, 1e-5, "robust loss backward");
    }
    const sdt_tensor *lc_list[2] = {&p.c, &t.c}, *lg_list[2] = {&p.g, &t.g};
    double sc = 0, sg = 0;
    RUN2(cpu->sum_squares(cpu, &sc, lc_list, 2), gpu->sum_squares(gpu, &sg, lg_list, 2), "sum_squares");
    CHECK(fabs(sc - sg) <= 1e-9 * sc, "sum_squares GPU %.12g vs CPU %.12g", sg, sc);
    pair m = MAKE(SDT_F32, 0.1, 3, 4, 8, 8), v = MAKE(SDT_F32, 0.1, 3, 4, 8, 8);
    /* v must be non-negative: square it on both sides via a fresh upload */
    float *hv = malloc(sizeof(float) * 768);
    memcpy(hv, v.c.data, sizeof(float) * 768);
    for (int i = 0; i < 768; i++) hv[i] *= hv[i];
    memcpy(v.c.data, hv, sizeof(float) * 768);
    gpu->upload(gpu, v.g.data, hv, sizeof(float) * 768);
    free(hv);
    for (int step = 1; step <= 3; step++)
        RUN2(cpu->adamw_update(cpu, &p.c, &dp.c, &m.c, &v.c, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.01f, step, 0.5f),
             gpu->adamw_update(gpu, &p.g, &dp.g, &m.g, &v.g, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.01f, step, 0.5f), "adamw");
    compare(&p, 1e-5, "adamw params");
    compare(&m, 1e-5, "adamw m");
    compare(&v, 1e-5, "adamw v");
    /* unscale_check: finite grads pass, an inf is found */
    bool fc = false, fg = false;
    sdt_tensor *gc[1] = {&dp.c}, *gg[1] = {&dp.g};
    RUN2(cpu->unscale_check(cpu, gc, 1, 0.25f, &fc), gpu->unscale_check(gpu, gg, 1, 0.25f, &fg), "unscale");
    CHECK(!fc && !fg, "unscale_check: finite grads flagged (cpu %d gpu %d)", fc, fg);
    compare(&dp, 1e-6, "unscaled grads");
    float inf = INFINITY;
    gpu->upload(gpu, (float *)dp.g.data + 17, &inf, sizeof(float));
    fg = false;
    RUN2(0, gpu->unscale_check(gpu, gg, 1, 0.25f, &fg), "unscale inf");
    CHECK(fg, "unscale_check: an inf gradient was not found on the GPU");
    int64_t count = 0;
    RUN2(0, gpu->count_nonfinite(gpu, &dp.g, &count), "count_nonfinite");
    CHECK(count == 1, "count_nonfinite: %lld, want 1", (long long)count);
    drop(&p), drop(&t), drop(&w), drop(&dp), drop(&m), drop(&v);
}

/* conv2d with x, the filter and the output each NCHW or channels-last (layout bits 1, 2, 4; dx and dw
 * in x's and the filter's): the UNet's conv_in (NCHW latents, a channels-last filter, NHWC output)
 * and conv_out (the reverse) among them; w_dt: the filter's dtype (not dt: the f32 fallback). */
static void test_conv_layout(sdt_dtype dt, sdt_dtype w_dt, int layout, int k, int stride, int64_t C, int64_t OC)
{
    int pad = k / 2;
    int64_t H = 12, W = 9, OH = (H + 2 * pad - k) / stride + 1, OW = (W + 2 * pad - k) / stride + 1;
    char name[128];
    snprintf(name, sizeof name, "conv2d %dx%d stride %d %lld->%lld layout x%d w%d y%d %s w %s", k, k, stride,
             (long long)C, (long long)OC, layout & 1, (layout >> 1) & 1, (layout >> 2) & 1, sdt_dtype_name(dt),
             sdt_dtype_name(w_dt));
    pair x = MAKE(dt, 1, 2, C, H, W), w = MAKE(w_dt, 0.2, OC, C, k, k), b = MAKE(SDT_F32, 1, OC),
         out = MAKE(dt, 1, 2, OC, OH, OW);
    pair dout = MAKE(dt, 1, 2, OC, OH, OW), dx = MAKE(dt, 1, 2, C, H, W), dw = MAKE(SDT_F32, 1, OC, C, k, k),
         db = MAKE(SDT_F32, 1, OC);
    pair gx = MAKE(dt, 3, 2, C, H, W);
    x.c.channels_last = x.g.channels_last = dx.c.channels_last = dx.g.channels_last = gx.c.channels_last =
        gx.g.channels_last = layout & 1;
    w.c.channels_last = w.g.channels_last = dw.c.channels_last = dw.g.channels_last = (layout >> 1) & 1;
    out.c.channels_last = out.g.channels_last = dout.c.channels_last = dout.g.channels_last = (layout >> 2) & 1;
    RUN2(cpu->conv2d_forward(cpu, &out.c, &x.c, &w.c, &b.c, stride, pad),
         gpu->conv2d_forward(gpu, &out.g, &x.g, &w.g, &b.g, stride, pad), name);
    compare(&out, tol_for(dt), name);
    RUN2(cpu->conv2d_backward(cpu, &dx.c, &dw.c, &db.c, &dout.c, &x.c, &w.c, stride, pad),
         gpu->conv2d_backward(gpu, &dx.g, &dw.g, &db.g, &dout.g, &x.g, &w.g, stride, pad), name);
    compare(&dx, tol_for(dt), "conv dx");
    compare(&dw, tol_for(dt), "conv dw");
    compare(&db, tol_for(dt), "conv db");
    RUN2(cpu->conv2d_input_grad(cpu, &gx.c, &dout.c, &w.c, stride, pad),
         gpu->conv2d_input_grad(gpu, &gx.g, &dout.g, &w.g, stride, pad), name);
    compare(&gx, tol_for(dt), "conv input grad");
    drop(&x), drop(&w), drop(&b), drop(&out), drop(&dout), drop(&dx), drop(&dw), drop(&db), drop(&gx);
}

/* The convolutional ops on channels-last tensors: the NCHW tests again with every 4-D tensor NHWC
 * (g_channels_last), then conv2d's layout mixes at the UNet's forms. */
static void test_channels_last(sdt_dtype dt)
{
    g_channels_last = true;
    test_input_grads(dt);
    test_conv(dt, 3, 1, 13, 10);
    test_conv(dt, 3, 2, 13, 10);
    test_conv(dt, 1, 1, 13, 10);
    test_conv(dt, 3, 1, 16, 16);
    test_conv(dt, 3, 2, 16, 16);
    test_groupnorms(dt);
    test_add_channel_concat(dt, 3, 5, 0);
    test_add_channel_concat(dt, 8, 8, 0);
    test_add_channel_concat(dt, 8, 8, 1);
    test_add_channel_concat_ch(dt, 5, 7, 0, 16, 32); /* channel counts of whole vectors: the NHWC 16-byte path */
    test_upsample(dt);
    g_channels_last = false;
    for (int layout = 0; layout < 8; layout++)
        test_conv_layout(dt, dt, layout, 3, 1, 9, 32);                 /* conv_in's 9 (inpainting) -> 32 */
    test_conv_layout(dt, dt, 3, 3, 1, 32, 4);                          /* conv_out: NHWC x, KRSC filter, NCHW output */
    test_conv_layout(dt, dt, 7, 3, 2, 32, 32);                         /* a Downsample */
    test_conv_layout(dt, dt, 7, 1, 1, 64, 32);                         /* a skip connection / SD 1.x proj_in */
    if (dt != SDT_F32) test_conv_layout(dt, SDT_F32, 7, 3, 1, 16, 32); /* mixed dtypes: the f32 fallback, NHWC */
}

/* gpu_cuda_ops [groupnorm]: every op, or only the GroupNorm checks (NCHW and channels-last, every dtype:
 * bench/gnorm_gpu.sh's quick pass). */
int main(int argc, char **argv)
{
    if (!(gpu = gpu_test_backend("cuda_ops"))) return SDT_TEST_SKIP;
    cpu = sdt_backend_cpu_create(0);
    rng = sdt_test_rng_from_env("cuda_ops");
    sdt_dtype dts[3] = {SDT_F32, SDT_F16, SDT_BF16};
    if (argc > 1 && strcmp(argv[1], "groupnorm") == 0) {
        for (int i = 0; i < 3; i++) {
            test_groupnorms(dts[i]);
            g_channels_last = true;
            test_groupnorms(dts[i]);
            g_channels_last = false;
        }
        gpu->destroy(gpu);
        cpu->destroy(cpu);
        return sdt_test_finish("cuda_ops");
    }
    for (int i = 0; i < 3; i++) {
        test_linear(dts[i]);
        test_linear_epilogues(dts[i], 222, 64, 96);
        test_linear_epilogues(dts[i], 2048, 1280, 1280);
        test_linear_epilogues(dts[i], 154, 45, 29);
        test_input_grads(dts[i]);
        test_conv(dts[i], 3, 1, 13, 10);
        test_conv(dts[i], 3, 2, 13, 10);
        test_conv(dts[i], 1, 1, 13, 10);
        test_conv(dts[i], 3, 1, 16, 16);
        test_conv(dts[i], 3, 2, 16, 16);
        test_attention(dts[i], 2, 3, 8, 11, 11, true, true);
        test_attention(dts[i], 2, 3, 8, 13, 7, false, false);
        test_attention_model_shapes(dts[i]);
        test_attention_tile_edges(dts[i]);
        test_attention_replay(dts[i], 2, 2, 40, 300, 300);
        test_attention_replay(dts[i], 1, 2, 64, 1280, 77);
        test_attention_replay(dts[i], 2, 4, 40, 4096, 77); /* the short-key backward's partials over many blocks */
        test_attention_cross_shapes(dts[i]);
        test_attention_some_grads(dts[i]);
        test_norms(dts[i]);
        test_groupnorms(dts[i]);
        test_elementwise(dts[i]);
        test_transpose(dts[i]);
        test_channels_last(dts[i]);
        test_t5_ops(dts[i]);
    }
    /* a default training job's backend: cuBLASLt times its candidate algorithms on first use (linear.cu) */
    gpu->deterministic = false;
    for (int i = 1; i < 3; i++) {
        test_linear(dts[i]);
        test_linear_epilogues(dts[i], 2048, 1280, 1280);
        test_linear_epilogues(dts[i], 4096, 640, 2560);
        test_input_grads(dts[i]);
    }
    gpu->deterministic = true;
    test_loss_and_optim();
    test_memory_stats();
    gpu->destroy(gpu);
    cpu->destroy(cpu);
    return sdt_test_finish("cuda_ops");
}
