/* flow_pass_check.h - what the training-pass tests of the rectified-flow transformers share (header only:
 * test_sd3_pass, test_flux_pass; test_flow_memory and test_t5_cache take its tiny model and batch), on top of
 * pass_check.h: a tiny random checkpoint (sd3_gen) opened on the CPU, a fixed batch, the table-major rows (clip_l
 * [n, w0], clip_g [n, w1] (none on Flux), t5xxl [n, w2]) checked table by table against central differences, each
 * table training alone, and gradient descent on the rows. */
#ifndef SDT_TEST_TRAIN_FLOW_PASS_CHECK_H
#define SDT_TEST_TRAIN_FLOW_PASS_CHECK_H

#include <glib.h>
#include <glib/gstdio.h>

#include "pass_check.h"
#include "sd3_gen.h"
#include "sdtrain.h"
#include "train/prompt.h"

#define FLOW_PASS_B 2     /* batch */
#define FLOW_PASS_NV 2    /* embedding vectors */
#define FLOW_PASS_END 999 /* CLIP's end token (and padding) */
#define FLOW_PASS_L5 8    /* T5's sequence: short for the tests */

/* A fixed batch: CLIP ids with the embedding's slots at 2 and 3, T5 ids with them at 1 and 2, random noisy latents
 * and targets of side x side (the caller frees them), two timesteps; guidance 0 (Flux dev's test sets it). */
typedef struct flow_pass_problem {
    int32_t tokens[FLOW_PASS_B * SDT_PROMPT_TOKENS], t5[FLOW_PASS_B * FLOW_PASS_L5];
    clip_override ov[FLOW_PASS_B * FLOW_PASS_NV];
    t5_override ov5[FLOW_PASS_B * FLOW_PASS_NV];
    float *noisy, *target, ts[FLOW_PASS_B];
    float guidance;
    sdt_pass_shape shape;
} flow_pass_problem;

static inline void flow_pass_make_problem_sized(sdt_test_rng *rng, const sd_runtime *rt, int side, flow_pass_problem *p)
{
    enum { B = FLOW_PASS_B, T = SDT_PROMPT_TOKENS, L5 = FLOW_PASS_L5, END = FLOW_PASS_END };
    memset(p, 0, sizeof *p);
    int c = rt->cfg.vae.z_channels, h = side, w = side;
    p->shape = (sdt_pass_shape){.batch = B, .c = c, .h = h, .w = w, .chunks = 1, .in_c = c, .t5_len = L5};
    int n = 0;
    for (int b = 0; b < B; b++) {
        int32_t *t = p->tokens + b * T, *t5 = p->t5 + b * L5;
        t[0] = END - 1;                                            /* start */
        t[1] = 5 + b, t[2] = 0, t[3] = 0, t[4] = 17;               /* slots of the embedding at 2 and 3 */
        for (int i = 5; i < T; i++) t[i] = END;                    /* CLIP-L pads with the end token */
        t5[0] = 7 + b, t5[1] = 0, t5[2] = 0, t5[3] = 9, t5[4] = 1; /* slots at 1 and 2, </s>, then <pad> 0 */
        for (int r = 0; r < FLOW_PASS_NV; r++) {
            p->ov5[n] = (t5_override){b, 1 + r, r};
            p->ov[n++] = (clip_override){b, 2 + r, r};
        }
        p->ts[b] = (float)(300 + 400 * b); /* 1000 t */
    }
    pass_check_latents(rng, (int64_t)B * c * h * w, &p->noisy, &p->target);
}

/* The batch on 4 x 4 latents (the pass tests'). */
static inline void flow_pass_make_problem(sdt_test_rng *rng, const sd_runtime *rt, flow_pass_problem *p)
{
    flow_pass_make_problem_sized(rng, rt, 4, p);
}

static inline sdt_pass_inputs flow_pass_inputs(const flow_pass_problem *p)
{
    sdt_pass_inputs in = pass_check_inputs(p->shape, p->tokens, p->ov, FLOW_PASS_B * FLOW_PASS_NV, p->noisy, p->target,
                                           p->ts, FLOW_PASS_END);
    in.t5_tokens = p->t5, in.t5_overrides = p->ov5, in.n_t5_overrides = FLOW_PASS_B * FLOW_PASS_NV;
    in.guidance = p->guidance;
    return in;
}

static const char *const flow_pass_table_name[3] = {"clip_l", "clip_g", "t5xxl"};

/* Where table k starts in the table-major rows of nv vectors, and how many values it holds. */
static inline void flow_pass_table_span(const int w[3], int nv, int k, int *from, int *count)
{
    *from = 0;
    for (int i = 0; i < k; i++) *from += nv * w[i];
    *count = nv * w[k];
}

static inline int flow_pass_width(const sd_runtime *rt)
{
    return rt->cfg.clip.width + rt->cfg.clip2.width + rt->cfg.t5.d_model;
}

