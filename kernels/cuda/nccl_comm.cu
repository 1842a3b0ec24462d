/* nccl_comm.cu - the communicator of kernels/comm.h over NCCL, for data-parallel training.
 *
 * libnccl.so.2 is opened with dlopen on first use (nccl.h, where the prefix has it, gives the types
 * only), so the module
 * and the plugin load on a machine without NCCL and only data parallelism needs it. Each
 * collective is enqueued on the rank's backend stream (ordered after the kernels that wrote the
 * gradients) and then waited for by polling the stream and ncclCommGetAsyncError: that poll is
 * the watchdog, so a rank that died or hangs fails the call within the job's timeout on every
 * other rank, which then aborts its communicator (ncclCommAbort) instead of hanging forever.
 * The current CUDA device is per thread; every call that needs the rank's device sets it and
 * puts the caller's back. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#if __has_include(<nccl.h>)
#include <nccl.h>
#else
/* A CUDA prefix without NCCL's header: the few types used, as NCCL 2's stable ABI defines them. */
typedef struct ncclComm *ncclComm_t;
typedef struct {
    char internal[128];
} ncclUniqueId;
typedef enum { ncclSuccess = 0, ncclInProgress = 7 } ncclResult_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;
typedef enum { ncclUint8 = 1, ncclInt64 = 4, ncclFloat32 = 7, ncclFloat64 = 8 } ncclDataType_t;
#endif
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../c_numeric.h"
#include "../comm.h"
#include "backend_cuda.h"
#include "cuda_common.cuh"

namespace {

/* The NCCL functions used, resolved from libnccl.so.2 once per process (the library stays open:
 * NCCL keeps process-wide state of its own, and unloading it under live communicators would crash). */
struct nccl_fns {
    ncclResult_t (*GetUniqueId)(ncclUniqueId *);
    ncclResult_t (*CommInitRank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*CommDestroy)(ncclComm_t);
    ncclResult_t (*CommAbort)(ncclComm_t);
    ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t *);
    ncclResult_t (*AllReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*Broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*GroupStart)(void);
    ncclResult_t (*GroupEnd)(void);
    const char *(*GetErrorString)(ncclResult_t);
    const char *(*GetLastError)(ncclComm_t);
};

nccl_fns g_nccl;
bool g_nccl_loaded;
char g_nccl_why[512];
pthread_once_t g_nccl_once = PTHREAD_ONCE_INIT;

template <typename F> bool resolve(void *lib, const char *name, F *out)
{
    *out = (F)dlsym(lib, name);
    if (!*out) snprintf(g_nccl_why, sizeof g_nccl_why, "libnccl.so.2 has no %s (NCCL 2.12 or newer is needed)", name);
    return *out != NULL;
}

void load_nccl(void)
{
    void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(g_nccl_why, sizeof g_nccl_why, "NCCL could not be loaded (%.400s); install libnccl2", dlerror());
        return;
    }
    nccl_fns f;
    bool ok = resolve(lib, "ncclGetUniqueId", &f.GetUniqueId) && resolve(lib, "ncclCommInitRank", &f.CommInitRank) &&
              resolve(lib, "ncclCommDestroy", &f.CommDestroy) && resolve(lib, "ncclCommAbort", &f.CommAbort) &&
              resolve(lib, "ncclCommGetAsyncError", &f.CommGetAsyncError) &&
              resolve(lib, "ncclAllReduce", &f.AllReduce) && resolve(lib, "ncclBroadcast", &f.Broadcast) &&
              resolve(lib, "ncclGroupStart", &f.GroupStart) && resolve(lib, "ncclGroupEnd", &f.GroupEnd) &&
              resolve(lib, "ncclGetErrorString", &f.GetErrorString) &&
              resolve(lib, "ncclGetLastError", &f.GetLastError);
    if (!ok) {
        dlclose(lib);
        return;
    }
    g_nccl = f;
    g_nccl_loaded = true;
}

bool nccl_ready(sdt_error *error)
{
    pthread_once(&g_nccl_once, load_nccl);
    if (!g_nccl_loaded) return sdt_fail(error, SDT_ERR_UNSUPPORTED, "data parallelism needs NCCL: %s.", g_nccl_why);
    return true;
}

