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
