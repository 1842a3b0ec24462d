/* step_capture.c - see step_capture.h. */
#include "train/step_capture.h"

#include <stdio.h>
#include <string.h>

static bool same_key(const sdt_capture_key *a, const sdt_capture_key *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

static bool in_ring(const sdt_capture_key *ring, int n, const sdt_capture_key *key)
{
    for (int i = 0; i < n; i++)
        if (same_key(&ring[i], key)) return true;
    return false;
}

static void ring_add(sdt_capture_key *ring, int *n, int *next, const sdt_capture_key *key)
{
    ring[*next] = *key;
    *next = (*next + 1) % SDT_CAPTURE_SEEN;
    if (*n < SDT_CAPTURE_SEEN) (*n)++;
}

static void refuse(sdt_step_capture *sc, const sdt_capture_key *key)
{
    if (!in_ring(sc->refused, sc->n_refused, key)) ring_add(sc->refused, &sc->n_refused, &sc->next_refused, key);
}

void sdt_step_capture_reset(sdt_step_capture *sc, sdt_backend *be)
{
    if (be && be->drop_capture) be->drop_capture(be, -1);
    bool enabled = sc->enabled;
    int64_t captures = sc->captures, replays = sc->replays, spoiled = sc->spoiled;
    char why[sizeof sc->spoiled_why];
    memcpy(why, sc->spoiled_why, sizeof why);
    memset(sc, 0, sizeof *sc);
    sc->enabled = enabled;
    sc->captures = captures, sc->replays = replays, sc->spoiled = spoiled;
    memcpy(sc->spoiled_why, why, sizeof why);
}

/* The slot a new capture takes: a free one, else the least recently used. */
static int slot_for_capture(const sdt_step_capture *sc)
{
    int best = 0;
    for (int i = 0; i < SDT_CAPTURE_SLOTS; i++) {
        if (!sc->slots[i].kept) return i;
        if (sc->slots[i].last_use < sc->slots[best].last_use) best = i;
    }
    return best;
}

/* Records work under key into a slot and, when the recording holds, runs it once by replay. A spoiled
 * recording ran nothing: the work runs uncaptured from the same arena offset, and the key is not tried again. */
static bool capture_and_replay(sdt_step_capture *sc, sdt_backend *be, sdt_arena *arena, const sdt_capture_key *key,
                               sdt_capture_work work, void *user, sdt_error *error)
{
    int s = slot_for_capture(sc);
    sdt_capture_slot *slot = &sc->slots[s];
    if (be->capture_begin(be))
        return sdt_fail(error, be->error.code, "starting a CUDA graph capture failed: %s", be->error.message);
    size_t mark = arena->used; /* a recording that does not hold is run again from here */
    sdt_error during;
    sdt_error_clear(&during);
    bool worked = work(user, &during);
    bool captured = false;
    slot->kept = false; /* a capture that holds replaces the slot's graph; one that does not leaves it to be dropped */
    if (be->capture_end(be, s, &captured))
        return sdt_fail(error, be->error.code, "ending a CUDA graph capture failed: %s", be->error.message);
    if (captured && worked) {
        *slot = (sdt_capture_slot){*key, true, arena->used, 0, ++sc->clock};
        sc->captures++;
        if (be->replay(be, s))
            return sdt_fail(error, be->error.code, "replaying the captured step failed: %s", be->error.message);
        sc->replays++;
        return true;
    }
    be->drop_capture(be, s); /* a recording of work that failed is never replayed */
    refuse(sc, key);         /* what could not be recorded once will not be next time either */
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
    if (!sc->enabled || !be->capture_begin || in_ring(sc->refused, sc->n_refused, key)) return work(user, error);
    for (int i = 0; i < SDT_CAPTURE_SLOTS; i++) {
        sdt_capture_slot *slot = &sc->slots[i];
        if (!slot->kept || !same_key(&slot->key, key)) continue;
        if (be->replay(be, i) == 0) {
            sc->replays++;
            slot->replays_of_kept++;
            slot->last_use = ++sc->clock;
            if (arena->used < slot->used_after) arena->used = slot->used_after;
            if (arena->peak < arena->used) arena->peak = arena->used;
            return true;
        }
        /* the backend forgot its graphs (it freed device memory since): every slot is empty now; this key is
         * captured again below unless its graphs do not live long enough to repay their capture */
        sdt_error_clear(&be->error);
        bool short_lived = slot->replays_of_kept < 8;
        for (int k = 0; k < SDT_CAPTURE_SLOTS; k++) sc->slots[k].kept = false;
        if (short_lived) {
            refuse(sc, key);
            return work(user, error);
        }
        return capture_and_replay(sc, be, arena, key, work, user, error);
    }
    if (!in_ring(sc->seen, sc->n_seen, key)) {
        ring_add(sc->seen, &sc->n_seen, &sc->next_seen, key);
        return work(user, error); /* a key's first pass: its plans and scratch are made here */
    }
    return capture_and_replay(sc, be, arena, key, work, user, error);
}
