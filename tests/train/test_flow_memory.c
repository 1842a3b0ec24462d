/* test_flow_memory.c - train/flow_memory's estimate from the configs alone against a real CPU step of the tiny
 * SD3.5 model (sd3_gen) in f32 and in bf16 (--precision bf16: weights and activations in bf16): the activations
 * equal the peak the real pass's arena reached, byte for byte; the weights (against the tensors the runtime holds,
 * the VAE parked, as prepare parks it) and the sum within 10%, with and without gradient checkpointing; the
 * full-size presets give the sizes they should (the parameter counts people quote: SD3.5 Large 8.1 B in its
 * transformer, Medium 2.5 B, Flux 11.9 B, T5-XXL's encoder 4.8 B) and checkpointing lowers their activations. The
 * Flux estimate is checked against a real CPU step of sd_pass's shape on the tiny Flux encoders and transformer
 * (flux_text, flux, flux_text's backward), the RoPE tables aside (measured as if uncached; a real forward finds them
 * on the model): exact activations in f32 and bf16, the weights (f32 files) in f32. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "../models/model_test_util.h"
#include "../models/text3_test_models.h"
#include "flow_pass_check.h"
#include "flux_gen.h"
#include "flux_text.h"
#include "train/flow_memory.h"

#define B FLOW_PASS_B
#define NV FLOW_PASS_NV
#define T SDT_PROMPT_TOKENS
#define L5 FLOW_PASS_L5
#define SIDE 16 /* the latent's */

/* A real step: the pass measured, an arena of that size, the pass run; the arena's peak and the weights held. */
static bool real_step(sd_runtime *rt, const flow_pass_problem *p, bool checkpointing, size_t *peak, size_t *weights,
                      sdt_error *error)
{
    const int width = flow_pass_width(rt);
    float *rows = mt_alloc((size_t)NV * width * sizeof(float)), *grad = mt_alloc((size_t)NV * width * sizeof(float));
    for (int i = 0; i < NV * width; i++) rows[i] = 0.01f * (float)(i % 7);
    sdt_pass_options po = {.clip_skip = 0, .checkpointing = checkpointing};
    sdt_pass_inputs in = flow_pass_inputs(p);
    work_arena wa = {0};
    double loss = 0;
    bool ok = pass_check_loss_with(rt, &wa, &in, &po, NV, rows, width, 0, grad, &loss, NULL, error);
    *peak = wa.arena.peak;
    work_arena_release(&wa);
    *weights = 0;
    for (size_t i = 0; i < sdt_weights_count(rt->dev); i++) {
        const char *key = sdt_weights_key(rt->dev, i);
        if (strncmp(key, "first_stage_model.", 18) != 0) /* prepare parks the VAE while training */
            *weights += sdt_tensor_nbytes(sdt_weights_get(rt->dev, key));
    }
    free(rows), free(grad);
    return ok;
}

static double rel(size_t est, size_t real)
{
    return fabs((double)est - (double)real) / (double)real;
}

static void check_tiny(sd_runtime *rt, const flow_pass_problem *p, bool checkpointing)
{
    size_t peak = 0, weights = 0;
    sdt_error error = {0};
    CHECK(real_step(rt, p, checkpointing, &peak, &weights, &error), "the real step: %s", error.message);
    sdt_flow_memory_config c;
    memset(&c, 0, sizeof c);
    c.family = SDT_FLOW_MEMORY_SD3;
    c.mmdit = rt->cfg.mmdit, c.clip_l = rt->cfg.clip, c.clip_g = rt->cfg.clip2, c.t5 = rt->cfg.t5;
    c.dtype = rt->dtype, c.batch = B, c.latent_h = c.latent_w = SIDE, c.t5_len = L5, c.vectors = NV;
    c.checkpointing = checkpointing, c.t5_trained = true;
    sdt_flow_memory est;
    CHECK(sdt_flow_memory_estimate(&c, rt->be, &est, &error), "estimate: %s", error.message);
    const size_t real_total = peak + weights + est.trained; /* the rows are the job's, outside the pass */
    printf("tiny SD3.5 %s%s: activations estimated %zu, real peak %zu (%.2f%%); weights %zu / %zu; total %zu / %zu "
           "(%.2f%%)\n",
           sdt_dtype_name(rt->dtype), checkpointing ? ", checkpointing" : "", est.activations, peak,
           100 * rel(est.activations, peak), est.weights, weights, est.total, real_total,
           100 * rel(est.total, real_total));
    CHECK(est.activations == peak, "activations (%s): estimated %zu bytes, the real step's arena peaked at %zu",
          sdt_dtype_name(rt->dtype), est.activations, peak);
    CHECK(rel(est.weights, weights) <= 0.10, "weights: estimated %zu bytes, the runtime holds %zu", est.weights,
          weights);
    CHECK(rel(est.total, real_total) <= 0.10, "total: estimated %zu bytes, real %zu", est.total, real_total);
}