/* Puts the calling thread's current device back when it goes out of scope. */
struct device_guard {
    int saved = -1;
    explicit device_guard(int device)
    {
        if (cudaGetDevice(&saved) != cudaSuccess) saved = -1;
        if (saved != device) cudaSetDevice(device);
    }
    ~device_guard()
    {
        int now = -1;
        if (saved >= 0 && cudaGetDevice(&now) == cudaSuccess && now != saved) cudaSetDevice(saved);
    }
};

struct nccl_comm {
    sdt_comm base;
    ncclComm_t comm;
    sdt_backend *be;
    int device;
    cudaStream_t stream;
    double timeout_seconds;
    void *small; /* device buffer of SMALL_COUNT 8-byte values for the small host vectors */
    int failed;  /* atomic: set by abort() or a failed call; the communicator is then aborted */
    int nccl_aborted;
    char why[512];
};

const size_t SMALL_COUNT = SDT_COMM_SMALL_COUNT;

double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

nccl_comm *of(sdt_comm *c)
{
    return (nccl_comm *)c->impl;
}

void abort_nccl_once(nccl_comm *n)
{
    if (__atomic_exchange_n(&n->nccl_aborted, 1, __ATOMIC_ACQ_REL) == 0) {
        device_guard guard(n->device);
        g_nccl.CommAbort(n->comm);
    }
}

