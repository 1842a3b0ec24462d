/* numerics_fixture.h - toy trainers for the numerics tests (header only).
 *
 * A toy optimizer has `count` fp32 parameters of `size` elements in host memory
 * (the CPU backend's device memory). "Backward" writes loss_scale * raw into the
 * grads, accumulating like a real backward, and tells the optimizer.
 * A log sink captures the scaler's warnings so tests can look at them.
 */
#ifndef NUMERICS_FIXTURE_H
#define NUMERICS_FIXTURE_H

#include "sdt_error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_test.h"
#include "train/optimizer.h"
#include "train/scaler.h"

#define TOY_MAX_PARAMS 4

typedef struct toy {
    sdt_optimizer *opt;
    int count;
    int64_t size;
    float *param[TOY_MAX_PARAMS];
    float *grad[TOY_MAX_PARAMS];
    sdt_tensor pt[TOY_MAX_PARAMS], gt[TOY_MAX_PARAMS];
} toy;

static inline void toy_init(toy *t, sdt_backend *be, const char *name, int count, int64_t size,
                            const sdt_adamw_hparams *hp, sdt_test_rng *rng)
{
    sdt_error error = {0};
    memset(t, 0, sizeof *t);
    t->count = count;
    t->size = size;
    t->opt = sdt_optimizer_create(be, name, hp, &error);
    if (!t->opt) {
        fprintf(stderr, "toy_init: %s\n", error.message);
        exit(1);
    }
    for (int i = 0; i < count; i++) {
        t->param[i] = kt_alloc((size_t)size * sizeof(float));
        t->grad[i] = kt_alloc((size_t)size * sizeof(float));
        if (rng) sdt_test_fill_normal(rng, t->param[i], size, 1.0);
        t->pt[i] = sdt_tensor_make(t->param[i], SDT_F32, SDT_DEVICE_CPU, 1, &t->size);
        t->gt[i] = sdt_tensor_make(t->grad[i], SDT_F32, SDT_DEVICE_CPU, 1, &t->size);
        char pname[32];
        snprintf(pname, sizeof pname, "%s.p%d", name, i);
        if (sdt_optimizer_add_param(t->opt, pname, &t->pt[i], &t->gt[i], true, &error) != SDT_CORE_OK) {
            fprintf(stderr, "toy_init: %s\n", error.message);
            exit(1);
        }
    }
}

static inline void toy_free(toy *t)
{
    sdt_optimizer_destroy(t->opt);
    for (int i = 0; i < t->count; i++) {
        free(t->param[i]);
        free(t->grad[i]);
    }
}

/* One backward pass seeded with loss_scale: grad += f32(loss_scale * raw) for every
 * element of every parameter. */
static inline void toy_backward_fill(toy *t, float loss_scale, float raw)
{
    for (int i = 0; i < t->count; i++)
        for (int64_t j = 0; j < t->size; j++) t->grad[i][j] += loss_scale * raw;
    sdt_optimizer_note_backward(t->opt, loss_scale);
}

/* Random raw grads ~ N(0, 1), times the scale, accumulated; raw copies what was used. */
static inline void toy_backward_random(toy *t, sdt_test_rng *rng, float loss_scale, float *raw_out)
{
    for (int i = 0; i < t->count; i++)
        for (int64_t j = 0; j < t->size; j++) {
            float raw = (float)sdt_test_normal(rng);
            if (raw_out) raw_out[i * t->size + j] = raw;
            t->grad[i][j] += loss_scale * raw;
        }
    sdt_optimizer_note_backward(t->opt, loss_scale);
}

static inline void toy_zero(toy *t)
{
    sdt_error error = {0};
    if (sdt_optimizer_zero_grad(t->opt, &error) != SDT_CORE_OK) fprintf(stderr, "zero_grad: %s\n", error.message);
}

static inline float *toy_snapshot(const toy *t)
{
    float *s = kt_alloc((size_t)(t->count * t->size) * sizeof *s);
    for (int i = 0; i < t->count; i++) memcpy(s + i * t->size, t->param[i], (size_t)t->size * sizeof(float));
    return s;
}

static inline bool toy_params_equal(const toy *t, const float *snap)
{
    for (int i = 0; i < t->count; i++)
        if (memcmp(snap + i * t->size, t->param[i], (size_t)t->size * sizeof(float)) != 0) return false;
    return true;
}

static inline sdt_scaler *make_scaler(sdt_backend *be, float init, double gf, double bf, int64_t gi, bool shared,
                                      sdt_core_log_fn log, void *user)
{
    sdt_scaler_config cfg = sdt_scaler_config_default();
    cfg.init_scale = init;
    cfg.growth_factor = gf;
    cfg.backoff_factor = bf;
    cfg.growth_interval = gi;
    cfg.shared = shared;
    sdt_error error = {0};
    sdt_scaler *sc = sdt_scaler_create(be, &cfg, log, user, &error);
    if (!sc) {
        fprintf(stderr, "make_scaler: %s\n", error.message);
        exit(1);
    }
    return sc;
}

/* Attaches sc to t's optimizer and opens an iteration: a loss of 1 scaled, gradients zeroed. */
static inline void toy_begin_scaled(sdt_scaler *sc, toy *t)
{
    sdt_error error = {0};
    double scaled;
    if (sdt_scaler_attach(sc, t->opt, &error) != SDT_CORE_OK) fprintf(stderr, "attach: %s\n", error.message);
    sdt_scaler_scale_loss(sc, 1.0, 1, &scaled, &error);
    toy_zero(t);
}

/* Collects log lines. */
typedef struct log_sink {
    int count;
    int warnings;
    char last[512];
} log_sink;

static inline void log_sink_fn(void *user, sdt_core_log_level level, const char *message)
{
    log_sink *s = user;
    s->count++;
    if (level >= SDT_CORE_LOG_WARNING) s->warnings++;
    snprintf(s->last, sizeof s->last, "%s", message);
}

/* One full iteration with a single-value raw grad per optimizer:
 * zero_grad, scale_loss, backward (raw * scale), step each, update.
 * Returns the status of the first failing call. */
static inline sdt_core_status scaled_iteration(sdt_scaler *sc, toy *toys, int n, const float *raw, bool *stepped,
                                               sdt_scaler_update_info *info, sdt_error *error)
{
    double scaled;
    sdt_core_status st = sdt_scaler_scale_loss(sc, 1.0, 1, &scaled, error);
    if (st != SDT_CORE_OK) return st;
    float s = sdt_scaler_get_scale(sc);
    for (int k = 0; k < n; k++) {
        toy_zero(&toys[k]);
        toy_backward_fill(&toys[k], s, raw[k]);
    }
    for (int k = 0; k < n; k++) {
        st = sdt_scaler_step(sc, toys[k].opt, stepped ? &stepped[k] : NULL, error);
        if (st != SDT_CORE_OK) return st;
    }
    return sdt_scaler_update(sc, info, error);
}

#endif
