/* test_dit_act_dtype.c - the diffusion transformers (SD3.5's MMDiT with MMDiT-X blocks, Flux's double and single
 * blocks) with 16-bit activations (mmdit_inputs / flux_inputs.act_dtype), on tiny random models with bf16 weights,
 * as a --precision bf16 or fp16 run has them: the prediction and the gradients to the context and the pooled vector
 * stay within a stated tolerance of the f32-activation pass (relative L2 error: bf16 5%, fp16 1%, a few times what
 * the tiny models show); gradient checkpointing gives the same bits as the plain 16-bit pass; the measuring
 * arena's peak is what a real 16-bit step reaches (Flux's less its cached RoPE tables) and is well under the f32
 * pass's (the activations are stored in 16 bits); an activation dtype that is no float is refused by name. */
#include <math.h>

#include "dit_test_fixture.h"
#include "flux_gen.h"
#include "mmdit_gen.h"

/* ||a - b|| / ||a||, with every value of b finite. */
static double rel_l2(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(b[i])) return INFINITY;
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)a[i] * a[i];
    }
    return den > 0 ? sqrt(num / den) : INFINITY;
}

static void check_model(dit_model_ref mr, sdt_backend *be, sdt_test_rng *rng, const char *tag)
{
    dit_problem p = dit_problem_new(mr, rng);
    /* the reference: f32 activations on the same bf16 weights and the same (bf16-rounded) inputs */
    for (size_t i = 0; i < p.n_out; i++) p.latent[i] = sdt_round_to_dtype(p.latent[i], SDT_BF16);
    for (size_t i = 0; i < p.nc; i++) p.ctx[i] = sdt_round_to_dtype(p.ctx[i], SDT_BF16);
    for (size_t i = 0; i < p.np; i++) p.pooled[i] = sdt_round_to_dtype(p.pooled[i], SDT_BF16);
    dit_step_result ref;
    if (!dit_run_step(mr, be, &p, SDT_F32, false, &ref)) {
        dit_result_free(&ref), dit_problem_free(&p);
        return;
    }
    const sdt_dtype dts[2] = {SDT_BF16, SDT_F16};
    const double tol[2] = {0.05, 0.01};
    const size_t rope = dit_cached_rope_bytes(mr);
    for (int d = 0; d < 2; d++) {
        dit_step_result plain, ckpt;
        if (!dit_run_step(mr, be, &p, dts[d], false, &plain)) {
            dit_result_free(&plain);
            continue;
        }
        if (dit_run_step(mr, be, &p, dts[d], true, &ckpt)) {
            CHECK(!memcmp(plain.out, ckpt.out, sizeof(float) * p.n_out) &&
                      !memcmp(plain.dctx, ckpt.dctx, sizeof(float) * p.nc) &&
                      !memcmp(plain.dpooled, ckpt.dpooled, sizeof(float) * p.np),
                  "%s %s: checkpointing changed the output or the gradients", tag, sdt_dtype_name(dts[d]));
            CHECK(ckpt.real_peak + rope == ckpt.measured, "%s %s, checkpointing: real peak %zu + %zu, measured %zu",
                  tag, sdt_dtype_name(dts[d]), ckpt.real_peak, rope, ckpt.measured);
        }
        dit_result_free(&ckpt);
        const double eo = rel_l2(ref.out, plain.out, p.n_out), ec = rel_l2(ref.dctx, plain.dctx, p.nc),
                     ep = rel_l2(ref.dpooled, plain.dpooled, p.np);
        printf("%s %s: relative error out %.2e, dcontext %.2e, dpooled %.2e (tolerance %.0e); peak %zu bytes, f32 "
               "%zu\n",
               tag, sdt_dtype_name(dts[d]), eo, ec, ep, tol[d], plain.measured, ref.measured);
        CHECK(eo <= tol[d] && ec <= tol[d] && ep <= tol[d],
              "%s %s: the 16-bit pass is off the f32 one (out %.3g, dcontext %.3g, dpooled %.3g; tolerance %.3g)", tag,
              sdt_dtype_name(dts[d]), eo, ec, ep, tol[d]);
        CHECK(plain.real_peak + rope == plain.measured, "%s %s: real peak %zu + %zu, measured %zu", tag,
              sdt_dtype_name(dts[d]), plain.real_peak, rope, plain.measured);
        CHECK(plain.measured * 10 < ref.measured * 7, "%s %s: the 16-bit pass peaks at %zu bytes, the f32 one at %zu",
              tag, sdt_dtype_name(dts[d]), plain.measured, ref.measured);
        dit_result_free(&plain);
    }
    dit_result_free(&ref);
    dit_problem_free(&p);
}

