/* test_sdxl_text.c - SDXL's text conditioning from its two encoders (tiny SDXL checkpoint).
 *
 * Two prompts of two chunks each, CLIP-L's chunks padded with the end token and bigG's repadded
 * with 0 (sdt_tokens_pad_after_end), placeholder rows in both chunks: the context is, row by row,
 * [CLIP-L's output, bigG's output] of the encoders run alone; the pooled embedding is bigG's of
 * each prompt's first chunk; the rows' gradients equal the encoders' own backward fed with the
 * split d(context) and d(pooled) placed at the first chunks, and agree with central differences
 * of the whole conditioning (f32, along random directions).
 */
#include <math.h>

#include "clip_text.h"
#include "model_test_util.h"
#include "sdxl_text.h"
#include "sdxl_test_prompts.h"
#include "tokenizer.h"

enum { B = 2, K = 2, T = 77, R = 2, N = B * K };

typedef struct encoders {
    clip_text_model l, g;
    int cl, cg, p;
} encoders;

typedef struct problem {
    int32_t tokens_l[N * T], tokens_g[N * T];
    clip_override ov[4];
    float *rows_l, *rows_g; /* [R, cl], [R, cg] */
    float *dcontext, *dpooled;
} problem;

typedef struct outputs {
    float *context, *pooled, *drows_l, *drows_g;
} outputs;

/* Runs the conditioning forward (and backward when grads); copies what it produced. */
static bool run(const encoders *e, sdt_backend *be, const problem *p, const float *rows_l, const float *rows_g,
                bool grads, outputs *o, sdt_error *error)
{
    sdt_tensor tl = mt_tensor((void *)p->tokens_l, SDT_I32, 2, N, T, 0, 0),
               tg = mt_tensor((void *)p->tokens_g, SDT_I32, 2, N, T, 0, 0);
    sdt_tensor rl = mt_tensor((void *)rows_l, SDT_F32, 2, R, e->cl, 0, 0),
               rg = mt_tensor((void *)rows_g, SDT_F32, 2, R, e->cg, 0, 0);
    sdt_sdxl_text_inputs in = {.tokens_l = &tl,
                               .tokens_g = &tg,
                               .chunks = K,
                               .rows_l = &rl,
                               .rows_g = &rg,
                               .overrides = p->ov,
                               .n_overrides = 4,
                               .act_dtype = SDT_F32};
    sdt_tensor dc = mt_tensor(p->dcontext, SDT_F32, 3, B, K * T, e->cl + e->cg, 0),
               dp = mt_tensor(p->dpooled, SDT_F32, 2, B, e->p, 0, 0);
    o->drows_l = mt_alloc((size_t)R * e->cl * sizeof(float));
    o->drows_g = mt_alloc((size_t)R * e->cg * sizeof(float));
    sdt_tensor dl = mt_tensor(o->drows_l, SDT_F32, 2, R, e->cl, 0, 0),
               dg = mt_tensor(o->drows_g, SDT_F32, 2, R, e->cg, 0, 0);
    sdt_arena meas, arena;
    sdt_sdxl_text_acts acts;
    sdt_arena_init_measure(&meas, be);
    if (!sdt_sdxl_text_forward(&e->l, &e->g, be, &meas, &in, &acts, error) ||
        (grads && !sdt_sdxl_text_backward(&e->l, &e->g, be, &meas, &acts, &dc, &dp, &dl, &dg, error)))
        return false;
    if (!sdt_arena_init(&arena, be, meas.peak))
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "arena of %zu bytes", meas.peak);
    bool ok = sdt_sdxl_text_forward(&e->l, &e->g, be, &arena, &in, &acts, error) &&
              (!grads || sdt_sdxl_text_backward(&e->l, &e->g, be, &arena, &acts, &dc, &dp, &dl, &dg, error));
    if (ok) {
        size_t nc = (size_t)B * K * T * (e->cl + e->cg), np = (size_t)B * e->p;
        o->context = mt_alloc(nc * sizeof(float));
        o->pooled = mt_alloc(np * sizeof(float));
        memcpy(o->context, acts.context.data, nc * sizeof(float));
        memcpy(o->pooled, acts.pooled.data, np * sizeof(float));
        ok = sdt_arena_fits(&arena) || sdt_fail(error, SDT_ERR_INTERNAL, "the measured arena overflowed");
    }
    sdt_arena_release(&arena);
    return ok;
}

