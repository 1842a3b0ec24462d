/* test_dit_checkpointing.c - gradient checkpointing in the diffusion transformers (SD3's MMDiT with MMDiT-X
 * blocks, Flux's double and single blocks) on tiny random models: the output and the gradients to the context and
 * the pooled vector are bit-identical with and without it (backward's recompute is the same ops on the same kept
 * inputs); the measuring arena's peak is exactly what a real forward and backward reach (Flux's less the RoPE
 * tables a real forward finds cached on the model), and an arena of that size is enough; and at a depth where it matters the checkpointed peak is below the plain one. */
#include <math.h>

#include "flux.h"
#include "flux_gen.h"
#include "mmdit.h"
#include "mmdit_gen.h"
#include "model_test_util.h"

enum { B = 2, T = 3, LH = 8, LW = 6 };

typedef struct step_result {
    float *out, *dctx, *dpooled;
    size_t measured, real_peak;
} step_result;

typedef struct model_ref {
    const mmdit_model *mmdit; /* one of the two */
    const flux_model *flux;
} model_ref;

static void free_result(step_result *r)
{
    free(r->out), free(r->dctx), free(r->dpooled);
}

/* A forward and backward from d(out) on an arena of exactly the measured peak. */
static step_result run_step(model_ref mr, sdt_backend *be, bool checkpointing, const float *latent, const float *ctx,
                            const float *pooled, const float *dout)
{
    const int C = mr.mmdit ? mr.mmdit->cfg.in_channels : mr.flux->cfg.in_channels,
              cd = mr.mmdit ? mr.mmdit->cfg.context_dim : mr.flux->cfg.context_dim,
              pd = mr.mmdit ? mr.mmdit->cfg.pooled_dim : mr.flux->cfg.pooled_dim;
    const size_t n_out = (size_t)B * C * LH * LW, nc = (size_t)B * T * cd, np = (size_t)B * pd;
    step_result r = {mt_alloc(sizeof(float) * n_out), mt_alloc(sizeof(float) * nc), mt_alloc(sizeof(float) * np), 0, 0};
    memset(r.dctx, 0, sizeof(float) * nc);
    memset(r.dpooled, 0, sizeof(float) * np);
    sdt_tensor tl = mt_tensor((void *)latent, SDT_F32, 4, B, C, LH, LW),
               tc = mt_tensor((void *)ctx, SDT_F32, 3, B, T, cd, 0),
               tp = mt_tensor((void *)pooled, SDT_F32, 2, B, pd, 0, 0),
               td = mt_tensor((void *)dout, SDT_F32, 4, B, C, LH, LW), tdc = mt_tensor(r.dctx, SDT_F32, 3, B, T, cd, 0),
               tdp = mt_tensor(r.dpooled, SDT_F32, 2, B, pd, 0, 0);
    float ts[B] = {0.25f, 0.8f}, ts1000[B] = {250.0f, 800.0f}, gs[B] = {3.5f, 1.0f};
    static mmdit_acts ma;
    static flux_acts fa;
    mmdit_inputs mi = {&tl, ts1000, &tc, &tp, checkpointing, SDT_F32};
    flux_inputs fi = {&tl, ts, gs, &tc, &tp, checkpointing, SDT_F32};
    sdt_error err = {0};
    sdt_arena measure, arena;
    sdt_arena_init_measure(&measure, be);
    bool ok = mr.mmdit ? mmdit_forward(mr.mmdit, be, &measure, &mi, &ma, &err) &&
                             mmdit_backward(mr.mmdit, be, &measure, &ma, &td, &tdc, &tdp, &err)
                       : flux_forward(mr.flux, be, &measure, &fi, &fa, &err) &&
                             flux_backward(mr.flux, be, &measure, &fa, &td, &tdc, &tdp, &err);
    CHECK(ok, "measuring failed: %s", err.message);
    r.measured = measure.peak;
    CHECK(sdt_arena_init(&arena, be, measure.peak), "arena of %zu bytes", measure.peak);
    ok = mr.mmdit ? mmdit_forward(mr.mmdit, be, &arena, &mi, &ma, &err) &&
                        mmdit_backward(mr.mmdit, be, &arena, &ma, &td, &tdc, &tdp, &err)
                  : flux_forward(mr.flux, be, &arena, &fi, &fa, &err) &&
                        flux_backward(mr.flux, be, &arena, &fa, &td, &tdc, &tdp, &err);
    CHECK(ok, "a real step on an arena of the measured peak failed: %s", err.message);
    if (ok) memcpy(r.out, mr.mmdit ? ma.out.data : fa.out.data, sizeof(float) * n_out);
    r.real_peak = arena.peak;
    sdt_arena_release(&arena);
    return r;
}

static void fill(sdt_test_rng *rng, float **p, size_t n)
{
    *p = mt_alloc(sizeof(float) * n);
    sdt_test_fill_normal(rng, *p, (int)n, 1.0);
}

