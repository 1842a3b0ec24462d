/* gnorm_cuda.c - GroupNorm (32 groups, + SiLU and plain) forward and backward on two builds of the CUDA
 * module, an old (base) and a new (change) one, in one process on one GPU (issue 32, bench/NOTES.md run 32):
 * every level of SDXL's UNet at 1024x1024 batch 4 and SD 1.5's at 512x512 batch 8, channels-last (the
 * UNets' layout) and a few NCHW rows beside them. Inputs are random from a fixed seed, the same for both
 * modules. Each op is timed base, change, base, change (median of 7 samples after 2 warm-ups each time;
 * the lower of each module's two medians is kept, so neither gains from going second).
 * Bandwidth: "moved" counts the bytes the kernels move (forward reads x twice and writes out: 3 passes;
 * backward reads x and dout twice, reads and writes dx: 6 passes; the statistics are small), against the
 * card's bandwidth (BW_GBS, an H100 SXM's ~3 TB/s reachable); the JSON also has the minimum count
 * ab_cuda prints (forward 2 passes, backward 4). As a check, each row also prints the largest difference
 * between the two modules' outputs and input gradients, relative to the largest magnitude.
 *   gnorm_cuda OUT.json BASE_MODULE.so|- [CHANGE_MODULE.so|- (default: this build's)] [bf16|f16|f32]
 * ("-" for base: the change module twice, for its own numbers.) Needs a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_bench.h"

#define BW_GBS 3000.0 /* an H100 SXM (HBM3): ~3.35 TB/s peak, ~3 TB/s reachable by a copy */

static unsigned long long rng;

static cuda_bench_gn gn_make(sdt_backend *be, sdt_dtype dt, int B, int C, int H, sdt_activation act, bool nhwc)
{
    rng = 0x6e0f3ULL; /* both modules get the same inputs */
    return cuda_bench_gn_make(be, &rng, dt, B, C, H, act, nhwc);
}

/* The largest |a - b| over the largest |a| of two device tensors of the same shape (on two modules). */
static double rel_diff(sdt_backend *ba, const sdt_tensor *a, sdt_backend *bb, const sdt_tensor *b)
{
    int64_t n = sdt_tensor_numel(a);
    size_t bytes = sdt_tensor_nbytes(a);
    void *ra = malloc(bytes), *rb = malloc(bytes);
    float *fa = malloc(sizeof(float) * (size_t)n), *fb = malloc(sizeof(float) * (size_t)n);
    if (!ra || !rb || !fa || !fb) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    ba->synchronize(ba);
    bb->synchronize(bb);
    ba->download(ba, ra, a->data, bytes);
    bb->download(bb, rb, b->data, bytes);
    sdt_load_f32(ra, a->dtype, fa, n);
    sdt_load_f32(rb, b->dtype, fb, n);
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)fa[i] - fb[i]), m = fabs((double)fa[i]);
        if (d > num || d != d) num = d;
        if (m > den) den = m;
    }
    free(ra), free(rb), free(fa), free(fb);
    return den > 0 ? num / den : num;
}

typedef struct row {
    char name[64];
    double ms[2][2];   /* [base, change][forward, backward] */
    double moved[2];   /* bytes the kernels move: forward, backward */
    double minimum[2]; /* the least any kernel must move: forward, backward */
    double diff_out;   /* base vs change: forward output */
    double diff_dx;    /* base vs change: the input gradient after one backward from zero */
} row;

static sdt_backend *mods[2];
static sdt_dtype dtype = SDT_BF16;

