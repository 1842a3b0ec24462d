/* cuda_bench.c - the CUDA benches' module, tensors and timing loop (see cuda_bench.h). */
#include "cuda_bench.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../../kernels/cuda/backend_cuda.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

sdt_backend *cuda_bench_open(const char *prog, const char *path)
{
    void *mod = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    sdt_backend_cuda_create_fn create = mod ? (sdt_backend_cuda_create_fn)dlsym(mod, SDT_CUDA_CREATE_SYMBOL) : NULL;
    char err[256] = "the CUDA module could not be loaded";
    if (!mod) snprintf(err, sizeof err, "%s", dlerror());
    sdt_backend *be = create ? create(0, err, sizeof err) : NULL;
    if (!be) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, err);
        exit(1);
    }
    return be;
}

void cuda_bench_open_ab(const char *prog, const char *base, const char *change, bool deterministic,
                        sdt_backend *mods[2])
{
    mods[0] = cuda_bench_open(prog, base);
    mods[1] = cuda_bench_open(prog, change);
    mods[0]->deterministic = mods[1]->deterministic = deterministic;
}

sdt_tensor cuda_bench_tensor(sdt_backend *be, sdt_dtype dt, unsigned long long *rng, int ndim, const int64_t *shape)
{
    sdt_tensor t = sdt_tensor_make(NULL, dt, SDT_DEVICE_CUDA, ndim, shape);
    t.data = be->alloc(be, sdt_tensor_nbytes(&t));
    if (!t.data) {
        fprintf(stderr, "out of GPU memory\n");
        exit(1);
    }
    be->zero(be, &t);
    if (!rng) return t;
    int64_t n = sdt_tensor_numel(&t);
    float *host = malloc(sizeof(float) * (size_t)n);
    void *raw = malloc(sdt_tensor_nbytes(&t));
    if (!host || !raw) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < n; i++) {
        *rng = *rng * 6364136223846793005ULL + 1442695040888963407ULL;
        host[i] = (float)((double)(*rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    sdt_store_f32(host, raw, dt, n);
    be->upload(be, t.data, raw, sdt_tensor_nbytes(&t));
    free(host);
    free(raw);
    return t;
}

double cuda_bench_time_ms(sdt_backend *be, cuda_bench_op f, void *ctx, int reps)
{
    double t[7];
    for (int i = 0; i < 9; i++) {
        be->synchronize(be);
        double t0 = now();
        for (int k = 0; k < reps; k++)
            if (f(be, ctx)) {
                fprintf(stderr, "op failed: %s\n", be->error.message);
                exit(1);
            }
        be->synchronize(be);
        if (i >= 2) t[i - 2] = 1e3 * (now() - t0) / reps;
    }
    for (int i = 0; i < 7; i++)
        for (int j = i + 1; j < 7; j++)
            if (t[j] < t[i]) {
                double x = t[i];
                t[i] = t[j];
                t[j] = x;
            }
    return t[3];
}

#define DEVR(dt, ...) cuda_bench_tensor(be, dt, rng, CUDA_BENCH_NDIM(__VA_ARGS__), (int64_t[]){__VA_ARGS__})
#define DEV(dt, ...) cuda_bench_tensor(be, dt, NULL, CUDA_BENCH_NDIM(__VA_ARGS__), (int64_t[]){__VA_ARGS__})

cuda_bench_attn cuda_bench_attn_make(sdt_backend *be, unsigned long long *rng, int B, int Tq, int Tk, int C, int heads)
{
    cuda_bench_attn a = {DEVR(SDT_BF16, B, Tq, C),   DEVR(SDT_BF16, B, Tk, C),
                         DEVR(SDT_BF16, B, Tk, C),   DEV(SDT_BF16, B, Tq, C),
                         DEVR(SDT_BF16, B, Tq, C),   DEV(SDT_BF16, B, Tq, C),
                         DEV(SDT_BF16, B, Tk, C),    DEV(SDT_BF16, B, Tk, C),
                         DEV(SDT_F32, B, heads, Tq), heads};
    return a;
}

void cuda_bench_attn_free(sdt_backend *be, cuda_bench_attn *a)
{
    sdt_tensor *all[9] = {&a->q, &a->k, &a->v, &a->out, &a->dout, &a->dq, &a->dk, &a->dv, &a->lse};
    for (int i = 0; i < 9; i++) be->free(be, all[i]->data);
}

int cuda_bench_attn_forward(sdt_backend *be, void *attn)
{
    cuda_bench_attn *a = attn;
    return be->attention_forward(be, &a->out, &a->lse, &a->q, &a->k, &a->v, a->heads, false);
}

int cuda_bench_attn_backward(sdt_backend *be, void *attn)
{
    cuda_bench_attn *a = attn;
    return be->attention_backward(be, &a->dq, &a->dk, &a->dv, &a->dout, &a->q, &a->k, &a->v, &a->out, &a->lse, a->heads,
                                  false);
}

cuda_bench_gn cuda_bench_gn_make(sdt_backend *be, unsigned long long *rng, sdt_dtype dt, int B, int C, int H,
                                 sdt_activation act, bool channels_last)
{
    cuda_bench_gn n = {DEVR(dt, B, C, H, H), DEVR(dt, C),         DEVR(dt, C),
                       DEV(dt, B, C, H, H),  DEV(SDT_F32, B, 32), DEV(SDT_F32, B, 32),
                       DEVR(dt, B, C, H, H), DEV(dt, B, C, H, H), act};
    n.x.channels_last = n.y.channels_last = n.dy.channels_last = n.dx.channels_last = channels_last;
    return n;
}

void cuda_bench_gn_free(sdt_backend *be, cuda_bench_gn *n)
{
    sdt_tensor *all[8] = {&n->x, &n->g, &n->b, &n->y, &n->mean, &n->rstd, &n->dy, &n->dx};
    for (int i = 0; i < 8; i++) be->free(be, all[i]->data);
}

int cuda_bench_gn_forward(sdt_backend *be, void *gn)
{
    cuda_bench_gn *n = gn;
    return be->groupnorm_forward(be, &n->y, &n->mean, &n->rstd, &n->x, &n->g, &n->b, 32, 1e-5f, n->act);
}

int cuda_bench_gn_backward(sdt_backend *be, void *gn)
{
    cuda_bench_gn *n = gn;
    return be->groupnorm_backward(be, &n->dx, NULL, NULL, &n->dy, &n->x, &n->g, &n->b, &n->mean, &n->rstd, 32, n->act);
}

void cuda_bench_time_ab(sdt_backend *const mods[2], cuda_bench_op f, cuda_bench_op b, void *const ctx[2], int reps,
                        double ms[2][2])
{
    for (int m = 0; m < 2; m++) ms[m][0] = ms[m][1] = 1e30;
    for (int round = 0; round < 2; round++)
        for (int m = 0; m < 2; m++) {
            double tf = cuda_bench_time_ms(mods[m], f, ctx[m], reps), tb = cuda_bench_time_ms(mods[m], b, ctx[m], reps);
            if (tf < ms[m][0]) ms[m][0] = tf;
            if (tb < ms[m][1]) ms[m][1] = tb;
        }
}
