/* cpu_common.c - dtype staging (f16/bf16 <-> float scratch), errors and argument checks
 * shared by every CPU op. */
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
        cpu_fail(be, SDT_ERR_INTERNAL, "cpu_common.c: scratch slot %d is out of range 0..%d; use a lower slot index in the op.",
                 slot, SDT_CPU_SCRATCH_SLOTS - 1);
        return NULL;
    }
    cpu_scratch *s = &ctx->scratch[slot];
    size_t need = n > 0 ? (size_t)n : 1;
    if (s->capacity < need) {
        float *grown = realloc(s->data, need * sizeof(float));
        if (!grown) {
            cpu_fail(be, SDT_ERR_OUT_OF_MEMORY, "cpu_common.c: out of memory growing scratch slot %d to %zu floats; free host memory.",
                     slot, need);
            return NULL;
        }
        s->data = grown;
        s->capacity = need;
    }
    return s->data;
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

static bool is_float_dtype(sdt_dtype d)
{
    return d == SDT_F32 || d == SDT_F16 || d == SDT_BF16;
}

int cpu_check_tensor(sdt_backend *be, const char *op, const char *field, const sdt_tensor *t)
{
    if (!t) return cpu_fail(be, SDT_ERR_INVALID_ARGUMENT, "%s: tensor '%s' is NULL; pass a tensor.", op, field);
    if (t->device != SDT_DEVICE_CPU)
        return cpu_fail(be, SDT_ERR_INVALID_ARGUMENT, "%s: tensor '%s' is not on the CPU; pass CPU tensors to the CPU backend.", op, field);
    if (!is_float_dtype(t->dtype))
        return cpu_fail(be, SDT_ERR_INVALID_ARGUMENT, "%s: tensor '%s' has dtype %s; pass an f32, f16 or bf16 tensor.", op, field,
                        sdt_dtype_name(t->dtype));
    if (!t->data && sdt_tensor_numel(t) > 0)
        return cpu_fail(be, SDT_ERR_INVALID_ARGUMENT, "%s: tensor '%s' has no data (an arena overflow?); size the arena by measuring first.",
                        op, field);
    return 0;
}

int cpu_check_same_numel(sdt_backend *be, const char *op, const char *field_a, const sdt_tensor *a,
                         const char *field_b, const sdt_tensor *b)
{
    if (cpu_check_tensor(be, op, field_a, a) || cpu_check_tensor(be, op, field_b, b)) return -1;
    int64_t na = sdt_tensor_numel(a), nb = sdt_tensor_numel(b);
    if (na != nb)
        return cpu_fail(be, SDT_ERR_INVALID_ARGUMENT, "%s: '%s' has %lld elements but '%s' has %lld; pass tensors of equal size.", op,
                        field_a, (long long)na, field_b, (long long)nb);
    return 0;
}

int cpu_check_f32(sdt_backend *be, const char *op, const char *field, const sdt_tensor *t)
{
    if (cpu_check_tensor(be, op, field, t)) return -1;
    if (t->dtype != SDT_F32)
        return cpu_fail(be, SDT_ERR_INVALID_ARGUMENT, "%s: tensor '%s' is %s; it must be f32 (optimizer state and statistics are f32).", op,
                        field, sdt_dtype_name(t->dtype));
    return 0;
}
