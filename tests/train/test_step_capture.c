/* test_step_capture.c - when a training pass's region is captured, replayed or just run
 * (train/step_capture.h), on the CPU backend with a test double of the capture entries (the CPU has
 * none; the double records instead of running while a capture is open, as CUDA does). Every pass must
 * have exactly one effect, whatever path it took:
 *  - off (enabled false) or without capture entries: the work runs every time;
 *  - a key's first pass runs uncaptured, the second is captured and replayed, later ones replay without
 *    calling the work; the arena's use after a replay is the captured run's;
 *  - a new key runs uncaptured and drops the kept graph;
 *  - a spoiled capture runs the work again uncaptured from the same arena offset, says why once, and that key
 *    is not tried again;
 *  - a graph the backend forgot after fewer than 8 replays: the pass runs uncaptured, the key is not captured
 *    again. */
#include <string.h>

#include "ops.h"
#include "sdt_test.h"
#include "train/step_capture.h"

static struct {
    bool recording, kept, spoil_next;
    int recorded_effects; /* what the kept graph does when replayed */
    int pending;          /* effects recorded in the open capture */
    int begins, ends, replays, drops;
} fake;

static int effects, work_calls;
static void *last_place;

static int fake_begin(sdt_backend *be)
{
    (void)be;
    fake.recording = true;
    fake.pending = 0;
    fake.begins++;
    return 0;
}

static int fake_end(sdt_backend *be, bool *captured)
{
    fake.recording = false;
    fake.ends++;
    *captured = !fake.spoil_next;
    if (fake.spoil_next) {
        sdt_error_clear(&be->error);
        fake.spoil_next = false;
        return 0;
    }
    fake.kept = true;
    fake.recorded_effects = fake.pending;
    return 0;
}

static int fake_replay(sdt_backend *be)
{
    if (!fake.kept) {
        sdt_fail(&be->error, SDT_ERR_INTERNAL, "no captured step is kept to replay");
        return -1;
    }
    fake.replays++;
    effects += fake.recorded_effects;
    return 0;
}

static void fake_drop(sdt_backend *be)
{
    (void)be;
    fake.kept = false;
    fake.drops++;
}

typedef struct work_ctx {
    sdt_arena *arena;
    bool fail_when_recording; /* an op that needs the host: fails during a capture */
} work_ctx;

static bool work(void *user, sdt_error *error)
{
    work_ctx *w = user;
    work_calls++;
    int64_t shape[1] = {16};
    sdt_tensor t = sdt_arena_tensor(w->arena, SDT_F32, 1, shape);
    last_place = t.data;
    if (fake.recording && w->fail_when_recording)
        return sdt_fail(error, SDT_ERR_DEVICE, "a read-back cannot be recorded in a captured step");
    if (fake.recording)
        fake.pending++;
    else
        effects++;
    return true;
}

static sdt_capture_key key_of(sdt_arena *a, int shape)
{
    sdt_capture_key k;
    memset(&k, 0, sizeof k);
    k.arena_base = a->base;
    k.arena_capacity = a->capacity;
    k.arena_used = a->used;
    k.shape[0] = shape;
    k.scalars[0] = 1.0f;
    return k;
}

/* One pass: the arena rewound as sd_pass does, then the region under key shape. */
static bool pass(sdt_step_capture *sc, sdt_backend *be, sdt_arena *a, work_ctx *w, int shape)
{
    sdt_arena_rewind(a, 0);
    int64_t lead_shape[1] = {8};
    (void)sdt_arena_tensor(a, SDT_F32, 1, lead_shape); /* the pass's inputs, before the region */
    sdt_capture_key k = key_of(a, shape);
    sdt_error error;
    sdt_error_clear(&error);
    bool ok = sdt_step_capture_run(sc, be, a, &k, work, w, &error);
    CHECK(ok, "pass (shape %d) failed: %s", shape, error.message);
    return ok;
}

