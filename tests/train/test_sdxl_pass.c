/* test_sdxl_pass.c - the training pass on SDXL's architecture (train/sd_pass.h through
 * train/sd_cond.h), on a tiny random SDXL checkpoint on the CPU:
 *   - the embedding's gradient (rows side by side: clip_l | clip_g) agrees with central differences
 *     of the pass's loss, along a direction in each encoder's half: this covers the UNet's d(y)
 *     reaching bigG through the pooled embedding (without it clip_g is 2.9% off at the default
 *     seed, against 0.7% with it), the rows' split and the gradients' join;
 *   - a hypernetwork-only pass (no rows) runs without the text backward;
 *   - bigG's tokens are CLIP-L's with 0 after each chunk's end token, and an empty negative
 *     prompt's context and pooled part are zeros while its size part is not. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "../models/model_test_util.h"
#include "pass_check.h"
#include "train/prompt.h"
#include "train/sd_cond.h"

#define B 2
#define NV 2 /* embedding vectors */
#define END 999
#define T SDT_PROMPT_TOKENS

typedef struct problem {
    int32_t tokens[B * T];
    clip_override ov[B * NV];
    float *noisy, *target, ts[B];
    sdt_sdxl_sizes sizes[B];
    sdt_pass_shape shape;
} problem;

static void make_problem(sdt_test_rng *rng, sd_runtime *rt, problem *p)
{
    memset(p, 0, sizeof *p);
    int c = rt->cfg.vae.z_channels, h = 4, w = 4;
    p->shape = (sdt_pass_shape){.batch = B, .c = c, .h = h, .w = w, .chunks = 1, .in_c = c, .weighted = false};
    int n = 0;
    for (int b = 0; b < B; b++) {
        int32_t *t = p->tokens + b * T;
        t[0] = END - 1;                              /* start */
        t[1] = 5 + b, t[2] = 0, t[3] = 0, t[4] = 17; /* slots of the embedding at 2 and 3 */
        for (int i = 5; i < T; i++) t[i] = END;      /* CLIP-L pads with the end token */
        for (int r = 0; r < NV; r++) p->ov[n++] = (clip_override){b, 2 + r, r};
        p->ts[b] = (float)(100 + 700 * b);
        p->sizes[b] = (sdt_sdxl_sizes){1024 + 64 * b, 768, 16 * b, 0, 32, 32};
    }
    pass_check_latents(rng, (int64_t)B * c * h * w, &p->noisy, &p->target);
}

static sdt_pass_inputs inputs_of(problem *p)
{
    sdt_pass_inputs in = pass_check_inputs(p->shape, p->tokens, p->ov, B * NV, p->noisy, p->target, p->ts, END);
    in.sizes = p->sizes;
    return in;
}

static void check_gradient(sdt_test_rng *rng, sd_runtime *rt, work_arena *wa, problem *p)
{
    int wl = rt->cfg.clip.width, wg = rt->cfg.clip2.width, width = wl + wg;
    float *rows = mt_alloc((size_t)NV * width * sizeof(float)), *grad = mt_alloc((size_t)NV * width * sizeof(float));
    for (int i = 0; i < NV * width; i++) rows[i] = (float)(0.5 * sdt_test_normal(rng));
    sdt_error error = {0};
    double loss;
    sdt_pass_inputs in = inputs_of(p);
    if (!pass_check_loss(rt, wa, &in, NV, rows, width, 0, grad, &loss, &error)) {
        CHECK(false, "the SDXL pass: %s", error.message);
        return;
    }
    CHECK(isfinite(loss) && loss > 0, "loss %g", loss);
    const char *half[2] = {"clip_l", "clip_g"};
    float *moved = mt_alloc((size_t)NV * width * sizeof(float)), *dir = mt_alloc((size_t)NV * width * sizeof(float));
    for (int k = 0; k < 2; k++) {
        int from = k ? wl : 0, to = k ? width : wl;
        for (int i = 0; i < NV * width; i++) {
            int col = i % width;
            dir[i] = col >= from && col < to ? (float)sdt_test_normal(rng) : 0.0f;
        }
        char part[32];
        snprintf(part, sizeof part, "%s half", half[k]);
        pass_check_direction(rt, wa, &in, NV, rows, width, grad, dir, moved, part, "SDXL");
    }
    /* a hypernetwork-only pass: no rows, no text backward */
    in.n_overrides = 0;
    pass_check_without_rows(rt, wa, &in);
    free(rows), free(grad), free(moved), free(dir);
}

