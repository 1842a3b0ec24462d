/* cuda_bench.h - what the CUDA op benches (bench/ab_cuda, bench/gnorm_cuda, bench/ops_cuda) share: the CUDA module
 * opened, device tensors of zeros or of random values from a fixed seed, the timing loop (and its A/B form), the
 * attention and GroupNorm ops. Needs a GPU. */
#ifndef SDT_BENCH_CUDA_BENCH_H
#define SDT_BENCH_CUDA_BENCH_H

#include <stdbool.h>

#include "ops.h"

/* The backend of the CUDA module at path on device 0; exits 1 after "prog: path: reason" when there is none. */
sdt_backend *cuda_bench_open(const char *prog, const char *path);
/* The two builds an A/B bench compares: mods[0] from base, mods[1] from change (the same path twice gives two
 * backends), deterministic or not. */
void cuda_bench_open_ab(const char *prog, const char *base, const char *change, bool deterministic,
                        sdt_backend *mods[2]);

/* A device tensor of shape: zeros, or with rng, uniform values in [-1, 1) drawn from *rng (a 64-bit LCG, so
 * a fixed start gives the same values on every run and module). Exits 1 when memory runs out. */
sdt_tensor cuda_bench_tensor(sdt_backend *be, sdt_dtype dt, unsigned long long *rng, int ndim, const int64_t *shape);
/* The number of dims of an inline shape: CUDA_BENCH_NDIM(B, C, H, W) is 4. */
#define CUDA_BENCH_NDIM(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

/* One call of an op on be; nonzero on failure (be->error says why). */
typedef int (*cuda_bench_op)(sdt_backend *be, void *ctx);
/* Milliseconds a call: the median of 7 samples after 2 warm-ups, each sample reps calls back to back between
 * two synchronizes (the memory-bound ops take about the host's launch-and-synchronize cost, so they want
 * more calls a sample). Exits 1 when the op fails. */
double cuda_bench_time_ms(sdt_backend *be, cuda_bench_op f, void *ctx, int reps);

/* The attention both benches time, bf16: q, k, v [B, T, C] random, dout random, the rest zeros; forward
 * saves the logsumexp and backward reads it with out, as the UNet's attention does. */
typedef struct cuda_bench_attn {
    sdt_tensor q, k, v, out, dout, dq, dk, dv, lse;
    int heads;
} cuda_bench_attn;
cuda_bench_attn cuda_bench_attn_make(sdt_backend *be, unsigned long long *rng, int B, int Tq, int Tk, int C, int heads);
void cuda_bench_attn_free(sdt_backend *be, cuda_bench_attn *a);
/* cuda_bench_ops on a cuda_bench_attn. */
int cuda_bench_attn_forward(sdt_backend *be, void *attn);
int cuda_bench_attn_backward(sdt_backend *be, void *attn);

/* The GroupNorm the A/B benches time (ab_cuda, gnorm_cuda): 32 groups, eps 1e-5, then act; x, gamma, beta and
 * dout random from *rng, the rest zeros; x, out, dout and dx channels-last or NCHW. */
typedef struct cuda_bench_gn {
    sdt_tensor x, g, b, y, mean, rstd, dy, dx;
    sdt_activation act;
} cuda_bench_gn;
cuda_bench_gn cuda_bench_gn_make(sdt_backend *be, unsigned long long *rng, sdt_dtype dt, int B, int C, int H,
                                 sdt_activation act, bool channels_last);
void cuda_bench_gn_free(sdt_backend *be, cuda_bench_gn *n);
/* cuda_bench_ops on a cuda_bench_gn (backward: the input gradient only, accumulated into dx). */
int cuda_bench_gn_forward(sdt_backend *be, void *gn);
int cuda_bench_gn_backward(sdt_backend *be, void *gn);

/* Two builds of the module (mods[0] base, mods[1] change) on the same op (ctx[m] made on mods[m]): timed base,
 * change, base, change, and ms[m] keeps the lower of module m's two medians, forward [0] and backward [1], so
 * neither gains from going second. */
void cuda_bench_time_ab(sdt_backend *const mods[2], cuda_bench_op f, cuda_bench_op b, void *const ctx[2], int reps,
                        double ms[2][2]);

#endif