static void free_outputs(outputs *o)
{
    free(o->context), free(o->pooled), free(o->drows_l), free(o->drows_g);
}

/* One encoder alone on its tokens: output [N, T, C], pooled [N, P] (bigG), and the rows' gradient from
 * dout [N, T, C] and dpooled_all [N, P] (NULL for CLIP-L). */
static bool encoder_alone(const clip_text_model *m, sdt_backend *be, const int32_t *tokens, const float *rows,
                          const clip_override *ov, const float *dout, const float *dpooled_all, float *out,
                          float *pooled, float *drows, sdt_error *error)
{
    int C = m->cfg.width, P = m->cfg.projection_dim;
    sdt_tensor tok = mt_tensor((void *)tokens, SDT_I32, 2, N, T, 0, 0),
               rows_t = mt_tensor((void *)rows, SDT_F32, 2, R, C, 0, 0);
    sdt_tensor do_t = mt_tensor((void *)dout, SDT_F32, 3, N, T, C, 0),
               dp_t = mt_tensor((void *)dpooled_all, SDT_F32, 2, N, P, 0, 0);
    sdt_tensor dr = mt_tensor(drows, SDT_F32, 2, R, C, 0, 0);
    clip_text_inputs in = {.tokens = &tok, .rows = &rows_t, .overrides = ov, .n_overrides = 4, .act_dtype = SDT_F32};
    sdt_arena meas, arena;
    clip_text_acts acts;
    sdt_arena_init_measure(&meas, be);
    if (!clip_text_forward(m, be, &meas, &in, &acts, error) ||
        !clip_text_backward_pooled(m, be, &meas, &acts, &do_t, P ? &dp_t : NULL, &dr, error))
        return false;
    if (!sdt_arena_init(&arena, be, meas.peak)) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "arena");
    bool ok = clip_text_forward(m, be, &arena, &in, &acts, error) &&
              clip_text_backward_pooled(m, be, &arena, &acts, &do_t, P ? &dp_t : NULL, &dr, error);
    if (ok) memcpy(out, acts.out.data, (size_t)N * T * C * sizeof(float));
    if (ok && P) memcpy(pooled, acts.pooled.data, (size_t)N * P * sizeof(float));
    sdt_arena_release(&arena);
    return ok;
}

static double loss_of(const encoders *e, const problem *p, const outputs *o)
{
    double s = 0;
    for (size_t i = 0; i < (size_t)B * K * T * (e->cl + e->cg); i++) s += (double)p->dcontext[i] * o->context[i];
    for (size_t i = 0; i < (size_t)B * e->p; i++) s += (double)p->dpooled[i] * o->pooled[i];
    return s;
}

static void make_problem(sdt_test_rng *rng, const encoders *e, problem *p)
{
    sdxl_test_chunks(rng, e->l.cfg.vocab, clip_pad_id(&e->g.cfg, e->l.cfg.vocab - 1), N, T, p->tokens_l, p->tokens_g);
    clip_override ov[4] = {{0, 2, 0}, {1, 3, 0}, {2, 1, 0}, {2, 2, 1}};
    memcpy(p->ov, ov, sizeof ov);
    p->rows_l = mt_alloc((size_t)R * e->cl * sizeof(float));
    p->rows_g = mt_alloc((size_t)R * e->cg * sizeof(float));
    sdt_test_fill_normal(rng, p->rows_l, (int64_t)R * e->cl, 0.05);
    sdt_test_fill_normal(rng, p->rows_g, (int64_t)R * e->cg, 0.05);
    p->dcontext = mt_alloc((size_t)B * K * T * (e->cl + e->cg) * sizeof(float));
    p->dpooled = mt_alloc((size_t)B * e->p * sizeof(float));
    sdt_test_fill_normal(rng, p->dcontext, (int64_t)B * K * T * (e->cl + e->cg), 1.0);
    sdt_test_fill_normal(rng, p->dpooled, (int64_t)B * e->p, 1.0);
}