static void check_conditioning(sd_runtime *rt, work_arena *wa, problem *p)
{
    sdt_error error = {0};
    bool zero[B] = {false, true};
    sdt_cond_inputs ci = {.tokens = p->tokens,
                          .batch = B,
                          .chunks = 1,
                          .end_id = END,
                          .sizes = p->sizes,
                          .zero_text = zero,
                          .act_dtype = SDT_F32};
    sdt_arena m;
    sdt_arena_init_measure(&m, rt->be);
    sdt_cond c;
    if (!sdt_cond_forward(rt, &m, &ci, &c, &error) || !work_arena_reserve(wa, rt->be, m.peak, &error) ||
        !sdt_cond_forward(rt, &wa->arena, &ci, &c, &error)) {
        CHECK(false, "the SDXL conditioning: %s", error.message);
        return;
    }
    CHECK(c.sdxl && sdt_cond_y(&c) && c.context.shape[2] == rt->cfg.clip.width + rt->cfg.clip2.width,
          "SDXL conditioning: a y and a context of both widths");
    const int32_t *g = c.tokens_g.data;
    int bad = 0;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++) {
            int32_t want = i <= 5 ? p->tokens[b * T + i] : 0; /* the first end token (5) stays, 0 after it */
            bad += g[b * T + i] != want;
        }
    CHECK(bad == 0, "bigG's tokens: %d ids differ from CLIP-L's with 0 after the end token", bad);
    int64_t per = c.context.shape[1] * c.context.shape[2], adm = c.y.shape[1], pooled = c.text.pooled.shape[1];
    const float *ctx = c.context.data, *y = c.y.data;
    double kept = 0, zeroed = 0, time_part = 0, pool_zeroed = 0;
    for (int64_t i = 0; i < per; i++) kept += fabs(ctx[i]), zeroed += fabs(ctx[per + i]);
    for (int64_t i = 0; i < pooled; i++) pool_zeroed += fabs(y[adm + i]);
    for (int64_t i = pooled; i < adm; i++) time_part += fabs(y[adm + i]);
    CHECK(
        kept > 0 && zeroed == 0 && pool_zeroed == 0 && time_part > 0,
        "an empty negative prompt: context %g (want 0), pooled %g (want 0), sizes %g (want > 0); the prompt's context %g",
        zeroed, pool_zeroed, time_part, kept);
    /* y's size part is the sinusoidal embedding of the sizes, in y's order */
    float want[256];
    int width = (int)(adm - pooled) / 6;
    sdt_sdxl_size_embedding(p->sizes[0].original_height, width, want);
    double diff = 0;
    for (int i = 0; i < width; i++) diff = fmax(diff, fabs(want[i] - y[pooled + i]));
    CHECK(width <= 256 && diff < 1e-6, "y's first size embedding differs from sdt_sdxl_size_embedding by %g", diff);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("train_test_sdxl_pass");
    sdt_backend *be = mt_backend();
    char path[512];
    mt_temp_path(path, sizeof(path), "sdxl-pass");
    sdt_weights *w = mt_make_weights(path, SD_FAMILY_TINY_SDXL, sdt_test_next(&rng), false, false);
    sdt_weights_close(w);
    sd_runtime rt;
    sdt_error error = {0};
    /* the short hash taken on its own thread while the weights load, against GLib's SHA-256 of the file */
    char want[11] = "", got[11] = "";
    gchar *bytes = NULL;
    gsize size = 0;
    if (g_file_get_contents(path, &bytes, &size, NULL)) {
        gchar *hex = g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)bytes, size);
        snprintf(want, sizeof want, "%.10s", hex);
        g_free(hex);
        g_free(bytes);
    }
    if (!sd_runtime_open(&rt, path, be, SDT_F32, SD_PREDICTION_EPSILON, true, &error)) {
        CHECK(false, "opening the tiny SDXL checkpoint: %s", error.message);
    } else {
        problem p;
        make_problem(&rng, &rt, &p);
        work_arena wa = {0};
        check_gradient(&rng, &rt, &wa, &p);
        check_conditioning(&rt, &wa, &p);
        work_arena_release(&wa);
        free(p.noisy), free(p.target);
        double seconds = -1;
        CHECK(sd_runtime_short_hash(&rt, got, &seconds, &error) && want[0] && strcmp(got, want) == 0 && seconds >= 0,
              "the short hash taken alongside the load is '%s', the file's SHA-256 starts '%s' (%s)", got, want,
              error.message);
        sd_runtime_close(&rt);
    }
    unlink(path);
    be->destroy(be);
    return sdt_test_finish("sdxl_pass");
}
