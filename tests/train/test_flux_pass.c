/* test_flux_pass.c - the training pass on Flux.1's architecture (train/sd_pass.h through train/sd_cond.h's Flux
 * branch), on a tiny random Flux dev checkpoint (sd3_gen with SD_FAMILY_TINY_FLUX) on the CPU:
 *   - the embedding's rows are table-major (clip_l [n, 32], no clip_g, then t5xxl [n, 96]); the gradient of each
 *     table agrees with central differences of the pass's loss along a direction inside that table: the Flux
 *     transformer's backward to the context and the pooled vector, CLIP-L's pooled output, T5 and the views;
 *   - trained tables only: a pass training CLIP-L alone leaves t5xxl's gradient untouched, one training T5 alone
 *     CLIP-L's;
 *   - dev's guidance reaches the transformer (another value, another loss);
 *   - plain gradient descent on the rows lowers the loss on a fixed batch;
 *   - a pass without rows runs forward only. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "../models/model_test_util.h"
#include "sd3_gen.h"
#include "sdtrain.h"
#include "train/prompt.h"
#include "train/sd_pass.h"
#include "train/work_arena.h"

#define B 2
#define NV 2 /* embedding vectors */
#define END 999
#define T SDT_PROMPT_TOKENS
#define L5 8 /* T5's sequence: short for the test */

typedef struct problem {
    int32_t tokens[B * T], t5[B * L5];
    clip_override ov[B * NV];
    t5_override ov5[B * NV];
    float *noisy, *target, ts[B];
    float guidance; /* Flux dev's */
    sdt_pass_shape shape;
} problem;

static void make_problem(sdt_test_rng *rng, sd_runtime *rt, problem *p)
{
    memset(p, 0, sizeof *p);
    int c = rt->cfg.vae.z_channels, h = 4, w = 4;
    p->shape = (sdt_pass_shape){.batch = B, .c = c, .h = h, .w = w, .chunks = 1, .in_c = c, .t5_len = L5};
    int n = 0;
    for (int b = 0; b < B; b++) {
        int32_t *t = p->tokens + b * T, *t5 = p->t5 + b * L5;
        t[0] = END - 1;                                            /* start */
        t[1] = 5 + b, t[2] = 0, t[3] = 0, t[4] = 17;               /* slots of the embedding at 2 and 3 */
        for (int i = 5; i < T; i++) t[i] = END;                    /* CLIP-L pads with the end token */
        t5[0] = 7 + b, t5[1] = 0, t5[2] = 0, t5[3] = 9, t5[4] = 1; /* slots at 1 and 2, </s>, then <pad> 0 */
        for (int r = 0; r < NV; r++) {
            p->ov5[n] = (t5_override){b, 1 + r, r};
            p->ov[n++] = (clip_override){b, 2 + r, r};
        }
        p->ts[b] = (float)(300 + 400 * b); /* 1000 t */
    }
    p->guidance = 3.5f;
    int64_t numel = (int64_t)B * c * h * w;
    p->noisy = mt_alloc((size_t)numel * sizeof(float));
    p->target = mt_alloc((size_t)numel * sizeof(float));
    for (int64_t i = 0; i < numel; i++)
        p->noisy[i] = (float)sdt_test_normal(rng), p->target[i] = (float)sdt_test_normal(rng);
}

static sdt_pass_inputs inputs_of(problem *p)
{
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
                          .n_t5_overrides = B * NV,
                          .guidance = p->guidance};
    return in;
}

/* The pass's loss at rows (host, table-major, NV x width values); with grad, its gradient too (tables: which). */
static bool pass_loss(sd_runtime *rt, work_arena *wa, problem *p, const float *rows, int width, uint32_t tables,
                      float *grad, double *loss, sdt_error *error)
{
    sdt_backend *be = rt->be;
    int64_t shape[2] = {NV, width};
    float *g = mt_alloc((size_t)NV * width * sizeof(float));
    sdt_tensor r = sdt_tensor_make((void *)rows, SDT_F32, SDT_DEVICE_CPU, 2, shape),
               dr = sdt_tensor_make(g, SDT_F32, SDT_DEVICE_CPU, 2, shape);
    sdt_pass_options po = {.clip_skip = 0};
    sdt_pass_trainables tr = {.rows = &r, .drows = grad ? &dr : NULL, .tables = tables};
    sdt_pass_inputs in = inputs_of(p);
    size_t bytes;
    bool ok = sdt_pass_measure(rt, &po, &p->shape, &tr, &bytes, error) && work_arena_reserve(wa, be, bytes, error) &&
              sdt_pass_run(rt, wa, &po, &in, &tr, 1.0f, grad != NULL, loss, error);
    if (ok && grad) memcpy(grad, g, (size_t)NV * width * sizeof(float));
    free(g);
    return ok;
}