/* Marks the communicator failed with the sentence (the first one stays) and aborts it. */
bool fail_comm(nccl_comm *n, sdt_error *error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool fail_comm(nccl_comm *n, sdt_error *error, const char *fmt, ...)
{
    char sentence[512];
    va_list ap;
    va_start(ap, fmt);
    sdt_c_vsnprintf(sentence, sizeof sentence, fmt, ap); /* the timeout's seconds: the C locale */
    va_end(ap);
    if (__atomic_exchange_n(&n->failed, 1, __ATOMIC_ACQ_REL) == 0) snprintf(n->why, sizeof n->why, "%s", sentence);
    abort_nccl_once(n);
    return sdt_fail(error, SDT_ERR_DEVICE, "%s", n->why);
}

bool check_usable(nccl_comm *n, sdt_error *error)
{
    if (__atomic_load_n(&n->failed, __ATOMIC_ACQUIRE)) {
        abort_nccl_once(n);
        return sdt_fail(error, SDT_ERR_DEVICE, "%s", n->why);
    }
    return true;
}

/* The watchdog: waits for the rank's stream, failing on NCCL's asynchronous error, on abort() and
 * past the timeout. */
bool wait_done(nccl_comm *n, const char *what, sdt_error *error)
{
    double deadline = now_seconds() + n->timeout_seconds;
    for (;;) {
        cudaError_t q = cudaStreamQuery(n->stream);
        if (q == cudaSuccess) return true;
        if (q != cudaErrorNotReady)
            return fail_comm(n, error, "rank %d: the %s failed on its GPU (%s); every rank stops.", n->base.rank, what,
                             cudaGetErrorString(q));
        ncclResult_t async = ncclSuccess;
        g_nccl.CommGetAsyncError(n->comm, &async);
        if (async != ncclSuccess && async != ncclInProgress)
            return fail_comm(n, error, "rank %d: the %s failed in NCCL (%s: %.300s); every rank stops.", n->base.rank,
                             what, g_nccl.GetErrorString(async), g_nccl.GetLastError(n->comm));
        if (__atomic_load_n(&n->failed, __ATOMIC_ACQUIRE)) return check_usable(n, error);
        if (now_seconds() > deadline)
            return fail_comm(n, error,
                             "rank %d: the %s did not finish within %.0f s (another rank stopped or hangs; "
                             "comm_timeout_seconds sets the limit); every rank stops.",
                             n->base.rank, what, n->timeout_seconds);
        struct timespec nap = {0, 100000};
        nanosleep(&nap, NULL);
    }
}

bool enqueued(nccl_comm *n, ncclResult_t r, const char *what, sdt_error *error)
{
    if (r == ncclSuccess || r == ncclInProgress) return true;
    return fail_comm(n, error, "rank %d: the %s could not start in NCCL (%s: %.300s); every rank stops.", n->base.rank,
                     what, g_nccl.GetErrorString(r), g_nccl.GetLastError(n->comm));
}

bool nccl_all_reduce_f32(sdt_comm *c, float *buf, size_t count, sdt_error *error)
{
    nccl_comm *n = of(c);
    if (!check_usable(n, error)) return false;
    if (count == 0) return true;
    device_guard guard(n->device);
    return enqueued(n, g_nccl.AllReduce(buf, buf, count, ncclFloat32, ncclSum, n->comm, n->stream), "all-reduce",
                    error) &&
           wait_done(n, "all-reduce", error);
}

/* A small host vector: to the device, summed, back; waited for with the watchdog. */
bool small_all_reduce(sdt_comm *c, void *buf, size_t count, ncclDataType_t type, const char *what, sdt_error *error)
{
    nccl_comm *n = of(c);
    if (!check_usable(n, error)) return false;
    if (count > SMALL_COUNT)
        return sdt_fail(error, SDT_ERR_INTERNAL, "the %s takes at most %zu values (%zu given).", what, SMALL_COUNT,
                        count);
    if (count == 0) return true;
    device_guard guard(n->device);
    size_t bytes = count * 8;
    if (cudaMemcpyAsync(n->small, buf, bytes, cudaMemcpyHostToDevice, n->stream) != cudaSuccess)
        return fail_comm(n, error, "rank %d: copying the %s's values to the GPU failed; every rank stops.", c->rank,
                         what);
    if (!enqueued(n, g_nccl.AllReduce(n->small, n->small, count, type, ncclSum, n->comm, n->stream), what, error))
        return false;
    if (cudaMemcpyAsync(buf, n->small, bytes, cudaMemcpyDeviceToHost, n->stream) != cudaSuccess)
        return fail_comm(n, error, "rank %d: copying the %s's values from the GPU failed; every rank stops.", c->rank,
                         what);
    return wait_done(n, what, error);
}

bool nccl_all_reduce_i64(sdt_comm *c, int64_t *buf, size_t count, sdt_error *error)
{
    return small_all_reduce(c, buf, count, ncclInt64, "all-reduce of the flags", error);
}

bool nccl_all_reduce_f64(sdt_comm *c, double *buf, size_t count, sdt_error *error)
{
    return small_all_reduce(c, buf, count, ncclFloat64, "all-reduce of the loss", error);
}

bool nccl_broadcast(sdt_comm *c, void *buf, size_t bytes, int root, sdt_error *error)
{
    nccl_comm *n = of(c);
    if (!check_usable(n, error)) return false;
    if (root < 0 || root >= c->world_size)
        return sdt_fail(error, SDT_ERR_INTERNAL, "broadcast from rank %d of %d.", root, c->world_size);
    if (bytes == 0) return true;
    device_guard guard(n->device);
    return enqueued(n, g_nccl.Broadcast(buf, buf, bytes, ncclUint8, root, n->comm, n->stream), "broadcast", error) &&
           wait_done(n, "broadcast", error);
}

bool nccl_barrier(sdt_comm *c, sdt_error *error)
{
    int64_t one = 1;
    return nccl_all_reduce_i64(c, &one, 1, error);
}

void nccl_abort(sdt_comm *c, const char *why)
{
    nccl_comm *n = of(c);
    if (__atomic_exchange_n(&n->failed, 1, __ATOMIC_ACQ_REL) == 0)
        snprintf(n->why, sizeof n->why, "rank %d failed: %.400s; every rank stops.", c->rank, why ? why : "");
    /* On the rank's own thread (comm.h), so no call of this rank is in flight: abort NCCL now, which
     * makes the other ranks' pending collectives fail (their watchdog names the cause). */
    abort_nccl_once(n);
}

void nccl_destroy(sdt_comm *c)
{
    if (!c) return;
    nccl_comm *n = of(c);
    {
        device_guard guard(n->device);
        if (__atomic_load_n(&n->nccl_aborted, __ATOMIC_ACQUIRE) == 0) g_nccl.CommDestroy(n->comm);
        if (n->small) cudaFree(n->small);
    }
    free(n);
}

nccl_comm *new_comm(sdt_backend *be, int world_size, int rank, int timeout_seconds, sdt_error *error)
{
    nccl_comm *n = (nccl_comm *)calloc(1, sizeof *n);
    if (!n) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "no host memory for the communicator of rank %d.", rank);
        return NULL;
    }
    n->be = be;
    n->device = ctx_of(be)->device;
    n->stream = ctx_of(be)->stream;
    n->timeout_seconds = timeout_seconds > 0 ? timeout_seconds : SDT_COMM_DEFAULT_TIMEOUT_SECONDS;
    n->base.rank = rank;
    n->base.world_size = world_size;
    n->base.all_reduce_f32 = nccl_all_reduce_f32;
    n->base.all_reduce_i64 = nccl_all_reduce_i64;
    n->base.all_reduce_f64 = nccl_all_reduce_f64;
    n->base.broadcast = nccl_broadcast;
    n->base.barrier = nccl_barrier;
    n->base.abort = nccl_abort;
    n->base.destroy = nccl_destroy;
    n->base.impl = n;
    device_guard guard(n->device);
    if (cudaMalloc(&n->small, SMALL_COUNT * 8) != cudaSuccess) {
        free(n);
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "no GPU memory for the communicator of rank %d.", rank);
        return NULL;
    }
    return n;
}