/* Random rows (0.5 N(0, 1)); each table's gradient against central differences along a direction inside it (a
 * table of width 0 skipped); a pass training CLIP-L alone or T5 alone gives its table the full pass's gradient and
 * the others none. Returns the rows (the caller frees them), NULL when the first pass failed (said). */
static inline float *flow_pass_check_tables(sdt_test_rng *rng, sd_runtime *rt, work_arena *wa,
                                            const sdt_pass_inputs *in, int nv, const char *family)
{
    int w[3] = {rt->cfg.clip.width, rt->cfg.clip2.width, rt->cfg.t5.d_model}, width = w[0] + w[1] + w[2];
    float *rows = mt_alloc((size_t)nv * width * sizeof(float)), *grad = mt_alloc((size_t)nv * width * sizeof(float));
    for (int i = 0; i < nv * width; i++) rows[i] = (float)(0.5 * sdt_test_normal(rng));
    sdt_error error = {0};
    double loss;
    if (!pass_check_loss(rt, wa, in, nv, rows, width, 0, grad, &loss, &error)) {
        CHECK(false, "the %s pass: %s", family, error.message);
        free(rows), free(grad);
        return NULL;
    }
    CHECK(isfinite(loss) && loss > 0, "loss %g", loss);
    float *moved = mt_alloc((size_t)nv * width * sizeof(float)), *dir = mt_alloc((size_t)nv * width * sizeof(float));
    for (int k = 0; k < 3; k++) {
        int from, count;
        flow_pass_table_span(w, nv, k, &from, &count);
        if (count == 0) continue; /* Flux has no clip_g */
        for (int i = 0; i < nv * width; i++)
            dir[i] = i >= from && i < from + count ? (float)sdt_test_normal(rng) : 0.0f;
        char part[32];
        snprintf(part, sizeof part, "%s table", flow_pass_table_name[k]);
        pass_check_direction(rt, wa, in, nv, rows, width, grad, dir, moved, part, family);
    }
    /* one table trains: the others' gradients stay as they were (zero here) */
    const uint32_t alone[2] = {SDT_ENCODER_CLIP_L, SDT_ENCODER_T5XXL};
    for (int a = 0; a < 2; a++) {
        float *g1 = mt_alloc((size_t)nv * width * sizeof(float));
        bool ok = pass_check_loss(rt, wa, in, nv, rows, width, alone[a], g1, &loss, &error);
        CHECK(ok, "a pass training %s alone: %s", a ? "t5xxl" : "clip_l", error.message);
        for (int k = 0; ok && k < 3; k++) {
            int from, count;
            flow_pass_table_span(w, nv, k, &from, &count);
            bool trains = (k == 0 && a == 0) || (k == 2 && a == 1);
            double diff = 0, mag = 0;
            for (int i = from; i < from + count; i++) diff += fabs(g1[i] - grad[i]), mag += fabs(g1[i]);
            if (trains)
                CHECK(diff <= 1e-5 * fmax(mag, 1e-12) + 1e-12 && mag > 0,
                      "training %s alone: its gradient is the full pass's (difference %g of %g)",
                      flow_pass_table_name[k], diff, mag);
            else
                CHECK(mag == 0, "training %s alone: the %s table got a gradient (%g)", a ? "t5xxl" : "clip_l",
                      flow_pass_table_name[k], mag);
        }
        free(g1);
    }
    free(grad), free(moved), free(dir);
    return rows;
}

/* Gradient descent on the rows (every table) lowers the loss on a fixed batch. */
static inline void flow_pass_check_descent(sdt_test_rng *rng, sd_runtime *rt, work_arena *wa, const sdt_pass_inputs *in,
                                           int nv)
{
    int width = flow_pass_width(rt);
    float *rows = mt_alloc((size_t)nv * width * sizeof(float)), *grad = mt_alloc((size_t)nv * width * sizeof(float));
    for (int i = 0; i < nv * width; i++) rows[i] = (float)(0.5 * sdt_test_normal(rng));
    sdt_error error = {0};
    double first = 0, loss = 0;
    bool ok = true;
    for (int step = 0; ok && step < 6; step++) {
        ok = pass_check_loss(rt, wa, in, nv, rows, width, 0, grad, &loss, &error);
        if (step == 0) first = loss;
        double norm = 0;
        for (int i = 0; i < nv * width; i++) norm += (double)grad[i] * grad[i];
        double lr = 0.05 / fmax(sqrt(norm), 1e-12); /* normalised steps: the tiny model's scale is arbitrary */
        for (int i = 0; ok && i < nv * width; i++) rows[i] -= (float)(lr * grad[i]);
    }
    ok = ok && pass_check_loss(rt, wa, in, nv, rows, width, 0, NULL, &loss, &error);
    printf("gradient descent on the rows: loss %.6f -> %.6f\n", first, loss);
    CHECK(ok && loss < first, "the loss does not go down: %.6f -> %.6f (%s)", first, loss, ok ? "" : error.message);
    free(rows), free(grad);
}

