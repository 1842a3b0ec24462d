/* backend_select.h - picks the compute backend for a job: the CPU backend (always there)
 * or the CUDA backend, which lives in the module libsdtrain_cuda.so next to libsdtrain.so
 * and is opened at run time. A host without any CUDA library therefore loads and trains
 * with the same libsdtrain.so; with device "auto" a missing or unusable module means the
 * CPU, said once in the log; with device "cuda" it is an error. */
#ifndef SDT_PLUGIN_BACKEND_SELECT_H
#define SDT_PLUGIN_BACKEND_SELECT_H

#include "sdt_error.h"

#include <stddef.h>

#include "comm.h"
#include "ops.h"
#include "sdtrain.h"

typedef struct plugin_backend {
    sdt_backend *be;
    void *module; /* dlopen handle of libsdtrain_cuda.so, NULL for the CPU */
} plugin_backend;

/* choice: sdt_device_choice; cuda_ordinal: the CUDA device (0 unless the options list devices), which
 * becomes the calling thread's current one. cpu_threads <= 0: OpenMP's default. The log line (which
 * backend, and why not CUDA under auto) goes to host. */
bool plugin_backend_open(plugin_backend *out, uint32_t choice, int cuda_ordinal, int cpu_threads,
                         const sdt_host_callbacks *host, sdt_error *error);
void plugin_backend_close(plugin_backend *pb);

/* The NCCL communicator of the CUDA module (kernels/comm.h), for data parallelism (1.8): the
 * table, valid until plugin_nccl_close(*module); NULL plus the reason in why when the module is
 * missing or predates it. Whether NCCL itself loads is the table's available(). */
const sdt_comm_nccl_api *plugin_nccl_open(void **module, char *why, size_t why_size);
void plugin_nccl_close(void *module);

/* The calling thread's current CUDA device, set for work on another and put back after: a rank of
 * in-process data parallelism works on its own device while the host's thread keeps its own. Without
 * the CUDA module (a CPU build) both do nothing. */
typedef struct plugin_cuda_device_guard {
    void *module;
    int previous; /* -1: the thread had no CUDA context (and gets none back) */
} plugin_cuda_device_guard;
/* device >= 0 becomes current on this thread; the one before is kept in g. */
void plugin_cuda_device_enter(plugin_cuda_device_guard *g, int device);
void plugin_cuda_device_leave(plugin_cuda_device_guard *g);

#endif
