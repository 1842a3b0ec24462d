/* arena.h - one bump allocation for all activations of a step.
 *
 * Sized at prepare time: run the model's allocation sequence once with a
 * measuring arena (no memory, data pointers stay NULL) to learn the peak, then
 * allocate exactly that. This is how the plugin knows the memory a
 * configuration needs before it starts and refuses instead of failing mid-run.
 */
#ifndef SDT_KERNELS_ARENA_H
#define SDT_KERNELS_ARENA_H

#include "ops.h"

typedef struct sdt_arena {
    sdt_backend *be;
    uint8_t *base;     /* NULL while measuring */
    size_t capacity;
    size_t used;
    size_t peak;
    bool measuring;
    bool overflowed;   /* an allocation did not fit; the tensor got NULL data */
} sdt_arena;

/* A measuring arena: counts bytes, allocates nothing. */
void sdt_arena_init_measure(sdt_arena *a, sdt_backend *be);
/* Allocates capacity bytes on the backend; returns false (and sets be->error) on failure. */
bool sdt_arena_init(sdt_arena *a, sdt_backend *be, size_t capacity);
void sdt_arena_release(sdt_arena *a);
/* A tensor carved from the arena (256-byte aligned). */
sdt_tensor sdt_arena_tensor(sdt_arena *a, sdt_dtype dtype, int ndim, const int64_t *shape);
/* Marks and rewinds, for scratch that lives only inside one block. */
size_t sdt_arena_mark(const sdt_arena *a);
void sdt_arena_rewind(sdt_arena *a, size_t mark);

#endif
