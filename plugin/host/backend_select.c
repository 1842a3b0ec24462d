/* backend_select.c - see backend_select.h. */
#define _GNU_SOURCE /* dladdr */
#include "host/backend_select.h"

#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>

#include "cuda/backend_cuda.h"
#include "host/host_log.h"
#include "testhooks/test_hooks.h"

#define CUDA_MODULE_NAME "libsdtrain_cuda.so"

/* The module's path: next to this plugin's own file (no environment override: nothing but the
 * host's own choices steers a library loaded into its process). */
static void cuda_module_path(char *out, size_t size)
{
    Dl_info info;
    if (dladdr((void *)cuda_module_path, &info) && info.dli_fname) {
        char buf[4096];
        snprintf(buf, sizeof buf, "%s", info.dli_fname);
        snprintf(out, size, "%s/%s", dirname(buf), CUDA_MODULE_NAME);
    } else {
        snprintf(out, size, "%s", CUDA_MODULE_NAME);
    }
}

/* Opens the CUDA backend; NULL plus the reason in why. */
static sdt_backend *open_cuda(void **module, int ordinal, char *why, size_t why_size)
{
    char path[4096];
    cuda_module_path(path, sizeof path);
    *module = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!*module) {
        snprintf(why, why_size, "the CUDA module %.1024s could not be loaded (%.400s)", path, dlerror());
        return NULL;
    }
    sdt_backend_cuda_create_fn create = (sdt_backend_cuda_create_fn)dlsym(*module, SDT_CUDA_CREATE_SYMBOL);
    sdt_backend *be = create ? create(ordinal, why, why_size) : NULL;
    if (!create) snprintf(why, why_size, "%.1024s does not export %s; rebuild sdtrain", path, SDT_CUDA_CREATE_SYMBOL);
    if (!be) {
        dlclose(*module);
        *module = NULL;
    }
    return be;
}

bool plugin_backend_open(plugin_backend *out, uint32_t choice, int cuda_ordinal, int cpu_threads,
                         const sdt_host_callbacks *host, sdt_error *error)
{
    memset(out, 0, sizeof(*out));
    if (choice != SDT_DEVICE_CHOICE_CPU) {
        char why[1600] = "";
        out->be = open_cuda(&out->module, cuda_ordinal, why, sizeof why);
        if (out->be && cuda_ordinal != 0) {
            sdt_host_log(host, SDT_LOG_INFO, "training on the GPU (CUDA backend, device %d)", cuda_ordinal);
            return true;
        }
        if (out->be) {
            sdt_host_log(host, SDT_LOG_INFO, "training on the GPU (CUDA backend)");
            return true;
        }
        if (choice == SDT_DEVICE_CHOICE_CUDA) {
            sdt_fail(error, SDT_ERR_DEVICE,
                     "device 'cuda' was asked for but %s; install the CUDA driver, cuBLAS and cuDNN 9, "
                     "or choose device 'auto' or 'cpu'",
                     why);
            return false;
        }
        sdt_host_log(host, SDT_LOG_INFO, "training on the CPU: %s", why);
    }
    out->be = sdt_backend_cpu_create(cpu_threads);
    if (!out->be) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "cannot create the CPU backend (out of memory)");
        return false;
    }
    out->be->blas_gemm_only = sdt_test_hook_cpu_blas_gemm();
    return true;
}

void plugin_backend_close(plugin_backend *pb)
{
    if (pb->be) pb->be->destroy(pb->be);
    if (pb->module) dlclose(pb->module);
    memset(pb, 0, sizeof(*pb));
}

const sdt_comm_nccl_api *plugin_nccl_open(void **module, char *why, size_t why_size)
{
    char path[4096];
    cuda_module_path(path, sizeof path);
    *module = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!*module) {
        snprintf(why, why_size, "the CUDA module %.1024s could not be loaded (%.400s)", path, dlerror());
        return NULL;
    }
    sdt_comm_nccl_api_fn get = (sdt_comm_nccl_api_fn)dlsym(*module, SDT_COMM_NCCL_API_SYMBOL);
    const sdt_comm_nccl_api *api = get ? get() : NULL;
    if (!api || api->struct_size < sizeof *api) {
        snprintf(why, why_size, "%.1024s does not export %s; rebuild sdtrain with its CUDA module", path,
                 SDT_COMM_NCCL_API_SYMBOL);
        dlclose(*module);
        *module = NULL;
        return NULL;
    }
    return api;
}

void plugin_nccl_close(void *module)
{
    if (module) dlclose(module);
}

void plugin_cuda_device_enter(plugin_cuda_device_guard *g, int device)
{
    g->previous = -1;
    if (device < 0) return;
    char path[4096];
    cuda_module_path(path, sizeof path);
    g->module = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!g->module) return; /* no CUDA module: no device to keep */
    sdt_cuda_thread_device_fn use = (sdt_cuda_thread_device_fn)dlsym(g->module, SDT_CUDA_THREAD_DEVICE_SYMBOL);
    if (use) g->previous = use(device);
}

void plugin_cuda_device_leave(plugin_cuda_device_guard *g)
{
    if (!g->module) return;
    sdt_cuda_thread_device_fn use = (sdt_cuda_thread_device_fn)dlsym(g->module, SDT_CUDA_THREAD_DEVICE_SYMBOL);
    if (use) use(g->previous); /* -1: the thread had no context and gets none back */
    dlclose(g->module);
    g->module = NULL;
    g->previous = -1;
}
