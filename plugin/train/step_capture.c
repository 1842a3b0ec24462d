/* step_capture.c - see step_capture.h. */
#include "train/step_capture.h"

#include <stdio.h>
#include <string.h>

static bool same_key(const sdt_capture_key *a, const sdt_capture_key *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

void sdt_step_capture_reset(sdt_step_capture *sc, sdt_backend *be)
{
    if (sc->kept && be && be->drop_capture) be->drop_capture(be);
    sc->kept = false;
    sc->last_valid = false;
}

static void refuse(sdt_step_capture *sc, const sdt_capture_key *key)
{
    sc->refused = *key;
    sc->refused_valid = true;
}

/* Records work under key and, when the recording holds, runs it once by replay. A spoiled recording
 * ran nothing: the work runs uncaptured, and the key is not tried again. */
static bool capture_and_replay(sdt_step_capture *sc, sdt_backend *be, sdt_arena *arena, const sdt_capture_key *key,
                               sdt_capture_work work, void *user, sdt_error *error)
{
    if (be->capture_begin(be))
        return sdt_fail(error, be->error.code, "starting a CUDA graph capture failed: %s", be->error.message);
    size_t mark = arena->used; /* a recording that does not hold is run again from here */
    sdt_error during;
    sdt_error_clear(&during);
    bool worked = work(user, &during);
    bool captured = false;
    if (be->capture_end(be, &captured))
        return sdt_fail(error, be->error.code, "ending a CUDA graph capture failed: %s", be->error.message);
    if (captured && worked) {
        sc->kept = true;
        sc->captures++;
        sc->replays_of_kept = 0;
        sc->used_after = arena->used;
        if (be->replay(be))
            return sdt_fail(error, be->error.code, "replaying the captured step failed: %s", be->error.message);
        sc->replays++;
        return true;
    }
    if (captured) be->drop_capture(be); /* a recording of work that failed: never replayed */
    sc->kept = false;
    refuse(sc, key); /* what could not be recorded once will not be next step either */
    if (sc->spoiled++ == 0)
        snprintf(sc->spoiled_why, sizeof sc->spoiled_why, "%.200s",
                 during.message[0] ? during.message : "CUDA did not keep the recording");
    sdt_arena_rewind(arena, mark); /* the recorded work's tensors were never written: take the same places */
    sdt_arena_clear_error(arena);  /* clear where the region started (sd_pass checks the arena before it) */
    return work(user, error);      /* nothing recorded ran: the same work, uncaptured (and its own error) */
}

bool sdt_step_capture_run(sdt_step_capture *sc, sdt_backend *be, sdt_arena *arena, const sdt_capture_key *key,
                          sdt_capture_work work, void *user, sdt_error *error)
{
    if (!sc->enabled || !be->capture_begin) return work(user, error);
    bool repeat = sc->last_valid && same_key(&sc->last, key);
    if (!repeat) sdt_step_capture_reset(sc, be);
    sc->last = *key;
    sc->last_valid = true;
    if (repeat && sc->kept) {
        if (be->replay(be) == 0) {
            sc->replays++;
            sc->replays_of_kept++;
            if (arena->used < sc->used_after) arena->used = sc->used_after;
            if (arena->peak < arena->used) arena->peak = arena->used;
            return true;
        }
        /* the backend dropped its graph (it freed device memory since): capture again below, unless graphs
         * of this key do not live long enough to repay their capture */
        sdt_error_clear(&be->error);
        sc->kept = false;
        if (sc->replays_of_kept < 8) refuse(sc, key);
    }
    if (!repeat || (sc->refused_valid && same_key(&sc->refused, key))) return work(user, error);
    return capture_and_replay(sc, be, arena, key, work, user, error);
}
