/* device_memory.cu - every cudaMalloc of the backend goes through here, so the backend knows
 * how much it holds and the most it held at once (the peak a training run reports next to
 * prepare's estimate). cudaFree does not say how large a block was, so the sizes are kept in
 * a small open-addressing table keyed by pointer. */
#include <stdint.h>
#include <stdlib.h>

#include "cuda_ops.h"

static size_t slot_of(const void *p, size_t cap)
{
    uint64_t h = (uint64_t)(uintptr_t)p >> 8; /* cudaMalloc aligns to at least 256 bytes */
    h *= 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 16) & (cap - 1);
}

static void table_put(cuda_alloc_table *t, void *p, size_t bytes)
{
    size_t i = slot_of(p, t->cap);
    while (t->keys[i]) i = (i + 1) & (t->cap - 1);
    t->keys[i] = p;
    t->sizes[i] = bytes;
    t->count++;
}

static bool table_grow(cuda_alloc_table *t)
{
    cuda_alloc_table bigger;
    memset(&bigger, 0, sizeof bigger);
    bigger.cap = t->cap ? 2 * t->cap : 256;
    bigger.keys = (void **)calloc(bigger.cap, sizeof(void *));
    bigger.sizes = (size_t *)calloc(bigger.cap, sizeof(size_t));
    if (!bigger.keys || !bigger.sizes) {
        free(bigger.keys);
        free(bigger.sizes);
        return false;
    }
    for (size_t i = 0; i < t->cap; i++)
        if (t->keys[i]) table_put(&bigger, t->keys[i], t->sizes[i]);
    free(t->keys);
    free(t->sizes);
    *t = bigger;
    return true;
}

/* Removes p and returns its size (0 when p was not recorded). Backward-shift deletion keeps
 * every probe chain unbroken without tombstones. */
static size_t table_take(cuda_alloc_table *t, const void *p)
{
    if (!t->cap) return 0;
    size_t mask = t->cap - 1, i = slot_of(p, t->cap);
    while (t->keys[i] && t->keys[i] != p) i = (i + 1) & mask;
    if (!t->keys[i]) return 0;
    size_t bytes = t->sizes[i];
    t->keys[i] = NULL;
    t->count--;
    for (size_t j = (i + 1) & mask; t->keys[j]; j = (j + 1) & mask) {
        size_t home = slot_of(t->keys[j], t->cap);
        /* move entry j into the hole at i when its home does not lie cyclically in (i, j] */
        bool home_in_gap = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!home_in_gap) {
            t->keys[i] = t->keys[j];
            t->sizes[i] = t->sizes[j];
            t->keys[j] = NULL;
            i = j;
        }
    }
    return bytes;
}

cudaError_t cuda_device_malloc(cuda_ctx *c, void **p, size_t bytes)
{
    *p = NULL;
    if (2 * (c->allocs.count + 1) > c->allocs.cap && !table_grow(&c->allocs)) return cudaErrorMemoryAllocation;
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e != cudaSuccess) return e;
    table_put(&c->allocs, *p, bytes);
    c->allocated_bytes += bytes;
    if (c->allocated_bytes > c->peak_allocated_bytes) c->peak_allocated_bytes = c->allocated_bytes;
    return cudaSuccess;
}

void cuda_device_free(cuda_ctx *c, void *p)
{
    if (!p) return;
    cuda_step_graph_forget(c); /* a kept graph never replays on a freed buffer */
    c->allocated_bytes -= table_take(&c->allocs, p);
    cudaFree(p);
}

void cuda_device_memory_release(cuda_ctx *c)
{
    free(c->allocs.keys);
    free(c->allocs.sizes);
    memset(&c->allocs, 0, sizeof c->allocs);
}

int cuda_memory_stats(sdt_backend *be, sdt_memory_stats *stats, bool reset_peak)
{
    cuda_ctx *c = ctx_of(be);
    memset(stats, 0, sizeof *stats);
    stats->tracked = true;
    stats->allocated_bytes = c->allocated_bytes;
    stats->peak_allocated_bytes = c->peak_allocated_bytes;
    for (int i = 0; i < SDT_CUDA_SCRATCH_SLOTS; i++) stats->scratch_bytes += c->scratch_size[i];
    stats->conv_workspace_bytes = c->scratch_size[CUDA_CONV_WORKSPACE_SLOT];
    CUDA_TRY(be, cudaMemGetInfo(&stats->device_free_bytes, &stats->device_total_bytes));
    if (reset_peak) c->peak_allocated_bytes = c->allocated_bytes;
    return 0;
}