bool api_available(sdt_error *error)
{
    return nccl_ready(error);
}

bool api_new_id(uint8_t id[SDT_COMM_ID_BYTES], sdt_error *error)
{
    static_assert(sizeof(ncclUniqueId) == SDT_COMM_ID_BYTES, "NCCL's unique id is the ABI's comm_id");
    if (!nccl_ready(error)) return false;
    ncclUniqueId u;
    ncclResult_t r = g_nccl.GetUniqueId(&u);
    if (r != ncclSuccess)
        return sdt_fail(error, SDT_ERR_DEVICE, "NCCL could not make a communicator id (%s).", g_nccl.GetErrorString(r));
    memcpy(id, &u, SDT_COMM_ID_BYTES);
    return true;
}

bool api_open_group(sdt_backend *const *backends, int count, const uint8_t id[SDT_COMM_ID_BYTES], int world_size,
                    int first_rank, int timeout_seconds, sdt_comm **out, sdt_error *error)
{
    for (int i = 0; i < count; i++) out[i] = NULL;
    if (!nccl_ready(error)) return false;
    if (count < 1 || first_rank < 0 || first_rank + count > world_size)
        return sdt_fail(error, SDT_ERR_INTERNAL, "ranks %d..%d do not fit a job of %d.", first_rank,
                        first_rank + count - 1, world_size);
    nccl_comm *made[64] = {0};
    if (count > 64) return sdt_fail(error, SDT_ERR_INTERNAL, "%d devices in one process (at most 64).", count);
    for (int i = 0; i < count; i++) {
        made[i] = new_comm(backends[i], world_size, first_rank + i, timeout_seconds, error);
        if (!made[i]) {
            for (int j = 0; j < i; j++) nccl_destroy(&made[j]->base);
            return false;
        }
    }
    ncclUniqueId u;
    memcpy(&u, id, SDT_COMM_ID_BYTES);
    ncclResult_t r = ncclSuccess;
    if (count > 1) g_nccl.GroupStart();
    for (int i = 0; i < count && r == ncclSuccess; i++) {
        device_guard guard(made[i]->device);
        r = g_nccl.CommInitRank(&made[i]->comm, world_size, u, first_rank + i);
    }
    ncclResult_t end = count > 1 ? g_nccl.GroupEnd() : ncclSuccess;
    if (r == ncclSuccess) r = end;
    if (r != ncclSuccess) {
        for (int i = 0; i < count; i++) {
            if (made[i]->comm) {
                device_guard guard(made[i]->device);
                g_nccl.CommAbort(made[i]->comm);
            }
            made[i]->nccl_aborted = 1;
            nccl_destroy(&made[i]->base);
        }
        return sdt_fail(error, SDT_ERR_DEVICE,
                        "ranks %d..%d could not join the job of %d ranks in NCCL (%s); check that every rank got the "
                        "same comm_id and world_size and that the GPUs see each other.",
                        first_rank, first_rank + count - 1, world_size, g_nccl.GetErrorString(r));
    }
    for (int i = 0; i < count; i++) out[i] = &made[i]->base;
    return true;
}

sdt_comm *api_open_rank(sdt_backend *be, const uint8_t id[SDT_COMM_ID_BYTES], int world_size, int rank,
                        int timeout_seconds, sdt_error *error)
{
    sdt_comm *c = NULL;
    sdt_backend *const list[1] = {be};
    return api_open_group(list, 1, id, world_size, rank, timeout_seconds, &c, error) ? c : NULL;
}

const sdt_comm_nccl_api g_api = {
    sizeof(sdt_comm_nccl_api), api_available, api_new_id, api_open_rank, api_open_group,
};

} // namespace

extern "C" SDT_CUDA_EXPORT const sdt_comm_nccl_api *sdt_comm_nccl_get_api(void)
{
    return &g_api;
}
