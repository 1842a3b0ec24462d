/* test_mmdit.c - the SD3 MMDiT on a tiny random model (every parameter perturbed): config detection, the
 * gradients to the context and the pooled projection against central differences of the C forward
 * (directional, and per element for the context) for a plain and an MMDiT-X (SD3.5 Medium's attn2) model,
 * the measuring arena's size being enough, the latent size refused past the position table, and the loader's
 * sentences for a missing and a misshaped tensor and an attn2 without its 9-chunk norm1 (Stability's original
 * layout is read through the weights layer: test_transformer_files). Torch parity: tests/parity/mmdit_parity.py. */
#include <math.h>

#include "mmdit.h"
#include "mmdit_gen.h"
#include "cond_grad_check.h"
#include "model_test_util.h"
#include "safetensors.h"

enum { B = 2, T = 3, LH = 4, LW = 6 };

typedef struct run_ctx {
    const mmdit_model *m;
    sdt_backend *be;
    const float *latent, *timesteps, *dout; /* dout [B, C, LH, LW] */
} run_ctx;

/* loss = sum(dout * out) (double accumulation); gradients written when dctx / dpooled are given. */
static double run_loss(const run_ctx *c, const float *ctx, const float *pooled, float *dctx, float *dpooled)
{
    const mmdit_config *cfg = &c->m->cfg;
    const int64_t C = cfg->in_channels, n_out = (int64_t)B * C * LH * LW;
    sdt_tensor tl = mt_tensor((void *)c->latent, SDT_F32, 4, B, C, LH, LW);
    sdt_tensor tc = mt_tensor((void *)ctx, SDT_F32, 3, B, T, cfg->context_dim, 0);
    sdt_tensor tp = mt_tensor((void *)pooled, SDT_F32, 2, B, cfg->pooled_dim, 0, 0);
    sdt_tensor td = mt_tensor((void *)c->dout, SDT_F32, 4, B, C, LH, LW);
    sdt_tensor tdc = mt_tensor(dctx, SDT_F32, 3, B, T, cfg->context_dim, 0);
    sdt_tensor tdp = mt_tensor(dpooled, SDT_F32, 2, B, cfg->pooled_dim, 0, 0);
    mmdit_inputs in = {&tl, c->timesteps, &tc, &tp, false, SDT_F32};
    static mmdit_acts acts;
    sdt_arena measure, arena;
    sdt_error err = {0};
    sdt_arena_init_measure(&measure, c->be);
    bool ok = mmdit_forward(c->m, c->be, &measure, &in, &acts, &err) &&
              mmdit_backward(c->m, c->be, &measure, &acts, &td, &tdc, &tdp, &err);
    CHECK(ok, "measuring failed: %s", err.message);
    /* exactly the measured peak must be enough */
    CHECK(sdt_arena_init(&arena, c->be, measure.peak), "arena of %zu bytes", measure.peak);
    ok = mmdit_forward(c->m, c->be, &arena, &in, &acts, &err);
    CHECK(ok, "forward failed: %s", err.message);
    double loss = 0;
    if (ok) {
        const float *out = acts.out.data;
        for (int64_t i = 0; i < n_out; i++) loss += (double)c->dout[i] * out[i];
        if (dctx) {
            memset(dctx, 0, sizeof(float) * (size_t)B * T * cfg->context_dim);
            memset(dpooled, 0, sizeof(float) * (size_t)B * cfg->pooled_dim);
            CHECK(mmdit_backward(c->m, c->be, &arena, &acts, &td, &tdc, &tdp, &err), "backward failed: %s",
                  err.message);
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

static void check_refusals(const sdt_weights *w, const mmdit_config *cfg)
{
    char path[512];
    sdt_error err = {0};
    static mmdit_model m;
    mmdit_config got;
    /* a missing tensor */
    mt_temp_path(path, sizeof path, "mmdit-missing");
    mt_copy_without(w, path, "transformer_blocks.1.attn.add_k_proj.bias", NULL, NULL, 0);
    sdt_weights *mw = sdt_weights_open(path, &err);
    CHECK(mw != NULL, "open: %s", err.message);
    if (mw) {
        CHECK(mmdit_config_detect(mw, "", &got, &err) && !mmdit_load(&m, &got, mw, &err) &&
                  strstr(err.message, "transformer_blocks.1.attn.add_k_proj.bias") && strstr(err.message, path) &&
                  strstr(err.message, "SD3 / SD3.5 transformer"),
              "a missing add_k_proj.bias must be named with the file: \"%s\"", err.message);
        printf("missing: %s\n", err.message);
        sdt_weights_close(mw);
    }
    unlink(path);
    /* a misshaped tensor: the config's MLP one step wider than the file's */
    mmdit_config wide = *cfg;
    wide.mlp_ratio++;
    CHECK(!mmdit_load(&m, &wide, w, &err) && strstr(err.message, "transformer_blocks.0.ff.net.0.proj.weight"),
          "a misshaped ff.net.0.proj must be named: \"%s\"", err.message);
    printf("misshaped: %s\n", err.message);
    /* half an MMDiT-X block: attn2 in block 0 but the 6-chunk norm1 of a plain block */
    const int64_t H = (int64_t)cfg->heads * cfg->head_dim;
    float *q2 = mt_alloc(sizeof(float) * (size_t)(H * H));
    sdt_tensor tq2 = mt_tensor(q2, SDT_F32, 2, H, H, 0, 0);
    const char *names[1] = {"transformer_blocks.0.attn2.to_q.weight"};
    mt_temp_path(path, sizeof path, "mmdit-x");
    mt_copy_without(w, path, NULL, names, &tq2, 1);
    mw = sdt_weights_open(path, &err);
    CHECK(mw && mmdit_config_detect(mw, "", &got, &err) && got.dual_layers == 1 && !mmdit_load(&m, &got, mw, &err) &&
              strstr(err.message, "transformer_blocks.0.norm1.linear.weight"),
          "an MMDiT-X block without its 9-chunk norm1 must be named: \"%s\"", err.message);
    printf("half MMDiT-X: %s\n", err.message);
    if (mw) sdt_weights_close(mw);
    unlink(path);
    free(q2);
    /* no transformer under a prefix */
    CHECK(!mmdit_config_detect(w, "model.diffusion_model.", &got, &err) &&
              strstr(err.message, "model.diffusion_model.context_embedder.weight"),
          "a missing transformer must name the key it looked for: \"%s\"", err.message);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("mmdit");
    sdt_backend *be = mt_backend();
    char path[512];
    mt_temp_path(path, sizeof path, "mmdit");
    mmdit_config cfg = mmdit_config_tiny();
    sdt_error err = {0};
    CHECK(mmdit_generate(path, &cfg, SDT_F32, 7, true, &err), "generate: %s", err.message);
    sdt_weights *w = sdt_weights_open(path, &err);
    CHECK(w != NULL, "open: %s", err.message);
    if (!w) return sdt_test_finish("mmdit");
    mmdit_config det;
    CHECK(mmdit_config_detect(w, "", &det, &err), "detect: %s", err.message);
    CHECK(det.layers == cfg.layers && det.heads == cfg.heads && det.head_dim == cfg.head_dim &&
              det.in_channels == cfg.in_channels && det.patch == cfg.patch && det.pos_max == cfg.pos_max &&
              det.context_dim == cfg.context_dim && det.pooled_dim == cfg.pooled_dim &&
              det.mlp_ratio == cfg.mlp_ratio && det.qk_norm && det.dual_layers == 0,
          "detected layers %d heads %d x %d channels %d patch %d P %d context %d pooled %d mlp %d", det.layers,
          det.heads, det.head_dim, det.in_channels, det.patch, det.pos_max, det.context_dim, det.pooled_dim,
          det.mlp_ratio);
    static mmdit_model m;
    CHECK(mmdit_load(&m, &cfg, w, &err), "load: %s", err.message);

    const int64_t C = cfg.in_channels, n_lat = (int64_t)B * C * LH * LW;
    float *latent = mt_alloc(sizeof(float) * n_lat), *dout = mt_alloc(sizeof(float) * n_lat);
    sdt_test_fill_normal(&rng, latent, n_lat, 1.0);
    sdt_test_fill_normal(&rng, dout, n_lat, 1.0);
    float ts[B] = {250.0f, 800.0f};
    run_ctx c = {&m, be, latent, ts, dout};
    check_gradients(&c, &rng);

    /* SD3.5 Medium's kind: MMDiT-X (attn2) in the first two blocks */
    char path_x[512];
    mt_temp_path(path_x, sizeof path_x, "mmdit-dual");
    mmdit_config cfg_x = cfg;
    cfg_x.dual_layers = 2;
    CHECK(mmdit_generate(path_x, &cfg_x, SDT_F32, 8, true, &err), "generate: %s", err.message);
    sdt_weights *wx = sdt_weights_open(path_x, &err);
    static mmdit_model mx;
    CHECK(wx && mmdit_config_detect(wx, "", &det, &err) && det.dual_layers == 2 && mmdit_load(&mx, &det, wx, &err),
          "MMDiT-X model: %s (detected %d dual blocks)", err.message, det.dual_layers);
    if (wx) {
        run_ctx cx = {&mx, be, latent, ts, dout};
        printf("MMDiT-X:\n");
        check_gradients(&cx, &rng);
        sdt_weights_close(wx);
    }
    unlink(path_x);

    /* a latent larger than the position table covers */
    float *big = mt_alloc(sizeof(float) * (size_t)(C * 14 * 4)), ctx[T * 24] = {0}, pooled[12] = {0};
    sdt_tensor tl = mt_tensor(big, SDT_F32, 4, 1, C, 14, 4), tc = mt_tensor(ctx, SDT_F32, 3, 1, T, 24, 0),
               tp = mt_tensor(pooled, SDT_F32, 2, 1, 12, 0, 0);
    mmdit_inputs in = {&tl, ts, &tc, &tp, false, SDT_F32};
    static mmdit_acts acts;
    sdt_arena measure;
    sdt_arena_init_measure(&measure, be);
    CHECK(!mmdit_forward(&m, be, &measure, &in, &acts, &err) && strstr(err.message, "14 x 4") &&
              strstr(err.message, "at most 12"),
          "a latent past the position table must be refused: \"%s\"", err.message);
    printf("too large: %s\n", err.message);
    free(big);

    check_refusals(w, &cfg);
    sdt_weights_close(w);
    unlink(path);
    free(latent), free(dout);
    be->destroy(be);
    return sdt_test_finish("mmdit");
}
