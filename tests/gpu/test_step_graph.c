/* test_step_graph.c - the CUDA backend's captured step (kernels/ops.h capture_begin .. drop_capture,
 * kernels/cuda/step_graph.cu):
 *  - work recorded between capture_begin and capture_end does not run then; each replay runs it once
 *    and gives the same bytes as running the same ops uncaptured, step after step (the graph reads the
 *    buffers' current values; its scalars are the ones it was recorded with);
 *  - an op that needs the host during a capture (a read-back, an upload, an allocation, a
 *    synchronisation) fails with a sentence naming it, spoils the recording (captured false, the error
 *    cleared), leaves the kept graph and the stream usable, and the same ops then run uncaptured;
 *  - a new capture replaces its slot's graph, another slot keeps its own; after drop_capture, or after the
 *    backend freed device memory, a replay is refused;
 *  - the CPU backend has no capture (NULL entries).
 * Fixed inputs, no random draws. Skips (77) when the CUDA module or a GPU is absent. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_module.h"
#include "ops.h"
#include "sdt_test.h"

enum { SIDE = 64, N = SIDE * SIDE };

typedef struct step_buffers {
    sdt_tensor x, x16, xt, p, g, m, v;
} step_buffers;

static sdt_tensor on(sdt_backend *be, sdt_dtype dt, int ndim, const int64_t *shape)
{
    return sdt_tensor_make(be->alloc(be, (size_t)N * sdt_dtype_size(dt)), dt, be->device, ndim, shape);
}

static void fill(sdt_backend *be, step_buffers *b)
{
    static float x[N], p[N];
    for (int i = 0; i < N; i++) x[i] = sinf(0.01f * (float)i) * 3.0f, p[i] = cosf(0.02f * (float)i);
    be->upload(be, b->x.data, x, sizeof x);
    be->upload(be, b->p.data, p, sizeof p);
    be->zero(be, &b->x16), be->zero(be, &b->xt), be->zero(be, &b->g), be->zero(be, &b->m), be->zero(be, &b->v);
}

static step_buffers make(sdt_backend *be)
{
    int64_t flat[1] = {N}, square[3] = {1, SIDE, SIDE};
    step_buffers b = {on(be, SDT_F32, 1, flat), on(be, SDT_BF16, 3, square), on(be, SDT_F32, 3, square),
                      on(be, SDT_F32, 1, flat), on(be, SDT_F32, 1, flat),    on(be, SDT_F32, 1, flat),
                      on(be, SDT_F32, 1, flat)};
    fill(be, &b);
    return b;
}

static void release(sdt_backend *be, step_buffers *b)
{
    sdt_tensor *all[] = {&b->x, &b->x16, &b->xt, &b->p, &b->g, &b->m, &b->v};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) be->free(be, all[i]->data);
}

/* A small training-like step: conversions, a transpose, a loss gradient accumulated, a scale and an AdamW
 * update whose state carries over to the next step. Every scalar is fixed, as in a captured step. */
static int step_ops(sdt_backend *be, step_buffers *b)
{
    return be->convert(be, &b->x16, &b->x) || be->transpose_forward(be, &b->xt, &b->x16) || be->zero(be, &b->g) ||
           be->axpy(be, &b->g, 0.5f, &b->xt) || be->mse_loss_backward(be, &b->g, 3.0f, &b->p, &b->x, NULL) ||
           be->scale(be, &b->g, 0.25f) ||
           be->adamw_update(be, &b->p, &b->g, &b->m, &b->v, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.01f, 1, 1.0f);
}

static void bytes_of(sdt_backend *be, const step_buffers *b, float *out)
{
    be->synchronize(be);
    be->download(be, out, b->p.data, N * sizeof(float));
    be->download(be, out + N, b->m.data, N * sizeof(float));
    be->download(be, out + 2 * N, b->v.data, N * sizeof(float));
    be->download(be, out + 3 * N, b->xt.data, N * sizeof(float));
}

static void check_replay_equals_uncaptured(sdt_backend *gpu)
{
    step_buffers plain = make(gpu), graph = make(gpu);
    float *want = malloc(4 * N * sizeof(float)), *got = malloc(4 * N * sizeof(float));
    float *before = malloc(4 * N * sizeof(float));
    bytes_of(gpu, &graph, before);
    bool captured = false;
    CHECK(gpu->capture_begin(gpu) == 0, "capture_begin failed: %s", gpu->error.message);
    CHECK(step_ops(gpu, &graph) == 0, "an op failed during the capture: %s", gpu->error.message);
    CHECK(gpu->capture_end(gpu, 0, &captured) == 0 && captured, "the capture did not hold: %s", gpu->error.message);
    bytes_of(gpu, &graph, got);
    CHECK(memcmp(got, before, 4 * N * sizeof(float)) == 0, "recorded work ran during the capture");
    for (int step = 1; step <= 3; step++) {
        CHECK(step_ops(gpu, &plain) == 0, "uncaptured step %d failed: %s", step, gpu->error.message);
        CHECK(gpu->replay(gpu, 0) == 0, "replay %d failed: %s", step, gpu->error.message);
        bytes_of(gpu, &plain, want);
        bytes_of(gpu, &graph, got);
        CHECK(memcmp(got, want, 4 * N * sizeof(float)) == 0, "step %d: replay and uncaptured run differ", step);
    }
    CHECK(memcmp(got, before, 4 * N * sizeof(float)) != 0,
          "the steps changed nothing (the test would not see a difference)");
    free(want), free(got), free(before);
    release(gpu, &plain), release(gpu, &graph);
}

