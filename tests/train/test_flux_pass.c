/* test_flux_pass.c - the training pass on Flux.1's architecture (train/sd_pass.h through train/sd_cond.h's Flux
 * branch), on a tiny random Flux dev checkpoint (sd3_gen with SD_FAMILY_TINY_FLUX) on the CPU:
 *   - the embedding's rows are table-major (clip_l [n, 32], no clip_g, then t5xxl [n, 96]); the gradient of each
 *     table agrees with central differences of the pass's loss along a direction inside that table: the Flux
 *     transformer's backward to the context and the pooled vector, CLIP-L's pooled output, T5 and the views;
 *   - trained tables only: a pass training CLIP-L alone leaves t5xxl's gradient untouched, one training T5 alone
 *     CLIP-L's;
 *   - dev's guidance reaches the transformer (another value, another loss);
 *   - plain gradient descent on the rows lowers the loss on a fixed batch;
 *   - f16 weights with the transformer's activations in f32 (an fp16 run without bf16): more memory measured than
 *     with f16 activations, a finite loss near the f32 model's and finite row gradients;
 *   - a pass without rows runs forward only. */
#include <math.h>
#include <string.h>

#include "flow_pass_check.h"

#define NV FLOW_PASS_NV

static void check_gradient(sdt_test_rng *rng, sd_runtime *rt, work_arena *wa, flow_pass_problem *p)
{
    sdt_pass_inputs in = flow_pass_inputs(p);
    float *rows = flow_pass_check_tables(rng, rt, wa, &in, NV, "Flux");
    if (!rows) return;
    int width = flow_pass_width(rt);
    sdt_error error = {0};
    /* dev's guidance is a model input: another value, another loss */
    double with_guidance, other;
    in.guidance = 1.0f;
    bool guided = pass_check_loss(rt, wa, &in, NV, rows, width, 0, NULL, &other, &error);
    in.guidance = 3.5f;
    guided = guided && pass_check_loss(rt, wa, &in, NV, rows, width, 0, NULL, &with_guidance, &error);
    printf("loss at guidance 3.5: %.9g, at 1: %.9g\n", with_guidance, other);
    CHECK(guided && with_guidance != other, "the guidance does not reach the transformer (%s)",
          guided ? "the same loss" : error.message);
    /* no rows: forward only */
    in.n_overrides = 0, in.n_t5_overrides = 0;
    pass_check_without_rows(rt, wa, &in);
    free(rows);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("test_flux_pass");
    sd_config cfg = sd_config_preset(SD_FAMILY_TINY_FLUX);
    const bool in[SD_PART_COUNT] = {true, true, false, true, true};
    flow_pass_model m;
    bool ok = flow_pass_model_open(&m, &rng, "sdt-fluxpass-XXXXXX", "flux_tiny.safetensors", &cfg, in, "Flux");
    CHECK(!ok || m.rt.model.flux, "the tiny Flux model opens as Flux");
    if (ok) {
        flow_pass_problem p;
        flow_pass_make_problem(&rng, &m.rt, &p);
        p.guidance = 3.5f; /* Flux dev's */
        work_arena wa = {0};
        check_gradient(&rng, &m.rt, &wa, &p);
        sdt_pass_inputs pin = flow_pass_inputs(&p);
        flow_pass_check_descent(&rng, &m.rt, &wa, &pin, NV);
        flow_pass_check_f32_transformer(&rng, &m.rt, m.path, &wa, &pin, "Flux");
        work_arena_release(&wa);
        free(p.noisy), free(p.target);
    }
    flow_pass_model_close(&m);
    return sdt_test_finish("test_flux_pass");
}