/* An activation dtype that is not a float one: refused with a sentence naming it, nothing run. */
static void check_refusal(dit_model_ref mr, sdt_backend *be)
{
    const int C = mr.mmdit ? mr.mmdit->cfg.in_channels : mr.flux->cfg.in_channels,
              cd = mr.mmdit ? mr.mmdit->cfg.context_dim : mr.flux->cfg.context_dim,
              pd = mr.mmdit ? mr.mmdit->cfg.pooled_dim : mr.flux->cfg.pooled_dim;
    float *lat = calloc((size_t)DIT_B * C * DIT_LH * DIT_LW, sizeof(float)),
          *ctx = calloc((size_t)DIT_B * DIT_T * cd, sizeof(float)), *pool = calloc((size_t)DIT_B * pd, sizeof(float));
    sdt_tensor tl = mt_tensor(lat, SDT_F32, 4, DIT_B, C, DIT_LH, DIT_LW),
               tc = mt_tensor(ctx, SDT_F32, 3, DIT_B, DIT_T, cd, 0), tp = mt_tensor(pool, SDT_F32, 2, DIT_B, pd, 0, 0);
    float ts[DIT_B] = {0.5f, 0.5f};
    static mmdit_acts ma;
    static flux_acts fa;
    mmdit_inputs mi = {&tl, ts, &tc, &tp, false, SDT_I32};
    flux_inputs fi = {&tl, ts, ts, &tc, &tp, false, SDT_I32};
    sdt_arena measure;
    sdt_arena_init_measure(&measure, be);
    sdt_error err = {0};
    bool ok = mr.mmdit ? mmdit_forward(mr.mmdit, be, &measure, &mi, &ma, &err)
                       : flux_forward(mr.flux, be, &measure, &fi, &fa, &err);
    CHECK(!ok && err.code == SDT_ERR_INVALID_ARGUMENT && strstr(err.message, "activation dtype") &&
              strstr(err.message, "bf16"),
          "an i32 activation dtype must be refused by name: %s", err.message);
    free(lat), free(ctx), free(pool);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("dit_act_dtype");
    sdt_backend *be = mt_backend();
    char path[512];
    sdt_error err = {0};
    mt_temp_path(path, sizeof path, "dit-dtype-mmdit");
    mmdit_config mc = mmdit_config_tiny();
    mc.dual_layers = 2; /* MMDiT-X then a plain block, the last one's text stream context_pre_only */
    CHECK(mmdit_generate(path, &mc, SDT_BF16, 21, true, &err), "generate: %s", err.message);
    sdt_weights *w = sdt_weights_open(path, &err);
    static mmdit_model mm;
    CHECK(w && mmdit_load(&mm, &mc, w, &err), "load: %s", err.message);
    if (w) {
        check_model((dit_model_ref){&mm, NULL}, be, &rng, "SD3.5 tiny (MMDiT-X)");
        check_refusal((dit_model_ref){&mm, NULL}, be);
        sdt_weights_close(w);
    }
    unlink(path);
    mt_temp_path(path, sizeof path, "dit-dtype-flux");
    flux_config fc = flux_config_tiny();
    fc.double_layers = 2, fc.single_layers = 2;
    CHECK(flux_generate(path, &fc, SDT_BF16, 22, true, &err), "generate: %s", err.message);
    w = sdt_weights_open(path, &err);
    static flux_model fm;
    CHECK(w && flux_load(&fm, &fc, w, &err), "load: %s", err.message);
    if (w) {
        check_model((dit_model_ref){NULL, &fm}, be, &rng, "Flux tiny");
        check_refusal((dit_model_ref){NULL, &fm}, be);
        flux_free(&fm);
        sdt_weights_close(w);
    }
    unlink(path);
    be->destroy(be);
    return sdt_test_finish("dit_act_dtype");
}
