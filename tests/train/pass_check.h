/* pass_check.h - what the training-pass tests of the text-encoder families share (header only:
 * test_sdxl_pass, test_sd3_pass, test_flux_pass, test_t5_cache, test_flow_memory): a batch's inputs, the pass's loss and the embedding rows' gradient through
 * train/sd_pass.h on the CPU, the gradient checked against central differences of that loss
 * along a direction, and a pass without rows. */
#ifndef SDT_TEST_TRAIN_PASS_CHECK_H
#define SDT_TEST_TRAIN_PASS_CHECK_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../models/model_test_util.h"
#include "train/sd_pass.h"
#include "train/work_arena.h"

/* noisy and target: numel draws each, interleaved (noisy[i], then target[i]). */
static inline void pass_check_latents(sdt_test_rng *rng, int64_t numel, float **noisy, float **target)
{
    *noisy = mt_alloc((size_t)numel * sizeof(float));
    *target = mt_alloc((size_t)numel * sizeof(float));
    for (int64_t i = 0; i < numel; i++)
        (*noisy)[i] = (float)sdt_test_normal(rng), (*target)[i] = (float)sdt_test_normal(rng);
}

/* A pass's inputs on a batch: CLIP's ids and the rows' slots in them, the latents, the timesteps; T5's (SD3.5, Flux)
 * and SDXL's parts are the caller's to add. */
static inline sdt_pass_inputs pass_check_inputs(sdt_pass_shape shape, const int32_t *tokens, const clip_override *ov,
                                                int n_overrides, const float *noisy, const float *target,
                                                const float *timesteps, int32_t end_id)
{
    sdt_pass_inputs in = {.shape = shape,
                          .tokens = tokens,
                          .overrides = ov,
                          .n_overrides = n_overrides,
                          .noisy = noisy,
                          .target = target,
                          .timesteps = timesteps,
                          .end_id = end_id};
    return in;
}

/* The pass's loss on in at rows (host, nv x width values); with grad, its gradient too (tables: which
 * encoders' rows train, 0 for all). options: NULL for the defaults (clip_skip 0); bytes (may be NULL): the
 * arena the pass measured. */
static inline bool pass_check_loss_with(sd_runtime *rt, work_arena *wa, const sdt_pass_inputs *in,
                                        const sdt_pass_options *options, int nv, const float *rows, int width,
                                        uint32_t tables, float *grad, double *loss, size_t *bytes, sdt_error *error)
{
    int64_t shape[2] = {nv, width};
    float *g = mt_alloc((size_t)nv * width * sizeof(float));
    sdt_tensor r = sdt_tensor_make((void *)rows, SDT_F32, SDT_DEVICE_CPU, 2, shape),
               dr = sdt_tensor_make(g, SDT_F32, SDT_DEVICE_CPU, 2, shape);
    sdt_pass_options po = options ? *options : (sdt_pass_options){.clip_skip = 0};
    sdt_pass_trainables tr = {.rows = &r, .drows = grad ? &dr : NULL, .tables = tables};
    size_t measured = 0;
    bool ok = sdt_pass_measure(rt, &po, &in->shape, &tr, &measured, error) &&
              work_arena_reserve(wa, rt->be, measured, error) &&
              sdt_pass_run(rt, wa, &po, in, &tr, 1.0f, grad != NULL, loss, error);
    if (ok && grad) memcpy(grad, g, (size_t)nv * width * sizeof(float));
    if (bytes) *bytes = measured;
    free(g);
    return ok;
}

/* pass_check_loss_with on the default options. */
static inline bool pass_check_loss(sd_runtime *rt, work_arena *wa, const sdt_pass_inputs *in, int nv, const float *rows,
                                   int width, uint32_t tables, float *grad, double *loss, sdt_error *error)
{
    return pass_check_loss_with(rt, wa, in, NULL, nv, rows, width, tables, grad, loss, NULL, error);
}

/* The gradient grad at rows along dir (both nv x width) against central differences of the loss: a step of
 * 2e-3 / |dir| (larger steps leave the linear range of these random models). part names the rows dir moves
 * ("clip_l table"); family the model ("SD3"). */
static inline void pass_check_direction(sd_runtime *rt, work_arena *wa, const sdt_pass_inputs *in, int nv,
                                        const float *rows, int width, const float *grad, const float *dir, float *moved,
                                        const char *part, const char *family)
{
    sdt_error error = {0};
    double analytic = 0, norm = 0;
    for (int i = 0; i < nv * width; i++) {
        analytic += (double)dir[i] * grad[i];
        norm += (double)dir[i] * dir[i];
    }
    double h = 2e-3 / sqrt(norm), l[2];
    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < nv * width; i++) moved[i] = rows[i] + (float)((s ? -h : h) * dir[i]);
        if (!pass_check_loss(rt, wa, in, nv, moved, width, 0, NULL, &l[s], &error))
            CHECK(false, "the %s pass: %s", family, error.message);
    }
    double fd = (l[0] - l[1]) / (2 * h), rel = fabs(fd - analytic) / fmax(fabs(fd), 1e-9);
    printf("%s: d(loss) along a random direction: analytic %.6g, central differences %.6g (rel %.3g)\n", part, analytic,
           fd, rel);
    CHECK(fabs(analytic) > 1e-7, "the %s gets no gradient (%g)", part, analytic);
    /* Central differences of an f32 pass carry its rounding: with OpenBLAS's Haswell and Zen kernels
     * (OPENBLAS_CORETYPE) they land up to 2.3e-2 off the analytic value on SDXL, 0.7e-2 with SkylakeX's;
     * a wrong gradient (a missing part, a transposed block) is off by far more. */
    CHECK(rel <= 4e-2, "the %s's gradient disagrees with central differences: %.6g vs %.6g", part, analytic, fd);
}

/* A pass without rows (a hypernetwork's alone): it runs, forward and backward, to a finite loss. in's
 * overrides are the caller's to clear. */
static inline void pass_check_without_rows(sd_runtime *rt, work_arena *wa, const sdt_pass_inputs *in)
{
    sdt_error error = {0};
    sdt_pass_trainables none = {0};
    size_t bytes;
    double loss = 0;
    sdt_pass_options po = {.clip_skip = 0};
    CHECK(sdt_pass_measure(rt, &po, &in->shape, &none, &bytes, &error) &&
              work_arena_reserve(wa, rt->be, bytes, &error) &&
              sdt_pass_run(rt, wa, &po, in, &none, 1.0f, true, &loss, &error) && isfinite(loss),
          "a pass without rows: %s", error.message);
}

#endif
