/* gpu_module.h - what every GPU test does first: open the CUDA module (the build's, or the file
 * SDT_CUDA_MODULE names for a build carried to another machine) and create its backend on card 0.
 * Without the module or a usable GPU it prints "<test>: SKIP, <why>" and gives NULL: the test
 * then returns SDT_TEST_SKIP. Needs SDT_CUDA_MODULE_PATH (tests/gpu/CMakeLists.txt defines it). */
#ifndef SDT_TESTS_GPU_MODULE_H
#define SDT_TESTS_GPU_MODULE_H

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../kernels/cuda/backend_cuda.h"

static inline sdt_backend *gpu_test_backend(const char *test)
{
    const char *path = getenv("SDT_CUDA_MODULE") ? getenv("SDT_CUDA_MODULE") : SDT_CUDA_MODULE_PATH;
    void *module = dlopen(path, RTLD_NOW | RTLD_LOCAL); /* stays open for the test's life */
    if (!module) {
        printf("%s: SKIP, CUDA module not loadable: %s\n", test, dlerror());
        return NULL;
    }
    sdt_backend_cuda_create_fn create = (sdt_backend_cuda_create_fn)dlsym(module, SDT_CUDA_CREATE_SYMBOL);
    char why[256] = "the module has no " SDT_CUDA_CREATE_SYMBOL;
    sdt_backend *gpu = create ? create(0, why, sizeof why) : NULL;
    if (!gpu) printf("%s: SKIP, %s\n", test, why);
    return gpu;
}

/* A backend tensor's values as host f32 (the caller frees). */
static inline float *gpu_test_download(sdt_backend *be, const sdt_tensor *t)
{
    int64_t n = sdt_tensor_numel(t);
    void *raw = malloc(sdt_tensor_nbytes(t));
    float *out = malloc((size_t)n * sizeof(float));
    be->synchronize(be);
    be->download(be, raw, t->data, sdt_tensor_nbytes(t));
    sdt_load_f32(raw, t->dtype, out, n);
    free(raw);
    return out;
}

/* max |a - b| / max |b|. */
static inline double gpu_test_rel(const float *a, const float *b, int64_t n)
{
    double num = 0, den = 1e-20;
    for (int64_t i = 0; i < n; i++) num = fmax(num, fabs((double)a[i] - b[i])), den = fmax(den, fabs((double)b[i]));
    return num / den;
}

#endif