/* An fp16 run without bf16 (train_job_prepare.c's flow_precision): the weights in f16 (rt reopened so, from path)
 * and the transformer's activations in f32 (rt->transformer_act_dtype). The pass measures more than with f16
 * activations (the transformer's tensors are f32), its loss and row gradients are finite, the gradients nonzero, and
 * the loss within 1% of the f32 runtime's (f16 weights and text encoders differ from it only by rounding). rt is
 * left open in f32. */
static inline void flow_pass_check_f32_transformer(sdt_test_rng *rng, sd_runtime *rt, const char *path, work_arena *wa,
                                                   const sdt_pass_inputs *in, const char *family)
{
    const int width = flow_pass_width(rt), n = FLOW_PASS_NV * width;
    float *rows = mt_alloc((size_t)n * sizeof(float)), *grad = mt_alloc((size_t)n * sizeof(float));
    for (int i = 0; i < n; i++) rows[i] = (float)(0.5 * sdt_test_normal(rng));
    sdt_pass_options po = {.clip_skip = 0};
    double ref = 0, l16 = 0, l32 = 0;
    size_t b16 = 0, b32 = 0;
    sdt_error error = {0};
    bool ok = pass_check_loss_with(rt, wa, in, &po, FLOW_PASS_NV, rows, width, 0, NULL, &ref, NULL, &error);
    sdt_backend *be = rt->be;
    sd_runtime_close(rt);
    ok = ok && sd_runtime_open(rt, path, be, SDT_F16, SD_PREDICTION_AUTO, false, &error);
    CHECK(ok && rt->transformer_act_dtype == SDT_F16, "%s in f16: %s", family, error.message);
    ok = ok && pass_check_loss_with(rt, wa, in, &po, FLOW_PASS_NV, rows, width, 0, grad, &l16, &b16, &error);
    rt->transformer_act_dtype = SDT_F32;
    ok = ok && pass_check_loss_with(rt, wa, in, &po, FLOW_PASS_NV, rows, width, 0, grad, &l32, &b32, &error);
    CHECK(ok, "the %s pass with f16 weights and f32 transformer activations: %s", family, error.message);
    double gmax = 0;
    bool finite = isfinite(l32);
    for (int i = 0; i < n; i++) finite = finite && isfinite(grad[i]), gmax = fmax(gmax, fabs(grad[i]));
    printf("%s f16 weights: loss %.9g with f16 activations (%zu bytes measured), %.9g with the transformer's in f32 "
           "(%zu bytes); f32 runtime %.9g\n",
           family, l16, b16, l32, b32, ref);
    CHECK(!ok || b32 > b16, "%s: f32 transformer activations measured %zu bytes, no more than f16's %zu", family, b32,
          b16);
    CHECK(!ok || (finite && gmax > 0), "%s: the f32-activation pass's loss or row gradients are not finite or zero",
          family);
    CHECK(!ok || fabs(l32 - ref) <= 0.01 * fabs(ref), "%s: loss %.9g with f16 weights, %.9g in f32", family, l32, ref);
    sd_runtime_close(rt);
    CHECK(sd_runtime_open(rt, path, be, SDT_F32, SD_PREDICTION_AUTO, false, &error), "%s in f32 again: %s", family,
          error.message);
    free(rows), free(grad);
}

/* A tiny random checkpoint of cfg (the parts in[]) written to a temp folder and opened on a 2-thread CPU backend. */
typedef struct flow_pass_model {
    sdt_backend *be;
    char *dir, *path;
    sd_runtime rt;
    bool open;
} flow_pass_model;

/* false (said) when the backend, the folder or the model failed; close it either way. */
static inline bool flow_pass_model_open(flow_pass_model *m, sdt_test_rng *rng, const char *dir_pattern,
                                        const char *file, const sd_config *cfg, const bool in[SD_PART_COUNT],
                                        const char *what)
{
    memset(m, 0, sizeof *m);
    m->be = sdt_backend_cpu_create(2);
    m->dir = g_dir_make_tmp(dir_pattern, NULL);
    CHECK(m->be && m->dir, "backend and temp folder");
    if (!m->be || !m->dir) return false;
    m->path = g_strdup_printf("%s/%s", m->dir, file);
    sd_config c = *cfg;
    sdt_error error = {0};
    m->open = sd3_generate(m->path, &c, in, SDT_F32, sdt_test_next(rng), true, &error) &&
              sd_runtime_open(&m->rt, m->path, m->be, SDT_F32, SD_PREDICTION_AUTO, false, &error);
    CHECK(m->open, "the tiny %s model: %s", what, error.message);
    return m->open;
}

static inline void flow_pass_model_close(flow_pass_model *m)
{
    if (m->open) sd_runtime_close(&m->rt);
    if (m->path) g_remove(m->path);
    if (m->dir) g_rmdir(m->dir);
    g_free(m->path);
    g_free(m->dir);
    if (m->be) m->be->destroy(m->be);
}

#endif
