/* test_flux_rope_cache.c - the Flux transformer's RoPE tables, cached on the model per (text length, packed grid):
 * a second forward of a shape builds no table and gives the same output and gradients, bit for bit, as the
 * uncached path (a model without a cache builds its tables in the forward's arena); other shapes get their own
 * entries; past FLUX_ROPE_SHAPES shapes a forward still runs, uncached; flux_free releases the cache. */
#include "flux.h"
#include "flux_gen.h"
#include "model_test_util.h"

enum { C = 4, CTX = 24, POOLED = 12 }; /* flux_config_tiny's */

typedef struct result {
    float out[C * 8 * 8], dctx[32 * CTX], dpooled[POOLED];
} result;

/* Forward and backward of batch 1 with T text tokens and an h x w latent (inputs from a fixed seed). */
static bool run(const flux_model *m, sdt_backend *be, int T, int h, int w, result *r)
{
    sdt_test_rng rng = {11};
    float latent[C * 8 * 8], ctx[32 * CTX], pooled[POOLED], dout[C * 8 * 8], ts[1] = {0.4f}, gs[1] = {3.5f};
    sdt_test_fill_normal(&rng, latent, C * h * w, 1.0);
    sdt_test_fill_normal(&rng, ctx, T * CTX, 1.0);
    sdt_test_fill_normal(&rng, pooled, POOLED, 1.0);
    sdt_test_fill_normal(&rng, dout, C * h * w, 1.0);
    memset(r, 0, sizeof *r);
    sdt_tensor tl = mt_tensor(latent, SDT_F32, 4, 1, C, h, w), tc = mt_tensor(ctx, SDT_F32, 3, 1, T, CTX, 0),
               tp = mt_tensor(pooled, SDT_F32, 2, 1, POOLED, 0, 0), td = mt_tensor(dout, SDT_F32, 4, 1, C, h, w),
               tdc = mt_tensor(r->dctx, SDT_F32, 3, 1, T, CTX, 0),
               tdp = mt_tensor(r->dpooled, SDT_F32, 2, 1, POOLED, 0, 0);
    flux_inputs in = {&tl, ts, gs, &tc, &tp, false, SDT_F32};
    static flux_acts acts;
    sdt_arena measure, arena;
    sdt_error err = {0};
    sdt_arena_init_measure(&measure, be);
    bool ok =
        flux_forward(m, be, &measure, &in, &acts, &err) && flux_backward(m, be, &measure, &acts, &td, &tdc, &tdp, &err);
    CHECK(ok, "measuring: %s", err.message);
    if (!ok || !sdt_arena_init(&arena, be, measure.peak)) return false;
    ok = flux_forward(m, be, &arena, &in, &acts, &err);
    CHECK(ok, "forward (T %d, %d x %d): %s", T, h, w, err.message);
    if (ok) {
        memcpy(r->out, acts.out.data, sizeof(float) * C * h * w);
        ok = flux_backward(m, be, &arena, &acts, &td, &tdc, &tdp, &err);
        CHECK(ok, "backward (T %d, %d x %d): %s", T, h, w, err.message);
    }
    sdt_arena_release(&arena);
    return ok;
}

static void same(const result *a, const result *b, const char *what)
{
    CHECK(!memcmp(a, b, sizeof *a), "%s: the output or gradients differ from the uncached forward's", what);
}

int main(void)
{
    sdt_backend *be = mt_backend();
    flux_config cfg = flux_config_tiny();
    char path[512];
    mt_temp_path(path, sizeof path, "flux-rope");
    sdt_error err = {0};
    CHECK(flux_generate(path, &cfg, SDT_F32, 3, true, &err), "generate: %s", err.message);
    sdt_weights *w = sdt_weights_open(path, &err);
    static flux_model m, plain;
    CHECK(w && flux_load(&m, &cfg, w, &err) && m.rope && m.rope->n == 0, "load: %s", err.message);
    if (!m.rope) return 1;
    plain = m;
    plain.rope = NULL; /* the uncached path: tables built in the forward's arena */
    static result first, again, ref;

    CHECK(run(&m, be, 3, 4, 6, &first) && m.rope->builds == 1 && m.rope->n == 1, "first shape: %d builds, %d shapes",
          m.rope->builds, m.rope->n);
    const void *cos_data = m.rope->entry[0].cos.data;
    sdt_memory_stats before, after;
    CHECK(be->memory_stats(be, &before, false) == 0, "memory stats");
    CHECK(run(&m, be, 3, 4, 6, &again) && m.rope->builds == 1 && m.rope->n == 1 &&
              m.rope->entry[0].cos.data == cos_data,
          "a second forward of the shape must build no table (%d builds)", m.rope->builds);
    CHECK(be->memory_stats(be, &after, false) == 0 && after.allocated_bytes == before.allocated_bytes,
          "a second forward of the shape must keep no new memory (%zu -> %zu bytes)", before.allocated_bytes,
          after.allocated_bytes);
    same(&first, &again, "the cached shape's second forward");
    CHECK(run(&plain, be, 3, 4, 6, &ref), "uncached forward");
    same(&first, &ref, "the cached forward");

    /* another text length and another grid: entries of their own, each matching the uncached path */
    static const int shapes[2][3] = {{5, 4, 6}, {3, 8, 4}};
    for (int i = 0; i < 2; i++) {
        const int *s = shapes[i];
        CHECK(run(&m, be, s[0], s[1], s[2], &first) && run(&plain, be, s[0], s[1], s[2], &ref) &&
                  m.rope->builds == 2 + i && m.rope->n == 2 + i,
              "shape T %d %d x %d: %d builds, %d shapes", s[0], s[1], s[2], m.rope->builds, m.rope->n);
        same(&first, &ref, "another shape");
    }
    CHECK(run(&m, be, 3, 4, 6, &again) && m.rope->builds == 3, "the first shape again: %d builds", m.rope->builds);
    run(&plain, be, 3, 4, 6, &ref);
    same(&again, &ref, "the first shape, cached among others");

    /* the cache full: a new shape runs uncached, with the same result */
    for (int T = 6; m.rope->n < FLUX_ROPE_SHAPES; T++) CHECK(run(&m, be, T, 2, 2, &first), "filling, T %d", T);
    const int builds = m.rope->builds;
    CHECK(run(&m, be, 30, 2, 2, &first) && run(&plain, be, 30, 2, 2, &ref) && m.rope->builds == builds &&
              m.rope->n == FLUX_ROPE_SHAPES,
          "a shape past a full cache must run uncached");
    same(&first, &ref, "past a full cache");
    printf("rope cache: %d shapes, %d builds\n", m.rope->n, m.rope->builds);

    flux_free(&m);
    CHECK(m.rope == NULL, "flux_free must release the cache");
    flux_free(&m); /* again: nothing to do */
    sdt_weights_close(w);
    unlink(path);
    be->destroy(be);
    return sdt_test_finish("flux_rope_cache");
}
