/* work_arena.h - a reusable activation arena that grows to the largest pass measured.
 *
 * Every computation here follows one pattern: run its allocation sequence on a
 * measuring arena, reserve that many bytes (reallocating only when it grew), rewind,
 * run for real. The reserved size is the memory estimate prepare() reports. */
#ifndef SDT_TRAIN_WORK_ARENA_H
#define SDT_TRAIN_WORK_ARENA_H

#include "sdt_error.h"

#include <stddef.h>

#include "arena.h"
#include "train/step_capture.h"

typedef struct work_arena {
    sdt_arena arena; /* rewound to 0 by reserve */
    bool live;
    sdt_step_capture capture; /* the training pass's captured region (train/step_capture.h) */
} work_arena;

/* Makes the arena hold at least bytes (rewound); false + error when the backend has no room. */
bool work_arena_reserve(work_arena *w, sdt_backend *be, size_t bytes, sdt_error *error);
void work_arena_release(work_arena *w);

#endif
