/* ops_cuda.c - times the CUDA backend's heaviest ops at SD 1.5 shapes (512x512 images, so
 * 64x64 latents; attention at every UNet level, and SD 2.x's head dim 64), forward and
 * backward, in bf16 on random inputs, and prints where a training step's time can go.
 * The memory-bound ops (GroupNorm + SiLU, LayerNorm, GEGLU, add, SiLU) run at SD 1.5's batch-8
 * shapes and SDXL's at 1024x1024, batch 4, and print GB/s: the bytes the op must move at least
 * (every tensor it reads or writes, once: forward reads x and writes out, backward reads x and
 * dout and reads and writes dx) over the time, to set against the card's bandwidth (H100 SXM:
 * ~3.35 TB/s). Prints a table and writes JSON (argv[1], default bench_ops_cuda.json); argv[2]
 * "nondeterministic" runs the backend as a default training job does. Needs a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_bench.h"

static sdt_backend *be;

/* Uniform random values in [-1, 1) from a fixed seed: timing zeros flatters kernels and hides unwritten outputs. */
static unsigned long long bench_rng = 0x5d7a11ULL;
#define DEVR(dt, ...) cuda_bench_tensor(be, dt, &bench_rng, CUDA_BENCH_NDIM(__VA_ARGS__), (int64_t[]){__VA_ARGS__})
#define DEV(dt, ...) cuda_bench_tensor(be, dt, NULL, CUDA_BENCH_NDIM(__VA_ARGS__), (int64_t[]){__VA_ARGS__})

typedef struct result {
    const char *name;
    double fwd_ms, bwd_ms;
    double fwd_bytes, bwd_bytes; /* the least the op must move (0: not a memory-bound op) */
} result;

/* The memory-bound ops take 10-100 us at these shapes, about the host's launch-and-synchronize cost, so they
 * are timed 20 calls a sample (cuda_bench_time_ms). */
static double time_ms_reps(cuda_bench_op f, void *ctx, int reps)
{
    return cuda_bench_time_ms(be, f, ctx, reps);
}
static double time_ms(cuda_bench_op f, void *ctx)
{
    return time_ms_reps(f, ctx, 1);
}
#define MEMORY_BOUND_REPS 20

/* Forward saves the logsumexp and backward reads it with out, as the UNet's attention does.
 * Each attention shape also prints its TFLOP/s as it is timed (FlashAttention's count: forward
 * 4 B Tq Tk H D, backward 2.5 times that), to set against FlashAttention-2's ~300 forward and
 * ~200 backward at head dim 64 on an H100. */
static result bench_attention(const char *name, int B, int Tq, int Tk, int C, int heads)
{
    cuda_bench_attn a = cuda_bench_attn_make(be, &bench_rng, B, Tq, Tk, C, heads);
    result r = {name, time_ms(cuda_bench_attn_forward, &a), time_ms(cuda_bench_attn_backward, &a), 0, 0};
    cuda_bench_attn_free(be, &a);
    const double flop = 4.0 * B * Tq * Tk * (double)C; /* C = H D */
    printf("%-40s fwd %7.1f TFLOP/s   bwd %7.1f TFLOP/s\n", name, flop / (r.fwd_ms * 1e9),
           2.5 * flop / (r.bwd_ms * 1e9));
    return r;
}

typedef struct conv_ctx {
    sdt_tensor x, w, b, y, dy, dx;
} conv_ctx;
static int conv_f(sdt_backend *be, void *c)
{
    conv_ctx *k = c;
    return be->conv2d_forward(be, &k->y, &k->x, &k->w, &k->b, 1, 1);
}
static int conv_b(sdt_backend *be, void *c)
{
    conv_ctx *k = c;
    return be->conv2d_backward(be, &k->dx, NULL, NULL, &k->dy, &k->x, &k->w, 1, 1);
}

static result bench_conv(const char *name, int B, int C, int H)
{
    conv_ctx k = {DEV(SDT_BF16, B, C, H, H), DEV(SDT_BF16, C, C, 3, 3), DEV(SDT_BF16, C),
                  DEV(SDT_BF16, B, C, H, H), DEV(SDT_BF16, B, C, H, H), DEV(SDT_BF16, B, C, H, H)};
    result r = {name, time_ms(conv_f, &k), time_ms(conv_b, &k), 0, 0};
    sdt_tensor *all[6] = {&k.x, &k.w, &k.b, &k.y, &k.dy, &k.dx};
    for (int i = 0; i < 6; i++) be->free(be, all[i]->data);
    return r;
}

