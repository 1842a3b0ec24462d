/* work_arena.c - see work_arena.h. */
#include "train/work_arena.h"

#include <stdio.h>

bool work_arena_reserve(work_arena *w, sdt_backend *be, size_t bytes, sdt_error *error)
{
    if (w->live && w->arena.capacity >= bytes) {
        sdt_arena_rewind(&w->arena, 0);
        sdt_arena_clear_error(&w->arena);
        return true;
    }
    work_arena_release(w);
    if (!sdt_arena_init(&w->arena, be, bytes)) {
        sdt_fail(error, be->error.code,
                 "cannot allocate %zu MiB of activation memory on the %s backend (%s); lower the batch size "
                 "or the resolution",
                 bytes >> 20, be->name, be->error.message);
        return false;
    }
    w->live = true;
    return true;
}

void work_arena_release(work_arena *w)
{
    sdt_step_capture_reset(&w->capture, NULL); /* the backend forgets its graph as the arena is freed */
    if (w->live) sdt_arena_release(&w->arena);
    w->live = false;
}
