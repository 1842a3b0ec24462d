/* test_flow_memory.c - train/flow_memory's estimate from the configs alone against a real CPU step of the tiny
 * SD3.5 model (sd3_gen): the activations against the peak the real pass's arena reached, the weights against the
 * tensors the runtime holds (the VAE parked, as prepare parks it), each and the sum within 10%, with and without
 * gradient checkpointing; the full-size presets give the sizes they should (the parameter counts people quote:
 * SD3.5 Large 8.1 B in its transformer, Medium 2.5 B, Flux 11.9 B, T5-XXL's encoder 4.8 B) and checkpointing
 * lowers their activations. The Flux pass is not a training pass yet: its estimate is the same code over
 * flux_text and flux (whose measured peak test_dit_checkpointing checks against a real step). */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "../models/model_test_util.h"
#include "sd3_gen.h"
#include "sdtrain.h"
#include "train/flow_memory.h"
#include "train/prompt.h"
#include "train/sd_pass.h"
#include "train/work_arena.h"

#define B 2
#define NV 2
#define END 999
#define T SDT_PROMPT_TOKENS
#define L5 8
#define SIDE 16 /* the latent's */

typedef struct problem {
    int32_t tokens[B * T], t5[B * L5];
    clip_override ov[B * NV];
    t5_override ov5[B * NV];
    float noisy[B * 16 * SIDE * SIDE], target[B * 16 * SIDE * SIDE], ts[B];
    sdt_pass_shape shape;
} problem;

static void make_problem(sdt_test_rng *rng, sd_runtime *rt, problem *p)
{
    memset(p, 0, sizeof *p);
    int c = rt->cfg.vae.z_channels;
    p->shape = (sdt_pass_shape){.batch = B, .c = c, .h = SIDE, .w = SIDE, .chunks = 1, .in_c = c, .t5_len = L5};
    int n = 0;
    for (int b = 0; b < B; b++) {
        int32_t *t = p->tokens + b * T, *t5 = p->t5 + b * L5;
        t[0] = END - 1, t[1] = 5 + b, t[2] = 0, t[3] = 0, t[4] = 17;
        for (int i = 5; i < T; i++) t[i] = END;
        t5[0] = 7 + b, t5[1] = 0, t5[2] = 0, t5[3] = 9, t5[4] = 1;
        for (int r = 0; r < NV; r++) {
            p->ov5[n] = (t5_override){b, 1 + r, r};
            p->ov[n++] = (clip_override){b, 2 + r, r};
        }
        p->ts[b] = (float)(300 + 400 * b);
    }
    for (int i = 0; i < B * c * SIDE * SIDE; i++)
        p->noisy[i] = (float)sdt_test_normal(rng), p->target[i] = (float)sdt_test_normal(rng);
}

