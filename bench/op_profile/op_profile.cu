/* op_profile.cu - a stand-in CUDA module that times every backend op of a training run.
 *
 * Installed as libsdtrain_cuda.so in a plugin folder whose real module is renamed
 * libsdtrain_cuda_real.so beside it: the plugin opens this one, which opens the real one,
 * takes its table and puts a wrapper around every entry of the op list (kernels/ops.h), so
 * each call is bracketed by CUDA events on the backend's stream (no extra synchronisation).
 * The run loop's memory_stats(reset_peak = true) at the start of a run starts the count and
 * its memory_stats(reset_peak = false) at the end writes the table: GPU milliseconds and calls
 * per op over the run, and the run's wall time, to $SDT_OP_PROFILE_OUT (JSON) and stderr.
 * A benchmark tool, never installed: it reads an environment variable. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cuda/backend_cuda.h"
#include "cuda/cuda_common.cuh"

enum {
#define OP_INDEX(name, params, args) OP_##name,
    SDT_BACKEND_OPS(OP_INDEX)
#undef OP_INDEX
        OP_COUNT
};
static const char *const op_names[OP_COUNT] = {
#define OP_NAME(name, params, args) #name,
    SDT_BACKEND_OPS(OP_NAME)
#undef OP_NAME
};

#define RING 8192
static struct {
    sdt_backend real; /* the real module's table */
    cudaEvent_t start[RING], stop[RING];
    int op[RING];
    int pending;
    double ms[OP_COUNT];
    long calls[OP_COUNT];
    bool counting;
    double wall_start;
} prof;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Adds the finished events' times to the totals. */
static void harvest(void)
{
    if (!prof.pending) return;
    cudaEventSynchronize(prof.stop[prof.pending - 1]);
    for (int i = 0; i < prof.pending; i++) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, prof.start[i], prof.stop[i]) == cudaSuccess) prof.ms[prof.op[i]] += ms;
    }
    prof.pending = 0;
}

static void begin(sdt_backend *be, int op)
{
    if (!prof.counting) return;
    if (prof.pending == RING) harvest();
    cudaEventRecord(prof.start[prof.pending], ctx_of(be)->stream);
    prof.op[prof.pending] = op;
}

static void end(sdt_backend *be, int op)
{
    if (!prof.counting) return;
    cudaEventRecord(prof.stop[prof.pending], ctx_of(be)->stream);
    prof.pending++;
    prof.calls[op]++;
}

static void write_table(void)
{
    harvest();
    double wall_ms = 1e3 * (now_s() - prof.wall_start), gpu_ms = 0;
    for (int i = 0; i < OP_COUNT; i++) gpu_ms += prof.ms[i];
    const char *path = getenv("SDT_OP_PROFILE_OUT");
    FILE *f = path ? fopen(path, "w") : NULL;
    if (f) fprintf(f, "{\"wall_ms\": %.3f, \"gpu_ms\": %.3f, \"ops\": [", wall_ms, gpu_ms);
    fprintf(stderr, "op profile: run %.1f ms wall, %.1f ms inside ops on the GPU\n", wall_ms, gpu_ms);
    int order[OP_COUNT], n = 0;
    for (int i = 0; i < OP_COUNT; i++)
        if (prof.calls[i]) order[n++] = i;
    for (int a = 0; a < n; a++) /* by time, largest first */
        for (int b = a + 1; b < n; b++)
            if (prof.ms[order[b]] > prof.ms[order[a]]) {
                int t = order[a];
                order[a] = order[b];
                order[b] = t;
            }
    for (int k = 0; k < n; k++) {
        int i = order[k];
        fprintf(stderr, "  %-28s %10.2f ms %7.1f%% %8ld calls\n", op_names[i], prof.ms[i],
                gpu_ms > 0 ? 100 * prof.ms[i] / gpu_ms : 0.0, prof.calls[i]);
        if (f)
            fprintf(f, "%s{\"op\": \"%s\", \"ms\": %.3f, \"calls\": %ld}", k ? ", " : "", op_names[i], prof.ms[i],
                    prof.calls[i]);
    }
    if (f) {
        fprintf(f, "]}\n");
        fclose(f);
    }
}

static int prof_memory_stats_marker(sdt_backend *be, sdt_memory_stats *stats, bool reset_peak)
{
    int r = prof.real.memory_stats(be, stats, reset_peak);
    if (reset_peak) { /* a run starts */
        harvest();
        memset(prof.ms, 0, sizeof prof.ms);
        memset(prof.calls, 0, sizeof prof.calls);
        prof.counting = true;
        prof.wall_start = now_s();
    } else if (prof.counting) {
        cudaStreamSynchronize(ctx_of(be)->stream);
        write_table();
        prof.counting = false;
    }
    return r;
}

#define OP_WRAPPER(name, params, args)                                                                                 \
    static int prof_##name params                                                                                      \
    {                                                                                                                  \
        begin(be, OP_##name);                                                                                          \
        int r = prof.real.name args;                                                                                   \
        end(be, OP_##name);                                                                                            \
        return r;                                                                                                      \
    }
SDT_BACKEND_OPS(OP_WRAPPER)
#undef OP_WRAPPER

extern "C" SDT_CUDA_EXPORT sdt_backend *sdt_backend_cuda_create(int device, char *err, size_t err_size)
{
    Dl_info info;
    char path[4096];
    if (!dladdr((void *)sdt_backend_cuda_create, &info) || !info.dli_fname) {
        snprintf(err, err_size, "op_profile: cannot find its own folder");
        return NULL;
    }
    snprintf(path, sizeof path, "%s", info.dli_fname);
    char *slash = strrchr(path, '/');
    snprintf(slash ? slash + 1 : path, sizeof path - (size_t)(slash ? slash + 1 - path : 0), "libsdtrain_cuda_real.so");
    void *module = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    sdt_backend_cuda_create_fn create =
        module ? (sdt_backend_cuda_create_fn)dlsym(module, SDT_CUDA_CREATE_SYMBOL) : NULL;
    if (!create) {
        snprintf(err, err_size, "op_profile: cannot open %s (%s)", path, dlerror());
        return NULL;
    }
    sdt_backend *be = create(device, err, err_size);
    if (!be) return NULL;
    prof.real = *be;
    for (int i = 0; i < RING; i++)
        if (cudaEventCreate(&prof.start[i]) != cudaSuccess || cudaEventCreate(&prof.stop[i]) != cudaSuccess) {
            snprintf(err, err_size, "op_profile: cannot create CUDA events");
            be->destroy(be);
            return NULL;
        }
#define OP_INSTALL(name, params, args) be->name = prof_##name;
    SDT_BACKEND_OPS(OP_INSTALL)
#undef OP_INSTALL
    be->memory_stats = prof_memory_stats_marker;
    return be;
}
