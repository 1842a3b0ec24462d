/* ab_cuda.c - times the same ops on two builds of the CUDA module, a base and a change, in one
 * process on one GPU, so a kernel change is measured against what it replaces in one sitting:
 * channels-last GroupNorm (+ SiLU, and plain: the transformers' norm before proj_in) and the
 * cross-attention (Tk = 77, the text tokens) at the UNet's shapes of SD 1.5 at 512x512 batch 8
 * and SDXL at 1024x1024 batch 4, bf16, random inputs from a fixed seed. Each op is timed on base,
 * change, base, change (median of 7 samples after 2 warm-ups each time) and the lower of each
 * module's two medians is kept, so neither gains from going second. Memory-bound ops print GB/s
 * as bench/ops_cuda does (the bytes the op must move at least: forward reads x and writes out,
 * backward reads x and dout and reads and writes dx); attention prints TFLOP/s (FlashAttention's
 * count). Prints a table and writes JSON.
 *   ab_cuda OUT.json BASE_MODULE.so [CHANGE_MODULE.so (default: this build's)] [nondeterministic]
 * Needs a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_bench.h"

/* Uniform random values in [-1, 1) from a fixed seed (reset per op, so both modules get the same inputs). */
static unsigned long long rng;

static cuda_bench_gn gn_make(sdt_backend *be, int B, int C, int H, sdt_activation act)
{
    rng = 0x5d7a11ULL;
    return cuda_bench_gn_make(be, &rng, SDT_BF16, B, C, H, act, true);
}

/* Both modules get the same inputs: the seed reset per op. */
static cuda_bench_attn attn_make(sdt_backend *be, int B, int Tq, int Tk, int C, int heads)
{
    rng = 0x5d7a11ULL;
    return cuda_bench_attn_make(be, &rng, B, Tq, Tk, C, heads);
}

typedef struct row {
    char name[64];
    double ms[2][2]; /* [base, change][forward, backward] */
    double bytes[2]; /* forward, backward; 0: not memory-bound */
    double flop;     /* forward (FlashAttention's count); 0: not attention */
} row;

static sdt_backend *mods[2];

static row bench_gn(const char *name, int B, int C, int H, sdt_activation act)
{
    row r = {{0}, {{0}}, {0}, 0};
    snprintf(r.name, sizeof r.name, "%s", name);
    cuda_bench_gn n[2] = {gn_make(mods[0], B, C, H, act), gn_make(mods[1], B, C, H, act)};
    void *ctx[2] = {&n[0], &n[1]};
    cuda_bench_time_ab(mods, cuda_bench_gn_forward, cuda_bench_gn_backward, ctx, 20, r.ms); /* 10-400 us an op */
    double bytes = 2.0 * B * C * H * H;
    r.bytes[0] = 2 * bytes;
    r.bytes[1] = 4 * bytes;
    cuda_bench_gn_free(mods[0], &n[0]);
    cuda_bench_gn_free(mods[1], &n[1]);
    return r;
}