/* A real step: the pass measured, an arena of that size, the pass run; the arena's peak and the weights held. */
static bool real_step(sd_runtime *rt, problem *p, bool checkpointing, size_t *peak, size_t *weights, sdt_error *error)
{
    const int width = rt->cfg.clip.width + rt->cfg.clip2.width + rt->cfg.t5.d_model;
    float *rows = mt_alloc((size_t)NV * width * sizeof(float)), *grad = mt_alloc((size_t)NV * width * sizeof(float));
    for (int i = 0; i < NV * width; i++) rows[i] = 0.01f * (float)(i % 7), grad[i] = 0;
    int64_t shape[2] = {NV, width};
    sdt_tensor r = sdt_tensor_make(rows, SDT_F32, SDT_DEVICE_CPU, 2, shape),
               dr = sdt_tensor_make(grad, SDT_F32, SDT_DEVICE_CPU, 2, shape);
    sdt_pass_options po = {.clip_skip = 0, .checkpointing = checkpointing};
    sdt_pass_trainables tr = {.rows = &r, .drows = &dr};
    sdt_pass_inputs in = {.shape = p->shape,
                          .tokens = p->tokens,
                          .overrides = p->ov,
                          .n_overrides = B * NV,
                          .noisy = p->noisy,
                          .target = p->target,
                          .timesteps = p->ts,
                          .end_id = END,
                          .t5_tokens = p->t5,
                          .t5_overrides = p->ov5,
                          .n_t5_overrides = B * NV};
    work_arena wa = {0};
    size_t bytes = 0;
    double loss = 0;
    bool ok = sdt_pass_measure(rt, &po, &p->shape, &tr, &bytes, error) &&
              work_arena_reserve(&wa, rt->be, bytes, error) &&
              sdt_pass_run(rt, &wa, &po, &in, &tr, 1.0f, true, &loss, error);
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

static void check_tiny(sd_runtime *rt, problem *p, bool checkpointing)
{
    size_t peak = 0, weights = 0;
    sdt_error error = {0};
    CHECK(real_step(rt, p, checkpointing, &peak, &weights, &error), "the real step: %s", error.message);
    sdt_flow_memory_config c;
    memset(&c, 0, sizeof c);
    c.family = SDT_FLOW_MEMORY_SD3;
    c.mmdit = rt->cfg.mmdit, c.clip_l = rt->cfg.clip, c.clip_g = rt->cfg.clip2, c.t5 = rt->cfg.t5;
    c.dtype = SDT_F32, c.batch = B, c.latent_h = c.latent_w = SIDE, c.t5_len = L5, c.vectors = NV;
    c.checkpointing = checkpointing, c.t5_trained = true;
    sdt_flow_memory est;
    CHECK(sdt_flow_memory_estimate(&c, rt->be, &est, &error), "estimate: %s", error.message);
    const size_t real_total = peak + weights + est.trained; /* the rows are the job's, outside the pass */
    printf("tiny SD3.5%s: activations estimated %zu, real peak %zu (%.2f%%); weights %zu / %zu; total %zu / %zu "
           "(%.2f%%)\n",
           checkpointing ? ", checkpointing" : "", est.activations, peak, 100 * rel(est.activations, peak), est.weights,
           weights, est.total, real_total, 100 * rel(est.total, real_total));
    CHECK(rel(est.activations, peak) <= 0.10, "activations: estimated %zu bytes, the real step's arena peaked at %zu",
          est.activations, peak);
    CHECK(rel(est.weights, weights) <= 0.10, "weights: estimated %zu bytes, the runtime holds %zu", est.weights,
          weights);
    CHECK(rel(est.total, real_total) <= 0.10, "total: estimated %zu bytes, real %zu", est.total, real_total);
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
    sdt_backend *be = sdt_backend_cpu_create(2);
    char *dir = g_dir_make_tmp("sdt-flowmem-XXXXXX", NULL);
    CHECK(be && dir, "backend and temp folder");
    if (!be || !dir) return sdt_test_finish("test_flow_memory");
    char *path = g_strdup_printf("%s/sd3.5_tiny.safetensors", dir);
    sd_config cfg = sd_config_preset(SD_FAMILY_TINY_SD3);
    const bool in[SD_PART_COUNT] = {true, true, true, true, true};
    sdt_error error = {0};
    sd_runtime rt;
    bool ok = sd3_generate(path, &cfg, in, SDT_F32, sdt_test_next(&rng), true, &error) &&
              sd_runtime_open(&rt, path, be, SDT_F32, SD_PREDICTION_AUTO, false, &error);
    CHECK(ok, "the tiny SD3.5 model: %s", error.message);
    if (ok) {
        static problem p;
        make_problem(&rng, &rt, &p);
        check_tiny(&rt, &p, false);
        check_tiny(&rt, &p, true);
        sd_runtime_close(&rt);
    }
    check_full_size(be);
    g_remove(path);
    g_rmdir(dir);
    g_free(path);
    g_free(dir);
    be->destroy(be);
    return sdt_test_finish("test_flow_memory");
}
