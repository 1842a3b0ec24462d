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
    uint8_t *base; /* NULL while measuring */
    size_t capacity;
    size_t used;
    size_t peak;
    bool measuring;
    /* The first allocation that did not fit, as an error value made where it failed
     * (SDT_ERR_OUT_OF_MEMORY, the tensor's size and the arena's capacity); that tensor and every
     * later one that does not fit get NULL data, which every op refuses. SDT_ERR_OK while all fit.
     * Callers pass it on with their context; sdt_arena_clear_error starts over. */
    sdt_error error;
} sdt_arena;

/* A measuring arena: counts bytes, allocates nothing. */
void sdt_arena_init_measure(sdt_arena *a, sdt_backend *be);
/* Allocates capacity bytes on the backend; returns false on failure, with be->error holding the
 * allocation's error (SDT_ERR_OUT_OF_MEMORY). */
bool sdt_arena_init(sdt_arena *a, sdt_backend *be, size_t capacity);
void sdt_arena_release(sdt_arena *a);
/* A tensor carved from the arena (256-byte aligned). When it does not fit, its data is NULL and
 * a->error says so (the first such allocation is the one named). */
sdt_tensor sdt_arena_tensor(sdt_arena *a, sdt_dtype dtype, int ndim, const int64_t *shape);
/* Whether every allocation so far fit (a->error is SDT_ERR_OK). */
static inline bool sdt_arena_fits(const sdt_arena *a)
{
    return a->error.code == SDT_ERR_OK;
}
/* Forgets an overflow, for an arena reused after a failed step. */
void sdt_arena_clear_error(sdt_arena *a);
/* Marks and rewinds, for scratch that lives only inside one block. */
size_t sdt_arena_mark(const sdt_arena *a);
void sdt_arena_rewind(sdt_arena *a, size_t mark);

#endif
