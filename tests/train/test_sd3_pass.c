/* test_sd3_pass.c - the training pass on SD3.5's architecture (train/sd_pass.h through train/sd_cond.h's SD3
 * branch), on a tiny random SD3.5 checkpoint (sd3_gen) on the CPU:
 *   - the embedding's rows are table-major (clip_l [n, 32], then clip_g [n, 48], then t5xxl [n, 96]); the
 *     gradient of each table agrees with central differences of the pass's loss along a direction inside that
 *     table: the MMDiT's backward to the context and the pooled vector, the zero padding, CLIP's penultimate
 *     layers and projections, T5 and the views into the rows;
 *   - trained tables only: a pass training CLIP-L alone leaves clip_g's and t5xxl's gradients untouched, one
 *     training T5 alone CLIP's;
 *   - plain gradient descent on the rows lowers the loss on a fixed batch;
 *   - gradient checkpointing in the MMDiT gives the same loss and row gradients, bit for bit;
 *   - a pass without rows runs forward only. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "../models/model_test_util.h"
#include "sd3_gen.h"
#include "sdtrain.h"
#include "pass_check.h"
#include "train/prompt.h"

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
    pass_check_latents(rng, (int64_t)B * c * h * w, &p->noisy, &p->target);
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
                          .n_t5_overrides = B * NV};
    return in;
}

/* The pass's loss at rows (host, table-major, NV x width values); with grad, its gradient too (tables: which),
 * the MMDiT checkpointed or not; *bytes the measured arena. */
static bool pass_loss_with(sd_runtime *rt, work_arena *wa, problem *p, const float *rows, int width, uint32_t tables,
                           bool checkpointing, float *grad, double *loss, size_t *bytes, sdt_error *error)
{
    sdt_pass_inputs in = inputs_of(p);
    sdt_pass_options po = {.clip_skip = 0, .checkpointing = checkpointing};
    return pass_check_loss_with(rt, wa, &in, &po, NV, rows, width, tables, grad, loss, bytes, error);
}

static bool pass_loss(sd_runtime *rt, work_arena *wa, problem *p, const float *rows, int width, uint32_t tables,
                      float *grad, double *loss, sdt_error *error)
{
    size_t bytes;
    return pass_loss_with(rt, wa, p, rows, width, tables, false, grad, loss, &bytes, error);
}

/* Gradient checkpointing in the MMDiT recomputes each block with the same ops: the loss and every table's row
 * gradient are the same bits, on an arena measured for it. */
static void check_checkpointing(sdt_test_rng *rng, sd_runtime *rt, work_arena *wa, problem *p)
{
    const int width = rt->cfg.clip.width + rt->cfg.clip2.width + rt->cfg.t5.d_model, n = NV * width;
    float *rows = mt_alloc((size_t)n * sizeof(float)), *g0 = mt_alloc((size_t)n * sizeof(float)),
          *g1 = mt_alloc((size_t)n * sizeof(float));
    for (int i = 0; i < n; i++) rows[i] = (float)(0.5 * sdt_test_normal(rng));
    double l0 = 0, l1 = 0;
    size_t b0 = 0, b1 = 0;
    sdt_error error = {0};
    bool ok = pass_loss_with(rt, wa, p, rows, width, 0, false, g0, &l0, &b0, &error) &&
              pass_loss_with(rt, wa, p, rows, width, 0, true, g1, &l1, &b1, &error);
    CHECK(ok, "the SD3 pass with checkpointing: %s", error.message);
    double gmax = 0;
    for (int i = 0; i < n; i++) gmax = fmax(gmax, fabs(g0[i]));
    CHECK(ok && gmax > 0 && l0 == l1 && !memcmp(g0, g1, (size_t)n * sizeof(float)),
          "checkpointing changed the loss (%.9g vs %.9g) or the rows' gradient", l0, l1);
    printf("checkpointing: the same loss and row gradients; the pass measured %zu bytes plain, %zu checkpointed\n", b0,
           b1);
    free(rows), free(g0), free(g1);
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
        CHECK(false, "the SD3 pass: %s", error.message);
        return;
    }
    CHECK(isfinite(loss) && loss > 0, "loss %g", loss);
    float *moved = mt_alloc((size_t)NV * width * sizeof(float)), *dir = mt_alloc((size_t)NV * width * sizeof(float));
    for (int k = 0; k < 3; k++) {
        int from, count;
        table_span(w, k, &from, &count);
        for (int i = 0; i < NV * width; i++)
            dir[i] = i >= from && i < from + count ? (float)sdt_test_normal(rng) : 0.0f;
        char part[32];
        snprintf(part, sizeof part, "%s table", table_name[k]);
        sdt_pass_inputs in = inputs_of(p);
        pass_check_direction(rt, wa, &in, NV, rows, width, grad, dir, moved, part, "SD3");
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
    /* no rows: forward only */
    sdt_pass_inputs in = inputs_of(p);
    in.n_overrides = 0, in.n_t5_overrides = 0;
    pass_check_without_rows(rt, wa, &in);
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
    sdt_test_rng rng = sdt_test_rng_from_env("test_sd3_pass");
    sdt_backend *be = sdt_backend_cpu_create(2);
    char *dir = g_dir_make_tmp("sdt-sd3pass-XXXXXX", NULL);
    CHECK(be && dir, "backend and temp folder");
    if (!be || !dir) return sdt_test_finish("test_sd3_pass");
    char *path = g_strdup_printf("%s/sd3.5_tiny.safetensors", dir);
    sd_config cfg = sd_config_preset(SD_FAMILY_TINY_SD3);
    const bool in[SD_PART_COUNT] = {true, true, true, true, true};
    sdt_error error = {0};
    sd_runtime rt;
    bool ok = sd3_generate(path, &cfg, in, SDT_F32, sdt_test_next(&rng), true, &error) &&
              sd_runtime_open(&rt, path, be, SDT_F32, SD_PREDICTION_AUTO, false, &error);
    CHECK(ok, "the tiny SD3.5 model: %s", error.message);
    if (ok) {
        problem p;
        make_problem(&rng, &rt, &p);
        work_arena wa = {0};
        check_gradient(&rng, &rt, &wa, &p);
        check_descent(&rng, &rt, &wa, &p);
        check_checkpointing(&rng, &rt, &wa, &p);
        work_arena_release(&wa);
        free(p.noisy), free(p.target);
        sd_runtime_close(&rt);
    }
    g_remove(path);
    g_rmdir(dir);
    g_free(path);
    g_free(dir);
    be->destroy(be);
    return sdt_test_finish("test_sd3_pass");
}