static row bench_gn(int B, int C, int H, sdt_activation act, bool nhwc, const char *model)
{
    row r;
    memset(&r, 0, sizeof r);
    snprintf(r.name, sizeof r.name, "%s %s %dch %dx%d b%d (%s)", act == SDT_ACT_SILU ? "gn+silu" : "gn",
             nhwc ? "NHWC" : "NCHW", C, H, H, B, model);
    cuda_bench_gn n[2] = {gn_make(mods[0], dtype, B, C, H, act, nhwc), gn_make(mods[1], dtype, B, C, H, act, nhwc)};
    /* one forward and one backward from zero on each, compared, before the timing accumulates into dx */
    for (int m = 0; m < 2; m++)
        if (cuda_bench_gn_forward(mods[m], &n[m]) || cuda_bench_gn_backward(mods[m], &n[m])) {
            fprintf(stderr, "%s: %s\n", r.name, mods[m]->error.message);
            exit(1);
        }
    r.diff_out = rel_diff(mods[0], &n[0].y, mods[1], &n[1].y);
    r.diff_dx = rel_diff(mods[0], &n[0].dx, mods[1], &n[1].dx);
    void *ctx[2] = {&n[0], &n[1]};
    cuda_bench_time_ab(mods, cuda_bench_gn_forward, cuda_bench_gn_backward, ctx, 20, r.ms);
    double pass = (double)B * C * H * H * sdt_dtype_size(dtype);
    r.moved[0] = 3 * pass;
    r.moved[1] = 6 * pass;
    r.minimum[0] = 2 * pass;
    r.minimum[1] = 4 * pass;
    cuda_bench_gn_free(mods[0], &n[0]);
    cuda_bench_gn_free(mods[1], &n[1]);
    return r;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: gnorm_cuda OUT.json BASE_MODULE.so|- [CHANGE_MODULE.so|-] [bf16|f16|f32]\n");
        return 2;
    }
    const char *out = argv[1], *change = argc > 3 && strcmp(argv[3], "-") ? argv[3] : SDT_CUDA_MODULE_PATH;
    const char *base = strcmp(argv[2], "-") ? argv[2] : change;
    if (argc > 4) {
        if (!strcmp(argv[4], "f16"))
            dtype = SDT_F16;
        else if (!strcmp(argv[4], "f32"))
            dtype = SDT_F32;
        else if (strcmp(argv[4], "bf16")) {
            fprintf(stderr, "gnorm_cuda: dtype %s: use bf16, f16 or f32\n", argv[4]);
            return 2;
        }
    }
    cuda_bench_open_ab("gnorm_cuda", base, change, true, mods); /* the kernels are deterministic either way */
    printf("base %s\nchange %s\ndtype %s\n", base, change, sdt_dtype_name(dtype));
    row r[48];
    int n = 0;
    const sdt_activation S = SDT_ACT_SILU, I = SDT_ACT_IDENTITY;
    /* SDXL 1024x1024 batch 4: the resnets' norms (+ SiLU) at every level, the decoder's concatenated widths,
     * and the transformers' plain norm */
    static const int xl[][2] = {{320, 128}, {640, 128}, {960, 128}, {640, 64},  {960, 64},
                                {1280, 64}, {1920, 64}, {1280, 32}, {1920, 32}, {2560, 32}};
    for (size_t i = 0; i < sizeof xl / sizeof xl[0]; i++) r[n++] = bench_gn(4, xl[i][0], xl[i][1], S, true, "XL");
    r[n++] = bench_gn(4, 640, 64, I, true, "XL");
    r[n++] = bench_gn(4, 1280, 32, I, true, "XL");
    /* SD 1.5 512x512 batch 8 */
    static const int sd[][2] = {{320, 64}, {640, 64}, {640, 32}, {1280, 16}, {1280, 8}};
    for (size_t i = 0; i < sizeof sd / sizeof sd[0]; i++) r[n++] = bench_gn(8, sd[i][0], sd[i][1], S, true, "1.5");
    r[n++] = bench_gn(8, 320, 64, I, true, "1.5");
    /* NCHW beside them (groupnorm.cu: only its SiLU math changed, groupnorm_act.cuh): the bandwidth NHWC is held to */
    r[n++] = bench_gn(4, 320, 128, S, false, "XL");
    r[n++] = bench_gn(4, 1280, 32, S, false, "XL");
    r[n++] = bench_gn(8, 320, 64, S, false, "1.5");

    double sum[2][2] = {{0, 0}, {0, 0}};
    printf("%-36s %8s %8s %8s %8s %6s %6s %11s %11s %7s %7s %8s %8s\n", "op", "old fwd", "new fwd", "old bwd",
           "new bwd", "fwd x", "bwd x", "GB/s fwd", "GB/s bwd", "fwd %bw", "bwd %bw", "diff out", "diff dx");
    for (int i = 0; i < n; i++) {
        double gf[2], gb[2];
        for (int m = 0; m < 2; m++) {
            gf[m] = r[i].moved[0] / (r[i].ms[m][0] * 1e6);
            gb[m] = r[i].moved[1] / (r[i].ms[m][1] * 1e6);
            if (strstr(r[i].name, "NHWC") && strstr(r[i].name, "(XL)"))
                for (int d = 0; d < 2; d++) sum[m][d] += r[i].ms[m][d];
        }
        printf("%-36s %8.4f %8.4f %8.4f %8.4f %5.2fx %5.2fx %5.0f/%-5.0f %5.0f/%-5.0f %6.1f%% %6.1f%% %8.1e %8.1e\n",
               r[i].name, r[i].ms[0][0], r[i].ms[1][0], r[i].ms[0][1], r[i].ms[1][1], r[i].ms[0][0] / r[i].ms[1][0],
               r[i].ms[0][1] / r[i].ms[1][1], gf[0], gf[1], gb[0], gb[1], 100 * gf[1] / BW_GBS, 100 * gb[1] / BW_GBS,
               r[i].diff_out, r[i].diff_dx);
    }
    printf("SDXL NHWC rows summed (ms): forward %.3f -> %.3f, backward %.3f -> %.3f\n", sum[0][0], sum[1][0], sum[0][1],
           sum[1][1]);
    FILE *j = fopen(out, "w");
    if (!j) {
        fprintf(stderr, "gnorm_cuda: cannot write %s\n", out);
        return 1;
    }
    fprintf(j, "{\"dtype\": \"%s\", \"bandwidth_gbs\": %.0f, \"base\": \"%s\", \"change\": \"%s\", \"results\": [\n",
            sdt_dtype_name(dtype), BW_GBS, base, change);
    for (int i = 0; i < n; i++)
        fprintf(
            j,
            "  {\"op\": \"%s\", \"base_fwd_ms\": %.5f, \"change_fwd_ms\": %.5f, \"base_bwd_ms\": %.5f, "
            "\"change_bwd_ms\": %.5f, \"fwd_bytes_moved\": %.0f, \"bwd_bytes_moved\": %.0f, \"fwd_bytes_min\": %.0f, "
            "\"bwd_bytes_min\": %.0f, \"diff_out\": %.3g, \"diff_dx\": %.3g}%s\n",
            r[i].name, r[i].ms[0][0], r[i].ms[1][0], r[i].ms[0][1], r[i].ms[1][1], r[i].moved[0], r[i].moved[1],
            r[i].minimum[0], r[i].minimum[1], r[i].diff_out, r[i].diff_dx, i + 1 < n ? "," : "");
    fprintf(j, "]}\n");
    fclose(j);
    mods[0]->destroy(mods[0]);
    if (mods[1] != mods[0]) mods[1]->destroy(mods[1]);
    return 0;
}