static void check_against_encoders(const encoders *e, sdt_backend *be, const problem *p, const outputs *o)
{
    sdt_error error = {0};
    int cl = e->cl, cg = e->cg, P = e->p, C = cl + cg;
    float *dl = mt_alloc((size_t)N * T * cl * sizeof(float)), *dg = mt_alloc((size_t)N * T * cg * sizeof(float));
    float *dp_all = mt_alloc((size_t)N * P * sizeof(float));
    for (size_t r = 0; r < (size_t)N * T; r++) {
        memcpy(dl + r * cl, p->dcontext + r * C, (size_t)cl * sizeof(float));
        memcpy(dg + r * cg, p->dcontext + r * C + cl, (size_t)cg * sizeof(float));
    }
    for (int b = 0; b < B; b++)
        memcpy(dp_all + (size_t)b * K * P, p->dpooled + (size_t)b * P, (size_t)P * sizeof(float));
    float *out_l = mt_alloc((size_t)N * T * cl * sizeof(float)), *out_g = mt_alloc((size_t)N * T * cg * sizeof(float));
    float *pooled_g = mt_alloc((size_t)N * P * sizeof(float));
    float *drl = mt_alloc((size_t)R * cl * sizeof(float)), *drg = mt_alloc((size_t)R * cg * sizeof(float));
    if (!encoder_alone(&e->l, be, p->tokens_l, p->rows_l, p->ov, dl, NULL, out_l, NULL, drl, &error) ||
        !encoder_alone(&e->g, be, p->tokens_g, p->rows_g, p->ov, dg, dp_all, out_g, pooled_g, drg, &error)) {
        CHECK(false, "the encoders alone: %s", error.message);
    } else {
        double d_ctx = 0, d_pool = 0;
        for (size_t r = 0; r < (size_t)N * T; r++) {
            d_ctx = fmax(d_ctx, mt_max_abs_diff(o->context + r * C, out_l + r * cl, cl));
            d_ctx = fmax(d_ctx, mt_max_abs_diff(o->context + r * C + cl, out_g + r * cg, cg));
        }
        for (int b = 0; b < B; b++)
            d_pool = fmax(d_pool, mt_max_abs_diff(o->pooled + (size_t)b * P, pooled_g + (size_t)b * K * P, P));
        CHECK(d_ctx == 0, "the context is not [CLIP-L, bigG] per position (max diff %.3g)", d_ctx);
        CHECK(d_pool == 0, "the pooled embedding is not bigG's of each prompt's first chunk (max diff %.3g)", d_pool);
        /* chunk 1's pooled output differs: the choice of chunk matters */
        CHECK(mt_max_abs_diff(pooled_g, pooled_g + P, P) > 1e-4,
              "the two chunks pool alike; the test cannot tell them apart");
        double gl = mt_max_abs_diff(o->drows_l, drl, (int64_t)R * cl),
               gg = mt_max_abs_diff(o->drows_g, drg, (int64_t)R * cg);
        printf("rows' gradients against the encoders' own backward: clip_l %.3g, clip_g %.3g\n", gl, gg);
        CHECK(gl <= 1e-6 && gg <= 1e-6, "the rows' gradients differ from the encoders' own backward (%.3g, %.3g)", gl,
              gg);
    }
    free(dl), free(dg), free(dp_all), free(out_l), free(out_g), free(pooled_g), free(drl), free(drg);
}

