/* test_dit_checkpointing.c - gradient checkpointing in the diffusion transformers (SD3's MMDiT with MMDiT-X
 * blocks, Flux's double and single blocks) on tiny random models: the output and the gradients to the context and
 * the pooled vector are bit-identical with and without it (backward's recompute is the same ops on the same kept
 * inputs); the measuring arena's peak is exactly what a real forward and backward reach (Flux's less the RoPE
 * tables a real forward finds cached on the model), and an arena of that size is enough; and at a depth where it matters the checkpointed peak is below the plain one. */
#include <math.h>

#include "dit_test_fixture.h"
#include "flux_gen.h"
#include "mmdit_gen.h"

/* Plain against checkpointed: the same bits, the measured peak reached exactly; returns the two peaks. */
static void compare(dit_model_ref mr, sdt_backend *be, sdt_test_rng *rng, const char *tag, size_t *plain_peak,
                    size_t *ckpt_peak)
{
    dit_problem p = dit_problem_new(mr, rng);
    dit_step_result a, b;
    const bool plain_ran = dit_run_step(mr, be, &p, SDT_F32, false, &a),
               ckpt_ran = dit_run_step(mr, be, &p, SDT_F32, true, &b);
    *plain_peak = a.measured, *ckpt_peak = b.measured;
    if (plain_ran && ckpt_ran) {
        double gmax = 0;
        for (size_t i = 0; i < p.nc; i++) gmax = fmax(gmax, fabs(a.dctx[i]));
        CHECK(gmax > 0, "%s: the context gradient is all zero", tag);
        CHECK(!memcmp(a.out, b.out, sizeof(float) * p.n_out), "%s: the output differs with checkpointing", tag);
        CHECK(!memcmp(a.dctx, b.dctx, sizeof(float) * p.nc), "%s: the context gradient differs with checkpointing",
              tag);
        CHECK(!memcmp(a.dpooled, b.dpooled, sizeof(float) * p.np), "%s: the pooled gradient differs with checkpointing",
              tag);
        const size_t rope = dit_cached_rope_bytes(mr);
        CHECK(a.real_peak + rope == a.measured && b.real_peak + rope == b.measured,
              "%s: a real step's peak must be the measured one less %zu bytes of cached RoPE tables (plain %zu of %zu, "
              "checkpointing %zu of %zu)",
              tag, rope, a.real_peak, a.measured, b.real_peak, b.measured);
        printf("%s: bit-identical; peak %zu bytes plain, %zu with checkpointing\n", tag, a.measured, b.measured);
    }
    dit_result_free(&a), dit_result_free(&b);
    dit_problem_free(&p);
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
        compare((dit_model_ref){&m, NULL}, be, rng, tag, &plain, &ckpt);
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
        compare((dit_model_ref){NULL, &m}, be, rng, tag, &plain, &ckpt);
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