typedef struct gn_ctx {
    sdt_tensor x, g, b, y, mean, rstd, dy, dx;
} gn_ctx;
static int gn_f(sdt_backend *be, void *c)
{
    gn_ctx *n = c;
    return be->groupnorm_forward(be, &n->y, &n->mean, &n->rstd, &n->x, &n->g, &n->b, 32, 1e-5f, SDT_ACT_SILU);
}
static int gn_b(sdt_backend *be, void *c)
{
    gn_ctx *n = c;
    return be->groupnorm_backward(be, &n->dx, NULL, NULL, &n->dy, &n->x, &n->g, &n->b, &n->mean, &n->rstd, 32,
                                  SDT_ACT_SILU);
}

/* channels_last: the UNet's layout on CUDA (tensor.h) */
static result bench_groupnorm_layout(const char *name, int B, int C, int H, bool channels_last)
{
    gn_ctx n = {DEVR(SDT_BF16, B, C, H, H), DEVR(SDT_BF16, C),   DEVR(SDT_BF16, C),          DEV(SDT_BF16, B, C, H, H),
                DEV(SDT_F32, B, 32),        DEV(SDT_F32, B, 32), DEVR(SDT_BF16, B, C, H, H), DEV(SDT_BF16, B, C, H, H)};
    n.x.channels_last = n.y.channels_last = n.dy.channels_last = n.dx.channels_last = channels_last;
    double bytes = 2.0 * B * C * H * H;
    result r = {name, time_ms_reps(gn_f, &n, MEMORY_BOUND_REPS), time_ms_reps(gn_b, &n, MEMORY_BOUND_REPS), 2 * bytes,
                4 * bytes};
    sdt_tensor *all[8] = {&n.x, &n.g, &n.b, &n.y, &n.mean, &n.rstd, &n.dy, &n.dx};
    for (int i = 0; i < 8; i++) be->free(be, all[i]->data);
    return r;
}
static result bench_groupnorm(const char *name, int B, int C, int H)
{
    return bench_groupnorm_layout(name, B, C, H, false);
}

/* LayerNorm over rows of C (the transformer blocks' norms; gamma's and beta's gradients are not
 * asked for, as in the frozen UNet). */
typedef struct ln_ctx {
    sdt_tensor x, g, b, y, mean, rstd, dy, dx;
} ln_ctx;
static int ln_f(sdt_backend *be, void *c)
{
    ln_ctx *n = c;
    return be->layernorm_forward(be, &n->y, &n->mean, &n->rstd, &n->x, &n->g, &n->b, 1e-5f);
}
static int ln_b(sdt_backend *be, void *c)
{
    ln_ctx *n = c;
    return be->layernorm_backward(be, &n->dx, NULL, NULL, &n->dy, &n->x, &n->g, &n->mean, &n->rstd);
}
static result bench_layernorm(const char *name, int rows, int C)
{
    ln_ctx n = {DEVR(SDT_BF16, rows, C), DEVR(SDT_BF16, C),  DEVR(SDT_BF16, C),       DEV(SDT_BF16, rows, C),
                DEV(SDT_F32, rows),      DEV(SDT_F32, rows), DEVR(SDT_BF16, rows, C), DEV(SDT_BF16, rows, C)};
    double bytes = 2.0 * rows * C;
    ln_f(be, &n); /* backward reads forward's statistics */
    result r = {name, time_ms_reps(ln_f, &n, MEMORY_BOUND_REPS), time_ms_reps(ln_b, &n, MEMORY_BOUND_REPS), 2 * bytes,
                4 * bytes};
    sdt_tensor *all[8] = {&n.x, &n.g, &n.b, &n.y, &n.mean, &n.rstd, &n.dy, &n.dx};
    for (int i = 0; i < 8; i++) be->free(be, all[i]->data);
    return r;
}

/* GEGLU x [rows, 2F] -> [rows, F]. */
typedef struct geglu_ctx {
    sdt_tensor x, y, dy, dx;
} geglu_ctx;
static int geglu_f(sdt_backend *be, void *c)
{
    geglu_ctx *g = c;
    return be->geglu_forward(be, &g->y, &g->x);
}
static int geglu_b(sdt_backend *be, void *c)
{
    geglu_ctx *g = c;
    return be->geglu_backward(be, &g->dx, &g->dy, &g->x);
}
static result bench_geglu(const char *name, int rows, int F)
{
    geglu_ctx g = {DEVR(SDT_BF16, rows, 2 * F), DEV(SDT_BF16, rows, F), DEVR(SDT_BF16, rows, F),
                   DEV(SDT_BF16, rows, 2 * F)};
    double bytes = 2.0 * rows * F; /* one [rows, F] tensor */
    /* backward reads x and dy and writes dx (never reads it: ops.h) */
    result r = {name, time_ms_reps(geglu_f, &g, MEMORY_BOUND_REPS), time_ms_reps(geglu_b, &g, MEMORY_BOUND_REPS),
                3 * bytes, 5 * bytes};
    sdt_tensor *all[4] = {&g.x, &g.y, &g.dy, &g.dx};
    for (int i = 0; i < 4; i++) be->free(be, all[i]->data);
    return r;
}

