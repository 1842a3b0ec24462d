/* arena.c - bump allocation of activations; see arena.h for the measure-then-allocate pattern. */
#include "arena.h"

#include <string.h>

/* cuBLAS/cuDNN and AVX-512 loads all want generous alignment; 256 covers every case. */
#define SDT_ARENA_ALIGN ((size_t)256)

static size_t align_up(size_t n)
{
    return (n + SDT_ARENA_ALIGN - 1) & ~(SDT_ARENA_ALIGN - 1);
}

void sdt_arena_init_measure(sdt_arena *a, sdt_backend *be)
{
    memset(a, 0, sizeof *a);
    a->be = be;
    a->measuring = true;
}

bool sdt_arena_init(sdt_arena *a, sdt_backend *be, size_t capacity)
{
    memset(a, 0, sizeof *a);
    a->be = be;
    a->capacity = align_up(capacity);
    if (a->capacity == 0) return true;
    a->base = be->alloc(be, a->capacity);
    if (!a->base) { /* be->alloc has set be->error (OUT_OF_MEMORY, with the size) */
        a->capacity = 0;
        return false;
    }
    return true;
}

void sdt_arena_release(sdt_arena *a)
{
    if (a->base && a->be) a->be->free(a->be, a->base);
    sdt_backend *be = a->be;
    memset(a, 0, sizeof *a);
    a->be = be;
}

sdt_tensor sdt_arena_tensor(sdt_arena *a, sdt_dtype dtype, int ndim, const int64_t *shape)
{
    sdt_device device = a->be ? a->be->device : SDT_DEVICE_CPU;
    sdt_tensor t = sdt_tensor_make(NULL, dtype, device, ndim, shape);
    size_t offset = align_up(a->used);
    size_t end = offset + sdt_tensor_nbytes(&t);

    /* Overflow still advances `used`, so `peak` tells the caller the size it needed. */
    a->used = end;
    if (end > a->peak) a->peak = end;
    if (a->measuring) return t;
    if (end == offset) return t; /* empty tensor: nothing to point at */
    if (end > a->capacity || !a->base) {
        if (sdt_arena_fits(a))
            sdt_fail(&a->error, SDT_ERR_OUT_OF_MEMORY,
                     "the activation arena (%zu bytes) is too small: a %s tensor of %zu bytes needs %zu; size it "
                     "with a measuring pass first",
                     a->capacity, sdt_dtype_name(dtype), sdt_tensor_nbytes(&t), end);
        return t;
    }
    t.data = a->base + offset;
    return t;
}

void sdt_arena_clear_error(sdt_arena *a)
{
    sdt_error_clear(&a->error);
}

size_t sdt_arena_mark(const sdt_arena *a)
{
    return a->used;
}

void sdt_arena_rewind(sdt_arena *a, size_t mark)
{
    if (mark <= a->used) a->used = mark;
}