static const char *const table_name[3] = {"clip_l", "clip_g", "t5xxl"};

/* Where table k starts in the table-major rows, and how many values it holds. */
static void table_span(const int w[3], int k, int *from, int *count)
{
    *from = 0;
    for (int i = 0; i < k; i++) *from += NV * w[i];
    *count = NV * w[k];
}

static void check_gradient(sdt_test_rng *rng, sd_runtime *rt, work_arena *wa, problem *p)
{
    int w[3] = {rt->cfg.clip.width, rt->cfg.clip2.width, rt->cfg.t5.d_model}, width = w[0] + w[1] + w[2];
    float *rows = mt_alloc((size_t)NV * width * sizeof(float)), *grad = mt_alloc((size_t)NV * width * sizeof(float));
    for (int i = 0; i < NV * width; i++) rows[i] = (float)(0.5 * sdt_test_normal(rng));
    sdt_error error = {0};
    double loss;
    if (!pass_loss(rt, wa, p, rows, width, 0, grad, &loss, &error)) {
        CHECK(false, "the Flux pass: %s", error.message);
        return;
    }
    CHECK(isfinite(loss) && loss > 0, "loss %g", loss);
    float *moved = mt_alloc((size_t)NV * width * sizeof(float)), *dir = mt_alloc((size_t)NV * width * sizeof(float));
    for (int k = 0; k < 3; k++) {
        int from, count;
        table_span(w, k, &from, &count);
        if (count == 0) continue; /* Flux has no clip_g */
        double analytic = 0, norm = 0;
        for (int i = 0; i < NV * width; i++) {
            dir[i] = i >= from && i < from + count ? (float)sdt_test_normal(rng) : 0.0f;
            analytic += (double)dir[i] * grad[i];
            norm += (double)dir[i] * dir[i];
        }
        double h = 2e-3 / sqrt(norm), l[2];
        for (int s = 0; s < 2; s++) {
            for (int i = 0; i < NV * width; i++) moved[i] = rows[i] + (float)((s ? -h : h) * dir[i]);
            if (!pass_loss(rt, wa, p, moved, width, 0, NULL, &l[s], &error))
                CHECK(false, "the Flux pass: %s", error.message);
        }
        double fd = (l[0] - l[1]) / (2 * h), rel = fabs(fd - analytic) / fmax(fabs(fd), 1e-9);
        printf("%s table: d(loss) along a random direction: analytic %.6g, central differences %.6g (rel %.3g)\n",
               table_name[k], analytic, fd, rel);
        CHECK(fabs(analytic) > 1e-7, "the %s table gets no gradient (%g)", table_name[k], analytic);
        CHECK(rel <= 4e-2, "the %s table's gradient disagrees with central differences: %.6g vs %.6g", table_name[k],
              analytic, fd);
    }
    /* one table trains: the others' gradients stay as they were (zero here) */
    const uint32_t alone[2] = {SDT_ENCODER_CLIP_L, SDT_ENCODER_T5XXL};
    for (int a = 0; a < 2; a++) {
        float *g1 = mt_alloc((size_t)NV * width * sizeof(float));
        bool ok = pass_loss(rt, wa, p, rows, width, alone[a], g1, &loss, &error);
        CHECK(ok, "a pass training %s alone: %s", a ? "t5xxl" : "clip_l", error.message);
        for (int k = 0; ok && k < 3; k++) {
            int from, count;
            table_span(w, k, &from, &count);
            bool trains = (k == 0 && a == 0) || (k == 2 && a == 1);
            double diff = 0, mag = 0;
            for (int i = from; i < from + count; i++) diff += fabs(g1[i] - grad[i]), mag += fabs(g1[i]);
            if (trains)
                CHECK(diff <= 1e-5 * fmax(mag, 1e-12) + 1e-12 && mag > 0,
                      "training %s alone: its gradient is the full pass's (difference %g of %g)", table_name[k], diff,
                      mag);
            else
                CHECK(mag == 0, "training %s alone: the %s table got a gradient (%g)", a ? "t5xxl" : "clip_l",
                      table_name[k], mag);
        }
        free(g1);
    }
    /* dev's guidance is a model input: another value, another loss */
    double with_guidance, other;
    p->guidance = 1.0f;
    bool guided = pass_loss(rt, wa, p, rows, width, 0, NULL, &other, &error);
    p->guidance = 3.5f;
    guided = guided && pass_loss(rt, wa, p, rows, width, 0, NULL, &with_guidance, &error);
    printf("loss at guidance 3.5: %.9g, at 1: %.9g\n", with_guidance, other);
    CHECK(guided && with_guidance != other, "the guidance does not reach the transformer (%s)",
          guided ? "the same loss" : error.message);
    /* no rows: forward only */
    sdt_pass_trainables none = {0};
    sdt_pass_inputs in = inputs_of(p);
    in.n_overrides = 0, in.n_t5_overrides = 0;
    size_t bytes;
    sdt_pass_options po = {.clip_skip = 0};
    CHECK(sdt_pass_measure(rt, &po, &p->shape, &none, &bytes, &error) &&
              work_arena_reserve(wa, rt->be, bytes, &error) &&
              sdt_pass_run(rt, wa, &po, &in, &none, 1.0f, true, &loss, &error) && isfinite(loss),
          "a pass without rows: %s", error.message);
    free(rows), free(grad), free(moved), free(dir);
}