static row bench_attn(const char *name, int B, int Tq, int Tk, int C, int heads)
{
    row r = {{0}, {{0}}, {0}, 0};
    snprintf(r.name, sizeof r.name, "%s", name);
    cuda_bench_attn a[2] = {attn_make(mods[0], B, Tq, Tk, C, heads), attn_make(mods[1], B, Tq, Tk, C, heads)};
    void *ctx[2] = {&a[0], &a[1]};
    cuda_bench_time_ab(mods, cuda_bench_attn_forward, cuda_bench_attn_backward, ctx, 5, r.ms);
    r.flop = 4.0 * B * Tq * Tk * (double)C;
    cuda_bench_attn_free(mods[0], &a[0]);
    cuda_bench_attn_free(mods[1], &a[1]);
    return r;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: ab_cuda OUT.json BASE_MODULE.so [CHANGE_MODULE.so] [nondeterministic]\n");
        return 2;
    }
    const char *out = argv[1], *base = argv[2], *change = argc > 3 ? argv[3] : SDT_CUDA_MODULE_PATH;
    bool deterministic = !(argc > 4 && strcmp(argv[4], "nondeterministic") == 0);
    cuda_bench_open_ab("ab_cuda", base, change, deterministic, mods);
    printf("base %s\nchange %s\nbackend: %s\n", base, change,
           deterministic ? "deterministic (attention.cu's backward)" : "nondeterministic (cuDNN's attention backward)");
    row r[32];
    int n = 0;
    /* GroupNorm + SiLU (the resnets' norms) and plain GroupNorm (the transformers' norm) at every UNet level */
    r[n++] = bench_gn("gn+silu NHWC 320ch 64x64 b8 (1.5)", 8, 320, 64, SDT_ACT_SILU);
    r[n++] = bench_gn("gn+silu NHWC 640ch 32x32 b8 (1.5)", 8, 640, 32, SDT_ACT_SILU);
    r[n++] = bench_gn("gn+silu NHWC 1280ch 16x16 b8 (1.5)", 8, 1280, 16, SDT_ACT_SILU);
    r[n++] = bench_gn("gn+silu NHWC 1280ch 8x8 b8 (1.5)", 8, 1280, 8, SDT_ACT_SILU);
    r[n++] = bench_gn("gn NHWC 320ch 64x64 b8 (1.5)", 8, 320, 64, SDT_ACT_IDENTITY);
    r[n++] = bench_gn("gn+silu NHWC 320ch 128x128 b4 (XL)", 4, 320, 128, SDT_ACT_SILU);
    r[n++] = bench_gn("gn+silu NHWC 640ch 64x64 b4 (XL)", 4, 640, 64, SDT_ACT_SILU);
    r[n++] = bench_gn("gn+silu NHWC 1280ch 32x32 b4 (XL)", 4, 1280, 32, SDT_ACT_SILU);
    r[n++] = bench_gn("gn NHWC 640ch 64x64 b4 (XL)", 4, 640, 64, SDT_ACT_IDENTITY);
    /* cross-attention: the text's 77 tokens */
    r[n++] = bench_attn("cross-attn 4096x77 d40 h8 b8 (1.5)", 8, 4096, 77, 320, 8);
    r[n++] = bench_attn("cross-attn 1024x77 d80 h8 b8 (1.5)", 8, 1024, 77, 640, 8);
    r[n++] = bench_attn("cross-attn 256x77 d160 h8 b8 (1.5)", 8, 256, 77, 1280, 8);
    r[n++] = bench_attn("cross-attn 4096x77 d64 h10 b4 (XL)", 4, 4096, 77, 640, 10);
    r[n++] = bench_attn("cross-attn 1024x77 d64 h20 b4 (XL)", 4, 1024, 77, 1280, 20);
    FILE *j = fopen(out, "w");
    printf("%-38s %9s %9s %9s %9s %7s %7s %16s %16s\n", "op (bf16)", "base fwd", "new fwd", "base bwd", "new bwd",
           "fwd x", "bwd x", "GB/s fwd b/new", "GB/s bwd b/new");
    if (j)
        fprintf(j, "{\"dtype\": \"bf16\", \"deterministic\": %s, \"results\": [\n", deterministic ? "true" : "false");
    for (int i = 0; i < n; i++) {
        double sf = r[i].ms[0][0] / r[i].ms[1][0], sb = r[i].ms[0][1] / r[i].ms[1][1];
        printf("%-38s %9.4f %9.4f %9.4f %9.4f %6.2fx %6.2fx", r[i].name, r[i].ms[0][0], r[i].ms[1][0], r[i].ms[0][1],
               r[i].ms[1][1], sf, sb);
        if (r[i].bytes[0] > 0)
            printf(" %7.0f/%-7.0f %7.0f/%-7.0f\n", r[i].bytes[0] / (r[i].ms[0][0] * 1e6),
                   r[i].bytes[0] / (r[i].ms[1][0] * 1e6), r[i].bytes[1] / (r[i].ms[0][1] * 1e6),
                   r[i].bytes[1] / (r[i].ms[1][1] * 1e6));
        else
            printf("   TFLOP/s fwd %5.1f/%-5.1f bwd %5.1f/%-5.1f\n", r[i].flop / (r[i].ms[0][0] * 1e9),
                   r[i].flop / (r[i].ms[1][0] * 1e9), 2.5 * r[i].flop / (r[i].ms[0][1] * 1e9),
                   2.5 * r[i].flop / (r[i].ms[1][1] * 1e9));
        if (j)
            fprintf(
                j,
                "  {\"op\": \"%s\", \"base_fwd_ms\": %.4f, \"change_fwd_ms\": %.4f, \"base_bwd_ms\": %.4f, \"change_bwd_ms\": %.4f, "
                "\"fwd_bytes\": %.0f, \"bwd_bytes\": %.0f, \"fwd_flop\": %.0f}%s\n",
                r[i].name, r[i].ms[0][0], r[i].ms[1][0], r[i].ms[0][1], r[i].ms[1][1], r[i].bytes[0], r[i].bytes[1],
                r[i].flop, i + 1 < n ? "," : "");
    }
    if (j) {
        fprintf(j, "]}\n");
        fclose(j);
    }
    mods[0]->destroy(mods[0]);
    mods[1]->destroy(mods[1]);
    return 0;
}
