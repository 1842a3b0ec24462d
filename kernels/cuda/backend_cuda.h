/* backend_cuda.h - the CUDA backend module's one entry point (C interface).
 * The plugin resolves sdt_backend_cuda_create with dlsym from libsdtrain_cuda.so. */
#ifndef SDT_KERNELS_BACKEND_CUDA_H
#define SDT_KERNELS_BACKEND_CUDA_H

#include <stddef.h>

#include "../ops.h"

#define SDT_CUDA_EXPORT __attribute__((visibility("default")))
#define SDT_CUDA_CREATE_SYMBOL "sdt_backend_cuda_create"
#define SDT_CUDA_THREAD_DEVICE_SYMBOL "sdt_cuda_thread_device"

#ifdef __cplusplus
extern "C" {
#endif
/* Creates the backend on a device; NULL plus a sentence in err when CUDA is unusable. */
typedef sdt_backend *(*sdt_backend_cuda_create_fn)(int device, char *err, size_t err_size);
SDT_CUDA_EXPORT sdt_backend *sdt_backend_cuda_create(int device, char *err, size_t err_size);
/* The calling thread's current CUDA device before the call (-1: the thread has no CUDA context, or CUDA
 * cannot say); then device >= 0 becomes current, -1 leaves the thread without a current context (the
 * way back for a thread that had none), and below -1 changes nothing. The backend's ops run on the
 * current device of the thread that calls them, and a host's thread keeps its own: in-process ranks
 * (docs/abi.md 3.16) set their device around their work and put the previous one back. */
typedef int (*sdt_cuda_thread_device_fn)(int device);
SDT_CUDA_EXPORT int sdt_cuda_thread_device(int device);
#ifdef __cplusplus
}
#endif

#endif
