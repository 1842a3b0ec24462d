/* test_flux.c - the Flux.1 transformer on a tiny random model (every parameter perturbed): config detection
 * round trip, the output's shape, the gradients to the context and the pooled projection against central
 * differences of the C forward (directional, and per element for the context) for dev (guidance) and schnell
 * kinds, the measuring arena's size being enough, the inputs refused (odd latent, no guidance for dev), and the
 * loader's sentences for a missing and a misshaped tensor, and BFL's original layout loading as the same model. Torch parity:
 * tests/parity/flux_parity.py. */
#include <math.h>

#include "flux.h"
#include "flux_gen.h"
#include "cond_grad_check.h"
#include "model_test_util.h"
#include "safetensors.h"
#include "transformer_keys.h"
#include "transformer_pack.h"

enum { B = 2, T = 3, LH = 4, LW = 6 };

typedef struct run_ctx {
    const flux_model *m;
    sdt_backend *be;
    const float *latent, *timesteps, *guidance, *dout; /* dout [B, C, LH, LW] */
} run_ctx;

/* loss = sum(dout * out) (double accumulation); gradients written when dctx / dpooled are given. */
static double run_loss(const run_ctx *c, const float *ctx, const float *pooled, float *dctx, float *dpooled)
{
    const flux_config *cfg = &c->m->cfg;
    const int64_t C = cfg->in_channels, n_out = (int64_t)B * C * LH * LW;
    sdt_tensor tl = mt_tensor((void *)c->latent, SDT_F32, 4, B, C, LH, LW);
    sdt_tensor tc = mt_tensor((void *)ctx, SDT_F32, 3, B, T, cfg->context_dim, 0);
    sdt_tensor tp = mt_tensor((void *)pooled, SDT_F32, 2, B, cfg->pooled_dim, 0, 0);
    sdt_tensor td = mt_tensor((void *)c->dout, SDT_F32, 4, B, C, LH, LW);
    sdt_tensor tdc = mt_tensor(dctx, SDT_F32, 3, B, T, cfg->context_dim, 0);
    sdt_tensor tdp = mt_tensor(dpooled, SDT_F32, 2, B, cfg->pooled_dim, 0, 0);
    flux_inputs in = {&tl, c->timesteps, c->guidance, &tc, &tp, false, SDT_F32};
    static flux_acts acts;
    sdt_arena measure, arena;
    sdt_error err = {0};
    sdt_arena_init_measure(&measure, c->be);
    bool ok = flux_forward(c->m, c->be, &measure, &in, &acts, &err) &&
              flux_backward(c->m, c->be, &measure, &acts, &td, &tdc, &tdp, &err);
    CHECK(ok, "measuring failed: %s", err.message);
    /* exactly the measured peak must be enough */
    CHECK(sdt_arena_init(&arena, c->be, measure.peak), "arena of %zu bytes", measure.peak);
    ok = flux_forward(c->m, c->be, &arena, &in, &acts, &err);
    CHECK(ok, "forward failed: %s", err.message);
    double loss = 0;
    if (ok) {
        const float *out = acts.out.data;
        for (int64_t i = 0; i < n_out; i++) loss += (double)c->dout[i] * out[i];
        if (dctx) {
            memset(dctx, 0, sizeof(float) * (size_t)B * T * cfg->context_dim);
            memset(dpooled, 0, sizeof(float) * (size_t)B * cfg->pooled_dim);
            CHECK(flux_backward(c->m, c->be, &arena, &acts, &td, &tdc, &tdp, &err), "backward failed: %s", err.message);
        }
    }
    sdt_arena_release(&arena);
    return loss;
}

static double loss_of(const void *c, const float *ctx, const float *pooled, float *dctx, float *dpooled)
{
    return run_loss(c, ctx, pooled, dctx, dpooled);
}

static void check_gradients(const run_ctx *c, sdt_test_rng *rng)
{
    cond_grad_check(loss_of, c, rng, B * T * c->m->cfg.context_dim, B * c->m->cfg.pooled_dim);
}

