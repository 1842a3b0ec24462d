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
 * options); a key is captured on its second pass (the first made its plans and grew its scratch), and
 * up to SDT_CAPTURE_SLOTS keys keep a graph at once (aspect-ratio buckets alternate shapes), the least
 * recently used giving way. A capture that something spoils (an op that
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

/* One of the backend's graph slots as this module uses it. */
typedef struct sdt_capture_slot {
    sdt_capture_key key;
    bool kept;               /* the backend holds this key's graph in the slot */
    size_t used_after;       /* the arena's use after the region's work (set again on a replay) */
    int64_t replays_of_kept; /* replays since the graph was captured */
    uint64_t last_use;       /* the least recently used slot is the one a new capture takes */
} sdt_capture_slot;

#define SDT_CAPTURE_SEEN 8 /* keys remembered as run once uncaptured (and as refused) */

typedef struct sdt_step_capture {
    bool enabled; /* the run's option (on by default for CUDA runs) */
    sdt_capture_slot slots[SDT_CAPTURE_SLOTS];
    sdt_capture_key seen[SDT_CAPTURE_SEEN]; /* keys whose first pass ran uncaptured (a ring) */
    int n_seen, next_seen;
    sdt_capture_key refused[SDT_CAPTURE_SEEN]; /* keys that could not be captured: not tried again (a ring) */
    int n_refused, next_refused;
    uint64_t clock;
    int64_t captures, replays, spoiled; /* counts, for the run's log lines and the tests */
    char spoiled_why[256];              /* the first spoiled capture's sentence */
} sdt_step_capture;

/* The region's work: true on success, false with error set. */
typedef bool (*sdt_capture_work)(void *user, sdt_error *error);

/* Runs work(user) on be under key: replayed, captured then replayed, or just run (step_capture.h's
 * rule). arena: the arena the work allocates from; a replay leaves its use where the work left it. False
 * with error set when the work (or the replay) failed. */
bool sdt_step_capture_run(sdt_step_capture *sc, sdt_backend *be, sdt_arena *arena, const sdt_capture_key *key,
                          sdt_capture_work work, void *user, sdt_error *error);

/* Forgets the graphs and the keys (the arena is released). */
void sdt_step_capture_reset(sdt_step_capture *sc, sdt_backend *be);

#endif