/* One op that needs the host, called during a capture: refused, the capture spoiled, nothing lost. */
static void check_spoiled(sdt_backend *gpu, const char *what, int which)
{
    step_buffers b = make(gpu);
    float host[4] = {0};
    bool captured = true;
    CHECK(gpu->capture_begin(gpu) == 0, "%s: capture_begin failed: %s", what, gpu->error.message);
    int rc = gpu->scale(gpu, &b.p, 2.0f);
    void *fresh = NULL;
    if (which == 0) rc |= gpu->download(gpu, host, b.p.data, sizeof host) ? 1 : 0;
    if (which == 1) rc |= gpu->upload(gpu, b.p.data, host, sizeof host) ? 1 : 0;
    if (which == 2) rc |= (fresh = gpu->alloc(gpu, 1024)) == NULL ? 1 : 0;
    if (which == 3) rc |= gpu->synchronize(gpu) ? 1 : 0;
    CHECK(rc == 1 && strstr(gpu->error.message, what) && strstr(gpu->error.message, "captured step"),
          "%s during a capture: rc %d, error \"%s\"", what, rc, gpu->error.message);
    CHECK(gpu->capture_end(gpu, 0, &captured) == 0 && !captured, "%s: the spoiled capture was kept", what);
    CHECK(gpu->error.message[0] == '\0', "%s: the spoiled capture's error was not cleared: %s", what,
          gpu->error.message);
    if (fresh) gpu->free(gpu, fresh);
    /* the stream works on: the scale that was recorded, not run, runs now */
    float p0[N], p1[N];
    gpu->synchronize(gpu);
    CHECK(gpu->download(gpu, p0, b.p.data, sizeof p0) == 0 && gpu->scale(gpu, &b.p, 2.0f) == 0 &&
              gpu->synchronize(gpu) == 0 && gpu->download(gpu, p1, b.p.data, sizeof p1) == 0,
          "%s: the backend does not work after a spoiled capture: %s", what, gpu->error.message);
    int wrong = 0;
    for (int i = 0; i < N; i++) wrong += p1[i] != 2.0f * p0[i];
    CHECK(wrong == 0, "%s: %d values not doubled after the spoiled capture", what, wrong);
    release(gpu, &b);
}

static void check_replace_and_drop(sdt_backend *gpu)
{
    step_buffers b = make(gpu);
    float p0[N], p1[N];
    bool captured = false;
    bytes_of(gpu, &b, p0); /* only p (the first N) is compared */
    CHECK(gpu->capture_begin(gpu) == 0 && step_ops(gpu, &b) == 0 && gpu->capture_end(gpu, 0, &captured) == 0 &&
              captured,
          "first capture: %s", gpu->error.message);
    CHECK(gpu->capture_begin(gpu) == 0 && gpu->scale(gpu, &b.p, 2.0f) == 0 &&
              gpu->capture_end(gpu, 0, &captured) == 0 && captured,
          "second capture: %s", gpu->error.message);
    CHECK(gpu->replay(gpu, 0) == 0, "replay: %s", gpu->error.message);
    gpu->synchronize(gpu);
    gpu->download(gpu, p1, b.p.data, sizeof p1);
    int wrong = 0;
    for (int i = 0; i < N; i++) wrong += p1[i] != 2.0f * p0[i];
    CHECK(wrong == 0, "the second capture did not replace the first (%d values)", wrong);
    /* a graph in slot 1 beside slot 0's: each replays its own */
    CHECK(gpu->capture_begin(gpu) == 0 && gpu->scale(gpu, &b.p, 0.5f) == 0 &&
              gpu->capture_end(gpu, 1, &captured) == 0 && captured,
          "capture into slot 1: %s", gpu->error.message);
    CHECK(gpu->replay(gpu, 1) == 0 && gpu->replay(gpu, 0) == 0 && gpu->replay(gpu, 0) == 0, "replays: %s",
          gpu->error.message);
    gpu->synchronize(gpu);
    gpu->download(gpu, p1, b.p.data, sizeof p1);
    wrong = 0;
    for (int i = 0; i < N; i++) wrong += p1[i] != 4.0f * p0[i]; /* x2, x0.5, x2, x2 */
    CHECK(wrong == 0, "slots 0 and 1 did not each replay their own graph (%d values)", wrong);
    gpu->drop_capture(gpu, 0);
    CHECK(gpu->replay(gpu, 0) != 0 && strstr(gpu->error.message, "no captured step"),
          "a replay after drop_capture must be refused, got \"%s\"", gpu->error.message);
    CHECK(gpu->replay(gpu, 1) == 0, "dropping slot 0 kept slot 1: %s", gpu->error.message);
    float one = 1.0f;
    void *scrap = gpu->alloc(gpu, sizeof one);
    gpu->free(gpu, scrap); /* freeing device memory forgets every graph */
    CHECK(gpu->replay(gpu, 1) != 0, "a graph outlived a free");
    release(gpu, &b);
}

int main(void)
{
    sdt_backend *cpu = sdt_backend_cpu_create(1);
    CHECK(!cpu->capture_begin && !cpu->capture_end && !cpu->replay && !cpu->drop_capture,
          "the CPU backend must have no capture entries");
    cpu->destroy(cpu);
    sdt_backend *gpu = gpu_test_backend("step_graph");
    if (!gpu) return SDT_TEST_SKIP;
    printf("step_graph: fixed inputs, %d values\n", N);
    check_replay_equals_uncaptured(gpu);
    check_spoiled(gpu, "a read-back", 0);
    check_spoiled(gpu, "an upload", 1);
    check_spoiled(gpu, "an allocation", 2);
    check_spoiled(gpu, "a synchronisation", 3);
    check_replace_and_drop(gpu);
    gpu->destroy(gpu);
    return sdt_test_finish("step_graph");
}