int main(void)
{
    sdt_backend *be = sdt_backend_cpu_create(1);
    CHECK(!be->capture_begin, "the CPU backend has no capture entries");
    sdt_arena arena;
    CHECK(sdt_arena_init(&arena, be, 1 << 16), "arena");
    work_ctx w = {&arena, false};
    sdt_step_capture sc;
    memset(&sc, 0, sizeof sc);

    /* without capture entries, on or off: the work runs */
    sc.enabled = true;
    for (int i = 0; i < 3; i++) pass(&sc, be, &arena, &w, 1);
    CHECK(effects == 3 && work_calls == 3 && sc.captures == 0, "no entries: %d effects, %d calls", effects, work_calls);

    be->capture_begin = fake_begin, be->capture_end = fake_end, be->replay = fake_replay, be->drop_capture = fake_drop;
    memset(&sc, 0, sizeof sc);
    effects = work_calls = 0;
    for (int i = 0; i < 3; i++) pass(&sc, be, &arena, &w, 1);
    CHECK(effects == 3 && fake.begins == 0, "off: %d effects, %d captures", effects, fake.begins);

    /* on: uncaptured, captured + replayed, replayed, replayed */
    memset(&sc, 0, sizeof sc);
    sc.enabled = true;
    effects = work_calls = 0;
    pass(&sc, be, &arena, &w, 1);
    CHECK(effects == 1 && work_calls == 1 && fake.begins == 0, "a key's first pass runs uncaptured");
    size_t used_uncaptured = arena.used;
    pass(&sc, be, &arena, &w, 1);
    CHECK(effects == 2 && work_calls == 2 && fake.begins == 1 && fake.replays == 1 && sc.captures == 1,
          "the second pass is captured and replayed once (%d effects, %d begins, %d replays)", effects, fake.begins,
          fake.replays);
    for (int i = 0; i < 2; i++) pass(&sc, be, &arena, &w, 1);
    CHECK(effects == 4 && work_calls == 2 && fake.replays == 3 && sc.replays == 3,
          "later passes replay without the work (%d effects, %d calls)", effects, work_calls);
    CHECK(arena.used == used_uncaptured, "after a replay the arena's use is the work's (%zu, %zu)", arena.used,
          used_uncaptured);

    /* a new key: uncaptured, the graph dropped; its second pass captured */
    int drops = fake.drops;
    pass(&sc, be, &arena, &w, 2);
    CHECK(effects == 5 && work_calls == 3 && fake.drops == drops + 1 && !fake.kept,
          "a new shape runs uncaptured and drops the graph");
    pass(&sc, be, &arena, &w, 2);
    CHECK(effects == 6 && sc.captures == 2, "the new shape is captured on its second pass");

    /* a spoiled capture: the work runs again uncaptured, from the same place; the key is not tried again */
    w.fail_when_recording = true;
    pass(&sc, be, &arena, &w, 3);
    void *uncaptured_place = last_place;
    int begins = fake.begins;
    pass(&sc, be, &arena, &w, 3);
    CHECK(effects == 8 && fake.begins == begins + 1 && sc.spoiled == 1 && !fake.kept,
          "a spoiled capture runs the work once uncaptured (%d effects)", effects);
    CHECK(last_place == uncaptured_place, "the work ran again from the region's arena offset");
    CHECK(strstr(sc.spoiled_why, "read-back") != NULL, "the reason is kept: \"%s\"", sc.spoiled_why);
    pass(&sc, be, &arena, &w, 3);
    CHECK(effects == 9 && fake.begins == begins + 1, "a spoiled key is not captured again");
    w.fail_when_recording = false;

    /* CUDA keeps nothing although the work went well: the same */
    pass(&sc, be, &arena, &w, 4);
    fake.spoil_next = true;
    begins = fake.begins;
    pass(&sc, be, &arena, &w, 4);
    pass(&sc, be, &arena, &w, 4);
    CHECK(effects == 12 && fake.begins == begins + 1 && sc.spoiled == 2, "a recording CUDA did not keep (%d effects)",
          effects);

    /* the backend forgot its graph after 2 replays: uncaptured, and not captured again */
    pass(&sc, be, &arena, &w, 5);
    pass(&sc, be, &arena, &w, 5);
    pass(&sc, be, &arena, &w, 5);
    CHECK(effects == 15 && fake.kept, "shape 5 captured and replayed");
    fake.kept = false; /* what cuda_device_free does */
    begins = fake.begins;
    pass(&sc, be, &arena, &w, 5);
    pass(&sc, be, &arena, &w, 5);
    CHECK(effects == 17 && fake.begins == begins, "a graph forgotten early is not captured again (%d effects)",
          effects);

    /* reset forgets the kept graph */
    pass(&sc, be, &arena, &w, 6);
    pass(&sc, be, &arena, &w, 6);
    CHECK(fake.kept, "shape 6 captured");
    sdt_step_capture_reset(&sc, be);
    CHECK(!fake.kept && !sc.kept, "reset drops the graph");
    pass(&sc, be, &arena, &w, 6);
    CHECK(effects == 20, "after a reset the pass runs uncaptured (%d effects)", effects);

    sdt_arena_release(&arena);
    be->capture_begin = NULL, be->capture_end = NULL, be->replay = NULL, be->drop_capture = NULL;
    be->destroy(be);
    return sdt_test_finish("step_capture");
}
