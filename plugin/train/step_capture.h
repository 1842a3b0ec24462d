/* step_capture.h - when a training pass's steady-state part runs as a captured CUDA graph.
 *
 * The region (sd_pass.c): the UNet's backward, from the loss gradient to the context's gradient. It
 * holds most of a batch-1 step's launches and nothing that needs the host once its plans and scratch
 * exist. Everything else in the step (the batch's uploads, the text encoder, the loss read-back, the
 * scaler's check, the optimizer) runs as before, so the GradScaler, the NaN/Inf fallback and the
 * metrics are untouched (docs/gpu-notes.md "What a captured step needs").
 *
 * The rule: a region is replayed only under the key it was captured with (every device address and
 * host scalar it was recorded with: the arena, the tensors, the batch shape, the dtype, dloss, the
 * options); it is captured on the second consecutive pass with one key (the first made its plans and
 * grew its scratch), and anything else runs uncaptured. A capture that something spoils (an op that
 * needs the host: anomaly mode's checks, a new plan) runs the work uncaptured and marks that key so it
 * is not tried again. The backend drops its graph itself whenever it frees device memory
 * (kernels/ops.h), so a replay never reads a freed buffer; this module then captures again.
 * Off (enabled false) or on a backend without capture (the CPU): the work just runs. */
#ifndef SDT_TRAIN_STEP_CAPTURE_H
#define SDT_TRAIN_STEP_CAPTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "arena.h"
#include "ops.h"
#include "sdt_error.h"

/* What a captured region was recorded with; two regions replay each other only when equal (memcmp:
 * make keys with memset first). */
typedef struct sdt_capture_key {
    const void *arena_base;
    size_t arena_capacity, arena_used; /* the arena's state where the region starts */
    const void *tensors[10];           /* the region's inputs and outputs */
    int64_t shape[8];                  /* the batch's shape */
    int32_t dtype, flags;
    float scalars[4]; /* host scalars recorded into kernels: dloss, the loss's delta */
} sdt_capture_key;

typedef struct sdt_step_capture {
    bool enabled;         /* the run's option (on by default for CUDA runs) */
    sdt_capture_key last; /* the previous region's key */
    bool last_valid;
    bool kept;               /* the backend holds the graph of `last` */
    sdt_capture_key refused; /* a key whose capture was spoiled: not tried again */
    bool refused_valid;
    size_t used_after;                  /* the arena's use after the kept region's work (set again on a replay) */
    int64_t replays_of_kept;            /* replays since the kept graph was captured */
    int64_t captures, replays, spoiled; /* counts, for the run's log line and the tests */
    char spoiled_why[256];              /* the first spoiled capture's sentence */
} sdt_step_capture;

/* The region's work: true on success, false with error set. */
typedef bool (*sdt_capture_work)(void *user, sdt_error *error);

/* Runs work(user) on be under key: replayed, captured then replayed, or just run (step_capture.h's
 * rule). arena: the arena the work allocates from; a replay leaves its use where the work left it. False
 * with error set when the work (or the replay) failed. */
bool sdt_step_capture_run(sdt_step_capture *sc, sdt_backend *be, sdt_arena *arena, const sdt_capture_key *key,
                          sdt_capture_work work, void *user, sdt_error *error);

/* Forgets the graph and the keys (a pass other than the steady-state one, a precision change). */
void sdt_step_capture_reset(sdt_step_capture *sc, sdt_backend *be);

#endif