/* The residual add (forward only: its backward is an axpy) and SiLU forward and backward. */
typedef struct ew_ctx {
    sdt_tensor a, b, y, dy, dx;
} ew_ctx;
static int add_f(sdt_backend *be, void *c)
{
    ew_ctx *e = c;
    return be->add_forward(be, &e->y, &e->a, &e->b);
}
static int silu_f(sdt_backend *be, void *c)
{
    ew_ctx *e = c;
    return be->activation_forward(be, &e->y, &e->a, SDT_ACT_SILU);
}
static int silu_b(sdt_backend *be, void *c)
{
    ew_ctx *e = c;
    return be->activation_backward(be, &e->dx, &e->dy, &e->a, SDT_ACT_SILU);
}
static result bench_elementwise(const char *name, bool add, int B, int C, int H)
{
    ew_ctx e = {DEVR(SDT_BF16, B, C, H, H), DEVR(SDT_BF16, B, C, H, H), DEV(SDT_BF16, B, C, H, H),
                DEVR(SDT_BF16, B, C, H, H), DEV(SDT_BF16, B, C, H, H)};
    double bytes = 2.0 * B * C * H * H;
    result r = add ? (result){name, time_ms_reps(add_f, &e, MEMORY_BOUND_REPS), 0, 3 * bytes, 0}
                   : (result){name, time_ms_reps(silu_f, &e, MEMORY_BOUND_REPS),
                              time_ms_reps(silu_b, &e, MEMORY_BOUND_REPS), 2 * bytes, 4 * bytes};
    sdt_tensor *all[5] = {&e.a, &e.b, &e.y, &e.dy, &e.dx};
    for (int i = 0; i < 5; i++) be->free(be, all[i]->data);
    return r;
}