/* The Flux step sd_pass will run: the pass's tensors, the prompts' ids, flux_text forward, the transformer's
 * forward and backward, the gradients in the activation dtype (f32 here), flux_text's backward to the rows. */
static bool flux_step(const text3_models *tm, const flux_model *fm, sdt_backend *be, sdt_arena *a, bool ckpt,
                      sdt_dtype act, const int32_t *tok_l, const int32_t *tok5, float *rows_l, float *rows_t5,
                      float *drl, float *drt, sdt_error *error)
{
    const int64_t C = fm->cfg.in_channels, Wl = tm->l.cfg.width, D = tm->t5.cfg.d_model;
    int64_t ls[4] = {B, C, SIDE, SIDE}, bs[1] = {B}, ts[2] = {B, T}, t5s[2] = {B, L5};
    sdt_tensor noisy = sdt_arena_tensor(a, act, 4, ls);
    sdt_arena_tensor(a, SDT_F32, 4, ls); /* the target */
    sdt_arena_tensor(a, SDT_F32, 1, bs); /* the timesteps */
    sdt_tensor tl = sdt_arena_tensor(a, SDT_I32, 2, ts), t5 = sdt_arena_tensor(a, SDT_I32, 2, t5s);
    sdt_tensor rl = mt_tensor(rows_l, SDT_F32, 2, NV, Wl, 0, 0), rt = mt_tensor(rows_t5, SDT_F32, 2, NV, D, 0, 0),
               dl = mt_tensor(drl, SDT_F32, 2, NV, Wl, 0, 0), dt = mt_tensor(drt, SDT_F32, 2, NV, D, 0, 0);
    clip_override ov = {0, 1, 0};
    t5_override ov5 = {0, 0, 0};
    if (!a->measuring) {
        if (!sdt_arena_fits(a)) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "the step's arena is too small");
        float *nv = mt_alloc(sizeof(float) * B * C * SIDE * SIDE);
        for (int64_t i = 0; i < B * C * SIDE * SIDE; i++) nv[i] = 0.01f * (float)(i % 13) - 0.05f;
        sdt_store_f32(nv, noisy.data, act, B * C * SIDE * SIDE);
        free(nv);
        memcpy(tl.data, tok_l, sizeof(int32_t) * B * T);
        memcpy(t5.data, tok5, sizeof(int32_t) * B * L5);
    }
    sdt_flux_text_inputs ti = {.tokens_l = &tl,
                               .rows_l = &rl,
                               .overrides = &ov,
                               .n_overrides = 1,
                               .t5 = {.tokens = &t5, .rows = &rt, .overrides = &ov5, .n_overrides = 1},
                               .act_dtype = act};
    static sdt_flux_text_acts text;
    static flux_acts acts;
    float tsv[B] = {0.3f, 0.7f}, gv[B] = {3.5f, 3.5f};
    flux_inputs fi = {&noisy, tsv, gv, &text.context, &text.pooled, ckpt, act};
    if (!sdt_flux_text_forward(&tm->l, &tm->t5, be, a, &ti, &text, error) ||
        !flux_forward(fm, be, a, &fi, &acts, error))
        return false;
    sdt_tensor dpred = sdt_arena_tensor(a, SDT_F32, 4, acts.out.shape),
               dctx = sdt_arena_tensor(a, SDT_F32, 3, text.context.shape),
               dpool = sdt_arena_tensor(a, SDT_F32, 2, text.pooled.shape);
    if (!a->measuring) {
        if (!sdt_arena_fits(a)) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "the step's arena is too small");
        if (be->zero(be, &dctx) || be->zero(be, &dpool)) return sdt_fail(error, be->error.code, "zero");
        for (int64_t i = 0; i < sdt_tensor_numel(&dpred); i++) ((float *)dpred.data)[i] = 1e-3f * (float)(i % 7);
    }
    if (!flux_backward(fm, be, a, &acts, &dpred, &dctx, &dpool, error)) return false;
    sdt_tensor dctx_act = dctx, dpool_act = dpool; /* the encoders' backward reads them in the activation dtype */
    if (act != SDT_F32) {
        dctx_act = sdt_arena_tensor(a, act, 3, dctx.shape), dpool_act = sdt_arena_tensor(a, act, 2, dpool.shape);
        if (!a->measuring &&
            (!sdt_arena_fits(a) || be->convert(be, &dctx_act, &dctx) || be->convert(be, &dpool_act, &dpool)))
            return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "the gradients in the activation dtype");
    }
    return sdt_flux_text_backward(&tm->l, &tm->t5, be, a, &text, &dctx_act, &dpool_act, &dl, &dt, error);
}

