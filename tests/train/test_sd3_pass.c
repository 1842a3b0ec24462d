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
 *   - f16 weights with the transformer's activations in f32 (an fp16 run without bf16): more memory measured than
 *     with f16 activations, a finite loss near the f32 model's and finite row gradients;
 *   - a pass without rows runs forward only. */
#include <math.h>
#include <string.h>

#include "flow_pass_check.h"

#define NV FLOW_PASS_NV

/* The pass's loss at rows (host, table-major, NV x width values); with grad, its gradient too (tables: which),
 * the MMDiT checkpointed or not; *bytes the measured arena. */
static bool pass_loss_with(sd_runtime *rt, work_arena *wa, const flow_pass_problem *p, const float *rows, int width,
                           uint32_t tables, bool checkpointing, float *grad, double *loss, size_t *bytes,
                           sdt_error *error)
{
    sdt_pass_inputs in = flow_pass_inputs(p);
    sdt_pass_options po = {.clip_skip = 0, .checkpointing = checkpointing};
    return pass_check_loss_with(rt, wa, &in, &po, NV, rows, width, tables, grad, loss, bytes, error);
}

/* Gradient checkpointing in the MMDiT recomputes each block with the same ops: the loss and every table's row
 * gradient are the same bits, on an arena measured for it. */
static void check_checkpointing(sdt_test_rng *rng, sd_runtime *rt, work_arena *wa, const flow_pass_problem *p)
{
    const int width = flow_pass_width(rt), n = NV * width;
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

static void check_gradient(sdt_test_rng *rng, sd_runtime *rt, work_arena *wa, const flow_pass_problem *p)
{
    sdt_pass_inputs in = flow_pass_inputs(p);
    float *rows = flow_pass_check_tables(rng, rt, wa, &in, NV, "SD3");
    if (!rows) return;
    /* no rows: forward only */
    in.n_overrides = 0, in.n_t5_overrides = 0;
    pass_check_without_rows(rt, wa, &in);
    free(rows);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("test_sd3_pass");
    sd_config cfg = sd_config_preset(SD_FAMILY_TINY_SD3);
    const bool in[SD_PART_COUNT] = {true, true, true, true, true};
    flow_pass_model m;
    if (flow_pass_model_open(&m, &rng, "sdt-sd3pass-XXXXXX", "sd3.5_tiny.safetensors", &cfg, in, "SD3.5")) {
        flow_pass_problem p;
        flow_pass_make_problem(&rng, &m.rt, &p);
        work_arena wa = {0};
        check_gradient(&rng, &m.rt, &wa, &p);
        sdt_pass_inputs pin = flow_pass_inputs(&p);
        flow_pass_check_descent(&rng, &m.rt, &wa, &pin, NV);
        flow_pass_check_f32_transformer(&rng, &m.rt, m.path, &wa, &pin, "SD3.5");
        check_checkpointing(&rng, &m.rt, &wa, &p);
        work_arena_release(&wa);
        free(p.noisy), free(p.target);
    }
    flow_pass_model_close(&m);
    return sdt_test_finish("test_sd3_pass");
}