int main(int argc, char **argv)
{
    const char *out = argc > 1 ? argv[1] : "bench_ops_cuda.json";
    const char *path = getenv("SDT_CUDA_MODULE") ? getenv("SDT_CUDA_MODULE") : SDT_CUDA_MODULE_PATH;
    be = cuda_bench_open("ops_cuda", path);
    /* argv[2] "nondeterministic": the backend as a default training job sets it (cuDNN's attention backward,
     * kernels/ops.h); otherwise as created, deterministic (attention.cu's backward) */
    if (argc > 2 && strcmp(argv[2], "nondeterministic") == 0) be->deterministic = false;
    printf("backend: %s\n", be->deterministic ? "deterministic (attention.cu's backward)"
                                              : "nondeterministic (cuDNN's attention backward)");
    result r[64];
    int n = 0;
    for (int B = 1; B <= 8; B *= 8) {
        char *names[7];
        for (int i = 0; i < 7; i++) names[i] = malloc(64);
        snprintf(names[0], 64, "self-attn 4096x320 h8 b%d", B);
        snprintf(names[1], 64, "cross-attn 4096x77 h8 b%d", B);
        snprintf(names[2], 64, "self-attn 1024x640 h8 b%d", B);
        snprintf(names[3], 64, "self-attn 256x1280 h8 b%d", B);
        snprintf(names[4], 64, "self-attn 4096x320 h5 b%d", B); /* SD 2.x: head dim 64 */
        snprintf(names[5], 64, "conv3x3 320ch 64x64 b%d", B);
        snprintf(names[6], 64, "groupnorm+silu 320ch 64x64 b%d", B);
        r[n++] = bench_attention(names[0], B, 4096, 4096, 320, 8);
        r[n++] = bench_attention(names[1], B, 4096, 77, 320, 8);
        r[n++] = bench_attention(names[2], B, 1024, 1024, 640, 8);
        r[n++] = bench_attention(names[3], B, 256, 256, 1280, 8);
        r[n++] = bench_attention(names[4], B, 4096, 4096, 320, 5);
        r[n++] = bench_conv(names[5], B, 320, 64);
        r[n++] = bench_groupnorm(names[6], B, 320, 64);
        /* SDXL at 1024x1024 (128x128 latents), batch 1 and 4: self-attention at 64x64 (10 heads)
         * and 32x32 (20 heads), head dim 64 */
        const int xb = B == 1 ? 1 : 4;
        char *xl[4] = {malloc(64), malloc(64), malloc(64), malloc(64)};
        snprintf(xl[0], 64, "sdxl self-attn 4096x640 h10 b%d", xb);
        snprintf(xl[1], 64, "sdxl self-attn 1024x1280 h20 b%d", xb);
        snprintf(xl[2], 64, "sdxl cross-attn 4096x77 h10 b%d", xb);
        snprintf(xl[3], 64, "sdxl cross-attn 1024x77 h20 b%d", xb);
        r[n++] = bench_attention(xl[0], xb, 4096, 4096, 640, 10);
        r[n++] = bench_attention(xl[1], xb, 1024, 1024, 1280, 20);
        r[n++] = bench_attention(xl[2], xb, 4096, 77, 640, 10);
        r[n++] = bench_attention(xl[3], xb, 1024, 77, 1280, 20);
    }
    /* memory-bound ops: SD 1.5 at batch 8 (levels 64x64, 32x32, 16x16), SDXL 1024x1024 at batch 4 */
    r[n++] = bench_groupnorm_layout("groupnorm+silu NHWC 320ch 64x64 b8", 8, 320, 64, true);
    r[n++] = bench_groupnorm_layout("groupnorm+silu NHWC 320ch 128x128 b4 (XL)", 4, 320, 128, true);
    r[n++] = bench_groupnorm_layout("groupnorm+silu NHWC 640ch 64x64 b4 (XL)", 4, 640, 64, true);
    r[n++] = bench_groupnorm_layout("groupnorm+silu NHWC 1280ch 32x32 b4 (XL)", 4, 1280, 32, true);
    r[n++] = bench_groupnorm("groupnorm+silu 640ch 32x32 b8", 8, 640, 32);
    r[n++] = bench_groupnorm("groupnorm+silu 1280ch 16x16 b8", 8, 1280, 16);
    r[n++] = bench_groupnorm("groupnorm+silu 1280ch 8x8 b8", 8, 1280, 8);
    r[n++] = bench_groupnorm("groupnorm+silu 320ch 128x128 b1 (XL)", 1, 320, 128);
    r[n++] = bench_groupnorm("groupnorm+silu 640ch 64x64 b4 (XL)", 4, 640, 64);
    r[n++] = bench_layernorm("layernorm 32768x320 b8", 8 * 4096, 320);
    r[n++] = bench_layernorm("layernorm 8192x640 b8", 8 * 1024, 640);
    r[n++] = bench_layernorm("layernorm 2048x1280 b8", 8 * 256, 1280);
    r[n++] = bench_layernorm("layernorm 4096x1280 b4 (XL)", 4 * 1024, 1280);
    r[n++] = bench_geglu("geglu 32768x1280 b8", 8 * 4096, 1280);
    r[n++] = bench_geglu("geglu 8192x2560 b8", 8 * 1024, 2560);
    r[n++] = bench_geglu("geglu 2048x5120 b8", 8 * 256, 5120);
    r[n++] = bench_geglu("geglu 4096x5120 b4 (XL)", 4 * 1024, 5120);
    r[n++] = bench_elementwise("add 320ch 64x64 b8", true, 8, 320, 64);
    r[n++] = bench_elementwise("silu 320ch 64x64 b8", false, 8, 320, 64);
    FILE *j = fopen(out, "w");
    printf("%-40s %10s %10s %10s %10s\n", "op (bf16)", "fwd ms", "bwd ms", "fwd GB/s", "bwd GB/s");
    if (j) fprintf(j, "{\"dtype\": \"bf16\", \"results\": [\n");
    for (int i = 0; i < n; i++) {
        double fg = r[i].fwd_bytes > 0 ? r[i].fwd_bytes / (r[i].fwd_ms * 1e6) : 0;
        double bg = r[i].bwd_bytes > 0 && r[i].bwd_ms > 0 ? r[i].bwd_bytes / (r[i].bwd_ms * 1e6) : 0;
        printf("%-40s %10.3f %10.3f", r[i].name, r[i].fwd_ms, r[i].bwd_ms);
        if (fg > 0)
            printf(" %10.0f", fg);
        else
            printf(" %10s", "-");
        if (bg > 0)
            printf(" %10.0f\n", bg);
        else
            printf(" %10s\n", "-");
        if (j)
            fprintf(j,
                    "  {\"op\": \"%s\", \"fwd_ms\": %.4f, \"bwd_ms\": %.4f, \"fwd_gbs\": %.1f, \"bwd_gbs\": %.1f}%s\n",
                    r[i].name, r[i].fwd_ms, r[i].bwd_ms, fg, bg, i + 1 < n ? "," : "");
    }
    if (j) {
        fprintf(j, "]}\n");
        fclose(j);
    }
    be->destroy(be);
    return 0;
}