/* d(loss)/d(rows) along a random direction of both embeddings' rows, by central differences (f32 forward). */
static void check_finite_differences(sdt_test_rng *rng, const encoders *e, sdt_backend *be, const problem *p,
                                     const outputs *o)
{
    sdt_error error = {0};
    int nl = R * e->cl, ng = R * e->cg;
    float *dir = mt_alloc((size_t)(nl + ng) * sizeof(float));
    sdt_test_fill_normal(rng, dir, nl + ng, 1.0);
    double analytic = 0, scale = 0;
    for (int i = 0; i < nl; i++)
        analytic += (double)o->drows_l[i] * dir[i], scale += fabs((double)o->drows_l[i] * dir[i]);
    for (int i = 0; i < ng; i++)
        analytic += (double)o->drows_g[i] * dir[nl + i], scale += fabs((double)o->drows_g[i] * dir[nl + i]);
    const double h = 1e-3;
    double l[2];
    float *rl = mt_alloc((size_t)nl * sizeof(float)), *rg = mt_alloc((size_t)ng * sizeof(float));
    for (int s = 0; s < 2; s++) {
        double sign = s == 0 ? 1 : -1;
        for (int i = 0; i < nl; i++) rl[i] = (float)(p->rows_l[i] + sign * h * dir[i]);
        for (int i = 0; i < ng; i++) rg[i] = (float)(p->rows_g[i] + sign * h * dir[nl + i]);
        outputs q;
        if (!run(e, be, p, rl, rg, false, &q, &error)) {
            CHECK(false, "forward for finite differences: %s", error.message);
            return;
        }
        l[s] = loss_of(e, p, &q);
        free_outputs(&q);
    }
    double fd = (l[0] - l[1]) / (2 * h), rel = fabs(fd - analytic) / fmax(scale, 1e-12);
    printf("conditioning directional derivative: analytic %.6g, central differences %.6g (rel %.3g)\n", analytic, fd,
           rel);
    CHECK(rel <= 1e-2, "the conditioning's row gradient disagrees with finite differences: %.6g vs %.6g", analytic, fd);
    free(dir), free(rl), free(rg);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("models_test_sdxl_text");
    sdt_backend *be = mt_backend();
    char path[512];
    mt_temp_path(path, sizeof(path), "sdxl-text");
    sdt_weights *w = mt_make_weights(path, SD_FAMILY_TINY_SDXL, sdt_test_next(&rng), true, false);
    sdt_error error = {0};
    encoders e;
    clip_config lc, gc;
    if (!clip_config_detect_at(w, CLIP_SLOT_SDXL_L, &lc, &error) || !clip_text_load(&e.l, &lc, w, &error) ||
        !clip_config_detect_at(w, CLIP_SLOT_SDXL_G, &gc, &error) || !clip_text_load(&e.g, &gc, w, &error)) {
        CHECK(false, "loading the tiny SDXL encoders: %s", error.message);
    } else {
        e.cl = lc.width, e.cg = gc.width, e.p = gc.projection_dim;
        problem p;
        make_problem(&rng, &e, &p);
        outputs o;
        if (run(&e, be, &p, p.rows_l, p.rows_g, true, &o, &error)) {
            check_against_encoders(&e, be, &p, &o);
            check_finite_differences(&rng, &e, be, &p, &o);
            free_outputs(&o);
        } else {
            CHECK(false, "the SDXL conditioning: %s", error.message);
        }
        /* the encoders swapped (bigG first) are refused with a sentence */
        sdt_tensor tl = mt_tensor(p.tokens_l, SDT_I32, 2, N, T, 0, 0);
        sdt_sdxl_text_inputs in = {.tokens_l = &tl, .tokens_g = &tl, .chunks = K, .act_dtype = SDT_F32};
        sdt_sdxl_text_acts acts;
        sdt_arena meas;
        sdt_arena_init_measure(&meas, be);
        error.message[0] = 0;
        CHECK(!sdt_sdxl_text_forward(&e.g, &e.l, be, &meas, &in, &acts, &error) && strstr(error.message, "bigG"),
              "swapped encoders were accepted (%s)", error.message);
        in.chunks = 3;
        CHECK(!sdt_sdxl_text_forward(&e.l, &e.g, be, &meas, &in, &acts, &error) && strstr(error.message, "chunks"),
              "a chunk count that does not divide the rows was accepted (%s)", error.message);
        free(p.rows_l), free(p.rows_g), free(p.dcontext), free(p.dpooled);
    }
    sdt_weights_close(w);
    unlink(path);
    be->destroy(be);
    return sdt_test_finish("models_test_sdxl_text");
}