static void check_refusals(const sdt_weights *w, const flux_config *cfg, void (*bfl_check)(const flux_model *, void *),
                           void *bfl_arg)
{
    char path[512];
    sdt_error err = {0};
    static flux_model m;
    flux_config got;
    /* a missing tensor */
    mt_temp_path(path, sizeof path, "flux-missing");
    mt_copy_without(w, path, "single_transformer_blocks.1.attn.norm_k.weight", NULL, NULL, 0);
    sdt_weights *mw = sdt_weights_open(path, &err);
    CHECK(mw != NULL, "open: %s", err.message);
    if (mw) {
        CHECK(flux_config_detect(mw, "", &got, &err) && !flux_load(&m, &got, mw, &err) &&
                  strstr(err.message, "single_transformer_blocks.1.attn.norm_k.weight") && strstr(err.message, path) &&
                  strstr(err.message, "Flux"),
              "a missing norm_k must be named with the file: \"%s\"", err.message);
        printf("missing: %s\n", err.message);
        sdt_weights_close(mw);
    }
    unlink(path);
    /* a misshaped tensor: the config's MLP one step wider than the file's */
    flux_config wide = *cfg;
    wide.mlp_ratio++;
    CHECK(!flux_load(&m, &wide, w, &err) && strstr(err.message, "transformer_blocks.0.ff.net.0.proj.weight"),
          "a misshaped ff.net.0.proj must be named: \"%s\"", err.message);
    printf("misshaped: %s\n", err.message);
    /* RoPE axes that do not sum to the head width */
    flux_config axes = *cfg;
    axes.axes_dim[0] += 2;
    CHECK(!flux_load(&m, &axes, w, &err) && strstr(err.message, "RoPE axes"), "bad axes must be refused: \"%s\"",
          err.message);
    /* BFL's original layout, as transformer_pack writes it, opens in diffusers' names under model.diffusion_model.
     * and gives the same model */
    mt_temp_path(path, sizeof path, "flux-bfl");
    CHECK(sdt_pack_write(path, SDT_TK_BFL_FLUX, w, "", "", NULL, 0, SDT_PACK_AS_IS, &err), "pack: %s", err.message);
    mw = sdt_weights_open(path, &err);
    CHECK(mw && flux_config_detect(mw, SDT_TK_TRANSFORMER_PREFIX, &got, &err) &&
              got.double_layers == cfg->double_layers && got.single_layers == cfg->single_layers &&
              got.guidance == cfg->guidance && flux_load(&m, &got, mw, &err),
          "BFL's layout must load as the same model: \"%s\"", err.message);
    if (mw && bfl_check) bfl_check(&m, bfl_arg);
    flux_free(&m);
    if (mw) sdt_weights_close(mw);
    unlink(path);
    /* no transformer under a prefix */
    CHECK(!flux_config_detect(w, "model.diffusion_model.", &got, &err) &&
              strstr(err.message, "model.diffusion_model.context_embedder.weight"),
          "a missing transformer must name the key it looked for: \"%s\"", err.message);
}

typedef struct same_model {
    run_ctx base;
    const float *ctx, *pooled;
    double loss;
} same_model;

static void same_loss(const flux_model *m, void *arg)
{
    same_model *s = arg;
    run_ctx c = s->base;
    c.m = m;
    double loss = run_loss(&c, s->ctx, s->pooled, NULL, NULL);
    CHECK(loss == s->loss, "the BFL-layout model's output differs (loss %.9g, diffusers' names %.9g)", loss, s->loss);
}

