/* test_step_capture.c - when a training pass's region is captured, replayed or just run
 * (train/step_capture.h), on the CPU backend with a test double of the capture entries (the CPU has
 * none; the double records instead of running while a capture is open, as CUDA does, and keeps one graph
 * per slot). Every pass must have exactly one effect, whatever path it took:
 *  - off (enabled false) or without capture entries: the work runs every time;
 *  - a key's first pass runs uncaptured, the second is captured and replayed, later ones replay without
 *    calling the work; the arena's use after a replay is the captured run's;
 *  - shapes that alternate (buckets) each keep a graph, up to SDT_CAPTURE_SLOTS, the least recently used
 *    giving way to a new one;
 *  - a spoiled capture runs the work again uncaptured from the same arena offset, says why once, and that key
 *    is not tried again; so does a recording CUDA did not keep;
 *  - graphs the backend forgot (it freed memory) after fewer than 8 replays: the pass runs uncaptured and the
 *    key is not captured again;
 *  - reset forgets every graph and key. */
#include <string.h>

#include "ops.h"
#include "sdt_test.h"
#include "train/step_capture.h"

static struct {
    bool recording, spoil_next;
    bool kept[SDT_CAPTURE_SLOTS];
    int recorded_effects[SDT_CAPTURE_SLOTS]; /* what each slot's graph does when replayed */
    int pending;                             /* effects recorded in the open capture */
    int begins, replays, drops;
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

static int fake_end(sdt_backend *be, int slot, bool *captured)
{
    fake.recording = false;
    *captured = !fake.spoil_next;
    if (fake.spoil_next) {
        sdt_error_clear(&be->error);
        fake.spoil_next = false;
        return 0;
    }
    fake.kept[slot] = true;
    fake.recorded_effects[slot] = fake.pending;
    return 0;
}

static int fake_replay(sdt_backend *be, int slot)
{
    if (!fake.kept[slot]) {
        sdt_fail(&be->error, SDT_ERR_INTERNAL, "no captured step is kept in slot %d", slot);
        return -1;
    }
    fake.replays++;
    effects += fake.recorded_effects[slot];
    return 0;
}

static void fake_drop(sdt_backend *be, int slot)
{
    (void)be;
    for (int i = 0; i < SDT_CAPTURE_SLOTS; i++)
        if (slot < 0 || slot == i) fake.kept[i] = false;
    fake.drops++;
}

static int kept_graphs(void)
{
    int n = 0;
    for (int i = 0; i < SDT_CAPTURE_SLOTS; i++) n += fake.kept[i];
    return n;
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
static void pass(sdt_step_capture *sc, sdt_backend *be, sdt_arena *a, work_ctx *w, int shape)
{
    sdt_arena_rewind(a, 0);
    int64_t lead_shape[1] = {8};
    (void)sdt_arena_tensor(a, SDT_F32, 1, lead_shape); /* the pass's inputs, before the region */
    sdt_capture_key k = key_of(a, shape);
    sdt_error error;
    sdt_error_clear(&error);
    CHECK(sdt_step_capture_run(sc, be, a, &k, work, w, &error), "pass (shape %d) failed: %s", shape, error.message);
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

    /* buckets: shapes 2 and 3 alternate with 1; each is captured on its second pass and kept beside the others */
    int shapes[] = {2, 3, 1, 2, 3, 1, 2, 3};
    for (int i = 0; i < 8; i++) pass(&sc, be, &arena, &w, shapes[i]);
    CHECK(effects == 12 && sc.captures == 3 && kept_graphs() == 3 && work_calls == 2 + 4,
          "alternating shapes: %d effects, %lld captures, %d graphs, %d work calls", effects, (long long)sc.captures,
          kept_graphs(), work_calls);
    /* a fifth and a sixth shape: the least recently used graph (shape 1) gives way */
    for (int s = 4; s <= 5; s++) {
        pass(&sc, be, &arena, &w, s);
        pass(&sc, be, &arena, &w, s);
    }
    CHECK(effects == 16 && sc.captures == 5 && kept_graphs() == SDT_CAPTURE_SLOTS, "shapes 4 and 5 captured");
    int begins = fake.begins;
    pass(&sc, be, &arena, &w, 2);
    CHECK(effects == 17 && fake.begins == begins, "shape 2 still replays");
    pass(&sc, be, &arena, &w, 1);
    CHECK(effects == 18 && fake.begins == begins + 1, "shape 1 gave its slot away and is captured again");

    /* a spoiled capture: the work runs again uncaptured, from the same place; the key is not tried again */
    w.fail_when_recording = true;
    pass(&sc, be, &arena, &w, 6);
    void *uncaptured_place = last_place;
    begins = fake.begins;
    pass(&sc, be, &arena, &w, 6);
    CHECK(effects == 20 && fake.begins == begins + 1 && sc.spoiled == 1,
          "a spoiled capture runs the work once uncaptured (%d effects)", effects);
    CHECK(last_place == uncaptured_place, "the work ran again from the region's arena offset");
    CHECK(strstr(sc.spoiled_why, "read-back") != NULL, "the reason is kept: \"%s\"", sc.spoiled_why);
    pass(&sc, be, &arena, &w, 6);
    CHECK(effects == 21 && fake.begins == begins + 1, "a spoiled key is not captured again");
    w.fail_when_recording = false;

    /* CUDA keeps nothing although the work went well: the same */
    pass(&sc, be, &arena, &w, 7);
    fake.spoil_next = true;
    begins = fake.begins;
    pass(&sc, be, &arena, &w, 7);
    pass(&sc, be, &arena, &w, 7);
    CHECK(effects == 24 && fake.begins == begins + 1 && sc.spoiled == 2, "a recording CUDA did not keep (%d effects)",
          effects);

    /* the backend forgot its graphs (it freed memory) after 1 replay of shape 2: uncaptured, not captured again */
    for (int i = 0; i < SDT_CAPTURE_SLOTS; i++) fake.kept[i] = false; /* what cuda_device_free does */
    begins = fake.begins;
    pass(&sc, be, &arena, &w, 2);
    pass(&sc, be, &arena, &w, 2);
    CHECK(effects == 26 && fake.begins == begins, "a graph forgotten early is not captured again (%d effects)",
          effects);

    /* reset forgets every graph and key */
    pass(&sc, be, &arena, &w, 8);
    pass(&sc, be, &arena, &w, 8);
    CHECK(kept_graphs() == 1, "shape 8 captured");
    sdt_step_capture_reset(&sc, be);
    CHECK(kept_graphs() == 0, "reset drops the graphs");
    pass(&sc, be, &arena, &w, 8);
    CHECK(effects == 29 && sc.enabled, "after a reset the pass runs uncaptured (%d effects)", effects);

    sdt_arena_release(&arena);
    be->capture_begin = NULL, be->capture_end = NULL, be->replay = NULL, be->drop_capture = NULL;
    be->destroy(be);
    return sdt_test_finish("step_capture");
}