/* Gradient descent on the rows (every table) lowers the loss on a fixed batch. */
static void check_descent(sdt_test_rng *rng, sd_runtime *rt, work_arena *wa, problem *p)
{
    int width = rt->cfg.clip.width + rt->cfg.clip2.width + rt->cfg.t5.d_model;
    float *rows = mt_alloc((size_t)NV * width * sizeof(float)), *grad = mt_alloc((size_t)NV * width * sizeof(float));
    for (int i = 0; i < NV * width; i++) rows[i] = (float)(0.5 * sdt_test_normal(rng));
    sdt_error error = {0};
    double first = 0, loss = 0;
    bool ok = true;
    for (int step = 0; ok && step < 6; step++) {
        ok = pass_loss(rt, wa, p, rows, width, 0, grad, &loss, &error);
        if (step == 0) first = loss;
        double norm = 0;
        for (int i = 0; i < NV * width; i++) norm += (double)grad[i] * grad[i];
        double lr = 0.05 / fmax(sqrt(norm), 1e-12); /* normalised steps: the tiny model's scale is arbitrary */
        for (int i = 0; ok && i < NV * width; i++) rows[i] -= (float)(lr * grad[i]);
    }
    ok = ok && pass_loss(rt, wa, p, rows, width, 0, NULL, &loss, &error);
    printf("gradient descent on the rows: loss %.6f -> %.6f\n", first, loss);
    CHECK(ok && loss < first, "the loss does not go down: %.6f -> %.6f (%s)", first, loss, ok ? "" : error.message);
    free(rows), free(grad);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("test_flux_pass");
    sdt_backend *be = sdt_backend_cpu_create(2);
    char *dir = g_dir_make_tmp("sdt-fluxpass-XXXXXX", NULL);
    CHECK(be && dir, "backend and temp folder");
    if (!be || !dir) return sdt_test_finish("test_flux_pass");
    char *path = g_strdup_printf("%s/flux_tiny.safetensors", dir);
    sd_config cfg = sd_config_preset(SD_FAMILY_TINY_FLUX);
    const bool in[SD_PART_COUNT] = {true, true, false, true, true};
    sdt_error error = {0};
    sd_runtime rt;
    bool ok = sd3_generate(path, &cfg, in, SDT_F32, sdt_test_next(&rng), true, &error) &&
              sd_runtime_open(&rt, path, be, SDT_F32, SD_PREDICTION_AUTO, false, &error);
    CHECK(ok && rt.model.flux, "the tiny Flux model: %s", error.message);
    if (ok) {
        problem p;
        make_problem(&rng, &rt, &p);
        work_arena wa = {0};
        check_gradient(&rng, &rt, &wa, &p);
        check_descent(&rng, &rt, &wa, &p);
        work_arena_release(&wa);
        free(p.noisy), free(p.target);
        sd_runtime_close(&rt);
    }
    g_remove(path);
    g_rmdir(dir);
    g_free(path);
    g_free(dir);
    be->destroy(be);
    return sdt_test_finish("test_flux_pass");
}