static void check_model(sdt_backend *be, sdt_test_rng *rng, const flux_config *cfg, const char *tag, bool refusals)
{
    char path[512];
    mt_temp_path(path, sizeof path, tag);
    sdt_error err = {0};
    CHECK(flux_generate(path, cfg, SDT_F32, 7, true, &err), "generate: %s", err.message);
    sdt_weights *w = sdt_weights_open(path, &err);
    CHECK(w != NULL, "open: %s", err.message);
    if (!w) return;
    flux_config det;
    CHECK(flux_config_detect(w, "", &det, &err), "detect: %s", err.message);
    CHECK(det.double_layers == cfg->double_layers && det.single_layers == cfg->single_layers &&
              det.heads == cfg->heads && det.head_dim == cfg->head_dim && det.in_channels == cfg->in_channels &&
              det.context_dim == cfg->context_dim && det.pooled_dim == cfg->pooled_dim &&
              det.mlp_ratio == cfg->mlp_ratio && det.guidance == cfg->guidance &&
              !memcmp(det.axes_dim, cfg->axes_dim, sizeof det.axes_dim),
          "%s: detected %d + %d blocks heads %d x %d channels %d context %d pooled %d mlp %d guidance %d axes (%d, %d, "
          "%d)",
          tag, det.double_layers, det.single_layers, det.heads, det.head_dim, det.in_channels, det.context_dim,
          det.pooled_dim, det.mlp_ratio, det.guidance, det.axes_dim[0], det.axes_dim[1], det.axes_dim[2]);
    static flux_model m;
    CHECK(flux_load(&m, &det, w, &err), "load: %s", err.message);
    const int64_t C = cfg->in_channels, n_lat = (int64_t)B * C * LH * LW;
    float *latent = mt_alloc(sizeof(float) * n_lat), *dout = mt_alloc(sizeof(float) * n_lat);
    sdt_test_fill_normal(rng, latent, n_lat, 1.0);
    sdt_test_fill_normal(rng, dout, n_lat, 1.0);
    float ts[B] = {0.25f, 0.8f}, gs[B] = {3.5f, 1.0f};
    run_ctx c = {&m, be, latent, ts, cfg->guidance ? gs : NULL, dout};
    printf("%s:\n", tag);
    check_gradients(&c, rng);
    /* the inputs refused: an odd latent side, and no guidance for dev */
    float ctx[T * 24] = {0}, pooled[12] = {0};
    sdt_tensor tl = mt_tensor(latent, SDT_F32, 4, 1, C, 3, 4), tc = mt_tensor(ctx, SDT_F32, 3, 1, T, 24, 0),
               tp = mt_tensor(pooled, SDT_F32, 2, 1, 12, 0, 0);
    flux_inputs in = {&tl, ts, gs, &tc, &tp, false, SDT_F32};
    static flux_acts acts;
    sdt_arena measure;
    sdt_arena_init_measure(&measure, be);
    CHECK(!flux_forward(&m, be, &measure, &in, &acts, &err) && strstr(err.message, "3 x 4") &&
              strstr(err.message, "even"),
          "an odd latent must be refused: \"%s\"", err.message);
    if (cfg->guidance) {
        tl = mt_tensor(latent, SDT_F32, 4, 1, C, 4, 4);
        in.guidance = NULL;
        CHECK(!flux_forward(&m, be, &measure, &in, &acts, &err) && strstr(err.message, "guidance"),
              "dev without guidance must be refused: \"%s\"", err.message);
    }
    if (refusals) {
        const int nc = B * T * cfg->context_dim, np = B * cfg->pooled_dim;
        float *ctxv = mt_alloc(sizeof(float) * nc), *poolv = mt_alloc(sizeof(float) * np);
        sdt_test_fill_normal(rng, ctxv, nc, 1.0);
        sdt_test_fill_normal(rng, poolv, np, 1.0);
        same_model sm = {c, ctxv, poolv, run_loss(&c, ctxv, poolv, NULL, NULL)};
        static flux_model saved;
        saved = m; /* check_refusals loads into its own model; keep ours for the comparison */
        sm.base.m = &saved;
        check_refusals(w, cfg, same_loss, &sm);
        free(ctxv), free(poolv);
    }
    flux_free(&m);
    sdt_weights_close(w);
    unlink(path);
    free(latent), free(dout);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("flux");
    sdt_backend *be = mt_backend();
    flux_config cfg = flux_config_tiny();
    check_model(be, &rng, &cfg, "flux-tiny-dev", true);
    flux_config schnell = cfg;
    schnell.guidance = false;
    schnell.double_layers = 1;
    schnell.single_layers = 1;
    check_model(be, &rng, &schnell, "flux-tiny-schnell", false);
    /* the big presets are valid and their axes are Flux's */
    flux_config dev = flux_config_dev();
    sdt_error err = {0};
    CHECK(flux_config_check(&dev, &err) && dev.axes_dim[0] == 16 && dev.axes_dim[1] == 56 &&
              dev.heads * dev.head_dim == 3072,
          "the dev preset: %s", err.message);
    be->destroy(be);
    return sdt_test_finish("flux");
}
