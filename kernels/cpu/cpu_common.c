/* cpu_common.c - dtype staging (f16/bf16 <-> float scratch) and errors shared by every CPU op
 * (their arguments are checked before they run: kernels/op_checks.c). */
#include "cpu_context.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* Conversion chunk per thread: large enough to amortise the fork, small enough to balance. */
#define CPU_CONVERT_CHUNK ((int64_t)16384)

int cpu_fail(sdt_backend *be, sdt_error_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sdt_failv(&be->error, code, fmt, ap);
    va_end(ap);
    return -1;
}

static float *scratch_reserve(sdt_backend *be, int slot, int64_t n)
{
    cpu_context *ctx = be->ctx;
    if (slot < 0 || slot >= SDT_CPU_SCRATCH_SLOTS) {
        cpu_fail(be, SDT_ERR_INTERNAL,
                 "cpu_common.c: scratch slot %d is out of range 0..%d; use a lower slot index in the op.", slot,
                 SDT_CPU_SCRATCH_SLOTS - 1);
        return NULL;
    }
    cpu_scratch *s = &ctx->scratch[slot];
    size_t need = n > 0 ? (size_t)n : 1;
    if (s->capacity < need) {
        float *grown = realloc(s->data, need * sizeof(float));
        if (!grown) {
            cpu_fail(be, SDT_ERR_OUT_OF_MEMORY,
                     "cpu_common.c: out of memory growing scratch slot %d to %zu floats; free host memory.", slot,
                     need);
            return NULL;
        }
        s->data = grown;
        s->capacity = need;
    }
    return s->data;
}

float *cpu_scratch_floats(sdt_backend *be, int slot, int64_t n)
{
    return scratch_reserve(be, slot, n);
}

void cpu_scratch_release(sdt_backend *be)
{
    cpu_context *ctx = be->ctx;
    if (!ctx) return;
    for (int i = 0; i < SDT_CPU_SCRATCH_SLOTS; i++) {
        free(ctx->scratch[i].data);
        ctx->scratch[i].data = NULL;
        ctx->scratch[i].capacity = 0;
    }
}

static void load_parallel(sdt_backend *be, const void *src, sdt_dtype dtype, float *dst, int64_t n)
{
    size_t esize = sdt_dtype_size(dtype);
#pragma omp parallel for num_threads(cpu_threads_for(be, n)) schedule(static)
    for (int64_t start = 0; start < n; start += CPU_CONVERT_CHUNK) {
        int64_t len = n - start < CPU_CONVERT_CHUNK ? n - start : CPU_CONVERT_CHUNK;
        sdt_load_f32((const char *)src + (size_t)start * esize, dtype, dst + start, len);
    }
}

static void store_parallel(sdt_backend *be, const float *src, void *dst, sdt_dtype dtype, int64_t n)
{
    size_t esize = sdt_dtype_size(dtype);
#pragma omp parallel for num_threads(cpu_threads_for(be, n)) schedule(static)
    for (int64_t start = 0; start < n; start += CPU_CONVERT_CHUNK) {
        int64_t len = n - start < CPU_CONVERT_CHUNK ? n - start : CPU_CONVERT_CHUNK;
        sdt_store_f32(src + start, (char *)dst + (size_t)start * esize, dtype, len);
    }
}

const float *cpu_read_f32(sdt_backend *be, const sdt_tensor *t, int slot)
{
    if (!t) return NULL;
    if (t->dtype == SDT_F32) return t->data;
    int64_t n = sdt_tensor_numel(t);
    float *buf = scratch_reserve(be, slot, n);
    if (buf) load_parallel(be, t->data, t->dtype, buf, n);
    return buf;
}

float *cpu_write_begin(sdt_backend *be, sdt_tensor *t, int slot, bool load_existing)
{
    if (!t) return NULL;
    if (t->dtype == SDT_F32) return t->data;
    int64_t n = sdt_tensor_numel(t);
    float *buf = scratch_reserve(be, slot, n);
    if (buf && load_existing) load_parallel(be, t->data, t->dtype, buf, n);
    return buf;
}

void cpu_write_end(sdt_backend *be, sdt_tensor *t, float *buf)
{
    if (!t || !buf || t->dtype == SDT_F32) return;
    store_parallel(be, buf, t->data, t->dtype, sdt_tensor_numel(t));
}

int cpu_fail_oom(sdt_backend *be, const char *op, size_t bytes)
{
    return cpu_fail(be, SDT_ERR_OUT_OF_MEMORY,
                    "%s: could not allocate %zu bytes of workspace; free memory or use smaller shapes.", op, bytes);
}