static size_t file_bytes(const sdt_weights *w)
{
    size_t n = 0;
    for (size_t i = 0; i < sdt_weights_count(w); i++) n += sdt_tensor_nbytes(sdt_weights_get(w, sdt_weights_key(w, i)));
    return n;
}

static void check_tiny_flux(sdt_test_rng *rng, sdt_backend *be, const char *dir)
{
    sdt_error error = {0};
    static text3_models tm;
    bool ok = text3_make(dir, true, sdt_test_next(rng), &tm, &error);
    CHECK(ok, "the tiny Flux encoders: %s", error.message);
    if (!ok) return;
    flux_config fc = flux_config_tiny();
    fc.in_channels = 16, fc.context_dim = tm.t5.cfg.d_model, fc.pooled_dim = tm.l.cfg.width;
    char *fpath = g_strdup_printf("%s/flux.safetensors", dir);
    static flux_model fm;
    sdt_weights *fw = NULL;
    ok = flux_generate(fpath, &fc, SDT_F32, sdt_test_next(rng), true, &error) &&
         (fw = sdt_weights_open(fpath, &error)) != NULL && flux_load(&fm, &fc, fw, &error);
    CHECK(ok, "the tiny Flux transformer: %s", error.message);
    const int64_t Wl = tm.l.cfg.width, D = tm.t5.cfg.d_model;
    int32_t tok_l[B * T], tok5[B * L5];
    for (int b = 0; b < B; b++) {
        for (int i = 0; i < T; i++) tok_l[b * T + i] = i == 0 ? tm.l.cfg.vocab - 2 : i < 4 ? 5 + i : tm.l.cfg.vocab - 1;
        for (int i = 0; i < L5; i++) tok5[b * L5 + i] = i < 4 ? 3 + i + b : i == 4 ? 1 : 0;
    }
    float *rl = mt_alloc(sizeof(float) * NV * Wl), *rt = mt_alloc(sizeof(float) * NV * D),
          *drl = mt_alloc(sizeof(float) * NV * Wl), *drt = mt_alloc(sizeof(float) * NV * D);
    for (int64_t i = 0; i < NV * Wl; i++) rl[i] = 0.01f * (float)(i % 5), drl[i] = 0;
    for (int64_t i = 0; i < NV * D; i++) rt[i] = 0.02f * (float)(i % 3), drt[i] = 0;
    const size_t S = (size_t)L5 + (SIDE / 2) * (SIDE / 2), table = S * fc.head_dim * sizeof(float),
                 rope = 2 * ((table + 255) / 256 * 256); /* two f32 [S, head_dim] tables, the arena's alignment */
    /* f32, then bf16 activations (the weights stay the f32 files: the bf16 case checks the activations) */
    for (int run = 0; ok && run < 4; run++) {
        const bool ckpt = run % 2;
        const sdt_dtype act = run < 2 ? SDT_F32 : SDT_BF16;
        sdt_arena measure, arena;
        sdt_arena_init_measure(&measure, be);
        ok = flux_step(&tm, &fm, be, &measure, ckpt, act, tok_l, tok5, rl, rt, drl, drt, &error) &&
             sdt_arena_init(&arena, be, measure.peak);
        ok = ok && flux_step(&tm, &fm, be, &arena, ckpt, act, tok_l, tok5, rl, rt, drl, drt, &error);
        CHECK(ok, "the real Flux step: %s", error.message);
        const size_t peak = arena.peak, weights = file_bytes(tm.wl) + file_bytes(tm.wt5) + file_bytes(fw);
        sdt_arena_release(&arena);
        sdt_flow_memory_config c;
        memset(&c, 0, sizeof c);
        c.family = SDT_FLOW_MEMORY_FLUX;
        c.flux = fc, c.clip_l = tm.l.cfg, c.t5 = tm.t5.cfg;
        c.dtype = act, c.batch = B, c.latent_h = c.latent_w = SIDE, c.t5_len = L5, c.vectors = NV;
        c.checkpointing = ckpt, c.t5_trained = true;
        sdt_flow_memory est;
        ok = ok && sdt_flow_memory_estimate(&c, be, &est, &error);
        CHECK(ok, "estimate: %s", error.message);
        if (!ok) break;
        const size_t real_total = peak + rope + weights + est.trained;
        printf("tiny Flux %s%s: activations estimated %zu, real peak %zu + %zu of RoPE tables (%.2f%%); weights %zu / "
               "%zu; total %zu / %zu (%.2f%%)\n",
               sdt_dtype_name(act), ckpt ? ", checkpointing" : "", est.activations, peak, rope,
               100 * rel(est.activations, peak + rope), est.weights, weights, est.total, real_total,
               100 * rel(est.total, real_total));
        CHECK(est.activations == peak + rope, "Flux %s: %zu bytes of activations estimated, the step's %zu",
              sdt_dtype_name(act), est.activations, peak + rope);
        CHECK(act != SDT_F32 || (rel(est.weights, weights) <= 0.10 && rel(est.total, real_total) <= 0.10),
              "Flux: the estimate (%zu weights, %zu total) is more than 10%% from the real step's (%zu, %zu)",
              est.weights, est.total, weights, real_total);
    }
    free(rl), free(rt), free(drl), free(drt);
    flux_free(&fm);
    if (fw) sdt_weights_close(fw);
    text3_close(&tm);
    g_remove(fpath);
    g_free(fpath);
    char *p;
    const char *parts[3] = {"clip_l", "clip_g", "t5"};
    for (int i = 0; i < 3; i++) {
        p = g_strdup_printf("%s/%s.safetensors", dir, parts[i]);
        g_remove(p);
        g_free(p);
    }
}

