/* gpu_module.h - what every GPU test does first: open the CUDA module (the build's, or the file
 * SDT_CUDA_MODULE names for a build carried to another machine) and create its backend on card 0.
 * Without the module or a usable GPU it prints "<test>: SKIP, <why>" and gives NULL: the test
 * then returns SDT_TEST_SKIP. Needs SDT_CUDA_MODULE_PATH (tests/gpu/CMakeLists.txt defines it). */
#ifndef SDT_TESTS_GPU_MODULE_H
#define SDT_TESTS_GPU_MODULE_H

#include <dlfcn.h>
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

#endif