/* Plain against checkpointed: the same bits, the measured peak reached exactly; returns the two peaks. */
static void compare(model_ref mr, sdt_backend *be, sdt_test_rng *rng, const char *tag, size_t *plain_peak,
                    size_t *ckpt_peak)
{
    const int C = mr.mmdit ? mr.mmdit->cfg.in_channels : mr.flux->cfg.in_channels,
              cd = mr.mmdit ? mr.mmdit->cfg.context_dim : mr.flux->cfg.context_dim,
              pd = mr.mmdit ? mr.mmdit->cfg.pooled_dim : mr.flux->cfg.pooled_dim;
    const size_t n_out = (size_t)B * C * LH * LW, nc = (size_t)B * T * cd, np = (size_t)B * pd;
    float *latent, *ctx, *pooled, *dout;
    fill(rng, &latent, n_out), fill(rng, &ctx, nc), fill(rng, &pooled, np), fill(rng, &dout, n_out);
    step_result a = run_step(mr, be, false, latent, ctx, pooled, dout);
    step_result b = run_step(mr, be, true, latent, ctx, pooled, dout);
    double gmax = 0;
    for (size_t i = 0; i < nc; i++) gmax = fmax(gmax, fabs(a.dctx[i]));
    CHECK(gmax > 0, "%s: the context gradient is all zero", tag);
    CHECK(!memcmp(a.out, b.out, sizeof(float) * n_out), "%s: the output differs with checkpointing", tag);
    CHECK(!memcmp(a.dctx, b.dctx, sizeof(float) * nc), "%s: the context gradient differs with checkpointing", tag);
    CHECK(!memcmp(a.dpooled, b.dpooled, sizeof(float) * np), "%s: the pooled gradient differs with checkpointing", tag);
    /* Flux measures its RoPE tables as if uncached; a real forward finds them on the model (two f32 [S, head_dim]) */
    size_t rope = 0;
    if (mr.flux) {
        const size_t table = (size_t)(T + (LH / 2) * (LW / 2)) * mr.flux->cfg.head_dim * sizeof(float);
        rope = 2 * ((table + 255) / 256 * 256); /* the arena's alignment */
    }
    CHECK(a.real_peak + rope == a.measured && b.real_peak + rope == b.measured,
          "%s: a real step's peak must be the measured one less %zu bytes of cached RoPE tables (plain %zu of %zu, "
          "checkpointing %zu of %zu)",
          tag, rope, a.real_peak, a.measured, b.real_peak, b.measured);
    printf("%s: bit-identical; peak %zu bytes plain, %zu with checkpointing\n", tag, a.measured, b.measured);
    *plain_peak = a.measured, *ckpt_peak = b.measured;
    free_result(&a), free_result(&b);
    free(latent), free(ctx), free(pooled), free(dout);
}

static void check_mmdit(sdt_backend *be, sdt_test_rng *rng, int layers, int dual, bool want_smaller)
{
    char path[512], tag[64];
    snprintf(tag, sizeof tag, "mmdit %d blocks, %d MMDiT-X", layers, dual);
    mt_temp_path(path, sizeof path, "dit-ckpt-mmdit");
    mmdit_config cfg = mmdit_config_tiny();
    cfg.layers = layers, cfg.dual_layers = dual;
    sdt_error err = {0};
    CHECK(mmdit_generate(path, &cfg, SDT_F32, 11, true, &err), "generate: %s", err.message);
    sdt_weights *w = sdt_weights_open(path, &err);
    static mmdit_model m;
    CHECK(w && mmdit_load(&m, &cfg, w, &err), "load: %s", err.message);
    if (w) {
        size_t plain, ckpt;
        compare((model_ref){&m, NULL}, be, rng, tag, &plain, &ckpt);
        if (want_smaller) CHECK(ckpt < plain, "%s: checkpointing peaks at %zu bytes, plain %zu", tag, ckpt, plain);
        sdt_weights_close(w);
    }
    unlink(path);
}

static void check_flux(sdt_backend *be, sdt_test_rng *rng, int doubles, int singles, bool want_smaller)
{
    char path[512], tag[64];
    snprintf(tag, sizeof tag, "flux %d + %d blocks", doubles, singles);
    mt_temp_path(path, sizeof path, "dit-ckpt-flux");
    flux_config cfg = flux_config_tiny();
    cfg.double_layers = doubles, cfg.single_layers = singles;
    sdt_error err = {0};
    CHECK(flux_generate(path, &cfg, SDT_F32, 12, true, &err), "generate: %s", err.message);
    sdt_weights *w = sdt_weights_open(path, &err);
    static flux_model m;
    CHECK(w && flux_load(&m, &cfg, w, &err), "load: %s", err.message);
    if (w) {
        size_t plain, ckpt;
        compare((model_ref){NULL, &m}, be, rng, tag, &plain, &ckpt);
        if (want_smaller) CHECK(ckpt < plain, "%s: checkpointing peaks at %zu bytes, plain %zu", tag, ckpt, plain);
        flux_free(&m);
        sdt_weights_close(w);
    }
    unlink(path);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("dit_checkpointing");
    sdt_backend *be = mt_backend();
    check_mmdit(be, &rng, 3, 2, false); /* MMDiT-X then plain blocks, the last one context_pre_only */
    check_mmdit(be, &rng, 1, 0, false); /* one block: the pre_only one alone */
    check_mmdit(be, &rng, 8, 0, true);
    check_flux(be, &rng, 2, 2, false);
    check_flux(be, &rng, 1, 0, false); /* no single blocks */
    check_flux(be, &rng, 0, 2, false); /* no double blocks */
    check_flux(be, &rng, 4, 6, true);
    be->destroy(be);
    return sdt_test_finish("dit_checkpointing");
}