static bool add_count(void *u, const sdt_param_info *p)
{
    int64_t n = 1;
    for (int i = 0; i < p->ndim; i++) n *= p->shape[i];
    *(int64_t *)u += n;
    return true;
}

static void check_full_size(sdt_backend *be)
{
    sdt_error error = {0};
    int64_t n = 0;
    sdt_flow_memory_config large = sdt_flow_memory_sd35(true, 1024), medium = sdt_flow_memory_sd35(false, 1024),
                           dev = sdt_flow_memory_flux(true, 1024);
    mmdit_params(&large.mmdit, add_count, &n);
    CHECK(n > 8.0e9 && n < 8.3e9, "SD3.5 Large's transformer: %lld parameters", (long long)n);
    n = 0, mmdit_params(&medium.mmdit, add_count, &n);
    CHECK(n > 2.4e9 && n < 2.6e9, "SD3.5 Medium's transformer: %lld parameters", (long long)n);
    n = 0, flux_params(&dev.flux, add_count, &n);
    CHECK(n > 11.8e9 && n < 12.0e9, "Flux dev's transformer: %lld parameters", (long long)n);
    n = 0, t5_params(&dev.t5, add_count, &n);
    CHECK(n > 4.7e9 && n < 4.8e9, "T5-XXL's encoder: %lld parameters", (long long)n);
    sdt_flow_memory_config cfgs[3] = {large, medium, dev};
    const char *names[3] = {"SD3.5 Large", "SD3.5 Medium", "Flux dev"};
    for (int i = 0; i < 3; i++) {
        sdt_flow_memory plain, ckpt;
        sdt_flow_memory_config c = cfgs[i];
        bool ok = sdt_flow_memory_estimate(&c, be, &plain, &error);
        c.checkpointing = true;
        ok = ok && sdt_flow_memory_estimate(&c, be, &ckpt, &error);
        CHECK(ok, "%s: %s", names[i], error.message);
        printf("%s 1024x1024: activations %zu MiB plain, %zu MiB checkpointed; weights %zu MiB\n", names[i],
               plain.activations >> 20, ckpt.activations >> 20, plain.weights >> 20);
        CHECK(ok && ckpt.activations * 3 < plain.activations, "%s: checkpointing keeps %zu of %zu MiB", names[i],
              ckpt.activations >> 20, plain.activations >> 20);
    }
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("test_flow_memory");
    sd_config cfg = sd_config_preset(SD_FAMILY_TINY_SD3);
    const bool in[SD_PART_COUNT] = {true, true, true, true, true};
    flow_pass_model m;
    if (flow_pass_model_open(&m, &rng, "sdt-flowmem-XXXXXX", "sd3.5_tiny.safetensors", &cfg, in, "SD3.5")) {
        static flow_pass_problem p;
        flow_pass_make_problem_sized(&rng, &m.rt, SIDE, &p);
        check_tiny(&m.rt, &p, false);
        check_tiny(&m.rt, &p, true);
        /* a bf16 run (--precision bf16): weights and activations in bf16 */
        sd_runtime_close(&m.rt);
        sdt_error error = {0};
        m.open = sd_runtime_open(&m.rt, m.path, m.be, SDT_BF16, SD_PREDICTION_AUTO, false, &error);
        CHECK(m.open, "the tiny SD3.5 model in bf16: %s", error.message);
        if (m.open) {
            check_tiny(&m.rt, &p, false);
            check_tiny(&m.rt, &p, true);
        }
        free(p.noisy), free(p.target);
    }
    if (m.be && m.dir) {
        check_tiny_flux(&rng, m.be, m.dir);
        check_full_size(m.be);
    }
    flow_pass_model_close(&m);
    return sdt_test_finish("test_flow_memory");
}
